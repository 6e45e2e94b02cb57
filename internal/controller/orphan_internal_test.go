package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestReleasePodsWithdrawsThePreparedPodsOfADeletedJob: a job deleted with
// --cascade=orphan keeps its pods (the garbage collector takes its references off them
// and deletes none). A pod prepared ahead of its instant would then run the job at the
// instant for a job that is gone: the pass that finds the job being deleted, or gone,
// deletes it. Every other pod is only released: one whose instant has come (its job
// may run), one that ended, one of another job of the name, and, once the job is gone,
// one that still names it (the collector's to delete, or to orphan). A pod whose
// occurrence the job's status had decided is not before its instant, whatever this
// manager's clock says (a new leader on a slower clock). A pod no job controls loses its
// mark as prepared once let go: it no longer stands among its label's job's pods.
func TestReleasePodsWithdrawsThePreparedPodsOfADeletedJob(t *testing.T) {
	now := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	soon, past := now.Add(40*time.Second), now.Add(-20*time.Second)
	ref := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "j", UID: uid, Controller: ptr.To(true)}}
	}
	pod := func(name string, occ time.Time, prepared bool, owners []metav1.OwnerReference, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels:      map[string]string{runpod.LabelJob: "j"},
			Annotations: map[string]string{runpod.AnnotationScheduledTime: occ.Format(time.RFC3339)},
			Finalizers:  []string{runpod.FinalizerTracking}, OwnerReferences: owners},
			Status: corev1.PodStatus{Phase: phase}}
		if prepared {
			p.Annotations[runpod.AnnotationPreparedAhead] = "true"
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		uid     types.UID // the job being deleted; "" once it is gone
		decided time.Time // the job's lastScheduleTime
		pods    []*corev1.Pod
		deleted []string
	}{
		{
			name: "being deleted",
			uid:  "job",
			pods: []*corev1.Pod{
				pod("prepared", soon, true, ref("job"), corev1.PodRunning),
				pod("orphaned-already", soon, true, nil, corev1.PodPending),
				pod("instant-came", past, true, ref("job"), corev1.PodRunning),
				pod("not-prepared", past, false, ref("job"), corev1.PodRunning),
				pod("ended", soon, true, ref("job"), corev1.PodFailed),
				pod("another-jobs", soon, true, ref("new-job"), corev1.PodRunning),
			},
			deleted: []string{"prepared", "orphaned-already"},
		},
		{
			name:    "being deleted, its status ahead of this manager's clock",
			uid:     "job",
			decided: soon,
			pods:    []*corev1.Pod{pod("decided", soon, true, ref("job"), corev1.PodRunning)},
		},
		{
			name: "gone",
			uid:  "",
			pods: []*corev1.Pod{
				pod("orphaned", soon, true, nil, corev1.PodRunning),
				pod("still-names-it", soon, true, ref("job"), corev1.PodRunning),
				pod("orphaned-running", past, true, nil, corev1.PodRunning),
				func() *corev1.Pod {
					p := pod("orphaned-released", past, true, nil, corev1.PodSucceeded)
					p.Finalizers = nil
					return p
				}(),
			},
			deleted: []string{"orphaned"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var objs []client.Object
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			cl := fakeAPI(t, objs...)
			r := testReconciler(cl)
			r.Clock = clocktesting.NewFakePassiveClock(now)
			if err := r.releasePods(ctx, "ns", "j", tc.uid, tc.decided); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.pods {
				var got corev1.Pod
				err := cl.Get(ctx, client.ObjectKeyFromObject(p), &got)
				wantGone := slices.Contains(tc.deleted, p.Name)
				switch {
				case wantGone && !apierrors.IsNotFound(err):
					t.Errorf("pod %s: %v, want it deleted", p.Name, err)
				case !wantGone && err != nil:
					t.Errorf("pod %s: %v, want it kept", p.Name, err)
				case !wantGone && p.Name == "another-jobs" && !controllerutil.ContainsFinalizer(&got, runpod.FinalizerTracking):
					t.Errorf("pod %s of another job lost its tracking finalizer", p.Name)
				case !wantGone && p.Name != "another-jobs" && controllerutil.ContainsFinalizer(&got, runpod.FinalizerTracking):
					t.Errorf("pod %s kept its tracking finalizer", p.Name)
				case !wantGone && len(p.OwnerReferences) == 0 && got.Annotations[runpod.AnnotationPreparedAhead] != "":
					t.Errorf("pod %s, no job's, let go with its mark as prepared: it stays among its label's job's pods", p.Name)
				}
			}
		})
	}
}

// TestWithdrawalNoteIsWrittenOnce: the note of why a pod is withdrawn may quote a
// kubelet's or the scheduler's message, of any length; the cache holds at most
// maxOwnValue bytes of it. Cut to more than that, every pass found the cached note
// different from the one it meant and patched the pod again.
func TestWithdrawalNoteIsWrittenOnce(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j-1", UID: "u",
		Labels: map[string]string{runpod.LabelJob: "j"}, Finalizers: []string{runpod.FinalizerTracking}}}
	patches := 0
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(pod).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	r := testReconciler(cl)
	why := "a blackout began before its job started: Unschedulable: " + strings.Repeat("0/5000 nodes are available: 1 Insufficient cpu. ", 100)
	for pass := 1; pass <= 3; pass++ {
		var live corev1.Pod
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), &live); err != nil {
			t.Fatal(err)
		}
		if err := r.withdrawPod(ctx, withdrawal{cached(t, &live), why}, runpod.AnnotationWithdrawn); err != nil {
			t.Fatal(err)
		}
		if patches != 1 {
			t.Fatalf("pass %d: %d patches of the note, want 1", pass, patches)
		}
	}
}
