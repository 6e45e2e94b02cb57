package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/internal/lock"
)

// Blackout markers. A pod whose lockwrap already waits for the lock when a blackout of its
// job begins (contention Retry, a manual run's Wait, behind another holder) cannot be
// withdrawn safely: the controller cannot tell it from one running its job. Instead the
// controller keeps, while a blackout holds the job back, a marker in the job's lock Redis
// (lock.SetBlackout: the job's UID, since when, why), and the acquire script refuses the
// job's runs made before it began (every pod carries its job's UID and when it was made,
// runpod.Options.MadeAt): the pod ends Missed without starting its job. Nothing running
// is stopped, and it fails open: with no marker (Redis unreachable from the manager, the
// manager down for longer than the marker's ttl, a pod of another lock key or Secret
// than the job's now) the pod runs when the lock is free, as before.
//
// The writes are made off the reconcile workers: a pass only says what it found
// (observe), and Start writes, one write at a time per job.
const (
	// markerTTL is how long a marker lives unless written again: a manager that stops
	// (or loses its Redis) holds nothing back for longer.
	markerTTL = time.Minute
	// markerRefresh is how often a marker is written again while the blackout lasts, and
	// how soon a failed write is tried again.
	markerRefresh = 15 * time.Second
	// markerWriteTimeout bounds one write.
	markerWriteTimeout = 5 * time.Second
)

// blackoutMarkers keeps the jobs' blackout markers.
type blackoutMarkers struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]*marker
	// swept: jobs with spec.blackout seen since this manager began writing markers; the
	// first sight of one not in a blackout deletes a marker an earlier leader may have
	// left (its blackout ended while no one wrote).
	swept map[types.NamespacedName]bool
	kick  chan struct{}
	now   func() time.Time
	// client is the Redis of a job's Secret, looked up at each write (the health view's:
	// the Secret read at most once a minute; a client it closed is not kept here), or why
	// there is none.
	client func(ctx context.Context, job types.NamespacedName, secret string) (redis.UniversalClient, error)
	// ttl, refresh and writeTimeout: markerTTL, markerRefresh and markerWriteTimeout
	// unless a test sets them.
	ttl, refresh, writeTimeout time.Duration
}

// markerView is what a pass found of one job.
type markerView struct {
	uid         types.UID
	key, secret string // the lock key and the Redis Secret's name
	guarded     bool   // the job has spec.blackout
	blocked     bool   // a blackout holds it back now
	reason      string
}

// marker is one job's marker as the passes last saw it, and what was written of it.
type marker struct {
	uid         types.UID
	key, secret string
	// since is when a pass first saw the blackout (the manager's clock: the clock the
	// pods' MadeAt is read from); zero once it ended (the marker is to be deleted).
	since  time.Time
	reason string
	// gen counts the changes to write; written is the gen last written, whose write
	// began at writtenAt.
	gen, written int
	writtenAt    time.Time
	// expires: by then any marker this entry may have put in Redis holds nothing back (a
	// SET tried, whatever its answer or however late it lands: its value says so; or an
	// earlier leader's); zero: none was.
	expires time.Time
	writing bool
}

func newBlackoutMarkers(now func() time.Time, client func(context.Context, types.NamespacedName, string) (redis.UniversalClient, error)) *blackoutMarkers {
	return &blackoutMarkers{jobs: map[types.NamespacedName]*marker{}, swept: map[types.NamespacedName]bool{},
		kick: make(chan struct{}, 1), now: now, client: client, ttl: markerTTL, refresh: markerRefresh, writeTimeout: markerWriteTimeout}
}

// observe records what a pass found at now. A nil m (a reconciler not set up with a
// manager) keeps none.
func (m *blackoutMarkers) observe(job types.NamespacedName, v markerView, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.jobs[job]
	swept := m.swept[job]
	if v.guarded {
		m.swept[job] = true
	}
	if !v.blocked {
		switch {
		case e != nil && !e.since.IsZero():
			e.since = time.Time{}
			e.gen++
			m.wake()
		case e == nil && v.guarded && !swept:
			m.jobs[job] = &marker{uid: v.uid, key: v.key, secret: v.secret, gen: 1, expires: now.Add(m.ttl)}
			m.wake()
		}
		return
	}
	if e == nil || e.uid != v.uid {
		// (A job made again under the name: the earlier one's marker has its own key and
		// lives out its ttl.)
		e = &marker{uid: v.uid}
		m.jobs[job] = e
	}
	if e.since.IsZero() {
		e.since = now
		e.gen++
	}
	if e.key != v.key || e.secret != v.secret {
		e.key, e.secret = v.key, v.secret
		e.gen++
	}
	e.reason = v.reason
	if e.written != e.gen {
		m.wake()
	}
}

// holding says whether the job's marker holds it back (or is still to be deleted).
func (m *blackoutMarkers) holding(job types.NamespacedName) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.jobs[job] != nil
}

// forget ends the marker of a job that is gone.
func (m *blackoutMarkers) forget(job types.NamespacedName) {
	if m == nil {
		return
	}
	m.observe(job, markerView{}, m.now())
	m.mu.Lock()
	delete(m.swept, job)
	m.mu.Unlock()
}

// wake makes Start look at the markers now. m.mu is held.
func (m *blackoutMarkers) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Start writes the markers until ctx ends: a change at once, a lasting blackout's marker
// every refresh, and a failed write again at the next refresh.
func (m *blackoutMarkers) Start(ctx context.Context) error {
	t := time.NewTicker(m.refresh)
	defer t.Stop()
	for {
		m.writeDue(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.kick:
		}
	}
}

// writeDue starts a write for each marker that changed, or is due to be refreshed, and
// drops the ended ones with nothing left in Redis.
func (m *blackoutMarkers) writeDue(ctx context.Context) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for job, e := range m.jobs {
		if e.writing {
			continue
		}
		if e.since.IsZero() && !now.Before(e.expires) {
			delete(m.jobs, job) // whatever it wrote holds nothing back: nothing to delete
			continue
		}
		// A refresh a little early rather than a tick late: the ticker and the write's
		// start drift by a few milliseconds.
		if e.written == e.gen && (e.since.IsZero() || now.Sub(e.writtenAt) < m.refresh*3/4) {
			continue
		}
		e.writing = true
		if !e.since.IsZero() {
			e.expires = now.Add(m.ttl) // the marker's until: it may land, whatever the answer says
		}
		go m.write(ctx, job, e, *e, now)
	}
}

// write writes what one marker was when writeDue looked (snap, at), and notes it.
func (m *blackoutMarkers) write(ctx context.Context, job types.NamespacedName, e *marker, snap marker, at time.Time) {
	err := func() (err error) {
		// As the health probe: a client failing on a hostile answer is a failed write.
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the Redis client failed on its answer: %v", p)
			}
		}()
		wctx, cancel := context.WithTimeout(ctx, m.writeTimeout)
		defer cancel()
		c, err := m.client(wctx, job, snap.secret)
		if err != nil {
			return err
		}
		if snap.since.IsZero() {
			return lock.ClearBlackout(wctx, c, snap.key, string(snap.uid))
		}
		return lock.SetBlackoutUntil(wctx, c, snap.key, string(snap.uid), snap.since, at.Add(m.ttl), snap.reason, m.ttl)
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	e.writing = false
	if err != nil {
		logf.FromContext(ctx).Error(err, "writing a blackout marker; trying again", "job", job, "blackout", !snap.since.IsZero(), "in", m.refresh)
		if e.gen != snap.gen {
			m.wake() // a newer change need not wait for the next tick
		}
		return
	}
	e.written, e.writtenAt = snap.gen, at
	switch {
	case e.written != e.gen:
		m.wake()
	case e.since.IsZero() && m.jobs[job] == e:
		delete(m.jobs, job) // deleted, and nothing new since
	}
}

// NeedLeaderElection: only the leader writes markers (it alone makes pods, and knows
// when it made them).
func (m *blackoutMarkers) NeedLeaderElection() bool { return true }

// markerClient is the Redis of job's Secret for its marker's writes, as the health view
// has it, or why there is none. It asks for the Secret only, not for the job: a deleted
// job's last DEL must not put the job back on the Secret's list of jobs to wake.
func (r *LockedCronJobReconciler) markerClient(ctx context.Context, job types.NamespacedName, secret string) (redis.UniversalClient, error) {
	st := r.health.state(ctx, types.NamespacedName{Namespace: job.Namespace}, secret)
	switch {
	case st.err != nil && st.err.blocking():
		return nil, st.err
	case st.client == nil:
		return nil, fmt.Errorf("the Redis of Secret %s/%s is not known yet", job.Namespace, secret)
	}
	return st.client, nil
}
