// Package tracking decides, for one pod of a LockedCronJob, what the controller does
// with it in a pass: leave it (running, or waiting within its deadline), fold its report
// (finished), or count it without a report (it never started, or it was deleted after it
// started and left none). Everything here is a pure function of the pod and the time.
//
// Every pod carries the finalizer runpod.FinalizerTracking until it is counted, so the
// pod (and its report) is still there when it was deleted before the controller saw it
// finish (kubectl delete, node loss, pod GC), as the Job controller's
// batch.kubernetes.io/job-tracking does.
package tracking

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// DefaultPendingTimeout is how long a pod of a job without startingDeadlineSeconds may
// wait to start its job (counted from the later of its occurrence and its creation)
// before it is deleted and its occurrence counted missed.
const DefaultPendingTimeout = time.Hour

// TerminatingGrace is how long after its deletion deadline (deletionTimestamp, which
// already includes the pod's grace period) a deleted pod that had started may take to
// record its report before it is counted as Error (its node is gone, or it was
// force-deleted).
const TerminatingGrace = 30 * time.Second

// EndGrace is how long a pod whose job has ended for good has to end by itself before its
// report is folded all the same: another regular container of it (a proxy, a log shipper)
// may run on and keep it from ever ending. Within it, a pod that ends (its sidecars
// stopped, its phase written) is kept as history as usual.
const EndGrace = time.Minute

// Verdict is what becomes of a pod in a pass.
type Verdict string

const (
	// Active: running, or waiting within its deadline; nothing to count yet.
	Active Verdict = "Active"
	// Report: finished; its report is folded.
	Report Verdict = "Report"
	// NeverStarted: deleted, and its job never started and never will (unbound when
	// deleted, or its kubelet said so): counted Missed with Reason.
	NeverStarted Verdict = "NeverStarted"
	// Lost: deleted after its job started, and no report came: counted Error with Reason.
	Lost Verdict = "Lost"
	// Withdraw: its job not started as far as its status says, and it must not start
	// (past its deadline, or a blackout began). Its kubelet may have started it all the
	// same (status updates lag under load; the cache may not show its binding yet): the
	// controller deletes it (noting Reason on it, runpod.AnnotationWithdrawn) and counts
	// it once the API server (unbound when deleted) or its kubelet has said what
	// happened (its report, or NeverStarted with Reason).
	Withdraw Verdict = "Withdraw"
	// WithdrawAhead: prepared ahead of its instant and taken away before it by someone
	// else, its job not run (takenAwayAhead): the controller withdraws it as its own
	// withdrawals of prepared pods (runpod.AnnotationWithdrawnAhead, Reason), and it is
	// then decided as one (Withdrawn, or its report if its job ran after all).
	WithdrawAhead Verdict = "WithdrawAhead"
	// Withdrawn: prepared ahead of its instant and withdrawn before it
	// (runpod.AnnotationWithdrawnAhead), and its job did not run: released uncounted.
	// Its occurrence is the schedule's to decide, as if the pod had never been.
	Withdrawn Verdict = "Withdrawn"
)

// Input is what the pass knows besides the pod.
type Input struct {
	Now time.Time
	// StartingDeadline is spec.startingDeadlineSeconds (nil: none; DefaultPendingTimeout
	// applies).
	StartingDeadline *time.Duration
	// Blackout describes the blackout in effect now ("" if none). A pod whose job has not
	// started when a blackout is in effect was created before it began: it does not start.
	Blackout string
	// Decided is the newest occurrence the job's status has decided (lastScheduleTime):
	// a pod of an occurrence at or before it is that occurrence's, never a prepared pod
	// still to be decided, whatever the pass's clock says (one behind the clock that
	// decided it: an NTP step back, a new leader on a slower node).
	Decided time.Time
}

// Decision is the verdict for one pod. Recheck, when set, is when the verdict of an
// Active pod changes by itself (its pending deadline, or the end of a deleted pod's grace).
type Decision struct {
	Verdict Verdict
	Reason  string
	Recheck time.Time
}

// Decide says what becomes of pod at in.Now. occurrence is the pod's scheduled time.
// A manual run's pod (runpod.IsManual) may start until runpod.ManualWaitLimit after its
// request, whatever occurrence it re-runs and whatever startingDeadlineSeconds says.
func Decide(pod *corev1.Pod, occurrence time.Time, in Input) Decision {
	manual := false
	if at, ok := runpod.RequestedAt(pod); ok {
		limit := runpod.ManualWaitLimit
		occurrence, in.StartingDeadline, manual = at, &limit, true
	}
	started := Started(pod)
	ended := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	// A pod being deleted never becomes history: once its job has ended for good, its
	// report is its word, whatever the kubelet says (or, its node lost, fails to say) of
	// the pod's other containers and its phase.
	endedAt, over := endedForGood(pod)
	if over && !endedAt.IsZero() && pod.DeletionTimestamp != nil && !StillPrepared(pod, occurrence, in.Now, in.Decided) {
		ended = true
	}
	// The job ended for good while another regular container runs on: the pod is taken
	// as ended once it has had EndGrace to end by itself, and never while it is still
	// prepared (counted and deleted before its instant, its occurrence ran again in a new
	// pod at the instant).
	var outlived time.Time
	if at, ok := outlivedBy(pod); ok && !ended {
		outlived = at.Add(EndGrace)
		if StillPrepared(pod, occurrence, in.Now, in.Decided) && outlived.Before(occurrence) {
			outlived = occurrence
		}
		ended = !in.Now.Before(outlived)
	}
	if _, ahead := pod.Annotations[runpod.AnnotationWithdrawnAhead]; ahead {
		return decideWithdrawnAhead(pod, occurrence, in.Now, started, ended)
	}
	// lockwrap interrupted while it waited for the instant is taken away, whatever the
	// pod's other containers do.
	if why := takenAwayAhead(pod, occurrence, in, ended || over && interrupted(pod)); why != "" && !manual {
		return Decision{Verdict: WithdrawAhead, Reason: why}
	}
	if pod.DeletionTimestamp != nil && !started {
		// Not started as far as the pod says. A pod bound to a node may have started
		// all the same, its kubelet not having said so yet (status updates lag under
		// load): wait for the kubelet's last word, or for the grace to pass.
		until := pod.DeletionTimestamp.Add(TerminatingGrace)
		if pod.Spec.NodeName == "" || ended || !in.Now.Before(until) {
			if why := pod.Annotations[runpod.AnnotationWithdrawn]; why != "" {
				return Decision{Verdict: NeverStarted, Reason: "deleted before its job started: " + why}
			}
			return Decision{Verdict: NeverStarted, Reason: with("deleted before its job started", WaitingReason(pod))}
		}
		return Decision{Verdict: Active, Recheck: until}
	}
	if ended && pod.DeletionTimestamp != nil && StillPrepared(pod, occurrence, in.Now, in.Decided) {
		// Counted, a deleted pod is gone: its occurrence, still to come, got a new pod at
		// its instant, counted again. It keeps its name (and the finalizer) until then.
		return Decision{Verdict: Active, Recheck: occurrence}
	}
	if ended {
		return Decision{Verdict: Report}
	}
	if pod.DeletionTimestamp != nil {
		until := pod.DeletionTimestamp.Add(TerminatingGrace)
		if !in.Now.Before(until) {
			return Decision{Verdict: Lost, Reason: fmt.Sprintf("deleted after its job started; no report by %s (node lost or pod force-deleted)", until.UTC().Format(time.RFC3339))}
		}
		return Decision{Verdict: Active, Recheck: until}
	}
	if !outlived.IsZero() {
		return Decision{Verdict: Active, Recheck: outlived}
	}
	if started {
		return Decision{Verdict: Active}
	}
	if in.Blackout != "" {
		return withdraw(pod, with("a blackout began before its job started: "+in.Blackout, WaitingReason(pod)))
	}
	dl := PendingDeadline(occurrence, pod.CreationTimestamp.Time, in.StartingDeadline)
	if !in.Now.Before(dl) {
		what := "startingDeadlineSeconds"
		switch {
		case manual:
			what = "the manual run's wait limit (" + runpod.ManualWaitLimit.String() + " after the request)"
		case in.StartingDeadline == nil:
			what = "the pending timeout (" + DefaultPendingTimeout.String() + ")"
		}
		return withdraw(pod, with(fmt.Sprintf("its job had not started by %s (%s)", dl.UTC().Format(time.RFC3339), what), WaitingReason(pod)))
	}
	return Decision{Verdict: Active, Recheck: dl}
}

// decideWithdrawnAhead decides a pod withdrawn before its instant. lockwrap waits for
// the instant in it, so its container runs: only its end (or its kubelet's silence past
// the deletion's grace and the instant, before which lockwrap runs nothing) says whether
// the job ran.
func decideWithdrawnAhead(pod *corev1.Pod, occurrence, now time.Time, started, ended bool) Decision {
	// Ended by someone else while its container ran (its node lost, the pod GC failed
	// it as its kubelet last said): no word on the job, as a silent kubelet (below).
	silent := ended && !JobRan(pod) && runningWhenLastSeen(pod)
	switch {
	case ended && JobRan(pod) && pod.DeletionTimestamp != nil && now.Before(occurrence):
		// Its job ran before the controller's instant (its node's clock ahead): counted
		// now, the pod gone, its occurrence got a new pod at the instant (as below).
		return Decision{Verdict: Active, Recheck: occurrence}
	case ended && JobRan(pod):
		return Decision{Verdict: Report}
	case ended && !silent:
		return Decision{Verdict: Withdrawn}
	case pod.DeletionTimestamp == nil:
		return Decision{Verdict: Active} // its deletion is still to be made (prepare.go)
	}
	until := pod.DeletionTimestamp.Add(TerminatingGrace)
	if !started && (pod.Spec.NodeName == "" || !now.Before(until)) {
		return Decision{Verdict: Withdrawn}
	}
	if started && occurrence.After(until) {
		// Counted before its instant, its occurrence was counted again when it came.
		until = occurrence
	}
	if !now.Before(until) {
		return Decision{Verdict: Lost, Reason: fmt.Sprintf("withdrawn before its instant, but its kubelet did not say by %s whether the job ran (node lost or pod force-deleted)", until.UTC().Format(time.RFC3339))}
	}
	return Decision{Verdict: Active, Recheck: until}
}

// StillPrepared reports whether pod, of occurrence, is still a prepared pod at now: marked
// by the pass that created it ahead of its instant (runpod.AnnotationPreparedAhead), its
// instant still to come on the controller's clock (now), and its occurrence not decided by
// the job's status (after decided, lastScheduleTime). Such a pod decides nothing yet: the
// controller may withdraw it, and one taken away is released uncounted. Any other pod is
// its occurrence's, whatever a clock behind the one that decided it says (an NTP step
// back, a new leader on a slower node): withdrawn, it would stop a running job, or leave
// its occurrence neither run nor counted. The mark, not the pod's creation time, says it
// was prepared: that is the API server's clock, and a pod prepared a few seconds ahead by
// a controller whose clock is behind it carries a creation time after its instant.
func StillPrepared(pod *corev1.Pod, occurrence, now, decided time.Time) bool {
	_, marked := pod.Annotations[runpod.AnnotationPreparedAhead]
	return marked && now.Before(occurrence) && occurrence.After(decided)
}

// takenAwayAhead says why a pod prepared ahead of its occurrence (marked so by the pass
// that prepared it, runpod.AnnotationPreparedAhead) was taken away before its instant by
// someone else, its job not run, while the instant is still to come on the controller's
// clock: deleted (a node drain's eviction, preemption, kubectl delete, or the controller's
// own withdrawal for a blackout or deadline), or ended with lockwrap's Interrupted
// (signalled while it waited for the instant: a kubelet's eviction). Its occurrence has
// not come: counted now, it was counted again when the schedule ran it in a second pod.
// "" otherwise, and so for every pod once the instant has come (the occurrence may be
// decided then — lastScheduleTime moved to it — and a pod withdrawn after that would
// leave it neither run nor counted): such a pod counts as its occurrence, as before.
// A pod that ended with any other word (a job that ran before the controller's instant on
// a node whose clock is ahead; a skip; a kubelet that refused it, OutOfcpu) is its
// occurrence's outcome: replaced, it would run again, or fail again in a loop.
//
// "Before the instant" is judged on the controller's clock alone (StillPrepared): a
// deletion the pass sees while its clock (read just before it lists the pods) is before the
// instant was asked for before it. The API server's timestamps (creation, deletion) are
// another clock.
func takenAwayAhead(pod *corev1.Pod, occurrence time.Time, in Input, ended bool) string {
	if !StillPrepared(pod, occurrence, in.Now, in.Decided) {
		return ""
	}
	if ended && !interrupted(pod) && (pod.DeletionTimestamp == nil || Started(pod)) {
		return ""
	}
	if pod.DeletionTimestamp != nil {
		return with("deleted before its instant", pod.Annotations[runpod.AnnotationWithdrawn])
	}
	if ended {
		return with("ended before its instant", strings.TrimPrefix(pod.Status.Reason+": "+pod.Status.Message, ": "))
	}
	return ""
}

// interrupted reports whether the wrapped container's report is lockwrap's Interrupted:
// signalled before the job started.
func interrupted(pod *corev1.Pod) bool {
	cs := wrapped(pod)
	if cs == nil || cs.State.Terminated == nil {
		return false
	}
	r, _, err := report.DecodeAny([]byte(cs.State.Terminated.Message))
	return err == nil && r.Outcome == report.Interrupted
}

// JobRan reports whether an ended pod's report says its job's command started (a
// startedAt, or an outcome only a run has). An ended pod without a readable report
// counts as a run if its wrapped container ran (nothing proves the job did not).
func JobRan(pod *corev1.Pod) bool {
	cs := wrapped(pod)
	if cs == nil {
		return false
	}
	// The last attempt's word, and the one before it (restartPolicy OnFailure: an attempt
	// that ran the job and failed, then one interrupted before it started the job again).
	for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if term != nil && ranIn(term) {
			return true
		}
	}
	return false // never ran, or said it did not: lockwrap did not start the job
}

// runningWhenLastSeen reports whether the wrapped container's last known state is running.
func runningWhenLastSeen(pod *corev1.Pod) bool {
	cs := wrapped(pod)
	return cs != nil && cs.State.Running != nil
}

// ranIn reports whether an attempt's termination says the job's command started.
func ranIn(term *corev1.ContainerStateTerminated) bool {
	r, cut, err := report.DecodeAny([]byte(term.Message))
	if err != nil {
		return true
	}
	switch r.Outcome {
	case report.Succeeded, report.Failed, report.LockLost:
		return true
	case report.Error:
		return cut || r.StartedAt != "" // cut: whether it started is lost with the rest
	}
	return r.StartedAt != ""
}

// withdraw decides a pod whose job has not started as far as its status says and must
// not start: Withdraw, bound to a node or not. Its kubelet may have started it already;
// and a pod the pass sees unbound may be bound already (the binding's event not yet in
// the cache). Only its deletion settles it: the API server binds no pod being deleted,
// so a deleted pod that is unbound never started (NeverStarted, above), and a bound one
// is counted from its kubelet's word.
func withdraw(_ *corev1.Pod, reason string) Decision {
	return Decision{Verdict: Withdraw, Reason: reason}
}

func with(what, why string) string {
	if why == "" {
		return what
	}
	return what + ": " + why
}

// PendingDeadline is the last instant a pod may start its job: occurrence +
// startingDeadlineSeconds, or, without one, DefaultPendingTimeout after the later of the
// occurrence and the pod's creation.
func PendingDeadline(occurrence, created time.Time, startingDeadline *time.Duration) time.Time {
	if startingDeadline != nil {
		return occurrence.Add(max(*startingDeadline, 0))
	}
	from := occurrence
	if created.After(from) {
		from = created
	}
	return from.Add(DefaultPendingTimeout)
}

// endedForGood says whether the wrapped container has ended and will not run again (the
// pod's restartPolicy Never, or OnFailure and exit 0; a container's own policy is refused
// by runpod.Build), and when (zero if the kubelet did not say).
func endedForGood(pod *corev1.Pod) (time.Time, bool) {
	cs := wrapped(pod)
	if cs == nil || cs.State.Terminated == nil {
		return time.Time{}, false
	}
	term := cs.State.Terminated
	if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && term.ExitCode != 0 {
		return time.Time{}, false
	}
	return term.FinishedAt.Time, true
}

// Outlived reports whether the pod's job has ended for good while another regular container
// of it runs on or waits to (outlivedBy).
func Outlived(pod *corev1.Pod) bool {
	_, ok := outlivedBy(pod)
	return ok
}

// outlivedBy says whether the wrapped container has ended for good (endedForGood) while
// another regular container of its pod runs on (or waits to), and when it ended. When every regular container has ended, the kubelet is ending
// the pod (its native sidecars, within their grace): it ends by itself.
func outlivedBy(pod *corev1.Pod) (time.Time, bool) {
	at, over := endedForGood(pod)
	if !over {
		return time.Time{}, false
	}
	if at.IsZero() {
		// The kubelet did not say when (a container it lost: ContainerStatusUnknown): no
		// earlier than the pod's creation, a time every pass reads alike.
		at = pod.CreationTimestamp.Time
	}
	name := runpod.WrappedContainer(pod)
	for _, other := range pod.Status.ContainerStatuses {
		if other.Name != name && other.State.Terminated == nil {
			return at, true
		}
	}
	return time.Time{}, false
}

// wrapped is the status of the container lockwrap wraps (nil before it has one).
func wrapped(pod *corev1.Pod) *corev1.ContainerStatus {
	name := runpod.WrappedContainer(pod)
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; cs.Name == name {
			return cs
		}
	}
	return nil
}

// Started reports whether the wrapped container (lockwrap, then the job) has started:
// it runs, has terminated, or has restarted.
func Started(pod *corev1.Pod) bool {
	cs := wrapped(pod)
	return cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil ||
		cs.LastTerminationState.Terminated != nil || cs.RestartCount > 0)
}

// RunningSince returns when the wrapped container started, while it runs its first
// attempt (false otherwise, or if the kubelet did not say).
func RunningSince(pod *corev1.Pod) (time.Time, bool) {
	cs := wrapped(pod)
	if cs == nil || cs.State.Running == nil || cs.RestartCount > 0 || cs.State.Running.StartedAt.IsZero() {
		return time.Time{}, false
	}
	return cs.State.Running.StartedAt.Time, true
}

// Attempts is how many times the wrapped container has run (restartPolicy OnFailure
// restarts it in place): its restart count plus one, or zero if it never started.
func Attempts(pod *corev1.Pod) int32 {
	if !Started(pod) {
		return 0
	}
	return wrapped(pod).RestartCount + 1
}

// AttemptsNote is what a report's recent record says about the attempts behind it: ""
// for a single attempt. An occurrence is counted once, with the outcome of its last
// attempt, or of the one before when that one ran the job and the last did not
// (runstatus.ResultOf); the note says how many attempts it took.
func AttemptsNote(pod *corev1.Pod) string {
	n := Attempts(pod)
	if n <= 1 {
		return ""
	}
	note := fmt.Sprintf("after %d attempts (restartPolicy OnFailure), counted once", n)
	if prev := wrapped(pod).LastTerminationState.Terminated; prev != nil {
		// The kubelet keeps the attempt before the last one: say what it was.
		if rep, err := report.Decode([]byte(prev.Message)); err == nil {
			note += fmt.Sprintf("; the attempt before: %s, exit %d", rep.Outcome, prev.ExitCode)
			if rep.Outcome != report.Failed && rep.Outcome != report.LockLost && rep.Message != "" {
				// It did not run the job (a run is the record's own report: runstatus.ResultOf):
				// what kept it from running, which the last start past spec.backoffLimit
				// does not say (helper-111).
				note += ": " + report.TruncateRunes(rep.Message, 300)
			}
		} else {
			note += fmt.Sprintf("; the attempt before exited %d", prev.ExitCode)
			if prev.Reason != "" && prev.Reason != "Error" {
				note += " (" + prev.Reason + ")" // OOMKilled: lockwrap killed with the job, no report
			}
		}
	}
	return note
}

// WaitingReason is the pod's own account of why its job has not started: the wrapped
// container's waiting reason, an init container's, the scheduler's, or the pod's ("" if
// it says nothing).
func WaitingReason(pod *corev1.Pod) string {
	waiting := func(what string, w *corev1.ContainerStateWaiting) string {
		if w == nil || w.Reason == "" || w.Reason == "PodInitializing" || w.Reason == "ContainerCreating" && w.Message == "" {
			return ""
		}
		return strings.TrimSuffix(what+w.Reason+": "+w.Message, ": ")
	}
	if cs := wrapped(pod); cs != nil {
		if s := waiting("", cs.State.Waiting); s != "" {
			return s
		}
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if s := waiting("init container "+cs.Name+": ", cs.State.Waiting); s != "" {
			return s
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			// Its message: lockwrap's install container says why it refused (its logs when
			// it failed without one: FallbackToLogsOnError).
			msg, _, _ := strings.Cut(strings.TrimSpace(t.Message), "\n")
			out := fmt.Sprintf("init container %s: exited %d", cs.Name, t.ExitCode)
			for _, s := range []string{t.Reason, report.TruncateRunes(msg, 400)} {
				if s != "" {
					out += ": " + s
				}
			}
			return out
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
		}
	}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		return strings.Trim(pod.Status.Reason+": "+pod.Status.Message, ": ")
	}
	return ""
}
