package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// Accounting: every occurrence is decided exactly once — started (its pod's report is
// folded when the pod is counted), skipped, deferred or missed — and recorded the same
// way (record). Pods carry runpod.FinalizerTracking until the pass that counts them.

// recorded is a decision whose metric is emitted once status is written.
type recorded struct {
	outcome string
	n       int64
}

// The causes of the controller's own decisions (record's cause: the Event's action, which
// keys its series; see seriesReasons). A Missed held back by the job's conditions takes
// the condition's reason (SecretNotFound, …) as its cause.
const (
	CauseBacklog              = "Backlog"              // an earlier pod has not started its job
	CauseStartingDeadline     = "StartingDeadline"     // not started within startingDeadlineSeconds
	CauseSuperseded           = "Superseded"           // a later occurrence came before it started
	CauseScheduleChanged      = "ScheduleChanged"      // schedule, time zone or suspend changed first
	CauseUnrecorded           = "Unrecorded"           // no decision about it was recorded
	CauseBlackoutPastDeadline = "BlackoutPastDeadline" // a blackout lasted past its deadline
)

// record is the one way the controller records its own decision about an occurrence
// (one that no pod report decides): the counter, status.recent, the metric (once status
// is written), an Event whose reason is the outcome and whose series is the outcome's and
// cause's, and a log line.
func (p *pass) record(outcome, cause string, occ time.Time, reason string) {
	p.recordN(outcome, cause, occ, 1, reason)
}

// recordN records n occurrences up to occ (the most recent of them) at once: status.recent
// holds occ, the counter grows by n.
func (p *pass) recordN(outcome, cause string, occ time.Time, n int64, reason string) {
	if n <= 0 {
		return
	}
	c := &p.status.Counters
	typ, verb := corev1.EventTypeNormal, "skipped"
	switch outcome {
	case runstatus.OutcomeMissed:
		c.Missed += n
		typ, verb = corev1.EventTypeWarning, "missed"
	case runstatus.OutcomeSkippedBlackout:
		c.SkippedBlackout += n
	case string(report.SuppressedDuplicate):
		c.DuplicatesSuppressed += n
		verb = "not started"
	}
	at := occ.UTC().Format(time.RFC3339)
	what, msg := "occurrence "+at, reason
	if n > 1 {
		what = fmt.Sprintf("%d occurrences up to %s", n, at)
		msg = fmt.Sprintf("%d occurrences up to this one: %s", n, reason)
	}
	runstatus.AddRecent(p.status, v1alpha1.RunRecord{Occurrence: metav1.NewTime(occ), Outcome: outcome, Message: msg, Trigger: v1alpha1.TriggerScheduled})
	p.causedEventf(typ, outcome, cause, "%s %s: %s", what, verb, reason)
	p.recorded = append(p.recorded, recorded{outcome, n})
	p.log.Info("occurrence decided", "outcome", outcome, "occurrence", at, "count", n, "reason", reason)
}

// decidedUpTo is the newest occurrence st has decided: lastScheduleTime (zero when none).
func decidedUpTo(st *v1alpha1.LockedCronJobStatus) time.Time {
	if st.LastScheduleTime == nil {
		return time.Time{}
	}
	return st.LastScheduleTime.Time
}

// track decides what becomes of each of the job's pods (package tracking): active pods
// go to p.active; finished pods, and pods that never started or were lost, are counted
// (p.count); pods counted in an earlier pass are settled (marked, released, deleted).
func (p *pass) track(pods []corev1.Pod) {
	pending := map[string]bool{}
	p.marked = map[string]bool{}
	for _, n := range p.status.CountedPods {
		pending[n] = true
	}
	in := tracking.Input{Now: p.now, StartingDeadline: startingDeadline(p.job), Decided: decidedUpTo(p.status)}
	for i := range pods {
		pod := &pods[i]
		counted := pod.Labels[runpod.LabelCounted] == "true"
		if counted {
			p.marked[pod.Name] = true
		}
		if counted || pending[pod.Name] {
			p.settle(pod, pending[pod.Name] && !counted)
			continue
		}
		occ, _ := runstatus.Occurrence(pod)
		d := tracking.Decide(pod, occ, in)
		p.setAside(pod, d.Verdict)
		switch d.Verdict {
		case tracking.Withdrawn:
			if then := p.passedOver(pod, occ, in.Decided); then != "" {
				p.count(pod, withoutReport(pod, occ, report.Missed, fmt.Sprintf("its pod, prepared ahead, was withdrawn (%s) and did not run the job; %s", pod.Annotations[runpod.AnnotationWithdrawnAhead], then)))
				continue
			}
			// Released, not counted: the schedule decides its occurrence. Named in
			// status.countedPods until marked, as a counted pod is, so that a pass that
			// finds it unmarked (the patch failed, the cache lags) settles it rather
			// than deciding it again (above, once the schedule has gone past it).
			p.countedPods = append(p.countedPods, pod.Name)
			p.mark = append(p.mark, pod)
			if pod.DeletionTimestamp == nil {
				p.doomed = append(p.doomed, pod) // ended before its deletion was made again
			}
		case tracking.Active:
			p.active = append(p.active, pod)
			if !d.Recheck.IsZero() {
				p.requeueAt(d.Recheck.Sub(p.now) + 10*time.Millisecond)
			}
		case tracking.Report:
			res := runstatus.ResultOf(pod)
			if note := tracking.AttemptsNote(pod); note != "" && res.Invalid == nil {
				res.Report.Message = strings.TrimPrefix(res.Report.Message+"; "+note, "; ")
			}
			p.count(pod, res)
		case tracking.NeverStarted:
			p.count(pod, withoutReport(pod, occ, report.Missed, d.Reason))
		case tracking.Withdraw:
			p.active = append(p.active, pod) // until its kubelet has said what happened
			p.withdraw(pod, d.Reason)
		case tracking.WithdrawAhead:
			p.active = append(p.active, pod) // aside, until its kubelet has said what happened
			p.withdrawAhead(pod, d.Reason)
		case tracking.Lost:
			p.count(pod, withoutReport(pod, occ, report.Error, d.Reason))
		}
	}
}

// passedOver says why the occurrence occ of pod, withdrawn ahead, its job not run, is
// the pod's to count (missed), or "" if it is the schedule's to decide: one after decided
// (the watermark), or one that no schedule in force had when it came. The watermark went
// past it while its pod had not said only where the pod was left to count it: a change of
// spec.schedule, timeZone or suspend after it came (accountUntilChange names the pod in
// status.dueBeforeChange, in the write that moves the watermark), or a later occurrence's
// pod under the schedule in force (catchUp). Once its pod has said, it is released named
// in status.countedPods, so that this is asked once.
func (p *pass) passedOver(pod *corev1.Pod, occ, decided time.Time) string {
	if occ.After(decided) {
		return ""
	}
	if slices.Contains(p.status.DueBeforeChange, pod.Name) {
		return "spec.schedule, spec.timeZone or spec.suspend changed after it came and before it said so"
	}
	since := p.status.ScheduleSince
	sched, ok := observedSchedule(p.job.Spec.Schedule, p.job.Spec.TimeZone, p.status.ObservedSchedule)
	if ok && (since == nil || occ.After(since.Time)) && sched.Has(occ) {
		return "a later occurrence was decided before it said so"
	}
	return ""
}

func withoutReport(pod *corev1.Pod, occ time.Time, o report.Outcome, why string) runstatus.Result {
	requested, _ := runpod.RequestedAt(pod)
	return runstatus.Result{Pod: pod.Name, Occurrence: occ, Trigger: runpod.Trigger(pod), RequestedAt: requested, Report: report.Report{V: report.Version, Outcome: o, Message: why}}
}

// withdrawal is a pod to delete, uncounted, with why (tracking.Withdraw).
type withdrawal struct {
	pod *corev1.Pod
	why string
}

// withdraw takes back an active pod whose job has not started as far as its status
// says and must not start (tracking.Withdraw): it stays active until its deletion (or
// its kubelet) has said what happened, and no longer holds back the due occurrence
// (unstarted).
func (p *pass) withdraw(pod *corev1.Pod, why string) {
	if p.isWithdrawing(pod) {
		return
	}
	p.withdrawing = append(p.withdrawing, withdrawal{pod, why})
	occ, _ := runstatus.Occurrence(pod)
	p.log.Info("pod withdrawn", "pod", pod.Name, "occurrence", occ.UTC().Format(time.RFC3339), "reason", why)
}

func (p *pass) isWithdrawing(pod *corev1.Pod) bool {
	return slices.ContainsFunc(p.withdrawing, func(w withdrawal) bool { return w.pod.Name == pod.Name })
}

// withdrawUnstarted withdraws the active pods whose job has not started when a blackout is
// in effect (they were created before it began): they are deleted, and counted once the
// API server or their kubelet has said whether the job started (tracking.Withdraw).
func (p *pass) withdrawUnstarted(blackout string) {
	in := tracking.Input{Now: p.now, StartingDeadline: startingDeadline(p.job), Blackout: blackout}
	for _, pod := range p.active {
		occ, _ := runstatus.Occurrence(pod)
		if occ.After(p.now) {
			continue // prepared ahead: withdrawn, not counted (prepare.go)
		}
		// (A pod deleted unbound was counted by track; one deleted on a node waits.)
		if d := tracking.Decide(pod, occ, in); d.Verdict == tracking.Withdraw {
			p.withdraw(pod, d.Reason)
		}
	}
}

// count folds one pod's result into status, exactly once: status.countedPods names it
// until the pod is marked counted and released (after the status write, in this pass).
func (p *pass) count(pod *corev1.Pod, res runstatus.Result) {
	// Its text as status, Events and logs may show it: a job can write its own report.
	res.Report = res.Report.Printable()
	runstatus.Fold(p.status, res)
	p.counted = append(p.counted, res)
	p.countedPods = append(p.countedPods, pod.Name)
	p.mark = append(p.mark, pod)
	if !runstatus.Finished(pod) && pod.DeletionTimestamp == nil {
		p.doomed = append(p.doomed, pod)
	}
	if res.Invalid != nil {
		p.eventf(corev1.EventTypeWarning, ReasonReportInvalid, "pod %s: %v; counted as Error", pod.Name, res.Invalid)
	} else {
		p.eventf(eventType(res.Report.Outcome), string(res.Report.Outcome), "%s", describe(res))
	}
	p.log.Info("pod counted", "pod", pod.Name, "occurrence", res.Occurrence.UTC().Format(time.RFC3339), "outcome", string(res.Report.Outcome), "reason", res.Report.Message)
}

// settle handles a pod counted in an earlier pass: still to be marked (a restart came
// between the status write and the mark), still holding the finalizer, not yet deleted
// though it never ran, or finished history.
func (p *pass) settle(pod *corev1.Pod, unmarked bool) {
	if unmarked {
		p.countedPods = append(p.countedPods, pod.Name)
	}
	if unmarked || controllerutil.ContainsFinalizer(pod, runpod.FinalizerTracking) {
		p.mark = append(p.mark, pod)
	}
	_, ahead := pod.Annotations[runpod.AnnotationWithdrawnAhead]
	unrun := ahead && !tracking.JobRan(pod)
	if unrun {
		p.setAside(pod, tracking.Withdrawn)
	}
	switch {
	case runstatus.Finished(pod) && unrun && pod.DeletionTimestamp == nil:
		p.doomed = append(p.doomed, pod) // withdrawn, its deletion failed: it holds its occurrence's name
	case runstatus.Finished(pod):
		if !unmarked {
			p.history = append(p.history, pod)
		}
	case pod.DeletionTimestamp == nil:
		p.doomed = append(p.doomed, pod) // counted as never started: it must not start now
	}
}

// unstarted returns an active pod (other than the due occurrence's own) whose job has
// not started yet, if any. A manual run's pod is never one: it has a backlog of its own
// (one pod per request) and does not hold back scheduled occurrences.
func (p *pass) unstarted(due time.Time) *corev1.Pod {
	own := runpod.Name(p.job.Name, due)
	for _, pod := range p.active {
		if pod.Name != own && !runpod.IsManual(pod) && pod.DeletionTimestamp == nil && !tracking.Started(pod) && !p.isWithdrawing(pod) && !p.isAside(pod.Name) {
			return pod
		}
	}
	return nil
}

// backlogReason says why the due occurrence adds no pod while an earlier one waits.
func backlogReason(pod *corev1.Pod) string {
	occ, _ := runstatus.Occurrence(pod)
	msg := fmt.Sprintf("pod %s of occurrence %s has not started its job yet", pod.Name, occ.UTC().Format(time.RFC3339))
	if why := tracking.WaitingReason(pod); why != "" {
		msg += " (" + why + ")"
	}
	return msg + "; at most one pod per job waits to start"
}

// holdsPodsBack is the Ready=False reasons under which a pass makes no pod for a due
// occurrence. (A refused schedule, or one that never fires, has no occurrences of the
// schedule in force: those came after it was fixed.)
var holdsPodsBack = map[string]bool{ReasonInvalidTemplate: true, ReasonPodCreateRefused: true, ReasonInvalidBlackout: true}

// missedReason says why occurrences that were due did not start, as a cause (record) and
// a message: what held them back in the previous pass (its conditions, those that stop
// pod creation), or the deadline.
func missedReason(p *pass) (cause, reason string) {
	prev := p.job.Status.Conditions
	if c := meta.FindStatusCondition(prev, ConditionLockBackendReady); c != nil && c.Status == metav1.ConditionFalse &&
		(&backendError{reason: c.Reason}).blocking() {
		return c.Reason, fmt.Sprintf("held back while the lock backend was not ready (%s: %s)", c.Reason, c.Message)
	}
	if c := meta.FindStatusCondition(prev, ConditionReady); c != nil && c.Status == metav1.ConditionFalse && holdsPodsBack[c.Reason] {
		return c.Reason, fmt.Sprintf("held back (%s: %s)", c.Reason, c.Message)
	}
	if dl := startingDeadline(p.job); dl != nil {
		return CauseStartingDeadline, fmt.Sprintf("not started within startingDeadlineSeconds (%s): the controller was down or busy", dl)
	}
	return CauseSuperseded, "superseded by a later occurrence before it started: the controller was down or busy"
}

// accountUntilChange counts as missed the occurrences of the schedule last observed
// (spec.schedule, spec.timeZone, spec.suspend as status.observedSchedule records them)
// that fell due after the last pass and up to the change at `at` (the controller was
// down, or they were held back): none of them will start under the new spec.
func accountUntilChange(p *pass, observed string, at time.Time) {
	sched, ok := observedSchedule("", "", observed)
	if !ok {
		return
	}
	from := earliest(p.job, p.status)
	if d := p.status.Deferred; d != nil && d.After(from) {
		// The pass that deferred it decided the occurrences before it (a superseded one
		// is already counted skippedBlackout), whatever lastScheduleTime says: status
		// written before accountDeferred moved it up.
		from = d.Add(-time.Nanosecond)
	}
	plan := sched.Plan(schedule.Input{Earliest: from, Now: at})
	if plan.Latest == nil {
		return
	}
	n := plan.Missed
	if plan.Due != nil {
		n++
	}
	// An occurrence whose withdrawn pod may yet say its job ran (prepare.go) is that
	// pod's to count: counted missed here, it was counted again by the pod's report.
	var waiting []time.Time
	for name, a := range p.aside {
		if a.waiting && a.occ.After(from) && !a.occ.After(at) && sched.Has(a.occ) {
			n--
			waiting = append(waiting, a.occ)
			p.dueBeforeChange = append(p.dueBeforeChange, name)
		}
	}
	last := *plan.Latest
	for slices.ContainsFunc(waiting, last.Equal) {
		t, ok := sched.LatestIn(from, last.Add(-time.Nanosecond))
		if !ok {
			break
		}
		last = t
	}
	p.recordN(runstatus.OutcomeMissed, CauseScheduleChanged, last, n, fmt.Sprintf("not started before spec.schedule/timeZone/suspend changed at %s", at.UTC().Format(time.RFC3339)))
	p.status.LastScheduleTime = &metav1.Time{Time: *plan.Latest}
	p.status.Deferred = nil
}

// specChangedAt is when spec.schedule, spec.timeZone or spec.suspend last changed, as
// the job's managed fields record it (second precision), or now if they do not.
func specChangedAt(job *v1alpha1.LockedCronJob, now time.Time) time.Time {
	var t time.Time
	for _, mf := range job.ManagedFields {
		if mf.Subresource != "" || mf.Time == nil || mf.FieldsV1 == nil {
			continue
		}
		raw := string(mf.FieldsV1.Raw)
		if strings.Contains(raw, `"f:suspend"`) || strings.Contains(raw, `"f:schedule"`) || strings.Contains(raw, `"f:timeZone"`) {
			if mf.Time.After(t) {
				t = mf.Time.Time
			}
		}
	}
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

// markCounted, after the status write, labels the pods counted and removes their
// tracking finalizer in one patch; the next pass drops them from status.countedPods.
// Then it deletes the pods that never started, and the withdrawn ones (their reason
// noted on them first: tracking counts them from it if they never started).
func (r *LockedCronJobReconciler) markCounted(ctx context.Context, p *pass) error {
	for _, pod := range p.mark {
		patch := client.StrategicMergeFrom(pod.DeepCopy())
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[runpod.LabelCounted] = "true"
		controllerutil.RemoveFinalizer(pod, runpod.FinalizerTracking)
		if err := r.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("marking pod %s counted: %w", pod.Name, err)
		}
	}
	for _, pod := range p.doomed {
		if err := r.Delete(ctx, pod, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s that never started: %w", pod.Name, err)
		}
	}
	for _, w := range p.withdrawing {
		if err := r.withdrawPod(ctx, w, runpod.AnnotationWithdrawn); err != nil {
			return err
		}
	}
	return nil
}

// withdrawPod notes why on the pod (under annotation key), then deletes it, keeping its
// tracking finalizer: in that order, so that every pass that sees it deleted knows why
// (tracking.Decide counts it from that and its kubelet's word). A pod already gone is
// left alone.
func (r *LockedCronJobReconciler) withdrawPod(ctx context.Context, w withdrawal, key string) error {
	pod := w.pod
	w.why = report.Shorten(w.why, runpod.MaxNoteBytes-len("…")) // a kubelet's or scheduler's message may be in it
	if pod.Annotations[key] != w.why {
		patch := client.MergeFrom(pod.DeepCopy())
		metav1.SetMetaDataAnnotation(&pod.ObjectMeta, key, w.why)
		if err := r.Patch(ctx, pod, patch); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("noting why pod %s is withdrawn: %w", pod.Name, err)
		}
	}
	if err := r.Delete(ctx, pod, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("withdrawing pod %s: %w", pod.Name, err)
	}
	return nil
}

// releasePods lets go of the pods of a job that is gone or being deleted (uid: the job's,
// or "" when it is gone; decided: its status's lastScheduleTime, zero when gone), so that
// none is left behind (letGo). Nothing is counted any more: the job's status goes with it.
func (r *LockedCronJobReconciler) releasePods(ctx context.Context, ns, name string, uid types.UID, decided time.Time) error {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{runpod.LabelJob: name}); err != nil {
		return err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if ref := metav1.GetControllerOf(pod); ref != nil && uid != "" && ref.UID != uid {
			continue // another job of the same name
		}
		if err := r.letGo(ctx, pod, uid, decided); err != nil {
			return err
		}
	}
	return nil
}

// letGo lets go of a pod no job will count: a pod of a job being deleted (uid) or gone
// (""), or one no job controls any more (orphanedJob). One still prepared ahead of its
// instant is deleted (preparedForNothing): the garbage collector deletes a deleted job's
// pods, but not with --cascade=orphan, and then lockwrap in it would run the job at its
// instant for a job that is gone. Any other is released: the tracking finalizer taken
// off, and, if no job controls it, its mark as prepared (runpod.AnnotationPreparedAhead),
// by which it stayed among the pods of its label's job (orphanedJob) until it was let go.
func (r *LockedCronJobReconciler) letGo(ctx context.Context, pod *corev1.Pod, uid types.UID, decided time.Time) error {
	switch letGoOf(pod, uid, r.Clock.Now(), decided) {
	case letGoWithdraw:
		return r.withdrawOrphan(ctx, pod)
	case letGoRelease:
		return r.releasePod(ctx, pod)
	}
	return nil
}

// letGoAction is what letGo does with a pod.
type letGoAction int

const (
	letGoNothing  letGoAction = iota
	letGoWithdraw             // delete it (preparedForNothing)
	letGoRelease              // take the tracking finalizer (and a no one's pod's mark) off
)

// letGoOf says what letGo does with pod at now.
func letGoOf(pod *corev1.Pod, uid types.UID, now, decided time.Time) letGoAction {
	_, marked := pod.Annotations[runpod.AnnotationPreparedAhead]
	orphan := metav1.GetControllerOfNoCopy(pod) == nil
	switch {
	case preparedForNothing(pod, uid, now, decided):
		return letGoWithdraw
	case controllerutil.ContainsFinalizer(pod, runpod.FinalizerTracking) || orphan && marked && pod.DeletionTimestamp == nil:
		return letGoRelease
	}
	return letGoNothing
}

// preparedForNothing reports whether pod, of a job being deleted (uid) or gone (""), is
// still prepared ahead of its instant (tracking.StillPrepared, on the controller's clock,
// and after decided, what the job's status had decided), neither ended nor being
// deleted: its occurrence has not come, and no job wants it. Of a job gone, only a pod
// no job controls any more (orphaned by the garbage collector, or by hand): one that
// still names the gone job is the collector's to delete, and one that names another job
// (created again under the name since) is that job's.
func preparedForNothing(pod *corev1.Pod, uid types.UID, now, decided time.Time) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if uid == "" && metav1.GetControllerOfNoCopy(pod) != nil {
		return false
	}
	occ, err := runstatus.Occurrence(pod)
	return err == nil && tracking.StillPrepared(pod, occ, now, decided)
}

// withdrawOrphan deletes a prepared pod no job wants (preparedForNothing), its tracking
// finalizer taken off and why noted on it (runpod.AnnotationWithdrawnAhead) in one patch,
// of the pod as seen (a Conflict says to look again), and only that pod (a pod of its
// name made since is another's). It keeps its mark as prepared: until it is gone it stays
// among the pods of its label's job (orphanedJob), whose occurrence may need its name.
func (r *LockedCronJobReconciler) withdrawOrphan(ctx context.Context, pod *corev1.Pod) error {
	const why = "no LockedCronJob controls it any more (its job deleted with --cascade=orphan, or its owner reference removed) and its occurrence's instant has not come"
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(pod, runpod.FinalizerTracking)
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, runpod.AnnotationWithdrawnAhead, why)
	if err := r.Patch(ctx, pod, patch); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("withdrawing pod %s, which no job controls: %w", pod.Name, err)
	}
	if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("withdrawing pod %s, which no job controls: %w", pod.Name, err)
	}
	logf.FromContext(ctx).Info("prepared pod no job controls withdrawn", "pod", pod.Name, "reason", why)
	return nil
}

// bookkeeping sets the status lists that keep counting exact across passes and restarts:
// status.countedPods (counted, to be marked), status.dueBeforeChange (left by a change
// of the schedule to pods that have not said yet: those named before that still wait, and
// this pass's).
func (p *pass) bookkeeping() {
	p.status.CountedPods = sortedNames(p.countedPods)
	due := p.dueBeforeChange
	for _, n := range p.status.DueBeforeChange {
		if a, ok := p.aside[n]; ok && a.waiting {
			due = append(due, n)
		}
	}
	p.status.DueBeforeChange = sortedNames(due)
}

// sortedNames is names sorted, nil when empty.
func sortedNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return slices.Compact(names)
}
