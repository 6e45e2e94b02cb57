package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// Prepare-ahead (issue 13): the pod exists before its instant, lockwrap is told to wait
// for it, and a pod the job no longer wants before its instant is withdrawn uncounted.
var _ = Describe("Prepare-ahead", func() {
	envOf := func(pod corev1.Pod, name string) string {
		for _, c := range pod.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == name {
					return e.Value
				}
			}
		}
		return ""
	}

	It("creates the pod up to prepareAheadSeconds before the instant, waiting for it", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(8 * time.Second).Truncate(time.Second)
		job := newJob(ns, "early", dailyAt(at))
		job.Spec.PrepareAheadSeconds = ptr.To[int32](5)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second, 50*time.Millisecond).Should(HaveLen(1))
		pod := podsOf(job)[0]
		Expect(pod.Name).To(Equal(runpod.Name("early", at)))
		Expect(pod.CreationTimestamp.Time).To(BeTemporally(">=", at.Add(-5*time.Second)), "not earlier than prepareAheadSeconds")
		Expect(time.Now()).To(BeTemporally("<", at), "the pod exists before its instant")
		notBefore, err := time.Parse(time.RFC3339Nano, envOf(pod, config.EnvNotBefore))
		Expect(err).NotTo(HaveOccurred())
		Expect(notBefore).To(BeTemporally("==", at), "lockwrap waits for the instant")

		// At the instant the occurrence is the prepared pod's: no second pod.
		Eventually(func() *v1alpha1.LockedCronJobStatus {
			p := podsOf(job)[0]
			p.Status.Phase = corev1.PodRunning
			_ = k8sClient.Status().Update(ctx, &p)
			return &getJob(job).Status
		}, 15*time.Second).Should(HaveField("LastScheduleTime.Time", BeTemporally("==", at)))
		Expect(podsOf(job)).To(HaveLen(1))
	})

	It("withdraws a prepared pod, uncounted, when the job is suspended before the instant", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(30 * time.Second).Truncate(time.Second)
		job := newJob(ns, "changed", dailyAt(at))
		job.Spec.PrepareAheadSeconds = ptr.To[int32](300)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
		name := podsOf(job)[0].Name

		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) })
		Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "withdrawn")
		Expect(time.Now()).To(BeTemporally("<", at))
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}), "a withdrawn pod is not an occurrence")

		// Resumed: the next occurrence is prepared again; a schedule change withdraws it.
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(false) })
		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
		name = podsOf(job)[0].Name
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Schedule = "0 0 1 1 *" })
		Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "withdrawn on a schedule change")
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}))
	})

	It("withdraws a prepared pod, uncounted, when a guarded rollout starts before the instant", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		api := newDeployment(ns, "api")
		Expect(k8sClient.Create(ctx, api)).To(Succeed())
		writeStatus(api, deploymentDone)
		at := time.Now().Add(40 * time.Second).Truncate(time.Second)
		job := newJob(ns, "guarded", dailyAt(at))
		job.Spec.PrepareAheadSeconds = ptr.To[int32](300)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "api"}}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
		name := podsOf(job)[0].Name

		// A rollout of the guarded Deployment begins (a new generation not yet observed).
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(api), d)).To(Succeed())
		d.Spec.Template.Annotations = map[string]string{"restartedAt": time.Now().Format(time.RFC3339)}
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "withdrawn when the rollout begins")
		Expect(time.Now()).To(BeTemporally("<", at))
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}), "a withdrawn pod is not an occurrence")
		Consistently(func() []corev1.Pod { return podsOf(job) }, 2*time.Second).Should(BeEmpty(), "not prepared again while the rollout runs")
	})
})
