package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

var _ = Describe("A job deleted and created again under the same name", func() {
	// `kubectl replace --force`, or delete and apply: the new job (a new UID) can be the
	// first the manager sees of that name, its pass never learning that the old one went.
	// The old job's pods are still there (the garbage collector deletes them, and waits
	// for the tracking finalizer). They are not the new job's: not its runs, not its
	// active pods, not its occurrences; and no job is left to count them, so their
	// finalizer is released.
	It("takes none of the old job's pods as its own, and releases them", func() {
		ns := newNamespace()
		old, ran, running := deletedJobWithPods(ns, "replaced")
		replacement := newJob(ns, "replaced", rarely)
		Expect(k8sClient.Create(ctx, replacement)).To(Succeed())
		Expect(replacement.UID).NotTo(Equal(old.UID))

		startManager(clock.RealClock{})
		for _, pod := range []*corev1.Pod{ran, running} {
			Eventually(func() []string {
				p, err := getPod(ns, pod.Name)
				Expect(err).NotTo(HaveOccurred())
				return p.Finalizers
			}, 15*time.Second).ShouldNot(ContainElement(runpod.FinalizerTracking), "pod %s of the old job released", pod.Name)
		}
		Eventually(func() *v1alpha1.LockedCronJobStatus { return &getJob(replacement).Status }).Should(
			HaveField("Conditions", Not(BeEmpty())), "the new job reconciled")
		Consistently(func() v1alpha1.LockedCronJobStatus { return getJob(replacement).Status }, 3*time.Second).Should(And(
			HaveField("Recent", BeEmpty()),
			HaveField("Active", BeEmpty()),
			HaveField("LastSuccessfulTime", BeNil()),
			HaveField("Counters.Succeeded", BeZero()),
		), "the old job's pods counted as the new job's")
	})

	// The old job had prepared the pod of its next occurrence (spec.prepareAheadSeconds),
	// and the new one has the same schedule: that pod has the name the new job's pod
	// takes. It is not the new job's run. Until the garbage collector deletes it (here:
	// after the instant) the new job says the name is taken; then it runs the occurrence
	// in a pod of its own.
	It("runs an occurrence the old job had prepared a pod for in a pod of its own", func() {
		stop := startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(10 * time.Second).Truncate(time.Second)
		old := newJob(ns, "prepared", dailyAt(at))
		old.Spec.PrepareAheadSeconds = ptr.To[int32](300)
		createBefore(old, at)
		name := runpod.Name("prepared", at)
		Eventually(func() error { _, err := getPod(ns, name); return err }, 10*time.Second).Should(Succeed(), "prepared ahead")
		stop()

		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		replacement := newJob(ns, "prepared", dailyAt(at))
		replacement.Spec.PrepareAheadSeconds = ptr.To[int32](300)
		createBefore(replacement, at)
		startManager(clock.RealClock{})
		Eventually(func() []string { return eventReasons(replacement) }, time.Until(at)+10*time.Second, 100*time.Millisecond).Should(
			ContainElement(ReasonPodNameTaken), "the old job's prepared pod taken for the new job's")
		Expect(getJob(replacement).Status.LastScheduleTime).To(BeNil(), "the occurrence is not the new job's yet")

		prepared, err := getPod(ns, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Delete(ctx, prepared)).To(Succeed()) // as the garbage collector does
		Eventually(func() types.UID { return controllerOf(ns, name) }, 15*time.Second, 100*time.Millisecond).Should(Equal(replacement.UID), "the occurrence runs in a pod of the new job")
	})
})

// The name an occurrence's pod takes is held, at the instant, by another's pod on its way
// out (an earlier job's of this name, withdrawn or deleted by the garbage collector, its
// kubelet slow to stop it), whose end wakes no pass of this job: no job controls it, or
// no label says whose it is. The occurrence is still due: the pass looks again until the
// name is free (helper-115: it waited for the next occurrence, and was counted missed).
var _ = Describe("An occurrence whose pod name another's pod holds while it is deleted", func() {
	It("starts once that pod is gone", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(6 * time.Second).Truncate(time.Second)
		name := runpod.Name("held", at)
		const hold = "test.lockedcron.io/hold"
		other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{hold}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		Expect(k8sClient.Delete(ctx, other)).To(Succeed()) // held by its finalizer: Terminating
		j := newJob(ns, "held", dailyAt(at))
		createBefore(j, at)

		Eventually(func() []string { return eventNotes(j, ReasonPodNameTaken) }, time.Until(at)+10*time.Second, 100*time.Millisecond).Should(
			ContainElement(ContainSubstring(name)), "the name taken at the instant")
		live, err := getPod(ns, name)
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(live.DeepCopy())
		live.Finalizers = nil
		Expect(k8sClient.Patch(ctx, live, patch)).To(Succeed()) // gone now
		Eventually(func() types.UID { return controllerOf(ns, name) }, 10*time.Second, 100*time.Millisecond).Should(Equal(j.UID), "the occurrence runs in a pod of the job once the name is free")
		Expect(getJob(j).Status.Counters.Missed).To(BeZero())
	})
})

var _ = Describe("A job deleted while no manager ran", func() {
	// The garbage collector marks its pods deleted, and the tracking finalizer holds
	// them. A manager that starts then sees each only as a create event, and no event
	// comes for a job that is gone: those events must wake the job's pass, which releases
	// them. Left, they stayed Terminating for good, and their namespace with them.
	It("releases its pods when a manager starts", func() {
		ns := newNamespace()
		_, ran, running := deletedJobWithPods(ns, "gone")
		for _, pod := range []*corev1.Pod{ran, running} { // as the garbage collector does
			Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
			p, err := getPod(ns, pod.Name)
			Expect(err).NotTo(HaveOccurred(), "the tracking finalizer holds pod %s", pod.Name)
			Expect(p.DeletionTimestamp).NotTo(BeNil())
		}

		startManager(clock.RealClock{})
		for _, pod := range []*corev1.Pod{ran, running} {
			Eventually(func() error {
				_, err := getPod(ns, pod.Name)
				return err
			}, 15*time.Second).Should(Satisfy(apierrors.IsNotFound), "pod %s of the deleted job released and gone", pod.Name)
		}
	})
})

// kubectl delete --cascade=orphan: the API server marks the job deleted and holds it with
// the orphan finalizer; the garbage collector takes the job's references off its pods,
// then that finalizer off the job, which goes. Its pods stay, but no job counts them any
// more, and the occurrence a prepared pod waits for will not come for any job. With a
// manager running, the pass the deletion wakes deals with them (e2e, on a real garbage
// collector). Here the manager was down all along: a new leader sees no event of the job,
// only its pods, no owner's.
var _ = Describe("A job deleted with --cascade=orphan while no manager ran", func() {
	// orphanDeleted makes a job prepare its pod for at with a manager, then, the manager
	// stopped, gives it a pod whose instant has come and deletes it with
	// --cascade=orphan, doing what the garbage collector does for that. It returns the
	// two pods, as they were.
	orphanDeleted := func(ns string, at time.Time) (prepared, running *corev1.Pod) {
		stop := startManager(clock.RealClock{})
		j := newJob(ns, "orphaned", dailyAt(at))
		j.Spec.PrepareAheadSeconds = ptr.To[int32](300)
		createBefore(j, at)
		Eventually(func() (err error) { prepared, err = getPod(ns, runpod.Name("orphaned", at)); return err }, 10*time.Second).Should(Succeed(), "prepared ahead")
		stop()
		running = createPodFor(j, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))

		Expect(k8sClient.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		for _, name := range []string{prepared.Name, running.Name} {
			pod, err := getPod(ns, name)
			Expect(err).NotTo(HaveOccurred())
			patch := client.MergeFrom(pod.DeepCopy())
			pod.OwnerReferences = nil
			Expect(k8sClient.Patch(ctx, pod, patch)).To(Succeed())
		}
		live := getJob(j)
		Expect(live.Finalizers).To(ContainElement(metav1.FinalizerOrphanDependents))
		patch := client.MergeFrom(live.DeepCopy())
		live.Finalizers = nil
		Expect(k8sClient.Patch(ctx, live, patch)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(j), &v1alpha1.LockedCronJob{}))
		}).Should(BeTrue())
		return prepared, running
	}
	// goneBeforeInstant waits for pod (that very pod: a new one of its name may come) to
	// be gone, before at.
	goneBeforeInstant := func(pod *corev1.Pod, at time.Time) {
		GinkgoHelper()
		Eventually(func() bool {
			p, err := getPod(pod.Namespace, pod.Name)
			return apierrors.IsNotFound(err) || err == nil && p.UID != pod.UID
		}, 10*time.Second, 100*time.Millisecond).Should(BeTrue(), "the prepared pod no job controls is deleted")
		Expect(time.Now()).To(BeTemporally("<", at), "before its instant")
	}
	released := func(pod *corev1.Pod) {
		GinkgoHelper()
		Eventually(func() []string {
			p, err := getPod(pod.Namespace, pod.Name)
			Expect(err).NotTo(HaveOccurred(), "a pod whose instant had come is kept, as --cascade=orphan asks")
			return p.Finalizers
		}, 10*time.Second).ShouldNot(ContainElement(runpod.FinalizerTracking), "released")
	}

	It("deletes its prepared pod before the instant and releases its others", func() {
		ns := newNamespace()
		at := time.Now().Add(20 * time.Second).Truncate(time.Second)
		prepared, running := orphanDeleted(ns, at)

		startManager(clock.RealClock{})
		goneBeforeInstant(prepared, at)
		released(running)
	})

	// Created again under the name before any manager saw the deletion: the pass is the
	// new job's, whose own pods the old ones are not. They are released all the same,
	// and the prepared one deleted, so that the new job prepares the occurrence in a pod
	// of its own rather than finding the name taken by a pod that runs for nobody.
	It("does so when a job of its name was created again meanwhile", func() {
		ns := newNamespace()
		at := time.Now().Add(25 * time.Second).Truncate(time.Second)
		prepared, running := orphanDeleted(ns, at)
		again := newJob(ns, "orphaned", dailyAt(at))
		again.Spec.PrepareAheadSeconds = ptr.To[int32](300)
		createBefore(again, at)

		startManager(clock.RealClock{})
		goneBeforeInstant(prepared, at)
		released(running)
		Eventually(func() []metav1.OwnerReference {
			p, err := getPod(ns, prepared.Name)
			if err != nil {
				return nil
			}
			return p.OwnerReferences
		}, time.Until(at), 100*time.Millisecond).Should(ContainElement(HaveField("UID", again.UID)), "the new job prepares the occurrence in its own pod")
	})
})

// deletedJobWithPods creates a job name in ns, a pod of a run of it that succeeded and
// one that has not ended, and deletes the job: its pods stay (no garbage collector here),
// held by the tracking finalizer.
func deletedJobWithPods(ns, name string) (job *v1alpha1.LockedCronJob, ran, running *corev1.Pod) {
	j := newJob(ns, name, rarely)
	Expect(k8sClient.Create(ctx, j)).To(Succeed())
	ran = succeededRunOf(j, "a run of the deleted job")
	running = createPodFor(j, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	Expect(k8sClient.Delete(ctx, j)).To(Succeed())
	return j, ran, running
}

// succeededRunOf creates, as the controller would, j's pod for 2026-01-01T00:00:00Z and
// ends it as lockwrap ends a run that succeeded, its report saying msg.
func succeededRunOf(j *v1alpha1.LockedCronJob, msg string) *corev1.Pod {
	pod := createPodFor(j, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Key: j.Namespace + "/" + j.Name,
		Occurrence: "2026-01-01T00:00:00Z", Holder: "test/" + j.Namespace + "/" + pod.Name, Message: msg}))
	return pod
}

// controllerOf is the UID of the job that controls pod ns/name ("" if none, or no pod).
func controllerOf(ns, name string) types.UID {
	p, err := getPod(ns, name)
	if err != nil {
		return ""
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.UID
	}
	return ""
}
