// Package blackout decides whether a LockedCronJob's occurrence may start: it evaluates
// spec.blackout (recurring and one-off windows, rollouts of referenced workloads) at an
// instant. It is pure: no clock, no client; the controller passes in what it observed.
//
// # Windows
//
// A window covers [start, end): start inclusive, end exclusive. A recurring window opens
// at each occurrence of its cron schedule, read in the job's time zone with the same
// rules as spec.schedule (package schedule: DST gaps and repeats included), and stays
// open for its duration of elapsed time (a 3h window that opens at 01:00 on a
// spring-forward night closes three real hours later, at 05:00 by the clock). A window
// that opened before an instant and has not closed yet covers it (the evaluation looks
// back by the duration). "@every" is refused for windows: it has no fixed start.
//
// Overlapping or touching windows merge: a blackout lasts until the latest end of the
// chain of windows (and settle periods) that overlap it.
//
// # Rollouts
//
// A referenced workload blocks while it is rolling out (see RolloutOf) and for its
// settle time after the rollout completed. While a rollout is in progress its end is
// unknown: Block.Until is zero.
package blackout

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// maxChain bounds how many merged intervals one evaluation follows; a blackout that is
// still going on after that many is reported as lasting until the end reached so far
// (the controller looks again then). It also bounds the horizon.
const (
	maxChain   = 1000
	maxHorizon = 2 * 366 * 24 * time.Hour
)

// FieldError is bad input in spec.blackout that admission could not catch, with the
// field it is in (e.g. "spec.blackout.windows[1].schedule").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Rules is a compiled spec.blackout. The zero value (no blackout) blocks nothing.
type Rules struct {
	Policy  v1alpha1.BlackoutPolicy
	windows []window
	// Refs are the rollout references, in spec order.
	Refs []Ref
}

type window struct {
	label string // shown in conditions, events and status.upcoming
	// recurring
	sched occurrences
	dur   time.Duration
	// one-off
	start, end time.Time
}

// occurrences is what a recurring window reads of its schedule (a *schedule.Schedule; a
// test counts the calls).
type occurrences interface {
	Next(t time.Time) time.Time
	LatestIn(lo, hi time.Time) (time.Time, bool)
}

// Ref is one compiled spec.blackout.rollouts entry.
type Ref struct {
	Field    string // spec.blackout.rollouts[i]
	Kind     v1alpha1.WorkloadKind
	Name     string
	Selector labels.Selector // nil when Name is set
	Settle   time.Duration
}

// Compile checks and compiles spec.blackout for a job in time zone tz. A nil spec
// compiles to empty Rules. Errors are *FieldError.
func Compile(spec *v1alpha1.BlackoutSpec, tz string) (*Rules, error) {
	r := &Rules{Policy: v1alpha1.BlackoutSkip}
	if spec == nil {
		return r, nil
	}
	if spec.Policy != "" {
		r.Policy = spec.Policy
	}
	for i, w := range spec.Windows {
		field := fmt.Sprintf("spec.blackout.windows[%d]", i)
		cw := window{label: windowLabel(w.Name, i)}
		switch {
		case w.Schedule != "":
			if strings.HasPrefix(strings.TrimSpace(w.Schedule), "@every") {
				return nil, &FieldError{field + ".schedule", fmt.Errorf("%q: @every has no fixed start; use a cron schedule", w.Schedule)}
			}
			s, err := schedule.Parse(w.Schedule, tz)
			if err != nil {
				return nil, &FieldError{field + ".schedule", err}
			}
			if w.Duration == nil || w.Duration.Duration <= 0 {
				return nil, &FieldError{field + ".duration", fmt.Errorf("must be greater than 0")}
			}
			cw.sched, cw.dur = s, w.Duration.Duration
		case w.Start != nil && w.End != nil:
			if !w.Start.Before(w.End) {
				return nil, &FieldError{field + ".end", fmt.Errorf("must be after start")}
			}
			cw.start, cw.end = w.Start.Time, w.End.Time
		default:
			return nil, &FieldError{field, fmt.Errorf("a window is either recurring (schedule and duration) or one-off (start and end)")}
		}
		r.windows = append(r.windows, cw)
	}
	for i, ref := range spec.Rollouts {
		field := fmt.Sprintf("spec.blackout.rollouts[%d]", i)
		switch ref.Kind {
		case v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet:
		default:
			return nil, &FieldError{field + ".kind", fmt.Errorf("unknown kind %q (want Deployment, StatefulSet or DaemonSet)", ref.Kind)}
		}
		cr := Ref{Field: field, Kind: ref.Kind, Name: ref.Name}
		switch {
		case ref.Name != "" && ref.Selector == nil:
		case ref.Name == "" && ref.Selector != nil:
			sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
			if err != nil {
				return nil, &FieldError{field + ".selector", err}
			}
			cr.Selector = sel
		default:
			return nil, &FieldError{field, fmt.Errorf("needs exactly one of name or selector")}
		}
		if ref.Settle != nil {
			if ref.Settle.Duration < 0 {
				return nil, &FieldError{field + ".settle", fmt.Errorf("must not be negative")}
			}
			cr.Settle = ref.Settle.Duration
		}
		r.Refs = append(r.Refs, cr)
	}
	return r, nil
}

func windowLabel(name string, i int) string {
	if name != "" {
		return fmt.Sprintf("window %q", name)
	}
	return fmt.Sprintf("window spec.blackout.windows[%d]", i)
}

// Empty reports whether the rules can never block.
func (r *Rules) Empty() bool { return r == nil || (len(r.windows) == 0 && len(r.Refs) == 0) }

// Rollout is what the controller knows of one referenced workload.
type Rollout struct {
	Kind v1alpha1.WorkloadKind
	Name string
	// InProgress: the workload is rolling out now.
	InProgress bool
	// Why says what is not done yet (for messages), when InProgress.
	Why string
	// Since is when the rollout was first seen in progress (used by Preview).
	Since time.Time
	// CompletedAt is when the last rollout completed; zero if unknown or none.
	CompletedAt time.Time
	// Settle is how long the blackout lasts after CompletedAt.
	Settle time.Duration

	expected bool // Preview: CompletedAt is an estimate
}

// ID is "Kind/name".
func (w Rollout) ID() string { return string(w.Kind) + "/" + w.Name }

// SettledAt is when the workload stops blocking after its rollout (zero if it does not
// block through settling).
func (w Rollout) SettledAt() time.Time {
	if w.InProgress || w.CompletedAt.IsZero() || w.Settle <= 0 {
		return time.Time{}
	}
	return w.CompletedAt.Add(w.Settle)
}

// Cause says what kind of thing blocks.
type Cause string

const (
	CauseNone      Cause = ""
	CauseWindow    Cause = "Window"
	CauseRollout   Cause = "Rollout"
	CauseSettling  Cause = "Settling"
	CauseEstimated Cause = "RolloutExpected" // Preview only: a rollout expected to still be going
)

// Block is the blackout in effect at an instant.
type Block struct {
	Cause Cause
	// By names what blocks: `window "maint"` or "Deployment/api". When several overlap,
	// a rollout in progress wins, else the one open at the instant that ends last.
	By string
	// Until is when the blackout ends: the latest end of the chain of overlapping
	// windows and settle periods. Zero while a rollout is in progress (unknown).
	Until time.Time
	// Why adds detail for messages (e.g. "2/3 replicas updated").
	Why string
}

// Blocked reports whether anything blocks.
func (b Block) Blocked() bool { return b.Cause != CauseNone }

// interval is one source of blackout [start, end) (start may be unknown for settling).
type interval struct {
	cause      Cause
	by, why    string
	start, end time.Time
	openStart  bool // start unknown: covers everything before end
}

func (iv interval) covers(t time.Time) bool {
	return (iv.openStart || !t.Before(iv.start)) && t.Before(iv.end)
}

// At returns the blackout in effect at t, with the rollouts as observed. A rollout in
// progress blocks every t; a completed one blocks t before CompletedAt+Settle.
func (r *Rules) At(t time.Time, rollouts []Rollout) Block {
	return r.at(t, rollouts, true)
}

// at is At; without chain, Until is only the end of the interval named by By (enough
// to name what blocks, and much cheaper for an endless chain).
func (r *Rules) at(t time.Time, rollouts []Rollout, chain bool) Block {
	if r == nil {
		return Block{}
	}
	for _, w := range rollouts {
		if w.InProgress {
			return Block{Cause: CauseRollout, By: w.ID(), Why: w.Why}
		}
	}
	open := r.openAt(t, rollouts)
	if len(open) == 0 {
		return Block{}
	}
	best := open[0]
	for _, iv := range open[1:] {
		if iv.end.After(best.end) {
			best = iv
		}
	}
	until := best.end
	limit := t.Add(maxHorizon)
	for i := 0; chain && i < maxChain; i++ {
		next := until
		for _, iv := range r.openAt(until, rollouts) {
			if iv.end.After(next) {
				next = iv.end
			}
		}
		if !next.After(until) || until.After(limit) {
			break
		}
		until = next
	}
	return Block{Cause: best.cause, By: best.by, Until: until, Why: best.why}
}

// openAt returns the windows and settle periods that cover t.
func (r *Rules) openAt(t time.Time, rollouts []Rollout) []interval {
	var out []interval
	for _, w := range r.windows {
		if iv, ok := w.openAt(t); ok {
			out = append(out, iv)
		}
	}
	for _, w := range rollouts {
		if s := w.SettledAt(); !s.IsZero() && t.Before(s) {
			cause, why := CauseSettling, fmt.Sprintf("rollout completed %s, settling", w.CompletedAt.UTC().Format(time.RFC3339))
			if w.expected {
				cause, why = CauseEstimated, w.Why
			}
			out = append(out, interval{cause: cause, by: w.ID(), why: why, end: s, openStart: true})
		}
	}
	return out
}

// openAt returns the window's occurrence that covers t, if any: for a recurring window,
// the latest start in (t-duration, t].
func (w window) openAt(t time.Time) (interval, bool) {
	if w.sched == nil {
		iv := interval{cause: CauseWindow, by: w.label, start: w.start, end: w.end}
		return iv, iv.covers(t)
	}
	start, ok := w.sched.LatestIn(t.Add(-w.dur), t)
	if !ok {
		return interval{}, false
	}
	return interval{cause: CauseWindow, by: w.label, start: start, end: start.Add(w.dur)}, true
}

// NextOpening returns the first instant after t at which a window opens (zero if none
// will), so that a controller can look again exactly then.
func (r *Rules) NextOpening(t time.Time) time.Time {
	var next time.Time
	for _, w := range r.windows {
		var s time.Time
		if w.sched != nil {
			s = w.sched.Next(t)
		} else if w.start.After(t) {
			s = w.start
		}
		if !s.IsZero() && (next.IsZero() || s.Before(next)) {
			next = s
		}
	}
	return next
}

// Action is what to do with a due occurrence.
type Action string

const (
	Run   Action = "Run"
	Skip  Action = "Skip"  // count as skippedBlackout, advance lastScheduleTime
	Defer Action = "Defer" // wait for Block.Until (or the rollout to end); keep it due
	Miss  Action = "Miss"  // Defer, but the blackout ends past startingDeadlineSeconds
)

// Decision is the answer for one due occurrence.
type Decision struct {
	Action Action
	Block  Block
	// Deadline is the last instant the occurrence may still start (zero: no deadline);
	// set for Defer.
	Deadline time.Time
}

// Decide says what to do, at now, with the occurrence occ that is due (the caller has
// checked it is within its starting deadline). An occurrence is in a blackout if one is
// in effect at its scheduled time or at now (the moment it would start):
//   - Skip: skipped.
//   - Defer: run now if nothing blocks now (a blackout at occ that has since ended
//     defers it to now); else, if the blackout's end is known and later than
//     occ+deadline, missed; else deferred (to Block.Until, or until the rollout ends,
//     or until the deadline when the end is unknown).
func (r *Rules) Decide(occ, now time.Time, deadline *time.Duration, rollouts []Rollout) Decision {
	if r.Empty() {
		return Decision{Action: Run}
	}
	atNow := r.At(now, rollouts)
	if r.Policy != v1alpha1.BlackoutDefer {
		if b := r.At(occ, rollouts); b.Blocked() {
			return Decision{Action: Skip, Block: b}
		}
		if atNow.Blocked() {
			return Decision{Action: Skip, Block: atNow}
		}
		return Decision{Action: Run}
	}
	if !atNow.Blocked() {
		return Decision{Action: Run}
	}
	d := Decision{Action: Defer, Block: atNow}
	if deadline != nil {
		d.Deadline = occ.Add(max(*deadline, 0))
		if !atNow.Until.IsZero() && atNow.Until.After(d.Deadline) {
			d.Action = Miss
		}
		if now.After(d.Deadline) {
			d.Action = Miss
		}
	}
	return d
}

// Preview says, for each upcoming occurrence, what blackout is expected to suppress (or
// defer) it (not blocked if none); Until is not chained here. Windows are known ahead. A rollout in progress is assumed to
// last as long again as it has lasted so far (at least a minute more), then settle: it
// is expected to block occurrences before now + max(now-Since, 1m) + Settle. A rollout
// that completed blocks occurrences before CompletedAt+Settle.
func (r *Rules) Preview(times []time.Time, now time.Time, rollouts []Rollout) []Block {
	projected := make([]Rollout, 0, len(rollouts))
	for _, w := range rollouts {
		if w.InProgress {
			elapsed := max(now.Sub(w.Since), time.Minute)
			if w.Since.IsZero() {
				elapsed = time.Minute
			}
			w.InProgress, w.expected = false, true
			w.CompletedAt = now.Add(elapsed)
			w.Settle = max(w.Settle, time.Nanosecond)
			w.Why = fmt.Sprintf("rolling out; expected to end about %s", w.CompletedAt.UTC().Format(time.RFC3339))
			if w.Settle > time.Nanosecond {
				w.Why += " plus settle " + w.Settle.String()
			}
		}
		projected = append(projected, w)
	}
	out := make([]Block, len(times))
	for i, t := range times {
		out[i] = r.at(t, projected, false)
	}
	return out
}
