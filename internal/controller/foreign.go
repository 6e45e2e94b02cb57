package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// ownPods splits the pods listed for a job (the owner index has them by the job's name)
// into those the job controls and the others: those of an earlier job of the same name,
// deleted and created again (kubectl replace --force, delete and apply), whose pods are
// still there until the garbage collector deletes them, and those no job controls any
// more (orphanedJob: an earlier job of the name deleted with --cascade=orphan, or
// references removed by hand). Those are not the job's runs, its active pods or its
// occurrences.
func ownPods(pods []corev1.Pod, uid types.UID) (own, foreign []corev1.Pod) {
	for i := range pods {
		if ref := metav1.GetControllerOfNoCopy(&pods[i]); ref != nil && ref.UID == uid {
			own = append(own, pods[i])
		} else {
			foreign = append(foreign, pods[i])
		}
	}
	return own, foreign
}

// releaseForeign lets go of the foreign pods (ownPods, letGo): no job is left to count
// them, and the garbage collector waits for their finalizer. Their own job's last pass,
// which releases its pods, may never have come: the pass that finds its job gone finds
// this one instead. One that no job controls and is still prepared ahead of its instant
// is deleted: it would run its job at the instant for no job, and its occurrence is this
// job's to run in a pod of its own. The server says first which job of that name exists:
// a job cache behind may show one deleted since, and the pods of the one there now are
// that one's to count.
func (r *LockedCronJobReconciler) releaseForeign(ctx context.Context, job *v1alpha1.LockedCronJob, foreign []corev1.Pod) error {
	now := r.Clock.Now()
	var todo []*corev1.Pod
	for i := range foreign {
		if letGoOf(&foreign[i], "", now, time.Time{}) != letGoNothing {
			todo = append(todo, &foreign[i])
		}
	}
	if len(todo) == 0 {
		return nil
	}
	live, err := liveMeta(ctx, r.APIReader, v1alpha1.GroupVersion.WithKind("LockedCronJob"), client.ObjectKeyFromObject(job))
	if err != nil {
		return err
	}
	for _, pod := range todo {
		if ref := metav1.GetControllerOfNoCopy(pod); live != nil && ref != nil && ref.UID == live.UID {
			continue // the job there now controls it: this pass's job is one the cache still shows
		}
		if err := r.letGo(ctx, pod, "", time.Time{}); err != nil {
			return err
		}
	}
	return nil
}

// releasePod takes the tracking finalizer off pod (gone already: nothing to do). Only
// off the pod as seen (its resourceVersion): a cache behind the API server can show a
// pod deleted since, whose name a new pod has (a job created again), and that pod's
// finalizer is its job's to take off. A Conflict says to look again.
//
// A pod no job controls loses its mark as prepared with it (letGo).
func (r *LockedCronJobReconciler) releasePod(ctx context.Context, pod *corev1.Pod) error {
	patch := client.StrategicMergeFrom(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(pod, runpod.FinalizerTracking)
	if metav1.GetControllerOfNoCopy(pod) == nil {
		delete(pod.Annotations, runpod.AnnotationPreparedAhead)
	}
	if err := r.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing pod %s: %w", pod.Name, err)
	}
	return nil
}
