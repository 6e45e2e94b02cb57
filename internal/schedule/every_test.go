package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEveryAnchoredAtTheEpoch (issue 9 item 1): "@every d" occurs at the Unix epoch +
// k·d, so LockedCronJobs sharing a lock key agree on every occurrence whenever they were
// created or resumed and whatever their time zone.
func TestEveryAnchoredAtTheEpoch(t *testing.T) {
	testCases := []struct {
		spec string
		// two creation (or resume) times of objects sharing a key, and a later "now"
		createdA, createdB, now string
		// the occurrences both must see in (createdB, now], and the next one
		want []string
		next string
	}{
		// 20 minutes apart, as in the issue: both agree on :00 and :30.
		{"@every 30m", "2026-05-19T10:07:13Z", "2026-05-19T10:27:13Z", "2026-05-19T11:35:00Z",
			[]string{"2026-05-19T10:30:00Z", "2026-05-19T11:00:00Z", "2026-05-19T11:30:00Z"}, "2026-05-19T12:00:00Z"},
		// 90 s: sub-minute phase; 10:00Z is a multiple of 90 s.
		{"@every 90s", "2026-05-19T09:59:59.5Z", "2026-05-19T10:01:00Z", "2026-05-19T10:04:40Z",
			[]string{"2026-05-19T10:01:30Z", "2026-05-19T10:03:00Z", "2026-05-19T10:04:30Z"}, "2026-05-19T10:06:00Z"},
		// 45 s, below a minute.
		{"@every 45s", "2026-05-19T10:00:01Z", "2026-05-19T10:00:44Z", "2026-05-19T10:02:15Z",
			[]string{"2026-05-19T10:00:45Z", "2026-05-19T10:01:30Z", "2026-05-19T10:02:15Z"}, "2026-05-19T10:03:00Z"},
		// 7 m does not divide the hour: 10:00Z is 120 s past a multiple of 420 s.
		{"@every 7m", "2026-05-19T09:58:00Z", "2026-05-19T10:04:59Z", "2026-05-19T10:20:00Z",
			[]string{"2026-05-19T10:05:00Z", "2026-05-19T10:12:00Z", "2026-05-19T10:19:00Z"}, "2026-05-19T10:26:00Z"},
		// 25 h is not aligned to midnight: 1779184800 s (2026-05-19T10:00Z) mod 90000 = 61200.
		{"@every 25h", "2026-05-17T00:00:00Z", "2026-05-18T23:00:00Z", "2026-05-21T00:00:00Z",
			[]string{"2026-05-19T17:00:00Z", "2026-05-20T18:00:00Z"}, "2026-05-21T19:00:00Z"},
	}
	for _, tc := range testCases {
		t.Run(tc.spec, func(t *testing.T) {
			for _, tz := range []string{"", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe"} {
				s := mustParse(t, tc.spec, tz)
				now := mustTime(tc.now)
				var seen [2][]string
				for i, created := range []string{tc.createdA, tc.createdB} {
					// The occurrences each object walks through from its creation.
					var got []time.Time
					for n := s.Next(mustTime(created)); !n.After(now); n = s.Next(n) {
						if n.After(mustTime(tc.createdB)) {
							got = append(got, n.UTC())
						}
					}
					seen[i] = rfc(got...)
					if diff := cmp.Diff(tc.want, seen[i]); diff != "" {
						t.Errorf("%s, created %s (-want +got):\n%s", tz, created, diff)
					}
					// Plan from the creation time: same latest and next occurrence.
					p := s.Plan(Input{Earliest: mustTime(created), Now: now})
					if p.Latest == nil || !p.Latest.Equal(mustTime(tc.want[len(tc.want)-1])) || !p.Next.Equal(mustTime(tc.next)) {
						t.Errorf("%s, created %s: Plan latest %v next %v, want %s, %s", tz, created, p.Latest, p.Next, tc.want[len(tc.want)-1], tc.next)
					}
					if p.Latest != nil && p.Latest.Location().String() != s.loc.String() {
						t.Errorf("%s: Latest in %s, want the schedule's zone", tz, p.Latest.Location())
					}
				}
				// Every occurrence is a multiple of the period since the epoch.
				step := int64(s.every / time.Second)
				for _, o := range seen[0] {
					if u := mustTime(o).Unix(); u%step != 0 {
						t.Errorf("%s: occurrence %s is %d s off the epoch grid", tz, o, u%step)
					}
				}
			}
		})
	}
}

// TestEveryMissed (issue 9 item 1): counting the missed occurrences of "@every" after
// downtime is the number of grid points in (Earliest, Now], whatever Earliest's phase.
func TestEveryMissed(t *testing.T) {
	T := topOfTheHour() // a multiple of 90 s, 120 s past a multiple of 7 m
	testCases := []struct {
		spec                string
		earliest, now       time.Time
		deadline            *time.Duration
		wantMissed          int64
		wantDue, wantLatest time.Time
	}{
		// 10:01:30 ... 11:00:00: 40 occurrences; the last is due, 39 missed.
		{"@every 90s", T.Add(17 * time.Second), T.Add(time.Hour + 30*time.Second), dur(time.Minute), 39, T.Add(time.Hour), T.Add(time.Hour)},
		// Same, deadline passed: all 40 missed.
		{"@every 90s", T.Add(17 * time.Second), T.Add(time.Hour + 80*time.Second), dur(time.Minute), 40, time.Time{}, T.Add(time.Hour)},
		// 7 m: 10:05, 10:12, ..., 13:00 (26 occurrences) -> 25 missed.
		{"@every 7m", T.Add(2 * time.Minute), T.Add(3 * time.Hour), nil, 25, T.Add(3 * time.Hour), T.Add(3 * time.Hour)},
		// A different phase of Earliest inside the same grid step: the same answer.
		{"@every 7m", T.Add(4*time.Minute + 59*time.Second), T.Add(3 * time.Hour), nil, 25, T.Add(3 * time.Hour), T.Add(3 * time.Hour)},
		// Now just before a grid point: 10:05 ... 12:53 (25 occurrences).
		{"@every 7m", T.Add(2 * time.Minute), T.Add(3*time.Hour - time.Nanosecond), nil, 24, T.Add(173 * time.Minute), T.Add(173 * time.Minute)},
		// Across the Berlin fall back (25 h day): @every 1h ignores the wall clock, 25 runs.
		{"@every 1h", mustTime("2026-10-24T22:00:00Z"), mustTime("2026-10-25T23:00:00Z"), nil, 24, mustTime("2026-10-25T23:00:00Z"), mustTime("2026-10-25T23:00:00Z")},
	}
	for _, tc := range testCases {
		for _, tz := range []string{"", "Europe/Berlin"} {
			s := mustParse(t, tc.spec, tz)
			p := s.Plan(Input{Earliest: tc.earliest, Now: tc.now, StartingDeadline: tc.deadline})
			if p.Missed != tc.wantMissed || p.MissedEstimated {
				t.Errorf("%s %s from %s to %s: missed %d (estimated %v), want %d exactly", tc.spec, tz, tc.earliest, tc.now, p.Missed, p.MissedEstimated, tc.wantMissed)
			}
			if got := (p.Due != nil); got != !tc.wantDue.IsZero() || got && !p.Due.Equal(tc.wantDue) {
				t.Errorf("%s %s: due %v, want %v", tc.spec, tz, p.Due, tc.wantDue)
			}
			if p.Latest == nil || !p.Latest.Equal(tc.wantLatest) {
				t.Errorf("%s %s: latest %v, want %v", tc.spec, tz, p.Latest, tc.wantLatest)
			}
			// The exact, stepped count agrees.
			if n, _ := countExactly(s, tc.earliest, tc.now); n != p.Missed+boolInt(p.Due != nil) {
				t.Errorf("%s %s: stepped count %d, Plan %d", tc.spec, tz, n, p.Missed+boolInt(p.Due != nil))
			}
		}
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestEveryBeforeTheEpoch: the grid extends before 1970 (floor, not truncation).
func TestEveryBeforeTheEpoch(t *testing.T) {
	s := mustParse(t, "@every 7s", "")
	cases := map[string]string{
		"1969-12-31T23:59:50Z":     "1969-12-31T23:59:53Z", // -10 s -> -7 s
		"1969-12-31T23:59:53Z":     "1970-01-01T00:00:00Z", // on the grid: strictly after
		"1969-12-31T23:59:52.5Z":   "1969-12-31T23:59:53Z",
		"1969-12-31T23:59:59.999Z": "1970-01-01T00:00:00Z",
		"1970-01-01T00:00:00Z":     "1970-01-01T00:00:07Z",
		"0001-01-01T00:00:00Z":     "0001-01-01T00:00:04Z", // -62135596800 s = 7·(-8876513829) - 3
	}
	for from, want := range cases {
		if got := rfc(s.Next(mustTime(from)))[0]; got != want {
			t.Errorf("Next(%s) = %s, want %s", from, got, want)
		}
	}
}
