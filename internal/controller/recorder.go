package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// newRecorder is the reconciler's events/v1 recorder (seriesRecorder), writing through a
// seriesSink. It records until stop is called, after the manager has stopped, so that the
// last passes' Events are still sent (those queued then: for up to 5 s, seriesSink.close).
func newRecorder(mgr ctrl.Manager, name string) (rec recorder.EventRecorder, stop func(), err error) {
	cfg, budget := eventsConfig(mgr.GetConfig())
	cl, err := eventsv1client.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, err
	}
	sink := newSeriesSink(&events.EventSinkImpl{Interface: cl})
	if budget != nil {
		sink.budget = budget
		sink.share = flowcontrol.NewTokenBucketRateLimiter(budget.QPS()/2, 1)
	}
	// As the manager's recorder: errors about Events in the manager's log, and each Event
	// in it at V(1).
	log := logf.Log.WithName("events")
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), log))
	hostname, _ := os.Hostname() // as client-go's recorder names its instance
	r := newSeriesRecorder(ctx, mgr.GetScheme(), name, name+"-"+hostname, sink, clock.RealClock{}, log)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sink.run(ctx)
	}()
	go r.run(ctx)
	return r, func() { r.close(sink, cancel, done) }, nil
}

// close stops r and its sink, whose run ends by closing done: the Creates under way and
// the PATCHes queued are sent for up to the sink's grace, then cancel aborts what is left.
func (r *seriesRecorder) close(sink *seriesSink, cancel context.CancelFunc, done <-chan struct{}) {
	r.stop()
	created := make(chan struct{})
	go func() {
		defer close(created)
		r.creates.Wait() // they end at the latest with the context cancel cancels
	}()
	sink.close(cancel, done, created)
	<-created
}

// Series timing, as client-go's events/v1 broadcaster (v0.37) has it: an Event that happens
// again within seriesFinish of its last time counts in its series; every seriesRefresh the
// series are PATCHed (so the API server keeps them past its --event-ttl, one hour by
// default); a series seriesFinish past its last time is PATCHed a last time and forgotten.
const (
	seriesFinish  = 6 * time.Minute
	seriesRefresh = 30 * time.Minute
)

// seriesRecorder is an events/v1 recorder that does what client-go's broadcaster does
// (issue 13's "Events aggregated": a job's Succeeded Events, its Missed ones, are one Event
// each, with a series that counts them), holding less for each Event it keeps.
//
// client-go's broadcaster keeps each Event it recorded in the last 6 minutes, and each
// series, as a whole Event (about 850 bytes with its strings) under a key of 20 strings
// (about 330 bytes): 11.5 MB of a 66 MB live heap at 5,000 jobs (10,000 series: a
// Succeeded and a Missed per job in the bench). This one keeps a key of one string, the
// note, the times and the count (about 350 bytes), and builds an Event when it sends one.
// It sends the same calls: a new Event is created (tried again for a connection lost, as
// client-go does, up to 12 times, 10 s apart); its second time PATCHes its series; later
// times only count until the refresh or the end (seriesRefresh, seriesFinish). Unlike
// client-go's, it spends no goroutine on an Event that only counts.
type seriesRecorder struct {
	ctx                  context.Context // the Creates' (the sink's: cancelled when it stops)
	scheme               *runtime.Scheme
	controller, instance string // reportingController, reportingInstance
	sink                 events.EventSink
	clock                clock.PassiveClock
	log                  logr.Logger
	retry                wait.Backoff // a new Event's Create

	waited atomic.Int64 // times send found the sink's backlog full

	mu      sync.Mutex
	series  map[string]*keptEvent // by seriesKey
	stopped bool
	creates sync.WaitGroup
}

// keptEvent is one Event the recorder keeps: what its calls need besides its key.
type keptEvent struct {
	note        string
	name        string // the Event's name when eventName's is not valid (client-go then takes a UUID)
	annotations map[string]string
	first, last int64 // Unix ns: the Event's time, the series' last
	count       int32 // 1 until the Event happens again
}

func newSeriesRecorder(ctx context.Context, scheme *runtime.Scheme, controller, instance string, sink events.EventSink, clk clock.PassiveClock, log logr.Logger) *seriesRecorder {
	return &seriesRecorder{
		ctx: ctx, scheme: scheme, controller: controller, instance: instance, sink: sink, clock: clk, log: log,
		retry:  wait.Backoff{Duration: 10 * time.Second, Factor: 1, Jitter: 0.25, Steps: 12},
		series: map[string]*keptEvent{},
	}
}

// run refreshes and ends series until ctx is done.
func (r *seriesRecorder) run(ctx context.Context) {
	go wait.UntilWithContext(ctx, r.refresh, seriesRefresh)
	wait.UntilWithContext(ctx, r.finish, seriesFinish)
}

// stop: Events recorded from now on are dropped.
func (r *seriesRecorder) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

func (r *seriesRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.AnnotatedEventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

// AnnotatedEventf records an Event as client-go's recorder does: its annotations are
// those of the series' first Event.
func (r *seriesRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	now := r.clock.Now()
	message := fmt.Sprintf(note, args...)
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		r.log.Error(err, "Could not construct reference, will not report event", "object", regarding, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	var rel *corev1.ObjectReference
	if related != nil {
		rel, _ = reference.GetReference(r.scheme, related) // as client-go: an Event without it
	}
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		r.log.Error(nil, "Unsupported event type", "eventType", eventtype)
		return
	}
	key, ok := seriesKey(eventtype, action, reason, ref, rel)
	if !ok {
		r.log.Error(nil, "Event not recorded: a NUL byte in its type, action, reason or references", "reason", reason, "action", action)
		return
	}
	if l := r.log.V(1); l.Enabled() {
		l.Info("Event occurred", "object", ref.Namespace+"/"+ref.Name, "kind", ref.Kind, "apiVersion", ref.APIVersion,
			"type", eventtype, "reason", reason, "action", action, "note", message)
	}

	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	s := r.series[key]
	switch {
	case s == nil:
		s = &keptEvent{note: message, annotations: maps.Clone(annotations), first: now.UnixNano(), count: 1}
		if name := util.GenerateEventName(ref.Name, s.first); name != eventName(ref.Name, s.first) {
			s.name = name
		}
		r.series[key] = s
		e := r.event(key, s)
		r.creates.Add(1)
		r.mu.Unlock()
		go r.create(e)
	case s.count == 1:
		s.count, s.last = 2, now.UnixNano()
		e := r.event(key, s)
		r.mu.Unlock()
		r.patch(r.ctx, e)
	default:
		s.count++
		s.last = now.UnixNano()
		r.mu.Unlock()
	}
}

// create creates a new Event, trying again what client-go's broadcaster tries again (not
// what the API server refuses, nor an Event it has) until r.ctx is done.
func (r *seriesRecorder) create(e *eventsv1.Event) {
	defer r.creates.Done()
	err := wait.ExponentialBackoffWithContext(r.ctx, r.retry, func(ctx context.Context) (bool, error) {
		_, err := r.sink.Create(ctx, e)
		if err == nil || apierrors.IsAlreadyExists(err) {
			// AlreadyExists: the series' PATCH came first, found no Event and created it
			// (seriesSink.send); client-go's broadcaster tells it at V(5) and moves on.
			return true, nil
		}
		if ctx.Err() != nil || !retriable(err) { // stopped; refused
			return false, err
		}
		r.log.Error(err, "Unable to write event (may retry after sleeping)", "namespace", e.Namespace, "name", e.Name)
		return false, nil
	})
	if err != nil && r.ctx.Err() == nil {
		r.log.Error(err, "Event not created", "namespace", e.Namespace, "name", e.Name, "reason", e.Reason)
	}
}

// patch sends e's series.
func (r *seriesRecorder) patch(ctx context.Context, e *eventsv1.Event) {
	data, err := json.Marshal(struct {
		Series *eventsv1.EventSeries `json:"series"`
	}{e.Series})
	if err == nil {
		_, err = r.sink.Patch(ctx, e, data)
	}
	if err != nil {
		r.log.Error(err, "event series not updated", "namespace", e.Namespace, "name", e.Name)
	}
}

// refresh PATCHes every series.
func (r *seriesRecorder) refresh(ctx context.Context) {
	r.send(ctx, r.take(func(*keptEvent) (bool, bool) { return true, false }), true)
}

// finish PATCHes each series whose last Event is seriesFinish old a last time and forgets
// it, and forgets the Events that did not happen again in that time.
func (r *seriesRecorder) finish(ctx context.Context) {
	cutoff := r.clock.Now().Add(-seriesFinish).UnixNano()
	r.send(ctx, r.take(func(s *keptEvent) (bool, bool) {
		if s.count == 1 {
			return false, s.first < cutoff
		}
		ended := s.last < cutoff
		return ended, ended
	}), false)
}

// keyed is a kept Event and its key.
type keyed struct {
	key string
	ev  *keptEvent
}

// take returns the series (count > 1) that send selects, and forgets those forget selects.
func (r *seriesRecorder) take(pick func(*keptEvent) (send, forget bool)) []keyed {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []keyed
	for key, s := range r.series {
		send, forget := pick(s)
		if send && s.count > 1 {
			out = append(out, keyed{key, s})
		}
		if forget {
			delete(r.series, key)
		}
	}
	return out
}

// seriesBacklog bounds the series PATCHes a refresh or the series' ends leave queued in the
// sink: a refresh at 5,000 jobs is 10,000 PATCHes, which the sink sends in a few minutes
// (73 a second in a bench run), and queued at once they held 10,000 Events (about 11 MB)
// and grew the sink's queue for good (2.8 MB of room kept after it emptied). So each
// Event is made when the sink has room for it.
const seriesBacklog = 64

// backlogged is a sink that tells how many PATCHes it has queued (seriesSink).
type backlogged interface{ backlog() int }

// send PATCHes the series, each once the sink has fewer than seriesBacklog queued, with
// its count when it is sent; kept: only those the recorder still keeps.
func (r *seriesRecorder) send(ctx context.Context, todo []keyed, kept bool) {
	sink, paced := r.sink.(backlogged)
	for _, k := range todo {
		if paced && sink.backlog() >= seriesBacklog {
			r.waited.Add(1)
			if wait.PollUntilContextCancel(ctx, 50*time.Millisecond, false, func(context.Context) (bool, error) {
				return sink.backlog() < seriesBacklog, nil
			}) != nil {
				return
			}
		}
		r.mu.Lock()
		if kept && r.series[k.key] != k.ev { // ended meanwhile: finish sent it
			r.mu.Unlock()
			continue
		}
		e := r.event(k.key, k.ev)
		r.mu.Unlock()
		r.patch(ctx, e)
	}
}

// eventName is the name client-go's recorder gives an Event (util.GenerateEventName) when
// it is a valid one.
func eventName(regarding string, unixNano int64) string {
	return fmt.Sprintf("%s.%x", regarding, unixNano)
}

// seriesKey is what makes two Events one series, as client-go's broadcaster keys them
// (its reportingController and reportingInstance are the recorder's own), as one string;
// false if a field holds the separator.
func seriesKey(eventtype, action, reason string, regarding, related *corev1.ObjectReference) (string, bool) {
	f := []string{eventtype, action, reason}
	f = appendRef(f, regarding)
	if related != nil {
		f = appendRef(f, related)
	}
	for _, s := range f {
		if strings.Contains(s, keySep) {
			return "", false
		}
	}
	return strings.Join(f, keySep), true
}

const keySep = "\x00"

func appendRef(f []string, r *corev1.ObjectReference) []string {
	return append(f, r.Kind, r.Namespace, r.Name, string(r.UID), r.APIVersion, r.ResourceVersion, r.FieldPath)
}

func refOf(f []string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: f[0], Namespace: f[1], Name: f[2], UID: types.UID(f[3]), APIVersion: f[4], ResourceVersion: f[5], FieldPath: f[6]}
}

// event is s's Event as client-go's recorder makes it, with its series if it has one.
func (r *seriesRecorder) event(key string, s *keptEvent) *eventsv1.Event {
	f := strings.Split(key, keySep)
	regarding := refOf(f[3:10])
	var related *corev1.ObjectReference
	if len(f) == 17 {
		related = refOf(f[10:])
	}
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: regarding.Namespace, Annotations: s.annotations},
		EventTime:  metav1.NewMicroTime(time.Unix(0, s.first)),
		Type:       f[0], Action: f[1], Reason: f[2],
		ReportingController: r.controller, ReportingInstance: r.instance,
		Regarding: *regarding, Related: related, Note: s.note,
	}
	if e.Name == "" {
		e.Name = eventName(regarding.Name, s.first)
	}
	if e.Namespace == "" {
		e.Namespace = metav1.NamespaceDefault
	}
	if s.count > 1 {
		e.Series = &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(time.Unix(0, s.last))}
	}
	return e
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
// Every 30 minutes the recorder PATCHes all its series (seriesRefresh). At 5,000 jobs that
// is 10,000 PATCHes, several minutes of them; client-go's broadcaster, which the recorder
// replaced, sent them one after another holding the lock every new Event takes (a
// 35-minute run at 5,000: 3,658 PATCHes in the first 3 minutes, 7,962 goroutines of
// Events waiting, RSS 174 -> 243 MiB, every job's Events minutes late).
//
// A series PATCH carries the series' whole count and last time, so a later one for an
// Event replaces an earlier one still queued; an Event the API server no longer has
// (expired: --event-ttl, one hour by default) is created again, as client-go does. Patch
// answers no Event: the recorder keeps its own count, not the API server's answer.
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
// doubling to 1 min, about 6 minutes of tries. The recorder's next refresh, 30 min
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

// Patch queues the PATCH of e, which it keeps, and answers at once, without an Event (see
// seriesSink).
func (s *seriesSink) Patch(_ context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if e.Namespace == "" {
		return nil, fmt.Errorf("can't patch an event with empty namespace")
	}
	key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
	s.mu.Lock()
	// The latest series: a series' second Event is PATCHed outside the recorder's lock, so
	// that PATCH can come after a refresh's with a higher count.
	if q, ok := s.pending[key]; !ok || seriesCount(e) >= seriesCount(q.event) {
		s.pending[key] = seriesPatch{event: e, data: data}
	}
	s.mu.Unlock()
	s.queue.Add(key)
	return nil, nil
}

// Create is the sink's Create, within s.timeout: the recorder tries an Event whose call
// failed again (up to 12 times, 10 s apart), each in a goroutine of its own that holds the
// Event until then.
func (s *seriesSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.inLine(ctx, s.EventSink.Create, e)
}

// Update is the sink's Update, likewise (the recorder does not update Events).
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

// backlog is the number of Events with a PATCH to send: queued, or waiting to be tried
// again (the queue's Len counts only the first).
func (s *seriesSink) backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// close stops the sink whose run ends by closing done: the PATCHes still queued are sent,
// and the calls that also close are awaited, for up to s.grace; then cancel aborts the
// calls under way and what is left is dropped, as client-go's broadcaster drops what it
// has not sent when it stops.
func (s *seriesSink) close(cancel context.CancelFunc, done <-chan struct{}, also ...<-chan struct{}) {
	go s.queue.ShutDownWithDrain()
	grace := time.After(s.grace)
wait:
	for _, c := range append([]<-chan struct{}{done}, also...) {
		select {
		case <-c:
		case <-grace:
			break wait
		}
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
	var construction *rest.RequestConstructionError
	if errors.As(err, &construction) { // made the same way the next time
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsAlreadyExists(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}
