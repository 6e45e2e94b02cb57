// Package printable shows text that others wrote — a job's report (a job can write its
// own termination message), the holder in a tenant's Redis, a tenant's Redis server's
// error text — without the characters a terminal acts on rather than shows: ESC and the
// C1 controls start sequences that retitle the window, rewrite the screen or set the
// clipboard (OSC 52); CR and BS overwrite what is shown. Each is shown as its escape,
// \u001b, which inside a JSON or YAML double-quoted string is the same character's escape.
package printable

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// IsControl: the C0 controls but newline and tab, DEL and the C1 controls.
func IsControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

// IsLineControl is IsControl with newline and tab: what one line (a table cell, a field
// of a form) must not hold either.
func IsLineControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// Escape is how c, a control, is shown: \u001b.
func Escape(c rune) string { return fmt.Sprintf(`\u%04x`, c) }

// WriteEscaped writes b to out with each rune that escape says to escape shown as Escape,
// and each byte that is not UTF-8 as \xff.
func WriteEscaped(out *strings.Builder, b []byte, escape func(rune) bool) {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(out, `\x%02x`, b[i])
		case escape(r):
			out.WriteString(Escape(r))
		default:
			out.Write(b[i : i+size])
		}
		i += size
	}
}

// Text is s with its controls (IsControl) and bytes that are not UTF-8 escaped; newline
// and tab are kept.
func Text(s string) string { return escaped(s, IsControl) }

// OneLine is s with every control escaped, newline and tab included (IsLineControl), and
// bytes that are not UTF-8.
func OneLine(s string) string { return escaped(s, IsLineControl) }

func escaped(s string, escape func(rune) bool) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, escape) {
		return s
	}
	var out strings.Builder
	WriteEscaped(&out, []byte(s), escape)
	return out.String()
}
