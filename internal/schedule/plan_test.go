package schedule

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// plan is Plan with times as RFC 3339 strings in their own zone ("" for nil/zero), for readable diffs.
type plan struct {
	Due, Latest     string
	Missed          int64
	MissedEstimated bool
	Next            string
}

func show(p Plan) plan {
	s := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Format(time.RFC3339Nano)
	}
	next := ""
	if !p.Next.IsZero() {
		next = p.Next.Format(time.RFC3339Nano)
	}
	return plan{s(p.Due), s(p.Latest), p.Missed, p.MissedEstimated, next}
}

func TestPlan(t *testing.T) {
	T := topOfTheHour() // 2026-05-19T10:00:00Z, a Tuesday
	at := deltaTimeAfterTopOfTheHour
	f := func(t time.Time) string { return t.Format(time.RFC3339Nano) }

	testCases := []struct {
		name     string
		spec, tz string
		earliest time.Time
		now      time.Time
		deadline *time.Duration
		want     plan
	}{
		{name: "nothing yet", spec: "0 * * * *", earliest: at(10 * time.Second), now: at(30 * time.Minute),
			want: plan{Next: f(at(time.Hour))}},
		{name: "one due", spec: "0 * * * *", earliest: at(-10 * time.Minute), now: at(5 * time.Minute),
			want: plan{Due: f(T), Latest: f(T), Next: f(at(time.Hour))}},
		{name: "occurrence exactly at Now is due (inclusive)", spec: "0 * * * *", earliest: at(-30 * time.Minute), now: T,
			want: plan{Due: f(T), Latest: f(T), Next: f(at(time.Hour))}},
		{name: "occurrence exactly at Earliest is already handled (exclusive)", spec: "0 * * * *", earliest: T, now: at(30 * time.Minute),
			want: plan{Next: f(at(time.Hour))}},
		{name: "Earliest == Now on an occurrence", spec: "0 * * * *", earliest: T, now: T,
			want: plan{Next: f(at(time.Hour))}},
		{name: "Earliest == Now between occurrences", spec: "0 * * * *", earliest: at(time.Minute), now: at(time.Minute),
			want: plan{Next: f(at(time.Hour))}},
		{name: "Earliest after Now (skewed clock): nothing due, next after Earliest", spec: "0 * * * *", earliest: at(2 * time.Hour), now: at(30 * time.Minute),
			want: plan{Next: f(at(3 * time.Hour))}},
		{name: "downtime, no deadline: the most recent runs, the rest are missed", spec: "0 * * * *", earliest: at(-time.Second), now: at(3*time.Hour + 5*time.Minute),
			want: plan{Due: f(at(3 * time.Hour)), Latest: f(at(3 * time.Hour)), Missed: 3, Next: f(at(4 * time.Hour))}},
		{name: "downtime, within deadline", spec: "0 * * * *", earliest: at(-time.Second), now: at(3*time.Hour + 5*time.Minute), deadline: dur(10 * time.Minute),
			want: plan{Due: f(at(3 * time.Hour)), Latest: f(at(3 * time.Hour)), Missed: 3, Next: f(at(4 * time.Hour))}},
		{name: "downtime, too late for the deadline: nothing due, all missed", spec: "0 * * * *", earliest: at(-time.Second), now: at(3*time.Hour + 5*time.Minute), deadline: dur(2 * time.Minute),
			want: plan{Latest: f(at(3 * time.Hour)), Missed: 4, Next: f(at(4 * time.Hour))}},
		{name: "deadline is inclusive", spec: "0 * * * *", earliest: at(-time.Second), now: at(2 * time.Minute), deadline: dur(2 * time.Minute),
			want: plan{Due: f(T), Latest: f(T), Next: f(at(time.Hour))}},
		{name: "deadline one nanosecond short", spec: "0 * * * *", earliest: at(-time.Second), now: at(2*time.Minute + 1), deadline: dur(2 * time.Minute),
			want: plan{Latest: f(T), Missed: 1, Next: f(at(time.Hour))}},
		{name: "zero deadline: only exactly on time", spec: "0 * * * *", earliest: at(-time.Second), now: T, deadline: dur(0),
			want: plan{Due: f(T), Latest: f(T), Next: f(at(time.Hour))}},
		{name: "zero deadline: a nanosecond late is missed", spec: "0 * * * *", earliest: at(-time.Second), now: at(1), deadline: dur(0),
			want: plan{Latest: f(T), Missed: 1, Next: f(at(time.Hour))}},
		{name: "negative deadline behaves as zero", spec: "0 * * * *", earliest: at(-time.Second), now: at(1), deadline: dur(-time.Hour),
			want: plan{Latest: f(T), Missed: 1, Next: f(at(time.Hour))}},
		{name: "6 fields, every 10 seconds", spec: "*/10 * * * * *", earliest: T, now: at(35 * time.Second),
			want: plan{Due: f(at(30 * time.Second)), Latest: f(at(30 * time.Second)), Missed: 2, Next: f(at(40 * time.Second))}},
		{name: "quartz ?", spec: "0 0 2 * * ?", earliest: at(-24 * time.Hour), now: at(18 * time.Hour),
			want: plan{Due: "2026-05-20T02:00:00Z", Latest: "2026-05-20T02:00:00Z", Missed: 1, Next: "2026-05-21T02:00:00Z"}},
		{name: "@hourly", spec: "@hourly", earliest: at(-90 * time.Minute), now: at(time.Minute),
			want: plan{Due: f(T), Latest: f(T), Missed: 1, Next: f(at(time.Hour))}},
		// T is a multiple of 90 s since the Unix epoch, so T+90s, T+180s, ... are @every 90s occurrences.
		{name: "@every 90s: epoch multiples in (Earliest, Now]", spec: "@every 90s", earliest: T, now: at(5 * time.Minute),
			want: plan{Due: f(at(270 * time.Second)), Latest: f(at(270 * time.Second)), Missed: 2, Next: f(at(6 * time.Minute))}},
		{name: "@every 90s: Earliest off the grid does not shift the occurrences", spec: "@every 90s", earliest: at(20 * time.Second), now: at(5 * time.Minute),
			want: plan{Due: f(at(270 * time.Second)), Latest: f(at(270 * time.Second)), Missed: 2, Next: f(at(6 * time.Minute))}},
		{name: "@every 90s: fractional Earliest", spec: "@every 90s", earliest: at(500 * time.Millisecond), now: at(95 * time.Second),
			want: plan{Due: f(at(90 * time.Second)), Latest: f(at(90 * time.Second)), Next: f(at(180 * time.Second))}},
		{name: "@every 90s: fractional Now", spec: "@every 90s", earliest: at(-time.Second), now: at(90*time.Second - 1), deadline: dur(2 * time.Minute),
			want: plan{Due: f(T), Latest: f(T), Next: f(at(90 * time.Second))}},
		// 10:00Z is 120 s past a multiple of 420 s: occurrences at 09:58, 10:05, ..., 10:54, 11:01.
		{name: "@every 7m: a period that does not divide the hour", spec: "@every 7m", earliest: at(3*time.Minute + 10*time.Second), now: at(time.Hour), deadline: dur(10 * time.Minute),
			want: plan{Due: f(at(54 * time.Minute)), Latest: f(at(54 * time.Minute)), Missed: 7, Next: f(at(61 * time.Minute))}},
		{name: "@every 7m: deadline passed", spec: "@every 7m", earliest: at(3*time.Minute + 10*time.Second), now: at(time.Hour), deadline: dur(5 * time.Minute),
			want: plan{Latest: f(at(54 * time.Minute)), Missed: 8, Next: f(at(61 * time.Minute))}},
		{name: "@every 90s: not yet", spec: "@every 90s", earliest: T, now: at(89 * time.Second),
			want: plan{Next: f(at(90 * time.Second))}},
		{name: "@every 90s: exactly at Now", spec: "@every 90s", earliest: T, now: at(90 * time.Second), deadline: dur(0),
			want: plan{Due: f(at(90 * time.Second)), Latest: f(at(90 * time.Second)), Next: f(at(180 * time.Second))}},
		{name: "@every 1s for 30 days is exact and not estimated", spec: "@every 1s", earliest: T, now: at(30 * 24 * time.Hour), deadline: dur(10 * time.Second),
			want: plan{Due: f(at(30 * 24 * time.Hour)), Latest: f(at(30 * 24 * time.Hour)), Missed: 30*24*3600 - 1, Next: f(at(30*24*time.Hour + time.Second))}},
		{name: "never fires", spec: "59 23 31 2 *", earliest: at(-365 * 24 * time.Hour), now: T,
			want: plan{}},
		{name: "never fires, with a deadline", spec: "0 0 30 2 *", earliest: at(-time.Hour), now: T, deadline: dur(time.Minute),
			want: plan{}},
		{name: "weekdays: nothing over the weekend", spec: "0 9 * * 1-5", earliest: mustTime("2026-05-22T09:00:00Z"), now: mustTime("2026-05-25T08:00:00Z"),
			want: plan{Next: "2026-05-25T09:00:00Z"}},
		{name: "weekdays: Monday due after the weekend", spec: "0 9 * * 1-5", earliest: mustTime("2026-05-22T09:00:00Z"), now: mustTime("2026-05-25T09:30:00Z"),
			want: plan{Due: "2026-05-25T09:00:00Z", Latest: "2026-05-25T09:00:00Z", Next: "2026-05-26T09:00:00Z"}},
		{name: "zone: times come back in the schedule's zone", spec: "0 9 * * *", tz: "Europe/Berlin", earliest: mustTime("2026-05-19T06:00:00Z"), now: mustTime("2026-05-19T07:01:00Z"),
			want: plan{Due: "2026-05-19T09:00:00+02:00", Latest: "2026-05-19T09:00:00+02:00", Next: "2026-05-20T09:00:00+02:00"}},
		{name: "DST spring: the gap run is due at the jump", spec: "30 2 * * *", tz: "America/New_York", earliest: mustTime("2026-03-07T02:30:00-05:00"), now: mustTime("2026-03-08T03:00:30-04:00"), deadline: dur(time.Minute),
			want: plan{Due: "2026-03-08T03:00:00-04:00", Latest: "2026-03-08T03:00:00-04:00", Next: "2026-03-09T02:30:00-04:00"}},
		{name: "DST fall: no second run in the repeated hour", spec: "30 1 * * *", tz: "America/New_York", earliest: mustTime("2026-11-01T01:30:00-04:00"), now: mustTime("2026-11-01T01:45:00-05:00"),
			want: plan{Next: "2026-11-02T01:30:00-05:00"}},
		{name: "DST fall: hourly runs in the second pass", spec: "0 * * * *", tz: "America/New_York", earliest: mustTime("2026-11-01T01:00:00-04:00"), now: mustTime("2026-11-01T01:00:10-05:00"),
			want: plan{Due: "2026-11-01T01:00:00-05:00", Latest: "2026-11-01T01:00:00-05:00", Next: "2026-11-01T02:00:00-05:00"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.tz)
			got := show(s.Plan(Input{Earliest: tc.earliest, Now: tc.now, StartingDeadline: tc.deadline}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanScheduleEdit: the schedule was "0 * * * *" and last ran at T; at T+20m it is
// changed to "15 * * * *". The controller passes Earliest = max(creation,
// lastScheduleTime, change time) = T+20m, so T+15m (an occurrence of the NEW schedule
// between the last run and the change) never runs retroactively.
func TestPlanScheduleEdit(t *testing.T) {
	T := topOfTheHour()
	lastRun, changed := T, T.Add(20*time.Minute)
	s := mustParse(t, "15 * * * *", "")
	earliest := changed // max(lastRun, changed)
	if lastRun.After(earliest) {
		earliest = lastRun
	}
	got := show(s.Plan(Input{Earliest: earliest, Now: T.Add(25 * time.Minute)}))
	want := plan{Next: "2026-05-19T11:15:00Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("right after the edit (-want +got):\n%s", diff)
	}
	got = show(s.Plan(Input{Earliest: earliest, Now: T.Add(75*time.Minute + 3*time.Second), StartingDeadline: dur(time.Minute)}))
	want = plan{Due: "2026-05-19T11:15:00Z", Latest: "2026-05-19T11:15:00Z", Next: "2026-05-19T12:15:00Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first occurrence of the new schedule (-want +got):\n%s", diff)
	}
}

// countExactly counts occurrences in (e, n] one by one (the reference for the estimate).
func countExactly(s *Schedule, e, n time.Time) (count int64, latest time.Time) {
	for t := s.Next(e); !t.IsZero() && !t.After(n); t = s.Next(t) {
		count++
		latest = t
	}
	return count, latest
}

func TestPlanManyMissed(t *testing.T) {
	testCases := []struct {
		name, spec, tz string
		earliest, now  time.Time
		// exact count expected from the estimate; otherwise within tolerance (relative).
		exact     bool
		tolerance float64
	}{
		{name: "every second for 30 days", spec: "* * * * * *", earliest: topOfTheHour(), now: topOfTheHour().Add(30*24*time.Hour + 500*time.Millisecond), exact: true},
		{name: "every 10s for 30 days, ragged ends", spec: "*/10 * * * * *", earliest: topOfTheHour().Add(3 * time.Second), now: topOfTheHour().Add(30*24*time.Hour + 7*time.Second), exact: true},
		{name: "every minute, Berlin, over both DST changes", spec: "* * * * *", tz: "Europe/Berlin", earliest: mustTime("2026-01-01T00:00:00Z"), now: mustTime("2026-12-31T00:00:00Z"), exact: true},
		{name: "weekdays at 9 for 10 years", spec: "0 9 * * 1-5", tz: "America/New_York", earliest: mustTime("2016-01-01T00:00:00Z"), now: mustTime("2026-05-23T12:00:00Z"), exact: true},
		{name: "every minute in January only, seen in July", spec: "* * * 1 *", earliest: mustTime("2023-01-01T00:00:00Z"), now: mustTime("2026-07-15T00:00:00Z"), exact: true},
		{name: "business hours, every 5 minutes", spec: "*/5 9-17 * * 1-5", tz: "Europe/Berlin", earliest: mustTime("2025-01-01T00:00:00Z"), now: mustTime("2026-05-23T12:00:00Z"), exact: true},
		// Fixed-time: the wall-clock count includes the 20 times of each spring-forward
		// gap, which collapse into one run at 03:00: 2 x 19 too many, 0.3%.
		{name: "fixed-time seconds schedule, gap collapse", spec: "*/3 0 2 * * *", tz: "America/New_York", earliest: mustTime("2025-01-01T00:00:00Z"), now: mustTime("2026-11-02T00:00:00Z"), tolerance: 0.01},
		// Interval (minute field "*"): the 1200 times of each spring-forward gap do not
		// exist, and New York repeats 01:xx, not 02:xx: 2 x 1200 too many, 0.3%.
		{name: "interval seconds schedule, unbalanced gap", spec: "*/3 * 2 * * *", tz: "America/New_York", earliest: mustTime("2025-01-01T00:00:00Z"), now: mustTime("2026-11-02T00:00:00Z"), tolerance: 0.01},
		// Interval in Berlin: the spring gap and the autumn repeat are both 02:xx and balance.
		{name: "interval, balanced DST days", spec: "*/5 2 * * *", tz: "Europe/Berlin", earliest: mustTime("2026-01-01T00:00:00Z"), now: mustTime("2026-12-31T00:00:00Z"), exact: true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.tz)
			start := time.Now() // only to report the cost, never as schedule input
			p := s.Plan(Input{Earliest: tc.earliest, Now: tc.now})
			elapsed := time.Since(start)
			count, latest := countExactly(s, tc.earliest, tc.now)
			if p.Latest == nil || !p.Latest.Equal(latest) || p.Due == nil || !p.Due.Equal(latest) {
				t.Fatalf("Latest = %v, Due = %v, want both exactly %v", p.Latest, p.Due, latest)
			}
			if want := s.Next(latest); !p.Next.Equal(want) {
				t.Errorf("Next = %v, want %v", p.Next, want)
			}
			if !p.MissedEstimated {
				t.Errorf("MissedEstimated = false with %d occurrences", count)
			}
			got := p.Missed + 1 // + Due
			rel := math.Abs(float64(got-count)) / float64(count)
			t.Logf("occurrences: exact %d, estimated %d (%.3f%% off); Plan took %v", count, got, 100*rel, elapsed)
			if tc.exact && got != count {
				t.Errorf("estimated %d occurrences, want exactly %d", got, count)
			}
			if !tc.exact && rel > tc.tolerance {
				t.Errorf("estimated %d occurrences, exact %d: %.2f%% off, want <= %.2f%%", got, count, 100*rel, 100*tc.tolerance)
			}
		})
	}
}

// TestPlanFromYearOne: a zero Earliest must neither loop for ever nor overflow.
func TestPlanFromYearOne(t *testing.T) {
	T := topOfTheHour()
	yearly := mustParse(t, "0 0 1 1 *", "")
	p := yearly.Plan(Input{Now: T})
	if want := 2025; p.Missed+1 != int64(want) || !p.Latest.Equal(mustTime("2026-01-01T00:00:00Z")) {
		t.Errorf("yearly from year 1: %d occurrences, latest %v; want %d, 2026-01-01", p.Missed+1, p.Latest, want)
	}
	minutely := mustParse(t, "* * * * *", "")
	p = minutely.Plan(Input{Now: T, StartingDeadline: dur(time.Minute)})
	if want := (T.Unix() - (time.Time{}).Unix()) / 60; p.Missed+1 != want || !p.Due.Equal(T) || !p.MissedEstimated {
		t.Errorf("every minute from year 1: %d occurrences, due %v, estimated %v; want %d, %v, true", p.Missed+1, p.Due, p.MissedEstimated, want, T)
	}
	every := mustParse(t, "@every 1m", "")
	p = every.Plan(Input{Now: T, StartingDeadline: dur(time.Minute)})
	if want := (T.Unix() - (time.Time{}).Unix()) / 60; p.Missed+1 != want || !p.Due.Equal(T) || p.MissedEstimated {
		t.Errorf("@every 1m from year 1: %d occurrences, due %v, estimated %v; want %d, %v, false", p.Missed+1, p.Due, p.MissedEstimated, want, T)
	}
}

// TestPlanCountsExactlyUpToTheLimit: at most countLimit occurrences are counted, not estimated.
func TestPlanCountsExactlyUpToTheLimit(t *testing.T) {
	s := mustParse(t, "* * * * * *", "")
	T := topOfTheHour()
	for _, n := range []int64{countLimit - 1, countLimit, countLimit + 1, countLimit + 2} {
		p := s.Plan(Input{Earliest: T, Now: T.Add(time.Duration(n) * time.Second), StartingDeadline: dur(0)})
		if p.Missed != n-1 || p.Due == nil || !p.Due.Equal(T.Add(time.Duration(n)*time.Second)) {
			t.Errorf("n=%d: Missed=%d Due=%v", n, p.Missed, p.Due)
		}
		if want := n > countLimit; p.MissedEstimated != want {
			t.Errorf("n=%d: MissedEstimated=%v, want %v", n, p.MissedEstimated, want)
		}
	}
}

func BenchmarkPlanLongGap(b *testing.B) {
	for _, bc := range []struct {
		name, spec, tz string
		gap            time.Duration
	}{
		{"every-second-30d", "* * * * * *", "", 30 * 24 * time.Hour},
		{"every-minute-Berlin-30d", "* * * * *", "Europe/Berlin", 30 * 24 * time.Hour},
		{"every-30s-business-hours-NY-30d", "*/30 * 9-17 * * *", "America/New_York", 30 * 24 * time.Hour},
		{"weekdays-9am-NY-10y", "0 9 * * 1-5", "America/New_York", 10 * 365 * 24 * time.Hour},
		{"every-second-10y", "* * * * * *", "", 10 * 365 * 24 * time.Hour},
		{"hourly-one-due", "0 * * * *", "Europe/Berlin", 61 * time.Minute},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := mustParse(b, bc.spec, bc.tz)
			in := Input{Earliest: topOfTheHour().Add(-time.Second), Now: topOfTheHour().Add(bc.gap + 500*time.Millisecond), StartingDeadline: dur(time.Minute)}
			for b.Loop() {
				s.Plan(in)
			}
		})
	}
}

// An occurrence more than five years after the last one (or after the job's creation) is
// due when it comes, and the plan's next occurrence is it, not "never" (helper-100: the
// controller set ScheduleNeverFires, ran nothing on the day, and never moved on).
func TestPlanBeyondFiveYears(t *testing.T) {
	for _, c := range []struct{ spec, earliest, now, due, next string }{
		{"0 0 29 2 */7", "2026-06-01T00:00:00Z", "2032-02-29T00:00:10Z", "2032-02-29T00:00:00Z", "2060-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2096-02-29T00:00:00Z", "2104-02-29T00:00:10Z", "2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"},
		{"0 0 29 2 */7", "2026-06-01T00:00:00Z", "2031-06-01T00:00:00Z", "", "2032-02-29T00:00:00Z"},
	} {
		s := mustParse(t, c.spec, "")
		p := s.Plan(Input{Earliest: mustTime(c.earliest), Now: mustTime(c.now)})
		due := ""
		if p.Due != nil {
			due = rfc(*p.Due)[0]
		}
		if due != c.due || rfc(p.Next)[0] != c.next || p.Missed != 0 {
			t.Errorf("%q (%s, %s]: due %q, next %v, missed %d; want due %q, next %s, none missed",
				c.spec, c.earliest, c.now, due, p.Next, p.Missed, c.due, c.next)
		}
	}
}
