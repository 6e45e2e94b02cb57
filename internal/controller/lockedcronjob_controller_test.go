package controller

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

func reportJSON(r report.Report) string {
	b, err := report.Encode(r)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// metricValue reads a counter's value, or a histogram's sample count, from the
// manager's registry.
func metricValue(name string, labels map[string]string) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func condition(j *v1alpha1.LockedCronJob, typ string) *metav1.Condition {
	return meta.FindStatusCondition(getJob(j).Status.Conditions, typ)
}

var _ = Describe("LockedCronJob controller", func() {
	It("creates the occurrence's pod at the scheduled time, with lockwrap injected", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(10 * time.Second).Truncate(time.Second) // room for a fresh manager's first pass on a loaded machine
		job := newJob(ns, "nightly", dailyAt(at))
		createBefore(job, at)

		Eventually(func() *metav1.Time { return getJob(job).Status.NextScheduleTime }).Should(
			Satisfy(func(t *metav1.Time) bool { return t != nil && t.Time.Equal(at) }))
		Expect(podsOf(job)).To(BeEmpty(), "no pod before the scheduled time")

		var pod corev1.Pod
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: runpod.Name("nightly", at)}, &pod)
		}, 15*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(pod.CreationTimestamp.Time).NotTo(BeTemporally("<", at), "created before its time")
		Expect(pod.CreationTimestamp.Time).To(BeTemporally("<", at.Add(5*time.Second)), "created late")
		Expect(pod.Annotations).To(HaveKeyWithValue(runpod.AnnotationScheduledTime, at.UTC().Format(time.RFC3339)))
		Expect(pod.Spec.InitContainers[0].Command).To(Equal([]string{"/lockwrap", "cp", "/lockedcron/lockwrap", fmt.Sprintf("--protocol=%d", config.Protocol)}))
		Expect(pod.Spec.Containers[0].Command).To(Equal([]string{"/lockedcron/lockwrap", "--", "/bin/sh", "-c", "echo hi"}))
		Expect(metav1.IsControlledBy(&pod, getJob(job))).To(BeTrue())

		// Creating the pod is the pass's one API call: status follows once the pod runs
		// (here the test plays the kubelet), not for the creation alone (deferral.go).
		pod.Status.Phase = corev1.PodRunning
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", Image: "busybox", State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		Expect(k8sClient.Status().Update(ctx, &pod)).To(Succeed())
		// (A start is news once its job has run startNewsDelay: up to 11 s after it.)
		Eventually(func() int32 { return getJob(job).Status.ActiveCount }, 30*time.Second).Should(Equal(int32(1)))
		st := getJob(job).Status
		Expect(st.LastScheduleTime.Time).To(BeTemporally("==", at))
		Expect(st.NextScheduleTime.Time).To(BeTemporally("==", at.Add(24*time.Hour)))
		Expect(st.LockKey).To(Equal(ns + "/nightly"))
		Expect(condition(job, ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(condition(job, ConditionLockBackendReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(eventReasons(job)).NotTo(ContainElement(ReasonStarted), "no Event per routine pod creation")
	})

	It("never creates a second pod for an occurrence across a manager restart", func() {
		stop := startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(5 * time.Second).Truncate(time.Second)
		job := newJob(ns, "once", dailyAt(at))
		createBefore(job, at)
		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
		stop()

		// The status write is deferred until the pod runs, or lost in a crash: the new
		// manager plans the same occurrence again and must find the pod, not make another.
		j := getJob(job)
		j.Status.LastScheduleTime = nil
		Expect(k8sClient.Status().Update(ctx, j)).To(Succeed())
		startManager(clock.RealClock{})
		pod := podsOf(job)[0]
		pod.Status.Phase = corev1.PodRunning
		Expect(k8sClient.Status().Update(ctx, &pod)).To(Succeed())
		Eventually(func() *metav1.Time { return getJob(job).Status.LastScheduleTime }).ShouldNot(BeNil())
		Expect(getJob(job).Status.LastScheduleTime.Time).To(BeTemporally("==", at))
		Expect(getJob(job).Status.ActiveCount).To(Equal(int32(1)))
		Consistently(func() []corev1.Pod { return podsOf(job) }, time.Second).Should(HaveLen(1), "one pod")
	})

	// Issue 13: a new occurrence's pod is written with its own start, even while an
	// earlier pod of the job runs. Try to break that deferral: restart the manager while
	// the write is deferred.
	It("defers a new occurrence's pod while an earlier one runs; a restart meanwhile neither makes another pod nor counts it missed", func() {
		stop := startManager(clock.RealClock{})
		ns := newNamespace()
		first := time.Now().Add(5 * time.Second).Truncate(time.Second).UTC()
		if first.Second() > 44 { // both occurrences in one minute of a daily schedule
			first = first.Truncate(time.Minute).Add(time.Minute)
		}
		second := first.Add(15 * time.Second)
		job := newJob(ns, "overlap", fmt.Sprintf("%d,%d %d %d * * *", first.Second(), second.Second(), first.Minute(), first.Hour()))
		createBefore(job, first)
		run := func(at time.Time) {
			var pod corev1.Pod
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: runpod.Name("overlap", at)}, &pod)
			}, 20*time.Second).Should(Succeed())
			setRunning(&pod)
			Expect(k8sClient.Status().Update(ctx, &pod)).To(Succeed())
		}
		run(first)
		Eventually(func() int32 { return getJob(job).Status.ActiveCount }, 20*time.Second).Should(Equal(int32(1)))

		Eventually(func() []corev1.Pod { return podsOf(job) }, 20*time.Second).Should(HaveLen(2))
		Consistently(func() *metav1.Time { return getJob(job).Status.LastScheduleTime }, 2*time.Second).
			Should(Satisfy(func(t *metav1.Time) bool { return t != nil && t.Time.Equal(first) }), "the new pod's creation is not written while it has not started")
		stop()

		startManager(clock.RealClock{})
		Consistently(func() []corev1.Pod { return podsOf(job) }, 2*time.Second).Should(HaveLen(2), "one pod per occurrence across the restart")
		Expect(getJob(job).Status.Counters.Missed).To(BeZero())
		run(second)
		Eventually(func() int32 { return getJob(job).Status.ActiveCount }, 20*time.Second).Should(Equal(int32(2)))
		st := getJob(job).Status
		Expect(st.LastScheduleTime.Time).To(BeTemporally("==", second))
		Expect(st.Counters.Missed).To(BeZero())
		Expect(podsOf(job)).To(HaveLen(2))
	})

	It("folds each outcome into counters and lastHolder, exactly once across restarts", func() {
		stop := startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "fold", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
		holder := func(i int) string { return "test/" + ns + "/" + runpod.Name("fold", at(i)) }
		iso := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
		cases := []struct {
			phase corev1.PodPhase
			exit  int32
			rep   report.Report
		}{
			{corev1.PodSucceeded, 0, report.Report{Outcome: report.Succeeded, Holder: holder(0), FencingToken: 1, AcquiredAt: iso(at(0)), ReleasedAt: iso(at(0).Add(2 * time.Second))}},
			{corev1.PodFailed, 3, report.Report{Outcome: report.Failed, Holder: holder(1), FencingToken: 2, ExitCode: 3}},
			{corev1.PodSucceeded, 0, report.Report{Outcome: report.SkippedContention, Holder: holder(2), HeldBy: "eu-2/billing/fold-x"}},
			{corev1.PodSucceeded, 0, report.Report{Outcome: report.SuppressedDuplicate, Holder: holder(3)}},
			{corev1.PodFailed, 143, report.Report{Outcome: report.LockLost, Holder: holder(4), FencingToken: 5, LockLost: true}},
			{corev1.PodSucceeded, 0, report.Report{Outcome: report.Succeeded, Holder: holder(5), FencingToken: 7, AcquiredAt: iso(at(5)), ReleasedAt: iso(at(5).Add(time.Second))}},
		}
		for i, c := range cases {
			c.rep.Occurrence = at(i).Format(time.RFC3339)
			pod := createPodFor(job, at(i))
			finishPod(pod, c.phase, c.exit, reportJSON(c.rep))
		}
		want := v1alpha1.Counters{Runs: 4, Succeeded: 2, Failed: 2, SkippedContention: 1, DuplicatesSuppressed: 1, LockLost: 1}
		Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }).Should(Equal(want))
		st := getJob(job).Status
		Expect(st.LastHolder.Identity).To(Equal(holder(5)))
		Expect(st.LastHolder.FencingToken).To(Equal(int64(7)))
		Expect(st.LastSuccessfulTime.Time).To(BeTemporally("==", at(5)))
		Expect(st.Recent).To(HaveLen(6))
		Expect(st.Recent[0].Outcome).To(Equal("Succeeded"))
		Expect(st.Recent[3].Holder).To(Equal("eu-2/billing/fold-x"), "a skip records who held the lock")
		Eventually(func() []string { return eventReasons(job) }).Should(ContainElements("Succeeded", "Failed", "SkippedContention", "SuppressedDuplicate", "LockLost"))
		Eventually(func() []string { return unmarkedCounted(job) }).Should(BeEmpty(), "every counted pod is marked")
		Expect(metricValue("lockedcron_runs_total", map[string]string{"namespace": ns, "name": "fold", "outcome": "Succeeded"})).To(Equal(2.0))
		Expect(metricValue("lockedcron_lock_lost_total", map[string]string{"namespace": ns, "name": "fold"})).To(Equal(1.0))
		Expect(metricValue("lockedcron_lock_hold_seconds", map[string]string{"namespace": ns})).To(Equal(2.0), "two reports had acquire and release times (the histogram is per namespace)")

		stop()
		startManager(clock.RealClock{})
		// Touch the job so the new manager certainly reconciles it, then check nothing moved.
		j := updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.FailedRunsHistoryLimit = ptr.To[int32](5) })
		Eventually(func() int64 { return getJob(job).Status.ObservedGeneration }).Should(Equal(j.Generation))
		Consistently(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 2*time.Second).Should(Equal(want))
	})

	It("does not count again a pod counted just before a crash, before it was marked", func() {
		ns := newNamespace()
		job := newJob(ns, "crash", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		occ := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		pod := createPodFor(job, occ)
		finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 9}))

		// The state a crash leaves between the status write and the pod's label.
		j := getJob(job)
		j.Status.Counters = v1alpha1.Counters{Runs: 1, Succeeded: 1}
		j.Status.CountedPods = []string{pod.Name}
		Expect(k8sClient.Status().Update(ctx, j)).To(Succeed())

		startManager(clock.RealClock{})
		Eventually(func() map[string]string {
			var p corev1.Pod
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			return p.Labels
		}).Should(HaveKeyWithValue(runpod.LabelCounted, "true"))
		Eventually(func() []string { return unmarkedCounted(job) }).Should(BeEmpty())
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{Runs: 1, Succeeded: 1}))
	})

	It("writes a run's end once: the counted pod's name goes with the job's next status write", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "once", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		var list v1alpha1.LockedCronJobList
		w, err := wc.Watch(ctx, &list, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		// The backend's first probe is news of its own: let it be written first.
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(getJob(job).Status.Conditions, ConditionLockBackendReady)
		}).ShouldNot(BeNil())

		base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
		first := createPodFor(job, base)
		finishPod(first, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 1}))
		Eventually(func() map[string]string {
			p, err := getPod(ns, first.Name)
			Expect(err).NotTo(HaveOccurred())
			return p.Labels
		}).Should(HaveKeyWithValue(runpod.LabelCounted, "true"))
		second := createPodFor(job, base.Add(time.Minute))
		finishPod(second, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 2}))

		// Every status the job had, in order, until the second run is counted.
		var seen []v1alpha1.LockedCronJobStatus
		Eventually(func() int64 {
		drain:
			for {
				select {
				case ev := <-w.ResultChan():
					if j, ok := ev.Object.(*v1alpha1.LockedCronJob); ok {
						seen = append(seen, j.Status)
					}
				default:
					break drain
				}
			}
			if len(seen) == 0 {
				return 0
			}
			return seen[len(seen)-1].Counters.Runs
		}).Should(Equal(int64(2)))
		for i := 1; i < len(seen); i++ {
			prev, st := seen[i-1], seen[i].DeepCopy()
			st.CountedPods = prev.CountedPods
			Expect(equality.Semantic.DeepEqual(&prev, st)).To(BeFalse(),
				"a status write changed only countedPods (%v to %v): a write of its own for a pod already marked", prev.CountedPods, seen[i].CountedPods)
		}
		Expect(seen[len(seen)-1].CountedPods).To(Equal([]string{second.Name}), "the first pod's name went with the second run's write")
		Eventually(func() []string { return unmarkedCounted(job) }).Should(BeEmpty())
	})

	It("drops a counted pod's name at once when its pod is gone", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "nohistory", rarely)
		job.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](0)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		pod := createPodFor(job, time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
		finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 1}))
		Eventually(gone(ns, pod.Name)).Should(BeTrue(), "pruned: no history kept")
		Eventually(func() []string { return getJob(job).Status.CountedPods }).Should(BeEmpty(), "no name stays without its pod")
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{Runs: 1, Succeeded: 1}))
	})

	It("keeps counters exact when two managers race over the same pods", func() {
		startManager(clock.RealClock{})
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "race", rarely)
		job.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](20)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for i := range 12 {
			pod := createPodFor(job, base.Add(time.Duration(i)*time.Minute))
			finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: int64(i + 1)}))
		}
		Eventually(func() []string { return unmarkedCounted(job) }).Should(BeEmpty())
		Eventually(func() int64 { return getJob(job).Status.Counters.Succeeded }).Should(Equal(int64(12)))
		Consistently(func() int64 { return getJob(job).Status.Counters.Runs }, 2*time.Second).Should(Equal(int64(12)))
	})

	It("keeps only the history limits of finished pods, newest first", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "hist", rarely)
		job.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](2)
		job.Spec.FailedRunsHistoryLimit = ptr.To[int32](1)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
		var names []string
		for i := range 6 {
			pod := createPodFor(job, base.Add(time.Duration(i)*time.Minute))
			names = append(names, pod.Name)
			if i%2 == 0 {
				finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h"}))
			} else {
				finishPod(pod, corev1.PodFailed, 1, reportJSON(report.Report{Outcome: report.Failed, Holder: "h", ExitCode: 1}))
			}
		}
		// Pods 0,2,4 succeeded (keep 2,4); 1,3,5 failed (keep 5). Deleted pods linger while
		// terminating only with a kubelet; envtest removes them at once.
		Eventually(func() []string {
			var out []string
			for _, p := range podsOf(job) {
				if p.DeletionTimestamp == nil {
					out = append(out, p.Name)
				}
			}
			return out
		}).Should(ConsistOf(names[2], names[4], names[5]))
		Expect(getJob(job).Status.Counters.Runs).To(Equal(int64(6)))
	})

	It("stops new pods while suspended and runs nothing retroactively on resume", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		runPods(ns) // a kubelet: each pod starts, so the next occurrence gets its own
		job := newJob(ns, "susp", "* * * * * *")
		job.Spec.Suspend = ptr.To(true)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(job, ConditionReady) }).Should(
			Satisfy(func(c *metav1.Condition) bool { return c != nil && c.Reason == ReasonSuspended }))
		Consistently(func() []corev1.Pod { return podsOf(job) }, 2500*time.Millisecond).Should(BeEmpty())

		resumed := time.Now() // before the update: the API server stamps the change at or after it
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(false) })
		Eventually(func() []corev1.Pod { return podsOf(job) }, 5*time.Second).ShouldNot(BeEmpty())
		for _, p := range podsOf(job) {
			occ, err := time.Parse(time.RFC3339, p.Annotations[runpod.AnnotationScheduledTime])
			Expect(err).NotTo(HaveOccurred())
			Expect(occ).To(BeTemporally(">", resumed.Add(-time.Second)), "pod %s is for an occurrence from the suspension", p.Name)
		}
		Expect(getJob(job).Status.Counters.Missed).To(BeZero())
	})

	It("does not start a retroactive run when the schedule is edited", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "edit", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return getJob(job).Status.ObservedSchedule }).ShouldNot(BeEmpty())
		// An occurrence of the new schedule falls between creation and the edit.
		past := getJob(job).CreationTimestamp.Add(time.Second)
		Eventually(time.Now, 5*time.Second).Should(BeTemporally(">", past.Add(500*time.Millisecond)))
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Schedule = dailyAt(past) })
		Eventually(func() *metav1.Time { return getJob(job).Status.NextScheduleTime }).Should(
			Satisfy(func(t *metav1.Time) bool { return t != nil && t.Time.Equal(past.Add(24*time.Hour)) }))
		Consistently(func() []corev1.Pod { return podsOf(job) }, 2*time.Second).Should(BeEmpty())
		Expect(getJob(job).Status.Counters.Missed).To(BeZero())
	})

	It("after downtime starts only the most recent occurrence and counts the rest as missed", func() {
		ns := newNamespace()
		job := newJob(ns, "down", "* * * * *")
		job.Spec.StartingDeadlineSeconds = ptr.To[int64](120)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		created := getJob(job).CreationTimestamp.Time
		// The manager comes back an hour after the job was created (a fake clock).
		now := created.Add(time.Hour)
		startManager(clocktesting.NewFakePassiveClock(now))
		latest := now.Truncate(time.Minute)
		// (10 s: this manager, an hour ahead, first works through the jobs earlier specs left.)
		Eventually(func() []corev1.Pod { return podsOf(job) }, 10*time.Second).Should(HaveLen(1))
		Expect(podsOf(job)[0].Name).To(Equal(runpod.Name("down", latest)))
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }).Should(Equal(int64(59)))
		Eventually(func() []string { return eventReasons(job) }).Should(ContainElement(ReasonMissed))
	})

	It("reports a missing Redis Secret as LockBackendReady=False with an Event, and creates no pod", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "nosecret", "* * * * * *")
		job.Spec.Lock.Redis.SecretRef.Name = "missing"
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(job, ConditionLockBackendReady) }).Should(
			Satisfy(func(c *metav1.Condition) bool {
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonSecretNotFound && strings.Contains(c.Message, "missing")
			}))
		Eventually(func() []string { return eventReasons(job) }).Should(ContainElement(ReasonLockBackend))
		Consistently(func() []corev1.Pod { return podsOf(job) }, 2*time.Second).Should(BeEmpty())

		// A Secret without the url key is named as such.
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"}, StringData: map[string]string{"URL": "x"}})).To(Succeed())
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](4) })
		Eventually(func() string { return condition(job, ConditionLockBackendReady).Reason }).Should(Equal(ReasonSecretInvalid))
		Expect(condition(job, ConditionLockBackendReady).Message).To(ContainSubstring(`no key "url"`))
	})

	It("counts a malformed termination message as Error with an Event and keeps going", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "bad", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		finishPod(createPodFor(job, base), corev1.PodFailed, 2, "panic: not json {")
		Eventually(func() int64 { return getJob(job).Status.Counters.Failed }).Should(Equal(int64(1)))
		Expect(getJob(job).Status.Recent[0].Outcome).To(Equal("Error"))
		Eventually(func() []string { return eventReasons(job) }).Should(ContainElement(ReasonReportInvalid))

		finishPod(createPodFor(job, base.Add(time.Minute)), corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h"}))
		Eventually(func() int64 { return getJob(job).Status.Counters.Succeeded }).Should(Equal(int64(1)))
		Expect(getJob(job).Status.Counters.Runs).To(Equal(int64(1)), "the Error pod never ran the job")
	})

	It("shows a report's controls escaped in status and Events, never as a terminal would act on them", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "esc", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		// A job can write its own termination message, and kubectl escapes only ESC and
		// CR of what get and describe show: OSC 52 sets the reader's clipboard, CSI 2J
		// (C1 or ESC) clears the screen, CR and BS overwrite what is shown.
		occ := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		finishPod(createPodFor(job, occ), corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded,
			Occurrence: occ.Format(time.RFC3339), Holder: "h\x1b[2J", Message: "\x1b]52;c;ZXZpbA==\x07done\r\b\u009b2J\nline two",
			Warnings: []string{"w\x7f"}}))
		Eventually(func() []string { return eventNotes(job, string(report.Succeeded)) }).Should(HaveLen(1))
		st := getJob(job).Status
		Expect(st.Recent).To(HaveLen(1))
		Expect(st.Recent[0].Message).To(Equal(`\u001b]52;c;ZXZpbA==\u0007done\u000d\u0008\u009b2J` + "\nline two; warning: w" + `\u007f`))
		Expect(st.Recent[0].Holder).To(Equal(`h\u001b[2J`))
		Expect(st.LastHolder.Identity).To(Equal(`h\u001b[2J`))
		note := eventNotes(job, string(report.Succeeded))[0]
		Expect(note).To(ContainSubstring(`\u001b]52`))
		Expect(strings.ContainsFunc(note, printable.IsControl)).To(BeFalse(), "event note %q", note)
	})
	It("reports an unparsable schedule as Ready=False naming the field", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "badcron", "61 * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(job, ConditionReady) }).Should(
			Satisfy(func(c *metav1.Condition) bool {
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonInvalidSchedule && strings.Contains(c.Message, "spec.schedule")
			}))
		Eventually(func() []string { return eventReasons(job) }).Should(ContainElement(ReasonInvalidSchedule))

		job2 := newJob(ns, "badzone", "@hourly")
		job2.Spec.TimeZone = "Mars/Olympus"
		Expect(k8sClient.Create(ctx, job2)).To(Succeed())
		Eventually(func() string {
			c := condition(job2, ConditionReady)
			if c == nil {
				return ""
			}
			return c.Message
		}).Should(ContainSubstring("Mars/Olympus"))
	})
})

var _ = Describe("LockedCronJob admission (CEL rules)", func() {
	type mutate func(*v1alpha1.LockedCronJob)
	DescribeTable("rejects bad input with a readable message",
		func(m mutate, msg string) {
			job := newJob("default", "cel", "@hourly")
			m(job)
			err := k8sClient.Create(ctx, job)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(msg))
		},
		Entry("ttl 0", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Lock.TTL = &metav1.Duration{} }), "lock.ttl must be greater than 0"),
		Entry("renewInterval over ttl/2", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Lock.TTL = &metav1.Duration{Duration: 30 * time.Second}
			j.Spec.Lock.RenewInterval = &metav1.Duration{Duration: 20 * time.Second}
		}), "at most half of lock.ttl"),
		Entry("Retry without retry", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Contention.Policy = v1alpha1.ContentionRetry }), "contention.retry (with attempts) is required"),
		Entry("retry attempts 0", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Contention = v1alpha1.ContentionSpec{Policy: v1alpha1.ContentionRetry, Retry: &v1alpha1.RetrySpec{Attempts: 0}}
		}), "attempts"),
		Entry("window with schedule but no duration", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Schedule: "0 2 * * 6"}}}
		}), "either recurring (schedule and duration) or one-off (start and end)"),
		Entry("window end before start", mutate(func(j *v1alpha1.LockedCronJob) {
			s := metav1.NewTime(time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC))
			e := metav1.NewTime(s.Add(-time.Hour))
			j.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Start: &s, End: &e}}}
		}), "blackout window end must be after start"),
		Entry("restartPolicy Always", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }), "restartPolicy must be Never or OnFailure"),
		Entry("no command", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Template.Spec.Containers[0].Command = nil }), "containers[0].command is required"),
		Entry("wrapContainer without command", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.WrapContainer = "side"
			j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers, corev1.Container{Name: "side", Image: "x"})
		}), "wrapContainer must name a container"),
		Entry("bad ttl syntax", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Lock.TTL = &metav1.Duration{Duration: -time.Second} }), "spec.lock.ttl"),
		Entry("unknown contention policy", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Contention.Policy = "Wait" }), `Unsupported value: "Wait"`),
		Entry("rollout ref with neither name nor selector", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment}}}
		}), "exactly one of name or selector"),
		Entry("long name", mutate(func(j *v1alpha1.LockedCronJob) { j.Name = strings.Repeat("n", 53) }), "at most 52 characters"),
		Entry("killGracePeriod a nanosecond over the kill-before-expiry limit", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Lock.TTL = &metav1.Duration{Duration: 30 * time.Second}
			j.Spec.Lock.KillGracePeriod = &metav1.Duration{Duration: 19*time.Second + 700*time.Millisecond + 1}
		}), "lock.ttl must be at least lock.renewInterval + lock.killGracePeriod + a margin"),
		Entry("a key ending in a no-break space", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Lock.Key = "nightly\u00a0" }),
			"lock.key must not begin or end with whitespace"),
		Entry("a key of 171 three-byte characters (513 bytes)", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Lock.Key = strings.Repeat("中", 171) }),
			"lock.key must be at most 512 bytes"),
		Entry("no containers", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.Template.Spec.Containers = []corev1.Container{} }), "template.spec.containers must have at least one container"),
		Entry("wrapContainer names no container", mutate(func(j *v1alpha1.LockedCronJob) { j.Spec.WrapContainer = "nope" }), "wrapContainer must name a container"),
		Entry("a reserved template label", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Labels = map[string]string{"scheduling.lockedcron.io/job": "other"}
		}), "spec.template.metadata.labels: Invalid value"),
		Entry("a reserved template annotation", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Annotations = map[string]string{"scheduling.lockedcron.io/scheduled-time": "x"}
		}), "spec.template.metadata.annotations: Invalid value"),
		Entry("dedupe.retention under twice lock.ttl", mutate(func(j *v1alpha1.LockedCronJob) {
			j.Spec.Lock.TTL = &metav1.Duration{Duration: 2 * time.Minute}
			j.Spec.Dedupe.Retention = &metav1.Duration{Duration: 3 * time.Minute}
		}), "dedupe.retention must be at least twice lock.ttl"),
	)

	It("accepts a job whose wrapContainer has the command, and template labels and annotations of the user's", func() {
		j := newJob("default", "cel-ok", "@hourly")
		j.Spec.Template.Labels = map[string]string{"app": "report"}
		j.Spec.Template.Annotations = map[string]string{"example.com/owner": "team-a"}
		j.Spec.Template.Spec.Containers[0].Command = nil
		j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers, corev1.Container{Name: "side", Image: "x", Command: []string{"/side"}})
		j.Spec.WrapContainer = "side"
		j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		Expect(k8sClient.Create(ctx, j)).To(Succeed())
		Expect(k8sClient.Delete(ctx, j)).To(Succeed())
	})

	It("accepts a job as the README shows it and fills the defaults", func() {
		job := newJob("default", "defaults", "*/10 * * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		got := getJob(job)
		Expect(got.Spec.TimeZone).To(Equal("UTC"))
		Expect(got.Spec.Lock.TTL.Duration).To(Equal(30 * time.Second))
		Expect(got.Spec.Lock.OnLost).To(Equal(v1alpha1.OnLostTerminate))
		Expect(got.Spec.Contention.Policy).To(Equal(v1alpha1.ContentionSkip))
		Expect(got.Spec.Dedupe.Retention.Duration).To(Equal(168 * time.Hour))
		Expect(*got.Spec.SuccessfulRunsHistoryLimit).To(Equal(int32(3)))
		Expect(*got.Spec.FailedRunsHistoryLimit).To(Equal(int32(1)))
		Expect(k8sClient.Delete(ctx, got)).To(Succeed())
	})
})
