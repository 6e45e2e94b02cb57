package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// TestRedisSettings measures, on real redis-server processes, which Redis setting
// prevents which loss of locks and ledger entries; docs/lockwrap.md ("Redis settings")
// quotes its -v output:
//
//	go test ./internal/lock/ -run TestRedisSettings -v -count=1
func TestRedisSettings(t *testing.T) {
	const n = 100
	// hold takes n locks (keys p0…) for one occurrence each and returns the leases.
	hold := func(t *testing.T, c redis.UniversalClient, p string) []*lock.Lease {
		t.Helper()
		var out []*lock.Lease
		for i := 0; i < n; i++ {
			a, err := lock.New(c).Acquire(ctxT(t), lock.Request{Key: p + strconv.Itoa(i), Occurrence: occ, Holder: "h", TTL: 5 * time.Minute, Retention: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
		return out
	}
	// count returns how many of hold's locks and ledger entries exist.
	count := func(t *testing.T, c redis.UniversalClient, p string) (locks, entries int64) {
		t.Helper()
		ctx := ctxT(t)
		for i := 0; i < n; i++ {
			k := p + strconv.Itoa(i)
			locks += c.Exists(ctx, lock.LockKey(k)).Val()
			entries += c.Exists(ctx, lock.RunKey(k, occ)).Val()
		}
		return locks, entries
	}

	t.Run("restart (SIGKILL)", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			kept int64
		}{
			{"no persistence", nil, 0},
			{"RDB only, save 3600 1", []string{"--save", "3600 1"}, 0},
			{"appendonly yes, appendfsync everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, n},
			{"appendonly yes, appendfsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, n},
		} {
			s := redistest.Start(t, redistest.WithArgs(tc.args...))
			c := client(t, lock.ClientConfig{URL: s.URL()})
			hold(t, c, "r")
			s.Restart() // SIGKILL, no shutdown save
			waitUntil(t, func() bool { return c.Ping(ctxT(t)).Err() == nil })
			locks, entries := count(t, c, "r")
			t.Logf("%-40s %3d of %d locks, %3d of %d ledger entries kept", tc.name+":", locks, n, entries, n)
			if locks != tc.kept || entries != tc.kept {
				t.Errorf("%s: kept %d locks, %d entries; want %d", tc.name, locks, entries, tc.kept)
			}
		}
	})

	t.Run("memory full (maxmemory 4mb, 10 KB values written until 8 MB)", func(t *testing.T) {
		for _, policy := range []string{"noeviction", "allkeys-lru", "volatile-lru", "volatile-ttl"} {
			s := redistest.Start(t, redistest.WithArgs("--maxmemory", "4mb", "--maxmemory-policy", policy))
			c := client(t, lock.ClientConfig{URL: s.URL()})
			ctx := ctxT(t)
			hold(t, c, "e")
			var oom int
			val := strings.Repeat("x", 10<<10)
			for i := 0; i < 800; i++ {
				if err := c.Set(ctx, "filler:"+strconv.Itoa(i), val, 0).Err(); err != nil {
					if !strings.Contains(err.Error(), "OOM") {
						t.Fatal(err)
					}
					oom++
				}
			}
			if policy == "noeviction" {
				// Close the last gap below maxmemory with small values, so that the
				// acquire's few hundred bytes cannot fit in what the 10 KB ones left.
				for i := 0; i < 100000; i++ {
					if err := c.Set(ctx, "small:"+strconv.Itoa(i), "x", 0).Err(); err != nil {
						if !strings.Contains(err.Error(), "OOM") {
							t.Fatal(err)
						}
						break
					}
				}
			}
			locks, entries := count(t, c, "e")
			_, acqErr := lock.New(c).Acquire(ctx, lock.Request{Key: "new", Occurrence: occ, TTL: time.Minute})
			t.Logf("%-13s %3d of %d locks, %3d of %d ledger entries kept; %3d of 800 filler writes refused; a new acquire: %v",
				policy+":", locks, n, entries, n, oom, errText(acqErr))
			if policy == "noeviction" {
				if locks != n || entries != n || acqErr == nil || !strings.Contains(acqErr.Error(), "OOM") {
					t.Errorf("noeviction: %d locks, %d entries, acquire %v", locks, entries, acqErr)
				}
			} else if locks == n && entries == n {
				t.Errorf("%s evicted nothing", policy)
			}
		}
	})

	t.Run("min-replicas-to-write 1, replica gone", func(t *testing.T) {
		s := redistest.Start(t, redistest.WithArgs("--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"))
		c := client(t, lock.ClientConfig{URL: s.URL()})
		_, err := lock.New(c).Acquire(ctxT(t), lock.Request{Key: "m", Occurrence: occ, TTL: time.Minute})
		// A lock taken before the replica went away cannot be renewed either.
		s.Do("CONFIG", "SET", "min-replicas-to-write", "0")
		a, aerr := lock.New(c).Acquire(ctxT(t), lock.Request{Key: "m2", Occurrence: occ, TTL: time.Minute})
		if aerr != nil {
			t.Fatal(aerr)
		}
		s.Do("CONFIG", "SET", "min-replicas-to-write", "1")
		rerr := a.Renew(ctxT(t))
		t.Logf("acquire without a replica: %v; renew: %v", errText(err), errText(rerr))
		if err == nil || !strings.Contains(err.Error(), "NOREPLICAS") || rerr == nil || !strings.Contains(rerr.Error(), "NOREPLICAS") {
			t.Errorf("acquire: %v, renew: %v", err, rerr)
		}
	})

	t.Run("failover after unreplicated writes", func(t *testing.T) {
		m := redistest.Start(t)
		p := redistest.StartProxy(t, m.Addr())
		_, port, _ := strings.Cut(p.Addr(), ":")
		r := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
		rc := r.Client()
		defer rc.Close()
		ctx := ctxT(t)
		waitUntil(t, func() bool { return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up") })
		c := client(t, lock.ClientConfig{URL: m.URL()})
		l := lock.New(c)
		req := lock.Request{Key: "f", Occurrence: occ, Holder: "a", TTL: time.Minute}
		before, err := l.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := before.Finish(ctx, lock.StateSucceeded); err != nil {
			t.Fatal(err)
		}
		// The replica has it (wait for its offset to reach the master's)...
		waitUntil(t, func() bool { return rc.HGet(ctx, lock.RunKey("f", occ), "state").Val() == "succeeded" })
		p.Freeze() // ...then the link stalls
		req.Occurrence = occ.Add(time.Minute)
		a, err := l.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		waited := req
		waited.Key, waited.MinReplicas, waited.ReplicaTimeout = "g", 1, 300*time.Millisecond
		_, werr := l.Acquire(ctx, waited)
		m.Stop()
		rc.ReplicaOf(ctx, "NO", "ONE") // the failover: the replica is the master now
		rcl := client(t, lock.ClientConfig{URL: r.URL()})
		locks := rcl.Exists(ctx, lock.LockKey("f")).Val()
		b, err := lock.New(rcl).Acquire(ctx, lock.Request{Key: "f", Occurrence: req.Occurrence, Holder: "b", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		succeeded, _ := lock.Succeeded(ctx, rcl, "f", occ)
		t.Logf("lock acquired (no minReplicas) while the link stalled: %d of 1 on the new master; "+
			"the same with minReplicas 1: %v; the next holder's fence %d > the lost one's %d: %v; "+
			"the replicated succeeded entry survives: %v", locks, errText(werr), b.Fence, a.Fence, b.Fence > a.Fence, succeeded)
		if locks != 0 || !errors.Is(werr, lock.ErrNotEnoughReplicas) || b.Fence <= a.Fence || !succeeded {
			t.Errorf("locks %d, minReplicas %v, fences %d then %d, succeeded kept %v", locks, werr, a.Fence, b.Fence, succeeded)
		}
	})

	t.Run("Sentinel failover time", func(t *testing.T) {
		// Two replicas: with minReplicas 1 a renewal counts once a replica acknowledges it,
		// and the promoted one's only replica is the other.
		g := redistest.StartSentinel(t, 2, 3) // down-after-milliseconds 1000
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := client(t, lock.ClientConfig{URL: g.URL()})
		a, err := lock.New(c).Acquire(ctx, lock.Request{Key: "s", Occurrence: occ, Holder: "a", TTL: time.Minute, MinReplicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		old := g.Master.Addr()
		start := time.Now()
		g.Master.Stop()
		var elapsed time.Duration
		waitUntilWithin(t, 50*time.Second, func() bool {
			err := a.Renew(ctx)
			elapsed = time.Since(start)
			return err == nil
		})
		// The renewal went to the new master; the Sentinel asked may publish it a moment later.
		var now string
		waitUntilWithin(t, 20*time.Second, func() bool {
			now, _ = g.CurrentMaster(ctx)
			return now != "" && now != old
		})
		t.Logf("master SIGKILLed; first successful renewal (on %s, was %s) after %v", now, old, elapsed.Round(100*time.Millisecond))
	})
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return fmt.Sprint(err)
}
