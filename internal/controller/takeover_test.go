package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// A new leader's caches may be behind what the old leader wrote last (controller-runtime
// starts a standby's caches before its election). Its passes wait until they show it: a
// job's status write (an occurrence counted missed, which a stale pass would give a pod),
// a pod the old leader created (which a stale pass would count missed while it runs).
func TestCaughtUpAfterElection(t *testing.T) {
	ctx := context.Background()
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly"},
		Spec: v1alpha1.LockedCronJobSpec{Schedule: "* * * * *"}}
	isController := true
	jobPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, Labels: map[string]string{runpod.LabelJob: "nightly"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "nightly", UID: "u", Controller: &isController}}}}
	}
	t.Run("the old leader's status write", func(t *testing.T) {
		api := fakeAPI(t, job.DeepCopy())
		var stale v1alpha1.LockedCronJob // as the new leader's cache has it
		if err := api.Get(ctx, keyOf(job), &stale); err != nil {
			t.Fatal(err)
		}
		fresh := stale.DeepCopy() // the old leader's last write
		fresh.Status.LastScheduleTime = &metav1.Time{Time: t0}
		if err := api.Update(ctx, fresh); err != nil { // (the fake API server has no status subresource)
			t.Fatal(err)
		}
		var c caughtUp
		if wait, err := c.wait(ctx, api, &stale, nil); err != nil || !wait {
			t.Fatalf("a cache behind the old leader's status write: wait %v, %v; want to wait", wait, err)
		}
		if wait, err := c.wait(ctx, api, fresh, nil); err != nil || wait {
			t.Fatalf("the cache caught up: wait %v, %v", wait, err)
		}
		// Caught up once is enough: what this leader writes, decided covers.
		if wait, err := c.wait(ctx, api, &stale, nil); err != nil || wait {
			t.Fatalf("after catching up: wait %v, %v", wait, err)
		}
	})

	t.Run("the old leader's pod", func(t *testing.T) {
		// A pod with the job's label that the job does not control is not its pod.
		notOurs := jobPod("nightly-not-ours")
		notOurs.OwnerReferences = nil
		api := fakeAPI(t, job.DeepCopy(), jobPod("nightly-1"), jobPod("nightly-2"), jobPod("nightly-gone"), notOurs)
		var cached v1alpha1.LockedCronJob
		if err := api.Get(ctx, keyOf(job), &cached); err != nil {
			t.Fatal(err)
		}
		var c caughtUp
		have := []corev1.Pod{*jobPod("nightly-1")}
		if wait, err := c.wait(ctx, api, &cached, have); err != nil || !wait {
			t.Fatalf("a pod cache without the old leader's pod nightly-2: wait %v, %v; want to wait", wait, err)
		}
		if err := api.Delete(ctx, jobPod("nightly-gone")); err != nil {
			t.Fatal(err)
		}
		have = append(have, *jobPod("nightly-2"))
		if wait, err := c.wait(ctx, api, &cached, have); err != nil || wait {
			t.Fatalf("every listed pod cached or gone: wait %v, %v", wait, err)
		}
	})

	t.Run("a job changed since the list, and one made after it", func(t *testing.T) {
		api := fakeAPI(t, job.DeepCopy())
		var c caughtUp
		var cached v1alpha1.LockedCronJob
		if err := api.Get(ctx, keyOf(job), &cached); err != nil {
			t.Fatal(err)
		}
		if wait, err := c.wait(ctx, api, &cached, nil); err != nil || wait { // lists
			t.Fatalf("a current cache: wait %v, %v", wait, err)
		}
		later := job.DeepCopy()
		later.Name = "later"
		if err := api.Create(ctx, later); err != nil {
			t.Fatal(err)
		}
		if wait, err := c.wait(ctx, api, later, nil); err != nil || wait {
			t.Fatalf("a job made after the list: wait %v, %v", wait, err)
		}
	})

	t.Run("only the namespaces it acts in", func(t *testing.T) {
		other := job.DeepCopy()
		other.Namespace = "b"
		api := fakeAPI(t, job.DeepCopy(), other)
		c := caughtUp{namespaces: []string{"a"}}
		var stale v1alpha1.LockedCronJob
		if err := api.Get(ctx, keyOf(job), &stale); err != nil {
			t.Fatal(err)
		}
		stale.ResourceVersion = "1" // behind
		if wait, err := c.wait(ctx, api, &stale, nil); err != nil || !wait {
			t.Fatalf("namespace a: wait %v, %v; want to wait", wait, err)
		}
		if _, listed := c.jobs[keyOf(other)]; listed {
			t.Fatal("listed a namespace it does not act in")
		}
	})
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
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cached := fake.NewClientBuilder().WithScheme(s).WithObjects(&stale).
		WithIndex(&corev1.Pod{}, ownerIndex, func(o client.Object) []string {
			if name, ok := ownerJob(o); ok {
				return []string{name}
			}
			return nil
		}).Build()
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

// While the lists fail, the passes of every job fail at once for a while instead of each
// listing again.
func TestCaughtUpListsAgainOnlyAfterAWhile(t *testing.T) {
	r := &failingReader{}
	var c caughtUp
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly"}}
	for range 100 {
		if _, err := c.wait(context.Background(), r, job, nil); err == nil {
			t.Fatal("no error while the lists fail")
		}
	}
	if r.lists != 1 {
		t.Fatalf("%d lists for 100 passes within %s, want 1", r.lists, listRetry)
	}
}
