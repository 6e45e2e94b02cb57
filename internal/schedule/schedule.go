// Package schedule is lockedcron's schedule maths: parsing a LockedCronJob's
// schedule and timeZone, and deciding from (Earliest, Now, deadline) which
// occurrence is due, which were missed and when the next one is. It is pure:
// no clock, no client, no logging; every function is a function of its inputs.
//
// Cron parsing is github.com/robfig/cron/v3. This package adds what a
// controller needs on top: user-facing errors, cron(8)'s behaviour on
// daylight-saving changes and for day-of-month/day-of-week, "@every" anchored
// at the Unix epoch, and a bounded "how many did we miss" computation. The
// user-facing reference is docs/schedule.md.
//
// Occurrences are a function of the schedule and zone alone: every contender
// for a lock key, whenever its object was created or resumed, computes the
// same instants. Earliest (see Input) only bounds which ones are considered.
//
// # Time zones and returned times
//
// A Schedule is evaluated in its IANA zone (UTC when timeZone is empty). Every
// time this package returns is in that zone (time.Time.Location() is the
// schedule's zone); compare times with Equal/Before/After, never ==.
//
// # Daylight-saving changes
//
// The behaviour follows cron(8) (Vixie/ISC cron, the cron of Debian and most
// Linux distributions). cron(8) sorts each entry by how its minute and hour
// fields are written (entry.c sets MIN_STAR / HR_STAR when the field begins
// with "*"; cron.c's find_jobs runs "wildcard" and "fixed-time" entries
// differently when the wall clock jumps):
//
// Interval schedules: the minute field or the hour field begins with "*"
// (or "?", robfig's synonym): "* 2 * * *", "*/15 2 * * *", "0 * * * *",
// "0 */2 * * *", "*/5 9-17 * * 1-5", "*/30 * * * * *", "@hourly". They fire
// at every instant whose wall-clock reading matches, which is what robfig/cron
// does. On spring forward the non-existent times are simply not there (New
// York 2026-03-08: "0 * * * *" runs at 01:00 EST then 03:00 EDT, 23 runs that
// day; "*/15 2 * * *" does not run that day); on fall back the repeated hour
// fires in both passes ("0 * * * *" runs at 01:00 EDT and 01:00 EST, 25 runs
// that day; "*/15 1 * * *" runs 8 times; "*/30 * * * * *" keeps firing every
// 30 s and never pauses).
//
// Fixed-time schedules: neither the minute nor the hour field begins with "*"
// ("30 2 * * *", "0 9 * * 1-5", "0 2,3 * * *", "15 0-3 * * *", "0 0 2 * * ?",
// "@daily", "@weekly", "@monthly", "@yearly") are wall-clock appointments.
// Each matching wall-clock time runs exactly once, when the zone's wall clock
// first reaches it:
//
//   - Spring forward (the clock jumps, e.g. America/New_York 2026-03-08
//     01:59:59 EST -> 03:00:00 EDT): a time inside the gap runs at the moment of
//     the jump, i.e. at the first instant after the gap (03:00 EDT for
//     "30 2 * * *"). The day's run is never lost. An occurrence is an instant,
//     so several gap times ("0,30 2 * * *") are one occurrence at the jump, and
//     a gap time that coincides with a real matching time after the jump
//     ("0 2,3 * * *" -> 03:00) is one occurrence, not two (cron(8) would start
//     the job once per missed minute, back to back, at the jump).
//   - Fall back (the clock repeats, e.g. America/New_York 2026-11-01
//     01:59:59 EDT -> 01:00:00 EST): a time inside the repeated hour runs once,
//     at its first instance (01:30 EDT for "30 1 * * *"); it does not run again
//     at 01:30 EST.
//
// Only the first character of the minute and hour fields decides: a list or
// range that happens to select every hour ("0 0-23 * * *") is fixed-time, as
// in cron(8). In 6-field schedules the seconds field plays no part: "*/10 0 2
// * * *" is fixed-time, "0 * 2 * * *" an interval. cron(8)'s own thresholds
// (a jump of at most 5 minutes is treated as a late wake-up, one of more
// than 3 hours as a clock reset) are not reproduced: every transition of the
// zone follows the rule above.
//
// robfig/cron alone treats every schedule as an interval, so "30 1 * * *"
// would run twice on a fall-back day and "30 2 * * *" not at all on a
// spring-forward day; both are corrected here for fixed-time schedules. Only
// robfig's parser and its wall-clock matching (in UTC, on naive readings) are
// used: both kinds of schedule are mapped to instants here, zone period by zone
// period.
//
// # Day of month and day of week
//
// As in cron(8) (crontab(5)): when both the day-of-month and the day-of-week
// fields are restricted, a day matches if either matches ("0 0 1,15 * 1" runs
// on the 1st, the 15th and every Monday); when either begins with "*" (or
// "?"), both must match ("0 0 * * 1" runs on Mondays only). "Restricted" means
// "does not begin with *", so "*/2" counts as unrestricted, as in cron(8):
// "0 0 */2 * 1" runs on Mondays that fall on an odd day of the month
// (robfig/cron, and so Kubernetes' CronJob, would OR it).
//
// # @every
//
// "@every <d>" is a pure elapsed-time interval anchored at the Unix epoch: its
// occurrences are the instants 1970-01-01T00:00:00Z + k·d, whatever the zone,
// the creation or resume time of the object, or the time Next is asked from.
// Every contender of a lock key therefore computes the same instants
// ("@every 7m" fires at the multiples of 420 s since the epoch, which are not
// aligned to the hour). d must be a whole number of seconds, at least 1s.
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
// occurrences (countLimit), so a normal reconcile is exact. Beyond that it is
// computed rather than stepped, and MissedEstimated is set: the first 1000
// are counted, and the rest, (t₁₀₀₀, Latest], is the number of matching
// wall-clock times between the two wall-clock readings, counted
// arithmetically: whole days by "does this day match" times the occurrences
// per day (popcount of the hour, minute and second sets), partial days from
// the bit sets. That is O(days) (a 400-year Gregorian cycle is counted once
// and multiplied) and independent of how dense the schedule is: with the 1000
// counted steps, Plan over a 30-day or 10-year gap takes 0.1-3.5 ms
// (BenchmarkPlanLongGap). Unlike Kubernetes' elapsed/interval estimate it is exact for
// non-uniform schedules too ("0 9 * * 1-5", "*/5 9-17 * * 1-5",
// "* * * 1 *"); it is exact in UTC and fixed-offset zones, and in DST zones
// it differs from the true count only by DST days inside the window: for
// interval schedules a spring-forward gap not balanced by a fall-back in
// the window counts the gap's times (60 for every minute) and an unbalanced
// fall back misses the repeated ones; for fixed-time schedules the gap's
// matching times are counted although they collapse into one run ("*/3 0 2 * * *"
// counts 19 too many per spring-forward day). "@every" schedules are counted
// arithmetically and are always exact (MissedEstimated false).
package schedule

import (
	"fmt"
	"math/bits"
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

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// allHours is the hour bit set that selects every hour of the day.
const (
	allHours    = uint64(1)<<24 - 1
	allMonths   = uint64(1)<<13 - 2 // bits 1–12
	allWeekdays = uint64(1)<<7 - 1  // bits 0–6, Sunday first
)

// Schedule is a parsed schedule in its time zone. The zero value is not
// usable; get one from Parse. A Schedule is immutable and safe for concurrent use.
type Schedule struct {
	text string
	loc  *time.Location

	// Exactly one of spec and every is set.

	// naive is the parsed spec evaluated in UTC, used on naive wall-clock
	// times (see naive()).
	naive *cron.SpecSchedule
	// wallClock selects cron(8)'s fixed-time (wall-clock appointment)
	// semantics: neither the minute nor the hour field begins with "*".
	wallClock bool
	// fires: the spec has an occurrence at all (firesAtAll).
	fires bool

	// every is the period of "@every", whole seconds; its occurrences are
	// the Unix epoch + k·every.
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
		// cron(8)'s entry.c: @hourly is "0 * * * *" (HR_STAR), the others
		// are fixed-time; robfig already marks their day fields as "*".
		return s.setSpec(parsed.(*cron.SpecSchedule), text != "@hourly"), nil
	}

	fields := strings.Fields(text)
	if len(fields) != 5 && len(fields) != 6 {
		return nil, fail("expected 5 or 6 fields, found %d", len(fields))
	}
	parsed, err := parser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, fail("%s", fieldError(fields, err))
	}
	cs := parsed.(*cron.SpecSchedule)
	if len(fields) == 6 {
		fields = fields[1:] // the seconds field plays no part in cron(8)'s rules
	}
	minute, hour, dom, dow := fields[0], fields[1], fields[2], fields[4]
	// Day of month and day of week: cron(8) ANDs them when either begins
	// with "*" (DOM_STAR/DOW_STAR), else ORs them. robfig decides by its own
	// star bit, which "*/2" clears; set it the way cron(8) does.
	cs.Dom = withStar(cs.Dom, starred(dom))
	cs.Dow = withStar(cs.Dow, starred(dow))
	return s.setSpec(cs, !starred(minute) && !starred(hour)), nil
}

// starBit is robfig's marker of a "*" day field (cron.SpecSchedule's bit 63).
const starBit = uint64(1) << 63

// starred reports whether a cron field begins with "*" (or "?", robfig's
// synonym), cron(8)'s MIN_STAR/HR_STAR/DOM_STAR/DOW_STAR test.
func starred(field string) bool {
	return strings.HasPrefix(field, "*") || strings.HasPrefix(field, "?")
}

func withStar(set uint64, star bool) uint64 {
	if star {
		return set | starBit
	}
	return set &^ starBit
}

func (s *Schedule) setSpec(spec *cron.SpecSchedule, fixedTime bool) *Schedule {
	naive := *spec
	naive.Location = time.UTC
	s.naive = &naive
	s.wallClock = fixedTime
	s.fires = firesAtAll(&naive)
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

// Has reports whether t is one of the schedule's occurrences.
func (s *Schedule) Has(t time.Time) bool { return s.Next(t.Add(-time.Nanosecond)).Equal(t) }

// Next returns the first occurrence strictly after t, in the schedule's zone,
// or the zero time if the schedule never fires (e.g. "59 23 31 2 *"). Unlike
// robfig/cron's, it finds occurrences more than five years apart ("0 0 29 2 *"
// across 2100; a 29 February that is a Sunday, 28 or 40 years apart): see
// naiveNext. For "@every d" it is the first instant epoch + k·d strictly after t.
func (s *Schedule) Next(t time.Time) time.Time {
	switch {
	case s.every > 0:
		return time.Unix(s.everyFloor(t)+s.everyStep(), 0).In(s.loc)
	case !s.wallClock:
		return s.nextInterval(t)
	default:
		w := s.naiveNext(highWater(t.In(s.loc)))
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

// nextInterval is Next for interval schedules: the first instant after t
// whose wall-clock reading in the zone matches. It walks the zone's periods
// of constant UTC offset, in each of which the wall clock is t+offset.
// (robfig's own SpecSchedule.Next does this by adding hours in the zone,
// which skips matching times after a fall back of less than an hour, e.g.
// Australia/Lord_Howe's 30 minutes.)
func (s *Schedule) nextInterval(t time.Time) time.Time {
	from := t.In(s.loc) // looking for instants > from
	var n naiveMemo
	// A period per iteration; a zone changes offset a few times a year, so
	// this bound is reached only past the 400 years naiveNext looks ahead.
	for range 1024 {
		first := from.Add(time.Nanosecond)
		_, off := first.Zone()
		end := zoneEnd(first)
		shift := time.Duration(off) * time.Second
		w := n.next(s, from.UTC().Add(shift))
		if w.IsZero() {
			return time.Time{}
		}
		if i := w.Add(-shift); end.IsZero() || i.Before(end) {
			return i.In(s.loc)
		}
		from = end.Add(-time.Nanosecond)
	}
	return time.Time{}
}

// naiveNext is robfig's SpecSchedule.Next (of the naive, UTC, schedule) without its
// five-year horizon: it searches on, five years at a time, through the 400 years after
// which the Gregorian calendar, weekdays included, repeats. Zero means the schedule
// never fires (fires, computed once by Parse, says so without the search).
func (s *Schedule) naiveNext(w time.Time) time.Time {
	if !s.fires {
		return time.Time{}
	}
	// robfig searches the years w.Year() to w.Year()+5: each step starts within the
	// last one's span, so no time is skipped.
	for range 81 {
		if n := s.naive.Next(w); !n.IsZero() {
			return n
		}
		w = w.AddDate(5, 0, 0)
	}
	return time.Time{}
}

// naiveMemo keeps nextInterval's walk from searching the same years once per period of
// its zone: a sparse schedule (a 29 February that is a Sunday) has one occurrence in 28
// years or more, and a zone changes offset twice a year (three times past 2037, see
// zoneEnd). It holds the last full search: no naive time matches in (from, w), and w does
// (zero: none for the 400 years searched, so never).
type naiveMemo struct{ from, w time.Time }

// next is s.naiveNext(a), from the last search where that answers it.
func (m *naiveMemo) next(s *Schedule, a time.Time) time.Time {
	switch {
	case m.from.IsZero():
	case !a.Before(m.from) && (m.w.IsZero() || a.Before(m.w)):
		return m.w
	case a.Before(m.from) && m.from.Sub(a) < 24*365*time.Hour:
		// A period after a fall back starts earlier on the wall clock than the last one:
		// what lies in (a, m.from] is looked at with one robfig search (it covers the
		// years a.Year() to a.Year()+5); after that, m holds.
		if r := s.naive.Next(a); !r.IsZero() && !r.After(m.from) {
			return r
		}
		return m.w
	}
	m.from, m.w = a, s.naiveNext(a)
	return m.w
}

// firesAtAll reports whether a spec schedule has an occurrence at all: a day it fires on
// (its hours, minutes and seconds are never empty). With day-of-month and day-of-week
// ORed (neither starred), any weekday of an allowed month will do. ANDed, a date of an
// allowed month that exists (29 February in leap years) will: over 400 years every date
// falls on every weekday.
func firesAtAll(spec *cron.SpecSchedule) bool {
	if spec.Dom&starBit == 0 && spec.Dow&starBit == 0 {
		return spec.Month&allMonths != 0 && spec.Dow&allWeekdays != 0
	}
	if spec.Dow&allWeekdays == 0 {
		return false
	}
	days := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if spec.Month&(1<<uint(m)) != 0 && spec.Dom&(uint64(1)<<uint(days[m]+1)-2) != 0 {
			return true
		}
	}
	return false
}

// zoneEnd is when t's period of constant UTC offset ends (zero: never), as ZoneBounds
// says, corrected where Go's answer is behind t: beyond its zone table (2037 on) Go ends
// each year's last period at 00:00 UTC on 31 December, also for the instants after it
// up to the new year in the zone, which stopped the walk of nextInterval there. The
// period is then the one two days on, if its offset is t's (it goes on), else it ends
// where that one starts.
func zoneEnd(t time.Time) time.Time {
	_, end := t.ZoneBounds()
	if end.IsZero() || end.After(t) {
		return end
	}
	later := t.Add(48 * time.Hour)
	start, next := later.ZoneBounds()
	_, off := t.Zone()
	if _, loff := later.Zone(); loff == off {
		return next
	}
	if start.After(t) {
		return start
	}
	return later
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
// For "@every d" the occurrences are the instants epoch + k·d in (Earliest,
// Now]: Earliest bounds them but does not anchor them, so two objects created
// at different times agree on every occurrence.
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
	// Unix seconds avoid time.Duration's 292-year limit.
	last := s.everyFloor(now)
	count = (last-first.Unix())/s.everyStep() + 1
	latest = time.Unix(last, 0).In(s.loc)
	return latest, count, latest.Add(s.every)
}

// everyStep is the "@every" period in seconds.
func (s *Schedule) everyStep() int64 { return int64(s.every / time.Second) }

// everyFloor returns the last "@every" occurrence at or before t, in Unix
// seconds: the greatest multiple of the period that is <= t.
func (s *Schedule) everyFloor(t time.Time) int64 {
	// t.Unix() is already floored (Go keeps the nanoseconds in [0, 1e9)), so
	// flooring it to the period is exact for instants before 1970 too.
	step, sec := s.everyStep(), t.Unix()
	q := sec / step
	if sec%step < 0 {
		q--
	}
	return q * step
}

func (s *Schedule) planSpec(earliest, now time.Time) (latest time.Time, count int64, next time.Time, estimated bool) {
	t := earliest
	for count < countLimit {
		n := s.Next(t)
		if n.IsZero() || n.After(now) {
			return latest, count, n, false
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
	return latest, count + s.estimate(counted, latest), s.Next(latest), true
}

// estimate returns the number of occurrences in (a, b] of a spec schedule,
// where a and b are occurrences: the number of matching wall-clock times
// between their wall-clock readings, counted arithmetically day by day (see the
// package doc for where that differs from the true count).
func (s *Schedule) estimate(a, b time.Time) int64 {
	wall := naive
	if s.wallClock {
		wall = highWater
	}
	return naiveCount(s.naive, wall(a.In(s.loc)), wall(b.In(s.loc)))
}

// naiveCount returns how many whole-second naive (UTC) times in (a, b] match spec.
func naiveCount(spec *cron.SpecSchedule, a, b time.Time) int64 {
	if !a.Before(b) {
		return 0
	}
	// The Gregorian calendar (weekdays included) repeats every 400 years, so a
	// zero Earliest (year 1) costs one 400-year pass, not 2000 years of days.
	if years := b.Year() - a.Year(); years > 400 {
		k := years / 400
		mid := a.AddDate(400*k, 0, 0)
		if mid.After(b) {
			k--
			mid = a.AddDate(400*k, 0, 0)
		}
		return int64(k)*naiveCount(spec, a, a.AddDate(400, 0, 0)) + naiveCount(spec, mid, b)
	}
	perDay := int64(popcount(spec.Hour&allHours) * popcount(spec.Minute&all60) * popcount(spec.Second&all60))
	n := uptoInDay(spec, b) - uptoInDay(spec, a)
	day := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, time.UTC)
	last := time.Date(b.Year(), b.Month(), b.Day(), 0, 0, 0, 0, time.UTC)
	for ; day.Before(last); day = day.AddDate(0, 0, 1) {
		if dayMatches(spec, day) {
			n += perDay
		}
	}
	return n
}

const (
	all60 = uint64(1)<<60 - 1
)

// uptoInDay returns how many whole-second naive times in [start of x's day, x] match spec.
func uptoInDay(spec *cron.SpecSchedule, x time.Time) int64 {
	if !dayMatches(spec, x) {
		return 0
	}
	h, m, sec := x.Clock()
	secs := int64(popcount(spec.Second & all60))
	perHour := int64(popcount(spec.Minute&all60)) * secs
	n := int64(popcount(spec.Hour&allHours&(1<<uint(h)-1))) * perHour
	if spec.Hour&(1<<uint(h)) != 0 {
		n += int64(popcount(spec.Minute&all60&(1<<uint(m)-1))) * secs
		if spec.Minute&(1<<uint(m)) != 0 {
			n += int64(popcount(spec.Second & all60 & (1<<uint(sec+1) - 1)))
		}
	}
	return n
}

// dayMatches is robfig's rule on the star bits Parse set the cron(8) way: if
// day-of-month or day-of-week begins with "*" (or "?"), both must match, else
// either.
func dayMatches(spec *cron.SpecSchedule, d time.Time) bool {
	if spec.Month&(1<<uint(d.Month())) == 0 {
		return false
	}
	dom := spec.Dom&(1<<uint(d.Day())) != 0
	dow := spec.Dow&(1<<uint(d.Weekday())) != 0
	if spec.Dom&starBit != 0 || spec.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

func popcount(x uint64) int { return bits.OnesCount64(x) }

// LatestIn returns the latest occurrence in (lo, hi], if there is one, without stepping
// through the occurrences before it: O(log((hi-lo)/1s)) calls to Next however dense the
// schedule. Blackout windows use it to find a window that opened before t and is still open.
func (s *Schedule) LatestIn(lo, hi time.Time) (time.Time, bool) {
	if first := s.Next(lo); first.IsZero() || first.After(hi) {
		return time.Time{}, false
	}
	return s.lastAtOrBefore(lo, hi), true
}

// lastAtOrBefore returns the last occurrence in (lo, now], given that there is
// one (Next(lo) <= now), whatever the spacing of the occurrences.
func (s *Schedule) lastAtOrBefore(lo, now time.Time) time.Time {
	return lastAtOrBefore(s.Next, lo, now)
}

// lastAtOrBefore is Schedule.lastAtOrBefore for the schedule whose Next is next. It gallops
// back from now, then bisects, on the monotone predicate "next(a) <= now": at most
// 2·log2((now-lo)/1s) + 2 calls to next.
func lastAtOrBefore(next func(time.Time) time.Time, lo, now time.Time) time.Time {
	fires := func(a time.Time) bool {
		n := next(a)
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
	return next(lo)
}

// gapSamples is how many occurrences MinGap looks at: a cron schedule's occurrences are
// the same within every day it fires on (its hours × minutes × seconds), so the closest
// two are within a day, or across the night between two days it fires on; a few hundred
// occurrences cover both for any schedule but one that fires that often anyway.
const gapSamples = 500

// gapTransitions bounds the changes of the clocks MinGap looks around (two a year, in the
// years it looks at).
const gapTransitions = 8

// MinGap is the shortest time between two consecutive occurrences after from (@every:
// its period), or 0 when the schedule fires less than twice. A change of the clocks can
// bring two occurrences closer than any other two (`30 * * * *` in Australia/Lord_Howe
// fires 30 minutes apart when the clock is set back half an hour): the occurrences
// around each change of the zone's offset in the four years after from are looked at too.
func (s *Schedule) MinGap(from time.Time) time.Duration {
	if s.every > 0 {
		return s.every
	}
	gap := s.minGapFrom(from, time.Time{})
	t := from.In(s.loc)
	for range gapTransitions {
		_, change := t.ZoneBounds()
		if change.IsZero() || change.After(from.AddDate(4, 0, 0)) {
			break
		}
		// Clocks move by at most a few hours: the two occurrences they bring together are
		// the last before the change and the first after. Two windows, at most gapSamples
		// each: a few hours for a schedule that fires every minute, a day for one that
		// fires twice a day (a daily one's are in the samples after from).
		for _, w := range []time.Duration{4 * time.Hour, 26 * time.Hour} {
			if g := s.minGapFrom(change.Add(-w), change.Add(w)); g > 0 && (gap == 0 || g < gap) {
				gap = g
			}
		}
		t = change
	}
	return gap
}

// minGapFrom is the shortest time between consecutive occurrences after from, among at
// most gapSamples of them, and none after until (zero: 400 years on).
func (s *Schedule) minGapFrom(from, until time.Time) time.Duration {
	var gap time.Duration
	// Past 400 years the calendar repeats: a schedule that fires every 28 years or so
	// (a 29 February that is a Sunday) has shown its gaps by then.
	if horizon := from.AddDate(400, 0, 0); until.IsZero() || until.After(horizon) {
		until = horizon
	}
	prev := s.Next(from)
	for i := 1; i < gapSamples && !prev.IsZero(); i++ {
		next := s.Next(prev)
		if next.IsZero() || next.After(until) {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}
