package plugin

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// What the plugin prints is partly written by others: a job's status (a tenant's job
// reports its own messages), the holder in a tenant's Redis, a tenant's Redis server's
// error text. A terminal acts on some characters rather than showing them — ESC and the
// C1 controls start sequences that retitle the window, rewrite the screen or set the
// clipboard (OSC 52); CR and BS overwrite what is shown —, so everything the plugin
// writes goes through terminalSafe, which shows them escaped.

// controlEscape is how c, a control, is shown: \u001b. Inside a JSON or YAML double-
// quoted string that is the same character's escape, so machine output keeps its meaning.
func controlEscape(c rune) string { return fmt.Sprintf(`\u%04x`, c) }

// isControl: C0 controls but newline and tab, DEL and the C1 controls.
func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

// terminalSafe is a writer that shows controls escaped (controlEscape) and bytes that are
// not UTF-8 as \xff. A character split between two writes is held back until the next
// (Flush writes what is held at the end).
type terminalSafe struct {
	w       io.Writer
	pending []byte
}

func (t *terminalSafe) Write(p []byte) (int, error) {
	b := p
	if len(t.pending) > 0 {
		b = append(t.pending, p...)
		t.pending = nil
	}
	if n := incompleteTail(b); n > 0 {
		t.pending = append([]byte(nil), b[len(b)-n:]...) // the rest of it comes with the next write
		b = b[:len(b)-n]
	}
	var out strings.Builder
	escapeTo(&out, b, isControl)
	if _, err := io.WriteString(t.w, out.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// incompleteTail is how many bytes at b's end begin a UTF-8 character that is not complete
// (0 if none).
func incompleteTail(b []byte) int {
	for n := 1; n <= utf8.UTFMax-1 && n <= len(b); n++ {
		tail := b[len(b)-n:]
		if utf8.RuneStart(tail[0]) {
			if !utf8.FullRune(tail) {
				return n
			}
			return 0
		}
	}
	return 0
}

// escapeTo writes b to out with each rune escape says to escape shown as controlEscape,
// and each byte that is not UTF-8 as \xff.
func escapeTo(out *strings.Builder, b []byte, escape func(rune) bool) {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(out, `\x%02x`, b[i])
		case escape(r):
			out.WriteString(controlEscape(r))
		default:
			out.Write(b[i : i+size])
		}
		i += size
	}
}

// Flush writes what a write left incomplete (escaped: it is not UTF-8).
func (t *terminalSafe) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	var out strings.Builder
	for _, c := range t.pending {
		fmt.Fprintf(&out, `\x%02x`, c)
	}
	t.pending = nil
	_, err := io.WriteString(t.w, out.String())
	return err
}

// safeWriter wraps w in a terminalSafe, once.
func safeWriter(w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	if _, ok := w.(*terminalSafe); ok {
		return w
	}
	return &terminalSafe{w: w}
}

// flush flushes w if it is a terminalSafe.
func flush(w io.Writer) {
	if t, ok := w.(*terminalSafe); ok {
		_ = t.Flush()
	}
}

// oneLine is v as one line shows it (a table cell, a field of a form): every control
// escaped, tab and newline included, and bytes that are not UTF-8. A table's tabwriter
// must not see them either: a form feed or vertical tab would end its row or cell, a
// 0xff is its escape character.
func oneLine(v string) string {
	if !strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == utf8.RuneError }) {
		return v
	}
	var out strings.Builder
	escapeTo(&out, []byte(v), func(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) })
	return out.String()
}

// escapeJSONControls escapes, in JSON that encoding/json wrote (valid UTF-8, controls
// below 0x20 already escaped), DEL and the C1 controls, which it leaves as they are: the
// same JSON, and YAML made from it can be parsed (a YAML reader refuses them).
func escapeJSONControls(b []byte) []byte {
	if !strings.ContainsFunc(string(b), isControl) {
		return b
	}
	var out strings.Builder
	for _, r := range string(b) {
		if isControl(r) {
			out.WriteString(controlEscape(r))
		} else {
			out.WriteRune(r)
		}
	}
	return []byte(out.String())
}
