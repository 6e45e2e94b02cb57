package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestClassification pins cron(8)'s rule (entry.c's MIN_STAR/HR_STAR, cron.c's
// find_jobs doWild/doNonWild): a schedule is an interval when its minute OR hour
// field begins with "*" ("?" is robfig's synonym), else fixed-time. Only the first
// character counts, not which hours or minutes are selected; a leading seconds
// field plays no part.
func TestClassification(t *testing.T) {
	testCases := []struct {
		spec  string
		fixed bool
	}{
		{"30 2 * * *", true},
		{"0 9 * * 1-5", true},
		{"0,15,30,45 2 * * *", true},
		{"0 0-23 * * *", true}, // every hour, but not written with "*"
		{"0-59 2 * * *", true}, // every minute of 02:xx, idem
		{"15 1/2 * * *", true}, // "1/2" is "1-23/2"; does not begin with "*"
		{"*/15 2 * * *", false},
		{"* 2 * * *", false},
		{"0 */2 * * *", false},
		{"0 * * * *", false},
		{"*/5 9-17 * * 1-5", false},
		{"? 2 * * *", false},
		{"30 ? * * *", false},
		{"*/10 0 2 * * *", true}, // 6 fields: seconds ignored, minute "0", hour "2"
		{"0 0 2 * * ?", true},    // Quartz: "?" in day of week is not minute/hour
		{"0 * 2 * * *", false},
		{"0 0 */2 * * *", false},
		{"*/30 * * * * *", false},
		{"@hourly", false}, // entry.c sets HR_STAR for @hourly
		{"@daily", true},
		{"@midnight", true},
		{"@weekly", true},
		{"@monthly", true},
		{"@yearly", true},
		{"@annually", true},
	}
	for _, tc := range testCases {
		s := mustParse(t, tc.spec, "Europe/Berlin")
		if s.wallClock != tc.fixed {
			t.Errorf("%q: fixed-time = %v, want %v", tc.spec, s.wallClock, tc.fixed)
		}
		if got := fixedTime(tc.spec); got != tc.fixed {
			t.Errorf("%q: the oracle's fixedTime = %v, want %v", tc.spec, got, tc.fixed)
		}
	}
}

// TestDSTCron8 is the table of issue 9 item 8: run counts and instants on the
// spring-forward and fall-back days of Europe/Berlin and America/New_York, derived
// from cron(8)'s rule:
//
//   - interval (minute or hour field begins with "*"): runs at every instant whose wall
//     clock matches: a gap's times do not exist, a repeated hour runs twice;
//   - fixed-time: a gap's times run once, at the jump (the first instant after the
//     gap); a repeated hour's times run once, in the first pass.
//
// Europe/Berlin    2026-03-29: 02:00 CET (+01) -> 03:00 CEST (+02); 02:xx does not exist; 23h day.
// Europe/Berlin    2026-10-25: 03:00 CEST (+02) -> 02:00 CET (+01); 02:xx happens twice; 25h day.
// America/New_York 2026-03-08: 02:00 EST (-05) -> 03:00 EDT (-04); 02:xx does not exist; 23h day.
// America/New_York 2026-11-01: 02:00 EDT (-04) -> 01:00 EST (-05); 01:xx happens twice; 25h day.
//
// runs counts the occurrences in the local day [00:00, next 00:00); early lists the
// ones before 05:00 local, unless there are too many to list (then first/last/n).
func TestDSTCron8(t *testing.T) {
	const ny, berlin = "America/New_York", "Europe/Berlin"
	type dense struct {
		n           int
		first, last string
	}
	testCases := []struct {
		spec, tz, day string
		runs          int
		early         []string
		dense         *dense
	}{
		// "*/15 2 * * *": minute begins with "*" -> interval.
		{"*/15 2 * * *", berlin, "2026-03-29", 0, // 02:xx does not exist
			nil, nil},
		{"*/15 2 * * *", berlin, "2026-10-25", 8, // both 02:xx hours (this project ran it 4 times before)
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:15:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:45:00+02:00",
				"2026-10-25T02:00:00+01:00", "2026-10-25T02:15:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-25T02:45:00+01:00"}, nil},
		{"*/15 2 * * *", ny, "2026-03-08", 0, // 02:xx does not exist
			nil, nil},
		{"*/15 2 * * *", ny, "2026-11-01", 4, // New York repeats 01:xx, not 02:xx
			[]string{"2026-11-01T02:00:00-05:00", "2026-11-01T02:15:00-05:00", "2026-11-01T02:30:00-05:00", "2026-11-01T02:45:00-05:00"}, nil},
		{"*/15 1 * * *", ny, "2026-11-01", 8, // the repeated 01:xx runs in both passes
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:15:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:45:00-04:00",
				"2026-11-01T01:00:00-05:00", "2026-11-01T01:15:00-05:00", "2026-11-01T01:30:00-05:00", "2026-11-01T01:45:00-05:00"}, nil},

		// "0 */2 * * *": hour begins with "*" -> interval.
		{"0 */2 * * *", berlin, "2026-03-29", 11, // 02:00 does not exist
			[]string{"2026-03-29T00:00:00+01:00", "2026-03-29T04:00:00+02:00"}, nil},
		{"0 */2 * * *", berlin, "2026-10-25", 13, // 02:00 twice
			[]string{"2026-10-25T00:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T04:00:00+01:00"}, nil},
		{"0 */2 * * *", ny, "2026-03-08", 11,
			[]string{"2026-03-08T00:00:00-05:00", "2026-03-08T04:00:00-04:00"}, nil},
		{"0 */2 * * *", ny, "2026-11-01", 12, // 02:00 happens once in New York
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T04:00:00-05:00"}, nil},

		// "30 2 * * *": fixed-time.
		{"30 2 * * *", berlin, "2026-03-29", 1, // in the gap: at the jump
			[]string{"2026-03-29T03:00:00+02:00"}, nil},
		{"30 2 * * *", berlin, "2026-10-25", 1, // repeated: first pass only
			[]string{"2026-10-25T02:30:00+02:00"}, nil},
		{"30 2 * * *", ny, "2026-03-08", 1,
			[]string{"2026-03-08T03:00:00-04:00"}, nil},
		{"30 2 * * *", ny, "2026-11-01", 1, // 02:30 happens once
			[]string{"2026-11-01T02:30:00-05:00"}, nil},
		{"30 1 * * *", ny, "2026-11-01", 1, // repeated: first pass only
			[]string{"2026-11-01T01:30:00-04:00"}, nil},

		// "0 * * * *": hour begins with "*" -> interval: one run per hour that exists.
		{"0 * * * *", berlin, "2026-03-29", 23,
			[]string{"2026-03-29T00:00:00+01:00", "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}, nil},
		{"0 * * * *", berlin, "2026-10-25", 25,
			[]string{"2026-10-25T00:00:00+02:00", "2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00",
				"2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00"}, nil},
		{"0 * * * *", ny, "2026-03-08", 23,
			[]string{"2026-03-08T00:00:00-05:00", "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}, nil},
		{"0 * * * *", ny, "2026-11-01", 25,
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00",
				"2026-11-01T03:00:00-05:00", "2026-11-01T04:00:00-05:00"}, nil},
		// The same hours written without "*" are fixed-time: the gap's 02:00 runs at the
		// jump, which is also 03:00 -> one occurrence (23 runs); the repeated 02:00 runs once (24).
		{"0 0-23 * * *", berlin, "2026-03-29", 23,
			[]string{"2026-03-29T00:00:00+01:00", "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}, nil},
		{"0 0-23 * * *", berlin, "2026-10-25", 24,
			[]string{"2026-10-25T00:00:00+02:00", "2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00",
				"2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00"}, nil},

		// "* 2 * * *": minute begins with "*" -> interval: every minute of each 02:xx that exists.
		{"* 2 * * *", berlin, "2026-03-29", 0, nil, nil},
		{"* 2 * * *", berlin, "2026-10-25", 120, nil,
			&dense{120, "2026-10-25T02:00:00+02:00", "2026-10-25T02:59:00+01:00"}},
		{"* 2 * * *", ny, "2026-03-08", 0, nil, nil},
		{"* 2 * * *", ny, "2026-11-01", 60, nil,
			&dense{60, "2026-11-01T02:00:00-05:00", "2026-11-01T02:59:00-05:00"}},
		// Written as a range it is fixed-time: one run at the jump, 60 in the first pass.
		{"0-59 2 * * *", berlin, "2026-03-29", 1,
			[]string{"2026-03-29T03:00:00+02:00"}, nil},
		{"0-59 2 * * *", berlin, "2026-10-25", 60, nil,
			&dense{60, "2026-10-25T02:00:00+02:00", "2026-10-25T02:59:00+02:00"}},

		// 6 fields: the same rule on the minute and hour fields; seconds are not looked at.
		{"*/10 0 2 * * *", berlin, "2026-03-29", 1, // fixed-time: the six gap times are one run at the jump
			[]string{"2026-03-29T03:00:00+02:00"}, nil},
		{"*/10 0 2 * * *", berlin, "2026-10-25", 6, // fixed-time: first pass only
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:10+02:00", "2026-10-25T02:00:20+02:00",
				"2026-10-25T02:00:30+02:00", "2026-10-25T02:00:40+02:00", "2026-10-25T02:00:50+02:00"}, nil},
		{"0 */20 2 * * *", berlin, "2026-10-25", 6, // interval: both passes
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:20:00+02:00", "2026-10-25T02:40:00+02:00",
				"2026-10-25T02:00:00+01:00", "2026-10-25T02:20:00+01:00", "2026-10-25T02:40:00+01:00"}, nil},
		{"0 */20 2 * * *", ny, "2026-03-08", 0, nil, nil}, // interval: the gap's times do not exist
		{"0 0 */2 * * *", berlin, "2026-10-25", 13, // interval ("0 */2 * * *" with seconds)
			[]string{"2026-10-25T00:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T04:00:00+01:00"}, nil},
		{"0 30 2 * * ?", ny, "2026-03-08", 1, // fixed-time, Quartz style
			[]string{"2026-03-08T03:00:00-04:00"}, nil},
	}
	for _, tc := range testCases {
		t.Run(tc.spec+"/"+tc.tz+"/"+tc.day, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.tz)
			loc, _ := time.LoadLocation(tc.tz)
			day, err := time.ParseInLocation("2006-01-02", tc.day, loc)
			if err != nil {
				t.Fatal(err)
			}
			nextDay := time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
			five := time.Date(day.Year(), day.Month(), day.Day(), 5, 0, 0, 0, loc)
			var all, early []time.Time
			for n := s.Next(day.Add(-time.Nanosecond)); !n.IsZero() && n.Before(nextDay); n = s.Next(n) {
				all = append(all, n)
				if n.Before(five) {
					early = append(early, n)
				}
			}
			if len(all) != tc.runs {
				t.Errorf("%d runs on %s, want %d", len(all), tc.day, tc.runs)
			}
			if tc.dense != nil {
				if len(early) != tc.dense.n || rfc(early[0])[0] != tc.dense.first || rfc(early[len(early)-1])[0] != tc.dense.last {
					t.Errorf("before 05:00: %d runs from %s to %s, want %d from %s to %s",
						len(early), rfc(early[0])[0], rfc(early[len(early)-1])[0], tc.dense.n, tc.dense.first, tc.dense.last)
				}
				return
			}
			if diff := cmp.Diff(tc.early, rfc(early...), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("before 05:00 (-want +got):\n%s", diff)
			}
			// Plan agrees with Next: the whole day counted at once.
			p := s.Plan(Input{Earliest: day.Add(-time.Nanosecond), Now: nextDay.Add(-time.Nanosecond)})
			if got := int(p.Missed); p.Due != nil {
				got++
				if got != tc.runs || !p.Due.Equal(all[len(all)-1]) {
					t.Errorf("Plan over the day: %d occurrences, latest %v; want %d, %v", got, p.Due, tc.runs, all[len(all)-1])
				}
			} else if tc.runs != 0 {
				t.Errorf("Plan over the day: nothing due, want %d occurrences", tc.runs)
			}
		})
	}
}

// TestDayOfMonthOrDayOfWeek: when both day fields are restricted (neither begins with
// "*" or "?"), a day matches if either matches; otherwise both must, as in cron(8).
// "*/2" begins with "*", so cron(8) ANDs it (robfig/cron alone would OR it).
func TestDayOfMonthOrDayOfWeek(t *testing.T) {
	// May 2026: Fri 1, Mon 4, Mon 11, Wed 13, Fri 15, Mon 18, Mon 25, Fri 29.
	testCases := []struct {
		name, spec string
		want       []string
	}{
		{"both restricted: OR", "0 0 1,15 * 1",
			[]string{"2026-05-01", "2026-05-04", "2026-05-11", "2026-05-15", "2026-05-18", "2026-05-25", "2026-06-01"}},
		{"Friday or the 13th", "0 0 13 * 5",
			[]string{"2026-05-01", "2026-05-08", "2026-05-13", "2026-05-15", "2026-05-22", "2026-05-29"}},
		{"a range selecting every day is restricted: OR, so every day", "0 0 1-31 * 1",
			[]string{"2026-05-01", "2026-05-02", "2026-05-03", "2026-05-04"}},
		{"day of month *: day of week alone", "0 0 * * 1",
			[]string{"2026-05-04", "2026-05-11", "2026-05-18"}},
		{"day of week *: day of month alone", "0 0 13 * *",
			[]string{"2026-05-13", "2026-06-13", "2026-07-13"}},
		{"Quartz ?: day of week alone", "0 0 0 ? * MON",
			[]string{"2026-05-04", "2026-05-11", "2026-05-18"}},
		{"*/2 begins with *: AND (Mondays on odd days)", "0 0 */2 * 1",
			[]string{"2026-05-11", "2026-05-25", "2026-06-01"}},
		{"*/2 in day of week: AND (the 1st on Sun/Tue/Thu/Sat)", "0 0 1 * */2",
			[]string{"2026-08-01", "2026-09-01", "2026-10-01"}},
		{"6 fields: both restricted, OR", "0 0 0 1,15 * 1",
			[]string{"2026-05-01", "2026-05-04", "2026-05-11", "2026-05-15"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.spec, "")
			var got []string
			for _, o := range s.Upcoming(mustTime("2026-04-30T12:00:00Z"), len(tc.want)) {
				got = append(got, o.Format("2006-01-02"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%q (-want +got):\n%s", tc.spec, diff)
			}
			// The arithmetic count beyond 1000 occurrences uses the same rule.
			e, n := mustTime("2020-01-01T00:00:00Z"), mustTime("2026-05-01T00:00:00Z")
			daily := mustParse(t, "0 0 "+dayFields(tc.spec), "")
			count, _ := countExactly(daily, e, n)
			if got := naiveCount(daily.naive, e, n); got != count {
				t.Errorf("%q: arithmetic count %d, stepped count %d", daily, got, count)
			}
		})
	}
}

// dayFields returns the last three fields (day of month, month, day of week) of a spec.
func dayFields(spec string) string {
	f := strings.Fields(spec)
	return strings.Join(f[len(f)-3:], " ")
}
