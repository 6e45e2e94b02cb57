package plugin

import (
	"bytes"
	"testing"
)

// A character split between two writes is shown whole; a byte that is not UTF-8, and a
// control, escaped.
func TestTerminalSafeWrites(t *testing.T) {
	for _, tc := range []struct {
		writes [][]byte
		want   string
	}{
		{[][]byte{[]byte("caf\xc3"), []byte("\xa9\n")}, "café\n"},
		{[][]byte{[]byte("\xe2\x82"), []byte("\xac")}, "€"},
		{[][]byte{[]byte("a\xc2"), []byte("\x9b31m")}, `a\u009b31m`}, // CSI, split
		{[][]byte{[]byte("a\xff\x1b[2J\r\tb")}, `a\xff\u001b[2J\u000d` + "\tb"},
		{[][]byte{[]byte("end\xc3")}, `end\xc3`}, // cut short: shown at Flush
	} {
		var out bytes.Buffer
		w := safeWriter(&out)
		for _, b := range tc.writes {
			if n, err := w.Write(b); err != nil || n != len(b) {
				t.Fatalf("%q: Write = %d, %v", b, n, err)
			}
		}
		flush(w)
		if out.String() != tc.want {
			t.Errorf("%q: wrote %q, want %q", tc.writes, out.String(), tc.want)
		}
	}
}
