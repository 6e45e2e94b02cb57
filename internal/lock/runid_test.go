package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// TestRunIDLedgerIsItsOwn: a run with a RunID (a manual run) takes the same lock but
// keeps its own ledger entry: a succeeded scheduled occurrence does not suppress it, it
// does not mark any occurrence succeeded, and the same RunID once succeeded is suppressed.
func TestRunIDLedgerIsItsOwn(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	const key = "runid"

	sched := lock.Request{Key: key, Occurrence: occ, Holder: "sched", TTL: 5 * time.Second, Retention: time.Hour}
	a, err := l.Acquire(ctx, sched)
	if err != nil {
		t.Fatal(err)
	}
	manual := lock.Request{Key: key, Occurrence: occ, RunID: "manual:uid-1:fix-1", Holder: "manual", TTL: 5 * time.Second, Retention: time.Hour}
	if _, err := l.Acquire(ctx, manual); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("manual run while the scheduled one holds the lock: %v, want held", err)
	}
	if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}

	// Same occurrence time, but its own entry: not suppressed by the scheduled success.
	m, err := l.Acquire(ctx, manual)
	if err != nil {
		t.Fatalf("manual run after the scheduled occurrence succeeded: %v", err)
	}
	if m.Fence <= a.Fence || m.Recovered {
		t.Fatalf("manual lease %+v after fence %d", m, a.Fence)
	}
	if err := m.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.HGet(ctx, lock.RunIDKey(key, manual.RunID), "state").Val(); got != lock.StateRunning {
		t.Fatalf("manual ledger state %q while running", got)
	}
	if got := c.HGet(ctx, lock.RunKey(key, occ), "holder").Val(); got != "sched" {
		t.Fatalf("the occurrence's entry was touched: holder %q", got)
	}
	if err := m.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
	if got := c.HGet(ctx, lock.RunIDKey(key, manual.RunID), "state").Val(); got != lock.StateSucceeded {
		t.Fatalf("manual ledger state %q after finish", got)
	}

	// The same request id again is a duplicate; another id runs.
	if _, err := l.Acquire(ctx, manual); !errors.Is(err, lock.ErrSuppressed) {
		t.Fatalf("same run id again: %v, want suppressed", err)
	}
	other := manual
	other.RunID = "manual:uid-1:fix-2"
	o, err := l.Acquire(ctx, other)
	if err != nil {
		t.Fatalf("another run id: %v", err)
	}
	if err := o.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A manual run does not consume a scheduled occurrence.
	next := sched
	next.Occurrence = occ.Add(time.Minute)
	manual2 := manual
	manual2.RunID, manual2.Occurrence = "manual:uid-1:fix-3", next.Occurrence
	m2, err := l.Acquire(ctx, manual2)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
	if ok, err := lock.Succeeded(ctx, c, key, next.Occurrence); err != nil || ok {
		t.Fatalf("scheduled occurrence succeeded=%v (%v) after a manual run at its time", ok, err)
	}
	b, err := l.Acquire(ctx, next)
	if err != nil {
		t.Fatalf("scheduled occurrence after a manual run: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
