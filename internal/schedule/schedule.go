// Package schedule is lockedcron's schedule maths: parsing a LockedCronJob's
// schedule and timeZone, and deciding from (Earliest, Now, deadline) which
// occurrence is due, which were missed and when the next one is. It is pure:
// no clock, no client, no logging; every function is a function of its inputs.
//
// Cron parsing is github.com/robfig/cron/v3. This package adds what a
// controller needs on top: user-facing errors, a defined behaviour on
// daylight-saving changes, and a bounded "how many did we miss" computation.
//
// # Time zones and returned times
//
// A Schedule is evaluated in its IANA zone (UTC when timeZone is empty). Every
// time this package returns is in that zone (time.Time.Location() is the
// schedule's zone); compare times with Equal/Before/After, never ==.
//
// # Daylight-saving changes
//
// The behaviour follows cron(8) (Vixie/ISC cron, the cron of most Linux
// distributions), which distinguishes schedules by their hour field:
//
// Fixed-hour schedules (the hour field does not select all 24 hours, e.g.
// "30 2 * * *", "0 9 * * 1-5", "@daily", "0 */2 * * *") are wall-clock
// appointments. Each matching wall-clock time runs exactly once, when the
// zone's wall clock first reaches it:
//
//   - Spring forward (the clock jumps, e.g. America/New_York 2026-03-08
//     01:59:59 EST -> 03:00:00 EDT): a time inside the gap runs at the moment of
//     the jump, i.e. at the first instant after the gap (03:00 EDT for
//     "30 2 * * *"). The day's run is never lost. Several gap times
//     ("*/15 2 * * *") collapse into that single run, and a gap time that
//     coincides with a real matching time after the jump ("0 2,3 * * *" -> 03:00)
//     is one run, not two.
//   - Fall back (the clock repeats, e.g. America/New_York 2026-11-01
//     01:59:59 EDT -> 01:00:00 EST): a time inside the repeated hour runs once,
//     at its first instance (01:30 EDT for "30 1 * * *"); it does not run again
//     at 01:30 EST.
//
// Hourly-or-finer schedules (the hour field selects every hour, e.g.
// "0 * * * *", "*/30 * * * * *", "@hourly", "*/5 * * * 1-5") are intervals:
// they fire at every instant whose wall-clock reading matches, which is what
// robfig/cron does. On spring forward the non-existent times are simply not
// there (New York: "0 * * * *" runs at 01:00 EST then 03:00 EDT, 23 runs that
// day; "30 * * * *" runs 01:30 EST then 03:30 EDT); on fall back the repeated
// hour fires in both passes ("0 * * * *" runs at 01:00 EDT and 01:00 EST, 25 runs
// that day; "*/30 * * * * *" keeps firing every 30 s and never pauses).
//
// robfig/cron alone treats every schedule as an interval, so "30 1 * * *"
// would run twice on a fall-back day and "30 2 * * *" not at all on a
// spring-forward day; both are corrected here for fixed-hour schedules.
//
// "@every <d>" is a pure elapsed-time interval and ignores the zone.
//
// # Plan and the estimate of missed occurrences
//
// Plan looks at the occurrences in (Earliest, Now]. Latest and Due are always
// exact: Latest is found by a galloping binary search on the monotone
// predicate "Next(a) <= Now", which costs O(log(Now − Latest)) calls to Next
// and does not assume the occurrences are evenly spaced ("0 9 * * 1-5",
// "* * * 1 *" seen in July).
//
// Missed is counted one occurrence at a time while that is cheap: up to 1000
// occurrences (countLimit). Beyond that it is estimated and MissedEstimated is
// set. The estimate is Kubernetes' idea (count ≈ elapsed / interval), applied
// per segment so that non-uniform schedules stay close:
//
//   - the first 1000 occurrences are counted exactly; their mean interval is
//     the reference interval;
//   - the rest, (t₁₀₀₀, Latest], is cut into 32 equal segments. A segment with
//     at most 16 occurrences is counted exactly. Otherwise its count is
//     17 + round((last − t₁₇) / interval), where last is the segment's last
//     occurrence (found exactly, as above) and interval is the reference
//     interval if the segment's first 17 occurrences are spaced within 25% of
//     it, else their own mean spacing.
//
// The estimate is exact for evenly spaced schedules (every second for 30 days
// gives exactly 2,592,000, in about 1 ms) and within a few per cent for
// calendar schedules (weekdays only, one month a year). "@every" schedules are
// counted arithmetically and are always exact.
package schedule

import (
	"fmt"
	"strings"
	"time"

	// Embed the IANA database so a timeZone resolves the same way in a
	// distroless image without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// countLimit is how many occurrences Plan counts one by one before it
// estimates the rest.
const countLimit = 1000

// estimateSegments and estimateSamples shape the estimate beyond countLimit.
const (
	estimateSegments = 32
	estimateSamples  = 16
)

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// allHours is the hour bit set that selects every hour of the day.
const allHours = uint64(1)<<24 - 1

// Schedule is a parsed schedule in its time zone. The zero value is not
// usable; get one from Parse. A Schedule is immutable and safe for concurrent use.
type Schedule struct {
	text string
	loc  *time.Location

	// Exactly one of spec and every is set.

	// spec evaluated in loc: robfig's own semantics (interval schedules).
	spec *cron.SpecSchedule
	// naive is spec evaluated in UTC, used on naive wall-clock times for
	// fixed-hour schedules.
	naive *cron.SpecSchedule
	// wallClock selects the fixed-hour (wall-clock appointment) semantics.
	wallClock bool

	every time.Duration
}

// Parse parses spec in the IANA zone tz ("" means UTC): 5-field cron, 6-field
// with leading seconds ("*/10 * * * * *"), Quartz/Spring "?" ("0 0 2 * * ?"),
// descriptors (@yearly, @monthly, @weekly, @daily, @hourly, @every 90s).
// Errors name the problem for a user (e.g. `schedule "x": expected 5 or 6
// fields, found 1`, `timeZone "Mars/Base": unknown time zone`).
// A spec with a CRON_TZ= or TZ= prefix is rejected: the zone belongs in timeZone.
func Parse(spec, tz string) (*Schedule, error) {
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSpace(spec)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("schedule %q: %s", spec, fmt.Sprintf(format, args...))
	}
	switch {
	case text == "":
		return nil, fail("empty")
	case strings.HasPrefix(text, "TZ=") || strings.HasPrefix(text, "CRON_TZ="):
		return nil, fail("a TZ= or CRON_TZ= prefix is not supported; set timeZone instead")
	}

	s := &Schedule{text: text, loc: loc}

	if strings.HasPrefix(text, "@") {
		if d, ok := strings.CutPrefix(text, "@every "); ok {
			every, err := time.ParseDuration(strings.TrimSpace(d))
			if err != nil {
				return nil, fail("@every needs a duration such as 90s, 5m or 1h30m: %q", strings.TrimSpace(d))
			}
			if every < time.Second || every%time.Second != 0 {
				return nil, fail("@every interval must be a whole number of seconds, at least 1s; got %s", every)
			}
			s.every = every
			return s, nil
		}
		parsed, err := parser.Parse(text)
		if err != nil {
			return nil, fail("unknown descriptor (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)")
		}
		return s.setSpec(parsed.(*cron.SpecSchedule)), nil
	}

	fields := strings.Fields(text)
	if len(fields) != 5 && len(fields) != 6 {
		return nil, fail("expected 5 or 6 fields, found %d", len(fields))
	}
	parsed, err := parser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, fail("%s", fieldError(fields, err))
	}
	return s.setSpec(parsed.(*cron.SpecSchedule)), nil
}

func (s *Schedule) setSpec(spec *cron.SpecSchedule) *Schedule {
	inZone := *spec
	inZone.Location = s.loc
	naive := *spec
	naive.Location = time.UTC
	s.spec = &inZone
	s.naive = &naive
	s.wallClock = spec.Hour&allHours != allHours
	return s
}

// fieldError names the field robfig rejected, by re-parsing each field alone.
func fieldError(fields []string, err error) string {
	names := []string{"minute", "hour", "day of month", "month", "day of week"}
	if len(fields) == 6 {
		names = append([]string{"second"}, names...)
	}
	for i, f := range fields {
		probe := make([]string, len(fields))
		for j := range probe {
			probe[j] = "*"
		}
		probe[i] = f
		if _, perr := parser.Parse(strings.Join(probe, " ")); perr != nil {
			return fmt.Sprintf("%s field %q: %v", names[i], f, perr)
		}
	}
	return err.Error()
}

func loadZone(tz string) (*time.Location, error) {
	switch tz {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		// time.LoadLocation("Local") is the controller's zone, not a user's.
		return nil, fmt.Errorf("timeZone %q: not an IANA time zone name (e.g. Europe/Berlin)", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timeZone %q: unknown time zone", tz)
	}
	return loc, nil
}

// String returns the schedule as written (surrounding space trimmed), without
// the zone.
func (s *Schedule) String() string { return s.text }

// Next returns the first occurrence strictly after t, in the schedule's zone,
// or the zero time if the schedule never fires again (e.g. "59 23 31 2 *";
// like robfig/cron, a spec schedule that does not fire within five years of t
// is treated as never firing). For "@every d" it is t+d with t truncated to
// the second (robfig's definition).
func (s *Schedule) Next(t time.Time) time.Time {
	switch {
	case s.every > 0:
		return t.Truncate(time.Second).Add(s.every).In(s.loc)
	case !s.wallClock:
		return zeroOr(s.spec.Next(t), s.loc)
	default:
		w := s.naive.Next(highWater(t.In(s.loc)))
		if w.IsZero() {
			return time.Time{}
		}
		return resolve(w, s.loc)
	}
}

// Upcoming returns up to n occurrences strictly after t (fewer if the
// schedule stops firing).
func (s *Schedule) Upcoming(t time.Time, n int) []time.Time {
	if n <= 0 {
		return nil
	}
	out := make([]time.Time, 0, min(n, 64))
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

func zeroOr(t time.Time, loc *time.Location) time.Time {
	if t.IsZero() {
		return t
	}
	return t.In(loc)
}

// naive returns t's wall-clock reading in its own location, as a UTC time.
func naive(t time.Time) time.Time {
	_, off := t.Zone()
	return t.UTC().Add(time.Duration(off) * time.Second)
}

// highWater returns the latest wall-clock reading shown at or before t (as a
// naive UTC time): t's own reading, or, during a repeated hour after a fall
// back, the reading just before the clock was turned back.
func highWater(t time.Time) time.Time {
	hw := naive(t)
	cur := t
	for range 4 {
		start, _ := cur.ZoneBounds()
		if start.IsZero() || t.Sub(start) > 48*time.Hour {
			break
		}
		cur = start.Add(-time.Nanosecond)
		if w := naive(cur); w.After(hw) {
			hw = w
		}
	}
	return hw
}

// resolve returns the instant a wall-clock appointment w (a naive UTC time)
// runs at in loc: the first instant whose wall clock reads w, or, if w falls
// in a spring-forward gap, the instant the clock jumped over it.
func resolve(w time.Time, loc *time.Location) time.Time {
	i := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	switch nw := naive(i); {
	case nw.Equal(w):
		// w exists; if it exists twice (fall back), take the earlier instance.
		for range 4 {
			start, _ := i.ZoneBounds()
			if start.IsZero() {
				break
			}
			_, off := start.Add(-time.Nanosecond).Zone()
			j := w.Add(-time.Duration(off) * time.Second).In(loc)
			if !j.Before(start) || !naive(j).Equal(w) {
				break
			}
			i = j
		}
		return i
	case nw.Before(w):
		// i is before the gap: the jump is at the end of i's zone period.
		for range 4 {
			_, end := i.ZoneBounds()
			if end.IsZero() {
				break
			}
			i = end
			if !naive(i).Before(w) {
				break
			}
		}
		return i
	default:
		// i is after the gap: the jump is at the start of i's zone period.
		for range 4 {
			start, _ := i.ZoneBounds()
			if start.IsZero() {
				break
			}
			before := start.Add(-time.Nanosecond)
			if naive(before).Before(w) {
				return start
			}
			i = before
		}
		return i
	}
}

// Input is what Plan needs to know about a LockedCronJob at one moment.
type Input struct {
	// Earliest: occurrences at or before this are already handled (the max
	// of creation time, lastScheduleTime and the time the schedule was last
	// changed). An edited schedule therefore never runs retroactively.
	Earliest time.Time
	Now      time.Time
	// StartingDeadline is startingDeadlineSeconds; nil means no deadline. A
	// negative deadline is treated as zero.
	StartingDeadline *time.Duration
}

// Plan is the decision for one reconcile.
type Plan struct {
	// Due is the most recent occurrence in (Earliest, Now] that may still
	// start now (Now-Due <= StartingDeadline, or no deadline); nil if none.
	// Only the most recent occurrence is ever due: after downtime, older ones
	// are missed, never started late.
	Due *time.Time
	// Latest is the most recent occurrence in (Earliest, Now], started or
	// not, so the controller can advance lastScheduleTime past missed ones;
	// nil if none. When Due is set, Latest equals it.
	Latest *time.Time
	// Missed counts the occurrences in (Earliest, Now] that will never
	// start: all of them but Due.
	Missed int64
	// MissedEstimated is true when Missed was estimated rather than
	// counted (more than 1000 occurrences in the window; see the package doc).
	MissedEstimated bool
	// Next is the first occurrence after Now (after Earliest if Earliest
	// is later than Now); zero if the schedule never fires again.
	Next time.Time
}

// Plan decides, for the occurrences in (in.Earliest, in.Now], which one (if
// any) to start now, the most recent one, how many were missed, and the next
// occurrence. All times are in the schedule's zone.
//
// For "@every d" the occurrences are the chain Next(Earliest), +d, +2d, ...:
// the interval is measured from Earliest (creation, last run or schedule change).
func (s *Schedule) Plan(in Input) Plan {
	earliest, now := in.Earliest.In(s.loc), in.Now.In(s.loc)
	var p Plan
	var count int64
	var latest time.Time
	if s.every > 0 {
		latest, count, p.Next = s.planEvery(earliest, now)
	} else {
		latest, count, p.Next, p.MissedEstimated = s.planSpec(earliest, now)
	}
	if count == 0 {
		return p
	}
	p.Latest = &latest
	p.Missed = count
	if in.StartingDeadline == nil || now.Sub(latest) <= max(*in.StartingDeadline, 0) {
		due := latest
		p.Due = &due
		p.Missed--
	}
	return p
}

func (s *Schedule) planEvery(earliest, now time.Time) (latest time.Time, count int64, next time.Time) {
	first := s.Next(earliest)
	if first.After(now) {
		return time.Time{}, 0, first
	}
	count = int64(now.Sub(first)/s.every) + 1
	latest = first.Add(time.Duration(count-1) * s.every)
	return latest, count, latest.Add(s.every)
}

func (s *Schedule) planSpec(earliest, now time.Time) (latest time.Time, count int64, next time.Time, estimated bool) {
	var first time.Time
	t := earliest
	for count < countLimit {
		n := s.Next(t)
		if n.IsZero() || n.After(now) {
			return latest, count, n, false
		}
		if count == 0 {
			first = n
		}
		count++
		latest, t = n, n
	}
	if n := s.Next(t); n.IsZero() || n.After(now) {
		return latest, count, n, false
	}

	// More than countLimit occurrences: find Latest exactly, estimate the rest.
	counted := latest
	latest = s.lastAtOrBefore(counted, now)
	headAvg := counted.Sub(first) / (countLimit - 1)
	return latest, count + s.estimate(counted, latest, headAvg), s.Next(latest), true
}

// estimate returns (approximately) the number of occurrences in (a, b], where
// b is an occurrence. See the package doc: the range is cut into segments;
// each segment is counted exactly if it holds at most estimateSamples
// occurrences, else its count is extrapolated from its first estimateSamples
// occurrences to its last occurrence (found exactly by lastAtOrBefore).
func (s *Schedule) estimate(a, b time.Time, headAvg time.Duration) int64 {
	seg := max((b.Sub(a) / estimateSegments).Truncate(time.Second), time.Second)
	var total int64
	for lo := a; lo.Before(b); {
		hi := lo.Add(seg)
		if hi.After(b) || b.Sub(hi) < seg {
			hi = b
		}
		var first, t time.Time
		n := int64(0)
		for t = lo; n <= estimateSamples; n++ {
			x := s.Next(t)
			if x.IsZero() || x.After(hi) {
				break
			}
			if n == 0 {
				first = x
			}
			t = x
		}
		if n <= estimateSamples {
			total += n // counted exactly
			lo = hi
			continue
		}
		// More than estimateSamples: extrapolate from t (the (samples+1)-th) to the segment's last.
		avg := t.Sub(first) / time.Duration(n-1)
		if headAvg > 0 && avg > headAvg*3/4 && avg < headAvg*5/4 {
			avg = headAvg // same density as the first 1000: use the better-measured interval
		}
		last := t
		if x := s.Next(t); !x.IsZero() && !x.After(hi) {
			last = s.lastAtOrBefore(t, hi)
		}
		total += n + int64((last.Sub(t)+avg/2)/avg)
		lo = hi
	}
	return total
}

// lastAtOrBefore returns the last occurrence in (lo, now], given that there is
// one (Next(lo) <= now), whatever the spacing of the occurrences. It gallops back from now, then bisects, on the
// monotone predicate "Next(a) <= now".
func (s *Schedule) lastAtOrBefore(lo, now time.Time) time.Time {
	fires := func(a time.Time) bool {
		n := s.Next(a)
		return !n.IsZero() && !n.After(now)
	}
	hi := now // invariant: fires(lo), !fires(hi)
	for d := time.Second; now.Sub(lo) > d; d *= 2 {
		a := now.Add(-d)
		if fires(a) {
			lo = a
			break
		}
		hi = a
	}
	// Occurrences are whole seconds apart, so once hi-lo <= 1s the next
	// occurrence after lo is the last one at or before now.
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if fires(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return s.Next(lo)
}
