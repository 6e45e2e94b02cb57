package lock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// BenchmarkAcquireRelease is one uncontended acquire + release against loopback Redis;
// roundtrips/op counts commands sent (2: the acquire script, the finish script),
// redis-cmds/op the commands Redis ran (INFO commandstats: the scripts and theirs).
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
	s.Do("CONFIG", "RESETSTAT")
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
	b.StopTimer()
	b.ReportMetric(float64(h.n.Load())/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(serverCalls(b, s))/float64(b.N), "redis-cmds/op")
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

// serverCalls sums the calls in s's INFO commandstats but those of the administrative
// connections (CONFIG RESETSTAT, HELLO, CLIENT).
func serverCalls(b *testing.B, s *redistest.Server) int64 {
	info, _ := s.Do("INFO", "commandstats").(string)
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch cmd, _, _ := strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|"); cmd {
		case "config", "hello", "client":
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		c, _ := strconv.ParseInt(calls, 10, 64)
		n += c
	}
	return n
}

// BenchmarkLedgerBytesPerOccurrence is the Redis memory one finished occurrence keeps for
// the ledger's retention (its run entry, with a holder as the controller makes them:
// <cluster>/<namespace>/<pod>/<pod UID>), from INFO memory's used_memory over b.N
// occurrences of one key; entry-bytes is MEMORY USAGE of one entry. A key's ledger holds
// retention ÷ interval entries: see docs/lockwrap.md, "Sizing Redis".
//
//	go test ./internal/lock/ -run '^$' -bench LedgerBytes -benchtime 20000x
func BenchmarkLedgerBytesPerOccurrence(b *testing.B) {
	s := redistest.Start(b)
	c := client(b, lock.ClientConfig{URL: s.URL()})
	l := lock.New(c)
	ctx := context.Background()
	const name = "cluster-3f9c21ab/payments/nightly-report-1796683163"
	req := func(i int) lock.Request {
		return lock.Request{Key: "payments/nightly-report", Occurrence: occ.Add(time.Duration(i) * time.Minute),
			Holder: name + "/0d4c5a9e-8f1b-4c1e-9b6a-2f7e3c4d5e6f", HolderName: name, TTL: 10 * time.Second}
	}
	run := func(i int) {
		lease, err := l.Acquire(ctx, req(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Finish(ctx, lock.StateSucceeded); err != nil {
			b.Fatal(err)
		}
	}
	run(-1) // the key's lock, fence and last, and the scripts
	used := func() int64 {
		info, _ := s.Do("INFO", "memory").(string)
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("no used_memory in INFO memory")
		return 0
	}
	before := used()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		run(i)
	}
	b.StopTimer()
	// The fin: keys of the finished runs expire within minutes; the entries stay.
	keys, _ := s.Do("KEYS", "*:fin:*").([]any)
	for _, key := range keys {
		s.Do("DEL", key)
	}
	b.ReportMetric(float64(used()-before)/float64(b.N), "bytes/occurrence")
	n, _ := s.Do("MEMORY", "USAGE", lock.RunKey("payments/nightly-report", occ)).(int64)
	b.ReportMetric(float64(n), "entry-bytes")
}
