package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
)

// clientCache is a workload cache that reads a fake API server.
type clientCache struct {
	cache.Cache
	c client.Client
}

func (k clientCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, o ...client.GetOption) error {
	return k.c.Get(ctx, key, obj, o...)
}

func (k clientCache) List(ctx context.Context, l client.ObjectList, o ...client.ListOption) error {
	return k.c.List(ctx, l, o...)
}

// TestDeferredPastItsDeadlineSaysTheBlackout (helper-98): an occurrence deferred by a
// rollout whose end is unknown reaches its startingDeadlineSeconds while the rollout
// lasts. It was counted missed as "not started within startingDeadlineSeconds: the
// controller was down or busy" (cause StartingDeadline): the pass at its deadline plans
// nothing due, and the deferral was not asked about. It is missed for the blackout.
func TestDeferredPastItsDeadlineSaysTheBlackout(t *testing.T) {
	occ := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	job := passJob("0 10 * * *", false)
	job.Spec.StartingDeadlineSeconds = ptr.To(int64(60))
	job.Status.LastScheduleTime = &metav1.Time{Time: occ.Add(-24 * time.Hour)}
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer,
		Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "web"}}}
	rolling := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: "web", Generation: 1},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1}}
	api := fakeAPI(t, rolling)
	r := testReconciler(api)
	r.workloads = clientCache{c: api}

	p := passWith(t, r, job, occ.Add(time.Second))
	if p.status.Deferred == nil || !p.status.Deferred.Time.Equal(occ) {
		t.Fatalf("deferred %v, want %s deferred by the rollout (recent %+v)", p.status.Deferred, occ, p.status.Recent)
	}
	job.Status = *p.status
	p = passWith(t, r, job, occ.Add(60*time.Second+10*time.Millisecond))
	if c := p.status.Counters; c.Missed != 1 || c.SkippedBlackout != 0 {
		t.Fatalf("counters %+v, want the occurrence missed once", c)
	}
	if p.status.Deferred != nil {
		t.Errorf("still deferred: %v", p.status.Deferred)
	}
	var found bool
	for _, rec := range p.status.Recent {
		if rec.Outcome == runstatus.OutcomeMissed && rec.Occurrence.Time.Equal(occ) {
			found = true
			if !strings.Contains(rec.Message, "blackout") || !strings.Contains(rec.Message, "Deployment/web") || strings.Contains(rec.Message, "down or busy") {
				t.Errorf("occurrence deferred by the rollout, missed at its deadline while it lasts, recorded %q", rec.Message)
			}
		}
	}
	if !found {
		t.Errorf("no missed record of %s: %+v", occ, p.status.Recent)
	}
	for _, e := range p.events {
		if e.reason == runstatus.OutcomeMissed && e.cause != CauseBlackoutPastDeadline {
			t.Errorf("Event %s cause %q, want %s", e.reason, e.cause, CauseBlackoutPastDeadline)
		}
	}
}

// TestChangeBeforeTheInstantSeenAfterItWithdrawsAnUnstartedPod (helper-98): a job
// suspended (or its schedule edited so that the occurrence is gone) a moment before a
// prepared pod's instant, the pass that sees it running just after the instant (the
// workqueue behind): the pod had not started (its container not running, its job cannot
// have begun), yet only a pod whose instant was still to come was withdrawn, and it ran
// the occurrence in a suspended job, or one the new schedule does not have.
func TestChangeBeforeTheInstantSeenAfterItWithdrawsAnUnstartedPod(t *testing.T) {
	occ := passAt
	suspend := func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) }
	for _, c := range []struct {
		name   string
		field  string
		change func(*v1alpha1.LockedCronJob)
		at     time.Time // the change's time as managedFields keep it: whole seconds
		keep   bool
	}{
		{"suspended", "suspend", suspend, occ.Add(-2 * time.Second), false},
		{"schedule edited, the occurrence gone", "schedule", func(j *v1alpha1.LockedCronJob) { j.Spec.Schedule = "30 * * * *" }, occ.Add(-2 * time.Second), false},
		{"schedule edited, the occurrence kept", "schedule", func(j *v1alpha1.LockedCronJob) { j.Spec.Schedule = "*/2 * * * *" }, occ.Add(-2 * time.Second), true},
		// Suspended half a second after the instant (helper-99): kept as occ, the
		// occurrence was in force when it came; its pod is its own to run and count.
		{"suspended in the instant's second", "suspend", suspend, occ, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, started := range []bool{false, true} {
				job := passJob("* * * * *", false)
				job.Spec.PrepareAheadSeconds = ptr.To(int32(60))
				job.Status.LastScheduleTime = &metav1.Time{Time: occ.Add(-time.Minute)}
				pod, err := runpod.Build(job, occ, runpod.Options{ClusterName: "c", WrapperImage: "w", MadeAt: occ.Add(-time.Minute)})
				if err != nil {
					t.Fatal(err)
				}
				pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
				pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
				if started { // lockwrap runs: it may have begun the job; only it can tell
					pod.Status.Phase = corev1.PodRunning
					pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: runpod.WrappedContainer(pod), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(occ.Add(-30 * time.Second))}}}}
				}
				c.change(job)
				job.Generation = 2
				job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
					Time: &metav1.Time{Time: c.at}, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:` + c.field + `":{}}}`)}}}
				job.Status.ObservedSchedule = "* * * * *|UTC|suspend=false"
				_, p := runPass(t, job, occ.Add(200*time.Millisecond), pod)
				withdrawn := len(p.withdrawn) > 0
				if want := !c.keep && !started; withdrawn != want {
					t.Errorf("started %t: withdrawn %t, want %t (active %d, recent %+v)", started, withdrawn, want, len(p.active), p.status.Recent)
				}
				if p.status.Counters != (v1alpha1.Counters{}) {
					t.Errorf("started %t: counters %+v: nothing is decided yet", started, p.status.Counters)
				}
				if !withdrawn {
					continue
				}
				// Deleted before its container started: its occurrence, not in force, is
				// nobody's to count, and nothing else is counted for it.
				gone := pod.DeepCopy()
				gone.Annotations[runpod.AnnotationWithdrawnAhead] = p.withdrawn[0].why
				gone.DeletionTimestamp = &metav1.Time{Time: occ.Add(time.Second)}
				job.Status = *p.status
				_, p = runPass(t, job, occ.Add(5*time.Second), gone)
				if len(p.active) != 0 || len(p.mark) != 1 {
					t.Errorf("withdrawn pod gone unstarted: active %d, marked %d; want it released (its finalizer removed)", len(p.active), len(p.mark))
				}
				if p.status.Counters != (v1alpha1.Counters{}) || len(p.status.Recent) != 0 {
					t.Errorf("withdrawn pod gone unstarted: counters %+v, recent %+v; want nothing counted", p.status.Counters, p.status.Recent)
				}
			}
		})
	}
}
