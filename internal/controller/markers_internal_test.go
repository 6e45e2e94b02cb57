package controller

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// markersOn starts blackout markers whose Secret's Redis is whatever *c holds when a
// write asks (nil: not known), with a short ttl and refresh.
func markersOn(t *testing.T, c *redis.UniversalClient, mu *sync.Mutex) (*blackoutMarkers, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m := newBlackoutMarkers(time.Now, func(context.Context, types.NamespacedName, string) redis.UniversalClient {
		mu.Lock()
		defer mu.Unlock()
		return *c
	})
	m.ttl, m.refresh = 400*time.Millisecond, 50*time.Millisecond
	go func() { _ = m.Start(ctx) }()
	return m, ctx
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func newClient(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	c, err := lock.NewClient(lock.ClientConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	markedJob  = types.NamespacedName{Namespace: "ns", Name: "nightly"}
	rollingOut = markerView{uid: "uid-1", key: "k", secret: "redis", guarded: true, blocked: true, reason: "Deployment/web is rolling out"}
	notBlocked = markerView{uid: "uid-1", key: "k", secret: "redis", guarded: true}
)

// TestBlackoutMarkersHoldNoWorkerAndRecover: a pass only tells the markers what it found
// (observe never waits on Redis, frozen here); the marker is written once Redis answers
// again, says since when the blackout holds the job back, is written again while the
// blackout lasts (it would expire within its ttl otherwise) through the client the
// Secret has at each write — the one before closed (the health view drops an idle
// Secret's client, and makes a new one for a rotated Secret) — and is deleted when the
// blackout ends.
func TestBlackoutMarkersHoldNoWorkerAndRecover(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	var mu sync.Mutex
	c := newClient(t, proxy.URL())
	m, ctx := markersOn(t, &c, &mu)
	admin := srv.Client()
	t.Cleanup(func() { admin.Close() })
	key := lock.BlackoutKey("k", "uid-1")

	proxy.Freeze()
	since := time.UnixMilli(time.Now().UnixMilli())
	done := make(chan struct{})
	go func() {
		m.observe(markedJob, rollingOut, since)
		m.observe(markedJob, rollingOut, since.Add(time.Second))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("observe waits for the frozen Redis, holding the pass's worker")
	}
	if v := admin.Get(ctx, key).Val(); v != "" {
		t.Fatalf("marker %q written through a frozen proxy", v)
	}
	proxy.Thaw()
	want := strconv.FormatInt(since.UnixMilli(), 10) + " Deployment/web is rolling out"
	until(t, "the marker, once Redis answers", func() bool { return admin.Get(ctx, key).Val() == want })

	// Kept while the blackout lasts: present through three of its ttls, its first client
	// closed and replaced.
	mu.Lock()
	old := c
	c = newClient(t, srv.URL())
	mu.Unlock()
	old.Close()
	for end := time.Now().Add(3 * m.ttl); time.Now().Before(end); {
		if v := admin.Get(ctx, key).Val(); !strings.HasPrefix(v, strconv.FormatInt(since.UnixMilli(), 10)+" ") {
			t.Fatalf("marker %q while the blackout lasts, want since %d kept", v, since.UnixMilli())
		}
		time.Sleep(20 * time.Millisecond) // sampling a condition that must hold throughout
	}

	m.observe(markedJob, notBlocked, since.Add(2*time.Second))
	until(t, "the marker deleted", func() bool { return admin.Exists(ctx, key).Val() == 0 && !m.holding(markedJob) })
}

// TestBlackoutMarkersEndCleanly: a manager that begins (a new leader) deletes the marker
// an earlier one left for a job it first sees out of a blackout (it ended during the
// handover: pods made before it would be refused for up to a ttl more); and a job whose
// marker cannot be deleted (its Redis unknown, or gone) is forgotten once whatever was
// written has expired, rather than retried for ever.
func TestBlackoutMarkersEndCleanly(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	c := newClient(t, srv.URL())
	admin := srv.Client()
	t.Cleanup(func() { admin.Close() })
	ctx := context.Background()
	if err := lock.SetBlackout(ctx, admin, "k", "uid-1", time.Now(), "left by the earlier leader", time.Hour); err != nil {
		t.Fatal(err)
	}
	m, _ := markersOn(t, &c, &mu)
	m.observe(markedJob, notBlocked, time.Now())
	until(t, "the earlier leader's marker deleted", func() bool {
		return admin.Exists(ctx, lock.BlackoutKey("k", "uid-1")).Val() == 0 && !m.holding(markedJob)
	})

	mu.Lock()
	c = nil // the Secret's Redis not known: no write can succeed
	mu.Unlock()
	m.observe(markedJob, rollingOut, time.Now())
	m.observe(markedJob, notBlocked, time.Now())
	until(t, "the ended marker forgotten", func() bool { return !m.holding(markedJob) })
}
