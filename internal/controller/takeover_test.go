package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// A new leader's caches may be behind what the old leader wrote last (controller-runtime
// starts a standby's caches before its election). Its passes wait until they show it: a
// job's status write (an occurrence counted missed, which a stale pass would give a pod),
// a pod the old leader created (which a stale pass would count missed while it runs), a
// pod it labelled counted or deleted (which a stale pass would count again).
func TestCaughtUpAfterElection(t *testing.T) {
	ctx := context.Background()
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly"},
		Spec: v1alpha1.LockedCronJobSpec{Schedule: "* * * * *"}}
	isController := true
	jobPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, Labels: map[string]string{runpod.LabelJob: "nightly"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "nightly", UID: "u", Controller: &isController}}}}
	}
	get := func(t *testing.T, api client.Client, o client.Object) {
		t.Helper()
		if err := api.Get(ctx, keyOf(o), o); err != nil {
			t.Fatal(err)
		}
	}
	waits := func(t *testing.T, c *caughtUp, api client.Reader, j *v1alpha1.LockedCronJob, pods []corev1.Pod, now time.Time) bool {
		t.Helper()
		after, err := c.wait(ctx, api, j, pods, now, logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		return after > 0
	}

	t.Run("the old leader's status write", func(t *testing.T) {
		api := fakeAPI(t, job.DeepCopy())
		stale := job.DeepCopy() // as the new leader's cache has it
		get(t, api, stale)
		fresh := stale.DeepCopy() // the old leader's last write
		fresh.Status.LastScheduleTime = &metav1.Time{Time: t0}
		if err := api.Update(ctx, fresh); err != nil { // (the fake API server has no status subresource)
			t.Fatal(err)
		}
		var c caughtUp
		if !waits(t, &c, api, stale, nil, t0) {
			t.Fatal("a cache behind the old leader's status write: no wait")
		}
		if waits(t, &c, api, fresh, nil, t0) {
			t.Fatal("the cache caught up: still waits")
		}
		// Caught up once is enough: what this leader writes, decided covers.
		if waits(t, &c, api, stale, nil, t0) {
			t.Fatal("after catching up: waits again")
		}
	})

	t.Run("a job changed since the list, deleted since, made after it", func(t *testing.T) {
		api := fakeAPI(t, job.DeepCopy())
		var c caughtUp
		cached := job.DeepCopy()
		get(t, api, cached)
		c.listedAt = time.Time{}
		if err := c.list(ctx, api); err != nil {
			t.Fatal(err)
		}
		c.listedAt = t0
		cached.Spec.Schedule = "@hourly" // a user's edit after the list, which the cache has
		if err := api.Update(ctx, cached); err != nil {
			t.Fatal(err)
		}
		if waits(t, &c, api, cached, nil, t0) {
			t.Fatal("a job changed since the list, cached as it is now: waits")
		}
		gone := job.DeepCopy()
		gone.Name = "gone"
		if err := api.Create(ctx, gone); err != nil {
			t.Fatal(err)
		}
		c = caughtUp{}
		if waits(t, &c, api, gone, nil, t0) { // lists it
			t.Fatal("a current cache: waits")
		}
		c = caughtUp{}
		_ = waits(t, &c, api, cached, nil, t0) // lists both
		if err := api.Delete(ctx, gone.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		// Deleted since the list: cached as listed, the cache has caught up with what was
		// written before (the deletion comes through the watch as any later change does);
		// cached as it was before, it has not.
		staleGone := gone.DeepCopy()
		staleGone.ResourceVersion = "999"
		if !waits(t, &c, api, staleGone, nil, t0) {
			t.Fatal("a job deleted since the list, cached as it was before it: no wait")
		}
		if waits(t, &c, api, gone, nil, t0) {
			t.Fatal("a job deleted since the list, cached as listed: waits")
		}
		later := job.DeepCopy()
		later.Name = "later"
		if err := api.Create(ctx, later); err != nil {
			t.Fatal(err)
		}
		if waits(t, &c, api, later, nil, t0) {
			t.Fatal("a job made after the list: waits")
		}
	})

	t.Run("the old leader's pods", func(t *testing.T) {
		notOurs := jobPod("nightly-not-ours") // the job's label, not its controller
		notOurs.OwnerReferences = nil
		api := fakeAPI(t, job.DeepCopy(), jobPod("nightly-1"), jobPod("nightly-2"), jobPod("nightly-gone"), jobPod("nightly-unlabelled"), notOurs)
		cached := job.DeepCopy()
		get(t, api, cached)
		p1, p2, pg, pu := jobPod("nightly-1"), jobPod("nightly-2"), jobPod("nightly-gone"), jobPod("nightly-unlabelled")
		for _, p := range []*corev1.Pod{p1, p2, pg, pu} {
			get(t, api, p)
		}
		// The old leader's last writes: nightly-2 labelled counted (the pod cache has it as
		// it was), nightly-3 deleted (the pod cache still has it).
		stale2 := p2.DeepCopy()
		p2.Labels[runpod.LabelCounted] = "true"
		if err := api.Update(ctx, p2); err != nil {
			t.Fatal(err)
		}
		p3 := jobPod("nightly-3")
		p3.ResourceVersion = "999"
		var c caughtUp
		if !waits(t, &c, api, cached, []corev1.Pod{*p1, *pg, *pu}, t0) {
			t.Fatal("a pod cache without the old leader's pod nightly-2: no wait")
		}
		if !waits(t, &c, api, cached, []corev1.Pod{*p1, *stale2, *pg, *pu}, t0) {
			t.Fatal("a pod cache behind the old leader's label on nightly-2: no wait")
		}
		if !waits(t, &c, api, cached, []corev1.Pod{*p1, *p2, *p3, *pg, *pu}, t0) {
			t.Fatal("a pod cache that still has a pod the old leader deleted: no wait")
		}
		// Since the list: a pod deleted, one unlabelled (both out of the pod cache).
		if err := api.Delete(ctx, jobPod("nightly-gone")); err != nil {
			t.Fatal(err)
		}
		unlabelled := pu.DeepCopy()
		delete(unlabelled.Labels, runpod.LabelJob)
		if err := api.Update(ctx, unlabelled); err != nil {
			t.Fatal(err)
		}
		if waits(t, &c, api, cached, []corev1.Pod{*p1, *p2}, t0) {
			t.Fatal("every pod cached as the API server has it: waits")
		}
	})

	t.Run("at most trustAfter", func(t *testing.T) {
		api := fakeAPI(t, job.DeepCopy())
		stale := job.DeepCopy()
		get(t, api, stale)
		fresh := stale.DeepCopy()
		fresh.Status.LastScheduleTime = &metav1.Time{Time: t0}
		if err := api.Update(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		stale.ResourceVersion = "1"
		var c caughtUp
		if !waits(t, &c, api, stale, nil, t0) {
			t.Fatal("a stale cache: no wait")
		}
		if !waits(t, &c, api, stale, nil, t0.Add(trustAfter-time.Second)) {
			t.Fatal("before trustAfter: no wait")
		}
		var logged []string
		capture := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
		if after, err := c.wait(ctx, api, stale, nil, t0.Add(trustAfter), capture); err != nil || after > 0 {
			t.Fatalf("%s after the list: still waits (%v, %v)", trustAfter, after, err)
		}
		if len(logged) != 1 || !strings.Contains(logged[0], "did not catch up") || !strings.Contains(logged[0], `"behind"="job a/nightly"`) {
			t.Fatalf("logged %q, want what was behind at the last look", logged)
		}

		// A job whose first pass comes after trustAfter (a deep work queue) is still looked
		// at: a cache behind holds it, for trustAfter from that look.
		d := caughtUp{listedAt: t0, jobs: map[types.NamespacedName]string{keyOf(stale): "listed-before"}}
		logged = nil
		late := t0.Add(2 * trustAfter)
		if !waits(t, &d, api, stale, nil, late) {
			t.Fatal("a first pass after trustAfter, its cache behind: no wait")
		}
		if !waits(t, &d, api, stale, nil, late.Add(trustAfter-time.Second)) {
			t.Fatal("before trustAfter from its first look: no wait")
		}
		if after, err := d.wait(ctx, api, stale, nil, late.Add(trustAfter), capture); err != nil || after > 0 || len(logged) != 1 {
			t.Fatalf("trustAfter after its first look: wait %v, %v, logged %q; want on, said once", after, err, logged)
		}
	})

	t.Run("only the namespaces it acts in", func(t *testing.T) {
		other := job.DeepCopy()
		other.Namespace = "b"
		api := fakeAPI(t, job.DeepCopy(), other)
		c := caughtUp{namespaces: []string{"a"}}
		stale := job.DeepCopy()
		get(t, api, stale)
		stale.ResourceVersion = "1" // behind
		if !waits(t, &c, api, stale, nil, t0) {
			t.Fatal("namespace a: no wait")
		}
		if _, listed := c.jobs[keyOf(other)]; listed {
			t.Fatal("listed a namespace it does not act in")
		}
	})
}

// ownerIndexOf is the owner index for a fake client: the name of the job controlling o.
func ownerIndexOf(o client.Object) []string {
	if name, ok := ownerJob(o); ok {
		return []string{name}
	}
	return nil
}

func keyOf(o metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

// Reconcile holds a job's pass while its cache is behind the API server: a new leader
// whose job cache lacks the old leader's status write (an occurrence counted missed)
// neither creates a pod nor writes status, and looks again shortly.
func TestReconcileWaitsForTheCachesAfterElection(t *testing.T) {
	ctx := context.Background()
	api := fakeAPI(t, &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly", CreationTimestamp: metav1.Time{Time: t0.Add(-time.Hour)}},
		Spec: v1alpha1.LockedCronJobSpec{Schedule: "* * * * *"}})
	var stale v1alpha1.LockedCronJob
	if err := api.Get(ctx, types.NamespacedName{Namespace: "a", Name: "nightly"}, &stale); err != nil {
		t.Fatal(err)
	}
	fresh := stale.DeepCopy()
	fresh.Status.LastScheduleTime = &metav1.Time{Time: t0}
	if err := api.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	// The new leader's cache: the job before that write.
	cached := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&stale).
		WithIndex(&corev1.Pod{}, ownerIndex, ownerIndexOf).Build()
	r := &LockedCronJobReconciler{Client: cached, APIReader: api, Clock: clocktesting.NewFakeClock(t0.Add(30 * time.Second))}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "nightly"}})
	if err != nil || res.RequeueAfter != caughtUpRetry {
		t.Fatalf("Reconcile with a stale job cache: %+v, %v; want a requeue after %s", res, err, caughtUpRetry)
	}
	var pods corev1.PodList
	if err := api.List(ctx, &pods); err != nil || len(pods.Items) > 0 {
		t.Fatalf("pods created from a stale cache: %d, %v", len(pods.Items), err)
	}
	var now v1alpha1.LockedCronJob
	if err := api.Get(ctx, types.NamespacedName{Namespace: "a", Name: "nightly"}, &now); err != nil || now.ResourceVersion != fresh.ResourceVersion {
		t.Fatalf("the job was written from a stale cache: %v %s", err, now.ResourceVersion)
	}
}

// A job the cache does not have yet (its pod's event came before it; a new leader's caches)
// is not taken for deleted: its pods keep the tracking finalizer (released, one deleted
// before it is counted would go uncounted), and the pass comes again.
func TestReconcileAskTheServerBeforeReleasingPods(t *testing.T) {
	ctx := context.Background()
	isController := true
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly", UID: "u"},
		Spec: v1alpha1.LockedCronJobSpec{Schedule: "* * * * *"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly-1796497080", Labels: map[string]string{runpod.LabelJob: "nightly"},
		Finalizers:      []string{runpod.FinalizerTracking},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "nightly", UID: "u", Controller: &isController}}}}
	for _, tc := range []struct {
		name      string
		onServer  bool
		wantFinal bool
	}{{"the job exists", true, true}, {"the job is gone", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.onServer {
				objs = append(objs, job.DeepCopy())
			}
			api := fakeAPI(t, objs...)
			cached := fakeAPI(t, pod.DeepCopy()) // the pod, not the job
			h, _ := newTestHealth(t, "redis://127.0.0.1:1", time.Now)
			r := &LockedCronJobReconciler{Client: cached, APIReader: api, Clock: clocktesting.NewFakeClock(t0), health: h}
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: keyOf(job)})
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := cached.Get(ctx, keyOf(pod), &got); err != nil {
				t.Fatal(err)
			}
			if has := controllerutil.ContainsFinalizer(&got, runpod.FinalizerTracking); has != tc.wantFinal {
				t.Fatalf("tracking finalizer kept: %v, want %v", has, tc.wantFinal)
			}
			if tc.onServer && res.RequeueAfter == 0 {
				t.Fatalf("%+v: want the pass again soon", res)
			}
		})
	}
}

// pagingReader answers a List two items a page, as an API server does with a limit.
type pagingReader struct {
	client.Reader
	names []string
	calls int
}

func (r *pagingReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.calls++
	var o client.ListOptions
	o.ApplyOptions(opts)
	if o.Limit != listPageSize {
		return fmt.Errorf("limit %d, want %d", o.Limit, listPageSize)
	}
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	page := list.(*metav1.PartialObjectMetadataList)
	for _, n := range r.names[start:min(start+2, len(r.names))] {
		page.Items = append(page.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	if start+2 < len(r.names) {
		page.Continue = strconv.Itoa(start + 2)
	}
	return nil
}

// listPages reads every page, each once.
func TestListPages(t *testing.T) {
	r := &pagingReader{names: []string{"a", "b", "c", "d", "e"}}
	var got []string
	if err := listPages(context.Background(), r, corev1.SchemeGroupVersion.WithKind("PodList"), nil, func(p *metav1.PartialObjectMetadata) {
		got = append(got, p.Name)
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, r.names) || r.calls != 3 {
		t.Fatalf("listed %v in %d calls, want %v in 3", got, r.calls, r.names)
	}
}

// failingReader fails every List.
type failingReader struct {
	client.Reader
	lists int
}

func (r *failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.lists++
	return fmt.Errorf("the API server is down")
}

// While the lists fail, every job's pass waits (without an error: each would count in the
// work queue's shared rate limiter), and the lists are read again only after listRetry.
func TestCaughtUpListsAgainOnlyAfterAWhile(t *testing.T) {
	r := &failingReader{}
	var c caughtUp
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly"}}
	for i := range 100 {
		after, err := c.wait(context.Background(), r, job, nil, t0.Add(time.Duration(i)*time.Millisecond), logr.Discard())
		if err != nil || after < listRetry/2 {
			t.Fatalf("while the lists fail: wait %s, %v; want a wait of about %s and no error", after, err, listRetry)
		}
	}
	if r.lists != 1 {
		t.Fatalf("%d lists for 100 passes within %s, want 1", r.lists, listRetry)
	}
	if _, _ = c.wait(context.Background(), r, job, nil, t0.Add(listRetry), logr.Discard()); r.lists != 2 {
		t.Fatalf("%d lists %s after the failure, want 2", r.lists, listRetry)
	}
	// Lists that fail for as long as a job waits at most: the passes go on, and nothing is
	// listed again.
	if after, err := c.wait(context.Background(), r, job, nil, t0.Add(trustAfter), logr.Discard()); err != nil || after != 0 {
		t.Fatalf("lists failing for %s: wait %s, %v; want the passes to go on", trustAfter, after, err)
	}
	lists := r.lists
	if after, _ := c.wait(context.Background(), r, job, nil, t0.Add(trustAfter+listRetry), logr.Discard()); after != 0 || r.lists != lists {
		t.Fatalf("after giving up: wait %s, %d more lists", after, r.lists-lists)
	}
}
