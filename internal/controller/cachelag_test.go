package controller

import (
	"context"
	"io"
	"net/url"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// laggingCache is the manager's client whose cache never shows the pods the manager
// created: a pod informer behind the API server (a slow watch, a relist after
// kube-apiserver restarted), at its worst.
type laggingCache struct {
	client.Client
	hidden *sync.Map
}

func (c laggingCache) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	if pod, ok := obj.(*corev1.Pod); ok && err == nil {
		c.hidden.Store(pod.Name, true)
	}
	return err
}

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if pods, ok := list.(*corev1.PodList); ok {
		kept := pods.Items[:0]
		for _, p := range pods.Items {
			if _, h := c.hidden.Load(p.Name); !h {
				kept = append(kept, p)
			}
		}
		pods.Items = kept
	}
	return nil
}

// The status write of a pod creation is deferred (deferral.go), so lastScheduleTime
// lives in the pods until the next news; a pass must not plan from an older one because
// its cache has not shown the pod yet (found by the soak: occurrences counted missed
// while their pods ran them).
var _ = Describe("a pod cache behind the API server", func() {
	It("never counts an occurrence missed whose pod the manager created", func() {
		var hidden sync.Map
		startManagerWrapped(clock.RealClock{}, CacheOptions(), func(c client.Client) client.Client {
			return laggingCache{Client: c, hidden: &hidden}
		})
		expectThreePodsNoneMissed("lagging", "an occurrence with a pod is not missed")
	})
})

// expectThreePodsNoneMissed creates a job every two seconds and expects three
// occurrences, each with its pod (read from the API server, not the cache), and none
// counted missed.
func expectThreePodsNoneMissed(name, why string) {
	GinkgoHelper()
	job := newJob(newNamespace(), name, "*/2 * * * * *")
	Expect(k8sClient.Create(ctx, job)).To(Succeed())
	Eventually(func() []corev1.Pod { return podsOf(job) }, 20*time.Second, 100*time.Millisecond).Should(HaveLen(3))
	Consistently(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 3*time.Second, 200*time.Millisecond).
		Should(Equal(v1alpha1.Counters{}), why)
}

// lostAnswer is a laggingCache whose first pod POST creates the pod but loses the answer
// (the connection reset while kube-apiserver restarted): the manager cannot tell whether
// the pod exists, and its cache does not show it.
type lostAnswer struct {
	laggingCache
	lost *sync.Once
}

func (c lostAnswer) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.laggingCache.Create(ctx, obj, opts...)
	if _, ok := obj.(*corev1.Pod); ok && err == nil {
		c.lost.Do(func() {
			err = &url.Error{Op: "Post", URL: "https://kube-apiserver/api/v1/namespaces/x/pods", Err: io.ErrUnexpectedEOF}
		})
	}
	return err
}

var _ = Describe("a pod POST whose answer was lost", func() {
	It("finds out whether the pod exists before it plans past its occurrence", func() {
		var hidden sync.Map
		startManagerWrapped(clock.RealClock{}, CacheOptions(), func(c client.Client) client.Client {
			return lostAnswer{laggingCache: laggingCache{Client: c, hidden: &hidden}, lost: &sync.Once{}}
		})
		// The first occurrence's pod exists though its POST failed; two more follow.
		expectThreePodsNoneMissed("lost-answer", "the occurrence whose pod exists is not missed")
	})
})

// staleJobs is the manager's client whose job cache lags behind the manager's own status
// writes: for lag after each write, reads return the job as it was before it (a watch
// event still on its way).
type staleJobs struct {
	client.Client
	lag    time.Duration
	mu     *sync.Mutex
	before map[types.NamespacedName]staleJob
}

type staleJob struct {
	job   *v1alpha1.LockedCronJob
	until time.Time
}

func (c staleJobs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if job, ok := obj.(*v1alpha1.LockedCronJob); ok {
		c.mu.Lock()
		s, found := c.before[key]
		c.mu.Unlock()
		if found && time.Now().Before(s.until) {
			s.job.DeepCopyInto(job)
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c staleJobs) Status() client.SubResourceWriter { return staleStatus{c.Client.Status(), c} }

type staleStatus struct {
	client.SubResourceWriter
	c staleJobs
}

func (s staleStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	job, ok := obj.(*v1alpha1.LockedCronJob)
	var old v1alpha1.LockedCronJob
	if ok {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(job), &old); err != nil {
			return err
		}
	}
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	if ok && err == nil {
		s.c.mu.Lock()
		s.c.before[client.ObjectKeyFromObject(job)] = staleJob{job: &old, until: time.Now().Add(s.c.lag)}
		s.c.mu.Unlock()
	}
	return err
}

// A pass whose job cache has not caught up with the previous pass's status write plans
// from an older status. Its own status write then fails (resourceVersion), but a pod it
// creates first stays: the soak found an occurrence counted missed (its earlier pod had
// not started) and then run by a pod that the next, stale pass created for it.
var _ = Describe("a job cache behind the manager's own status writes", func() {
	It("never starts an occurrence it has already counted missed", func() {
		startManagerWrapped(clock.RealClock{}, CacheOptions(), func(c client.Client) client.Client {
			return staleJobs{Client: c, lag: 3 * time.Second, mu: &sync.Mutex{}, before: map[types.NamespacedName]staleJob{}}
		})
		ns := newNamespace()
		job := newJob(ns, "stale", "*/4 * * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		// The first pod does not start: the next occurrence is missed (backlog bound).
		Eventually(func() []corev1.Pod { return podsOf(job) }, 20*time.Second, 50*time.Millisecond).Should(HaveLen(1))
		first := podsOf(job)[0]
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }, 10*time.Second, 20*time.Millisecond).Should(Equal(int64(1)))
		missed := getJob(job).Status.Recent[0].Occurrence.Time
		// Now it starts: the pod event wakes a pass that still reads the job from before
		// the miss was written.
		setRunning(&first)
		Expect(k8sClient.Status().Update(ctx, &first)).To(Succeed())
		Consistently(func() []string {
			var names []string
			for _, p := range podsOf(job) {
				names = append(names, p.Name)
			}
			return names
		}, 2500*time.Millisecond, 100*time.Millisecond).ShouldNot(ContainElement(runpod.Name(job.Name, missed)), "occurrence %s was counted missed", missed)
	})
})

// A deferred occurrence that ran, was counted and pruned (no history kept), under a job
// cache behind the manager's own status writes: the passes after the prune find no pod
// for it and read the job from before the count. They must not start it again. Two things
// hold it today: the write that started it cleared status.deferred, so it was not deferred
// and moved lastScheduleTime to it; and the watermark of each landed write (decided). With
// the watermark removed this spec still passes (the first suffices; "never starts an
// occurrence it has already counted missed" is the one that needs the watermark).
var _ = Describe("a job cache behind the manager's own status writes, with Defer", func() {
	It("never starts again a deferred occurrence it has run and pruned", func() {
		startManagerWrapped(clock.RealClock{}, CacheOptions(), func(c client.Client) client.Client {
			return staleJobs{Client: c, lag: 3 * time.Second, mu: &sync.Mutex{}, before: map[types.NamespacedName]staleJob{}}
		})
		ns := newNamespace()
		occ := time.Now().Add(5 * time.Second).Truncate(time.Second)
		start, end := metav1.NewTime(time.Now().Add(-time.Second)), metav1.NewTime(occ.Add(2*time.Second))
		job := newJob(ns, "stale-deferred", dailyAt(occ))
		job.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](0)
		job.Spec.StartingDeadlineSeconds = ptr.To[int64](60)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Windows: []v1alpha1.BlackoutWindow{{Name: "freeze", Start: &start, End: &end}}}
		createBefore(job, occ)

		// The window ends: the deferred occurrence starts, and its job runs and ends.
		name := runpod.Name(job.Name, occ)
		Eventually(func() error { _, err := getPod(ns, name); return err }, 15*time.Second, 50*time.Millisecond).Should(Succeed())
		p, err := getPod(ns, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(p.CreationTimestamp.Time).NotTo(BeTemporally("<", end.Time), "started before the window ended")
		first := p.UID
		finishPod(p, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Occurrence: occ.UTC().Format(time.RFC3339),
			Holder: "h", FencingToken: 1, StartedAt: time.Now().UTC().Format(time.RFC3339Nano)}))

		once := v1alpha1.Counters{Runs: 1, Succeeded: 1}
		Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 10*time.Second, 50*time.Millisecond).Should(Equal(once))
		Eventually(gone(ns, name), 10*time.Second, 50*time.Millisecond).Should(BeTrue(), "pruned: no history kept")
		// The passes after the prune read the job from before the count for 3 s.
		Consistently(func(g Gomega) {
			g.Expect(podsOf(job)).To(Or(BeEmpty(), HaveEach(HaveField("UID", first))), "occurrence %s started again", occ.UTC().Format(time.RFC3339))
			g.Expect(getJob(job).Status.Counters).To(Equal(once))
		}, 5*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(getJob(job).Status.Deferred).To(BeNil())
	})
})
