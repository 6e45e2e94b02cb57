package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

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

// A run granted before the blackout began is one running job, which a blackout never
// stops: its restarted container (the same holder: crashed, OOM-killed, or restarted by
// restartPolicy OnFailure after its command failed) is not refused by the marker, so that
// it takes its crashed predecessor's lock over (or runs its retry) and its pod's last
// report says what the run did, not that it never ran.
func TestBlackoutDoesNotRefuseARunItsHolderAlreadyBegan(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	const key, job = "began", "job-uid"
	made := time.Now().Add(-time.Minute)
	req := func(o time.Time) lock.Request {
		return lock.Request{Key: key, Occurrence: o, Holder: "c/ns/pod/uid-1", HolderName: "c/ns/pod", TTL: 5 * time.Second,
			Retention: time.Hour, BlackoutID: job, MadeAt: made}
	}
	first, err := l.Acquire(ctx, req(occ))
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.SetBlackout(ctx, c, key, job, time.Now(), "rollout", time.Minute); err != nil {
		t.Fatal(err)
	}
	// The container dies while its job runs; the restarted one comes back.
	again, err := l.Acquire(ctx, req(occ))
	if err != nil || !again.TookOver || again.Fence <= first.Fence {
		t.Fatalf("restarted container in a blackout: %+v %v, want its predecessor's lock taken over", again, err)
	}
	// Its command fails; OnFailure restarts it: the retry is the same run's.
	if err := again.Finish(ctx, lock.StateFailed); err != nil {
		t.Fatal(err)
	}
	retry, err := l.Acquire(ctx, req(occ))
	if err != nil {
		t.Fatalf("OnFailure retry in a blackout: %v, want the lock", err)
	}
	if err := retry.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Another pod of the same name (a new UID: another holder) is a new run: refused,
	// and so is another occurrence of the same holder name.
	other := req(occ)
	other.Holder = "c/ns/pod/uid-2"
	if _, err := l.Acquire(ctx, other); !errors.Is(err, lock.ErrBlackout) {
		t.Fatalf("another pod of the name in a blackout: %v, want ErrBlackout", err)
	}
	if _, err := l.Acquire(ctx, req(occ.Add(time.Minute))); !errors.Is(err, lock.ErrBlackout) {
		t.Fatalf("a new run made before the blackout: %v, want ErrBlackout", err)
	}
}

// TestBlackoutMarkerHoldsWhateverTheNodesClock (helper-98): a marker holds runs back for
// as long as Redis keeps it (the controller writes it with a 60 s ttl, again every 15 s).
// Its until, on the controller's clock, was compared with the acquiring run's: a pod on a
// node whose clock is 45 s or more ahead read a marker just refreshed as past its end, and
// its job started inside the rollout that held it back. A marker Redis has dropped (its
// writer gave up, or a late SET's ttl ran out) holds nothing back.
func TestBlackoutMarkerHoldsWhateverTheNodesClock(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	now := time.Now()
	req := lock.Request{Key: "ahead", Occurrence: occ, Holder: "p/uid", TTL: 5 * time.Second, Retention: time.Hour,
		BlackoutID: "job", MadeAt: now.Add(-time.Hour)}
	// Refreshed 15 s ago by a controller whose clock is 50 s behind this node's: on this
	// node's clock, its until (written + 60 s) passed 5 s ago.
	if err := lock.SetBlackoutUntil(ctx, c, "ahead", "job", now.Add(-2*time.Minute), now.Add(-5*time.Second), "rollout of Deployment/web", time.Minute); err != nil {
		t.Fatal(err)
	}
	if g, err := l.Acquire(ctx, req); !errors.Is(err, lock.ErrBlackout) {
		t.Fatalf("a live marker, its until behind this node's clock: %+v, %v; want ErrBlackout", g, err)
	}
	// Its ttl in Redis run out, it holds nothing back.
	if err := lock.SetBlackoutUntil(ctx, c, "ahead", "job", now.Add(-2*time.Minute), now.Add(time.Minute), "rollout of Deployment/web", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.Exists(ctx, lock.BlackoutKey("ahead", "job")).Val() == 0, nil
	}); err != nil {
		t.Fatal("the marker's ttl did not run out")
	}
	if _, err := l.Acquire(ctx, req); err != nil {
		t.Fatalf("a marker Redis dropped: %v, want the lock", err)
	}
}
