package lock_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// A new run of an occurrence whose earlier run failed (or was taken over) starts from a
// fresh ledger entry: nothing of the earlier run (finishedAt, released, tookOver, …) stays
// in it, so the entry describes the run that holds the lock. The acquire script deletes the
// entry only when one is there.
func TestNewRunOfFailedOccurrenceWritesAFreshEntry(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: "fresh", Occurrence: occ, Holder: "a", TTL: 5 * time.Second, Retention: time.Hour}
	run := lock.RunKey("fresh", occ)

	// a runs, and its pod restarts: the same holder takes its own crashed lock over.
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := l.Acquire(ctx, req)
	if err != nil || !a2.TookOver {
		t.Fatalf("takeover: %+v %v", a2, err)
	}
	if err := a2.Finish(ctx, lock.StateFailed); err != nil {
		t.Fatal(err)
	}
	if got := c.HGetAll(ctx, run).Val(); got["state"] != lock.StateFailed || got["tookOver"] != "1" || got["released"] != "1" {
		t.Fatalf("failed entry %v", got)
	}

	before := time.Now().UnixMilli()
	b, err := l.Acquire(ctx, lock.Request{Key: "fresh", Occurrence: occ, Holder: "b", TTL: 5 * time.Second, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if b.Recovered || b.TookOver {
		t.Fatalf("after a failed run: recovered %v, took over %v", b.Recovered, b.TookOver)
	}
	want := map[string]string{"state": "running", "holder": "b", "token": b.Token,
		"fence": strconv.FormatInt(b.Fence, 10), "recovered": "0"}
	got := c.HGetAll(ctx, run).Val()
	if at, err := strconv.ParseInt(got["acquiredAt"], 10, 64); err != nil || at < before || at > b.AcquiredAt.UnixMilli() {
		t.Fatalf("acquiredAt %q, want between %d and %d", got["acquiredAt"], before, b.AcquiredAt.UnixMilli())
	}
	delete(got, "acquiredAt")
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("new run's entry (-want +got):\n%s", d)
	}
	if b.Fence <= a2.Fence || a2.Fence <= a.Fence {
		t.Fatalf("fences %d, %d, %d not increasing", a.Fence, a2.Fence, b.Fence)
	}
	if err := b.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
}
