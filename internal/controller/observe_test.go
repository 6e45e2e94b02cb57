package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
)

// series is what the manager's registry serves for one metric family and one job: the
// value of each series by its labels other than namespace and name ("" when none).
func series(name, ns, job string) map[string]float64 {
	families, err := crmetrics.Registry.Gather()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var rest string
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
				if l.GetName() != "namespace" && l.GetName() != "name" {
					rest += l.GetName() + "=" + l.GetValue()
				}
			}
			if have["namespace"] != ns || have["name"] != job {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				out[rest] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[rest] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[rest] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

var _ = Describe("metrics from status", func() {
	It("exports next run, last schedule, last success, active runs, backend and lock key per job, and drops them with the job", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "gauges", rarely)
		job.Spec.Lock.Key = "shared-key"
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		Eventually(func() *metav1.Time { return getJob(job).Status.NextScheduleTime }).ShouldNot(BeNil())
		next := getJob(job).Status.NextScheduleTime.Time
		Eventually(func() map[string]float64 { return series("lockedcron_next_run_timestamp_seconds", ns, "gauges") }).
			Should(Equal(map[string]float64{"": unix(next)}))
		// Redis is probed off the reconcile path: backend_up follows the probe's answer.
		Eventually(func() map[string]float64 { return series("lockedcron_backend_up", ns, "gauges") }).
			Should(Equal(map[string]float64{"": 1}))
		Expect(series("lockedcron_info", ns, "gauges")).To(Equal(map[string]float64{"lock_key=shared-key": 1}))
		Expect(series("lockedcron_active_runs", ns, "gauges")).To(Equal(map[string]float64{"": 0}))
		Expect(series("lockedcron_last_success_timestamp_seconds", ns, "gauges")).To(BeEmpty(), "no success yet: no series, not 1970")
		runs := series("lockedcron_runs_total", ns, "gauges")
		Expect(runs).To(HaveKeyWithValue("outcome=Missed", 0.0), "counters exist at 0 from the first pass, so increase() sees the first one")
		Expect(runs).To(HaveKeyWithValue("outcome=LockLost", 0.0))
		Expect(runs).To(HaveKeyWithValue("outcome=SkippedBlackout", 0.0))
		Expect(series("lockedcron_lock_lost_total", ns, "gauges")).To(Equal(map[string]float64{"": 0}))
		Expect(series("lockedcron_unsuccessful_streak", ns, "gauges")).To(Equal(map[string]float64{"": 0}))

		// A failed occurrence starts a streak; the later success below ends it.
		occ := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		failed := createPodFor(job, occ.Add(-time.Hour))
		finishPod(failed, corev1.PodFailed, 1, reportJSON(report.Report{Outcome: report.Failed, Occurrence: occ.Add(-time.Hour).Format(time.RFC3339), Holder: "h", FencingToken: 1, ExitCode: 1}))
		Eventually(func() map[string]float64 { return series("lockedcron_unsuccessful_streak", ns, "gauges") }).
			Should(Equal(map[string]float64{"": 1}))

		// A running pod, then a success: active runs and last success follow status.
		pod := createPodFor(job, occ)
		pod.Status.Phase = corev1.PodRunning // the kubelet's part: a pod that has not started is not news (deferral.go)
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(func() map[string]float64 { return series("lockedcron_active_runs", ns, "gauges") }).
			Should(Equal(map[string]float64{"": 1}))
		finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Occurrence: occ.Format(time.RFC3339), Holder: "h", FencingToken: 1,
			StartedAt: occ.Add(40 * time.Millisecond).Format(time.RFC3339Nano)}))
		// The report's startedAt gives the start lag (job start − scheduled time), per namespace.
		Eventually(func() map[string]float64 { return series("lockedcron_start_lag_seconds", ns, "") }).
			Should(Equal(map[string]float64{"": 1}))
		Eventually(func() map[string]float64 { return series("lockedcron_last_success_timestamp_seconds", ns, "gauges") }).
			Should(Equal(map[string]float64{"": unix(occ)}))
		Expect(series("lockedcron_active_runs", ns, "gauges")).To(Equal(map[string]float64{"": 0}))
		Expect(series("lockedcron_runs_total", ns, "gauges")).To(HaveKeyWithValue("outcome=Succeeded", 1.0))
		Expect(series("lockedcron_unsuccessful_streak", ns, "gauges")).To(Equal(map[string]float64{"": 0}))

		// A new lock key replaces the info series (one per job).
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Lock.Key = "other-key" })
		Eventually(func() map[string]float64 { return series("lockedcron_info", ns, "gauges") }).
			Should(Equal(map[string]float64{"lock_key=other-key": 1}))

		// Suspended: no next run.
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) })
		Eventually(func() map[string]float64 { return series("lockedcron_next_run_timestamp_seconds", ns, "gauges") }).Should(BeEmpty())

		Expect(k8sClient.Delete(ctx, getJob(job))).To(Succeed())
		for _, name := range []string{"lockedcron_last_success_timestamp_seconds", "lockedcron_active_runs", "lockedcron_backend_up", "lockedcron_info", "lockedcron_runs_total", "lockedcron_lock_lost_total", "lockedcron_last_schedule_timestamp_seconds", "lockedcron_unsuccessful_streak"} {
			Eventually(func() map[string]float64 { return series(name, ns, "gauges") }).Should(BeEmpty(), "%s after delete", name)
		}
	})

	It("exports lockedcron_backend_up 0 while the job's Redis does not answer", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		down := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-down"},
			// A port nothing listens on: connection refused.
			StringData: map[string]string{"url": "redis://127.0.0.1:1/0"},
		}
		Expect(k8sClient.Create(ctx, down)).To(Succeed())
		job := newJob(ns, "nobackend", rarely)
		job.Spec.Lock.Redis.SecretRef.Name = "redis-down"
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() map[string]float64 { return series("lockedcron_backend_up", ns, "nobackend") }).
			Should(Equal(map[string]float64{"": 0}))
	})
})
