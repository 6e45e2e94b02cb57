package lock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// loseReplyHook executes the next script on the server, then pretends the reply was lost.
type loseReplyHook struct{ armed atomic.Bool }

func (h *loseReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		name := cmd.Name()
		if (name == "evalsha" || name == "eval") && err == nil && h.armed.CompareAndSwap(true, false) {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}
func (h *loseReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Issue 8 case 6: an acquire that took the lock but whose reply was lost is recognised on
// the retry with the same token: same fence, no second fencing token issued.
func TestLostAcquireReplyIsRecognised(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	h := &loseReplyHook{}
	c.AddHook(h)
	ctx := ctxT(t)
	l := lock.New(c)
	token, err := lock.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	req := lock.Request{Key: "lost", Occurrence: occ, Holder: "h", TTL: 10 * time.Second, Token: token}
	h.armed.Store(true)
	if _, err := l.Acquire(ctx, req); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("first attempt: %v", err)
	}
	if h.armed.Load() {
		t.Fatal("the script was not run")
	}
	fence := c.Get(ctx, lock.FenceKey("lost")).Val()
	if v := c.Get(ctx, lock.LockKey("lost")).Val(); v != token+" h" {
		t.Fatalf("the lost attempt did not take the lock: %q", v)
	}
	// A retry with another token is contention with ourselves: what the token prevents.
	other := req
	other.Token = strings.Repeat("0", 32)
	other.Holder = "h2"
	if _, err := l.Acquire(ctx, other); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("other token: %v", err)
	}
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if a.Token != token || strconv.FormatInt(a.Fence, 10) != fence || a.Recovered || a.TookOver {
		t.Fatalf("retry lease %+v, fence key %s", a, fence)
	}
	if got := c.Get(ctx, lock.FenceKey("lost")).Val(); got != fence {
		t.Fatalf("the retry issued a new fence: %s after %s", got, fence)
	}
	if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}

	// The reply is lost and the retry comes after the lock expired: ours again, not a
	// recovery of someone else's crash.
	req.Key, req.TTL = "lost2", 300*time.Millisecond
	h.armed.Store(true)
	if _, err := l.Acquire(ctx, req); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("first attempt: %v", err)
	}
	waitUntil(t, func() bool { return c.Exists(ctx, lock.LockKey("lost2")).Val() == 0 })
	b, err := l.Acquire(ctx, req)
	if err != nil || b.Recovered || b.TookOver {
		t.Fatalf("retry after expiry: %v %+v", err, b)
	}
}

// Issue 8 case 3: fencing tokens keep increasing after Redis lost its data.
func TestFenceIncreasesAcrossDataLoss(t *testing.T) {
	s := redistest.Start(t) // no persistence
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	var max int64
	for i := 0; i < 2; i++ {
		a, err := l.Acquire(ctx, lock.Request{Key: "dl", Occurrence: occ.Add(time.Duration(i) * time.Minute), Holder: "a", TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if a.Fence <= max {
			t.Fatalf("fence %d after %d", a.Fence, max)
		}
		max = a.Fence
		if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
			t.Fatal(err)
		}
	}
	s.Restart()
	waitUntil(t, func() bool { return c.Ping(ctx).Err() == nil })
	if n := c.Exists(ctx, lock.FenceKey("dl"), lock.RunKey("dl", occ)).Val(); n != 0 {
		t.Fatalf("restart kept %d keys: no data loss to test", n)
	}
	// The ledger is gone too, so the finished occurrence runs again (the Redis settings
	// section of docs/lockwrap.md says how to avoid that) - but with a higher fence.
	b, err := l.Acquire(ctx, lock.Request{Key: "dl", Occurrence: occ, Holder: "b", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence <= max {
		t.Fatalf("fence %d after data loss, earlier up to %d", b.Fence, max)
	}
}

// Issue 8 case 2: renewals keep the running entry alive past the retention; a vanished
// entry is written again.
func TestRenewKeepsRunningEntry(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	const retention = 300 * time.Millisecond
	req := lock.Request{Key: "keep", Occurrence: occ, Holder: "a", TTL: 2 * time.Second, Retention: retention}
	a, err := lock.New(c).Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	run := lock.RunKey("keep", occ)
	// The entry lives at least as long as the lock from the start.
	if lp, rp := c.PTTL(ctx, lock.LockKey("keep")).Val(), c.PTTL(ctx, run).Val(); rp < lp-100*time.Millisecond {
		t.Fatalf("entry ttl %v < lock ttl %v", rp, lp)
	}
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < 3*req.TTL/2 { // past the retention and the first lock ttl
		<-tick.C
		if err := a.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		if lp, rp := c.PTTL(ctx, lock.LockKey("keep")).Val(), c.PTTL(ctx, run).Val(); rp < lp-100*time.Millisecond {
			t.Fatalf("after renew: entry ttl %v < lock ttl %v", rp, lp)
		}
	}
	if got := c.HGetAll(ctx, run).Val(); got["state"] != lock.StateRunning || got["token"] != a.Token {
		t.Fatalf("entry after %v of renewals: %v", time.Since(start), got)
	}
	// Evicted (here: deleted) while running: the next renewal writes it again.
	c.Del(ctx, run)
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	got := c.HGetAll(ctx, run).Val()
	want := map[string]string{"state": "running", "holder": "a", "token": a.Token,
		"fence": strconv.FormatInt(a.Fence, 10), "recovered": "0",
		"acquiredAt": strconv.FormatInt(a.AcquiredAt.UnixMilli(), 10)}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("rewritten entry (-want +got):\n%s", d)
	}
	if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
}

// Issue 8 case 2: Finish records the outcome unless another run's entry is there, and
// says which of lock and ledger it could not account for.
func TestFinishRecords(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: "fin", Holder: "a", TTL: 5 * time.Second, Retention: time.Hour}

	t.Run("entry vanished", func(t *testing.T) {
		req := req
		req.Occurrence = occ
		a, err := l.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		run := lock.RunKey("fin", req.Occurrence)
		c.Del(ctx, run)
		if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
			t.Fatal(err)
		}
		got := c.HGetAll(ctx, run).Val()
		if got["state"] != "succeeded" || got["holder"] != "a" || got["token"] != a.Token ||
			got["fence"] != strconv.FormatInt(a.Fence, 10) || got["finishedAt"] == "" {
			t.Fatalf("entry %v", got)
		}
		if p := c.PTTL(ctx, run).Val(); p <= 59*time.Minute || p > time.Hour {
			t.Fatalf("entry ttl %v, want the retention", p)
		}
		if _, err := l.Acquire(ctx, req); !errors.Is(err, lock.ErrSuppressed) {
			t.Fatalf("rerun: %v", err)
		}
	})
	t.Run("another run's entry", func(t *testing.T) {
		req := req
		req.Occurrence = occ.Add(time.Minute)
		a, err := l.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		run := lock.RunKey("fin", req.Occurrence)
		c.HSet(ctx, run, "token", "someone-else")
		err = a.Finish(ctx, lock.StateSucceeded)
		if !errors.Is(err, lock.ErrNotRecorded) || errors.Is(err, lock.ErrLost) {
			t.Fatalf("finish: %v", err)
		}
		if st := c.HGet(ctx, run, "state").Val(); st != "running" {
			t.Fatalf("another run's entry changed to %q", st)
		}
		if c.Exists(ctx, lock.LockKey("fin")).Val() != 0 {
			t.Fatal("lock not released")
		}
	})
	t.Run("lock lost, entry ours", func(t *testing.T) {
		req := req
		req.Occurrence = occ.Add(2 * time.Minute)
		a, err := l.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		c.Del(ctx, lock.LockKey("fin")) // expired while we were frozen
		err = a.Finish(ctx, lock.StateSucceeded)
		if !errors.Is(err, lock.ErrLost) || errors.Is(err, lock.ErrNotRecorded) {
			t.Fatalf("finish: %v", err)
		}
		// Recorded all the same: the occurrence is not run again.
		if ok, err := lock.Succeeded(ctx, c, "fin", req.Occurrence); err != nil || !ok {
			t.Fatalf("succeeded: %v %v", ok, err)
		}
	})
}

// Finish(succeeded) with MinReplicas waits for the replicas like Acquire does.
func TestFinishWaitsForReplicas(t *testing.T) {
	m := redistest.Start(t)
	r := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(m.Port)))
	mc := m.Client()
	defer mc.Close()
	rc := r.Client()
	defer rc.Close()
	ctx := ctxT(t)
	waitUntil(t, func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up") &&
			strings.Contains(mc.Info(ctx, "replication").Val(), "state=online")
	})
	c := client(t, lock.ClientConfig{URL: m.URL()})
	l := lock.New(c)
	req := lock.Request{Key: "rep", Occurrence: occ, Holder: "a", TTL: 5 * time.Second,
		MinReplicas: 1, ReplicaTimeout: 10 * time.Second} // WAIT returns on the first ack
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
	// WAIT returned: the replica has the record.
	if st := rc.HGet(ctx, lock.RunKey("rep", occ), "state").Val(); st != "succeeded" {
		t.Fatalf("replica's entry %q", st)
	}

	req.Occurrence = occ.Add(time.Minute)
	req.ReplicaTimeout = time.Second // what the frozen replica's Finish waits
	b, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r.Pause()
	defer r.Resume()
	err = b.Finish(ctx, lock.StateSucceeded)
	if !errors.Is(err, lock.ErrNotEnoughReplicas) || errors.Is(err, lock.ErrLost) {
		t.Fatalf("finish with the replica frozen: %v", err)
	}
	// The master has it, released and recorded; only the replicas' acknowledgement is missing.
	if ok, _ := lock.Succeeded(ctx, c, "rep", req.Occurrence); !ok || c.Exists(ctx, lock.LockKey("rep")).Val() != 0 {
		t.Fatalf("master: succeeded=%v", ok)
	}
}

// Issue 8 case 4: a lock held by our own holder for our own running occurrence is our
// crashed predecessor (e.g. lockwrap SIGKILLed by the OOM killer, container restarted).
func TestTakeoverOfOwnCrashedPredecessor(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: "oom", Occurrence: occ, Holder: "pod-1", TTL: time.Minute}
	a, err := l.Acquire(ctx, req) // then SIGKILLed: never renews nor finishes
	if err != nil {
		t.Fatal(err)
	}

	// Someone else, or us for another occurrence, still finds it held.
	other := req
	other.Holder = "pod-2"
	var held *lock.HeldError
	if _, err := l.Acquire(ctx, other); !errors.As(err, &held) || held.Holder != "pod-1" {
		t.Fatalf("another holder: %v", err)
	}
	next := req
	next.Occurrence = occ.Add(time.Minute)
	if _, err := l.Acquire(ctx, next); !errors.As(err, &held) || held.Holder != "pod-1" {
		t.Fatalf("same holder, another occurrence: %v", err)
	}

	b, err := l.Acquire(ctx, req) // the restarted container, a new token
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if !b.Recovered || !b.TookOver || b.Fence <= a.Fence || b.Token == a.Token {
		t.Fatalf("takeover lease %+v after %+v", b, a)
	}
	if v := c.Get(ctx, lock.LockKey("oom")).Val(); v != b.Token+" pod-1" {
		t.Fatalf("lock value %q", v)
	}
	if p := c.PTTL(ctx, lock.LockKey("oom")).Val(); p <= 0 {
		t.Fatalf("lock ttl %v", p)
	}
	entry := c.HGetAll(ctx, lock.RunKey("oom", occ)).Val()
	if entry["token"] != b.Token || entry["state"] != "running" || entry["recovered"] != "1" ||
		entry["fence"] != strconv.FormatInt(b.Fence, 10) {
		t.Fatalf("entry %v", entry)
	}
	// Were the predecessor not dead after all, it could touch neither lock nor ledger.
	if err := a.Renew(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("old renew: %v", err)
	}
	err = a.Finish(ctx, lock.StateSucceeded)
	if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrNotRecorded) {
		t.Fatalf("old finish: %v", err)
	}
	if err := b.Renew(ctx); err != nil {
		t.Fatal(err)
	}

	// Same holder, another occurrence's live lock: not a crashed predecessor of this
	// occurrence (one holder identity for every occurrence, as a VM crontab's --holder). The
	// holder crashed in occ, its lock expired; it now runs occ+1; a retry of occ, finding the
	// lock held by its own holder and occ's entry running, must not take occ+1's lock over:
	// the lock's token is not occ's entry's (helper-103: no test failed without that check).
	vm1 := lock.Request{Key: "vm", Occurrence: occ, Holder: "vm-1", TTL: time.Minute, Token: "t1"}
	if _, err := l.Acquire(ctx, vm1); err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, lock.LockKey("vm")) // crashed; its lock expired
	vm2 := lock.Request{Key: "vm", Occurrence: occ.Add(time.Minute), Holder: "vm-1", TTL: time.Minute, Token: "t2"}
	if _, err := l.Acquire(ctx, vm2); err != nil {
		t.Fatal(err)
	}
	retry := vm1
	retry.Token = "t3"
	if g, err := l.Acquire(ctx, retry); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("a retry of occurrence 1 took the lock from occurrence 2's live run: %+v, %v (lock now %q)", g, err, c.Get(ctx, lock.LockKey("vm")).Val())
	}

	// Same holder but no running entry of this lock's token: held.
	c.Del(ctx, lock.RunKey("oom", occ))
	if _, err := l.Acquire(ctx, req); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("no running entry: %v", err)
	}
	// Without a holder identity there is no takeover.
	anon := lock.Request{Key: "anon", Occurrence: occ, TTL: time.Minute}
	if _, err := l.Acquire(ctx, anon); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, anon); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("empty holder: %v", err)
	}
}

const (
	aofWarning      = "Redis has appendonly no: a restart loses the lock and the ledger (set appendonly yes)"
	evictionWarning = "Redis maxmemory-policy allkeys-lru can evict the lock or the ledger (set noeviction)"
)

// Issue 8 case 3: an unsafe Redis is reported, by Acquire (same round trip) and Durability.
func TestDurabilityWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redistest.Option
		want []string
	}{
		{"default test server", nil, []string{aofWarning}},
		{"aof", []redistest.Option{redistest.WithPersistence()}, nil},
		{"aof, allkeys-lru", []redistest.Option{redistest.WithPersistence(), redistest.WithArgs("--maxmemory-policy", "allkeys-lru")}, []string{evictionWarning}},
		{"allkeys-lru", []redistest.Option{redistest.WithArgs("--maxmemory-policy", "allkeys-lru")}, []string{aofWarning, evictionWarning}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, tc.opts...)
			c := client(t, lock.ClientConfig{URL: s.URL()})
			ctx := ctxT(t)
			a, err := lock.New(c).Acquire(ctx, lock.Request{Key: "d", Occurrence: occ, TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, a.Warnings); d != "" {
				t.Errorf("lease warnings (-want +got):\n%s", d)
			}
			w, err := lock.Durability(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, w); d != "" {
				t.Errorf("Durability (-want +got):\n%s", d)
			}
		})
	}
}

// An ACL user without INFO and TIME still gets the lock, and is told what it misses.
func TestDurabilityWithoutInfoAndTime(t *testing.T) {
	s := redistest.Start(t, redistest.WithPersistence())
	s.Do("ACL", "SETUSER", "narrow", "on", ">pw", "resetkeys", "~lockedcron:*", "-@all",
		"+evalsha", "+eval", "+get", "+set", "+del", "+hset", "+hget", "+pexpire")
	c := client(t, lock.ClientConfig{URL: s.URL(), Username: "narrow", Password: "pw"})
	ctx := ctxT(t)
	l := lock.New(c)
	a, err := l.Acquire(ctx, lock.Request{Key: "n", Occurrence: occ, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Redis refused TIME to this user: fencing tokens fall back to the counter and go back if Redis loses data (allow +time)",
		"Redis refused INFO to this user: durability unknown (allow +info)",
	}
	if d := cmp.Diff(want, a.Warnings); d != "" {
		t.Fatalf("warnings (-want +got):\n%s", d)
	}
	if a.Fence != 1 {
		t.Fatalf("counter fallback: fence %d", a.Fence)
	}
	if _, err := lock.Durability(ctx, c); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("Durability without INFO: %v", err)
	}
}

// Issue 8, bad input: keys with braces get a digest tag, so all their keys share a slot.
func TestNastyKeys(t *testing.T) {
	digest := func(k string) string {
		sum := sha256.Sum256([]byte(k))
		return "lockedcron:{#" + hex.EncodeToString(sum[:8]) + "}:lock"
	}
	for _, k := range nastyKeys {
		if strings.ContainsAny(k, "{}") {
			if got := lock.LockKey(k); got != digest(k) {
				t.Errorf("LockKey(%q) = %q, want %q", k, got, digest(k))
			}
		} else if got := lock.LockKey(k); got != "lockedcron:{"+k+"}:lock" {
			t.Errorf("LockKey(%q) = %q: the first release's layout changed", k, got)
		}
	}
	seen := map[string]string{}
	for _, k := range nastyKeys {
		if prev, ok := seen[lock.LockKey(k)]; ok {
			t.Errorf("keys %q and %q share %s", prev, k, lock.LockKey(k))
		}
		seen[lock.LockKey(k)] = k
	}
}

var nastyKeys = []string{"}x{y}", "}", "{", "{}", "}{", "a{b}c", "{{}}", "{a}", "ns/job", "a}", "#x", " sp ace "}

// slotsOf checks on a Cluster node that the key's three Redis keys hash to one slot.
func slotsOf(t *testing.T, ctx context.Context, node *redistest.Server, key string) {
	t.Helper()
	nc := node.Client()
	defer nc.Close()
	var slots []int64
	for _, k := range []string{lock.LockKey(key), lock.FenceKey(key), lock.RunKey(key, occ)} {
		n, err := nc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, n)
	}
	if slots[0] != slots[1] || slots[0] != slots[2] {
		t.Errorf("key %q: slots %v", key, slots)
	}
}
