package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
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
