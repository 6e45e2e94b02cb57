package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// The lock backend off the reconcile path (issue 13): a pass never waits for Redis, and
// reads each Secret at most once per secretTTL. Redis is probed per Secret by a
// background loop (health.run); a pass reads the last answer. When an answer changes,
// the jobs that use the Secret are woken through the health channel, so that their
// LockBackendReady condition follows within one probe.

const (
	// secretTTL is how long a Secret read is reused (RBAC stays get-only: no watch).
	secretTTL = time.Minute
	// secretErrorTTL is how long a Secret problem (not found, no url) is reused: short,
	// so that a fixed Secret is seen at the job's next backendRetry.
	secretErrorTTL = backendRetry - time.Second
	// probeInterval is how often a Secret's Redis is pinged in the background.
	probeInterval = 10 * time.Second
	// idleAfter: a Secret no pass asked about for this long is dropped (client closed).
	idleAfter = 10 * time.Minute
)

// backendState is what a pass knows of a job's lock backend, without I/O.
type backendState struct {
	client   redis.UniversalClient
	warnings []string
	err      *backendError
	// known is false until the first probe of the Secret's Redis has answered: the pass
	// leaves LockBackendReady as it was and is woken when the answer comes.
	known bool
}

// secretHealth is the cached view of one Secret.
type secretHealth struct {
	readAt time.Time // when the Secret was read
	// asOf is when the read behind client began (the Secret as it was then or since);
	// claimedAt when the read under way began.
	asOf, claimedAt time.Time
	client          redis.UniversalClient
	addrs           string
	// secretErr: the Secret itself is not usable (no probe runs).
	secretErr *backendError
	// The last probe: probedAt zero until it answered.
	probedAt time.Time
	probeErr *backendError
	warnings []string
	probing  bool
	// reading: a read of the Secret is under way (one at a time; see claimRead).
	reading bool
	// readWanted: a pass wants the Secret read again, however fresh (readSince).
	readWanted bool
	// lastAsked is when a pass last asked; jobs are the jobs that use the Secret.
	lastAsked time.Time
	jobs      map[types.NamespacedName]struct{}
}

// health is the background view of every Secret in use.
type health struct {
	b      *backends
	now    func() time.Time
	wake   chan ctrlevent.TypedGenericEvent[*v1alpha1.LockedCronJob]
	mu     sync.Mutex
	byName map[types.NamespacedName]*secretHealth
	// probe runs one probe (b.probe); a test may replace it.
	probe func(ctx context.Context, key types.NamespacedName, c redis.UniversalClient, addrs string) ([]string, *backendError)
	// ctx is the manager's context once run has started (probes stop with it).
	ctx context.Context
	// secretTTL is how long a Secret read is reused (default the const secretTTL);
	// probeInterval how often Start probes (default the const probeInterval).
	secretTTL, probeInterval time.Duration
}

func newHealth(b *backends) *health {
	h := &health{
		b:         b,
		now:       time.Now,
		wake:      make(chan ctrlevent.TypedGenericEvent[*v1alpha1.LockedCronJob], 1024),
		byName:    map[types.NamespacedName]*secretHealth{},
		ctx:       context.Background(),
		secretTTL: secretTTL, probeInterval: probeInterval,
	}
	h.probe = b.probe
	return h
}

// state is the job's backend as last seen: a Secret read if the cached one is older
// than secretTTL (one API GET, shared by every job naming the Secret), never a Redis
// round trip. While another pass or the background loop reads the Secret, it neither
// reads it too nor waits: it answers from what is known (nothing yet for a Secret never
// read; that read's probe wakes the job). A Secret whose Redis was never probed gets a
// probe started now.
func (h *health) state(ctx context.Context, job types.NamespacedName, secretName string) backendState {
	key := types.NamespacedName{Namespace: job.Namespace, Name: secretName}
	now := h.now()
	h.mu.Lock()
	s := h.byName[key]
	if s == nil {
		s = &secretHealth{jobs: map[types.NamespacedName]struct{}{}}
		h.byName[key] = s
	}
	s.lastAsked = now
	if job.Name != "" { // (a job's blackout marker asks for its Secret's client only)
		s.jobs[job] = struct{}{}
	}
	read := h.claimRead(s, now)
	h.mu.Unlock()

	if read {
		h.refresh(ctx, key, s)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if s.readAt.IsZero() {
		return backendState{} // the first read is another pass's
	}
	if s.secretErr != nil {
		return backendState{err: s.secretErr, known: true}
	}
	if s.probedAt.IsZero() {
		h.startProbe(key, s)
		return backendState{client: s.client}
	}
	return backendState{client: s.client, warnings: s.warnings, err: s.probeErr, known: true}
}

// claimRead reports whether the caller should read the Secret now: it is stale (older
// than secretTTL, a Secret problem older than secretErrorTTL, never read, or read "in
// the future" after a clock step) and no read is under way; the caller then owns the
// read until refresh ends it. h.mu is held.
func (h *health) claimRead(s *secretHealth, now time.Time) bool {
	stale := s.readAt.IsZero() || now.Sub(s.readAt) >= h.secretTTL || s.readWanted ||
		(s.secretErr != nil && now.Sub(s.readAt) >= min(secretErrorTTL, h.secretTTL)) || now.Before(s.readAt)
	if !stale || s.reading {
		return false
	}
	s.reading, s.readWanted, s.claimedAt = true, false, now
	return true
}

// readSince reports whether c, a client a pass holds, is the Secret as it was at t or
// since: c is the Secret's client now, from a read that began after t. If not, the next
// pass to ask reads it again, however fresh it is.
func (h *health) readSince(secret types.NamespacedName, t time.Time, c redis.UniversalClient) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.byName[secret]
	if s == nil {
		return false // never asked: the next pass's read is the first
	}
	if s.client == c && s.secretErr == nil && s.asOf.After(t) {
		return true
	}
	s.readWanted = true
	return false
}

// refresh reads the Secret again (the caller claimed the read); a changed Secret (a new
// client, or a new problem) resets what is known of its Redis and wakes the jobs that
// use it.
func (h *health) refresh(ctx context.Context, key types.NamespacedName, s *secretHealth) {
	c, addrs, berr := h.b.client(ctx, key.Namespace, key.Name)
	h.mu.Lock()
	s.reading = false
	if berr != nil && ctx.Err() != nil {
		// Cut short by the pass's end (its timeout, a stopping manager): no word on the
		// Secret, which the next pass reads again. The passes that asked while it was
		// the first read got nothing (their wake would have come from its probe): woken,
		// they read it.
		s.readWanted = true
		var jobs []types.NamespacedName
		if s.readAt.IsZero() {
			jobs = s.jobNames()
		}
		h.mu.Unlock()
		h.wakeJobs(jobs)
		return
	}
	// A changed Secret, or a first read that found it unusable: the passes that asked
	// meanwhile knew nothing (a usable one is probed next, and the probe wakes them).
	changed := (!s.readAt.IsZero() && (s.client != c || !sameProbe(s.secretErr, nil, berr, nil))) ||
		(s.readAt.IsZero() && berr != nil)
	if s.client != c {
		// A new or changed Secret: its Redis is unknown until probed.
		s.probedAt, s.probeErr, s.warnings = time.Time{}, nil, nil
	}
	s.readAt, s.asOf, s.client, s.addrs, s.secretErr = h.now(), s.claimedAt, c, addrs, berr
	jobs := s.jobNames()
	h.mu.Unlock()
	if changed {
		h.wakeJobs(jobs)
	}
}

// startProbe probes the Secret's Redis in the background, once at a time. h.mu is held.
func (h *health) startProbe(key types.NamespacedName, s *secretHealth) {
	if s.probing || s.client == nil {
		return
	}
	s.probing = true
	c, addrs, ctx := s.client, s.addrs, h.ctx
	go func() {
		warnings, berr := h.probeSafely(ctx, key, c, addrs)
		h.mu.Lock()
		s.probing = false
		if s.client != c { // the Secret changed meanwhile: this answer is stale
			h.mu.Unlock()
			return
		}
		changed := s.probedAt.IsZero() || !sameProbe(s.probeErr, s.warnings, berr, warnings)
		s.probedAt, s.probeErr, s.warnings = h.now(), berr, warnings
		var jobs []types.NamespacedName
		if changed {
			jobs = s.jobNames()
		}
		h.mu.Unlock()
		h.wakeJobs(jobs)
	}()
}

// probeSafely is h.probe, a panic in it (a client library's, on an answer it did not
// expect) taken for a failed probe: it runs in a goroutine of its own, where a panic would
// end the manager — on every replica (each probes), for every tenant.
func (h *health) probeSafely(ctx context.Context, key types.NamespacedName, c redis.UniversalClient, addrs string) (warnings []string, berr *backendError) {
	defer func() {
		if p := recover(); p != nil {
			logf.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Redis probe failed", "secret", key, "stack", string(debug.Stack()))
			warnings, berr = nil, &backendError{ReasonRedisUnreachable,
				fmt.Sprintf("Redis at %s (Secret %s): the client failed on its answer (not shown: it may quote the server)", addrs, key), fmt.Errorf("panic: %v", p)}
		}
	}()
	return h.probe(ctx, key, c, addrs)
}

// jobNames lists the jobs that use the Secret. h.mu is held.
func (s *secretHealth) jobNames() []types.NamespacedName {
	jobs := make([]types.NamespacedName, 0, len(s.jobs))
	for j := range s.jobs {
		jobs = append(jobs, j)
	}
	return jobs
}

// wakeJobs queues a pass of each job.
func (h *health) wakeJobs(jobs []types.NamespacedName) {
	h.mu.Lock()
	done := h.ctx.Done() // Start sets h.ctx under h.mu
	h.mu.Unlock()
	for _, j := range jobs {
		obj := &v1alpha1.LockedCronJob{}
		obj.Namespace, obj.Name = j.Namespace, j.Name
		select {
		case h.wake <- ctrlevent.TypedGenericEvent[*v1alpha1.LockedCronJob]{Object: obj}:
		case <-done:
			return
		}
	}
}

func sameProbe(errA *backendError, wA []string, errB *backendError, wB []string) bool {
	if (errA == nil) != (errB == nil) || (errA != nil && (errA.reason != errB.reason || errA.msg != errB.msg)) {
		return false
	}
	if len(wA) != len(wB) {
		return false
	}
	for i := range wA {
		if wA[i] != wB[i] {
			return false
		}
	}
	return true
}

// forget drops a deleted job from its Secret's list.
func (h *health) forget(job types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.byName {
		delete(s.jobs, job)
	}
}

// Start probes every Secret in use each probeInterval, and drops Secrets no pass asked
// about for idleAfter. It is a manager Runnable that runs on every replica, but only
// passes add Secrets: a standby probes nothing, and after a takeover each Secret is read
// and probed when a pass first asks (its jobs' LockBackendReady stays as the last leader
// wrote it until then).
func (h *health) Start(ctx context.Context) error {
	h.mu.Lock()
	h.ctx = ctx
	h.mu.Unlock()
	t := time.NewTicker(h.probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := h.now()
		var reread []types.NamespacedName
		var closing []redis.UniversalClient
		h.mu.Lock()
		for key, s := range h.byName {
			switch {
			case now.Sub(s.lastAsked) > idleAfter:
				delete(h.byName, key)
				// Its client too (a probe under way fails, unheard): taken under h.mu, so
				// that a pass asking meanwhile makes a new one (h.mu, then b.mu: never the
				// other way), closed after it.
				if c := h.b.take(key); c != nil {
					closing = append(closing, c)
				}
			case !s.readAt.IsZero() && h.claimRead(s, now):
				reread = append(reread, key) // outside the lock: an API call
			case s.secretErr == nil:
				h.startProbe(key, s)
			}
		}
		h.mu.Unlock()
		for _, c := range closing {
			closeAside(c) // not one tenant's close after another's on this loop
		}
		for _, key := range reread {
			h.mu.Lock()
			s := h.byName[key]
			h.mu.Unlock()
			if s != nil {
				h.refresh(ctx, key, s)
				h.mu.Lock()
				if s.secretErr == nil {
					h.startProbe(key, s)
				}
				h.mu.Unlock()
			}
		}
	}
}

// NeedLeaderElection: probing is read-only; every replica keeps its view warm.
func (h *health) NeedLeaderElection() bool { return false }
