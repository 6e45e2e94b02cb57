// Package runstatus turns finished pods into a LockedCronJob's status: it reads each
// pod's lockwrap report and folds it into the counters, the recent runs and the last
// holder. Everything here is a pure function of its inputs.
package runstatus

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// RecentLimit is how many finished occurrences status.recent keeps.
const RecentLimit = 10

// MessageLimit is the most bytes a message in status takes (a record's in recent, a run
// request's refusal), "…" included: what a report says is at most 2 KiB, but a record
// may quote a condition (up to 32 KiB: a Secret's url, a template's error) or the API
// server, and ten such records would make the object large (helper-114).
const MessageLimit = 4096

// Outcomes the controller records itself (no pod ran).
const (
	OutcomeSkippedBlackout = "SkippedBlackout"
	OutcomeMissed          = "Missed"
)

// Result is what one finished pod says about its occurrence.
type Result struct {
	Pod        string
	Occurrence time.Time
	Report     report.Report
	// Trigger is v1alpha1.TriggerScheduled or TriggerManual (runpod.Trigger of the pod).
	Trigger string
	// RequestedAt is a manual run's request time (runpod.RequestedAt); zero for others.
	RequestedAt time.Time
	// Invalid is set when the pod left no readable report; Report.Outcome is then Error.
	Invalid error
	// StartedAt is when lockwrap started the job's command (the report's startedAt, the
	// node's clock); zero when the command never started or the report does not say.
	StartedAt time.Time
	// Cut: the kubelet cut the report; only its outcome is known (report.DecodeCut).
	Cut bool
}

// StartLag is how long after its occurrence the job's command started (StartedAt −
// Occurrence: pod creation, scheduling, image pull, container start, the lock), and
// whether it is known (the command started and the pod names its occurrence). It can be
// slightly negative when the node's clock is behind the controller's.
func (r Result) StartLag() (time.Duration, bool) {
	if r.StartedAt.IsZero() || r.Occurrence.IsZero() {
		return 0, false
	}
	return r.StartedAt.Sub(r.Occurrence), true
}

// Finished reports whether a pod has ended for good.
func Finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// Occurrence reads the scheduled time a pod was created for. A scheduled pod's is in its
// name, which its controller gave it (runpod.Name) and which nobody can change since; its
// annotation, which whoever may patch the pod can change, is read only for a pod whose
// name does not say: a manual run's (its name is its request id's), or one made without
// a controller reference (as in tests). Such a pod's occurrence is never later than it
// was made (runpod.MaxClockSkew allowed: the controller's clock stamps the request, the
// API server's the pod): a manual run re-runs an occurrence that had come, or runs at
// its request. Without a readable annotation it is the pod's creation time. An
// annotation's time must be one status can hold (report.ParseTime).
func Occurrence(pod *corev1.Pod) (time.Time, error) {
	ref := metav1.GetControllerOf(pod)
	if ref != nil {
		if suffix, ok := strings.CutPrefix(pod.Name, ref.Name+"-"); ok {
			if sec, err := strconv.ParseInt(suffix, 10, 64); err == nil {
				if t, err := report.ParseTime(time.Unix(sec, 0).UTC().Format(time.RFC3339)); err == nil {
					return t, nil
				}
			}
		}
	}
	created := pod.CreationTimestamp.Time
	// Bounded by its creation: a controlled pod whose name does not say (whatever its
	// labels, which can be patched too), or one labelled a manual run's.
	bounded := !created.IsZero() && (ref != nil || runpod.IsManual(pod))
	v, ok := pod.Annotations[runpod.AnnotationScheduledTime]
	if !ok {
		if bounded {
			return created, nil
		}
		return time.Time{}, fmt.Errorf("pod %s has no %s annotation", pod.Name, runpod.AnnotationScheduledTime)
	}
	t, err := report.ParseTime(v)
	switch {
	case err != nil && bounded:
		return created, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("pod %s: annotation %s: %w", pod.Name, runpod.AnnotationScheduledTime, err)
	case bounded && t.After(created.Add(runpod.MaxClockSkew)):
		return created, nil
	}
	return t, nil
}

// ResultOf reads the report of a finished pod from the wrapped container's termination
// message. A pod without a valid report (killed before lockwrap could write, a malformed
// message) yields an Error result that says why.
func ResultOf(pod *corev1.Pod) Result {
	occ, _ := Occurrence(pod)
	res := Result{Pod: pod.Name, Occurrence: occ, Trigger: runpod.Trigger(pod)}
	res.RequestedAt, _ = runpod.RequestedAt(pod)
	invalid := func(err error) Result {
		res.Invalid = err
		res.Report = report.Report{V: report.Version, Outcome: report.Error, Message: err.Error()}
		return res
	}
	name := runpod.WrappedContainer(pod)
	var term, before *corev1.ContainerStateTerminated // the last attempt's end, the one's before it
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if cs.Name == name {
			term = cs.State.Terminated
			if term == nil {
				term = cs.LastTerminationState.Terminated
			} else {
				before = cs.LastTerminationState.Terminated
			}
		}
	}
	if term == nil {
		why := ""
		switch st := pod.Status; {
		case st.Reason != "" && st.Message != "":
			why = ": " + st.Reason + ": " + st.Message
		case st.Reason != "" || st.Message != "":
			why = ": " + st.Reason + st.Message
		default:
			// The pod says nothing: its containers may (an init container that failed).
			if w := tracking.WaitingReason(pod); w != "" {
				why = ": " + w
			}
		}
		if tracking.Started(pod) {
			// It ran and left no word (its node lost: the pod GC fails it as the kubelet
			// last said, running): the job may have run, perhaps to its end.
			return invalid(fmt.Errorf("pod ended while its job container ran, without a report%s", why))
		}
		// Its job container never ran (a kubelet failed the pod first: a node-pressure
		// eviction, an admission refusal, an init container that failed), so neither did
		// the job: a pod that never started, counted missed with its reason, as one
		// deleted before it started. It used to be counted Error, a failure of the job.
		res.Report = report.Report{V: report.Version, Outcome: report.Missed, Message: "pod ended before its job container started" + why}
		return res
	}
	r, cut, err := report.DecodeAny([]byte(term.Message))
	if cut {
		r.Message = fmt.Sprintf("lockwrap's report was cut to %d bytes by the kubelet (the pod's containers share 12 KiB of termination messages, and it had more than lockwrap was told of); only its outcome is known", len(term.Message))
		res.Report, res.Cut = r, true
		return res
	}
	if err != nil {
		return invalid(fmt.Errorf("container %s exited %d without a valid report: %w", name, term.ExitCode, err))
	}
	if why := pod.Annotations[runpod.AnnotationWithdrawn]; why != "" && r.Outcome == report.Interrupted {
		// Withdrawn while its lockwrap waited for the lock (a blackout began): the signal
		// lockwrap reports came from that.
		r.Message += " (withdrawn: " + why + ")"
	}
	if ran, ok := ranBefore(before); ok && !ranJob(r.Outcome) {
		// restartPolicy OnFailure restarted an attempt that ran the job and failed, and
		// the restart did not run it again (past its deadline, behind another holder, in
		// a blackout): the run that happened is what is counted, not a Missed ("never
		// started") or a skip.
		ran.Message = strings.TrimPrefix(ran.Message+"; the attempt after it did not run the job again: "+string(r.Outcome)+": "+r.Message, "; ")
		r = ran
	}
	res.Report = r
	if t, err := report.ParseTime(r.StartedAt); err == nil {
		res.StartedAt = t
	}
	return res
}

// ranJob reports whether an outcome is of a run of the job.
func ranJob(o report.Outcome) bool {
	return o == report.Succeeded || o == report.Failed || o == report.LockLost
}

// ranBefore is the report of an earlier attempt (before: its end, the kubelet keeps the
// one before the last) that ran the job and failed, which is why it was restarted.
func ranBefore(before *corev1.ContainerStateTerminated) (report.Report, bool) {
	if before == nil {
		return report.Report{}, false
	}
	r, err := report.Decode([]byte(before.Message))
	return r, err == nil && (r.Outcome == report.Failed || r.Outcome == report.LockLost)
}

// Fold adds one finished pod's result to the status. The caller makes sure each pod is
// folded once.
func Fold(st *v1alpha1.LockedCronJobStatus, r Result) {
	c := &st.Counters
	rep := r.Report
	switch rep.Outcome {
	case report.Succeeded:
		c.Runs++
		c.Succeeded++
	case report.Failed:
		c.Runs++
		c.Failed++
	case report.LockLost:
		c.Runs++
		c.Failed++
	case report.SkippedContention:
		c.SkippedContention++
	case report.SuppressedDuplicate:
		c.DuplicatesSuppressed++
	case report.Missed:
		// The pod started after its deadline; the job did not run.
		c.Missed++
	case report.Interrupted:
		// lockwrap was signalled before the job started; the job did not run.
		c.Interrupted++
	case report.Error:
		c.Failed++
	}
	if rep.Outcome == report.LockLost || rep.LockLost {
		c.LockLost++
	}
	if r.Occurrence.IsZero() {
		// Counted, but no record: a record needs its occurrence (the API server refuses
		// a status holding one without, and with it every status write of the job), and
		// the last holder and success are ordered by it. Only a pod whose annotation was
		// removed or forged has none (Occurrence).
		return
	}

	occ := metav1.NewTime(r.Occurrence)
	rec := v1alpha1.RunRecord{
		Occurrence:   occ,
		Outcome:      string(rep.Outcome),
		Pod:          r.Pod,
		Holder:       printable.OneLine(rep.Holder),
		FencingToken: rep.FencingToken,
		Message:      Message(rep),
		Trigger:      r.Trigger,
	}
	if !r.RequestedAt.IsZero() {
		rec.RequestedAt = &metav1.Time{Time: r.RequestedAt}
	}
	acquired, errA := report.ParseTime(rep.AcquiredAt)
	released, errR := report.ParseTime(rep.ReleasedAt)
	if errA == nil && errR == nil && !released.Before(acquired) {
		rec.Duration = &metav1.Duration{Duration: released.Sub(acquired).Round(time.Millisecond)}
	}
	if rep.Outcome == report.SkippedContention || rep.Outcome == report.SuppressedDuplicate {
		rec.Holder = printable.OneLine(rep.HeldBy)
	}
	AddRecent(st, rec)

	ran := ranJob(rep.Outcome)
	if rep.Outcome == report.Succeeded && (st.LastSuccessfulTime == nil || st.LastSuccessfulTime.Before(&occ)) {
		st.LastSuccessfulTime = &occ
	}
	if r.Cut {
		return // no holder, token or watermark to show: the last known ones stay
	}
	if rep.Outcome == report.Succeeded {
		foldLastSuccess(st, r, rep)
	}
	// Ordered as status.recent is, by when the run came (recordRan): a re-run of an old
	// occurrence that ran after a later one held the lock after it.
	came := recordRan(rec)
	known := st.LastHolder != nil && st.LastHolder.Occurrence != nil
	sameOrNewer, newer := true, true
	if known {
		last := holderRan(st.LastHolder)
		sameOrNewer, newer = !came.Before(last), came.After(last)
	}
	switch {
	case ran && sameOrNewer:
		// A holder is one line (printable.OneLine) wherever it reaches status: lastHolder's
		// identity is a column of `kubectl get lcj -A`, where a newline was a row of its own.
		h := &v1alpha1.Holder{Identity: printable.OneLine(rep.Holder), FencingToken: rep.FencingToken, Occurrence: &occ}
		if errA == nil {
			h.AcquiredAt = &metav1.Time{Time: acquired}
		}
		if errR == nil {
			h.ReleasedAt = &metav1.Time{Time: released}
		}
		h.RequestedAt = rec.RequestedAt.DeepCopy()
		st.LastHolder = h
	case rep.HeldBy != "" && newer:
		// Another holder ran this occurrence; we know who, not their token or times.
		st.LastHolder = &v1alpha1.Holder{Identity: printable.OneLine(rep.HeldBy), Occurrence: &occ, RequestedAt: rec.RequestedAt.DeepCopy()}
	}
}

// holderRan is when a lastHolder's run came: a manual run's request, else its occurrence.
func holderRan(h *v1alpha1.Holder) time.Time {
	if h.RequestedAt != nil {
		return h.RequestedAt.Time
	}
	return h.Occurrence.Time
}

// foldLastSuccess makes a succeeded run status.lastSuccess unless a later one (by fencing
// token: the key's own order, whatever order pods are folded in) is there. The watermark
// is the one the run stored, else the one it was given (the key's, unchanged by it).
func foldLastSuccess(st *v1alpha1.LockedCronJobStatus, r Result, rep report.Report) {
	if st.LastSuccess != nil && st.LastSuccess.FencingToken > rep.FencingToken {
		return
	}
	occ := metav1.NewTime(r.Occurrence)
	ls := &v1alpha1.LastSuccess{Occurrence: &occ, FencingToken: rep.FencingToken, Holder: printable.OneLine(rep.Holder),
		Watermark: report.ShortWatermark(rep.PreviousWatermark)}
	if rep.Watermark != "" {
		ls.Watermark = report.ShortWatermark(rep.Watermark)
	}
	if t, err := report.ParseTime(rep.ReleasedAt); err == nil {
		ls.FinishedAt = &metav1.Time{Time: t}
	}
	st.LastSuccess = ls
}

// Message is the text of a report's recent record: its message, then its warnings (a
// Redis that can lose the lock, a ledger entry not recorded), so that users see them.
func Message(rep report.Report) string {
	var parts []string
	if rep.Message != "" {
		parts = append(parts, rep.Message)
	}
	for _, w := range rep.Warnings {
		if w = strings.TrimSpace(w); w != "" {
			parts = append(parts, "warning: "+w)
		}
	}
	return strings.Join(parts, "; ")
}

// StatusText is msg as status holds it: escaped (package printable) and cut to
// MessageLimit.
func StatusText(msg string) string {
	return report.Shorten(printable.Text(msg), MessageLimit-len("…"))
}

// AddRecent records a finished occurrence in status.recent, newest first by when it ran
// (its occurrence, or a manual run's request time: a re-run of an occurrence from the
// past is listed as it ran), at most RecentLimit entries.
func AddRecent(st *v1alpha1.LockedCronJobStatus, rec v1alpha1.RunRecord) {
	// Its text escaped (package printable): a report, a kubelet's message may be in it; the
	// holder on one line.
	rec.Message, rec.Holder = StatusText(rec.Message), printable.OneLine(rec.Holder)
	st.Recent = append(st.Recent, rec)
	sort.SliceStable(st.Recent, func(i, j int) bool {
		return recordRan(st.Recent[j]).Before(recordRan(st.Recent[i]))
	})
	if len(st.Recent) > RecentLimit {
		st.Recent = st.Recent[:RecentLimit]
	}
}

// UnsuccessfulStreak is how many of the latest records (recent, newest first) ended
// without success since the last one that succeeded: Failed, LockLost, Error, Missed,
// Interrupted. The others (the lock held elsewhere, a blackout, already done) neither
// count nor end the streak: the job did not fail in them. What an alert on "has not
// succeeded for 3 occurrences" reads, whatever the gaps between the occurrences.
func UnsuccessfulStreak(recent []v1alpha1.RunRecord) int32 {
	var n int32
	for _, r := range recent {
		switch r.Outcome {
		case string(report.Succeeded):
			return n
		case string(report.Failed), string(report.LockLost), string(report.Error), string(report.Missed), string(report.Interrupted):
			n++
		}
	}
	return n
}

// recordRan is when a record's run came: a manual run's request, else its occurrence.
func recordRan(r v1alpha1.RunRecord) time.Time {
	if r.RequestedAt != nil {
		return r.RequestedAt.Time
	}
	return r.Occurrence.Time
}

// Succeeded reports whether a finished pod counts against successfulRunsHistoryLimit
// (its pod succeeded: the job ran fine, or the pod rightly did not run it). A pod under
// restartPolicy OnFailure whose last start ran nothing past spec.backoffLimit ends
// Succeeded (lockwrap exits 0 so that the kubelet stops), but its occurrence failed: it
// is kept among the failed ones (helper-111).
func Succeeded(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodSucceeded {
		return false
	}
	res := ResultOf(pod)
	switch res.Report.Outcome {
	case report.Failed, report.LockLost, report.Error:
		return res.Invalid != nil
	}
	return true
}

// Prune picks the finished, counted pods to delete so that at most keepOK succeeded and
// keepFailed failed pods remain, the oldest runs first (by occurrence, or a manual run's
// request time: a re-run of an occurrence from the past, just ended, is not the oldest). A
// pod whose occurrence is after now is neither deleted nor counted against the limits: its
// job ran early by the controller's clock (a prepared pod's lockwrap waits for the instant
// on its node's clock, which may be ahead), and until the controller's clock reaches the
// occurrence the pod is what tells the controller that it ran; deleted, its occurrence
// would be prepared again.
func Prune(finished []*corev1.Pod, keepOK, keepFailed int, now time.Time) []*corev1.Pod {
	var ok, failed []*corev1.Pod
	for _, p := range finished {
		if occ, err := Occurrence(p); err == nil && occ.After(now) {
			continue
		}
		if p.DeletionTimestamp != nil {
			continue // going already: it keeps no kept pod's place
		}
		if Succeeded(p) {
			ok = append(ok, p)
		} else {
			failed = append(failed, p)
		}
	}
	return append(oldest(ok, keepOK), oldest(failed, keepFailed)...)
}

func oldest(pods []*corev1.Pod, keep int) []*corev1.Pod {
	if len(pods) <= keep {
		return nil
	}
	sort.SliceStable(pods, func(i, j int) bool {
		return podRan(pods[i]).Before(podRan(pods[j]))
	})
	return pods[:len(pods)-keep]
}

// podRan is when a pod's run came: a manual run's request, else its occurrence.
func podRan(pod *corev1.Pod) time.Time {
	if t, ok := runpod.RequestedAt(pod); ok {
		return t
	}
	t, _ := Occurrence(pod)
	return t
}
