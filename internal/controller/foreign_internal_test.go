package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestReleasePodIsForThePodItSaw: a pass releases the pod its cache showed. A cache
// behind the API server can show a pod deleted since, whose name a new pod now has (the
// same job name and occurrence, a job created again): the release must not take the
// tracking finalizer off that new pod, which would let it go uncounted.
func TestReleasePodIsForThePodItSaw(t *testing.T) {
	ctx := context.Background()
	seen := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j-1767225600", UID: "old-pod"}}
	cl := fakeAPI(t, seen.DeepCopy())
	stale := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(seen), stale); err != nil {
		t.Fatal(err)
	}
	stale.Finalizers = []string{runpod.FinalizerTracking} // as the cache showed it
	// The API server since: the old pod gone, a new one of that name.
	if err := cl.Delete(ctx, stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	now := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: seen.Name, UID: "new-pod",
		Finalizers: []string{runpod.FinalizerTracking}}}
	if err := cl.Create(ctx, now); err != nil {
		t.Fatal(err)
	}

	r := &LockedCronJobReconciler{Client: cl, APIReader: cl}
	if err := r.releasePod(ctx, stale); err == nil || !apierrors.IsConflict(err) {
		t.Errorf("releasing a pod the API server no longer has: %v, want a conflict", err)
	}
	var got corev1.Pod
	if err := cl.Get(ctx, client.ObjectKeyFromObject(seen), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) == 0 {
		t.Fatal("the new pod of that name lost its tracking finalizer")
	}
}
