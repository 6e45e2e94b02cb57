package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// Issue 13 ("Events aggregated"): a healthy job's every run ends Succeeded (or
// SkippedContention on the other replicas and clusters); one Event POST per run would
// cost the API server as much as the pod. Those routine Events form one series per
// job: the first run's Event is created, the second patches its series, later ones
// only count in the recorder until its periodic refresh.
var _ = Describe("Events", func() {
	It("aggregates a job's routine Succeeded Events into one series instead of one Event per run", func() {
		job := endedRuns("routine", 3, corev1.PodSucceeded, report.Succeeded)
		series := func() []*eventsv1.EventSeries { return eventSeries(job, string(report.Succeeded)) }
		// One Event; its series says it happened again (the third run is in the
		// recorder's count until the refresh).
		Eventually(series).Should(ConsistOf(HaveField("Count", BeNumerically(">=", 2))))
		Consistently(series, 2*time.Second).Should(HaveLen(1))
	})

	// A condition that lasts repeats its Event at every occurrence (Missed) or pass
	// (LockBackendUnavailable): one Event each made a broken Secret shared by 1,000 jobs
	// cost 1,000 Event POSTs every 15 s, and at 5,000 jobs under saturation the Missed
	// Events took as many calls as the pods (1.13 POSTs per occurrence), so that misses
	// made more misses. They form a series per job too; status.recent keeps each
	// occurrence's message.
	It("aggregates the Events of a lasting condition (a missing Secret) into one series per reason", func() {
		startManager(clock.RealClock{})
		job := newJob(newNamespace(), "nosecret", "* * * * * *")
		job.Spec.Lock.Redis.SecretRef.Name = "missing"
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }, 10*time.Second).Should(BeNumerically(">=", 4))
		for _, reason := range []string{ReasonMissed, ReasonLockBackend} {
			Eventually(func() []*eventsv1.EventSeries { return eventSeries(job, reason) }).Should(ConsistOf(HaveField("Count", BeNumerically(">=", 2))), "one %s Event, a series", reason)
		}
		Expect(eventNotes(job, ReasonMissed)).To(ConsistOf(ContainSubstring("SecretNotFound")), "the series keeps its first note")
		Expect(getJob(job).Status.Recent).To(HaveEach(HaveField("Message", ContainSubstring("SecretNotFound"))), "each occurrence's message in status")
	})

	// A series keeps its first note, so a series per reason alone went on telling the first
	// cause after it had gone: the Secret created, the job's occurrences missed for a pod
	// that does not start, and its one Missed Event still said SecretNotFound. A series is
	// per reason and cause (the Event's action), so a new cause is a new Event.
	It("starts a new series when a lasting condition's cause changes (Secret created, then a pod that does not start)", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "cause", "* * * * * *")
		job.Spec.Lock.Redis.SecretRef.Name = "late"
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() []string { return eventNotes(job, ReasonMissed) }, 10*time.Second).Should(ConsistOf(ContainSubstring("SecretNotFound")))
		// The user creates the Secret: a pod is created, and nothing starts it here (no
		// kubelet), so the next occurrences are missed for the backlog.
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
			StringData: map[string]string{"url": redisSrv.URL()},
		})).To(Succeed())
		Eventually(func() []string { return eventNotes(job, ReasonMissed) }, 15*time.Second).Should(ConsistOf(
			ContainSubstring("SecretNotFound"),
			ContainSubstring("has not started its job yet"),
		), "one Missed Event per cause, each with its own note")
		Eventually(func() []*eventsv1.EventSeries { return eventSeries(job, ReasonMissed) }, 10*time.Second).Should(
			ContainElement(HaveField("Count", BeNumerically(">=", 2))), "the backlog's Missed Events form a series")
	})

	// A status the API server stored but the controller cannot write back: a time past the
	// year 9999 in UTC, written in a zone west of UTC through the status subresource, which
	// metav1.Time writes in UTC as the year 10000. Every status write of the job is
	// refused, and with it the pass's accounting (its pods are not counted nor released).
	// Only the manager's log said so; the job's Events now name the field and the fix.
	It("names, on the job, the status field the API server refuses when the controller writes it back", func() {
		job := forgedStatus("forged", `{"status":{"lastSuccessfulTime":"9999-12-31T23:00:00-05:00"}}`)
		Eventually(func() []string { return eventNotes(job, ReasonStatusRejected) }, 15*time.Second).Should(ContainElement(And(
			ContainSubstring("status.lastSuccessfulTime"), ContainSubstring("--subresource=status"))))
		// The user removes the field: the job's status is written again.
		missed := getJob(job).Status.Counters.Missed
		Expect(k8sClient.Status().Patch(ctx, job, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"lastSuccessfulTime":null}}`)))).To(Succeed())
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }, 10*time.Second).Should(BeNumerically(">", missed))
	})

	// A lastScheduleTime far ahead of the controller's clock, written through the status
	// subresource (here one past the year 9999 in UTC, which the controller could not even
	// write back): it used to stop the schedule until then, and every status write with it.
	// The pass drops it, says so on the job, and the schedule goes on from now.
	It("drops a lastScheduleTime far ahead of its clock, says so, and schedules on", func() {
		job := forgedStatus("ahead", `{"status":{"lastScheduleTime":"9999-12-31T23:00:00-05:00"}}`)
		Eventually(func() []string { return eventNotes(job, ReasonStatusAhead) }, 15*time.Second).Should(ContainElement(And(
			ContainSubstring("status.lastScheduleTime 10000-01-01T04:00:00Z"), ContainSubstring("not trusted"))))
		missed := getJob(job).Status.Counters.Missed
		Eventually(func(g Gomega) {
			st := getJob(job).Status
			g.Expect(st.Counters.Missed).To(BeNumerically(">", missed), "occurrences are decided again")
			g.Expect(st.LastScheduleTime).NotTo(BeNil())
			g.Expect(st.LastScheduleTime.Time).To(BeTemporally("~", time.Now(), time.Minute))
		}, 15*time.Second).Should(Succeed())
		Expect(eventNotes(job, ReasonStatusRejected)).To(BeEmpty())
	})

	// A job's pods are its author's to write: the job writes its own termination message,
	// and whoever may patch its pods, their annotations. Times in them that status cannot
	// hold (past the year 9999 in UTC) used to be folded into status, and the API server
	// refused every status write of the job from then on: nothing was counted or released
	// again, and the StatusRejected Event's fix (edit status) could not help, as the next
	// count brought them back. Such a time is read as none; a scheduled pod's occurrence is
	// the one its name says.
	It("counts a run whose pod holds times status cannot hold, and writes its status", func() {
		job := newJob(newNamespace(), "forged-times", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		startManager(clock.RealClock{})
		occ := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		pod := createPodFor(job, occ)
		const future = "9999-12-31T23:59:59-23:59" // 10000-01-01T23:58:59Z
		Expect(k8sClient.Patch(ctx, pod, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+runpod.AnnotationScheduledTime+`":"`+future+`"}}}`)))).To(Succeed())
		finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 1,
			AcquiredAt: future, StartedAt: future, ReleasedAt: future}))
		Eventually(func(g Gomega) {
			st := getJob(job).Status
			g.Expect(st.Counters.Succeeded).To(Equal(int64(1)))
			g.Expect(st.LastSuccessfulTime).NotTo(BeNil())
			g.Expect(st.LastSuccessfulTime.Time).To(BeTemporally("==", occ), "the occurrence its name says")
		}, 15*time.Second).Should(Succeed())
		Expect(eventNotes(job, ReasonStatusRejected)).To(BeEmpty())
	})

	It("keeps one Event per warning: each failed run is told", func() {
		job := endedRuns("failing", 2, corev1.PodFailed, report.Failed)
		Eventually(func() []string { return eventNotes(job, string(report.Failed)) }).Should(HaveLen(2))
	})
})

// forgedStatus starts the manager with a job due every second, waits until the job has
// a status of its own (an occurrence counted Missed: nothing runs pods here), then writes
// patch, a JSON merge patch, through the job's status subresource, as a user or another
// writer of it could.
func forgedStatus(name, patch string) *v1alpha1.LockedCronJob {
	startManager(clock.RealClock{})
	job := newJob(newNamespace(), name, "* * * * * *")
	Expect(k8sClient.Create(ctx, job)).To(Succeed())
	Eventually(func() int64 { return getJob(job).Status.Counters.Missed }, 10*time.Second).Should(BeNumerically(">=", 1))
	Expect(k8sClient.Status().Patch(ctx, job, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	return job
}

// endedRuns makes a job whose n runs end with outcome, one after the other, each counted
// (a status write: the job's resourceVersion moves) before the next ends.
func endedRuns(name string, n int, phase corev1.PodPhase, outcome report.Outcome) *v1alpha1.LockedCronJob {
	job := newJob(newNamespace(), name, rarely)
	Expect(k8sClient.Create(ctx, job)).To(Succeed())
	startManager(clock.RealClock{})
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	exit := int32(0)
	if phase == corev1.PodFailed {
		exit = 1
	}
	for i := range n {
		pod := createPodFor(job, base.Add(time.Duration(i)*time.Minute))
		finishPod(pod, phase, exit, reportJSON(report.Report{Outcome: outcome, Holder: "h", FencingToken: int64(i + 1), ExitCode: int(exit)}))
		Eventually(func() int64 {
			c := getJob(job).Status.Counters
			if outcome == report.Failed {
				return c.Failed
			}
			return c.Succeeded
		}).Should(Equal(int64(i + 1)))
	}
	return job
}
