package blackout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// The state a controller keeps for spec.blackout, as pure functions of what it observed:
// status.rollouts across passes (ObserveRollouts), the Blackout condition (Condition),
// status.upcoming (Upcoming), the words of its conditions and events (Block.Describe,
// Decision.Reason) and the correction of a plan while an occurrence is deferred
// (CorrectDeferred), and the keys that map a workload to the jobs that reference it
// (IndexKeys, WorkloadKeys, Selects).

// Reasons of the Blackout condition and of blackout Events. Condition reasons cannot hold
// names (they must match [A-Za-z0-9_,:]), so the message names the window or workload.
const (
	ReasonNoBlackout        = "NoBlackout"
	ReasonWindowOpen        = "WindowOpen"
	ReasonRolloutInProgress = "RolloutInProgress"
	ReasonRolloutSettling   = "RolloutSettling"
	ReasonWorkloadsUnknown  = "WorkloadsUnreadable"
	ReasonInvalidBlackout   = "InvalidBlackout"
	ReasonDeferred          = "Deferred"
)

// Reason is the Blackout condition's reason for a block.
func (b Block) Reason() string {
	switch b.Cause {
	case CauseWindow:
		return ReasonWindowOpen
	case CauseSettling:
		return ReasonRolloutSettling
	}
	return ReasonRolloutInProgress
}

// Describe says what blocks and until when, for conditions and events.
func (b Block) Describe() string {
	var msg string
	switch b.Cause {
	case CauseWindow:
		msg = b.By + " is open"
	case CauseSettling:
		msg = b.By + " is settling after its rollout"
	default:
		msg = b.By + " is rolling out"
	}
	if b.Why != "" {
		msg += " (" + b.Why + ")"
	}
	if b.Until.IsZero() {
		return msg + "; until the rollout completes"
	}
	return msg + "; until " + b.Until.UTC().Format(time.RFC3339)
}

// Reason says why a Skip or Miss decision did not start the occurrence (for the record
// of its outcome), or, for Defer, what holds it back.
func (d Decision) Reason() string {
	if d.Action == Miss {
		return fmt.Sprintf("blackout past startingDeadlineSeconds (%s): %s", d.Deadline.UTC().Format(time.RFC3339), d.Block.Describe())
	}
	return d.Block.Describe()
}

// Latest says until when a deferred occurrence may still start.
func (d Decision) Latest() string {
	if d.Deadline.IsZero() {
		return "no deadline"
	}
	return "at the latest " + d.Deadline.UTC().Format(time.RFC3339)
}

// ConditionState is the Blackout condition at an instant, and when to look at it again.
type ConditionState struct {
	Blocked         bool
	Reason, Message string
	// Recheck is when the condition changes by itself: the end of the blackout, or the
	// next window's opening while none is in effect. Zero if unknown or never.
	Recheck time.Time
}

// Condition is the Blackout condition at now, given the rollouts as observed, or the
// error that kept the workloads from being read (nothing starts then: fail closed).
func (r *Rules) Condition(now time.Time, rollouts []Rollout, unreadable error) ConditionState {
	if unreadable != nil {
		return ConditionState{Blocked: true, Reason: ReasonWorkloadsUnknown,
			Message: "referenced workloads could not be read; no occurrence starts: " + unreadable.Error()}
	}
	if b := r.At(now, rollouts); b.Blocked() {
		return ConditionState{Blocked: true, Reason: b.Reason(), Message: b.Describe(), Recheck: b.Until}
	}
	c := ConditionState{Reason: ReasonNoBlackout, Message: "no blackout in effect", Recheck: r.NextOpening(now)}
	if r.Empty() {
		c.Message = "no blackout configured"
	}
	return c
}

// Unmatched says which rollout references name no workload (workloads[i] for refs[i], as
// ObserveRollouts reads them), for the Blackout condition: a reference that matches nothing
// guards nothing — rightly so for a workload that was deleted, silently for a misspelled
// name or a selector that picks none — and the user sees it there. "" when every reference matches one.
func Unmatched(refs []Ref, workloads [][]metav1.Object) string {
	var none []string
	for i, ref := range refs {
		if i >= len(workloads) || len(workloads[i]) > 0 {
			continue
		}
		if ref.Name != "" {
			none = append(none, fmt.Sprintf("%s/%s not found (%s)", ref.Kind, ref.Name, ref.Field))
		} else {
			none = append(none, fmt.Sprintf("no %s matches %s (%s)", ref.Kind, ref.Selector, ref.Field))
		}
	}
	if len(none) == 0 {
		return ""
	}
	return "guarding nothing: " + strings.Join(none, ", ")
}

// Upcoming is status.upcoming: the occurrences times and what is expected to hold each
// back (see Preview).
func (r *Rules) Upcoming(times []time.Time, now time.Time, rollouts []Rollout) []v1alpha1.UpcomingOccurrence {
	previews := r.Preview(times, now, rollouts)
	var out []v1alpha1.UpcomingOccurrence
	for i, t := range times {
		out = append(out, v1alpha1.UpcomingOccurrence{Time: metav1.NewTime(t), BlockedBy: previews[i].By})
	}
	return out
}

// ObserveRollouts turns the workloads each of refs names now (workloads[i] for refs[i],
// read by the caller) and what status.rollouts recorded (prev) into the rollouts the
// rules read and the new status.rollouts: a workload is recorded when first seen rolling
// out, gets its completion time when seen complete, and is dropped once settled. The
// completion time is the workload's own (RolloutOf: a Deployment's Progressing condition)
// when it has one that is not older than the rollout that was seen; otherwise the time a
// pass first saw it complete, which status keeps across restarts (a restart during a
// rollout sees it complete later, so settle ends later, never earlier). A workload that
// rolled out entirely between two passes, and records no completion itself, gets no
// settle time.
func ObserveRollouts(now time.Time, refs []Ref, workloads [][]metav1.Object, prev []v1alpha1.ObservedRollout) ([]Rollout, []v1alpha1.ObservedRollout) {
	had := map[string]v1alpha1.ObservedRollout{}
	for _, o := range prev {
		had[string(o.Kind)+"/"+o.Name] = o
	}
	var out []Rollout
	var keep []v1alpha1.ObservedRollout
	seen := map[string]bool{}
	for i, ref := range refs {
		if i >= len(workloads) {
			break
		}
		for _, obj := range workloads[i] {
			inProgress, why, completed := RolloutOf(obj)
			w := Rollout{Kind: ref.Kind, Name: obj.GetName(), InProgress: inProgress, Why: why, Settle: ref.Settle}
			key := w.ID()
			old, ok := had[key]
			if inProgress {
				w.Since = now
				if ok && old.CompletedAt == nil {
					w.Since = old.Since.Time
				}
			} else {
				switch {
				case ok && old.CompletedAt == nil && (completed.IsZero() || completed.Before(old.Since.Time)):
					completed = now // seen rolling, now complete
				case ok && old.CompletedAt != nil && completed.IsZero():
					completed = old.CompletedAt.Time
				}
				w.CompletedAt = completed
				w.Since = completed
				if ok {
					w.Since = old.Since.Time
				}
			}
			out = append(out, w)
			if seen[key] {
				continue
			}
			if w.InProgress || (!w.SettledAt().IsZero() && now.Before(w.SettledAt())) {
				seen[key] = true
				o := v1alpha1.ObservedRollout{Kind: w.Kind, Name: w.Name, Since: metav1.NewTime(w.Since)}
				if !w.InProgress {
					o.CompletedAt = &metav1.Time{Time: w.CompletedAt}
				}
				keep = append(keep, o)
			}
		}
	}
	slices.SortFunc(keep, func(a, b v1alpha1.ObservedRollout) int {
		return strings.Compare(string(a.Kind)+"/"+a.Name, string(b.Kind)+"/"+b.Name)
	})
	return out, keep
}

// CorrectDeferred corrects a plan (of sched, for occurrences after earliest) while the
// occurrence deferred is deferred (zero: none). A deferred occurrence leaves
// lastScheduleTime where it was, so the plan counts again, on every pass, the occurrences
// before it (already counted when it was deferred): those are taken off plan.Missed. If
// a newer occurrence has replaced it while the blackout lasted, it never started because
// of the blackout: superseded is true, it is taken off plan.Missed too, and it counts as
// skippedBlackout (with reason) rather than missed (unless its own starting deadline
// had passed first).
func CorrectDeferred(plan *schedule.Plan, sched *schedule.Schedule, earliest, deferred time.Time, deadline *time.Duration) (superseded bool, reason string) {
	if deferred.IsZero() || !deferred.After(earliest) || plan.Latest == nil || deferred.After(*plan.Latest) {
		return false, ""
	}
	before := sched.Plan(schedule.Input{Earliest: earliest, Now: deferred})
	plan.Missed -= min(before.Missed, plan.Missed)
	if !plan.Latest.After(deferred) || plan.Missed == 0 {
		return false, "" // still the latest: the blackout decides it, or missed by Plan
	}
	superseded, reason = Supersede(deferred, *plan.Latest, deadline)
	if superseded {
		plan.Missed--
	}
	return superseded, reason
}

// Supersede decides a deferred occurrence once a later one (by) has come while the
// blackout lasted: it is skipped (superseded), unless its startingDeadline passed before
// by came (false: it is missed). reason is what the skip records.
func Supersede(deferred, by time.Time, deadline *time.Duration) (superseded bool, reason string) {
	if deadline != nil && by.Sub(deferred) > *deadline {
		return false, "" // its deadline passed first: missed
	}
	return true, fmt.Sprintf("deferred, then superseded by occurrence %s while the blackout lasted", by.UTC().Format(time.RFC3339))
}

// IndexKeys are the keys under which a job with this spec.blackout is indexed by the
// workloads it references: "<Kind>/<name>" for a reference by name, "<Kind>/selector" for
// one by selector (the index is per namespace). No duplicates, in spec order.
func IndexKeys(spec *v1alpha1.BlackoutSpec) []string {
	if spec == nil {
		return nil
	}
	var keys []string
	for _, ref := range spec.Rollouts {
		k := string(ref.Kind) + "/" + ref.Name
		if ref.Selector != nil {
			k = string(ref.Kind) + "/selector"
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// WorkloadKeys are the index keys of the jobs that may reference a workload: by its name
// (byName), or by a selector (bySelector, to be checked with Selects).
func WorkloadKeys(kind v1alpha1.WorkloadKind, name string) (byName, bySelector string) {
	return string(kind) + "/" + name, string(kind) + "/selector"
}

// Selects reports whether spec.blackout references a workload of kind with these labels
// through a selector (an invalid selector selects nothing).
func Selects(spec *v1alpha1.BlackoutSpec, kind v1alpha1.WorkloadKind, set map[string]string) bool {
	if spec == nil {
		return false
	}
	for _, ref := range spec.Rollouts {
		if ref.Kind != kind || ref.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err == nil && sel.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}
