package controller

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// TestBlackoutMarkersHoldNoWorkerAndRecover: a pass only tells the markers what it found
// (observe never waits on Redis, frozen here); the marker is written once Redis answers
// again, says since when the blackout holds the job back, is written again while the
// blackout lasts (it would expire within its ttl otherwise), and is deleted when it ends.
func TestBlackoutMarkersHoldNoWorkerAndRecover(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	c, err := lock.NewClient(lock.ClientConfig{URL: proxy.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	admin := srv.Client()
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	m := newBlackoutMarkers(time.Now)
	m.ttl, m.refresh = 400*time.Millisecond, 50*time.Millisecond
	go func() { _ = m.Start(ctx) }()
	job := types.NamespacedName{Namespace: "ns", Name: "nightly"}
	key := lock.BlackoutKey("k", "uid-1")
	until := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}

	proxy.Freeze()
	since := time.UnixMilli(time.Now().UnixMilli())
	done := make(chan struct{})
	go func() {
		m.observe(job, "uid-1", "k", c, true, "Deployment/web is rolling out", since)
		m.observe(job, "uid-1", "k", c, true, "Deployment/web is rolling out", since.Add(time.Second))
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
	until("the marker, once Redis answers", func() bool { return admin.Get(ctx, key).Val() == want })

	// Kept while the blackout lasts: present through three of its ttls.
	for end := time.Now().Add(3 * m.ttl); time.Now().Before(end); {
		if v := admin.Get(ctx, key).Val(); !strings.HasPrefix(v, strconv.FormatInt(since.UnixMilli(), 10)+" ") {
			t.Fatalf("marker %q while the blackout lasts, want since %d kept", v, since.UnixMilli())
		}
		time.Sleep(20 * time.Millisecond) // sampling a condition that must hold throughout
	}

	m.observe(job, "uid-1", "k", c, false, "", since.Add(2*time.Second))
	until("the marker deleted", func() bool { return admin.Exists(ctx, key).Val() == 0 && !m.holding(job) })
}
