package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// TestLateAcquireAfterItsRunFailedTakesNothing (helper-95): a copy of run A's acquire
// whose bytes land late (held up on a connection while a resend or the next attempt got
// through) after A ran, failed and finished found a failed entry and a free lock: it took
// the lock for a run that had ended (the next occurrence's contenders were skipped behind
// it for a ttl), and wrote a running entry over A's failed one, so a pod made again under
// A's name ran the failed occurrence again and the next run reported recovered.
func TestLateAcquireAfterItsRunFailedTakesNothing(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: "late", Occurrence: occ, Holder: "cl/ns/pod/uid1", HolderName: "cl/ns/pod", TTL: 10 * time.Second, Token: "t1", Retention: time.Hour}
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Finish(ctx, lock.StateFailed); err != nil {
		t.Fatal(err)
	}
	var serr *lock.SuppressedError
	if g, err := l.Acquire(ctx, req); !errors.As(err, &serr) || serr.State != lock.SuppressedEnded {
		t.Errorf("the late copy of a finished run's acquire: %+v, %v; want it suppressed as ended", g, err)
	}
	if v := c.Get(ctx, lock.LockKey("late")).Val(); v != "" {
		t.Errorf("the late copy left the lock held: %q", v)
	}
	if st := c.HGet(ctx, lock.RunKey("late", occ), "state").Val(); st != string(lock.StateFailed) {
		t.Errorf("the entry is %q after the late copy, want A's %q", st, lock.StateFailed)
	}
	// Later still: the finish key's life (2×ttl) is over, the failed entry (retention) is
	// not. The entry's own token says the run ended.
	c.Del(ctx, lock.FinishKey("late", "t1"))
	if g, err := l.Acquire(ctx, req); !errors.As(err, &serr) || serr.State != lock.SuppressedEnded {
		t.Errorf("the late copy once the finish key expired: %+v, %v; want it suppressed as ended", g, err)
	}
	if v := c.Get(ctx, lock.LockKey("late")).Val(); v != "" {
		t.Errorf("the late copy left the lock held once the finish key expired: %q", v)
	}
	again := req
	again.Holder, again.Token = "cl/ns/pod/uid2", "t2"
	if g, err := l.Acquire(ctx, again); !errors.Is(err, lock.ErrSuppressed) {
		t.Errorf("a pod made again under A's name: %+v, %v; want the failed occurrence suppressed", g, err)
	}
}

// TestRunLetGoUnstartedKeepsTheCrashItFound (helper-95): y took over the occurrence x had
// crashed in (recovered) and let it go without starting its command (past its deadline,
// signalled, a late grant): the release deleted the entry, and z, running the occurrence
// x had left part-way, was told it was a fresh one (recovered false).
func TestRunLetGoUnstartedKeepsTheCrashItFound(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	for _, how := range []string{"release", "abandon"} {
		t.Run(how, func(t *testing.T) {
			req := lock.Request{Key: "crash-" + how, Occurrence: occ, Holder: "x", TTL: 10 * time.Second, Retention: time.Hour}
			if _, err := l.Acquire(ctx, req); err != nil { // x crashes while running
				t.Fatal(err)
			}
			c.Del(ctx, lock.LockKey(req.Key)) // its lock expires
			req.Holder = "y"
			y, err := l.Acquire(ctx, req)
			if err != nil || !y.Recovered {
				t.Fatalf("y: %+v, %v; want the crash recovered", y, err)
			}
			if err := letGo(ctx, l, how, y, req); err != nil {
				t.Fatal(err)
			}
			req.Holder = "z"
			z, err := l.Acquire(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !z.Recovered {
				t.Errorf("z runs the occurrence x crashed in and is told recovered=false (entry %v)", c.HGetAll(ctx, lock.RunKey(req.Key, occ)).Val())
			}
		})
	}
}

// A run let go unstarted on an occurrence nobody had begun leaves no entry: the next one
// is a fresh run.
func TestRunLetGoUnstartedOnAFreshOccurrenceLeavesNoEntry(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: "fresh-letgo", Occurrence: occ, Holder: "y", TTL: 10 * time.Second, Retention: time.Hour}
	y, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, lock.RunKey(req.Key, occ)).Val(); n != 0 {
		t.Errorf("a released fresh run left its entry: %v", c.HGetAll(ctx, lock.RunKey(req.Key, occ)).Val())
	}
}

// TestLateAcquireAfterItsRunWasLetGoTakesNothing: the sibling of a late copy after a
// failure: a run let go unstarted (Release, Abandon) left no entry, and a copy of its
// acquire landing then took the lock for a ttl (contenders skipped behind a run that was
// over) and wrote a running entry (the next run reported recovered, a crash that was not).
func TestLateAcquireAfterItsRunWasLetGoTakesNothing(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	for _, how := range []string{"release", "abandon"} {
		t.Run(how, func(t *testing.T) {
			req := lock.Request{Key: "late-" + how, Occurrence: occ, Holder: "a", TTL: 10 * time.Second, Token: "t-" + how, Retention: time.Hour}
			a, err := l.Acquire(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if err := letGo(ctx, l, how, a, req); err != nil {
				t.Fatal(err)
			}
			if g, err := l.Acquire(ctx, req); err == nil {
				t.Errorf("the late copy of a run let go was granted: %+v", g)
			}
			if v := c.Get(ctx, lock.LockKey(req.Key)).Val(); v != "" {
				t.Errorf("the late copy left the lock held: %q", v)
			}
			b := req
			b.Holder, b.Token = "b", ""
			g, err := l.Acquire(ctx, b)
			if err != nil || g.Recovered {
				t.Errorf("the next run: %+v, %v; want the lock, and no crash recovered", g, err)
			}
		})
	}
}

// letGo lets a run go unstarted, as lockwrap does: how is "release" (the lease's own
// Release: past its deadline, signalled) or "abandon" (Locker.Abandon with the token every
// attempt was sent with: an acquire whose reply was lost, then given up).
func letGo(ctx context.Context, l *lock.Locker, how string, lease *lock.Lease, req lock.Request) error {
	if how == "release" {
		return lease.Release(ctx)
	}
	req.Token = lease.Token
	return l.Abandon(ctx, req)
}

// TestLateAcquireAfterGivingUpBesideACrashTakesNothing (helper-99): a run that gave up
// (Abandon: its acquire's reply lost, then its retries spent) while the occurrence's entry
// was another run's (a crashed one's) left no fin:<token>, the release returning early on
// the entry it may not touch; its acquire landing then took the lock for a ttl, nobody
// behind it, and wrote its running entry over the crash's.
func TestLateAcquireAfterGivingUpBesideACrashTakesNothing(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: "gave-up", Occurrence: occ, Holder: "x", TTL: 10 * time.Second, Retention: time.Hour}
	if _, err := l.Acquire(ctx, req); err != nil { // x crashes while running
		t.Fatal(err)
	}
	c.Del(ctx, lock.LockKey(req.Key)) // its lock expires
	y := req
	y.Holder, y.Token = "y", "t-y"
	if err := l.Abandon(ctx, y); err != nil { // y's acquire held up; y gives up
		t.Fatal(err)
	}
	if g, err := l.Acquire(ctx, y); err == nil {
		t.Errorf("the late copy of a run that gave up was granted: %+v", g)
	}
	if v := c.Get(ctx, lock.LockKey(req.Key)).Val(); v != "" {
		t.Errorf("the late copy left the lock held: %q", v)
	}
	if h := c.HGet(ctx, lock.RunKey(req.Key, occ), "holder").Val(); h != "x" {
		t.Errorf("the entry's holder is %q, want the crashed run's (x)", h)
	}
}

// TestReleaseKeepingACrashDoesNotLetItsHolderPastABlackout (helper-99): the crashed run's
// entry a release keeps no longer names the releasing run's holder, which a blackout
// marker takes for "a run our holder already began" and lets through.
func TestReleaseKeepingACrashDoesNotLetItsHolderPastABlackout(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	now := time.Now()
	req := lock.Request{Key: "kept", Occurrence: occ, Holder: "x", TTL: 10 * time.Second, Retention: time.Hour}
	if _, err := l.Acquire(ctx, req); err != nil { // x crashes while running
		t.Fatal(err)
	}
	c.Del(ctx, lock.LockKey(req.Key))
	y := req
	y.Holder, y.BlackoutID, y.MadeAt = "y", "job", now.Add(-time.Hour)
	g, err := l.Acquire(ctx, y)
	if err != nil || !g.Recovered {
		t.Fatalf("y: %+v, %v", g, err)
	}
	if err := g.Release(ctx); err != nil { // let go unstarted
		t.Fatal(err)
	}
	if err := lock.SetBlackout(ctx, c, req.Key, "job", now.Add(-time.Minute), "rollout of Deployment/web", time.Minute); err != nil {
		t.Fatal(err)
	}
	y.Token = "" // y's container restarted: a new run of the same holder, made before the blackout
	if g, err := l.Acquire(ctx, y); !errors.Is(err, lock.ErrBlackout) {
		t.Errorf("y again, made before the blackout: %+v, %v; want ErrBlackout (it began nothing)", g, err)
	}
}
