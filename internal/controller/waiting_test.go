package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// A rollout that begins while a manual run's lockwrap waits for the lock (contention
// Wait, behind a long run) must not let its job start in the rollout. Its container runs,
// so it was not withdrawn as an unstarted pod, and lockwrap, which knows no rollout,
// started the job as soon as the lock was free. A run that holds the lock (its job
// started) goes on.
var _ = Describe("A blackout that begins while a pod waits for the lock", func() {
	It("withdraws the waiting pod and leaves the one that holds the lock, also for a suspended job", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		web := newDeployment(ns, "web")
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		writeStatus(web, deploymentDone)

		guarded := func(name string, suspended bool) (*v1alpha1.LockedCronJob, *corev1.Pod) {
			job := newJob(ns, name, dailyAt(time.Now().Add(12*time.Hour)))
			job.Spec.Suspend = &suspended
			job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "web"}}}
			Expect(k8sClient.Create(ctx, job)).To(Succeed())
			Eventually(func() string { return getJob(job).Status.LockKey }).ShouldNot(BeEmpty())
			requestRun(job, "now", nil)
			rr := handled(job, "now")
			Expect(rr.Pod).NotTo(BeEmpty(), rr.Refused)
			var pod corev1.Pod
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: rr.Pod}, &pod)).To(Succeed())
			setRunning(&pod) // its lockwrap runs: waiting for the lock, or running the job
			Expect(k8sClient.Status().Update(ctx, &pod)).To(Succeed())
			return job, &pod
		}
		waitJob, waiting := guarded("waits", false)
		suspendedJob, suspendedWaiting := guarded("suspended-waits", true)
		holdJob, holding := guarded("holds", false)

		// A long run of another cluster holds the first two keys; the third pod holds its own.
		l := lock.New(redisSrv.Client())
		for _, key := range []string{runpod.LockKey(waitJob), runpod.LockKey(suspendedJob)} {
			_, err := l.Acquire(ctx, lock.Request{Key: key, Occurrence: time.Now().Truncate(time.Hour), Holder: "other/ns/nightly/uid", TTL: time.Minute})
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := l.Acquire(ctx, lock.Request{Key: runpod.LockKey(holdJob), Occurrence: time.Now().Truncate(time.Second),
			Holder: runpod.HolderOf("test", holding), TTL: time.Minute})
		Expect(err).NotTo(HaveOccurred())

		By("the Deployment starts a rollout")
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(web), d)).To(Succeed())
		d.Spec.Template.Annotations = map[string]string{"restartedAt": time.Now().Format(time.RFC3339)}
		Expect(k8sClient.Update(ctx, d)).To(Succeed())

		for _, p := range []*corev1.Pod{waiting, suspendedWaiting} {
			Eventually(func(g Gomega) {
				var got corev1.Pod
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
				g.Expect(got.DeletionTimestamp).NotTo(BeNil(), "pod %s waits for the lock in the rollout and is not withdrawn", p.Name)
				g.Expect(got.Annotations[runpod.AnnotationWithdrawn]).To(And(ContainSubstring("waited for the lock"), ContainSubstring("Deployment/web")))
			}).Should(Succeed())
		}
		Consistently(func() bool {
			var got corev1.Pod
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(holding), &got)).To(Succeed())
			return got.DeletionTimestamp == nil
		}, 3*time.Second).Should(BeTrue(), "the pod that holds the lock (its job started) was withdrawn")
	})
})
