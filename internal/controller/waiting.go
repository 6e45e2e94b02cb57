package controller

import (
	"context"

	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// withdrawWaiting keeps a blackout from starting the job of a pod whose lockwrap already
// waits for the lock: a manual run with contention Wait behind a long run, a scheduled
// run with contention Retry. Its container runs, so withdrawUnstarted leaves it, and
// lockwrap, which knows the windows known when the pod was made but no rollout, started
// the job the moment the lock was free, in the rollout. Redis says which of the job's
// running pods hold the lock (their job started: it goes on, as any run a blackout finds
// running); the others are withdrawn, and their lockwrap, not holding it, runs nothing
// (Interrupted). The question is asked off the worker (the ledger's look-ups); its answer
// wakes the job. A pod can take the lock between the answer and its deletion: its job is
// then stopped as it starts, inside the blackout.
//
// A suspended job's pass stops before the schedule's blackout step: its pods that have
// not started are withdrawn here too.
func (r *LockedCronJobReconciler) withdrawWaiting(ctx context.Context, p *pass, backend redis.UniversalClient, berr *backendError) {
	if p.job.Spec.Blackout == nil {
		return
	}
	bs, err := r.blackoutNow(ctx, p)
	if err != nil || bs == nil || bs.unreadable != nil {
		return
	}
	b := bs.rules.At(p.now, bs.rollouts)
	if !b.Blocked() {
		return
	}
	if p.blackout == nil {
		p.withdrawUnstarted(b.Describe())
	}
	if backend == nil || berr != nil {
		return // nobody can take the lock from a backend that is not ready
	}
	key := runpod.LockKey(p.job)
	for _, pod := range p.active {
		occ, _ := runstatus.Occurrence(pod)
		if pod.DeletionTimestamp != nil || p.isWithdrawing(pod) || !tracking.Running(pod) || occ.After(p.now) {
			continue // prepared pods wait for their instant: withdrawPrepared
		}
		holder := runpod.HolderOf(r.Pod.ClusterName, pod)
		q := ledgerQuestion{client.ObjectKeyFromObject(p.job), p.job.UID, "holds:" + string(pod.UID), key, 0, backend}
		// (The answer's "succeeded" is the question's yes: the pod holds the lock.)
		a, ok := r.ledger.answer(ctx, q, func(ctx context.Context) (bool, error) {
			return r.backends.holds(ctx, backend, key, holder)
		})
		switch {
		case !ok:
			p.log.V(1).Info("asking whether a running pod holds the lock, a blackout being in effect", "pod", pod.Name)
		case a.err != nil:
			p.log.Info("could not ask whether a running pod holds the lock in a blackout; asking again", "pod", pod.Name, "error", a.err.Error())
			p.requeueAt(backendRetry)
		case !a.succeeded:
			// Counted from its report (Interrupted), which then says why.
			p.withdraw(pod, "a blackout began while it waited for the lock: "+b.Describe())
		}
	}
}

// holds asks Redis whether holder holds key's lock.
func (b *backends) holds(ctx context.Context, c redis.UniversalClient, key, holder string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	h, err := lock.HolderOf(ctx, c, key)
	return h == holder, err
}
