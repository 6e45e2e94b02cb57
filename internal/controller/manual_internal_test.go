package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/defaults"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// TestParseRunRequest: every bad run request is refused naming the annotation and the fix;
// good ones give the run's occurrence and contention.
func TestParseRunRequest(t *testing.T) {
	hourly, err := schedule.Parse("0 * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 9, 15, 42, 0, time.UTC)
	const (
		id  = v1alpha1.AnnotationRunRequest
		occ = v1alpha1.AnnotationRunOccurrence
		con = v1alpha1.AnnotationRunContention
	)
	for _, c := range []struct {
		name  string
		ann   map[string]string
		sched *schedule.Schedule
		err   []string // substrings of the error; nil: valid
		// remembered is retention − ttl (0: the defaults, 168h − 30s)
		remembered time.Duration
	}{
		{name: "plain", ann: map[string]string{id: "fix-1"}, sched: hourly},
		{name: "upper case", ann: map[string]string{id: "Fix-1"}, sched: hourly, err: []string{id, `"Fix-1"`, "a-z, 0-9 and '-'"}},
		{name: "trailing dash", ann: map[string]string{id: "fix-"}, sched: hourly, err: []string{id, "starting and ending with a letter or digit"}},
		{name: "empty", ann: map[string]string{id: ""}, sched: hourly, err: []string{id}},
		{name: "64 characters", ann: map[string]string{id: strings.Repeat("a", 64)}, sched: hourly, err: []string{id, "1-63"}},
		{name: "63 characters", ann: map[string]string{id: strings.Repeat("a", 63)}, sched: hourly},
		{name: "contention", ann: map[string]string{id: "x", con: "wait"}, sched: hourly, err: []string{con, `"wait"`, "Wait", "FailFast"}},
		{name: "fail fast", ann: map[string]string{id: "x", con: "FailFast"}, sched: hourly},
		{name: "occurrence not a time", ann: map[string]string{id: "x", occ: "yesterday"}, sched: hourly, err: []string{occ, "RFC 3339", "2026-11-30T02:00:00Z"}},
		{name: "occurrence past the year 9999", ann: map[string]string{id: "x", occ: "9999-12-31T23:59:59-23:59"}, sched: hourly, err: []string{occ, "0001–9999"}},
		{name: "occurrence in the future", ann: map[string]string{id: "x", occ: "2026-11-30T10:00:00Z"}, sched: hourly, err: []string{occ, "in the future"}},
		{name: "not of the schedule", ann: map[string]string{id: "x", occ: "2026-11-30T08:30:00Z"}, sched: hourly, err: []string{occ, "not an occurrence of spec.schedule", "0 * * * *"}},
		{name: "schedule invalid", ann: map[string]string{id: "x", occ: "2026-11-30T08:00:00Z"}, sched: nil, err: []string{occ, "fix spec.schedule"}},
		{name: "an occurrence, in another zone", ann: map[string]string{id: "x", occ: "2026-11-30T09:00:00+01:00"}, sched: hourly},
		// lockwrap runs nothing once the ledger may have forgotten the occurrence (Missed):
		// with dedupe.retention 10m and ttl 30s, 9m30s after it.
		{name: "older than the ledger remembers", ann: map[string]string{id: "x", occ: "2026-11-30T09:00:00Z"}, sched: hourly,
			remembered: 15*time.Minute + 42*time.Second, err: []string{occ, "older than what the ledger remembers", "15m42s", "remove the annotation"}},
		{name: "just within what the ledger remembers", ann: map[string]string{id: "x", occ: "2026-11-30T09:00:00Z"}, sched: hourly,
			remembered: 15*time.Minute + 43*time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.remembered == 0 {
				c.remembered = defaults.DedupeRetention - 30*time.Second
			}
			m, err := parseRunRequest(c.ann, c.sched, now, c.remembered)
			if c.err == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %+v", m)
			}
			for _, s := range c.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}

	m, err := parseRunRequest(map[string]string{id: "rerun", occ: "2026-11-30T09:00:00+01:00", con: "FailFast"}, hourly, now, 2*time.Hour)
	if err != nil || !m.Occurrence.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) || m.Contention != "FailFast" || !m.RequestedAt.Equal(now) {
		t.Errorf("parsed %+v, %v", m, err)
	}
	m, _ = parseRunRequest(map[string]string{id: "now"}, hourly, now.Add(300*time.Millisecond), time.Hour)
	if !m.Occurrence.IsZero() || m.Contention != v1alpha1.ManualContentionWait || !m.RequestedAt.Equal(now) {
		t.Errorf("defaults %+v: want no occurrence, Wait, requested at %s", m, now)
	}
}

// TestRefusedRunRequestRecordsNothingStatusCannotHold: a request is refused with what it
// named. An occurrence status cannot hold (past the year 9999 in UTC: Go reads
// 9999-12-31T23:59:59-23:59 as 10000-01-01T23:58:59Z) was recorded in
// status.lastRunRequest, the API server refused every status write of the job from then
// on, and the request, never recorded as handled, was refused again at every pass.
func TestRefusedRunRequestRecordsNothingStatusCannotHold(t *testing.T) {
	job, _ := rerunRequested()
	job.Annotations = map[string]string{
		v1alpha1.AnnotationRunRequest:    "r1",
		v1alpha1.AnnotationRunOccurrence: "9999-12-31T23:59:59-23:59",
	}
	r := testReconciler(fakeAPI(t)) // a pod of the id is looked for first
	p := newPass(job.DeepCopy(), passAt, logr.Discard())
	r.manualRun(context.Background(), p, nil, nil)
	rr := p.status.LastRunRequest
	if rr == nil || rr.Refused == "" {
		t.Fatalf("not refused: %+v", rr)
	}
	b, err := json.Marshal(rr)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"10000-`) || rr.Occurrence != nil {
		t.Errorf("the refusal records an occurrence the API server refuses in status: %s", b)
	}
}

// TestRequestedBy: the manager that owns the run-request annotation in managedFields.
func TestRequestedBy(t *testing.T) {
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:schedule":{}}}`)}},
		{Manager: "lockedcron", Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
		{Manager: "kubectl-annotate", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:metadata":{"f:annotations":{".":{},"f:scheduling.lockedcron.io/run-request":{},"f:scheduling.lockedcron.io/run-request-contention":{}}}}`)}},
	}}}
	if got := requestedBy(requestOwners(job)); got != "kubectl-annotate" {
		t.Errorf("requestedBy = %q, want kubectl-annotate", got)
	}
	job.ManagedFields = job.ManagedFields[:2]
	if got := requestedBy(requestOwners(job)); got != "" {
		t.Errorf("requestedBy without an owner = %q, want empty", got)
	}
}

// TestRunRequestLedgerLookupHoldsNoWorker: a run request for an occurrence asks the
// ledger whether the occurrence succeeded. A tenant's Redis that does not answer (frozen
// here, and the look-up's timeout an hour) must hold no reconcile worker, and so no other
// tenant's job: the pass goes on without the answer, the look-up wakes the job when it
// has one, and the pass after that takes it. One look-up per request, however many
// passes come meanwhile.
func TestRunRequestLedgerLookupHoldsNoWorker(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	job, occ := rerunRequested()
	succeededIn(t, srv, job, occ)
	if err := srv.Client().ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The Secret names the Redis behind the proxy; the read timeout an hour too: go-redis
	// caps a read by it, whatever the context says.
	cl := fakeAPI(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: job.Spec.Lock.Redis.SecretRef.Name},
		Data: map[string][]byte{"url": []byte(proxy.URL() + "?read_timeout=1h")}})
	woken := make(chan types.NamespacedName, 4)
	r := &LockedCronJobReconciler{Client: cl, APIReader: cl, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"},
		backends: newBackends(cl), ledger: newLedgerLookups(func(j types.NamespacedName) { woken <- j })}
	r.backends.timeout = time.Hour
	t.Cleanup(r.backends.close)
	r.health = newHealth(r.backends)
	r.health.probe = func(context.Context, types.NamespacedName, redis.UniversalClient, string) ([]string, *backendError) {
		return nil, nil
	}
	// runOnce is a pass: the backend as the health loop knows it, then the request.
	runOnce := func() *pass {
		st := r.health.state(ctx, client.ObjectKeyFromObject(job), job.Spec.Lock.Redis.SecretRef.Name)
		p := newPass(job.DeepCopy(), passAt, logr.Discard())
		r.manualRun(ctx, p, st.client, nil)
		return p
	}

	proxy.Freeze()
	for range 3 {
		done := make(chan *pass, 1)
		go func() { done <- runOnce() }()
		select {
		case p := <-done:
			if p.status.LastRunRequest != nil || len(p.active) != 0 {
				t.Fatalf("handled without the ledger's answer: %+v, %d pods", p.status.LastRunRequest, len(p.active))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the pass waits for the frozen Redis's answer, holding its worker")
		}
	}
	proxy.Thaw()
	select {
	case j := <-woken:
		if j != client.ObjectKeyFromObject(job) {
			t.Fatalf("woke %v", j)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer did not wake the job")
	}
	// A refusal is given on the Secret as read since the look-up began: the pass that
	// takes the answer asks for the Secret again, and the one after refuses.
	p := runOnce()
	if p.status.LastRunRequest != nil || p.requeue == 0 {
		t.Fatalf("refused on a Secret read before the look-up, or not looked at again: %+v", p.status.LastRunRequest)
	}
	rr := runOnce().status.LastRunRequest
	if rr == nil || rr.Pod != "" || !strings.Contains(rr.Refused, "already succeeded") {
		t.Fatalf("want the request refused (the occurrence succeeded), got %+v", rr)
	}
	stats, err := srv.Client().Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "cmdstat_hget:calls=1,") {
		t.Errorf("want one ledger read for the request, commandstats:\n%s", stats)
	}
}

// TestLedgerAnswersNotTakenAreForgotten: an answer no pass takes (its job deleted while
// the look-up ran) is dropped after answerKeep, so the look-ups of deleted jobs do not
// pile up in the manager.
func TestLedgerAnswersNotTakenAreForgotten(t *testing.T) {
	ctx := context.Background()
	now := passAt
	woken := make(chan types.NamespacedName, 1)
	l := newLedgerLookups(func(j types.NamespacedName) { woken <- j })
	l.now = func() time.Time { return now }
	yes := func(context.Context) (bool, error) { return true, nil }
	gone := ledgerQuestion{job: types.NamespacedName{Namespace: "ns", Name: "gone"}, id: "x"}
	if _, ok := l.answer(ctx, gone, yes); ok {
		t.Fatal("answered before the look-up")
	}
	<-woken
	now = now.Add(answerKeep + time.Second)
	other := ledgerQuestion{job: types.NamespacedName{Namespace: "ns", Name: "other"}, id: "x"}
	l.answer(ctx, other, yes)
	<-woken
	if a, ok := l.answer(ctx, other, yes); !ok || !a.succeeded {
		t.Fatalf("the other job's answer: %+v, %t", a, ok)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.byQ) != 0 {
		t.Fatalf("kept: %v", l.byQ)
	}
}

// TestLedgerAnswerIsTheBackendsItAsked: an answer is for the backend (the Secret's
// client) it was asked of. A Secret edited to point at another Redis while an answer
// waits asks again: the old Redis's answer ("succeeded") must not refuse a run that the
// new Redis's ledger does not know.
func TestLedgerAnswerIsTheBackendsItAsked(t *testing.T) {
	ctx := context.Background()
	job, occ := rerunRequested()

	old, fresh := redistest.Start(t), redistest.Start(t)
	succeededIn(t, old, job, occ)
	backendOf := func(s *redistest.Server) redis.UniversalClient {
		c, err := lock.NewClient(lock.ClientConfig{URL: "redis://" + s.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	cl := fakeAPI(t)
	woken := make(chan types.NamespacedName, 4)
	r := &LockedCronJobReconciler{Client: cl, APIReader: cl, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"},
		backends: newBackends(cl), ledger: newLedgerLookups(func(j types.NamespacedName) { woken <- j })}
	// handled runs passes until one handles the request (ask, then take).
	handled := func(backend redis.UniversalClient) *v1alpha1.RunRequest {
		for range 3 {
			p := newPass(job.DeepCopy(), passAt, logr.Discard())
			r.manualRun(ctx, p, backend, nil)
			if p.status.LastRunRequest != nil {
				return p.status.LastRunRequest
			}
			select {
			case <-woken:
			case <-time.After(10 * time.Second):
				t.Fatal("the answer did not wake the job")
			}
		}
		t.Fatal("the request was never handled")
		return nil
	}

	// The old Redis's answer is asked for, and the Secret changes before a pass takes it.
	p := newPass(job.DeepCopy(), passAt, logr.Discard())
	r.manualRun(ctx, p, backendOf(old), nil)
	if p.status.LastRunRequest != nil {
		t.Fatalf("handled before the ledger answered: %+v", p.status.LastRunRequest)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("the old Redis's answer did not wake the job")
	}
	if rr := handled(backendOf(fresh)); rr.Pod == "" || rr.Refused != "" {
		t.Fatalf("the new Redis's ledger does not know the occurrence; want its pod, got %+v (the old Redis's answer)", rr)
	}
}

// TestLedgerAnswerIsTheJobsItAsked: a job deleted and created again under the same name
// (a new UID) does not take the answer the old one's look-up left: it asks again.
func TestLedgerAnswerIsTheJobsItAsked(t *testing.T) {
	ctx := context.Background()
	woken := make(chan types.NamespacedName, 2)
	l := newLedgerLookups(func(j types.NamespacedName) { woken <- j })
	asked := 0
	ask := func(answer bool) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { asked++; return answer, nil }
	}
	q := ledgerQuestion{job: types.NamespacedName{Namespace: "ns", Name: "j"}, uid: "old", id: "again", key: "ns/j"}
	l.answer(ctx, q, ask(true))
	<-woken
	q.uid = "new"
	if a, ok := l.answer(ctx, q, ask(false)); ok {
		t.Fatalf("the new job took the old one's answer: %+v", a)
	}
	<-woken
	if a, ok := l.answer(ctx, q, ask(false)); !ok || a.succeeded || asked != 2 {
		t.Fatalf("the new job's answer: %+v, %t; asked %d times, want 2", a, ok, asked)
	}
}

// TestRunRequestRefusedOnlyOnTheSecretAsItIsNow: a Secret is read once a minute, so a
// pass can still hold the client of a Secret edited since to point at another Redis. A
// refusal is for good (the request's id is spent), so it is only given on the word of the
// Redis the Secret names when the look-up was asked: the Secret is read again first. The
// old Redis says the occurrence succeeded; the new one does not know it: the run goes on.
func TestRunRequestRefusedOnlyOnTheSecretAsItIsNow(t *testing.T) {
	for _, edited := range []bool{true, false} {
		t.Run(fmt.Sprintf("edited=%t", edited), func(t *testing.T) { refusedOnlyOnTheSecretAsItIsNow(t, edited) })
	}
}

// refusedOnlyOnTheSecretAsItIsNow: with the Secret edited, the run goes on (the new Redis
// does not know the occurrence); unchanged, it is refused on the answer already had (one
// ledger read).
func refusedOnlyOnTheSecretAsItIsNow(t *testing.T, edited bool) {
	ctx := context.Background()
	job, occ := rerunRequested()
	old, fresh := redistest.Start(t), redistest.Start(t)
	succeededIn(t, old, job, occ)
	if err := old.Client().ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: job.Spec.Lock.Redis.SecretRef.Name},
		Data: map[string][]byte{"url": []byte(old.URL())}}
	cl := fakeAPI(t, secret)
	now := passAt
	clock := func() time.Time { return now }
	woken := make(chan types.NamespacedName, 4)
	r := &LockedCronJobReconciler{Client: cl, APIReader: cl, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"},
		backends: newBackends(cl), ledger: newLedgerLookups(func(j types.NamespacedName) { woken <- j })}
	t.Cleanup(r.backends.close)
	r.health = newHealth(r.backends)
	r.health.now, r.ledger.now = clock, clock
	r.health.probe = func(context.Context, types.NamespacedName, redis.UniversalClient, string) ([]string, *backendError) {
		return nil, nil
	}
	// pass is a pass at now: the backend as the health loop knows it, then the request.
	pass := func() *pass {
		st := r.health.state(ctx, client.ObjectKeyFromObject(job), secret.Name)
		p := newPass(job.DeepCopy(), now, logr.Discard())
		r.manualRun(ctx, p, st.client, nil)
		return p
	}
	awaitWake := func() {
		t.Helper()
		select {
		case <-woken:
		case <-time.After(10 * time.Second):
			t.Fatal("the ledger's answer did not wake the job")
		}
	}

	pass() // the Secret read (old Redis), a look-up asked of it
	awaitWake()
	now = now.Add(10 * time.Second)
	if edited {
		secret.Data["url"] = []byte(fresh.URL())
		if err := cl.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	// Within the minute: the Secret's client is still the old Redis's. The passes come
	// as the job is woken (an answer) or requeued (anything else).
	for range 6 {
		now = now.Add(time.Second)
		p := pass()
		if rr := p.status.LastRunRequest; rr != nil {
			switch {
			case edited && rr.Refused != "":
				t.Fatalf("refused on the word of the Redis the Secret no longer names: %s", rr.Refused)
			case edited && rr.Pod == "":
				t.Fatalf("handled without a pod: %+v", rr)
			case !edited && !strings.Contains(rr.Refused, "already succeeded"):
				t.Fatalf("the Secret unchanged: want the request refused, got %+v", rr)
			}
			if stats := old.Do("INFO", "commandstats"); !edited && !strings.Contains(fmt.Sprint(stats), "cmdstat_hget:calls=1,") {
				t.Errorf("want one ledger read of the old Redis, commandstats:\n%v", stats)
			}
			return
		}
		if p.requeue == 0 {
			awaitWake() // a look-up under way
		}
	}
	t.Fatal("the request was never handled")
}

// rerunRequested is a job with a run request for its 03:00 occurrence (a re-run).
func rerunRequested() (*v1alpha1.LockedCronJob, time.Time) {
	occ := time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)
	job := passJob("0 3 * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: occ}
	job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "again", v1alpha1.AnnotationRunOccurrence: occ.Format(time.RFC3339)}
	return job, occ
}

// succeededIn records in srv's ledger that job's occurrence succeeded (another holder ran it).
func succeededIn(t *testing.T, srv *redistest.Server, job *v1alpha1.LockedCronJob, occ time.Time) {
	t.Helper()
	ctx := context.Background()
	lease, err := lock.New(srv.Client()).Acquire(ctx, lock.Request{Key: runpod.LockKey(job), Occurrence: occ, Holder: "other/ns/pod", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Finish(ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
}

// TestCreatedWithRequest: a request the job was created with (a restore, a re-applied
// manifest) is told from one made after, by the managedFields entries that own it, on the
// job as the API server gives it and as the manager's cache keeps it.
func TestCreatedWithRequest(t *testing.T) {
	created := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	const annotation = `"f:metadata":{"f:annotations":{"f:` + v1alpha1.AnnotationRunRequest + `":{}}}`
	entry := func(manager string, at *time.Time, fields string) metav1.ManagedFieldsEntry {
		e := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte("{" + fields + "}")}}
		if at != nil {
			e.Time = &metav1.Time{Time: *at}
		}
		return e
	}
	at := func(d time.Duration) *time.Time { t := created.Add(d); return &t }
	creator := func(d time.Duration) metav1.ManagedFieldsEntry {
		return entry("kubectl-client-side-apply", at(d), annotation+`,"f:spec":{"f:template":{},"f:lock":{}}`)
	}
	for _, c := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"created with it", []metav1.ManagedFieldsEntry{creator(0)}, true},
		// (A request changed by another manager is that manager's alone: the creator's
		// entry no longer owns it.)
		{"requested in the creation's second by another manager", []metav1.ManagedFieldsEntry{
			entry("kubectl-client-side-apply", at(0), `"f:spec":{"f:template":{}}`), entry("kubectl-annotate", at(0), annotation)}, false},
		{"requested later by the creator", []metav1.ManagedFieldsEntry{creator(3 * time.Second)}, false},
		{"restored with the entries of a request made before the backup", []metav1.ManagedFieldsEntry{entry("kubectl-annotate", at(-48*time.Hour), annotation)}, true},
		// An API server whose clock is behind the one that created the job.
		{"requested after the creation, stamped a second before it", []metav1.ManagedFieldsEntry{entry("kubectl-annotate", at(-time.Second), annotation)}, false},
		// A server-side apply that changed nothing adds its entry without a time, first.
		{"an entry without a time before the creator's", []metav1.ManagedFieldsEntry{
			{Manager: "ci", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte("{" + annotation + "}")}},
			creator(0)}, true},
		{"no entry owns it", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Name: "j", CreationTimestamp: metav1.Time{Time: created},
				Annotations: map[string]string{v1alpha1.AnnotationRunRequest: "x"}, ManagedFields: c.entries}}
			if got := createdWithRequest(job, requestOwners(job)); got != c.want {
				t.Errorf("createdWithRequest = %v, want %v", got, c.want)
			}
			slim := job.DeepCopy()
			slim.ManagedFields = slimManagedFields(slim.ManagedFields)
			if got := createdWithRequest(slim, requestOwners(slim)); got != c.want {
				t.Errorf("on the cache's copy: createdWithRequest = %v, want %v", got, c.want)
			}
		})
	}

	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		entry("b", at(time.Hour), annotation), entry("a", at(time.Minute), annotation), entry("c", nil, annotation)}}}
	if got, ok := requestTime(requestOwners(job)); !ok || !got.Equal(created.Add(time.Minute)) {
		t.Errorf("requestTime = %v %v, want the earliest stamp", got, ok)
	}
}

// TestFoundRunRequestPodIsRecordedAsItWasBuilt: a run request's pod exists (the pass that
// made it lost its status write: a conflict, a restart) and by the next pass the request's
// qualifiers say something else — edited alone (which does nothing), no longer valid (a
// contention misspelt, spec.schedule changed under a re-run's occurrence). The pass records
// the request with its pod, as the pod was built: it refused it while its pod ran the job
// (`run --wait` said refused, and a user asking again with a new id got a second run), or
// recorded the qualifiers of the moment.
func TestFoundRunRequestPodIsRecordedAsItWasBuilt(t *testing.T) {
	occ := time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		m    runpod.ManualRun
		edit func(job *v1alpha1.LockedCronJob)
	}{
		{"contention misspelt after the pod was made",
			runpod.ManualRun{ID: "fix-1", RequestedAt: passAt.Add(-time.Minute), Contention: v1alpha1.ManualContentionWait},
			func(job *v1alpha1.LockedCronJob) { job.Annotations[v1alpha1.AnnotationRunContention] = "wait" }},
		{"contention changed after the pod was made",
			runpod.ManualRun{ID: "fix-1", RequestedAt: passAt.Add(-time.Minute), Contention: v1alpha1.ManualContentionWait},
			func(job *v1alpha1.LockedCronJob) {
				job.Annotations[v1alpha1.AnnotationRunContention] = v1alpha1.ManualContentionFailFast
			}},
		{"schedule changed after the re-run's pod was made",
			runpod.ManualRun{ID: "fix-1", Occurrence: occ, RequestedAt: passAt.Add(-time.Minute), Contention: v1alpha1.ManualContentionFailFast},
			func(job *v1alpha1.LockedCronJob) {
				job.Annotations[v1alpha1.AnnotationRunOccurrence] = occ.Format(time.RFC3339)
				job.Annotations[v1alpha1.AnnotationRunContention] = v1alpha1.ManualContentionFailFast
				job.Spec.Schedule = "0 4 * * *"
				job.Status.ObservedSchedule = "0 4 * * *|UTC|suspend=false"
			}},
		{"occurrence added after a run of its own was made",
			runpod.ManualRun{ID: "fix-1", RequestedAt: passAt.Add(-time.Minute), Contention: v1alpha1.ManualContentionWait},
			func(job *v1alpha1.LockedCronJob) {
				job.Annotations[v1alpha1.AnnotationRunOccurrence] = occ.Format(time.RFC3339)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := passJob("0 3 * * *", false)
			job.Status.LastScheduleTime = &metav1.Time{Time: occ}
			job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "fix-1"}
			pod, err := runpod.BuildManual(job, c.m, runpod.Options{ClusterName: "c", WrapperImage: "w"})
			if err != nil {
				t.Fatal(err)
			}
			pod.Status.Phase = corev1.PodRunning
			c.edit(job)
			_, p := runPass(t, job, passAt, pod)
			rr := p.status.LastRunRequest
			if rr == nil || rr.Refused != "" || rr.Pod != pod.Name {
				t.Fatalf("pod %s of request fix-1 exists and runs, but status records %+v", pod.Name, rr)
			}
			var gotOcc time.Time
			if rr.Occurrence != nil {
				gotOcc = rr.Occurrence.Time
			}
			if rr.Contention != c.m.Contention || !gotOcc.Equal(c.m.Occurrence) {
				t.Errorf("status records contention %s, occurrence %v; the pod runs %s, %v", rr.Contention, gotOcc, c.m.Contention, c.m.Occurrence)
			}
			for _, e := range p.events {
				if e.reason == ReasonManualRunRefused {
					t.Errorf("Event %s: %s", e.reason, e.note)
				}
			}
		})
	}
}
