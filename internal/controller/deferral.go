package controller

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// Status writes for pure pod-creation bookkeeping are deferred (issue 13): when a pass
// changes nothing but what the job's pods already say — lastScheduleTime (the newest
// occurrence pod), nextScheduleTime, the upcoming preview and the Ready message that
// names the next occurrence, and active pods that have not started and are not stuck — the status write is
// left to the next pass that has news (a pod started, a report to fold, a decision). The
// deterministic pod name guards against a second pod meanwhile, and lastScheduleTime is
// read back from the pods (noteScheduled), so a restart plans the same way.

// deferrable reports whether next differs from old only in bookkeeping the pods carry.
// news says whether an active pod has news (podNews).
func deferrable(old, next *v1alpha1.LockedCronJobStatus, news func(name string) bool) bool {
	for _, ref := range old.Active {
		if !slices.ContainsFunc(next.Active, func(r corev1.ObjectReference) bool { return r.Name == ref.Name }) {
			return false // a pod left: always news
		}
	}
	for _, ref := range next.Active {
		if news(ref.Name) {
			// A pod started or is stuck: users see it in ACTIVE, and while one runs the
			// schedule columns stay current (a prepared pod reaching its instant).
			return false
		}
	}
	a, b := old.DeepCopy(), next.DeepCopy()
	for _, s := range []*v1alpha1.LockedCronJobStatus{a, b} {
		for _, u := range s.Upcoming {
			if u.BlockedBy != "" {
				return false // a blackout preview is news
			}
		}
		s.LastScheduleTime, s.NextScheduleTime, s.Upcoming = nil, nil, nil
		s.Active, s.ActiveCount = nil, 0
	}
	ra, rb := meta.FindStatusCondition(a.Conditions, ConditionReady), meta.FindStatusCondition(b.Conditions, ConditionReady)
	if ra != nil && rb != nil && ra.Status == rb.Status && ra.Reason == ReasonScheduled && rb.Reason == ReasonScheduled && ra.ObservedGeneration == rb.ObservedGeneration {
		rb.Message = ra.Message
	}
	return equality.Semantic.DeepEqual(a, b)
}

// noteScheduled moves lastScheduleTime up to the newest occurrence that has a pod of the
// job's own (scheduled) name: a pass whose status write was deferred recorded it there.
// Pods prepared ahead of an occurrence still to come (after now) do not count.
func noteScheduled(job *v1alpha1.LockedCronJob, st *v1alpha1.LockedCronJobStatus, pods []corev1.Pod, now time.Time) {
	var newest time.Time
	for i := range pods {
		occ, err := runstatus.Occurrence(&pods[i])
		if err != nil || pods[i].Name != runpod.Name(job.Name, occ) || occ.After(now) {
			continue
		}
		if occ.After(newest) {
			newest = occ
		}
	}
	if !newest.IsZero() && (st.LastScheduleTime == nil || newest.After(st.LastScheduleTime.Time)) {
		st.LastScheduleTime = &metav1.Time{Time: newest}
	}
}

// podNews is the news predicate of deferrable for the pass's active pods: a pod has
// news for its job's status once its job started, or once it is stuck (a container
// waiting for a reason other than being created, or the pod unschedulable): users see it
// in ACTIVE from then on. A pod just created, scheduled and starting has none.
func podNews(active []*corev1.Pod) func(string) bool {
	return func(name string) bool {
		for _, p := range active {
			if p.Name == name {
				return hasNews(p)
			}
		}
		return false
	}
}

func hasNews(pod *corev1.Pod) bool {
	if tracking.Started(pod) || (pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending) {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return true
			}
			if cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 {
				return true
			}
		}
	}
	return false
}
