package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// sinkCall is one call a fakeSink served.
type sinkCall struct {
	verb, name, data string
	rv               string
}

// fakeSink is the API server behind a seriesSink: it logs each call, answers with the
// queued errors first, and blocks while gate is held. A call for an Event named in hang
// never gets an answer: it ends when its context does.
type fakeSink struct {
	mu    sync.Mutex
	calls []sinkCall
	errs  map[string][]error // by verb
	gate  sync.Mutex
	hang  map[string]bool // by Event name
}

func (f *fakeSink) serve(ctx context.Context, verb string, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if f.hang[e.Name] {
		f.mu.Lock()
		f.calls = append(f.calls, sinkCall{verb: verb, name: e.Name, data: string(data), rv: e.ResourceVersion})
		f.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.gate.Lock()
	defer f.gate.Unlock()
	if err := ctx.Err(); err != nil { // a call given up is not served
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, sinkCall{verb: verb, name: e.Name, data: string(data), rv: e.ResourceVersion})
	if q := f.errs[verb]; len(q) > 0 {
		f.errs[verb] = q[1:]
		return nil, q[0]
	}
	out := e.DeepCopy()
	out.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "server"}}
	return out, nil
}

func (f *fakeSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return f.serve(ctx, "create", e, nil)
}
func (f *fakeSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return f.serve(ctx, "update", e, nil)
}
func (f *fakeSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return f.serve(ctx, "patch", e, data)
}

func (f *fakeSink) log() []sinkCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// await waits until the sink has served n calls.
func (f *fakeSink) await(t *testing.T, n int) []sinkCall {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(f.log()) >= n, nil
	}); err != nil {
		t.Fatalf("the sink served %d calls, want %d: %v", len(f.log()), n, f.log())
	}
	return f.log()
}

// runSink runs s's worker until the test ends, and returns the context it runs with.
func runSink(t *testing.T, s *seriesSink) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		s.queue.ShutDown()
		cancel()
	})
	go s.run(ctx)
	return ctx
}

// sent waits up to 10 s for a call for the Event named name.
func (f *fakeSink) sent(ctx context.Context, name string) bool {
	return wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return slices.ContainsFunc(f.log(), func(c sinkCall) bool { return c.name == name }), nil
	}) == nil
}

// patchAll PATCHes each named Event's series (count 2) through s.
func patchAll(t *testing.T, ctx context.Context, s *seriesSink, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := s.Patch(ctx, seriesEvent(name), []byte(`{"series":{"count":2}}`)); err != nil {
			t.Fatal(err)
		}
	}
}

func seriesEvent(name string) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7"},
		Reason: "Succeeded", Series: &eventsv1.EventSeries{Count: 2}}
}

// TestSeriesSinkAnswersAtOnce: client-go's broadcaster PATCHes every series it keeps while
// holding the lock every new Event takes; the sink answers a series PATCH without waiting
// for the API server, and without an Event (the broadcaster then keeps its own copy, not
// the answer with its managed fields). The API server gets the latest PATCH of each
// Event: a later one replaces an earlier one still queued.
func TestSeriesSinkAnswersAtOnce(t *testing.T) {
	api := &fakeSink{}
	s := newSeriesSink(api)
	s.workers = 1
	ctx := runSink(t, s)

	api.gate.Lock() // the API server is slow: the first PATCH is under way and waits
	released := false
	release := func() {
		if !released {
			released = true
			api.gate.Unlock()
		}
	}
	defer release()
	answered := make(chan error, 1)
	go func() {
		for i, data := range []string{`{"series":{"count":2}}`, `{"series":{"count":3}}`, `{"series":{"count":4}}`} {
			name := "a"
			if i > 0 {
				name = "b"
			}
			if got, err := s.Patch(ctx, seriesEvent(name), []byte(data)); err != nil || got != nil {
				answered <- fmt.Errorf("Patch answered %v, %v; want no Event and no error", got, err)
				return
			}
		}
		answered <- nil
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Patch waits for the API server")
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.queue.Len() == 1, nil // a's PATCH taken; b's two are one
	}); err != nil {
		t.Fatalf("queue holds %d keys, want b's alone", s.queue.Len())
	}
	release()
	calls := api.await(t, 2)
	want := []sinkCall{{verb: "patch", name: "a", data: `{"series":{"count":2}}`, rv: "7"}, {verb: "patch", name: "b", data: `{"series":{"count":4}}`, rv: "7"}}
	if !slices.Equal(calls, want) {
		t.Errorf("the API server got %+v, want %+v", calls, want)
	}
}

// TestSeriesSinkCreatesAgainAndRetries: a series whose Event the API server no longer has
// (expired) is created again, without the old resourceVersion; a PATCH the API server
// could not serve (500, a connection lost) is tried again; one it refuses is not.
func TestSeriesSinkCreatesAgainAndRetries(t *testing.T) {
	gone := apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "a")
	refused := apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "c", nil)
	api := &fakeSink{errs: map[string][]error{
		"patch": {gone, apierrors.NewInternalError(errors.New("etcd")), errors.New("connection reset"), refused},
	}}
	s := newSeriesSink(api)
	s.workers = 1 // the calls in order
	ctx := runSink(t, s)

	if _, err := s.Patch(ctx, seriesEvent("a"), []byte(`{"series":{"count":2}}`)); err != nil {
		t.Fatal(err)
	}
	api.await(t, 2) // a: patch (gone), create
	if _, err := s.Patch(ctx, seriesEvent("b"), []byte(`{"series":{"count":5}}`)); err != nil {
		t.Fatal(err)
	}
	api.await(t, 5) // b: patch (500), patch (reset), patch
	if _, err := s.Patch(ctx, seriesEvent("c"), []byte(`{"series":{"count":2}}`)); err != nil {
		t.Fatal(err)
	}
	calls := api.await(t, 6) // c: patch (refused), not again
	want := []sinkCall{
		{verb: "patch", name: "a", data: `{"series":{"count":2}}`, rv: "7"}, {verb: "create", name: "a"},
		{verb: "patch", name: "b", data: `{"series":{"count":5}}`, rv: "7"}, {verb: "patch", name: "b", data: `{"series":{"count":5}}`, rv: "7"},
		{verb: "patch", name: "b", data: `{"series":{"count":5}}`, rv: "7"},
		{verb: "patch", name: "c", data: `{"series":{"count":2}}`, rv: "7"},
	}
	if !slices.Equal(calls, want) {
		t.Errorf("the API server got\n%+v\nwant\n%+v", calls, want)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		return len(api.log()) > len(want), nil
	}); err == nil {
		t.Errorf("a refused PATCH was sent again: %+v", api.log()[len(want):])
	}
}

// TestSeriesSinkKeepsTheHighestCount: the broadcaster PATCHes a series' second Event
// outside its lock, so that PATCH (count 2) can reach the sink after a refresh's PATCH of
// the same Event with a higher count; the higher one is sent.
func TestSeriesSinkKeepsTheHighestCount(t *testing.T) {
	api := &fakeSink{}
	s := newSeriesSink(api)
	s.workers = 1
	ctx := runSink(t, s)

	api.gate.Lock() // a's PATCH under way holds the worker
	patch := func(name string, count int32) {
		e := seriesEvent(name)
		e.Series.Count = count
		if _, err := s.Patch(ctx, e, []byte(fmt.Sprintf(`{"series":{"count":%d}}`, count))); err != nil {
			t.Fatal(err)
		}
	}
	patch("a", 2)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.queue.Len() == 0, nil
	}); err != nil {
		t.Fatal("the worker did not take a's PATCH")
	}
	patch("b", 5) // a refresh
	patch("b", 2) // the second Event's own PATCH, later
	api.gate.Unlock()
	calls := api.await(t, 2)
	if want := `{"series":{"count":5}}`; calls[1].name != "b" || calls[1].data != want {
		t.Errorf("b sent as %+v, want %s", calls[1], want)
	}

	// Likewise when the higher count's PATCH fails and is tried again: the lower one that
	// came meanwhile does not replace it.
	api.mu.Lock()
	api.errs = map[string][]error{"patch": {apierrors.NewInternalError(errors.New("etcd"))}}
	api.mu.Unlock()
	api.gate.Lock()
	patch("c", 5)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.queue.Len() == 0, nil
	}); err != nil {
		t.Fatal("the worker did not take c's PATCH")
	}
	patch("c", 2)
	api.gate.Unlock()
	calls = api.await(t, 4) // c: 5 (500), then again
	if want := `{"series":{"count":5}}`; calls[3].name != "c" || calls[3].data != want {
		t.Errorf("c tried again as %+v, want %s", calls[3], want)
	}
}

// TestSeriesSinkGivesUpOnAHungCall: a call whose connection hangs (the manager's REST
// config sets no request timeout) is given up after the sink's timeout, so the series
// queued behind it are sent; the PATCH is tried again later. The broadcaster's own
// Creates are bounded alike.
func TestSeriesSinkGivesUpOnAHungCall(t *testing.T) {
	api := &fakeSink{hang: map[string]bool{"a": true}}
	s := newSeriesSink(api)
	s.workers = 1
	s.timeout = 50 * time.Millisecond
	ctx := runSink(t, s)
	patchAll(t, ctx, s, "a", "b")
	if !api.sent(ctx, "b") {
		t.Fatalf("b's PATCH waits behind a's hung one: %+v", api.log())
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n := 0
		for _, c := range api.log() {
			if c.name == "a" {
				n++
			}
		}
		return n >= 2, nil
	}); err != nil {
		t.Fatalf("a's hung PATCH was not tried again: %+v", api.log())
	}
	created := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, seriesEvent("a"))
		created <- err
	}()
	select {
	case err := <-created:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a hung Create answered %v, want its deadline exceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a hung Create holds its caller")
	}
}

// TestSeriesSinkWorkers: a series' PATCH does not wait for another Event's call under way.
func TestSeriesSinkWorkers(t *testing.T) {
	api := &fakeSink{hang: map[string]bool{"a": true}}
	s := newSeriesSink(api)
	s.timeout = time.Hour
	ctx := runSink(t, s)
	patchAll(t, ctx, s, "a", "b")
	if !api.sent(ctx, "b") {
		t.Fatalf("b's PATCH waits for a's call: %+v", api.log())
	}
}

// fakeBudget is the manager's client budget: busy while other calls wait for it.
type fakeBudget struct {
	flowcontrol.RateLimiter
	busy         atomic.Bool
	tries, waits atomic.Int32
}

func (b *fakeBudget) TryAccept() bool {
	b.tries.Add(1)
	return !b.busy.Load()
}

func (b *fakeBudget) Wait(context.Context) error {
	b.waits.Add(1)
	return nil
}

// TestSeriesSinkTakesWhatTheBudgetSpares: a series PATCH (a refresh's: 5,000 of them at
// 5,000 jobs) is sent with a token of the manager's budget that no other call waits for;
// while the budget is taken it waits, for up to yieldFor, then in line. New Events wait in
// line with every other call.
func TestSeriesSinkTakesWhatTheBudgetSpares(t *testing.T) {
	api := &fakeSink{}
	budget, share := &fakeBudget{}, &fakeBudget{}
	budget.busy.Store(true)
	s := newSeriesSink(api)
	s.budget, s.share = budget, share
	s.yieldFor = time.Hour
	ctx := runSink(t, s)
	if _, err := s.Patch(ctx, seriesEvent("a"), []byte(`{"series":{"count":2}}`)); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return budget.tries.Load() >= 3, nil
	}); err != nil {
		t.Fatal("the sink did not ask the budget")
	}
	if calls := api.log(); len(calls) > 0 || budget.waits.Load() > 0 {
		t.Fatalf("sent while other calls wait for the budget: %+v (waits %d)", calls, budget.waits.Load())
	}
	budget.busy.Store(false)
	if calls := api.await(t, 1); calls[0].name != "a" || budget.waits.Load() != 0 {
		t.Errorf("sent %+v after %d waits in line; want a with a spare token", calls, budget.waits.Load())
	}

	// Not put off for good: after yieldFor the PATCH waits in line.
	s.yieldFor = 50 * time.Millisecond
	budget.busy.Store(true)
	if _, err := s.Patch(ctx, seriesEvent("b"), []byte(`{"series":{"count":2}}`)); err != nil {
		t.Fatal(err)
	}
	if calls := api.await(t, 2); calls[1].name != "b" || budget.waits.Load() != 1 {
		t.Errorf("sent %+v after %d waits in line; want b after one", calls, budget.waits.Load())
	}
	if _, err := s.Create(ctx, seriesEvent("c")); err != nil || budget.waits.Load() != 2 {
		t.Errorf("a new Event: %v, %d waits in line; want it in line", err, budget.waits.Load())
	}
	// Each series PATCH waited for the series' share (half the budget) first; a new Event
	// does not.
	if n := share.waits.Load(); n != 2 {
		t.Errorf("the series' share was waited for %d times, want 2 (a's and b's PATCHes)", n)
	}
}

// TestEventsConfig: the Event client has no rate limiter of its own when the manager has a
// budget (the sink takes it), so its calls are neither charged twice nor counted as waits
// of none; without a budget the client's config is the manager's.
func TestEventsConfig(t *testing.T) {
	budget := flowcontrol.NewTokenBucketRateLimiter(20, 30)
	mgr := &rest.Config{Host: "https://api.example", QPS: 20, Burst: 30, RateLimiter: budget}
	cfg, got := eventsConfig(mgr)
	if got != budget || mgr.RateLimiter != budget {
		t.Errorf("budget %v (manager's now %v), want the manager's %v", got, mgr.RateLimiter, budget)
	}
	cl, err := rest.RESTClientForConfigAndClient(withEventsGV(cfg), http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if l := cl.GetRateLimiter(); l != nil {
		t.Errorf("the Event client limits its calls itself (%v): each would take two tokens", l)
	}
	cfg, got = eventsConfig(&rest.Config{Host: "https://api.example", QPS: 5, Burst: 10})
	if got != nil || cfg.QPS != 5 || cfg.RateLimiter != nil {
		t.Errorf("without a budget: %v, config QPS %v limiter %v; want the manager's config", got, cfg.QPS, cfg.RateLimiter)
	}
}

func withEventsGV(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &eventsv1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = clientscheme.Codecs.WithoutConversion()
	return cfg
}

// TestSeriesSinkCloseSendsWhatIsQueued: stopping the recorder after the manager (Close)
// sends the PATCHes still queued, the last passes' series among them.
func TestSeriesSinkCloseSendsWhatIsQueued(t *testing.T) {
	api := &fakeSink{}
	s := newSeriesSink(api)
	s.workers = 1 // the calls in order
	s.grace = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx)
	}()
	api.gate.Lock() // the API server is slow: the PATCHes queue up
	patchAll(t, ctx, s, "a", "b", "c")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.close(cancel, done)
	}()
	api.gate.Unlock()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("close did not return")
	}
	var names []string
	for _, c := range api.log() {
		names = append(names, c.name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("sent before close returned: %q, want a, b, c", names)
	}
}
