package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// newRecorder is the reconciler's events/v1 recorder: client-go's broadcaster, as the
// manager's own (mgr.GetEventRecorder) is, writing through a seriesSink. It records until
// stop is called, after the manager has stopped, so that the last passes' Events are
// still sent (the series PATCHes queued then: for up to 5 s, seriesSink.close).
func newRecorder(mgr ctrl.Manager, name string) (rec recorder.EventRecorder, stop func(), err error) {
	cfg, budget := eventsConfig(mgr.GetConfig())
	cl, err := eventsv1client.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sink := newSeriesSink(&events.EventSinkImpl{Interface: cl})
	if budget != nil {
		sink.budget = budget
		sink.share = flowcontrol.NewTokenBucketRateLimiter(budget.QPS()/2, 1)
	}
	b := events.NewBroadcaster(sink)
	rec, ok := b.NewRecorder(mgr.GetScheme(), name).(recorder.EventRecorder)
	if !ok { // client-go's recorder is both an EventRecorder and an AnnotatedEventRecorder
		cancel()
		b.Shutdown()
		return nil, nil, errors.New("client-go's events recorder is not an AnnotatedEventRecorder")
	}
	// As the manager's recorder: client-go's own errors about Events in the manager's log,
	// and each Event in it at V(1).
	log := logf.Log.WithName("events")
	ctx = logf.IntoContext(ctx, log)
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	stopLogging, err := b.StartLogging(log.V(1))
	if err != nil {
		cancel()
		b.Shutdown()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sink.run(ctx)
	}()
	return rec, func() {
		b.Shutdown()
		stopLogging()
		sink.close(cancel, done)
	}, nil
}

// eventsConfig is the Event client's config: the manager's, but when that has a budget (a
// rate limiter shared by all of the manager's clients: --kube-api-qps, cmd/manager), without
// one, and the budget, which the sink takes itself (seriesSink). Without a limiter the
// client neither waits nor counts waits (rest_client_rate_limiter_duration_seconds).
func eventsConfig(mgr *rest.Config) (cfg *rest.Config, budget flowcontrol.RateLimiter) {
	cfg = rest.CopyConfig(mgr)
	budget = cfg.RateLimiter
	if budget != nil {
		cfg.RateLimiter, cfg.QPS = nil, -1 // no limiter (rest.RESTClientForConfigAndClient)
	}
	return cfg, budget
}

// seriesSink is the recorder's sink: client-go's, but for a series' PATCH, which it
// answers at once and sends from a queue of its own, with what the manager's client budget
// spares.
//
// client-go's events/v1 broadcaster (v0.37) keeps one Event per series (a job's
// Succeeded, its Missed: issue 13's "Events aggregated"), and every 30 minutes PATCHes
// them all, one after another, holding the lock that every new Event takes first
// (refreshExistingEventSeries; finishSeries likewise for the series that end). At 5,000
// jobs that is 10,000 PATCHes, several minutes of them (a 35-minute run at 5,000:
// 3,658 PATCHes in the first 3 minutes), and each Event emitted meanwhile waited in a
// goroutine of its own: 111 goroutines before, 7,962 three minutes in, RSS 174 -> 243
// MiB, and every job's Events minutes late. Kubernetes has since fixed the lock
// (kubernetes/kubernetes#141654), in no release this project can use yet.
//
// A series PATCH carries the series' whole count and last time, so a later one for an
// Event replaces an earlier one still queued; an Event the API server no longer has
// (expired: --event-ttl, one hour by default) is created again, as client-go does. Patch
// answers no Event, so the broadcaster keeps its own copy of the series, not the API
// server's answer with its managed fields (346 bytes of JSON more per series).
//
// The queue has a few workers: a series' second Event is PATCHed when it happens, and at
// 5,000 jobs under load the API server answered one every 60 ms (a 10-minute run: about
// 2,000 PATCHes and their Event copies queued at its end with one worker). They take at
// most half of the manager's budget (share; budget: --kube-api-qps), so that the budget's
// burst builds up again for the pod creations of the next minute, and of it only a token
// no other call waits for, for up to yieldFor; then they wait in line as any call does. So
// a refresh does not hold back pod creations when the budget binds, and is not put off
// for good either. New Events (Create) wait in line.
type seriesSink struct {
	events.EventSink
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
	mu       sync.Mutex
	pending  map[types.NamespacedName]seriesPatch
	workers  int
	budget   flowcontrol.RateLimiter // the manager's; nil: the client's own limits the calls
	share    flowcontrol.RateLimiter // the series PATCHes' part of it; nil: no bound of their own
	yieldFor time.Duration           // how long a PATCH leaves the budget to other calls
	grace    time.Duration           // how long close waits for the queued PATCHes
	timeout  time.Duration           // how long one call may take
}

// seriesPatch is the latest PATCH of one Event, and the Event to create if it is gone.
type seriesPatch struct {
	event *eventsv1.Event
	data  []byte
}

// seriesRetries bounds the tries of one PATCH that fails: with the queue's backoff, 0.5 s
// doubling to 1 min, about 6 minutes of tries. The broadcaster's next refresh, 30 min
// later, sends a series that goes on again. A series that ended while the API server was
// away for longer keeps the count it had there (client-go's broadcaster, writing itself,
// tried it again every 6 minutes until it got through).
const seriesRetries = 12

// seriesCallTimeout bounds one call of the sink's workers. The manager's REST config sets
// no request timeout, so a call the API server does not answer (etcd stalled: until the
// API server's own --request-timeout, 1 min by default; a connection gone without a reset:
// until HTTP/2's health check, about 45 s, or over HTTP/1.1 the kernel gives up) holds a
// worker, and with every worker so held, every series queued behind them. A call given up
// is tried again, as a lost connection is.
const seriesCallTimeout = 30 * time.Second

// seriesWorkers send the queued PATCHes (one Event at a time each: the queue hands a key to
// one worker at once).
const seriesWorkers = 4

func newSeriesSink(inner events.EventSink) *seriesSink {
	return &seriesSink{
		EventSink: inner,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](500*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "lockedcron-event-series"}),
		pending:  map[types.NamespacedName]seriesPatch{},
		workers:  seriesWorkers,
		yieldFor: 10 * time.Second,
		grace:    5 * time.Second,
		timeout:  seriesCallTimeout,
	}
}

// Patch queues the PATCH and answers at once, without an Event (see seriesSink).
func (s *seriesSink) Patch(_ context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if e.Namespace == "" {
		return nil, fmt.Errorf("can't patch an event with empty namespace")
	}
	key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
	s.mu.Lock()
	// The latest series: the broadcaster PATCHes a series' second Event outside its lock,
	// so that PATCH can come after a refresh's with a higher count.
	if q, ok := s.pending[key]; !ok || seriesCount(e) >= seriesCount(q.event) {
		s.pending[key] = seriesPatch{event: e.DeepCopy(), data: data}
	}
	s.mu.Unlock()
	s.queue.Add(key)
	return nil, nil
}

// Create is the sink's Create, within s.timeout: the broadcaster tries an Event whose call
// failed again (up to 12 times, 10 s apart), each in a goroutine of its own that holds the
// Event until then.
func (s *seriesSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.inLine(ctx, s.EventSink.Create, e)
}

// Update is the sink's Update, likewise (the broadcaster does not update Events).
func (s *seriesSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.inLine(ctx, s.EventSink.Update, e)
}

// inLine makes the call with a token of the budget, waited for in line with every other
// call, within s.timeout.
func (s *seriesSink) inLine(ctx context.Context, call func(context.Context, *eventsv1.Event) (*eventsv1.Event, error), e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return call(ctx, e)
}

// wait takes a token of the budget, in line with every other call.
func (s *seriesSink) wait(ctx context.Context) error {
	if s.budget == nil {
		return nil
	}
	return s.budget.Wait(ctx)
}

// spare waits for the series PATCHes' share, then takes a token of the budget that no
// other call waits for, polling for up to s.yieldFor; then it waits in line.
func (s *seriesSink) spare(ctx context.Context) error {
	if s.share != nil {
		if err := s.share.Wait(ctx); err != nil {
			return err
		}
	}
	if s.budget == nil {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s.yieldFor, true, func(context.Context) (bool, error) {
		return s.budget.TryAccept(), nil
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	return s.budget.Wait(ctx)
}

// close stops the sink whose run ends by closing done: the PATCHes still queued are sent,
// for up to s.grace; then cancel aborts the one under way and what is left is dropped, as
// client-go's broadcaster drops what it has not sent when it stops.
func (s *seriesSink) close(cancel context.CancelFunc, done <-chan struct{}) {
	go s.queue.ShutDownWithDrain()
	select {
	case <-done:
	case <-time.After(s.grace):
	}
	cancel()
	s.queue.ShutDown()
	<-done
}

// run sends the queued PATCHes with s.workers workers until the queue is shut down and
// empty.
func (s *seriesSink) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.workers {
		wg.Go(func() {
			for s.sendNext(ctx) {
			}
		})
	}
	wg.Wait()
}

func seriesCount(e *eventsv1.Event) int32 {
	if e.Series == nil {
		return 0
	}
	return e.Series.Count
}

// sendNext sends the next queued PATCH; false once the queue is shut down and empty.
func (s *seriesSink) sendNext(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	s.mu.Lock()
	_, ok := s.pending[key] // none when a retry comes after a newer PATCH was sent
	s.mu.Unlock()
	if !ok {
		return true
	}
	err := s.spare(ctx) // before the PATCH is taken: one queued meanwhile replaces it
	s.mu.Lock()
	p := s.pending[key] // still there: only the worker holding the key deletes it
	delete(s.pending, key)
	s.mu.Unlock()
	if err == nil {
		err = s.send(ctx, p)
	}
	if err == nil || !retriable(err) || s.queue.NumRequeues(key) >= seriesRetries {
		if err != nil {
			logf.FromContext(ctx).Error(err, "event series not updated", "namespace", key.Namespace, "name", key.Name)
		}
		s.queue.Forget(key)
		return true
	}
	s.mu.Lock()
	if q, newer := s.pending[key]; !newer || seriesCount(p.event) > seriesCount(q.event) {
		s.pending[key] = p // as in Patch: the highest count
	}
	s.mu.Unlock()
	s.queue.AddRateLimited(key)
	return true
}

// send PATCHes the series, or creates its Event again if the API server no longer has it,
// each call within s.timeout.
func (s *seriesSink) send(ctx context.Context, p seriesPatch) error {
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	_, err := s.EventSink.Patch(pctx, p.event, p.data)
	cancel()
	if apierrors.IsNotFound(err) {
		created := p.event.DeepCopy()
		created.ResourceVersion = ""
		_, err = s.Create(ctx, created)
	}
	return err
}

// retriable: what client-go's recordEvent tries again (all but an API server's refusal;
// an Event created meanwhile, AlreadyExists, is patched on the next try), and an API
// server that is busy or restarting.
func retriable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsAlreadyExists(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}
