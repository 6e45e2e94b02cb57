package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// Prepare-ahead (spec.prepareAheadSeconds, issue 13): the next occurrence's pod is
// created up to that many seconds before its instant, so that scheduling, image pull and
// container start are done by then; lockwrap waits for the instant (--not-before) on the
// node's clock and only then takes the lock. The occurrence is decided at its instant as
// any other: until then the pod is "prepared", and a pass that finds it no longer
// wanted — the job suspended, the schedule changed, a blackout now covering the instant
// — withdraws it: the pod is deleted and not counted (the occurrence had not come).
// If the controller is down then, nobody withdraws it: at its instant lockwrap runs the
// job (still under the lock and the ledger), as a pod created at the instant would.

// prepareAhead is spec.prepareAheadSeconds as a duration (0: off).
func prepareAhead(job *v1alpha1.LockedCronJob) time.Duration {
	if job.Spec.PrepareAheadSeconds == nil || *job.Spec.PrepareAheadSeconds <= 0 {
		return 0
	}
	return time.Duration(*job.Spec.PrepareAheadSeconds) * time.Second
}

// prepare creates the next occurrence's pod ahead of its instant when it is time to, and
// comes back when it will be. It returns the pod it created, if any.
func (r *LockedCronJobReconciler) prepare(ctx context.Context, p *pass, plan *schedule.Plan, bs *blackoutState, berr *backendError) *corev1.Pod {
	ahead := prepareAhead(p.job)
	if ahead == 0 || plan.Next.IsZero() {
		return nil
	}
	next := plan.Next
	if at := next.Add(-ahead); at.After(p.now) {
		p.requeueAt(at.Sub(p.now))
		return nil
	}
	if p.hasPod(runpod.Name(p.job.Name, next)) {
		return nil
	}
	// Only an occurrence that would start at its instant as things stand is prepared;
	// anything else is decided at the instant, the usual way.
	if bs.unreadable != nil || bs.rules.At(next, bs.rollouts).Blocked() || bs.rules.At(p.now, bs.rollouts).Blocked() {
		return nil
	}
	if berr != nil && berr.blocking() {
		return nil
	}
	if p.unstarted(next) != nil {
		return nil
	}
	return r.startOccurrence(ctx, p, next, bs.rules.NextOpening(next), next)
}

// hasPod reports whether the pass saw a pod of that name (active or finished).
func (p *pass) hasPod(name string) bool {
	for _, n := range p.seen {
		if n == name {
			return true
		}
	}
	return false
}

// withdrawPrepared takes back the prepared pods (occurrence still to come) that the
// job no longer wants: all of them when suspended, otherwise those that are not for
// next or whose instant a blackout now covers. why says which.
func (p *pass) withdrawPrepared(keep func(occ time.Time) bool, why string) {
	active := p.active[:0]
	for _, pod := range p.active {
		occ, err := runstatus.Occurrence(pod)
		if err == nil && occ.After(p.now) && pod.Name == runpod.Name(p.job.Name, occ) && !keep(occ) {
			p.withdrawn = append(p.withdrawn, pod)
			p.log.Info("prepared pod withdrawn", "pod", pod.Name, "occurrence", occ.UTC().Format(time.RFC3339), "reason", why)
			continue
		}
		active = append(active, pod)
	}
	p.active = active
}

// deleteWithdrawn releases the withdrawn pods as counted (so that no pass counts them),
// then deletes them. In that order: the cache delivers the two changes in order, so a
// later pass sees the pod released before it sees it deleted (never deleted and
// uncounted, which would count it missed); and a pod released but not deleted (the
// delete failed) is deleted by the next pass, as any counted pod that never started
// (settle).
func (r *LockedCronJobReconciler) deleteWithdrawn(ctx context.Context, p *pass) error {
	for _, pod := range p.withdrawn {
		patch := client.StrategicMergeFrom(pod.DeepCopy())
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[runpod.LabelCounted] = "true"
		controllerutil.RemoveFinalizer(pod, runpod.FinalizerTracking)
		if err := r.Patch(ctx, pod, patch); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("releasing withdrawn pod %s: %w", pod.Name, err)
		}
		if err := r.Delete(ctx, pod, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("withdrawing prepared pod %s: %w", pod.Name, err)
		}
	}
	return nil
}
