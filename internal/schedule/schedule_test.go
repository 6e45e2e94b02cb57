package schedule

import (
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"
)

// topOfTheHour is the fixed "now" most tests start from (k8s' CronJob tests use the same idea).
func topOfTheHour() time.Time { return mustTime("2026-05-19T10:00:00Z") }

func deltaTimeAfterTopOfTheHour(d time.Duration) time.Time { return topOfTheHour().Add(d) }

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func mustParse(t testing.TB, spec, tz string) *Schedule {
	t.Helper()
	s, err := Parse(spec, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, tz, err)
	}
	return s
}

func dur(d time.Duration) *time.Duration { return &d }

// rfc formats times in their own location, so comparisons also check the zone offset.
func rfc(ts ...time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		if t.IsZero() {
			out[i] = "zero"
			continue
		}
		out[i] = t.Format(time.RFC3339)
	}
	return out
}

func TestParse(t *testing.T) {
	valid := []struct {
		spec, tz string
		from     string
		want     []string
	}{
		{"0 9 * * 1-5", "", "2026-05-22T09:00:00Z", // a Friday
			[]string{"2026-05-25T09:00:00Z", "2026-05-26T09:00:00Z"}},
		{"  */15  * * * *  ", "", "2026-05-19T10:00:00Z",
			[]string{"2026-05-19T10:15:00Z", "2026-05-19T10:30:00Z"}},
		{"*/10 * * * * *", "", "2026-05-19T10:00:00Z", // 6 fields: leading seconds
			[]string{"2026-05-19T10:00:10Z", "2026-05-19T10:00:20Z"}},
		{"0 0 2 * * ?", "", "2026-05-19T10:00:00Z", // Quartz/Spring '?'
			[]string{"2026-05-20T02:00:00Z", "2026-05-21T02:00:00Z"}},
		{"0 0 * * ?", "", "2026-05-19T10:00:00Z",
			[]string{"2026-05-20T00:00:00Z", "2026-05-21T00:00:00Z"}},
		{"@hourly", "", "2026-05-19T10:00:00Z",
			[]string{"2026-05-19T11:00:00Z", "2026-05-19T12:00:00Z"}},
		{"@daily", "Europe/Berlin", "2026-05-19T10:00:00Z",
			[]string{"2026-05-20T00:00:00+02:00", "2026-05-21T00:00:00+02:00"}},
		{"@weekly", "", "2026-05-19T10:00:00Z",
			[]string{"2026-05-24T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"@monthly", "", "2026-05-19T10:00:00Z",
			[]string{"2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"}},
		{"@yearly", "UTC", "2026-05-19T10:00:00Z",
			[]string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"@every 90s", "", "2026-05-19T10:00:00Z",
			[]string{"2026-05-19T10:01:30Z", "2026-05-19T10:03:00Z"}},
		{"@every 1h30m", "Asia/Tokyo", "2026-05-19T10:00:00Z", // epoch multiples: 10:30Z, 12:00Z
			[]string{"2026-05-19T19:30:00+09:00", "2026-05-19T21:00:00+09:00"}},
		{"@every 7m", "", "2026-05-19T10:00:00Z", // 10:00Z is 120 s past a multiple of 420 s
			[]string{"2026-05-19T10:05:00Z", "2026-05-19T10:12:00Z"}},
		{"0 12 * JAN-MAR mon", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T12:00:00Z", "2026-01-12T12:00:00Z"}},
		{"30 9 * * *", "Asia/Kolkata", "2026-05-19T00:00:00Z",
			[]string{"2026-05-19T09:30:00+05:30", "2026-05-20T09:30:00+05:30"}},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.spec+"/"+tc.tz, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.tz)
			if got := s.String(); got != strings.TrimSpace(tc.spec) {
				t.Errorf("String() = %q, want %q", got, strings.TrimSpace(tc.spec))
			}
			got := rfc(s.Upcoming(mustTime(tc.from), len(tc.want))...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Upcoming (-want +got):\n%s", diff)
			}
		})
	}

	invalid := []struct{ spec, tz, want string }{
		{"x", "", `schedule "x": expected 5 or 6 fields, found 1`},
		{"", "", `schedule "": empty`},
		{"   ", "", `schedule "   ": empty`},
		{"* * * * * * *", "", `schedule "* * * * * * *": expected 5 or 6 fields, found 7`},
		{"0 9 * *", "", `schedule "0 9 * *": expected 5 or 6 fields, found 4`},
		{"61 * * * *", "", `schedule "61 * * * *": minute field "61": end of range (61) above maximum (59): 61`},
		{"0 25 * * *", "", `schedule "0 25 * * *": hour field "25": end of range (25) above maximum (23): 25`},
		{"0 0 0 * *", "", `schedule "0 0 0 * *": day of month field "0": beginning of range (0) below minimum (1): 0`},
		{"* * * * foo", "", `schedule "* * * * foo": day of week field "foo"`},
		{"60 * * * * *", "", `schedule "60 * * * * *": second field "60"`},
		{"@fortnightly", "", `schedule "@fortnightly": unknown descriptor`},
		{"@every", "", `schedule "@every": unknown descriptor`},
		{"@every soon", "", `schedule "@every soon": @every needs a duration such as 90s, 5m or 1h30m: "soon"`},
		{"@every 500ms", "", `schedule "@every 500ms": @every interval must be a whole number of seconds, at least 1s; got 500ms`},
		{"@every 1.5s", "", `schedule "@every 1.5s": @every interval must be a whole number of seconds`},
		{"@every -5m", "", `schedule "@every -5m": @every interval must be a whole number of seconds`},
		{"CRON_TZ=Europe/Berlin 0 9 * * *", "", `schedule "CRON_TZ=Europe/Berlin 0 9 * * *": a TZ= or CRON_TZ= prefix is not supported; set timeZone instead`},
		{"TZ=UTC 0 9 * * *", "UTC", `a TZ= or CRON_TZ= prefix is not supported; set timeZone instead`},
		{"0 9 * * *", "Mars/Base", `timeZone "Mars/Base": unknown time zone`},
		{"0 9 * * *", "europe/berlin_", `timeZone "europe/berlin_": unknown time zone`},
		{"0 9 * * *", "Local", `timeZone "Local": not an IANA time zone name`},
	}
	for _, tc := range invalid {
		t.Run("invalid/"+tc.spec+"/"+tc.tz, func(t *testing.T) {
			s, err := Parse(tc.spec, tc.tz)
			if err == nil {
				t.Fatalf("Parse(%q, %q) = %v, want error containing %q", tc.spec, tc.tz, s, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q, %q) error = %q, want it to contain %q", tc.spec, tc.tz, err, tc.want)
			}
		})
	}
}

func TestNextEdges(t *testing.T) {
	t.Run("strictly after, whole seconds", func(t *testing.T) {
		s := mustParse(t, "0 * * * *", "")
		cases := map[string]string{
			"2026-05-19T10:00:00Z":           "2026-05-19T11:00:00Z", // an occurrence itself is not "after"
			"2026-05-19T09:59:59.999999999Z": "2026-05-19T10:00:00Z",
			"2026-05-19T10:00:00.000000001Z": "2026-05-19T11:00:00Z",
		}
		for from, want := range cases {
			if got := rfc(s.Next(mustTime(from)))[0]; got != want {
				t.Errorf("Next(%s) = %s, want %s", from, got, want)
			}
		}
	})
	t.Run("never fires", func(t *testing.T) {
		for _, spec := range []string{"59 23 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"} {
			s := mustParse(t, spec, "Europe/Berlin")
			if got := s.Next(topOfTheHour()); !got.IsZero() {
				t.Errorf("%q: Next = %v, want zero", spec, got)
			}
			if got := s.Upcoming(topOfTheHour(), 3); len(got) != 0 {
				t.Errorf("%q: Upcoming = %v, want none", spec, got)
			}
		}
	})
	t.Run("leap day", func(t *testing.T) {
		s := mustParse(t, "0 0 29 2 *", "")
		want := []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}
		if diff := cmp.Diff(want, rfc(s.Upcoming(topOfTheHour(), 2)...)); diff != "" {
			t.Error(diff)
		}
	})
	// More than five years apart (robfig's SpecSchedule.Next looks five years ahead and
	// gives up): an occurrence was taken for none, and the controller dropped it, said the
	// schedule never fires, and stayed there (helper-100). Fixed-time and interval
	// schedules, in UTC and a zone with daylight saving time.
	t.Run("further apart than five years", func(t *testing.T) {
		for _, c := range []struct{ spec, tz, from, want string }{
			{"0 0 29 2 *", "", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},   // 2100 is no leap year
			{"0 0 29 2 */7", "", "2026-06-01T00:00:00Z", "2032-02-29T00:00:00Z"}, // a 29 February that is a Sunday
			{"0 0 29 2 */7", "", "2032-02-29T00:00:00Z", "2060-02-29T00:00:00Z"}, // the next: 28 years on
			{"0 0 29 2 */7", "Europe/Berlin", "2032-02-29T00:00:00+01:00", "2060-02-29T00:00:00+01:00"},
			{"0 0 29 2 */7", "", "2088-02-29T00:00:00Z", "2128-02-29T00:00:00Z"},                         // 40 years on
			{"*/30 * 29 2 */7", "America/New_York", "2026-06-01T00:00:00Z", "2032-02-29T00:00:00-05:00"}, // an interval schedule
			{"*/30 * 29 2 */7", "America/New_York", "2088-02-29T23:59:00-05:00", "2128-02-29T00:00:00-05:00"},
			// Not far apart, but past Go's zone table: its zone periods there end a year at
			// 00:00 UTC on 31 December, for the hours after it too, and the walk through
			// them stopped: "never".
			{"*/30 * 31 12 *", "America/New_York", "2088-12-30T18:00:00-05:00", "2088-12-31T00:00:00-05:00"},
		} {
			s := mustParse(t, c.spec, c.tz)
			got := s.Next(mustTime(c.from))
			if rfc(got)[0] != c.want {
				t.Errorf("%q in %q: Next(%s) = %v, want %s", c.spec, c.tz, c.from, got, c.want)
			}
			if !got.IsZero() && !s.Has(got) {
				t.Errorf("%q in %q: Has(%v) is false", c.spec, c.tz, got)
			}
		}
	})
	t.Run("input zone does not matter, output is in the schedule's zone", func(t *testing.T) {
		s := mustParse(t, "0 9 * * *", "America/New_York")
		tokyo, _ := time.LoadLocation("Asia/Tokyo")
		from := topOfTheHour().In(tokyo)
		if got, want := rfc(s.Next(from))[0], "2026-05-19T09:00:00-04:00"; got != want {
			t.Errorf("Next = %s, want %s", got, want)
		}
		if got := s.Next(from).Location().String(); got != "America/New_York" {
			t.Errorf("location = %s", got)
		}
	})
	t.Run("Upcoming n<=0", func(t *testing.T) {
		if got := mustParse(t, "@hourly", "").Upcoming(topOfTheHour(), 0); got != nil {
			t.Errorf("got %v", got)
		}
	})
}

// TestDST pins down the behaviour on spring-forward and fall-back days (see the package doc).
//
// America/New_York 2026-03-08: 01:59:59 EST -> 03:00:00 EDT (02:xx does not exist).
// America/New_York 2026-11-01: 01:59:59 EDT -> 01:00:00 EST (01:xx happens twice).
// Europe/Berlin    2026-03-29: 01:59:59 CET -> 03:00:00 CEST (02:xx does not exist).
// Europe/Berlin    2026-10-25: 02:59:59 CEST -> 02:00:00 CET (02:xx happens twice).
func TestDST(t *testing.T) {
	const ny, berlin = "America/New_York", "Europe/Berlin"
	testCases := []struct {
		name, spec, tz, from string
		n                    int
		want                 []string
	}{
		// Fixed-hour schedules in the gap: run at the jump, the day's run is not lost.
		{"NY spring, time in the gap runs at the jump", "30 2 * * *", ny, "2026-03-07T12:00:00-05:00", 2,
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"Berlin spring, time in the gap runs at the jump", "30 2 * * *", berlin, "2026-03-28T12:00:00+01:00", 2,
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"NY spring, several gap times are one run", "0,15,30,45 2 * * *", ny, "2026-03-08T00:00:00-05:00", 2,
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"NY spring, an interval's gap times do not exist", "*/15 2 * * *", ny, "2026-03-08T00:00:00-05:00", 2,
			[]string{"2026-03-09T02:00:00-04:00", "2026-03-09T02:15:00-04:00"}},
		{"NY spring, gap time coinciding with a real time is one run", "0 2,3 * * *", ny, "2026-03-08T00:00:00-05:00", 3,
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T03:00:00-04:00"}},
		{"NY spring, times around the gap are untouched", "59 1,3 * * *", ny, "2026-03-08T00:00:00-05:00", 2,
			[]string{"2026-03-08T01:59:00-05:00", "2026-03-08T03:59:00-04:00"}},
		// Fixed-hour schedules in the repeated hour: once, at the first instance.
		{"NY fall, repeated time runs once", "30 1 * * *", ny, "2026-10-31T12:00:00-04:00", 3,
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00", "2026-11-03T01:30:00-05:00"}},
		{"NY fall, from inside the second pass", "30 1 * * *", ny, "2026-11-01T01:10:00-05:00", 1,
			[]string{"2026-11-02T01:30:00-05:00"}},
		{"NY fall, from inside the first pass", "30 1 * * *", ny, "2026-11-01T01:10:00-04:00", 1,
			[]string{"2026-11-01T01:30:00-04:00"}},
		{"NY fall, from the first instance itself", "30 1 * * *", ny, "2026-11-01T01:30:00-04:00", 1,
			[]string{"2026-11-02T01:30:00-05:00"}},
		{"NY fall, fixed minutes of a fixed hour run in the first pass only", "0,20,40 1 * * *", ny, "2026-11-01T00:00:00-04:00", 4,
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00", "2026-11-02T01:00:00-05:00"}},
		{"NY fall, minute field beginning with * is an interval: both passes", "*/20 1 * * *", ny, "2026-11-01T00:00:00-04:00", 7,
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00",
				"2026-11-01T01:00:00-05:00", "2026-11-01T01:20:00-05:00", "2026-11-01T01:40:00-05:00", "2026-11-02T01:00:00-05:00"}},
		{"NY fall, time after the repeated hour", "0 2 * * *", ny, "2026-11-01T01:30:00-05:00", 1,
			[]string{"2026-11-01T02:00:00-05:00"}},
		{"Berlin fall, repeated time runs once", "30 2 * * *", berlin, "2026-10-24T12:00:00+02:00", 2,
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"Berlin fall, @daily is unaffected", "@daily", berlin, "2026-10-24T12:00:00+02:00", 2,
			[]string{"2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00"}},
		// Interval schedules (minute or hour field begins with "*"): 23 hourly runs on a 23h day, 25 on a 25h day.
		{"NY spring, hourly skips the missing hour", "0 * * * *", ny, "2026-03-08T00:30:00-05:00", 3,
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"NY spring, hourly at :30 skips the missing hour", "30 * * * *", ny, "2026-03-08T01:00:00-05:00", 2,
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"}},
		{"NY fall, hourly runs in both passes", "0 * * * *", ny, "2026-11-01T00:30:00-04:00", 3,
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"Berlin spring, hourly", "@hourly", berlin, "2026-03-29T01:30:00+01:00", 2,
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"Berlin fall, hourly runs in both passes", "0 * * * *", berlin, "2026-10-25T01:30:00+02:00", 4,
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00"}},
		{"NY spring, every 30s has no gap in elapsed time", "*/30 * * * * *", ny, "2026-03-08T01:59:00-05:00", 3,
			[]string{"2026-03-08T01:59:30-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:00:30-04:00"}},
		{"NY fall, every 30s keeps going through the second pass", "*/30 * * * * *", ny, "2026-11-01T01:59:00-04:00", 3,
			[]string{"2026-11-01T01:59:30-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:00:30-05:00"}},
		{"Berlin fall, every 30s", "*/30 * * * * *", berlin, "2026-10-25T02:59:00+02:00", 3,
			[]string{"2026-10-25T02:59:30+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:00:30+01:00"}},
		// Other shapes of DST.
		{"Lord Howe: 30 minute shift, spring", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30", 2,
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"Lord Howe: 30 minute shift, fall", "45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00+11:00", 2,
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
		{"Santiago: midnight does not exist on spring day", "0 0 * * *", "America/Santiago", "2026-09-05T12:00:00-04:00", 2,
			[]string{"2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"}},
		{"Santiago: 23:xx repeats on fall day (clock goes back at 24:00)", "30 23 * * *", "America/Santiago", "2026-04-04T12:00:00-03:00", 2,
			[]string{"2026-04-04T23:30:00-03:00", "2026-04-05T23:30:00-04:00"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.tz)
			got := rfc(s.Upcoming(mustTime(tc.from), tc.n)...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%q in %s from %s (-want +got):\n%s", tc.spec, tc.tz, tc.from, diff)
			}
		})
	}
}

// TestRobfigDSTBehaviour pins down what robfig/cron alone does on DST days, which is
// why the wrapper corrects fixed-time schedules. If robfig ever changes, revisit the wrapper.
func TestRobfigDSTBehaviour(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	raw := func(spec string, from string, n int) []string {
		sched, err := cron.ParseStandard(spec)
		if err != nil {
			t.Fatal(err)
		}
		sched.(*cron.SpecSchedule).Location = ny
		var out []string
		for tm := mustTime(from); n > 0; n-- {
			tm = sched.Next(tm)
			out = append(out, tm.In(ny).Format(time.RFC3339))
		}
		return out
	}
	// Spring forward: the day's 02:30 run is lost entirely.
	if diff := cmp.Diff([]string{"2026-03-09T02:30:00-04:00"}, raw("30 2 * * *", "2026-03-07T12:00:00-05:00", 1)); diff != "" {
		t.Errorf("robfig spring-forward behaviour changed:\n%s", diff)
	}
	// Fall back: 01:30 runs twice.
	if diff := cmp.Diff([]string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"}, raw("30 1 * * *", "2026-10-31T12:00:00-04:00", 2)); diff != "" {
		t.Errorf("robfig fall-back behaviour changed:\n%s", diff)
	}
}

// TestDSTOracle checks Next against a brute-force, second-by-second definition of the
// semantics over whole DST days in several zones:
//   - interval (minute or hour field begins with "*"): an instant is an occurrence iff its
//     wall-clock reading matches;
//   - fixed-time: an instant is an occurrence iff the highest wall-clock reading shown so far
//     passed a matching time during the last second (so gap times fire at the jump, and
//     repeated times fire only the first time).
func TestDSTOracle(t *testing.T) {
	days := []struct{ tz, day string }{
		{"America/New_York", "2026-03-08"}, {"America/New_York", "2026-11-01"},
		{"Europe/Berlin", "2026-03-29"}, {"Europe/Berlin", "2026-10-25"},
		{"Australia/Sydney", "2026-04-05"}, {"Australia/Sydney", "2026-10-04"},
		{"Australia/Lord_Howe", "2026-04-05"}, {"Australia/Lord_Howe", "2026-10-04"},
		{"America/Santiago", "2026-04-05"}, {"America/Santiago", "2026-09-06"},
		{"America/Havana", "2026-03-08"}, {"America/Havana", "2026-11-01"},
	}
	specs := []string{
		"30 2 * * *", "30 1 * * *", "0 * * * *", "30 * * * *", "*/30 * * * * *", "*/15 2 * * *",
		"0 2,3 * * *", "@daily", "0 0 * * *", "15 0-3 * * *", "*/7 * * * *", "45 23 * * *", "0 */2 * * *",
		"* 2 * * *", "0,30 1,2 * * *", "*/20 1 * * *", "*/10 0 2 * * *", "0 * 2 * * *",
	}
	for _, d := range days {
		loc, err := time.LoadLocation(d.tz)
		if err != nil {
			t.Fatal(err)
		}
		day, _ := time.ParseInLocation("2006-01-02", d.day, loc)
		start, end := day.Add(-3*time.Hour), day.Add(27*time.Hour)
		for _, spec := range specs {
			s := mustParse(t, spec, d.tz)
			var want []time.Time
			hw := naive(start)
			for i := start.Add(time.Second); !i.After(end); i = i.Add(time.Second) {
				w := naive(i)
				if !fixedTime(spec) {
					if matches(s.naive, w) {
						want = append(want, i)
					}
					continue
				}
				if !w.After(hw) {
					continue
				}
				for c := hw.Add(time.Second); !c.After(w); c = c.Add(time.Second) {
					if matches(s.naive, c) {
						want = append(want, i)
						break
					}
				}
				hw = w
			}
			var got []time.Time
			for n := s.Next(start); !n.IsZero() && !n.After(end); n = s.Next(n) {
				got = append(got, n)
			}
			if diff := cmp.Diff(rfc(want...), rfc(got...)); diff != "" {
				t.Errorf("%q in %s around %s (-oracle +Next):\n%s", spec, d.tz, d.day, diff)
			}
		}
	}
}

// fixedTime is cron(8)'s classification, written independently of Parse for the oracle:
// a 5- or 6-field spec whose minute and hour fields do not begin with "*" or "?", or a
// descriptor other than @hourly.
func fixedTime(spec string) bool {
	if strings.HasPrefix(spec, "@") {
		return spec != "@hourly"
	}
	f := strings.Fields(spec)
	if len(f) == 6 {
		f = f[1:]
	}
	return !strings.ContainsAny(f[0][:1], "*?") && !strings.ContainsAny(f[1][:1], "*?")
}

// matches reports whether naive wall-clock time w matches the bit sets (robfig's dayMatches rule).
func matches(s *cron.SpecSchedule, w time.Time) bool {
	bit := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
	const star = uint64(1) << 63
	dom, dow := bit(s.Dom, w.Day()), bit(s.Dow, int(w.Weekday()))
	day := dom || dow
	if s.Dom&star != 0 || s.Dow&star != 0 {
		day = dom && dow
	}
	return day && bit(s.Month, int(w.Month())) && bit(s.Hour, w.Hour()) &&
		bit(s.Minute, w.Minute()) && bit(s.Second, w.Second()) && w.Nanosecond() == 0
}

// TestMinGap: how often a schedule fires at the closest, which --min-schedule-interval
// bounds (a tenant's per-second jobs took the operator's shared API budget).
func TestMinGap(t *testing.T) {
	from := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for spec, want := range map[string]time.Duration{
		"* * * * * *":     time.Second,
		"*/10 * * * * *":  10 * time.Second,
		"0,1 0 0 * * *":   time.Second, // twice a day, a second apart
		"* * * * *":       time.Minute,
		"*/5 * * * *":     5 * time.Minute,
		"0,59 0,23 * * *": time.Minute, // 23:59 then 00:00 the next day
		"0 3 * * *":       24 * time.Hour,
		"@hourly":         time.Hour,
		"@every 90s":      90 * time.Second,
		"30 2 * * 1":      7 * 24 * time.Hour,
		"0 0 1 1 *":       365 * 24 * time.Hour, // 2027-01-01 then 2028-01-01
		"0 0,12 * * 1-5":  12 * time.Hour,
		"0 22,23 * * 5":   time.Hour,
		"*/20 8-9 * * *":  20 * time.Minute,
		"0 0 0 29 2 ?":    4*365*24*time.Hour + 24*time.Hour, // leap days, 2028 then 2032
	} {
		s, err := Parse(spec, "UTC")
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := s.MinGap(from); got != want {
			t.Errorf("%s: %v, want %v", spec, got, want)
		}
	}
	never, err := Parse("0 0 30 2 *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if got := never.MinGap(from); got != 0 {
		t.Errorf("a schedule that never fires: %v", got)
	}
}

// TestLatestInDoesNotStepThroughOccurrences: LatestIn finds the latest occurrence in a
// range by galloping and bisecting, not by stepping through the occurrences: a blackout
// window every second lasting ten days, looked at on every pass, would otherwise cost
// 864,000 calls to Next a look. Counted, not timed.
func TestLatestInDoesNotStepThroughOccurrences(t *testing.T) {
	start := time.Date(2026, 6, 6, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		spec string
		span time.Duration
	}{
		{"* * * * * *", 240 * time.Hour},
		{"* * * * * *", 2 * 366 * 24 * time.Hour},
		{"*/7 * * * * *", 240 * time.Hour},
		{"0 9 * * 1-5", 90 * 24 * time.Hour},
	} {
		s := mustParse(t, c.spec, "")
		lo, hi := start, start.Add(c.span).Add(300*time.Millisecond)
		calls := 0
		next := func(t time.Time) time.Time { calls++; return s.Next(t) }
		got := lastAtOrBefore(next, lo, hi)
		want, ok := s.LatestIn(lo, hi)
		if !ok || !got.Equal(want) {
			t.Fatalf("%s over %s: %v, LatestIn %v %v", c.spec, c.span, got, want, ok)
		}
		if after := s.Next(got); !after.After(hi) || got.After(hi) || !got.After(lo) {
			t.Fatalf("%s over %s: %v is not the latest occurrence in (lo, hi]", c.spec, c.span, got)
		}
		bound := 2*bits.Len64(uint64(c.span/time.Second)) + 2
		if calls > bound {
			t.Errorf("%s over %s: %d calls to Next, want at most %d (2·log2 of the span in seconds + 2)", c.spec, c.span, calls, bound)
		}
	}
}

// TestMinGapSeesDaylightSavingChanges: a change of the clocks can bring two occurrences
// closer than any other two; MinGap, sampling only the days after from, missed it.
// `30 * * * *` in Australia/Lord_Howe fires at 01:30 (+11) and, the clock set back half an
// hour at 02:00, at 01:30 again (+10:30): 30 minutes apart once a year, which
// --min-schedule-interval 1h let through when looked at in June.
func TestMinGapSeesDaylightSavingChanges(t *testing.T) {
	for _, c := range []struct {
		spec, zone string
		want       time.Duration
	}{
		{"30 * * * *", "Australia/Lord_Howe", 30 * time.Minute},
		{"0 * * * *", "Australia/Lord_Howe", time.Hour},
		{"30 * * * *", "Europe/London", time.Hour},
		{"*/20 * * * *", "America/New_York", 20 * time.Minute},
		{"0 1,13 * * *", "Australia/Lord_Howe", 11*time.Hour + 30*time.Minute}, // the day the clock goes forward: 01:00 +10:30, 13:00 +11
	} {
		s, err := Parse(c.spec, c.zone)
		if err != nil {
			t.Fatalf("%s %s: %v", c.spec, c.zone, err)
		}
		from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		if got := s.MinGap(from); got != c.want {
			t.Errorf("%s in %s from %s: %v, want %v", c.spec, c.zone, from.Format(time.DateOnly), got, c.want)
		}
	}
}
