package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/clock"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
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

	It("keeps one Event per warning: each failed run is told", func() {
		job := endedRuns("failing", 2, corev1.PodFailed, report.Failed)
		Eventually(func() []string { return eventNotes(job, string(report.Failed)) }).Should(HaveLen(2))
	})
})

// endedRuns makes a job whose n runs end with outcome, one after the other, each counted
// (a status write: the job's resourceVersion moves) before the next ends.
func endedRuns(name string, n int, phase corev1.PodPhase, outcome report.Outcome) *v1alpha1.LockedCronJob {
	job := newJob(newNamespace(), name, "0 0 1 1 *")
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
