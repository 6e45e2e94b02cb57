package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// A run made before a blackout of its job began is not granted the lock while the
// blackout's marker is there: it was waiting (contention Retry, a manual run's Wait) when a
// rollout began, and must not start its job in the rollout. Nothing is written for it: no
// lock, no ledger entry, no fence. A run made after the blackout began (the controller made
// it knowingly), a run of another job on the same key, and a run that does not name its job
// or when it was made (a pod of an earlier release) are granted as before, and so is every run once the marker
// is cleared.
func TestAcquireRefusedInABlackoutThatBeganAfterTheRunWasMade(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	const key, job = "guarded", "0b7e6c1a-job-uid"
	since := time.UnixMilli(time.Now().UnixMilli())
	made := since.Add(-time.Second)
	req := lock.Request{Key: key, Occurrence: occ, Holder: "a", TTL: 5 * time.Second, Retention: time.Hour,
		BlackoutID: job, MadeAt: made}

	if err := lock.SetBlackout(ctx, c, key, job, since, "rollout of Deployment/web", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := l.Acquire(ctx, req)
	var bo *lock.BlackoutError
	if !errors.As(err, &bo) || !errors.Is(err, lock.ErrBlackout) {
		t.Fatalf("acquire in a blackout that began after the run was made: %v, want a *BlackoutError", err)
	}
	if !bo.Since.Equal(since) || bo.Reason != "rollout of Deployment/web" {
		t.Fatalf("blackout error %+v, want since %v and the reason", bo, since)
	}
	for _, k := range []string{lock.LockKey(key), lock.FenceKey(key), lock.RunKey(key, occ)} {
		if n := c.Exists(ctx, k).Val(); n != 0 {
			t.Fatalf("%s written by a refused acquire", k)
		}
	}

	for name, r := range map[string]lock.Request{
		"made after it began":     {BlackoutID: job, MadeAt: since.Add(time.Millisecond)},
		"made as it began":        {BlackoutID: job, MadeAt: since},
		"another job's run":       {BlackoutID: "another-job-uid", MadeAt: made},
		"a run naming no job":     {MadeAt: made},
		"a run naming no made-at": {BlackoutID: job},
	} {
		r.Key, r.Occurrence, r.Holder, r.TTL, r.Retention = key, occ, name, 5*time.Second, time.Hour
		g, err := l.Acquire(ctx, r)
		if err != nil {
			t.Fatalf("%s: %v, want the lock", name, err)
		}
		if err := g.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.ClearBlackout(ctx, c, key, job); err != nil {
		t.Fatal(err)
	}
	g, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("acquire once the blackout is cleared: %v", err)
	}
	if err := g.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The marker lives its ttl: a controller that stops refreshing it (gone, partitioned)
	// holds nothing back for longer.
	if err := lock.SetBlackout(ctx, c, key, job, since, "window", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, lock.BlackoutKey(key, job)).Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("marker ttl %v, want (0, 300ms]", ttl)
	}
}
