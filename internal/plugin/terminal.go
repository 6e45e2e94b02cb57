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
	var out strings.Builder
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1 && !utf8.FullRune(b[i:]):
			t.pending = append([]byte(nil), b[i:]...) // the rest of it comes with the next write
			i = len(b)
			continue
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&out, `\x%02x`, b[i])
		case isControl(r):
			out.WriteString(controlEscape(r))
		default:
			out.Write(b[i : i+size])
		}
		i += size
	}
	if _, err := io.WriteString(t.w, out.String()); err != nil {
		return 0, err
	}
	return len(p), nil
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

// cellText is v as a table cell shows it: on one line, a tab or newline escaped like the
// controls (they would break the columns).
func cellText(v string) string {
	if !strings.ContainsAny(v, "\n\t") {
		return v
	}
	return strings.NewReplacer("\n", controlEscape('\n'), "\t", controlEscape('\t')).Replace(v)
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
