package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// unanswered keeps, per job, what a pass had to tell (its Events, lockedcron_runs_total
// and the other run metrics: told) when its status write failed without the API server
// saying it refused it (answerLost: a reset connection, a timeout, a 5xx). Such a write
// may have landed. If it did, the next pass reads its status: the pods it counted settle
// from status.countedPods and are not counted again, so nothing else would tell their
// runs. If it did not, the next pass counts them again and tells them itself.
//
// Which it was, the job as the next pass reads it says:
//   - a newer resourceVersion than the one the write was made on, whose status is the one
//     written (as JSON, as the server stores it): it landed. The pass tells what was kept.
//   - a newer one with another status: it did not land (a spec edit moved the version).
//   - the one the write was made on: it did not land, or the job cache is behind it. The
//     API server says which (checkUnanswered). A pass on a job cache behind a write that
//     landed would decide again what that write decided (as a pass after a write whose
//     answer came does not: decided); it waits for the cache.
//
// It lives in the manager's memory: a new leader tells nothing of its predecessor's lost
// answers (as for an Event its predecessor queued and did not send).
type unanswered struct {
	mu sync.Mutex
	m  map[types.NamespacedName]sentStatus
}

// sentStatus is a status write whose answer was lost, and what its pass had to tell.
type sentStatus struct {
	uid    types.UID
	rv     string // the job's resourceVersion the write was made on
	status []byte // the status written, as JSON
	told   *told
}

// keep records job's status write, made on resourceVersion rv, whose answer was lost.
func (u *unanswered) keep(job *v1alpha1.LockedCronJob, rv string, t *told) {
	if len(t.events) == 0 && len(t.counted) == 0 && len(t.recorded) == 0 {
		return
	}
	st, err := json.Marshal(&job.Status)
	if err != nil {
		return // cannot happen: the client has just encoded it
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[types.NamespacedName]sentStatus{}
	}
	u.m[types.NamespacedName{Namespace: job.Namespace, Name: job.Name}] = sentStatus{job.UID, rv, st, t}
}

// landed returns what a kept write had to tell if job, as read, shows that it landed (and
// forgets it); undecided if job is read at the version the write was made on.
func (u *unanswered) landed(job *v1alpha1.LockedCronJob) (t *told, undecided bool) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.m[key]
	if !ok {
		return nil, false
	}
	if s.uid == job.UID && s.rv == job.ResourceVersion {
		return nil, true
	}
	delete(u.m, key)
	if s.uid != job.UID {
		return nil, false
	}
	st, err := json.Marshal(&job.Status)
	if err != nil || !bytes.Equal(st, s.status) {
		return nil, false
	}
	return s.told, false
}

// forget drops what is kept for the job: it did not land, or the job is gone.
func (u *unanswered) forget(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, key)
}

// checkUnanswered settles an earlier pass's status write whose answer was lost (see
// unanswered) before job's pass: it tells what that pass had to tell if the write
// landed. wait: the job cache is behind a write (that one, or another), and the pass must
// wait for it.
func (r *LockedCronJobReconciler) checkUnanswered(ctx context.Context, job *v1alpha1.LockedCronJob) (wait bool, err error) {
	t, undecided := r.unanswered.landed(job)
	if t != nil {
		r.emit(job, t)
	}
	if !undecided {
		return false, nil
	}
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	live, err := liveMeta(ctx, r.APIReader, v1alpha1.GroupVersion.WithKind("LockedCronJob"), key)
	if err != nil {
		return false, err
	}
	if live != nil && live.ResourceVersion != job.ResourceVersion {
		return true, nil
	}
	r.unanswered.forget(key) // not stored: the pass decides again, and tells it
	return false, nil
}
