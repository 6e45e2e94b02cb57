package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// BenchmarkAcquireRelease is one uncontended acquire + release against loopback Redis;
// roundtrips/op counts commands sent (2: the acquire script, the finish script).
func BenchmarkAcquireRelease(b *testing.B) {
	s := redistest.Start(b)
	c := client(b, lock.ClientConfig{URL: s.URL()})
	h := &countingHook{}
	c.AddHook(h)
	l := lock.New(c)
	ctx := context.Background()
	req := lock.Request{Key: "bench", Occurrence: occ, Holder: "bench", TTL: 10 * time.Second}
	warm, err := l.Acquire(ctx, req) // load the scripts
	if err != nil {
		b.Fatal(err)
	}
	_ = warm.Release(ctx)
	h.n.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		lease, err := l.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(h.n.Load())/float64(b.N), "roundtrips/op")
}

// BenchmarkRenew is one compare-and-pexpire; roundtrips/op should be 1.
func BenchmarkRenew(b *testing.B) {
	s := redistest.Start(b)
	c := client(b, lock.ClientConfig{URL: s.URL()})
	h := &countingHook{}
	c.AddHook(h)
	ctx := context.Background()
	lease, err := lock.New(c).Acquire(ctx, lock.Request{Key: "bench", Occurrence: occ, Holder: "bench", TTL: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	_ = lease.Renew(ctx)
	h.n.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := lease.Renew(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(h.n.Load())/float64(b.N), "roundtrips/op")
}
