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
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// newRecorder is the reconciler's events/v1 recorder: client-go's broadcaster, as the
// manager's own (mgr.GetEventRecorder) is, writing through a seriesSink. It records until
// stop is called, after the manager has stopped, so that the last passes' Events are
// still sent.
func newRecorder(mgr ctrl.Manager, name string) (rec recorder.EventRecorder, stop func(), err error) {
	cl, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sink := newSeriesSink(&events.EventSinkImpl{Interface: cl})
	b := events.NewBroadcaster(sink)
	rec, ok := b.NewRecorder(mgr.GetScheme(), name).(recorder.EventRecorder)
	if !ok { // client-go's recorder is both an EventRecorder and an AnnotatedEventRecorder
		cancel()
		return nil, nil, errors.New("client-go's events recorder is not an AnnotatedEventRecorder")
	}
	log := logf.Log.WithName("events")
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	stopLogging, err := b.StartLogging(log.V(1)) // as the manager's recorder: each Event at V(1)
	if err != nil {
		cancel()
		b.Shutdown()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sink.run(logf.IntoContext(ctx, log))
	}()
	return rec, func() {
		stopLogging()
		b.Shutdown()
		cancel()
		<-done
	}, nil
}

// seriesSink is the recorder's sink: client-go's, but for a series' PATCH, which it
// answers at once and sends from a queue of its own.
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
type seriesSink struct {
	events.EventSink
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	mu      sync.Mutex
	pending map[types.NamespacedName]seriesPatch
}

// seriesPatch is the latest PATCH of one Event, and the Event to create if it is gone.
type seriesPatch struct {
	event *eventsv1.Event
	data  []byte
}

// seriesRetries bounds the tries of one PATCH that fails; the series' next change, or
// the broadcaster's next refresh, sends it again.
const seriesRetries = 5

func newSeriesSink(inner events.EventSink) *seriesSink {
	return &seriesSink{
		EventSink: inner,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](500*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "lockedcron-event-series"}),
		pending: map[types.NamespacedName]seriesPatch{},
	}
}

// Patch queues the PATCH and answers at once, without an Event (see seriesSink).
func (s *seriesSink) Patch(_ context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if e.Namespace == "" {
		return nil, fmt.Errorf("can't patch an event with empty namespace")
	}
	key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
	s.mu.Lock()
	s.pending[key] = seriesPatch{event: e.DeepCopy(), data: data}
	s.mu.Unlock()
	s.queue.Add(key)
	return nil, nil
}

// run sends the queued PATCHes until ctx ends.
func (s *seriesSink) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for s.sendNext(ctx) {
	}
}

func (s *seriesSink) sendNext(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	s.mu.Lock()
	p, ok := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if !ok {
		return true
	}
	_, err := s.EventSink.Patch(ctx, p.event, p.data)
	if apierrors.IsNotFound(err) {
		created := p.event.DeepCopy()
		created.ResourceVersion = ""
		_, err = s.EventSink.Create(ctx, created)
	}
	if err == nil || !retriable(err) || s.queue.NumRequeues(key) >= seriesRetries {
		if err != nil {
			logf.FromContext(ctx).Error(err, "event series not updated", "namespace", key.Namespace, "name", key.Name)
		}
		s.queue.Forget(key)
		return true
	}
	s.mu.Lock()
	if _, newer := s.pending[key]; !newer {
		s.pending[key] = p
	}
	s.mu.Unlock()
	s.queue.AddRateLimited(key)
	return true
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
