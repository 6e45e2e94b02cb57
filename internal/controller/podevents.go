package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// podEvents lets through the pod events that can change what a pass of the pod's job
// does, and no others (issue 13: each pass costs CPU and the work queue's time):
//
//   - Create: only for a pod being deleted that the tracking finalizer holds. Every pod
//     of a job is created by a pass of that job, which has already accounted for it; on
//     a restart the jobs' own create events start a pass for each of them, and that pass
//     lists their pods from the cache. But a job deleted while no manager ran has no
//     event, and its pods, marked deleted by the garbage collector, wait for a pass to
//     release them (Reconcile of a job that is gone). Nor has one deleted with
//     --cascade=orphan: its pods, no longer controlled by it, are held by the finalizer
//     until a pass releases them (orphanedJob).
//   - Update: when the pod's state as a pass reads it changes (podState): its phase, its
//     job starting, news for the status (deferral.go), deletion, the counted label, its
//     finalizers, its controller going (orphaned), a restart of the wrapped container,
//     its end while another container runs on. A kubelet writes a pod's status four or
//     five times on its way to Running; most of those writes change none of it.
//     And the note that a prepared pod is withdrawn ahead of its instant.
//   - Delete and generic events: always.
//
// The cache is not filtered: a pass that runs for any reason sees every pod as it is.
var podEvents = predicate.Funcs{
	CreateFunc: func(e crevent.CreateEvent) bool {
		if _, orphaned := orphanedJob(e.Object); orphaned {
			return true
		}
		return e.Object.GetDeletionTimestamp() != nil && slices.Contains(e.Object.GetFinalizers(), runpod.FinalizerTracking)
	},
	UpdateFunc: func(e crevent.UpdateEvent) bool {
		o, ok1 := podOf(e.ObjectOld)
		n, ok2 := podOf(e.ObjectNew)
		return !ok1 || !ok2 || stateOf(o) != stateOf(n)
	},
}

// podState is what a pass reads of one pod (see tracking.Decide, hasNews, settle).
type podState struct {
	phase                  corev1.PodPhase
	started, news, deleted bool
	outlived               bool // the job ended while another container runs on (tracking.Decide)
	counted                bool
	orphaned               bool // no owner controls it (orphanedJob)
	withdrawnAhead         bool
	finalizers             int
	attempts               int32
}

func stateOf(p *corev1.Pod) podState {
	_, ahead := p.Annotations[runpod.AnnotationWithdrawnAhead]
	return podState{
		phase:    p.Status.Phase,
		started:  tracking.Started(p),
		news:     hasNews(p),
		deleted:  p.DeletionTimestamp != nil,
		outlived: tracking.Outlived(p),
		counted:  p.Labels[runpod.LabelCounted] == "true",
		orphaned: metav1.GetControllerOfNoCopy(p) == nil,
		// A prepared pod deleted by someone else is withdrawn by a pass after its deletion:
		// the note is what the next pass decides it by (tracking.Decide).
		withdrawnAhead: ahead,
		finalizers:     len(p.Finalizers),
		attempts:       tracking.Attempts(p),
	}
}
