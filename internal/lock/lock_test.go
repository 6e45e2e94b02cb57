package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

var occ = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func client(t testing.TB, cfg lock.ClientConfig) redis.UniversalClient {
	t.Helper()
	c, err := lock.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exercise runs the whole lock protocol on c: acquire, contention, renew, finish,
// suppression, and checks the keys live in one slot-friendly layout.
func exercise(t *testing.T, c redis.UniversalClient, key string) {
	t.Helper()
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: key, Occurrence: occ, Holder: "a", TTL: 5 * time.Second, Retention: time.Hour}
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if a.Fence < 1 || a.Recovered || len(a.Token) != 32 {
		t.Fatalf("lease %+v", a)
	}
	req2 := req
	req2.Holder = "b"
	_, err = l.Acquire(ctx, req2)
	var held *lock.HeldError
	if !errors.As(err, &held) || held.Holder != "a" || !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second acquire: %v", err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if ok, err := lock.Succeeded(ctx, c, key, occ); err != nil || ok {
		t.Fatalf("succeeded before finish: %v %v", ok, err)
	}
	if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("renew after finish: %v", err)
	}
	if ok, err := lock.Succeeded(ctx, c, key, occ); err != nil || !ok {
		t.Fatalf("succeeded after finish: %v %v", ok, err)
	}
	_, err = l.Acquire(ctx, req2)
	var sup *lock.SuppressedError
	if !errors.As(err, &sup) || sup.Holder != "a" || !errors.Is(err, lock.ErrSuppressed) {
		t.Fatalf("acquire after success: %v", err)
	}
	// The next occurrence runs, with a higher fence.
	req2.Occurrence = occ.Add(time.Minute)
	b, err := l.Acquire(ctx, req2)
	if err != nil {
		t.Fatalf("next occurrence: %v", err)
	}
	if b.Fence <= a.Fence {
		t.Fatalf("fence %d after %d", b.Fence, a.Fence)
	}
	if err := b.Finish(ctx, lock.StateFailed); err != nil {
		t.Fatal(err)
	}
	// A failed occurrence may run again; it is not a recovery.
	c2, err := l.Acquire(ctx, req2)
	if err != nil || c2.Recovered {
		t.Fatalf("rerun failed occurrence: %v %+v", err, c2)
	}
	if err := c2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, lock.LockKey(key)).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("release left the lock: %v", err)
	}
	if err := c.HGet(ctx, lock.RunKey(key, req2.Occurrence), "state").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("release left the ledger entry: %v", err)
	}
}

func TestStandalone(t *testing.T) {
	s := redistest.Start(t)
	exercise(t, client(t, lock.ClientConfig{URL: s.URL()}), t.Name())
}

func TestCrashedRunIsRecovered(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := lock.Request{Key: "crash", Occurrence: occ, Holder: "a", TTL: 200 * time.Millisecond}
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// "a" crashes: never renews. Wait for the lock to expire.
	waitUntil(t, func() bool { return c.Exists(ctx, lock.LockKey("crash")).Val() == 0 })
	req.Holder = "b"
	b, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Recovered || b.Fence <= a.Fence {
		t.Fatalf("recovered=%v fence %d after %d", b.Recovered, b.Fence, a.Fence)
	}
	// The crashed holder cannot touch b's lock nor ledger entry.
	if err := a.Finish(ctx, lock.StateFailed); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("stale finish: %v", err)
	}
	if v := c.HGet(ctx, lock.RunKey("crash", occ), "holder").Val(); v != "b" {
		t.Fatalf("ledger holder %q", v)
	}
	if err := b.Renew(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMinReplicas(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	req := lock.Request{Key: "mr", Occurrence: occ, Holder: "a", TTL: 2 * time.Second, MinReplicas: 1, ReplicaTimeout: 100 * time.Millisecond}
	_, err := lock.New(c).Acquire(ctx, req)
	if !errors.Is(err, lock.ErrNotEnoughReplicas) {
		t.Fatalf("no replicas: %v", err)
	}
	// Released and forgotten: nothing left behind but the fence.
	if n := c.Exists(ctx, lock.LockKey("mr"), lock.RunKey("mr", occ)).Val(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// With minReplicas a renewal counts only once the replicas hold it: a renewal only the
// master received is lost in a failover, and the promoted replica expires the lock a ttl
// after the last renewal it got, earlier than a holder counting from the latest one.
func TestRenewWaitsForReplicas(t *testing.T) {
	s := redistest.Start(t)
	r := redistest.StartReplicaOf(t, s)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	req := lock.Request{Key: "mrr", Occurrence: occ, Holder: "a", TTL: 3 * time.Second, MinReplicas: 1, ReplicaTimeout: 200 * time.Millisecond}
	l, err := lock.New(c).Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renewal with the replica in sync: %v", err)
	}
	r.Pause()
	err = l.Renew(ctx)
	r.Resume()
	if !errors.Is(err, lock.ErrNotEnoughReplicas) || errors.Is(err, lock.ErrLost) {
		t.Fatalf("renewal the replica did not acknowledge: %v, want ErrNotEnoughReplicas (and not ErrLost: the master still has it)", err)
	}
	// A WAIT bounded by the caller's deadline (a renewal's: its interval) reports the count,
	// not an i/o timeout: it ends half a second before the deadline.
	r.Pause()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = l.Renew(sctx)
	cancel()
	r.Resume()
	if !errors.Is(err, lock.ErrNotEnoughReplicas) || !strings.Contains(err.Error(), "0 of 1") {
		t.Fatalf("renewal under a short deadline: %v", err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renewal once the replica is back: %v", err)
	}
	if err := l.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
}

// An earlier holder of our name (another instance: a pod made again under the name of one
// that ran the occurrence) that failed the occurrence suppresses it; while it runs, the
// lock is held as for anyone; the same holder (a restarted container, a resent call) and
// holders of other names are not affected.
func TestEarlierHolderOfOurNameSuppresses(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)
	req := func(holder, name string) lock.Request {
		return lock.Request{Key: "again", Occurrence: occ, Holder: holder, HolderName: name, TTL: 10 * time.Second}
	}
	first := req("eu-1/ns/job-1/uid-1", "eu-1/ns/job-1")
	a, err := l.Acquire(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	// While the first pod runs, one made again under its name finds the lock held (it
	// waits or skips as its contention says; two clusters given one --cluster-name meet so).
	var he *lock.HeldError
	if _, err := l.Acquire(ctx, req("eu-1/ns/job-1/uid-2", "eu-1/ns/job-1")); !errors.As(err, &he) {
		t.Fatalf("a pod made again while the first runs: %v, want held", err)
	}
	var se *lock.SuppressedError
	if err := a.Finish(ctx, lock.StateFailed); err != nil {
		t.Fatal(err)
	}
	// The first pod's container restarted in place (restartPolicy OnFailure): it runs again.
	a, err = l.Acquire(ctx, first)
	if err != nil {
		t.Fatalf("the same holder after a failure (a restarted container): %v", err)
	}
	if err := a.Finish(ctx, lock.StateFailed); err != nil {
		t.Fatal(err)
	}
	// A pod made again under the name, after the first failed: suppressed.
	if _, err := l.Acquire(ctx, req("eu-1/ns/job-1/uid-2", "eu-1/ns/job-1")); !errors.As(err, &se) || se.Holder != first.Holder {
		t.Fatalf("a pod made again after the first failed: %v, want suppressed by %s", err, first.Holder)
	}
	// Holders of other names run a failed occurrence again: a manual run of it, a name
	// that shares a prefix, a holder that gives no name (lockwrap outside a pod).
	for _, other := range []lock.Request{
		req("eu-1/ns/job-1-manual-x/uid-3", "eu-1/ns/job-1-manual-x"),
		req("eu-1/ns/job-1/uid-1/x", "eu-1/ns/job-1/uid-1"),
		req("eu-1/ns/job-1/uid-4", ""),
	} {
		b, err := l.Acquire(ctx, other)
		if err != nil {
			t.Fatalf("%s (name %q) after a failure of %s: %v", other.Holder, other.HolderName, first.Holder, err)
		}
		if err := b.Finish(ctx, lock.StateFailed); err != nil {
			t.Fatal(err)
		}
		// Its entry is the occurrence's now; give the first holder's back for the next.
		c.HSet(ctx, lock.RunKey("again", occ), "holder", first.Holder)
	}
}

func TestKeys(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	for got, want := range map[string]string{
		lock.LockKey("ns/job"):                                  "lockedcron:{ns/job}:lock",
		lock.FenceKey("ns/job"):                                 "lockedcron:{ns/job}:fence",
		lock.RunKey("ns/job", at):                               fmt.Sprintf("lockedcron:{ns/job}:run:%d", at.Unix()),
		lock.RunKey("ns/job", at.In(time.FixedZone("x", 3600))): fmt.Sprintf("lockedcron:{ns/job}:run:%d", at.Unix()),
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}

func TestTLS(t *testing.T) {
	s := redistest.Start(t, redistest.WithTLS())
	exercise(t, client(t, lock.ClientConfig{URL: s.URL(), CACert: s.CACert()}), "tls")
	// Without the CA the server is not trusted.
	c := client(t, lock.ClientConfig{URL: s.URL()})
	if err := c.Ping(ctxT(t)).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("ping without CA: %v", err)
	}
}

func TestACLUser(t *testing.T) {
	s := redistest.Start(t)
	// Exactly the commands docs/lockwrap.md lists: the scripts (EVALSHA, EVAL on
	// NOSCRIPT) and what they call (TIME for fencing tokens, INFO for durability
	// warnings), WAIT for minReplicas, HGET for Succeeded, PING.
	s.Do("ACL", "SETUSER", "lockwrap", "on", ">s3cret", "resetkeys", "~lockedcron:*", "-@all",
		"+evalsha", "+eval", "+wait", "+hget", "+ping",
		"+get", "+set", "+del", "+hset", "+pexpire", "+time", "+info")
	s.Do("ACL", "SETUSER", "default", "off")
	acl := client(t, lock.ClientConfig{URL: s.URL(), Username: "lockwrap", Password: "s3cret"})
	exercise(t, acl, "acl")
	a, err := lock.New(acl).Acquire(ctxT(t), lock.Request{Key: "acl2", Occurrence: occ, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range a.Warnings {
		if strings.Contains(w, "refused") {
			t.Errorf("warning %q", w)
		}
	}
	// Credentials inside the URL work too.
	c := client(t, lock.ClientConfig{URL: "redis://lockwrap:s3cret@" + s.Addr()})
	if err := c.Ping(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	// Other keys and commands are refused.
	if err := c.Get(ctxT(t), "other"); err == nil || !strings.Contains(err.Err().Error(), "NOPERM") {
		t.Fatalf("GET other as lockwrap: %v", err)
	}
	if err := c.FlushAll(ctxT(t)).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("FLUSHALL as lockwrap: %v", err)
	}
	if err := client(t, lock.ClientConfig{URL: s.URL(), Username: "lockwrap", Password: "wrong"}).Ping(ctxT(t)).Err(); err == nil {
		t.Fatal("wrong password accepted")
	}
}

// TestClusterFailoverWithMinReplicas: with minReplicas the lock's scripts run on the key's
// master found from the client's slot map. After a failover that map names the demoted
// master until the client reloads it, which go-redis does on its own only every 60 s:
// renewals kept going to the old master and failed, and a holder whose lock the promoted
// replica held stopped its job. A failed call now has the map reloaded.
func TestClusterFailoverWithMinReplicas(t *testing.T) {
	cl := redistest.StartReplicatedCluster(t, 3)
	c := client(t, lock.ClientConfig{URL: cl.URL()})
	ctx := ctxT(t)
	req := lock.Request{Key: "fo", Occurrence: occ, Holder: "a", TTL: 30 * time.Second, MinReplicas: 1}
	l, err := lock.New(c).Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// The replica of the key's master takes over (CLUSTER FAILOVER: it first catches up).
	slot := c.ClusterKeySlot(ctx, lock.LockKey("fo")).Val()
	var master string
	for _, s := range c.ClusterSlots(ctx).Val() {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			master = s.Nodes[0].Addr
		}
	}
	var replica *redistest.Server
	for _, n := range cl.Nodes {
		info := n.Client().Info(ctx, "replication").Val()
		if strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+master[strings.LastIndex(master, ":")+1:]+"\r") {
			replica = n
		}
	}
	if replica == nil {
		t.Fatalf("no replica of %s", master)
	}
	replica.Do("CLUSTER", "FAILOVER")
	waitUntilWithin(t, 30*time.Second, func() bool {
		return strings.Contains(replica.Client().Info(ctx, "replication").Val(), "role:master")
	})
	// The old master is the new one's replica and in sync (WAIT has a replica to count).
	waitUntilWithin(t, 30*time.Second, func() bool {
		return strings.Contains(replica.Client().Info(ctx, "replication").Val(), "connected_slaves:1")
	})
	start := time.Now()
	var failed error
	waitUntilWithin(t, 20*time.Second, func() bool {
		err := l.Renew(ctx)
		if err != nil && failed == nil {
			failed = err
		}
		return err == nil
	})
	t.Logf("first renewal on the promoted master %v after the failover (the first error before it: %v)", time.Since(start).Round(10*time.Millisecond), failed)
	if err := l.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
}

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := client(t, lock.ClientConfig{URL: cl.URL()})
	// Keys on different masters: the script's keys share their key's slot.
	for _, k := range []string{"a", "b", "c", "d", "ns/job"} {
		exercise(t, c, k)
	}
	// Keys with braces (one starting with "}" made CROSSSLOT errors) too.
	ctx := ctxT(t)
	for _, k := range nastyKeys {
		slotsOf(t, ctx, cl.Nodes[0], k)
	}
	exercise(t, c, "}x{y}")
	exercise(t, c, "{}")
	// Every master is checked; this cluster runs without AOF.
	w, err := lock.Durability(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != len(cl.Nodes) {
		t.Fatalf("cluster warnings %q", w)
	}
	for i, n := range cl.Nodes {
		if want := "Redis " + n.Addr() + " has appendonly no"; !strings.Contains(strings.Join(w, "\n"), want) {
			t.Errorf("warning %d: no %q in %q", i, want, w)
		}
	}
	req := lock.Request{Key: "wait", Occurrence: occ, Holder: "a", TTL: time.Second, MinReplicas: 1, ReplicaTimeout: 50 * time.Millisecond}
	if _, err := lock.New(c).Acquire(ctxT(t), req); !errors.Is(err, lock.ErrNotEnoughReplicas) {
		t.Fatalf("cluster without replicas, minReplicas 1: %v", err)
	}
}

func TestSentinel(t *testing.T) {
	g := redistest.StartSentinel(t, 1, 3)
	c := client(t, lock.ClientConfig{URL: g.URL()})
	exercise(t, c, "sentinel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The ttl outlasts the old master's reconfiguration (sentinel: ~10s, then a sync).
	req := lock.Request{Key: "failover", Occurrence: occ, Holder: "a", TTL: time.Minute, MinReplicas: 1}
	a, err := lock.New(c).Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	now := g.Failover()
	// The old master is reconfigured as the new one's replica and in sync with it (so
	// that the client no longer talks to it and Finish's WAIT has a replica to count).
	for _, s := range append([]*redistest.Server{g.Master}, g.Replicas...) {
		if s.Addr() == now {
			continue
		}
		sc := s.Client()
		defer sc.Close()
		waitUntilWithin(t, time.Minute, func() bool {
			info := sc.Info(ctx, "replication").Val()
			return strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+now[strings.LastIndex(now, ":")+1:]) &&
				strings.Contains(info, "master_link_status:up")
		})
	}
	// The client follows the new master, and the lock (acknowledged by the replica) is there.
	waitUntil(t, func() bool { return a.Renew(ctx) == nil })
	if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
}

// countingHook counts commands sent to the server (one per round trip; a pipeline counts once).
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

func TestOneRoundTripEach(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	h := &countingHook{}
	c.AddHook(h)
	ctx := ctxT(t)
	l := lock.New(c)
	warm, err := l.Acquire(ctx, lock.Request{Key: "warm", Occurrence: occ, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Renew(ctx)
	_ = warm.Release(ctx) // scripts are loaded now
	h.n.Store(0)
	lease, err := l.Acquire(ctx, lock.Request{Key: "rt", Occurrence: occ, TTL: time.Second})
	if err != nil || h.n.Load() != 1 {
		t.Fatalf("acquire: %v, %d round trips", err, h.n.Load())
	}
	h.n.Store(0)
	if err := lease.Renew(ctx); err != nil || h.n.Load() != 1 {
		t.Fatalf("renew: %v, %d round trips", err, h.n.Load())
	}
	h.n.Store(0)
	if err := lease.Finish(ctx, lock.StateSucceeded); err != nil || h.n.Load() != 1 {
		t.Fatalf("finish: %v, %d round trips", err, h.n.Load())
	}
}

func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	waitUntilWithin(t, 20*time.Second, cond)
}

func waitUntilWithin(t testing.TB, limit time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, limit, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("condition not met: %v", err)
	}
}
