// Package report holds the wrapper's report: the JSON document lockwrap writes as its
// container's termination message and the controller folds into status. It is the one
// contract between the two sides, so both import it.
package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/lockedcron/lockedcron/internal/printable"
)

// Version is the report format version written in "v".
const Version = 1

// MaxBytes is the most a report takes. The kubelet keeps at most 4096 bytes of a
// termination message, and of each container's at most its share of 12 KiB: 12288 / (the
// pod's containers and init containers), the rest cut off, which leaves no JSON. 2048 is
// the share with six: lockwrap's init container and the job's, and a service mesh's or a
// secrets agent's two each.
const MaxBytes = 2048

// A report too long for MaxBytes keeps at most maxWarnings warnings of maxWarningBytes.
const (
	maxWarnings     = 4
	maxWarningBytes = 256
)

// Outcome is what happened to one occurrence in one pod.
type Outcome string

const (
	Succeeded           Outcome = "Succeeded"
	Failed              Outcome = "Failed"
	SkippedContention   Outcome = "SkippedContention"
	SuppressedDuplicate Outcome = "SuppressedDuplicate"
	// LockLost: the job ran but lockwrap cannot prove it held the lock to the end
	// (renewal lost, or finishing found the lock no longer ours).
	LockLost Outcome = "LockLost"
	// Missed: the pod started after the occurrence's deadline (--not-after:
	// startingDeadlineSeconds, or a blackout that began); the job did not run. Exit 0.
	Missed Outcome = "Missed"
	// Interrupted: lockwrap was signalled (SIGTERM, SIGINT …) before the job started,
	// e.g. during an acquisition or a retry backoff; the job did not run. Exit 70.
	Interrupted Outcome = "Interrupted"
	Error       Outcome = "Error"
)

// Outcomes lists every outcome, in the order status and metrics show them.
var Outcomes = []Outcome{Succeeded, Failed, SkippedContention, SuppressedDuplicate, LockLost, Missed, Interrupted, Error}

// Valid reports whether o is one of Outcomes.
func (o Outcome) Valid() bool {
	for _, k := range Outcomes {
		if o == k {
			return true
		}
	}
	return false
}

// Report is one occurrence's result as seen by the wrapper. Empty fields are left out.
type Report struct {
	V            int     `json:"v"`
	Outcome      Outcome `json:"outcome"`
	Occurrence   string  `json:"occurrence,omitempty"`
	Key          string  `json:"key,omitempty"`
	Holder       string  `json:"holder,omitempty"`
	HeldBy       string  `json:"heldBy,omitempty"`
	FencingToken int64   `json:"fencingToken,omitempty"`
	Attempts     int     `json:"attempts,omitempty"`
	WaitedMs     int64   `json:"waitedMs,omitempty"`
	AcquiredAt   string  `json:"acquiredAt,omitempty"`
	// StartedAt is when the command was started (RFC 3339 with nanoseconds, lockwrap's
	// clock, taken right after the process was created); empty when it never started.
	// StartedAt − occurrence is the run's start lag.
	StartedAt  string `json:"startedAt,omitempty"`
	ReleasedAt string `json:"releasedAt,omitempty"`
	ExitCode   int    `json:"exitCode,omitempty"`
	LockLost   bool   `json:"lockLost,omitempty"`
	Recovered  bool   `json:"recovered,omitempty"`
	// Watermark is the key's new watermark when this run advanced it (at most
	// MaxWatermarkBytes of it: see Watermark's doc); PreviousWatermark is the one the run
	// was given (the key's watermark when it acquired the lock), likewise shortened.
	Watermark         string `json:"watermark,omitempty"`
	PreviousWatermark string `json:"previousWatermark,omitempty"`
	// Warnings name conditions that weaken the guarantee without stopping the run: a
	// Redis that can lose the lock (no persistence, an evicting maxmemory-policy), a
	// ledger entry that could not be recorded.
	Warnings []string `json:"warnings,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// MaxWatermarkBytes is how much of a watermark a report (and status) carries: a longer
// one is cut on a UTF-8 boundary and ends in "…" (Redis and the job keep the whole).
const MaxWatermarkBytes = 256

// ShortWatermark is wm cut to MaxWatermarkBytes (plus "…" when cut).
func ShortWatermark(wm string) string { return Shorten(wm, MaxWatermarkBytes) }

// Shorten cuts s to at most n bytes on a UTF-8 boundary, marking a cut with "…".
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return TruncateRunes(s, n) + "…"
}

// ErrTooLarge is returned when a report does not fit MaxBytes even with an empty message.
var ErrTooLarge = errors.New("report: does not fit the termination message limit")

// Encode marshals r (with V set) into at most MaxBytes of JSON, shortening Message (never
// the structure) when the whole would be too long. Should even an empty message not be
// enough (absurdly long key or holder), the longest of the free-text fields is shortened
// too.
func Encode(r Report) ([]byte, error) { return EncodeWithin(r, MaxBytes) }

// MinBytes is the least EncodeWithin may be given: a report's structure with its free
// text shortened to a few bytes each.
const MinBytes = 256

// EncodeWithin is Encode within max bytes (MinBytes to MaxBytes; outside, the nearer
// bound): the kubelet's share of the pod's termination messages when the pod has more
// containers than six.
func EncodeWithin(r Report, limit int) ([]byte, error) {
	limit = min(MaxBytes, max(limit, MinBytes))
	r.V = Version
	// Encoding never makes a string shorter: over limit of text cannot fit, and is not
	// encoded whole only to find that out.
	text := len(r.Message) + len(r.Key) + len(r.Holder) + len(r.HeldBy) + len(r.Occurrence) + len(r.AcquiredAt) +
		len(r.StartedAt) + len(r.ReleasedAt) + len(r.Watermark) + len(r.PreviousWatermark)
	for _, w := range r.Warnings {
		text += len(w)
	}
	if text <= limit {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if len(b) <= limit {
			return b, nil
		}
	}
	// No part longer than limit can be in the report: those are cut to it at once, so
	// that the rounds below encode at most a few kilobytes (a report of three 1 MiB
	// fields took half a second, and a fuzz run's minimizing of one took minutes).
	msg := TruncateRunes(r.Message, limit)
	r.Message = ""
	for _, f := range []*string{&r.Key, &r.Holder, &r.HeldBy, &r.Occurrence, &r.AcquiredAt, &r.StartedAt, &r.ReleasedAt,
		&r.Watermark, &r.PreviousWatermark} {
		if len(*f) > limit {
			*f = TruncateRunes(*f, limit) + "…"
		}
	}
	// Warnings are short, fixed sentences; should there be many or long ones, keep the
	// first few, each shortened.
	r.Warnings = append([]string(nil), r.Warnings[:min(len(r.Warnings), maxWarnings)]...)
	for i, w := range r.Warnings {
		if len(w) > maxWarningBytes {
			r.Warnings[i] = TruncateRunes(w, maxWarningBytes) + "…"
		}
	}
	base, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	// Still too long without the message: shorten the longest free-text field as encoded
	// (escapes take up to 6 bytes a byte), halving it, until the rest fits, so that a
	// report is always written.
	const ellipsis = "…"
	fields := []*string{&r.Key, &r.Holder, &r.HeldBy, &r.Occurrence, &r.AcquiredAt, &r.StartedAt, &r.ReleasedAt,
		&r.Watermark, &r.PreviousWatermark}
	for i := range r.Warnings {
		fields = append(fields, &r.Warnings[i])
	}
	// Each field's encoded length, kept up to date: encoding every field again on every
	// round made a report of two 1 MiB fields take seconds (a fuzz run found it).
	enc := make([]int, len(fields))
	for i, f := range fields {
		enc[i] = encodedLen(*f)
	}
	for len(base) > limit {
		li := 0
		for i := range fields {
			if enc[i] > enc[li] {
				li = i
			}
		}
		longest := fields[li]
		if len(*longest) == 0 {
			return nil, fmt.Errorf("%w: %d bytes without message", ErrTooLarge, len(base))
		}
		if len(*longest) <= 16 {
			*longest = ""
		} else {
			*longest = TruncateRunes(*longest, len(*longest)/2) + ellipsis
		}
		enc[li] = encodedLen(*longest)
		if base, err = json.Marshal(r); err != nil {
			return nil, err
		}
	}
	// Binary search the longest prefix of msg (on rune boundaries) whose encoding fits;
	// escaping makes the encoded length differ from the raw length.
	lo, hi := 0, len(msg)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		r.Message = TruncateRunes(msg, mid) + ellipsis
		if b, _ := json.Marshal(r); len(b) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	r.Message = TruncateRunes(msg, lo) + ellipsis
	if b, err := json.Marshal(r); err != nil || len(b) <= limit {
		return b, err
	}
	return base, nil // not even "…" fits: leave the message out
}

// encodedLen is the length of s as a JSON string.
func encodedLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// TruncateRunes cuts s to at most n bytes without splitting a UTF-8 sequence (no mark;
// Shorten marks the cut).
func TruncateRunes(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Printable is r with its text as printable shows it: a report is what the job's
// container wrote (a job can write its own termination message), and its text goes on to
// status, Events and logs, where a terminal must not act on it. The message and the
// watermarks keep their newlines and tabs (printable.Text); the names and times are one
// line (printable.OneLine): the holder is a column of `kubectl get lcj -A`, where a
// newline in it was a forged row of another tenant's job.
func (r Report) Printable() Report {
	for _, f := range []*string{&r.Watermark, &r.PreviousWatermark, &r.Message} {
		*f = printable.Text(*f)
	}
	for _, f := range []*string{&r.Occurrence, &r.Key, &r.Holder, &r.HeldBy, &r.AcquiredAt, &r.StartedAt, &r.ReleasedAt} {
		*f = printable.OneLine(*f)
	}
	r.Outcome = Outcome(printable.OneLine(string(r.Outcome)))
	if len(r.Warnings) > 0 {
		w := make([]string, len(r.Warnings))
		for i, s := range r.Warnings {
			w[i] = printable.Text(s)
		}
		r.Warnings = w
	}
	return r
}

// ParseTime parses a time read from a report or from a pod's or a job's annotations (RFC
// 3339, fractional seconds allowed) that status may record: Kubernetes stores a date-time
// of the years 0001–9999 only (once in UTC, as metav1.Time writes it) and refuses a whole
// status write that holds another, so a time outside them — which only a forged report or
// annotation can hold — is an error, as a malformed one is.
func ParseTime(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, err
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return time.Time{}, fmt.Errorf("%s is %s in UTC, outside the years 0001–9999 that a Kubernetes time can hold", v, t.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// cutPrefix begins every report Encode writes: its version and outcome come first.
const cutPrefix = `{"v":1,"outcome":"`

// DecodeCut reads what is left of a report the kubelet cut to its share of the pod's
// termination messages (12 KiB among the pod's containers, some injected by admission
// webhooks or added later, which lockwrap was not told of): its outcome, which Encode
// writes first. It says whether b was such a report: JSON that ends before its end.
func DecodeCut(b []byte) (Report, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(cutPrefix))
	if !ok {
		return Report{}, false
	}
	var whole any
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&whole); !errors.Is(err, io.ErrUnexpectedEOF) {
		return Report{}, false // whole (another message, or one with more after it), or not JSON
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return Report{}, false
	}
	o := Outcome(rest[:end])
	if !o.Valid() {
		return Report{}, false
	}
	return Report{V: Version, Outcome: o}, true
}

// DecodeAny is Decode, or, for a report the kubelet cut, DecodeCut's outcome (cut true).
func DecodeAny(b []byte) (r Report, cut bool, err error) {
	r, err = Decode(b)
	if err != nil {
		if c, ok := DecodeCut(b); ok {
			return c, true, nil
		}
	}
	return r, false, err
}

// Decode parses a termination message. It fails for anything that is not a version-1
// report with a known outcome, so the caller can count it as an Error.
func Decode(b []byte) (Report, error) {
	var r Report
	if len(b) == 0 {
		return r, errors.New("report: empty termination message")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("report: not JSON: %w", err)
	}
	if r.V != Version {
		return r, fmt.Errorf("report: version %d, want %d", r.V, Version)
	}
	if !r.Outcome.Valid() {
		return r, fmt.Errorf("report: unknown outcome %q", r.Outcome)
	}
	return r, nil
}
