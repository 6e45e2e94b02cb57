package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

// The lock backend off the reconcile path: a pass never waits for Redis, and a Secret is
// read once per secretTTL however many jobs and passes ask.
// go test ./internal/controller/ -run TestHealth -v

type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func newTestHealth(t *testing.T, url string, now func() time.Time) (*health, *countingReader) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"}, Data: map[string][]byte{"url": []byte(url)}}
	r := &countingReader{Reader: fake.NewClientBuilder().WithObjects(s).Build()}
	b := newBackends(r)
	t.Cleanup(b.close)
	h := newHealth(b)
	h.now = now
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.ctx = ctx
	return h, r
}

func TestHealthStalledRedisDoesNotHoldAPass(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	proxy.Freeze() // accepts connections, answers nothing: every PING would time out (2 s)
	h, _ := newTestHealth(t, proxy.URL(), time.Now)

	job := types.NamespacedName{Namespace: "ns", Name: "a"}
	// The pass returns while Redis is still frozen, before any probe could answer.
	st := h.state(context.Background(), job, "redis")
	if st.known || st.err != nil || st.client == nil {
		t.Fatalf("first state %+v: want a client, not yet known", st)
	}
	// The probe's answer wakes the job, and the next pass reads it.
	select {
	case ev := <-h.wake:
		if ev.Object.Namespace != "ns" || ev.Object.Name != "a" {
			t.Fatalf("woke %s/%s", ev.Object.Namespace, ev.Object.Name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up after the probe")
	}
	st = h.state(context.Background(), job, "redis")
	if !st.known || st.err == nil || st.err.reason != ReasonRedisUnreachable {
		t.Fatalf("after the probe: %+v, want RedisUnreachable", st)
	}

	// Redis answers again: the next probe wakes the job with the good news.
	proxy.Thaw()
	h.mu.Lock()
	h.startProbe(types.NamespacedName{Namespace: "ns", Name: "redis"}, h.byName[types.NamespacedName{Namespace: "ns", Name: "redis"}])
	h.mu.Unlock()
	select {
	case <-h.wake:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up when Redis came back")
	}
	if st = h.state(context.Background(), job, "redis"); !st.known || st.err != nil {
		t.Fatalf("after Redis came back: %+v", st)
	}
}

func TestHealthReadsASecretOncePerTTL(t *testing.T) {
	srv := redistest.Start(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	h, r := newTestHealth(t, srv.URL(), func() time.Time { return now })
	for i := range 100 {
		h.state(context.Background(), types.NamespacedName{Namespace: "ns", Name: string(rune('a' + i%20))}, "redis")
	}
	if n := r.gets.Load(); n != 1 {
		t.Fatalf("100 passes of 20 jobs read the Secret %d times, want 1", n)
	}
	now = now.Add(secretTTL)
	h.state(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, "redis")
	if n := r.gets.Load(); n != 2 {
		t.Fatalf("after secretTTL: %d reads, want 2", n)
	}
}

func TestHealthSeesAFixedSecretSoon(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := &countingReader{Reader: fake.NewClientBuilder().Build()}
	b := newBackends(r)
	defer b.close()
	h := newHealth(b)
	h.now = func() time.Time { return now }
	job := types.NamespacedName{Namespace: "ns", Name: "a"}
	if st := h.state(context.Background(), job, "redis"); st.err == nil || st.err.reason != ReasonSecretNotFound {
		t.Fatalf("missing Secret: %+v", st)
	}
	srv := redistest.Start(t)
	if err := r.Reader.(client.Client).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"}, Data: map[string][]byte{"url": []byte(srv.URL())}}); err != nil {
		t.Fatal(err)
	}
	// The job looks again after backendRetry: the Secret is read anew by then.
	now = now.Add(backendRetry)
	if st := h.state(context.Background(), job, "redis"); st.err != nil || st.client == nil {
		t.Fatalf("fixed Secret after backendRetry: %+v", st)
	}
}

// blockingReader holds every Get until release is closed, and says when one began.
type blockingReader struct {
	countingReader
	began   chan struct{}
	release chan struct{}
}

func (b *blockingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	b.began <- struct{}{}
	<-b.release
	return b.countingReader.Get(ctx, key, obj, opts...)
}

// A Secret read under way is not made again by a second pass (another worker, another
// job naming the same Secret), nor waited for: that pass goes on with what is known.
func TestHealthOneSecretReadAtATime(t *testing.T) {
	srv := redistest.Start(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"}, Data: map[string][]byte{"url": []byte(srv.URL())}}
	r := &blockingReader{countingReader: countingReader{Reader: fake.NewClientBuilder().WithObjects(s).Build()},
		began: make(chan struct{}, 10), release: make(chan struct{})}
	b := newBackends(r)
	t.Cleanup(b.close)
	h := newHealth(b)
	var mu sync.Mutex
	h.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a, other := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}

	// pass runs state in the background and returns its answer's channel.
	pass := func(job types.NamespacedName) chan backendState {
		out := make(chan backendState, 1)
		go func() { out <- h.state(context.Background(), job, "redis") }()
		return out
	}
	// alone says that a pass returned without waiting for the read under way.
	alone := func(out chan backendState) backendState {
		t.Helper()
		select {
		case st := <-out:
			return st
		case <-time.After(10 * time.Second):
			t.Fatal("a second pass waited for the Secret read under way")
			return backendState{}
		}
	}

	// The first read: job a's pass makes it; job b's pass, meanwhile, neither reads nor
	// waits, and knows nothing yet (the probe's answer will wake it).
	first := pass(a)
	<-r.began
	if st := alone(pass(other)); st.known || st.client != nil || st.err != nil {
		t.Errorf("second pass during the first read: %+v, want nothing known", st)
	}
	close(r.release)
	if st := <-first; st.client == nil || st.err != nil {
		t.Fatalf("first pass: %+v, want the Secret's client", st)
	}
	if n := r.gets.Load(); n != 1 {
		t.Fatalf("%d Secret reads, want 1", n)
	}

	// Stale: the next pass reads it again; one meanwhile goes on with the cached client.
	r.release = make(chan struct{})
	mu.Lock()
	now = now.Add(secretTTL)
	mu.Unlock()
	again := pass(a)
	<-r.began
	if st := alone(pass(other)); st.client == nil || st.err != nil {
		t.Errorf("second pass during the re-read: %+v, want the cached client", st)
	}
	close(r.release)
	<-again
	if n := r.gets.Load(); n != 2 {
		t.Fatalf("%d Secret reads, want 2", n)
	}
}

// A job whose pass found the first read of its Secret under way learns how it ended: a
// Secret that cannot be used wakes it (a usable one is probed, and the probe wakes it).
func TestHealthWakesWhoAskedDuringAFailedFirstRead(t *testing.T) {
	r := &blockingReader{countingReader: countingReader{Reader: fake.NewClientBuilder().Build()},
		began: make(chan struct{}, 10), release: make(chan struct{})}
	b := newBackends(r)
	t.Cleanup(b.close)
	h := newHealth(b)
	a, other := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	first := make(chan backendState, 1)
	go func() { first <- h.state(context.Background(), a, "redis") }()
	<-r.began
	if st := h.state(context.Background(), other, "redis"); st.known {
		t.Fatalf("second pass during the first read: %+v, want nothing known", st)
	}
	close(r.release)
	if st := <-first; st.err == nil || st.err.reason != ReasonSecretNotFound {
		t.Fatalf("first pass: %+v, want SecretNotFound", st)
	}
	woken := map[string]bool{}
	for len(h.wake) > 0 {
		woken[(<-h.wake).Object.Name] = true
	}
	if !woken["b"] {
		t.Errorf("woke %v after the failed first read, want b (its pass knew nothing)", woken)
	}
	if st := h.state(context.Background(), other, "redis"); st.err == nil || st.err.reason != ReasonSecretNotFound {
		t.Errorf("b's next pass: %+v, want SecretNotFound", st)
	}
}

// A tenant names the Redis its Secret points at: one that answers a PING with a string
// of 2^63 bytes panicked go-redis's reader, in the probe's goroutine, which ended the
// manager on every replica (each probes). Its answer is now a failure like any other,
// and so is a panic in a probe.
func TestHealthHostileRedisIsAnAnswer(t *testing.T) {
	addr := redistest.StartHostileRedis(t, "$9223372036854775807\r\n", false)
	job := types.NamespacedName{Namespace: "ns", Name: "a"}
	for _, tc := range []struct {
		name  string
		probe func(*health) func(context.Context, types.NamespacedName, redis.UniversalClient, string) ([]string, *backendError)
		want  string
	}{
		{"a reply over the bounds", nil, "over lockedcron's bounds"},
		{"a probe that panics", func(*health) func(context.Context, types.NamespacedName, redis.UniversalClient, string) ([]string, *backendError) {
			return func(context.Context, types.NamespacedName, redis.UniversalClient, string) ([]string, *backendError) {
				panic("makeslice: len out of range")
			}
		}, "the client failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newTestHealth(t, "redis://"+addr, time.Now)
			if tc.probe != nil {
				h.probe = tc.probe(h)
			}
			h.state(context.Background(), job, "redis")
			select {
			case <-h.wake:
			case <-time.After(30 * time.Second):
				t.Fatal("no wake-up after the probe")
			}
			st := h.state(context.Background(), job, "redis")
			if !st.known || st.err == nil || st.err.reason != ReasonRedisUnreachable || !strings.Contains(st.err.Error(), tc.want) {
				t.Fatalf("after the probe: %+v, want RedisUnreachable saying %q", st, tc.want)
			}
		})
	}
}

// A Secret's Redis client (its connections; for Sentinel, a subscription and goroutines)
// goes with the Secret: when it is deleted, and when no job has asked about it for
// idleAfter. Tenants creating and deleting Secrets left one behind each.
func TestHealthClosesTheClientsOfGoneSecrets(t *testing.T) {
	srv := redistest.Start(t)
	key := types.NamespacedName{Namespace: "ns", Name: "redis"}
	job := types.NamespacedName{Namespace: "ns", Name: "a"}
	clientOf := func(h *health) redis.UniversalClient {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return h.b.clients[key].client
	}
	// closed awaits c's close, which is made aside (closeAside: a TLS close can wait 5 s).
	closed := func(c redis.UniversalClient) bool {
		return wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return errors.Is(c.Ping(context.Background()).Err(), redis.ErrClosed), nil
		}) == nil
	}

	t.Run("deleted", func(t *testing.T) {
		h, r := newTestHealth(t, srv.URL(), time.Now)
		c := h.state(context.Background(), job, "redis").client
		if c == nil || clientOf(h) != c {
			t.Fatal("no client kept for the Secret")
		}
		if err := r.Reader.(client.Client).Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, berr := h.b.client(context.Background(), "ns", "redis"); berr == nil || berr.reason != ReasonSecretNotFound {
			t.Fatalf("the deleted Secret: %v", berr)
		}
		if clientOf(h) != nil || !closed(c) {
			t.Fatal("the deleted Secret's client is still kept, or open")
		}
	})

	t.Run("its url removed", func(t *testing.T) {
		h, r := newTestHealth(t, srv.URL(), time.Now)
		c := h.state(context.Background(), job, "redis").client
		if c == nil {
			t.Fatal("no client")
		}
		if err := r.Reader.(client.Client).Update(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, berr := h.b.client(context.Background(), "ns", "redis"); berr == nil || berr.reason != ReasonSecretInvalid {
			t.Fatalf("the Secret without a url: %v", berr)
		}
		if clientOf(h) != nil || !closed(c) {
			t.Fatal("the client of a Secret without a url is still kept, or open")
		}
	})

	t.Run("idle", func(t *testing.T) {
		var now atomic.Int64
		now.Store(time.Now().UnixNano())
		h, _ := newTestHealth(t, srv.URL(), func() time.Time { return time.Unix(0, now.Load()) })
		h.probeInterval = 10 * time.Millisecond
		c := h.state(context.Background(), job, "redis").client
		if c == nil {
			t.Fatal("no client")
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = h.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		now.Add(int64(idleAfter + time.Minute))
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return clientOf(h) == nil, nil
		}); err != nil {
			t.Fatal("an idle Secret's client is still kept")
		}
		if !closed(c) {
			t.Fatal("an idle Secret's client is still open")
		}
	})
}

// ctxReader fails a Get whose context is done, as client-go's requests do.
type ctxReader struct{ client.Reader }

func (c ctxReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// A Secret read cut short by its pass's end (the reconcile timeout, a stopping manager)
// says nothing about the Secret: it must not be taken as a Secret problem, which would
// hold every job naming that Secret for secretErrorTTL. The next pass reads it again.
func TestHealthSecretReadCutByItsPassIsNoAnswer(t *testing.T) {
	srv := redistest.Start(t)
	now := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	h, counting := newTestHealth(t, srv.URL(), func() time.Time { return now })
	counting.Reader = ctxReader{counting.Reader}
	job := types.NamespacedName{Namespace: "ns", Name: "j"}

	cut, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-cut.Done()
	if st := h.state(cut, job, "redis"); st.err != nil && st.err.reason == ReasonSecretInvalid {
		t.Fatalf("a read cut short answered %v", st.err)
	}
	// It was the first read: the jobs that asked meanwhile got nothing and wait for a
	// probe that will not come; they are woken.
	select {
	case ev := <-h.wake:
		if ev.Object.Name != job.Name {
			t.Errorf("woke %s", ev.Object.Name)
		}
	default:
		t.Error("the jobs that asked during the cut first read are not woken")
	}
	st := h.state(context.Background(), job, "redis")
	if st.err != nil {
		t.Fatalf("the next pass: %v (the cut read taken for the Secret's answer)", st.err)
	}
	if got := counting.gets.Load(); got != 2 {
		t.Errorf("Secret read %d times, want 2 (the next pass reads it again)", got)
	}
}

// readSince is for the client a pass holds: a read of the Secret another pass made
// meanwhile (the Secret edited to name another Redis) does not vouch for the old client,
// however late it ran; nor does a read that began before t.
func TestHealthReadSinceIsForTheClientHeld(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	now := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	h, counting := newTestHealth(t, a.URL(), func() time.Time { return now })
	h.probe = func(context.Context, types.NamespacedName, redis.UniversalClient, string) ([]string, *backendError) {
		return nil, nil
	}
	job, key := types.NamespacedName{Namespace: "ns", Name: "j"}, types.NamespacedName{Namespace: "ns", Name: "redis"}
	ctx := context.Background()

	held := h.state(ctx, job, "redis").client // read at now
	asked := now.Add(time.Second)
	if h.readSince(key, asked, held) {
		t.Fatal("a read that began before the look-up vouches for it")
	}
	var s corev1.Secret
	if err := counting.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	s.Data["url"] = []byte(b.URL())
	if err := counting.Reader.(client.Client).Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	fresh := h.state(ctx, job, "redis").client // read again: readSince asked for it
	if fresh == held {
		t.Fatal("the edited Secret's read kept the old client")
	}
	if h.readSince(key, asked, held) {
		t.Error("the new read vouches for the old client")
	}
	if !h.readSince(key, asked, fresh) {
		t.Error("the new read does not vouch for its own client")
	}
}

// TestHealthProbesAHostileSentinelAndLives: a tenant's Secret naming a hostile Sentinel
// (a one-word +switch-master message on its subscription) killed the manager on its first
// probe of that Secret, and the standby that took over on its own: no tenant's jobs ran.
// The probe now reaches the master the sentinel names and subscribes to nothing.
func TestHealthProbesAHostileSentinelAndLives(t *testing.T) {
	srv := redistest.Start(t)
	sentinel := redistest.StartHostileSentinel(t, srv.Addr)
	h, _ := newTestHealth(t, "redis+sentinel://"+sentinel.Addr+"?master=m", time.Now)
	job := types.NamespacedName{Namespace: "ns", Name: "a"}
	h.state(context.Background(), job, "redis")
	select {
	case <-h.wake:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up after the probe")
	}
	if st := h.state(context.Background(), job, "redis"); !st.known || (st.err != nil && st.err.blocking()) {
		t.Fatalf("after the probe: %+v, want the master reached", st)
	}
	if !sentinel.Received("sentinel", "get-master-addr-by-name") || sentinel.Received("subscribe") {
		t.Fatalf("the sentinel got %v: want the master asked for, no subscription", sentinel.Commands())
	}
}
