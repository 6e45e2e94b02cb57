package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/defaults"
	"github.com/lockedcron/lockedcron/internal/invalidinput"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// eventSeries lists the series of a job's Events with the reason (nil: emitted once).
func eventSeries(j *v1alpha1.LockedCronJob, reason string) []*eventsv1.EventSeries {
	var list eventsv1.EventList
	ExpectWithOffset(1, k8sClient.List(ctx, &list, client.InNamespace(j.Namespace))).To(Succeed())
	var out []*eventsv1.EventSeries
	for _, e := range list.Items {
		if e.Regarding.Name == j.Name && e.Reason == reason {
			out = append(out, e.Series)
		}
	}
	return out
}

// backendReason is the LockBackendReady reason ("" before the first pass).
func backendReason(j *v1alpha1.LockedCronJob) string {
	if c := condition(j, ConditionLockBackendReady); c != nil {
		return c.Reason
	}
	return ""
}

var _ = Describe("Lock backend durability", func() {
	// The suite's Redis is redistest's default: no AOF, no snapshots (--save "").
	It("says NotDurable (still True, pods still created) with one Event, and RedisReachable for a Redis with an AOF", func() {
		startManager(clock.RealClock{})
		durable := redistest.Start(GinkgoTB(), redistest.WithPersistence())

		ns := newNamespace()
		at := time.Now().Add(4 * time.Second).Truncate(time.Second)
		job := newJob(ns, "volatile", dailyAt(at))
		createBefore(job, at)
		// Gone before the Redis servers stop: later specs' managers would otherwise spend
		// their first passes dialling a dead Redis.
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, job))).To(Succeed()) })

		Eventually(func() string { return backendReason(job) }).Should(Equal(ReasonNotDurable))
		c := condition(job, ConditionLockBackendReady)
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Message).To(ContainSubstring("appendonly no"))
		Expect(c.Message).NotTo(ContainSubstring(redisSrv.URL()), "no Secret contents")
		Eventually(func() []string { return eventNotes(job, ReasonNotDurable) }).Should(ConsistOf(c.Message))

		// Not durable never blocks the run.
		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))

		// More passes, still not durable: no new Event.
		for i := int32(4); i <= 5; i++ {
			j := updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.FailedRunsHistoryLimit = ptr.To(i) })
			Eventually(func() int64 { return getJob(job).Status.ObservedGeneration }).Should(Equal(j.Generation))
		}
		// (A repeated identical Event would show as a series on the one Event object.)
		Consistently(func() []*eventsv1.EventSeries { return eventSeries(job, ReasonNotDurable) }, 2*time.Second).Should(
			Equal([]*eventsv1.EventSeries{nil}), "one NotDurable Event, emitted once")

		// The Secret now names a Redis with an AOF (a new client, checked at once).
		var s corev1.Secret
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "redis"}, &s)).To(Succeed())
		s.Data = map[string][]byte{"url": []byte(durable.URL())}
		Expect(k8sClient.Update(ctx, &s)).To(Succeed())
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.FailedRunsHistoryLimit = ptr.To[int32](6) })
		Eventually(func() string { return backendReason(job) }).Should(Equal(ReasonRedisReachable))
		Expect(eventNotes(job, ReasonNotDurable)).To(HaveLen(1))

		// A job whose Secret names the durable Redis from the start never hears of it.
		ns2 := newNamespace()
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns2, Name: "redis"}, &s)).To(Succeed())
		s.Data = map[string][]byte{"url": []byte(durable.URL())}
		Expect(k8sClient.Update(ctx, &s)).To(Succeed())
		job2 := newJob(ns2, "durable", rarely)
		Expect(k8sClient.Create(ctx, job2)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, job2))).To(Succeed()) })
		Eventually(func() *metav1.Condition { return condition(job2, ConditionLockBackendReady) }).Should(
			Satisfy(func(c *metav1.Condition) bool {
				return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonRedisReachable
			}))
		Consistently(func() []string { return eventNotes(job2, ReasonNotDurable) }, time.Second).Should(BeEmpty())
	})
})

var _ = Describe("Shared invalid-input table at admission (internal/invalidinput)", func() {
	var entries []TableEntry
	for i, c := range invalidinput.Cases {
		entries = append(entries, Entry(c.Name, i, c))
	}
	DescribeTable("the CRD rejects each case with its message",
		func(i int, c invalidinput.Case) {
			job := newJob("default", fmt.Sprintf("invalid-%d", i), "@hourly")
			c.Spec(&job.Spec)
			err := k8sClient.Create(ctx, job)
			if err == nil {
				_ = k8sClient.Delete(ctx, job)
				Fail(fmt.Sprintf("case %q: accepted by the CRD", c.Name))
			}
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "case %q: want an Invalid error, got %v", c.Name, err)
			Expect(err.Error()).To(ContainSubstring(c.CRDMessage), "case %q", c.Name)
		},
		entries,
	)

	It("accepts a job with the default ttl and killGracePeriod, and fills them in", func() {
		job := newJob("default", "kill-defaults", "@hourly")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		got := getJob(job)
		Expect(got.Spec.Lock.TTL.Duration).To(Equal(30 * time.Second))
		Expect(got.Spec.Lock.KillGracePeriod).NotTo(BeNil())
		Expect(got.Spec.Lock.KillGracePeriod.Duration).To(Equal(10 * time.Second))
		Expect(k8sClient.Delete(ctx, got)).To(Succeed())
	})

	d := func(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }
	var killFit atomic.Int32
	// Admission must agree with lockwrap's parser (defaults.TTLFits), also at the boundary.
	DescribeTable("the kill-before-expiry rule: ttl >= renewInterval + killGracePeriod + max(100ms, 1% ttl)",
		func(ttl, renew, kill time.Duration, ok bool) {
			Expect(defaults.TTLFits(ttl, renew, kill)).To(Equal(ok), "the entry disagrees with defaults.TTLFits")
			job := newJob("default", fmt.Sprintf("kill-fit-%d", killFit.Add(1)), "@hourly")
			job.Spec.Lock.TTL, job.Spec.Lock.KillGracePeriod = d(ttl), d(kill)
			if renew > 0 {
				job.Spec.Lock.RenewInterval = d(renew)
			}
			err := k8sClient.Create(ctx, job)
			if err == nil {
				Expect(k8sClient.Delete(ctx, job)).To(Succeed())
			}
			if ok {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			Expect(err).To(HaveOccurred(), "accepted by the CRD")
			Expect(err.Error()).To(ContainSubstring("raise lock.ttl or lower lock.killGracePeriod"))
		},
		Entry("ttl 6s, kill 1s (renew 2s)", 6*time.Second, time.Duration(0), time.Second, true),
		Entry("ttl 6s, kill 2s (renew 2s)", 6*time.Second, time.Duration(0), 2*time.Second, true),
		Entry("ttl 3s, renew 1s, kill 1.9s: exactly fits", 3*time.Second, time.Second, 1900*time.Millisecond, true),
		Entry("ttl 3s, renew 1s, kill 1.95s", 3*time.Second, time.Second, 1950*time.Millisecond, false),
		Entry("ttl 4s, kill 1s (renew 1.333s)", 4*time.Second, time.Duration(0), time.Second, true),
		Entry("ttl 10s, kill 2s (renew 3.333s)", 10*time.Second, time.Duration(0), 2*time.Second, true),
		Entry("ttl 10s, kill 6.6s (renew 3.333s)", 10*time.Second, time.Duration(0), 6600*time.Millisecond, false),
		// renew ttl/3 = 3.333…s: CEL must not round it to 3333ms.
		Entry("ttl 10s, kill 6566ms (renew 3.333s)", 10*time.Second, time.Duration(0), 6566*time.Millisecond, true),
		Entry("ttl 10s, kill 6567ms (renew 3.333s)", 10*time.Second, time.Duration(0), 6567*time.Millisecond, false),
		// margin 1% of 10.05s = 100.5ms: CEL must not round it to 100ms.
		Entry("ttl 10.05s, renew 1s, kill 8949.5ms", 10050*time.Millisecond, time.Second, 8949500*time.Microsecond, true),
		Entry("ttl 10.05s, renew 1s, kill 8950ms", 10050*time.Millisecond, time.Second, 8950*time.Millisecond, false),
		Entry("ttl 30s, kill 0s", 30*time.Second, time.Duration(0), time.Duration(0), true),
		Entry("ttl 1h, kill 1h", time.Hour, time.Duration(0), time.Hour, false),
	)

	// Every LockedCronJob in config/samples is accepted as written.
	It("accepts the sample manifests", func() {
		files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		n := 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
			for {
				var u unstructured.Unstructured
				if err := dec.Decode(&u.Object); err != nil {
					break
				}
				if u.GetKind() != "LockedCronJob" {
					continue
				}
				n++
				u.SetNamespace("default")
				u.SetName("sample-" + u.GetName())
				Expect(k8sClient.Create(ctx, &u)).To(Succeed(), "%s: %s", f, u.GetName())
				Expect(k8sClient.Delete(ctx, &u)).To(Succeed())
			}
		}
		Expect(n).To(BeNumerically(">", 0), "no LockedCronJob in config/samples")
	})
})
