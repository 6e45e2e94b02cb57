package report

import (
	"strings"
	"testing"
)

func TestShortWatermark(t *testing.T) {
	if got := ShortWatermark("abc"); got != "abc" {
		t.Fatal(got)
	}
	exact := strings.Repeat("x", MaxWatermarkBytes)
	if got := ShortWatermark(exact); got != exact {
		t.Fatal(len(got))
	}
	// Cut on a rune boundary, then "…".
	got := ShortWatermark(strings.Repeat("é", MaxWatermarkBytes))
	if len(got) > MaxWatermarkBytes+len("…") || !strings.HasSuffix(got, "…") || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("%d bytes %q", len(got), got)
	}
}

// Watermarks of control bytes (6 bytes each in JSON) in both fields, with a long message
// and warnings, still make a report within MaxBytes that decodes.
func TestEncodeWithWatermarks(t *testing.T) {
	wm := ShortWatermark(strings.Repeat("\x01", 1024))
	r := Report{Outcome: Succeeded, Key: "k", Watermark: wm, PreviousWatermark: wm,
		Message: strings.Repeat("m", 3000), Warnings: []string{strings.Repeat("w", 300), "short"}}
	b, err := Encode(r)
	if err != nil || len(b) > MaxBytes {
		t.Fatalf("%d bytes: %v", len(b), err)
	}
	got, err := Decode(b)
	if err != nil || got.Watermark == "" || got.Outcome != Succeeded {
		t.Fatalf("%+v %v", got, err)
	}
}
