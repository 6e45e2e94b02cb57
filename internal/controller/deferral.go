package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
// read back from the pods (catchUp), so a restart plans the same way. Hence a pass that
// deletes such a pod (history beyond its limit) writes first (recordsUnwritten).
//
// So is dropping from status.countedPods the pods that are labelled counted: the name is
// there for a restart between the status write that counted the pod and its label, and
// once the label is on, the name says nothing the pod does not. It goes with the job's
// next write (its next run's), instead of costing a status PUT of its own per run. A
// name whose pod is gone is dropped at once, so that a name stays only while its pod
// exists and no new pod can take it.

// nameStillCounted reports whether name is in status.countedPods of the job as this pass
// read it: a counted pod's, gone (else the POST would meet it), its name dropped by this
// pass. A pod made under it now would be taken for the counted one by a pass that reads
// the name again — this pass's write lost, or a cache behind it — and deleted uncounted
// while it runs its job (a prepared pod withdrawn and prepared again; a manual id used
// again). The pass comes back once its write has landed; the occurrence stays due.
func nameStillCounted(p *pass, name string) bool {
	if !slices.Contains(p.job.Status.CountedPods, name) {
		return false
	}
	p.requeueAt(conflictRetry)
	p.holdCreates = true
	return true
}

// recordsUnwritten reports whether a pod about to be pruned is the only record that its
// scheduled occurrence was decided: an occurrence after the written lastScheduleTime
// (the write that moved it there deferred). Then the pass writes its status before the
// pod goes, or the next pass would find neither and start the occurrence again. It
// happens when a pod is counted before the controller's clock reaches its occurrence
// (prepared ahead, its node's clock ahead), and no history is kept. A manual run's pod
// records no scheduled occurrence.
func recordsUnwritten(prune []*corev1.Pod, written *metav1.Time) bool {
	for _, pod := range prune {
		occ, err := runstatus.Occurrence(pod)
		if err == nil && !runpod.IsManual(pod) && (written == nil || occ.After(written.Time)) {
			return true
		}
	}
	return false
}

// deferrable reports whether next differs from old only in bookkeeping the pods carry.
// news says whether an active pod has news (podNews); latest is the name of the pod of
// next.lastScheduleTime's occurrence; marked says whether a pod is seen labelled counted.
func deferrable(old, next *v1alpha1.LockedCronJobStatus, news func(name string) bool, latest string, marked func(name string) bool) bool {
	listed := func(list []corev1.ObjectReference, name string) bool {
		return slices.ContainsFunc(list, func(r corev1.ObjectReference) bool { return r.Name == name })
	}
	for _, ref := range old.Active {
		if !listed(next.Active, ref.Name) {
			return false // a pod left: always news
		}
	}
	moved := !old.LastScheduleTime.Equal(next.LastScheduleTime)
	for _, ref := range next.Active {
		// A pod that started or is stuck is news when the last write did not list it
		// (users see it in ACTIVE), or when it is the pod of the occurrence that
		// lastScheduleTime moves to (a prepared pod reaching its instant). A pod of an
		// earlier occurrence that still runs is not: a new occurrence's pod is written
		// with its own start, not at its creation (issue 13: with every creation written
		// at once, a minute's creations took twice as long).
		if news(ref.Name) && (!listed(old.Active, ref.Name) || (moved && ref.Name == latest)) {
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
		s.CountedPods = slices.DeleteFunc(s.CountedPods, marked)
	}
	ra, rb := meta.FindStatusCondition(a.Conditions, ConditionReady), meta.FindStatusCondition(b.Conditions, ConditionReady)
	if ra != nil && rb != nil && ra.Status == rb.Status && ra.Reason == ReasonScheduled && rb.Reason == ReasonScheduled && ra.ObservedGeneration == rb.ObservedGeneration {
		rb.Message = ra.Message
	}
	return equality.Semantic.DeepEqual(a, b)
}

// startNewsDelay is how long a pod runs before its start is news for its job's status
// (newsAt). A job that ends sooner has its start and its end in one status write; and at
// the instant many jobs share, the start writes of the first pods wait until the
// creations of the others are done, instead of taking the client's QPS from them (issue
// 13: with every start written at once, the 1,000 creations of a minute took twice as
// long). Users see the pod in ACTIVE at most this much later.
const startNewsDelay = 10 * time.Second

// podNews is the news predicate of deferrable for the pass's active pods at now (newsAt).
// A pod prepared ahead whose instant has come is news too, whenever its job started: the
// write that moves lastScheduleTime onto it (deferrable) must not wait for its start's
// news. Until that write lands the pod is still a prepared one for a pass whose clock is
// behind the instant (a new leader on a slower node: tracking.StillPrepared), which a
// suspend, schedule edit or blackout would withdraw, stopping a job lockwrap started on
// the instant. Where the pod's start was not yet news at the instant (its container
// started less than startNewsDelay before it, or not yet), the write comes at the instant
// instead of with that news; it is one more only when the job also ends before its start
// is news. With a short prepareAheadSeconds (10) and jobs that end within 10 s, that could
// be every run; measured at 1,000 such jobs it was 1.66 status writes per occurrence
// against 1.63 without this (docs/reliability.md), the price of not stopping a job.
func podNews(active []*corev1.Pod, now time.Time) func(string) bool {
	return func(name string) bool {
		for _, p := range active {
			if p.Name == name {
				if _, prepared := p.Annotations[runpod.AnnotationPreparedAhead]; prepared {
					if occ, err := runstatus.Occurrence(p); err == nil && !now.Before(occ) {
						return true
					}
				}
				at, ok := newsAt(p)
				return ok && !now.Before(at)
			}
		}
		return false
	}
}

// requeueForNews has the pass come back when an active pod's start becomes news.
func (p *pass) requeueForNews() {
	for _, pod := range p.active {
		if at, ok := newsAt(pod); ok && p.now.Before(at) {
			p.requeueAt(at.Sub(p.now))
		}
	}
}

// hasNews reports whether the pod has, or will have, news for its job's status (newsAt).
func hasNews(pod *corev1.Pod) bool {
	_, ok := newsAt(pod)
	return ok
}

// newsAt says from when a pod has news for its job's status (users see it in ACTIVE):
// at once when it is stuck (a container waiting for a reason other than being created,
// the pod unschedulable, an attempt that failed) or has ended; startNewsDelay after its
// job started while it runs its first attempt; at once if it started and the kubelet did
// not say when. A pod just created, scheduled and starting has none (false).
func newsAt(pod *corev1.Pod) (time.Time, bool) {
	if stuck(pod) {
		return time.Time{}, true
	}
	if tracking.Started(pod) || (pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending) {
		if since, ok := tracking.RunningSince(pod); ok && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return since.Add(startNewsDelay), true
		}
		return time.Time{}, true
	}
	return time.Time{}, false
}

// stuck reports whether a pod that has not started its job is stuck, or its job's
// attempt failed.
func stuck(pod *corev1.Pod) bool {
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

// decided remembers, per job, what this manager decided that its caches may not show yet:
// the status.lastScheduleTime of its last status write that landed (written), and the
// occurrences whose pods it created since (created). These are the "expectations" of the
// Kubernetes controllers. The caches lag behind the API server, and a pass plans from
// what they show:
//   - a deferred status write leaves lastScheduleTime to the pods (catchUp); a pod cache
//     behind the POST (a slow watch, a relist after kube-apiserver restarted) would let
//     the next pass plan from an older lastScheduleTime and count the created occurrence
//     missed while its pod runs it (the soak found it: missed 3 more than the
//     occurrences without a pod report);
//   - a job cache behind the pass's own status write would let the next pass decide again
//     what that write decided. Its own status write then fails (resourceVersion), but the
//     pod it creates first stays: the soak found an occurrence counted missed (backlog
//     bound) and then run by a pod a stale pass created for it.
//
// A restarted manager needs none of it: its caches are listed in full first.
//
// A POST whose answer was lost (a connection reset or a timeout while kube-apiserver
// restarted) may have created the pod or not: the occurrence is unsure until a GET of the
// pod's name says (resolveUnsure). Until then no pass plans past it, or it would count the
// occurrence missed while its pod may run it.
type decided struct {
	mu     sync.Mutex
	m      map[types.NamespacedName]*decidedJob
	unsure map[types.NamespacedName]decidedOcc
}

type decidedJob struct {
	uid     types.UID
	written time.Time
	created []time.Time // after written, oldest first
}

type decidedOcc struct {
	uid types.UID
	occ time.Time
}

// maxCreated bounds decided.created per job: the pod cache catches up long before.
const maxCreated = 16

func (c *decided) entry(job *v1alpha1.LockedCronJob) *decidedJob {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	if c.m == nil {
		c.m = map[types.NamespacedName]*decidedJob{}
	}
	e, ok := c.m[key]
	if !ok || e.uid != job.UID {
		e = &decidedJob{uid: job.UID}
		c.m[key] = e
	}
	return e
}

// noteWritten records the lastScheduleTime of a status write that landed.
func (c *decided) noteWritten(job *v1alpha1.LockedCronJob, lst time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(job)
	if lst.After(e.written) {
		e.written = lst
	}
	e.created = slices.DeleteFunc(e.created, func(t time.Time) bool { return !t.After(e.written) })
}

// noteCreated records that the job's pod for occ exists.
func (c *decided) noteCreated(job *v1alpha1.LockedCronJob, occ time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(job)
	if !occ.After(e.written) || slices.ContainsFunc(e.created, occ.Equal) {
		return
	}
	e.created = append(e.created, occ)
	if len(e.created) > maxCreated {
		e.created = e.created[1:]
	}
}

// of returns what this manager decided for the job (see decided).
func (c *decided) of(job *v1alpha1.LockedCronJob) (written time.Time, created []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[types.NamespacedName{Namespace: job.Namespace, Name: job.Name}]
	if !ok || e.uid != job.UID {
		return time.Time{}, nil
	}
	return e.written, slices.Clone(e.created)
}

// forget drops a deleted job's entries.
func (c *decided) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
	delete(c.unsure, key)
}

// noteUnsure records that the job's pod for occ may or may not exist.
func (c *decided) noteUnsure(job *v1alpha1.LockedCronJob, occ time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsure == nil {
		c.unsure = map[types.NamespacedName]decidedOcc{}
	}
	c.unsure[types.NamespacedName{Namespace: job.Namespace, Name: job.Name}] = decidedOcc{uid: job.UID, occ: occ}
}

// unsureOf returns the occurrence whose pod creation is unsure for the job, if any.
func (c *decided) unsureOf(job *v1alpha1.LockedCronJob) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.unsure[types.NamespacedName{Namespace: job.Namespace, Name: job.Name}]
	return cp.occ, ok && cp.uid == job.UID
}

// resolve ends the doubt about occ: its pod exists (noted as created) or not.
func (c *decided) resolve(job *v1alpha1.LockedCronJob, occ time.Time, exists bool) {
	if exists {
		c.noteCreated(job, occ)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	if cp, ok := c.unsure[key]; ok && cp.occ.Equal(occ) {
		delete(c.unsure, key)
	}
}

// unsureRetry is how soon a pass follows a pod POST whose answer was lost.
const unsureRetry = time.Second

// answerLost reports whether a failed POST may still have created its object: the API
// server did not say it refused it (a 4xx status other than a timeout), so it may have
// stored it before the answer was lost (timeout, connection reset, 5xx).
func answerLost(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code < 400 || code >= 500 || code == http.StatusRequestTimeout
	}
	return true
}

// resolveUnsure asks the API server whether the pod of an unsure occurrence (answerLost)
// exists, before the pass plans: the cache may not show it yet. An error leaves the
// doubt, and the pass, for a retry.
func (r *LockedCronJobReconciler) resolveUnsure(ctx context.Context, job *v1alpha1.LockedCronJob, now time.Time) error {
	occ, ok := r.decided.unsureOf(job)
	if !ok {
		return nil
	}
	var pod corev1.Pod
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: runpod.Name(job.Name, occ)}, &pod)
	switch {
	case err == nil:
		// A pod still prepared (tracking.StillPrepared) does not decide its occurrence:
		// the schedule decides it at its instant, as when a prepare POST's answer came
		// (startOccurrence). Once the instant has come it stands for its occurrence, as
		// any pod: the cache may not show it yet.
		prepared := tracking.StillPrepared(&pod, occ, now, decidedUpTo(&job.Status))
		r.decided.resolve(job, occ, metav1.IsControlledBy(&pod, job) && !prepared)
		return nil
	case apierrors.IsNotFound(err):
		r.decided.resolve(job, occ, false)
		return nil
	default:
		return fmt.Errorf("checking whether pod %s was created: %w", runpod.Name(job.Name, occ), err)
	}
}
