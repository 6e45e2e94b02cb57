package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// A pod name stays in status.countedPods while its counted pod may still be seen; a pass
// that finds the pod gone drops the name. A prepared pod withdrawn before its instant (a
// drain) and counted is prepared again under the same name — and the pass that dropped the
// name made the new pod at once. When that pass's status write was lost (a conflict, a
// leader change), or the next pass read the job from a cache behind it, that pass read the
// name in countedPods, took the new pod, running the occurrence's job, for the counted one:
// labelled it counted, released and deleted it, and the occurrence was never counted
// (helper-78). No pod is made under a name the job as read still lists: the pass that
// drops it comes back once its write has landed.
func TestCountedNameIsNotTakenByANewPod(t *testing.T) {
	for _, c := range []struct {
		name string
		// lost: the status write of the pass that drops the name is lost; else it lands
		// while the next pass still reads the job from before it.
		lost bool
	}{
		{"the write dropping the name is lost", true},
		{"the next pass reads the job from before that write", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			t1 := passAt
			job := preparedMinuteJob(t1, 30)
			x, api, r := waitingWithdrawnRig(t, job, t1, "drained")
			podEnds(t, api, x, false, t1.Add(-20*time.Second))
			noPod := func(when string) {
				t.Helper()
				var got corev1.Pod
				if err := api.Get(ctx, client.ObjectKeyFromObject(x), &got); !apierrors.IsNotFound(err) {
					t.Fatalf("%s: a pod under the name countedPods lists (%v)", when, err)
				}
			}

			// X is counted, its name written, the pod marked and gone.
			pN := passWith(t, r, job, t1.Add(-15*time.Second))
			if !slices.Contains(pN.status.CountedPods, x.Name) {
				t.Fatalf("X not named in countedPods: %v", pN.status.CountedPods)
			}
			job.Status = *pN.status
			if err := r.markCounted(ctx, pN); err != nil {
				t.Fatal(err)
			}
			var gone corev1.Pod
			if err := api.Get(ctx, client.ObjectKeyFromObject(x), &gone); err == nil {
				if err := api.Delete(ctx, &gone); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}

			// The pass that finds X gone drops its name and makes no pod under it.
			read := job.DeepCopy()
			pN1 := passWith(t, r, read, t1.Add(-14*time.Second))
			if slices.Contains(pN1.status.CountedPods, x.Name) {
				t.Fatalf("the name of a gone pod kept: %v", pN1.status.CountedPods)
			}
			noPod("the pass that drops the name")
			if pN1.requeue == 0 || pN1.requeue > time.Second {
				t.Errorf("the pass does not come back soon for the occurrence: requeue %v", pN1.requeue)
			}
			if !c.lost {
				job.Status = *pN1.status // landed; read still holds the job from before
			}

			// The next pass (a new leader, or a cache behind) reads the name again.
			r2 := testReconciler(api)
			pN2 := passWith(t, r2, read, t1.Add(-13*time.Second))
			noPod("a pass reading the job from before the name was dropped")
			if c.lost {
				job.Status = *pN2.status // its write lands
			}

			// Once the job as read no longer lists it, the pod is prepared, and it is
			// the occurrence's: active, neither marked counted nor deleted.
			pN3 := passWith(t, r2, job, t1.Add(-12*time.Second))
			var xp corev1.Pod
			if err := api.Get(ctx, client.ObjectKeyFromObject(x), &xp); err != nil {
				t.Fatalf("the occurrence's pod not prepared again: %v", err)
			}
			job.Status = *pN3.status
			xp.Spec.NodeName = "n2"
			if err := api.Update(ctx, &xp); err != nil {
				t.Fatal(err)
			}
			wrapped := xp.Annotations[runpod.AnnotationWrappedContainer]
			xp.Status.Phase = corev1.PodRunning
			xp.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t1.Add(-10 * time.Second))}}}}
			if err := api.Status().Update(ctx, &xp); err != nil {
				t.Fatal(err)
			}
			p := passWith(t, testReconciler(api), job, t1.Add(2*time.Second))
			is := func(list []*corev1.Pod) bool {
				return slices.ContainsFunc(list, func(d *corev1.Pod) bool { return d.Name == xp.Name })
			}
			if is(p.doomed) || is(p.mark) || !is(p.active) {
				t.Errorf("the occurrence's pod taken for the counted one: doomed %v, marked %v, active %v (countedPods %v)", is(p.doomed), is(p.mark), is(p.active), p.status.CountedPods)
			}
		})
	}
}

// The same for a manual run: the pod of a request id is named by the id, so an id used
// again after its pod was counted and has gone takes the counted pod's name.
func TestCountedNameIsNotTakenByAManualRun(t *testing.T) {
	ctx := context.Background()
	job := passJob("0 3 * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)}
	job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "fix-1"}
	name := runpod.ManualName(job.Name, "fix-1")
	job.Status.CountedPods = []string{name} // its earlier pod, counted, has gone
	r, p := runPass(t, job, passAt)
	var pod corev1.Pod
	if err := r.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, &pod); !apierrors.IsNotFound(err) {
		t.Fatalf("a pod made under the name countedPods lists (%v)", err)
	}
	if slices.Contains(p.status.CountedPods, name) || p.requeue == 0 || p.requeue > time.Second {
		t.Fatalf("the pass should drop the name and come back soon: countedPods %v, requeue %v", p.status.CountedPods, p.requeue)
	}
	if rr := p.status.LastRunRequest; rr != nil && rr.ID == "fix-1" {
		t.Fatalf("the request taken for handled: %+v", rr)
	}
	job.Status = *p.status // landed
	p2 := passWith(t, r, job, passAt.Add(time.Second))
	if rr := p2.status.LastRunRequest; rr == nil || rr.Pod != name {
		t.Fatalf("the request not run once the name was dropped: %+v", rr)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, &pod); err != nil {
		t.Fatal(err)
	}
}
