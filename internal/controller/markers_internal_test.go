package controller

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// markersOn starts blackout markers whose Secret's Redis is whatever *c holds when a
// write asks (nil: not known), with a short ttl, refresh and write timeout.
func markersOn(t *testing.T, c *redis.UniversalClient, mu *sync.Mutex, ttl time.Duration) (*blackoutMarkers, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m := newBlackoutMarkers(time.Now, func(context.Context, types.NamespacedName, string) (redis.UniversalClient, error) {
		mu.Lock()
		defer mu.Unlock()
		if *c == nil {
			return nil, errors.New("not known")
		}
		return *c, nil
	})
	m.ttl, m.refresh, m.writeTimeout = ttl, 100*time.Millisecond, time.Second
	go func() { _ = m.Start(ctx) }()
	return m, ctx
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	untilWithin(t, what, 20*time.Second, cond)
}

// untilWithin is until with a bound that is part of what is tested.
func untilWithin(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, d, true,
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
// (observe does no I/O); a marker that could not be written (Redis frozen) is written once
// Redis answers again, says since when the blackout holds the job back, is written again
// while the blackout lasts (it would expire within its ttl otherwise) through the client
// the Secret has at each write — the one before closed (the health view drops an idle
// Secret's client, and makes a new one for a rotated Secret) — and is deleted when the
// blackout ends.
func TestBlackoutMarkersHoldNoWorkerAndRecover(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	var mu sync.Mutex
	c := newClient(t, proxy.URL())
	m, ctx := markersOn(t, &c, &mu, 2*time.Second)
	admin := srv.Client()
	t.Cleanup(func() { admin.Close() })
	key := lock.BlackoutKey("k", "uid-1")

	proxy.Freeze()
	since := time.UnixMilli(time.Now().UnixMilli())
	m.observe(markedJob, rollingOut, since)
	m.observe(markedJob, rollingOut, since.Add(time.Second))
	if v := admin.Get(ctx, key).Val(); v != "" {
		t.Fatalf("marker %q written through a frozen proxy", v)
	}
	proxy.Thaw()
	prefix := strconv.FormatInt(since.UnixMilli(), 10) + " "
	until(t, "the marker, once Redis answers", func() bool {
		v := admin.Get(ctx, key).Val()
		return strings.HasPrefix(v, prefix) && strings.HasSuffix(v, " Deployment/web is rolling out")
	})

	// Kept while the blackout lasts: present through two of its ttls, its first client
	// closed and replaced.
	mu.Lock()
	old := c
	c = newClient(t, srv.URL())
	mu.Unlock()
	old.Close()
	for end := time.Now().Add(2 * m.ttl); time.Now().Before(end); {
		if v := admin.Get(ctx, key).Val(); !strings.HasPrefix(v, prefix) {
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
// marker cannot be deleted (its Redis gone) is kept, its deletion tried again, until
// whatever was written holds nothing back, and then forgotten rather than retried for
// ever.
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
	m, _ := markersOn(t, &c, &mu, time.Second)
	m.observe(markedJob, notBlocked, time.Now())
	until(t, "the earlier leader's marker deleted", func() bool {
		return admin.Exists(ctx, lock.BlackoutKey("k", "uid-1")).Val() == 0 && !m.holding(markedJob)
	})

	m.observe(markedJob, rollingOut, time.Now())
	until(t, "the marker written", func() bool { return admin.Exists(ctx, lock.BlackoutKey("k", "uid-1")).Val() == 1 })
	written := time.Now()
	mu.Lock()
	c = nil // its Redis gone: no write succeeds from now on
	mu.Unlock()
	m.observe(markedJob, notBlocked, time.Now())
	until(t, "the ended marker forgotten", func() bool { return !m.holding(markedJob) })
	if held := time.Since(written); held < m.ttl/2 {
		t.Fatalf("forgotten %v after its last write, before what that write put in Redis (until its ttl %v) could end", held, m.ttl)
	}
}

// TestMarkerClientDoesNotWakeDeletedJobs: the marker's writes get the Secret's Redis from
// the health view without putting their job on the Secret's list of jobs to wake: the last
// DEL of a deleted job's marker must not bring the job back there (each wake of a gone job
// costs an uncached GET, for as long as the Secret is in use).
func TestMarkerClientDoesNotWakeDeletedJobs(t *testing.T) {
	srv := redistest.Start(t)
	h, _ := newTestHealth(t, srv.URL(), time.Now)
	r := &LockedCronJobReconciler{health: h}
	gone := types.NamespacedName{Namespace: "ns", Name: "gone"}
	h.state(context.Background(), gone, "redis")
	h.forget(gone)
	c, err := r.markerClient(context.Background(), gone, "redis")
	if err != nil || c == nil {
		t.Fatalf("marker client: %v %v", c, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if jobs := h.byName[types.NamespacedName{Namespace: "ns", Name: "redis"}].jobNames(); len(jobs) != 0 {
		t.Fatalf("jobs to wake on the Secret: %v, want none", jobs)
	}
}

// TestBlackoutMarkerComesBackAfterRedisLosesIt: a Redis that restarts empty (no
// persistence, or a failover to a replica that had not got the marker) loses the marker
// while the blackout lasts; a refresh writes it again, with the same since, so the pods
// made before the blackout began are held back again within the marker's TTL, not let run
// for the rest of the blackout.
func TestBlackoutMarkerComesBackAfterRedisLosesIt(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	c := newClient(t, srv.URL())
	m, ctx := markersOn(t, &c, &mu, 2*time.Second)
	key := lock.BlackoutKey("k", "uid-1")
	get := func() string {
		admin := srv.Client()
		defer admin.Close()
		return admin.Get(ctx, key).Val()
	}
	since := time.UnixMilli(time.Now().UnixMilli())
	prefix := strconv.FormatInt(since.UnixMilli(), 10) + " "
	m.observe(markedJob, rollingOut, since)
	until(t, "the marker", func() bool { return strings.HasPrefix(get(), prefix) })

	// A key no one writes again tells that the restart lost the data (the marker may be
	// back before it is looked at).
	admin := srv.Client()
	if err := admin.Set(ctx, "canary", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	srv.Restart()
	admin = srv.Client()
	defer admin.Close()
	if n := admin.Exists(ctx, "canary").Val(); n != 0 {
		t.Fatal("the restart kept the data: the test does not lose the marker")
	}
	// Within the marker's TTL (20 refreshes here): before a marker that had not been lost
	// would have run out, not whenever the writer next happens to come round.
	untilWithin(t, "the marker written again, since when the blackout began", m.ttl, func() bool { return strings.HasPrefix(get(), prefix) })
	if !m.holding(markedJob) {
		t.Fatal("the marker's entry was dropped while the blackout lasts")
	}
}

// TestSuspendedJobWithUnreadableWorkloadsLooksAgain: a suspended job's pass stops before
// the blackout step; keepMarker reads the blackout itself when the job has a marker. When
// the workloads cannot be read it keeps the marker as it was (fail closed, as occurrences
// do) and the job comes back within unreadableRetry: no event may come (the cache that
// failed is what would have sent it), so without the retry the marker would stay as the
// last readable pass left it for as long as nothing else happens.
func TestSuspendedJobWithUnreadableWorkloadsLooksAgain(t *testing.T) {
	job := passJob("0 3 * * *", true)
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "web"}}}
	name := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	r := testReconciler(fakeAPI(t))
	r.workloads = unreadableCache{}
	r.markers = newBlackoutMarkers(func() time.Time { return passAt }, nil)
	r.markers.observe(name, markerView{uid: job.UID, key: "k", secret: "redis", guarded: true, blocked: true, reason: "Deployment/web is rolling out"}, passAt.Add(-time.Minute))

	p := newPass(job, passAt, logr.Discard())
	r.keepMarker(context.Background(), p)
	if p.requeue <= 0 || p.requeue > unreadableRetry {
		t.Fatalf("requeued in %v, want within %v", p.requeue, unreadableRetry)
	}
	e := r.markers.jobs[name]
	if e == nil || !e.since.Equal(passAt.Add(-time.Minute)) {
		t.Fatalf("marker %+v, want kept as the last readable pass left it", e)
	}
}

// unreadableCache is a workload cache whose every read fails (the manager's RBAC taken
// away, the cache not synced).
type unreadableCache struct{ cache.Cache }

func (unreadableCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New(`deployments.apps "web" is forbidden`)
}

func (unreadableCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("deployments.apps is forbidden")
}

// TestRunRequestWaitsWhileTheWorkloadsCannotBeRead (helper-92): a run request whose
// job's rollout workloads could not be read (the cache not synced yet after a restart,
// the manager's RBAC for them taken away a while) was refused for good: the user had to
// notice and ask again. It waits, as for a lock backend that is not ready, unhandled, and
// expires as such a request does (runpod.ManualWaitLimit after it was made).
func TestRunRequestWaitsWhileTheWorkloadsCannotBeRead(t *testing.T) {
	job := passJob("0 3 * * *", false)
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "web"}}}
	job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "fix-1"}
	r := testReconciler(fakeAPI(t))
	r.workloads = unreadableCache{}
	p := passWith(t, r, job, passAt)
	if rr := p.status.LastRunRequest; rr != nil {
		t.Fatalf("request recorded %+v while the workloads could not be read; want it to wait, unhandled", rr)
	}
	if p.requeue <= 0 || p.requeue > unreadableRetry {
		t.Errorf("requeued in %v, want within %v", p.requeue, unreadableRetry)
	}
	var pods corev1.PodList
	if err := r.List(context.Background(), &pods); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods %d (%v): want none while the blackout cannot be told", len(pods.Items), err)
	}
}
