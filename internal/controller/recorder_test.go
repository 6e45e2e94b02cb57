package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
)

// sinkCall is one call a fakeSink served, as the sink tests compare them.
type sinkCall struct {
	verb, name, data string
	rv               string
}

// servedCall is a sinkCall with the Event it sent, for the recorder tests.
type servedCall struct {
	sinkCall
	event *eventsv1.Event
}

// fakeSink is the API server behind a seriesSink or a seriesRecorder: it logs each call
// and its Event, answers with the queued errors first (a nil one: served), and blocks
// while gate is held. A call for an Event named in hang never gets an answer: it ends
// when its context does.
type fakeSink struct {
	mu    sync.Mutex
	calls []servedCall
	errs  map[string][]error // by verb
	gate  sync.Mutex
	hang  map[string]bool // by Event name
}

// logCall logs a call. Callers hold mu.
func (f *fakeSink) logCall(verb string, e *eventsv1.Event, data []byte) {
	f.calls = append(f.calls, servedCall{sinkCall{verb: verb, name: e.Name, data: string(data), rv: e.ResourceVersion}, e.DeepCopy()})
}

func (f *fakeSink) serve(ctx context.Context, verb string, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if f.hang[e.Name] {
		f.mu.Lock()
		f.logCall(verb, e, data)
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
	f.logCall(verb, e, data)
	if q := f.errs[verb]; len(q) > 0 {
		f.errs[verb] = q[1:]
		if q[0] != nil {
			return nil, q[0]
		}
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

// served returns the calls served so far, with their Events.
func (f *fakeSink) served() []servedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// log returns the calls served so far.
func (f *fakeSink) log() []sinkCall {
	served := f.served()
	out := make([]sinkCall, len(served))
	for i, c := range served {
		out[i] = c.sinkCall
	}
	return out
}

// awaitServed waits until the sink has served n calls.
func (f *fakeSink) awaitServed(t *testing.T, n int) []servedCall {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(f.log()) >= n, nil
	}); err != nil {
		t.Fatalf("the sink served %d calls, want %d: %v", len(f.log()), n, f.log())
	}
	return f.served()
}

// await is awaitServed without the Events.
func (f *fakeSink) await(t *testing.T, n int) []sinkCall {
	t.Helper()
	f.awaitServed(t, n)
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

// recorderFor is a seriesRecorder writing to api directly, on clk, whose Creates are tried
// again 10 ms apart.
func recorderFor(t *testing.T, api events.EventSink, clk clock.PassiveClock) *seriesRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := newSeriesRecorder(ctx, clientscheme.Scheme, "lockedcron-controller", "lockedcron-controller-host", api, clk, logr.Discard())
	r.retry.Duration = 10 * time.Millisecond
	t.Cleanup(func() {
		r.stop()
		cancel()
		r.creates.Wait()
	})
	return r
}

// TestSeriesRecorder: the recorder sends what client-go's events/v1 broadcaster sends for
// a job's repeated Events (issue 13's "Events aggregated"): the first is created, the
// second PATCHes its series, later ones only count until the refresh, which PATCHes the
// count and last time; a series whose last Event is 6 minutes old is PATCHed a last time
// and forgotten, so the next such Event is a new one. Another action (the cause of a
// Missed) or another job is another series.
func TestSeriesRecorder(t *testing.T) {
	api := &fakeSink{}
	start := time.Date(2026, 12, 5, 3, 0, 0, 123456000, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	r := recorderFor(t, api, clk)
	job := &corev1.ObjectReference{APIVersion: "lockedcron.io/v1alpha1", Kind: "LockedCronJob", Namespace: "team-a", Name: "nightly", UID: "u1"}

	r.Eventf(job, nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence %d succeeded", 1)
	first := api.awaitServed(t, 1)[0]
	want := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("nightly.%x", start.UnixNano())},
		EventTime:           metav1.NewMicroTime(start),
		ReportingController: "lockedcron-controller", ReportingInstance: "lockedcron-controller-host",
		Type: corev1.EventTypeNormal, Action: "Backlog", Reason: "Succeeded", Regarding: *job, Note: "occurrence 1 succeeded",
	}
	if first.verb != "create" || !apiequality.Semantic.DeepEqual(first.event, want) {
		t.Fatalf("first Event: %s %+v\nwant create %+v", first.verb, first.event, want)
	}

	for i := 2; i <= 4; i++ {
		clk.Step(time.Minute)
		r.Eventf(job, nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence %d succeeded", i)
	}
	second := start.Add(time.Minute)
	calls := api.awaitServed(t, 2)
	if c := calls[1]; c.verb != "patch" || c.event.Name != want.Name || c.data != fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":%q}}`, second.Format(metav1.RFC3339Micro)) ||
		c.event.Note != "occurrence 1 succeeded" {
		t.Fatalf("second Event: %s %s %s (note %q); want a PATCH of its series, count 2, with the first note", c.verb, c.event.Name, c.data, c.event.Note)
	}
	if n := len(api.log()); n != 2 {
		t.Fatalf("the third and fourth Events made calls: %d in all", n)
	}

	r.Eventf(job, nil, corev1.EventTypeWarning, "Missed", "Backlog", "occurrence 4 missed")     // another type and reason
	clk.Step(time.Millisecond)                                                                  // Events named by their time
	r.Eventf(job, nil, corev1.EventTypeNormal, "Succeeded", "Manual", "occurrence 4 succeeded") // another action
	other := job.DeepCopy()
	other.Name, other.UID = "weekly", "u2"
	r.Eventf(other, nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence 4 succeeded") // another job
	calls = api.awaitServed(t, 5)
	if got := verbs(calls[2:]); !slices.Equal(got, []string{"create", "create", "create"}) || calls[2].event.Name == calls[3].event.Name {
		t.Fatalf("three new series: %v, want three creates", got)
	}

	r.refresh(context.Background())
	last := start.Add(3 * time.Minute)
	calls = api.awaitServed(t, 6)
	if c := calls[5]; c.verb != "patch" || c.event.Name != want.Name || c.data != fmt.Sprintf(`{"series":{"count":4,"lastObservedTime":%q}}`, last.Format(metav1.RFC3339Micro)) {
		t.Fatalf("refresh: %s %s %s; want the series PATCHed with count 4", c.verb, c.event.Name, c.data)
	}

	clk.Step(time.Minute)
	r.Eventf(job, nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence 5 succeeded") // count 5, a minute after the singletons
	clk.Step(seriesFinish - time.Minute - time.Second)                                           // the singletons 6 min - 1 s old, the series less
	r.finish(context.Background())
	if n := len(api.log()); n != 6 {
		t.Fatalf("finish before 6 minutes: %d calls, want 6", n)
	}
	clk.Step(2 * time.Second) // the singletons 6 min + 1 s old
	r.finish(context.Background())
	if n := len(api.log()); n != 6 {
		t.Fatalf("finish of singletons made calls: %d, want 6", n)
	}
	r.Eventf(other, nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence 6 succeeded")
	if c := api.awaitServed(t, 7)[6]; c.verb != "create" || c.event.Note != "occurrence 6 succeeded" {
		t.Fatalf("an Event forgotten 6 minutes on: %s %q; want a new one created", c.verb, c.event.Note)
	}
	clk.Step(time.Minute) // the series' last Event 6 min + 1 s old
	r.finish(context.Background())
	if c := api.awaitServed(t, 8)[7]; c.verb != "patch" || c.event.Name != want.Name || !strings.Contains(c.data, `"count":5`) {
		t.Fatalf("an ended series: %s %s %s; want its last PATCH", c.verb, c.event.Name, c.data)
	}
	r.Eventf(job, nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence 9 succeeded")
	if c := api.awaitServed(t, 9)[8]; c.verb != "create" || c.event.Name == want.Name || c.event.Series != nil {
		t.Fatalf("after the series ended: %s %s; want a new Event created", c.verb, c.event.Name)
	}
	r.refresh(context.Background())
	if n := len(api.log()); n != 9 {
		t.Fatalf("refresh with no series: %d calls, want 9", n)
	}
}

// TestSeriesRecorderCreate: a new Event whose Create the API server could not serve (a
// connection lost, a 500) is tried again; one it refuses, or already has (its series'
// PATCH came first and created it), or that client-go could not make, is not. After stop
// the recorder sends nothing.
func TestSeriesRecorderCreate(t *testing.T) {
	api := &fakeSink{errs: map[string][]error{"create": {
		errors.New("connection reset"), apierrors.NewInternalError(errors.New("etcd")), nil, // a's: created the third time
		apierrors.NewBadRequest("no"), // b's: refused
		apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, "c"), // c's: there
		&rest.RequestConstructionError{Err: errors.New("no body")},                // d's
	}}}
	clk := clocktesting.NewFakeClock(time.Now())
	r := recorderFor(t, api, clk)
	ref := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "LockedCronJob", Namespace: "ns", Name: name}
	}
	r.Eventf(ref("a"), nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "a")
	api.awaitServed(t, 3)
	for _, name := range []string{"b", "c", "d"} {
		n := len(api.log())
		r.Eventf(ref(name), nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "%s", name)
		api.awaitServed(t, n+1)
	}
	r.Eventf(ref("e"), nil, "Info", "Succeeded", "Backlog", "an unknown type") // not recorded
	r.stop()
	r.Eventf(ref("f"), nil, corev1.EventTypeNormal, "Succeeded", "Backlog", "after stop")
	r.creates.Wait()
	got := []string{}
	for _, c := range api.served() {
		got = append(got, c.verb+" "+c.event.Regarding.Name)
	}
	if want := []string{"create a", "create a", "create a", "create b", "create c", "create d"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

// TestSeriesRecorderKeepsABurst: Events recorded faster than they are sent are all sent.
// At 5,000 jobs a minute's passes end together; client-go's broadcaster passed each Event
// through a watch channel of 1,000 that dropped what did not fit (BenchmarkEventSeriesHeld
// paces it for that reason): of 10,000 jobs' two Events recorded at once, 8,464 series
// PATCHes reached its sink within a minute.
func TestSeriesRecorderKeepsABurst(t *testing.T) {
	sink := &countingSink{}
	r := recorderFor(t, sink, clock.RealClock{})
	const n = 5000
	for range 2 {
		for i := range n {
			r.Eventf(&corev1.ObjectReference{Kind: "LockedCronJob", Namespace: "ns", Name: fmt.Sprintf("job-%d", i)}, nil,
				corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence succeeded")
		}
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return sink.calls.Load() == 2*n, nil
	}); err != nil {
		t.Fatalf("the sink had %d calls, want %d: a create and a PATCH per job", sink.calls.Load(), 2*n)
	}
}

// TestSeriesRecorderPacesItsPatches: a refresh PATCHes every series, 10,000 at 5,000 jobs;
// it hands them to the sink as the sink has room (seriesBacklog queued at most), so that
// they are not all held at once, and sends each series' count when its turn comes.
func TestSeriesRecorderPacesItsPatches(t *testing.T) {
	api := &fakeSink{}
	s := newSeriesSink(api)
	s.workers = 1
	ctx := runSink(t, s)
	clk := clocktesting.NewFakeClock(time.Now())
	r := recorderFor(t, s, clk)
	const n = 3 * seriesBacklog
	record := func() {
		for i := range n {
			r.Eventf(&corev1.ObjectReference{Kind: "LockedCronJob", Namespace: "ns", Name: fmt.Sprintf("job-%d", i)}, nil,
				corev1.EventTypeNormal, "Succeeded", "Backlog", "occurrence succeeded")
		}
	}
	record()
	record()
	api.await(t, 2*n) // each job's create and its series' first PATCH

	api.gate.Lock() // the API server stalls
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.refresh(ctx)
	}()
	clk.Step(time.Second)
	record() // counts go to 3 while the refresh waits
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return r.waited.Load() > 0, nil
	}); err != nil {
		api.gate.Unlock()
		t.Fatalf("the refresh queued %d PATCHes without waiting for room", s.backlog())
	}
	if got := s.backlog(); got > seriesBacklog {
		t.Errorf("%d PATCHes queued while the refresh waits, want at most %d", got, seriesBacklog)
	}
	api.gate.Unlock()
	<-done
	calls := api.await(t, 3*n)
	late := 0
	for _, c := range calls[2*n:] {
		if c.verb != "patch" {
			t.Fatalf("refresh: %s %s, want PATCHes only", c.verb, c.name)
		}
		if strings.Contains(c.data, `"count":3`) {
			late++
		}
	}
	if late < n-seriesBacklog-1 {
		t.Errorf("%d of the refresh's %d PATCHes carry the count the series had when they were sent (3); want at least %d", late, n, n-seriesBacklog-1)
	}
}

// TestSeriesSinkBacklog: the backlog a refresh waits on counts the PATCHes waiting to be
// tried again too: with an API server that fails at once, the queue itself stays empty.
func TestSeriesSinkBacklog(t *testing.T) {
	api := &fakeSink{errs: map[string][]error{"patch": {apierrors.NewInternalError(errors.New("etcd"))}}}
	s := newSeriesSink(api)
	s.queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](time.Hour, time.Hour))
	ctx := runSink(t, s)
	patchAll(t, ctx, s, "a")
	api.await(t, 1)
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.queue.NumRequeues(types.NamespacedName{Namespace: "ns", Name: "a"}) == 1, nil
	}); err != nil {
		t.Fatal("the failed PATCH was not put back")
	}
	if got := s.backlog(); s.queue.Len() != 0 || got != 1 {
		t.Errorf("a PATCH waiting to be tried again: backlog %d (queue %d), want 1", got, s.queue.Len())
	}
}

// TestSeriesRecorderCloseWaitsForCreates: the recorder stops after the manager, so that the
// last passes' Events are sent; a new Event's Create under way is given the sink's grace
// too, not cut short because no PATCH is queued.
func TestSeriesRecorderCloseWaitsForCreates(t *testing.T) {
	api := &fakeSink{}
	s := newSeriesSink(api)
	s.grace = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx)
	}()
	r := newSeriesRecorder(ctx, clientscheme.Scheme, "c", "c-host", s, clock.RealClock{}, logr.Discard())
	api.gate.Lock() // the API server is slow: the Create waits
	r.Eventf(&corev1.ObjectReference{Kind: "LockedCronJob", Namespace: "ns", Name: "last"}, nil, corev1.EventTypeWarning, "Failed", "Reconcile", "the last pass's Event")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		r.close(s, cancel, done)
	}()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.queue.ShuttingDown(), nil
	}); err != nil {
		t.Fatal("close did not shut the queue down")
	}
	api.gate.Unlock()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("close did not return")
	}
	if calls := api.log(); len(calls) != 1 || calls[0].verb != "create" {
		t.Errorf("served before close returned: %+v, want the Create", calls)
	}
}

func verbs(calls []servedCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.verb
	}
	return out
}

// BenchmarkEventSeriesHeld: the bytes a recorder holds per series, this project's
// (seriesRecorder) and client-go's events/v1 broadcaster, which it replaced: n jobs' Events
// as the controller records them (seriesRef, a note with the occurrence and the pod), each
// twice, so that each is a series (go test ./internal/controller/ -run '^$' -bench
// EventSeriesHeld -benchtime 1x).
func BenchmarkEventSeriesHeld(b *testing.B) {
	const n = 10000
	jobs := make([]*corev1.ObjectReference, n)
	for i := range jobs {
		job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", i%10),
			Name: fmt.Sprintf("reconcile-ledger-%05d", i), UID: types.UID(fmt.Sprintf("5d0f2c3e-1111-4c43-9a43-%012d", i))}}
		jobs[i] = seriesRef(job)
	}
	// record records each job's Event, 500 at a time, each 500 once the sink has had their
	// calls: client-go's broadcaster drops Events that come faster (its watch channel).
	record := func(ctx context.Context, rec events.EventRecorder, sink *countingSink, round int) {
		for i, job := range jobs {
			rec.Eventf(job, nil, corev1.EventTypeNormal, string(report.Succeeded), "Backlog",
				"occurrence 2026-12-05T03:0%d:00Z succeeded: pod %s-29414%03d ran it in 1.2s", round, job.Name, i%1000)
			if sent := int64((round-1)*n + i + 1); sent%500 == 0 {
				if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
					return sink.calls.Load() == sent, nil
				}); err != nil {
					b.Fatalf("the sink had %d calls, want %d", sink.calls.Load(), sent)
				}
			}
		}
	}
	for _, tc := range []struct {
		name  string
		start func(ctx context.Context, sink events.EventSink) events.EventRecorder
	}{
		{"seriesRecorder", func(ctx context.Context, sink events.EventSink) events.EventRecorder {
			return newSeriesRecorder(ctx, clientscheme.Scheme, "lockedcron-controller", "lockedcron-controller-host", sink, clock.RealClock{}, logr.Discard())
		}},
		{"client-go", func(ctx context.Context, sink events.EventSink) events.EventRecorder {
			bc := events.NewBroadcaster(sink)
			if err := bc.StartRecordingToSinkWithContext(ctx); err != nil {
				b.Fatal(err)
			}
			return bc.NewRecorder(clientscheme.Scheme, "lockedcron-controller")
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				sink := &countingSink{}
				before := heapInUse()
				rec := tc.start(ctx, sink)
				record(ctx, rec, sink, 1)
				record(ctx, rec, sink, 2)
				b.ReportMetric(float64(heapInUse()-before)/n, "B-held/series")
				runtime.KeepAlive(rec)
				cancel()
			}
		})
	}
}

// countingSink answers every call at once and counts them.
type countingSink struct{ calls atomic.Int64 }

func (c *countingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	c.calls.Add(1)
	return nil, nil
}
func (c *countingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	c.calls.Add(1)
	return nil, nil
}
func (c *countingSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	c.calls.Add(1)
	return nil, nil
}
