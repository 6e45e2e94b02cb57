package report

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func full(msg string) Report {
	return Report{
		Outcome: LockLost, Occurrence: "2026-11-30T06:00:00Z", Key: "ns/job", Holder: "c/ns/pod-1",
		HeldBy: "c/ns/pod-0", FencingToken: 42, Attempts: 3, WaitedMs: 1500,
		AcquiredAt: "2026-11-30T06:00:01.000Z", StartedAt: "2026-11-30T06:00:01.001234567Z", ReleasedAt: "2026-11-30T06:00:09.000Z",
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
	if !reflect.DeepEqual(got, r) {
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
		// The message gives way; the start time (the start lag's source) is kept whole.
		if err != nil || !strings.HasSuffix(r.Message, "…") || r.Key != "ns/job" || r.ExitCode != 143 ||
			r.StartedAt != full("").StartedAt {
			t.Fatalf("%v %+v", err, r)
		}
		if len(b) < MaxBytes-64 {
			t.Fatalf("truncated too much: %d bytes", len(b))
		}
	}
}

// The kubelet keeps of each container's termination message its share of 12 KiB: 12288 /
// (containers + init containers) bytes, the rest cut off. lockwrap's pod has its init
// container and the job's; a service mesh or a secrets agent adds two or four more. Every
// report must survive the cut with six containers, whatever its message, warnings and
// watermarks (a cut one is not JSON and counts as Error, its outcome lost).
func TestSurvivesTheKubeletsShareOfSixContainers(t *testing.T) {
	const share = 12 * 1024 / 6
	for _, msg := range []string{"", strings.Repeat("x", 10000), strings.Repeat("\x00<>&\"", 3000)} {
		r := full(msg)
		r.Warnings = []string{strings.Repeat("w", 300), strings.Repeat("\x01", 300), "redis: no persistence", strings.Repeat("v", 300), "more"}
		r.Watermark = ShortWatermark(strings.Repeat("\x02", 1000))
		r.PreviousWatermark = ShortWatermark(strings.Repeat("\"", 1000))
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b[:min(len(b), share)])
		if err != nil || got.Outcome != r.Outcome || got.ExitCode != r.ExitCode || got.StartedAt != r.StartedAt {
			t.Fatalf("a %d-byte report cut to %d bytes: %v %+v", len(b), share, err, got)
		}
	}
}

// TestSurvivesTheShareOfManyContainers: with more containers than six (a mesh, agents,
// several sidecars) the kubelet's share is smaller than MaxBytes; a report encoded within
// the pod's share (the controller passes it, --report-max-bytes) survives the cut.
func TestSurvivesTheShareOfManyContainers(t *testing.T) {
	for _, containers := range []int{8, 12, 24, 48} {
		share := 12 * 1024 / containers
		r := full(strings.Repeat("x", 10000))
		r.Key = strings.Repeat("k", 512)
		r.Warnings = []string{strings.Repeat("w", 300), "redis: no persistence"}
		b, err := EncodeWithin(r, share)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b[:min(len(b), share)])
		if err != nil || got.Outcome != r.Outcome || got.ExitCode != r.ExitCode || got.FencingToken != r.FencingToken {
			t.Fatalf("%d containers: a %d-byte report cut to %d bytes: %v %+v", containers, len(b), share, err, got)
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
	// Long strings come from repeating a short one: small corpus entries keep the fuzzer fast.
	f.Add("ok", uint16(1), "ns/job", "pod", uint16(1), int64(1), 0)
	f.Add("x", uint16(5000), "k", "h", uint16(1), int64(-1), 3)
	f.Add("\u2028\x00\"\\", uint16(2000), "{k}", "c/ns/p", uint16(1), int64(1<<62), 255)
	f.Add("\xff\xfe invalid utf8", uint16(1), "\xc3", "", uint16(0), int64(0), -1)
	f.Add("é", uint16(3000), "k", "\x01", uint16(2000), int64(7), 70)
	f.Add("m", uint16(100), "kkkkkkkk", "h", uint16(9000), int64(7), 70)
	f.Add("0", uint16(3000), "0", "0", uint16(2000), int64(90), 70) // message left out entirely
	f.Fuzz(func(t *testing.T, msgPart string, msgRep uint16, key, holderPart string, holderRep uint16, fence int64, code int) {
		msg := strings.Repeat(msgPart, int(msgRep%10000))
		holder := strings.Repeat(holderPart, int(holderRep%10000))
		// Keep each input at most 1 MiB (far past the 4096-byte cap) so runs stay fast.
		msg, holder = msg[:min(len(msg), 1<<20)], holder[:min(len(holder), 1<<20)]
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
			if got == want || got == "" { // "": shortened away entirely
				return
			}
			if p, ok := strings.CutSuffix(got, "…"); !ok || !strings.HasPrefix(want, p) {
				t.Fatalf("%s %q is not a prefix+… of %q", name, got, want)
			}
		}
		check("message", out.Message, msg)
		check("key", out.Key, key)
		check("holder", out.Holder, holder)
		in.V = Version
		if whole, _ := json.Marshal(in); len(whole) <= MaxBytes && !reflect.DeepEqual(out, in) {
			t.Fatalf("shortened a report that fit (%d bytes): %+v", len(whole), out)
		}
	})
}

func TestEncodeBoundsWarnings(t *testing.T) {
	r := Report{Outcome: Succeeded, Message: "m"}
	for range 50 {
		r.Warnings = append(r.Warnings, strings.Repeat("w", 1000))
	}
	b, err := Encode(r)
	if err != nil || len(b) > MaxBytes {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	out, err := Decode(b)
	if err != nil || len(out.Warnings) != maxWarnings || len(r.Warnings[0]) != 1000 {
		t.Fatalf("%v: %d warnings; input changed: %v", err, len(out.Warnings), len(r.Warnings[0]) != 1000)
	}
}

// BenchmarkEncodeHuge: a report whose free-text fields are far over the limit (a forged
// or broken holder of 1 MiB of control characters, twice) is shortened in one pass over
// each field's halvings, not by encoding every field again each time.
// go test ./internal/report -run '^$' -bench EncodeHuge -benchmem
func BenchmarkEncodeHuge(b *testing.B) {
	huge := strings.Repeat("\x01", 1<<20)
	r := Report{Outcome: Failed, Key: "k", Holder: huge, HeldBy: huge, Message: huge}
	for b.Loop() {
		if _, err := Encode(r); err != nil {
			b.Fatal(err)
		}
	}
}

// Every text field of a report, this one's and any added later, comes out of Printable
// with its controls escaped; newlines are kept in the message and the watermarks only. The
// names and times are one line: a holder's newline was a row of its own in `kubectl get
// lcj -A` (status.lastHolder.identity is a column).
func TestPrintableEscapesEveryTextField(t *testing.T) {
	multiLine := map[string]bool{"Message": true, "Watermark": true, "PreviousWatermark": true}
	var r Report
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString("a\x1b]52;c;x\x07\nb\u009b")
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"w\r\b"})) // panics for a slice of anything but strings
		case reflect.Int, reflect.Int64, reflect.Bool:
		default:
			// A map, a struct, a pointer may hold text: Printable and this test must learn it.
			t.Fatalf("Report.%s is a %s: fill it here, and escape its text in Printable", v.Type().Field(i).Name, f.Type())
		}
	}
	out := reflect.ValueOf(r.Printable())
	for i := range out.NumField() {
		name := out.Type().Field(i).Name
		switch f := out.Field(i); f.Kind() {
		case reflect.String:
			want := `a\u001b]52;c;x\u0007\u000ab\u009b`
			if multiLine[name] {
				want = `a\u001b]52;c;x\u0007` + "\nb" + `\u009b`
			}
			if got := f.String(); got != want {
				t.Errorf("%s: %q, want %q", name, got, want)
			}
		case reflect.Slice:
			if got := f.Interface().([]string); len(got) != 1 || got[0] != `w\u000d\u0008` {
				t.Errorf("%s: %q", name, got)
			}
		}
	}
	if r.Message != "a\x1b]52;c;x\x07\nb\u009b" || r.Warnings[0] != "w\r\b" {
		t.Errorf("the report itself changed: %q %q", r.Message, r.Warnings)
	}
}
