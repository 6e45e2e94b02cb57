package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
