package blackout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

var (
	berlin, _ = time.LoadLocation("Europe/Berlin")
	// A Saturday.
	sat = time.Date(2026, 6, 6, 0, 0, 0, 0, time.UTC)
)

func at(day time.Time, h, m, s int) time.Time {
	return time.Date(day.Year(), day.Month(), day.Day(), h, m, s, 0, day.Location())
}

func recurring(name, sched string, d time.Duration) v1alpha1.BlackoutWindow {
	return v1alpha1.BlackoutWindow{Name: name, Schedule: sched, Duration: &metav1.Duration{Duration: d}}
}

func oneOff(name string, start, end time.Time) v1alpha1.BlackoutWindow {
	s, e := metav1.NewTime(start), metav1.NewTime(end)
	return v1alpha1.BlackoutWindow{Name: name, Start: &s, End: &e}
}

func mustCompile(t *testing.T, spec *v1alpha1.BlackoutSpec, tz string) *Rules {
	t.Helper()
	r, err := Compile(spec, tz)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return r
}

func TestAtWindows(t *testing.T) {
	d10 := at(sat, 10, 0, 0)
	cases := []struct {
		name      string
		tz        string
		windows   []v1alpha1.BlackoutWindow
		t         time.Time
		wantBy    string // "" = not blocked
		wantUntil time.Time
	}{
		{"one-off: just before start", "", []v1alpha1.BlackoutWindow{oneOff("m", d10, d10.Add(2*time.Hour))}, d10.Add(-time.Nanosecond), "", time.Time{}},
		{"one-off: start is inclusive", "", []v1alpha1.BlackoutWindow{oneOff("m", d10, d10.Add(2*time.Hour))}, d10, `window "m"`, d10.Add(2 * time.Hour)},
		{"one-off: just before end", "", []v1alpha1.BlackoutWindow{oneOff("m", d10, d10.Add(2*time.Hour))}, d10.Add(2*time.Hour - time.Nanosecond), `window "m"`, d10.Add(2 * time.Hour)},
		{"one-off: end is exclusive", "", []v1alpha1.BlackoutWindow{oneOff("m", d10, d10.Add(2*time.Hour))}, d10.Add(2 * time.Hour), "", time.Time{}},
		{"unnamed window is named by its field", "", []v1alpha1.BlackoutWindow{oneOff("", d10, d10.Add(time.Hour))}, d10, "window spec.blackout.windows[0]", d10.Add(time.Hour)},

		{"recurring Saturday: before", "", []v1alpha1.BlackoutWindow{recurring("sat", "0 2 * * 6", 4*time.Hour)}, at(sat, 1, 59, 59), "", time.Time{}},
		{"recurring Saturday: opening", "", []v1alpha1.BlackoutWindow{recurring("sat", "0 2 * * 6", 4*time.Hour)}, at(sat, 2, 0, 0), `window "sat"`, at(sat, 6, 0, 0)},
		{"recurring Saturday: opened before, still open (look back)", "", []v1alpha1.BlackoutWindow{recurring("sat", "0 2 * * 6", 4*time.Hour)}, at(sat, 5, 59, 59), `window "sat"`, at(sat, 6, 0, 0)},
		{"recurring Saturday: closing", "", []v1alpha1.BlackoutWindow{recurring("sat", "0 2 * * 6", 4*time.Hour)}, at(sat, 6, 0, 0), "", time.Time{}},
		{"recurring Saturday: Sunday", "", []v1alpha1.BlackoutWindow{recurring("sat", "0 2 * * 6", 4*time.Hour)}, at(sat.AddDate(0, 0, 1), 3, 0, 0), "", time.Time{}},
		{"seconds schedule", "", []v1alpha1.BlackoutWindow{recurring("s", "10 * * * * *", 5*time.Second)}, at(sat, 3, 4, 14), `window "s"`, at(sat, 3, 4, 15)},

		{"overlap: blocked until the latest end", "", []v1alpha1.BlackoutWindow{oneOff("a", d10, d10.Add(2*time.Hour)), oneOff("b", d10.Add(time.Hour), d10.Add(4*time.Hour))}, d10.Add(30 * time.Minute), `window "a"`, d10.Add(4 * time.Hour)},
		{"overlap: inside both, named by the one ending last", "", []v1alpha1.BlackoutWindow{oneOff("a", d10, d10.Add(2*time.Hour)), oneOff("b", d10.Add(time.Hour), d10.Add(4*time.Hour))}, d10.Add(90 * time.Minute), `window "b"`, d10.Add(4 * time.Hour)},
		{"touching windows chain", "", []v1alpha1.BlackoutWindow{oneOff("a", d10, d10.Add(time.Hour)), oneOff("b", d10.Add(time.Hour), d10.Add(2*time.Hour)), oneOff("c", d10.Add(2*time.Hour), d10.Add(3*time.Hour))}, d10, `window "a"`, d10.Add(3 * time.Hour)},
		{"a gap breaks the chain", "", []v1alpha1.BlackoutWindow{oneOff("a", d10, d10.Add(time.Hour)), oneOff("b", d10.Add(time.Hour+time.Second), d10.Add(2*time.Hour))}, d10, `window "a"`, d10.Add(time.Hour)},
		{"recurring chained with one-off", "", []v1alpha1.BlackoutWindow{recurring("sat", "0 2 * * 6", 4*time.Hour), oneOff("x", at(sat, 5, 0, 0), at(sat, 9, 0, 0))}, at(sat, 3, 0, 0), `window "sat"`, at(sat, 9, 0, 0)},

		{"across midnight: next day, still open", "", []v1alpha1.BlackoutWindow{recurring("night", "0 23 * * *", 2*time.Hour)}, at(sat, 0, 30, 0), `window "night"`, at(sat, 1, 0, 0)},
		{"across midnight: closes at 01:00", "", []v1alpha1.BlackoutWindow{recurring("night", "0 23 * * *", 2*time.Hour)}, at(sat, 1, 0, 0), "", time.Time{}},
		{"across midnight in Berlin", "Europe/Berlin", []v1alpha1.BlackoutWindow{recurring("night", "30 23 * * *", time.Hour)}, time.Date(2026, 6, 7, 0, 15, 0, 0, berlin), `window "night"`, time.Date(2026, 6, 7, 0, 30, 0, 0, berlin)},

		// Berlin springs forward on 2026-03-29 at 02:00 CET -> 03:00 CEST.
		{"DST spring forward: 3h of elapsed time", "Europe/Berlin", []v1alpha1.BlackoutWindow{recurring("dst", "0 1 * * *", 3*time.Hour)}, time.Date(2026, 3, 29, 4, 59, 0, 0, berlin), `window "dst"`, time.Date(2026, 3, 29, 5, 0, 0, 0, berlin)},
		{"DST spring forward: closed at 05:00 CEST", "Europe/Berlin", []v1alpha1.BlackoutWindow{recurring("dst", "0 1 * * *", 3*time.Hour)}, time.Date(2026, 3, 29, 5, 0, 0, 0, berlin), "", time.Time{}},
		{"DST gap: a window at 02:30 opens at the jump", "Europe/Berlin", []v1alpha1.BlackoutWindow{recurring("gap", "30 2 * * *", time.Hour)}, time.Date(2026, 3, 29, 3, 0, 0, 0, berlin), `window "gap"`, time.Date(2026, 3, 29, 4, 0, 0, 0, berlin)},
		{"DST gap: not before the jump", "Europe/Berlin", []v1alpha1.BlackoutWindow{recurring("gap", "30 2 * * *", time.Hour)}, time.Date(2026, 3, 29, 1, 59, 59, 0, berlin), "", time.Time{}},
		// Berlin falls back on 2026-10-25 at 03:00 CEST -> 02:00 CET: 02:30 happens twice.
		{"DST fall back: open in the first 02:30", "Europe/Berlin", []v1alpha1.BlackoutWindow{recurring("rep", "30 2 * * *", 45*time.Minute)}, time.Date(2026, 10, 25, 0, 40, 0, 0, time.UTC), `window "rep"`, time.Date(2026, 10, 25, 1, 15, 0, 0, time.UTC)},
		{"DST fall back: does not open again at the second 02:30", "Europe/Berlin", []v1alpha1.BlackoutWindow{recurring("rep", "30 2 * * *", 45*time.Minute)}, time.Date(2026, 10, 25, 1, 40, 0, 0, time.UTC), "", time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustCompile(t, &v1alpha1.BlackoutSpec{Windows: c.windows}, c.tz)
			b := r.At(c.t, nil)
			if b.By != c.wantBy {
				t.Fatalf("By = %q, want %q (block %+v)", b.By, c.wantBy, b)
			}
			if c.wantBy != "" && !b.Until.Equal(c.wantUntil) {
				t.Fatalf("Until = %s, want %s", b.Until, c.wantUntil)
			}
			if c.wantBy != "" && b.Cause != CauseWindow {
				t.Fatalf("Cause = %q", b.Cause)
			}
		})
	}
}

func TestAtEndlessChainIsBounded(t *testing.T) {
	// Each hourly window overlaps the next: the blackout never ends. The chain stops
	// after maxChain intervals (two years of them would be 17,568), each found with one
	// LatestIn, which is logarithmic in the window's span itself
	// (schedule.TestLatestInDoesNotStepThroughOccurrences).
	r := mustCompile(t, &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{recurring("always", "0 * * * *", 90*time.Minute)}}, "")
	calls := countLookups(r)
	b := r.At(sat, nil)
	if !b.Blocked() || b.Until.Before(sat.Add(100*time.Hour)) {
		t.Fatalf("block %+v: want blocked far ahead", b)
	}
	if *calls > maxChain+1 {
		t.Fatalf("%d window look-ups, want at most %d (maxChain + 1)", *calls, maxChain+1)
	}
}

// countingSchedule counts a recurring window's look-ups of its schedule.
type countingSchedule struct {
	occurrences
	calls *int
}

func (c countingSchedule) LatestIn(lo, hi time.Time) (time.Time, bool) {
	*c.calls++
	return c.occurrences.LatestIn(lo, hi)
}

func (c countingSchedule) Next(t time.Time) time.Time {
	*c.calls++
	return c.occurrences.Next(t)
}

// countLookups has r's recurring windows count their schedule look-ups in the returned
// counter.
func countLookups(r *Rules) *int {
	calls := new(int)
	for i := range r.windows {
		if r.windows[i].sched != nil {
			r.windows[i].sched = countingSchedule{r.windows[i].sched, calls}
		}
	}
	return calls
}

func TestAtRollouts(t *testing.T) {
	d10 := at(sat, 10, 0, 0)
	r := mustCompile(t, &v1alpha1.BlackoutSpec{
		Windows:  []v1alpha1.BlackoutWindow{oneOff("w", d10.Add(5*time.Minute), d10.Add(20*time.Minute))},
		Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "api"}},
	}, "")
	rolling := []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true, Why: "1 of 3 replicas updated"}}
	if b := r.At(d10, rolling); b.Cause != CauseRollout || b.By != "Deployment/api" || !b.Until.IsZero() || b.Why == "" {
		t.Fatalf("in progress: %+v", b)
	}
	settling := []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: d10, Settle: 10 * time.Minute}}
	if b := r.At(d10.Add(time.Minute), settling); b.Cause != CauseSettling || !b.Until.Equal(d10.Add(20*time.Minute)) {
		t.Fatalf("settling chains into the window: %+v", b)
	}
	if b := r.At(d10.Add(20*time.Minute), settling); b.Blocked() {
		t.Fatalf("after settle and window: %+v", b)
	}
	noSettle := []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: d10}}
	if b := r.At(d10, noSettle); b.Blocked() {
		t.Fatalf("completed without settle blocks: %+v", b)
	}
}

func TestDecide(t *testing.T) {
	occ := at(sat, 10, 0, 0)
	min := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	dl := func(d time.Duration) *time.Duration { return &d }
	window := oneOff("w", occ.Add(-min(5)), occ.Add(min(5))) // [09:55, 10:05)
	api := v1alpha1.RolloutRef{Kind: v1alpha1.KindDeployment, Name: "api", Settle: &metav1.Duration{Duration: min(3)}}
	type tc struct {
		name      string
		policy    v1alpha1.BlackoutPolicy
		windows   []v1alpha1.BlackoutWindow
		occ, now  time.Time
		deadline  *time.Duration
		rollouts  []Rollout
		want      Action
		wantUntil time.Time
	}
	cases := []tc{
		{"no blackout", "", nil, occ, occ, nil, nil, Run, time.Time{}},
		{"Skip: in the window", "", []v1alpha1.BlackoutWindow{window}, occ, occ, nil, nil, Skip, occ.Add(min(5))},
		{"Skip: at the window's end (exclusive)", "", []v1alpha1.BlackoutWindow{oneOff("w", occ.Add(-min(5)), occ)}, occ, occ, nil, nil, Run, time.Time{}},
		{"Skip: at the window's start (inclusive)", "", []v1alpha1.BlackoutWindow{oneOff("w", occ, occ.Add(min(5)))}, occ, occ, nil, nil, Skip, occ.Add(min(5))},
		{"Skip: window over the occurrence, controller late after it", v1alpha1.BlackoutSkip, []v1alpha1.BlackoutWindow{window}, occ, occ.Add(min(6)), nil, nil, Skip, occ.Add(min(5))},
		{"Skip: window opened between the occurrence and a late start", "", []v1alpha1.BlackoutWindow{oneOff("w", occ.Add(time.Second), occ.Add(min(5)))}, occ, occ.Add(2 * time.Second), nil, nil, Skip, occ.Add(min(5))},
		{"Defer: until the window ends, no deadline", v1alpha1.BlackoutDefer, []v1alpha1.BlackoutWindow{window}, occ, occ, nil, nil, Defer, occ.Add(min(5))},
		{"Defer: window ends within the deadline", v1alpha1.BlackoutDefer, []v1alpha1.BlackoutWindow{window}, occ, occ, dl(min(5)), nil, Defer, occ.Add(min(5))},
		{"Defer: window ends past the deadline -> missed", v1alpha1.BlackoutDefer, []v1alpha1.BlackoutWindow{window}, occ, occ, dl(min(5) - time.Second), nil, Miss, occ.Add(min(5))},
		{"Defer: the window has ended -> run now", v1alpha1.BlackoutDefer, []v1alpha1.BlackoutWindow{window}, occ, occ.Add(min(5)), dl(min(10)), nil, Run, time.Time{}},
		{"Defer: rollout in progress, end unknown", v1alpha1.BlackoutDefer, nil, occ, occ, dl(min(10)), []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true}}, Defer, time.Time{}},
		{"Defer: rollout still in progress past the deadline -> missed", v1alpha1.BlackoutDefer, nil, occ, occ.Add(min(10) + time.Second), dl(min(10)), []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true}}, Miss, time.Time{}},
		{"Defer: settling past the deadline -> missed", v1alpha1.BlackoutDefer, nil, occ, occ, dl(min(2)), []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: occ.Add(-time.Minute), Settle: min(5)}}, Miss, occ.Add(min(4))},
		// A rollout that started after 09:00 and completed at 09:30, looked at for the 10:00 occurrence.
		{"rollout between two occurrences: done before the next", "", nil, occ, occ, nil, []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: occ.Add(-min(30))}}, Run, time.Time{}},
		{"rollout between two occurrences: settle reaches the next", "", nil, occ, occ, nil, []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: occ.Add(-min(30)), Settle: min(31)}}, Skip, occ.Add(time.Minute)},
		{"settle: ends exactly at the occurrence", "", nil, occ, occ, nil, []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: occ.Add(-min(30)), Settle: min(30)}}, Run, time.Time{}},
		{"settle: Defer to its end", v1alpha1.BlackoutDefer, nil, occ, occ, nil, []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: occ.Add(-min(1)), Settle: min(3)}}, Defer, occ.Add(min(2))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustCompile(t, &v1alpha1.BlackoutSpec{Policy: c.policy, Windows: c.windows, Rollouts: []v1alpha1.RolloutRef{api}}, "")
			d := r.Decide(c.occ, c.now, c.deadline, c.rollouts)
			if d.Action != c.want {
				t.Fatalf("Action = %s, want %s (%+v)", d.Action, c.want, d)
			}
			if !d.Block.Until.Equal(c.wantUntil) {
				t.Fatalf("Until = %s, want %s", d.Block.Until, c.wantUntil)
			}
			if c.want == Defer && c.deadline != nil && !d.Deadline.Equal(c.occ.Add(*c.deadline)) {
				t.Fatalf("Deadline = %s", d.Deadline)
			}
		})
	}
}

// An hourly job; a rollout starts at 10:10 and ends at 10:40: the 10:00 and 11:00
// occurrences run, and with a 30m settle the 11:00 one is skipped.
func TestRolloutBetweenOccurrences(t *testing.T) {
	r := mustCompile(t, &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindStatefulSet, Name: "db"}}}, "")
	ten, eleven := at(sat, 10, 0, 0), at(sat, 11, 0, 0)
	if d := r.Decide(ten, ten, nil, nil); d.Action != Run {
		t.Fatalf("10:00 before the rollout: %+v", d)
	}
	during := []Rollout{{Kind: v1alpha1.KindStatefulSet, Name: "db", InProgress: true, Since: ten.Add(10 * time.Minute)}}
	if b := r.At(ten.Add(20*time.Minute), during); b.Cause != CauseRollout {
		t.Fatalf("10:20 during the rollout: %+v", b)
	}
	after := []Rollout{{Kind: v1alpha1.KindStatefulSet, Name: "db", CompletedAt: ten.Add(40 * time.Minute)}}
	if d := r.Decide(eleven, eleven, nil, after); d.Action != Run {
		t.Fatalf("11:00 after the rollout: %+v", d)
	}
	after[0].Settle = 30 * time.Minute
	if d := r.Decide(eleven, eleven, nil, after); d.Action != Skip || !d.Block.Until.Equal(ten.Add(70*time.Minute)) || d.Block.By != "StatefulSet/db" {
		t.Fatalf("11:00 in the settle time: %+v", d)
	}
}

func TestPreview(t *testing.T) {
	now := at(sat, 1, 0, 0)
	r := mustCompile(t, &v1alpha1.BlackoutSpec{
		Windows:  []v1alpha1.BlackoutWindow{recurring("sat", "0 2 * * 6", 4*time.Hour)},
		Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "api", Settle: &metav1.Duration{Duration: 5 * time.Minute}}},
	}, "")
	times := []time.Time{now.Add(10 * time.Minute), now.Add(30 * time.Minute), at(sat, 3, 0, 0), at(sat, 6, 0, 0)}
	// Rolling out for 15 minutes: expected to take 15 more, then settle 5: blocks before 01:20.
	rolling := []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true, Since: now.Add(-15 * time.Minute), Settle: 5 * time.Minute}}
	got := r.Preview(times, now, rolling)
	want := []string{"Deployment/api", "", `window "sat"`, ""}
	for i := range want {
		if got[i].By != want[i] {
			t.Errorf("%s: By = %q, want %q (%+v)", times[i].Format("15:04"), got[i].By, want[i], got[i])
		}
	}
	if got[0].Cause != CauseEstimated || !strings.Contains(got[0].Why, "expected to end") {
		t.Errorf("estimated: %+v", got[0])
	}
	// No rollout: only the window.
	got = r.Preview(times, now, nil)
	if got[0].Blocked() || got[2].By != `window "sat"` {
		t.Errorf("windows only: %+v", got)
	}
}

func TestCompileErrors(t *testing.T) {
	good := recurring("", "0 2 * * 6", time.Hour)
	cases := []struct {
		name  string
		spec  v1alpha1.BlackoutSpec
		field string
	}{
		{"bad window schedule", v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{good, recurring("", "61 * * * *", time.Hour)}}, "spec.blackout.windows[1].schedule"},
		{"@every window", v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{recurring("", "@every 1h", time.Hour)}}, "spec.blackout.windows[0].schedule"},
		{"zero duration", v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{recurring("", "@daily", 0)}}, "spec.blackout.windows[0].duration"},
		{"end before start", v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{oneOff("", sat, sat)}}, "spec.blackout.windows[0].end"},
		{"neither form", v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "x"}}}, "spec.blackout.windows[0]"},
		{"selector that does not parse", v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}},
		}}}}, "spec.blackout.rollouts[0].selector"},
		{"bad label value", v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a b"}}}}}, "spec.blackout.rollouts[0].selector"},
		{"unknown kind", v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: "Job", Name: "x"}}}, "spec.blackout.rollouts[0].kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(&c.spec, "")
			fe, ok := err.(*FieldError)
			if !ok {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			if fe.Field != c.field || !strings.HasPrefix(err.Error(), c.field+": ") {
				t.Fatalf("field %q (%v), want %q", fe.Field, err, c.field)
			}
		})
	}
	if r, err := Compile(nil, "UTC"); err != nil || !r.Empty() || r.Policy != v1alpha1.BlackoutSkip {
		t.Fatalf("nil spec: %+v %v", r, err)
	}
}

func TestNextOpening(t *testing.T) {
	r := mustCompile(t, &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{
		recurring("sat", "0 2 * * 6", time.Hour), oneOff("x", at(sat, 1, 0, 0), at(sat, 1, 30, 0)),
	}}, "")
	if got := r.NextOpening(sat); !got.Equal(at(sat, 1, 0, 0)) {
		t.Fatalf("got %s", got)
	}
	if got := r.NextOpening(at(sat, 1, 0, 0)); !got.Equal(at(sat, 2, 0, 0)) {
		t.Fatalf("got %s", got)
	}
}

func TestDenseWindowIsCheap(t *testing.T) {
	// A window opening every second and lasting ten days: always blocked; the look-back
	// and the chain must not step through every second.
	r := mustCompile(t, &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{recurring("dense", "* * * * * *", 240*time.Hour)}}, "")
	calls := countLookups(r)
	b := r.At(sat.Add(500*time.Millisecond), nil)
	if !b.Blocked() || !b.Until.After(sat.Add(366*24*time.Hour)) {
		t.Fatalf("block %+v", b)
	}
	// Each step of the chain moves ten days (the window's duration) up to the horizon.
	if limit := int(maxHorizon/(240*time.Hour)) + 2; *calls > limit {
		t.Fatalf("At: %d window look-ups, want at most %d (one per ten days to the horizon)", *calls, limit)
	}
	*calls = 0
	preview := r.Preview([]time.Time{sat, sat.Add(time.Hour)}, sat, nil)
	if len(preview) != 2 {
		t.Fatalf("preview of 2 occurrences: %+v", preview)
	}
	for _, p := range preview {
		if p.By != `window "dense"` {
			t.Fatalf("preview %+v", p)
		}
	}
	if *calls > 2 {
		t.Fatalf("Preview of 2 occurrences: %d window look-ups, want 2 (no chain)", *calls)
	}
}

func TestLatestStart(t *testing.T) {
	for _, c := range []struct {
		sched      string
		lo, hi     time.Time
		want       time.Time
		wantExists bool
	}{
		{"* * * * * *", sat, sat.Add(time.Hour), sat.Add(time.Hour), true},
		{"* * * * * *", sat, sat.Add(time.Hour - time.Millisecond), sat.Add(time.Hour - time.Second), true},
		{"0 9 * * 1-5", sat, sat.Add(96 * time.Hour), at(sat.AddDate(0, 0, 3), 9, 0, 0), true},
		{"0 9 * * 1-5", sat, sat.Add(24 * time.Hour), time.Time{}, false},
		{"0 2 * * 6", sat.Add(2 * time.Hour), sat.Add(3 * time.Hour), time.Time{}, false}, // lo is exclusive
		{"0 2 * * 6", sat.Add(2*time.Hour - time.Nanosecond), sat.Add(2 * time.Hour), sat.Add(2 * time.Hour), true},
	} {
		s, err := schedule.Parse(c.sched, "")
		if err != nil {
			t.Fatal(err)
		}
		got, ok := s.LatestIn(c.lo, c.hi)
		if ok != c.wantExists || (ok && !got.Equal(c.want)) {
			t.Errorf("%s in (%s, %s]: got %s %t, want %s %t", c.sched, c.lo, c.hi, got, ok, c.want, c.wantExists)
		}
	}
}
