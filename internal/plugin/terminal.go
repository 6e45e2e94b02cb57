package plugin

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/lockedcron/lockedcron/internal/printable"
)

// What the plugin prints is partly written by others (package printable says who and
// why it matters), so everything it writes goes through terminalSafe, which shows the
// characters a terminal acts on escaped.

// terminalSafe is a writer that shows controls escaped (printable.Escape) and bytes that are
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
	printable.WriteEscaped(&out, b, printable.IsControl)
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

// escapeJSONControls escapes, in JSON that encoding/json wrote (valid UTF-8, controls
// below 0x20 already escaped), DEL and the C1 controls, which it leaves as they are: the
// same JSON, and YAML made from it can be parsed (a YAML reader refuses them).
func escapeJSONControls(b []byte) []byte {
	return []byte(printable.Text(string(b))) // valid UTF-8: only the controls change
}
