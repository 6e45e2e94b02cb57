package printable

import "testing"

// A field shown on one line: tabwriter's row and cell ends (\n, \f, \v, \t) and its
// escape character (0xff) escaped too.
func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain café":        "plain café",
		"a\nb\tc":           `a\u000ab\u0009c`,
		"row\fforged\vcell": `row\u000cforged\u000bcell`,
		"\xffesc\x1b[31m":   `\xffesc\u001b[31m`,
		"\u009b2J \u00a0ok": `\u009b2J ` + "\u00a0ok",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// Text that may span lines (a report's message, a stack trace): newline and tab kept,
// what a terminal acts on escaped.
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"plain café\n\tat main.go:1":      "plain café\n\tat main.go:1",
		"\x1b]52;c;ZXZpbA==\x07done":      `\u001b]52;c;ZXZpbA==\u0007done`,
		"ok\rforged\b\x7f":                `ok\u000dforged\u0008\u007f`,
		"\u009b2J\xff":                    `\u009b2J\xff`,
		"\u00a0no-break space is a space": "\u00a0no-break space is a space",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
