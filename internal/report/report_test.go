package report

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func full(msg string) Report {
	return Report{
		Outcome: LockLost, Occurrence: "2026-11-30T06:00:00Z", Key: "ns/job", Holder: "c/ns/pod-1",
		HeldBy: "c/ns/pod-0", FencingToken: 42, Attempts: 3, WaitedMs: 1500,
		AcquiredAt: "2026-11-30T06:00:01.000Z", ReleasedAt: "2026-11-30T06:00:09.000Z",
		ExitCode: 143, LockLost: true, Recovered: true, Message: msg,
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	r := full("lock lost")
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	r.V = Version
	if got != r {
		t.Fatalf("%+v\n%+v", got, r)
	}
	if b, _ := Encode(Report{Outcome: Succeeded}); string(b) != `{"v":1,"outcome":"Succeeded"}` {
		t.Fatalf("empty fields not left out: %s", b)
	}
}

func TestEncodeTruncatesMessage(t *testing.T) {
	for _, msg := range []string{
		strings.Repeat("x", 10000),
		strings.Repeat("é", 5000),
		strings.Repeat("\x00<>&\"", 3000), // escapes grow 6×
	} {
		b, err := Encode(full(msg))
		if err != nil || len(b) > MaxBytes || !json.Valid(b) {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
		r, err := Decode(b)
		if err != nil || !strings.HasSuffix(r.Message, "…") || r.Key != "ns/job" || r.ExitCode != 143 {
			t.Fatalf("%v %+v", err, r)
		}
		if len(b) < MaxBytes-64 {
			t.Fatalf("truncated too much: %d bytes", len(b))
		}
	}
}

func TestEncodeHugeFields(t *testing.T) {
	r := full(strings.Repeat("m", 5000))
	r.Holder = strings.Repeat("h", 9000)
	r.Key = strings.Repeat("\x01", 3000)
	b, err := Encode(r)
	if err != nil || len(b) > MaxBytes || !json.Valid(b) {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, in := range []string{"", "nope", `{"v":2,"outcome":"Succeeded"}`, `{"v":1,"outcome":"Maybe"}`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) accepted", in)
		}
	}
}

// FuzzEncode: whatever the strings, Encode yields valid JSON within MaxBytes that
// Decode reads back; only the message (and, for absurd sizes, the free-text fields) may
// be shortened, and then as a prefix followed by "…".
func FuzzEncode(f *testing.F) {
	f.Add("ok", "ns/job", "pod", int64(1), 0)
	f.Add(strings.Repeat("x", 5000), "k", "h", int64(-1), 3)
	f.Add(strings.Repeat("\u2028\x00\"\\", 2000), "{k}", "c/ns/p", int64(1<<62), 255)
	f.Add("\xff\xfe invalid utf8", "\xc3", "", int64(0), -1)
	f.Add(strings.Repeat("é", 3000), strings.Repeat("k", 5000), strings.Repeat("\x01", 2000), int64(7), 70)
	f.Fuzz(func(t *testing.T, msg, key, holder string, fence int64, code int) {
		in := Report{Outcome: Failed, Key: key, Holder: holder, HeldBy: holder, FencingToken: fence, ExitCode: code, Message: msg}
		b, err := Encode(in)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if len(b) > MaxBytes {
			t.Fatalf("%d bytes", len(b))
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON: %q", b)
		}
		out, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if out.Outcome != Failed || out.FencingToken != fence || out.ExitCode != code || out.V != Version {
			t.Fatalf("structure changed: %+v", out)
		}
		valid := utf8.ValidString(msg) && utf8.ValidString(key) && utf8.ValidString(holder)
		if !valid {
			return // json.Marshal replaces invalid bytes; nothing exact to compare
		}
		check := func(name, got, want string) {
			if got == want {
				return
			}
			if p, ok := strings.CutSuffix(got, "…"); !ok || !strings.HasPrefix(want, p) {
				t.Fatalf("%s %q is not a prefix+… of %q", name, got, want)
			}
		}
		check("message", out.Message, msg)
		check("key", out.Key, key)
		check("holder", out.Holder, holder)
		if len(msg)+len(key)+2*len(holder) < 2000 && (out.Message != msg || out.Key != key) {
			t.Fatalf("shortened a small report: %+v", out)
		}
	})
}
