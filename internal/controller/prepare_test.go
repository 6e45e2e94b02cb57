package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
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
		createBefore(job, at)

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
		at := time.Now().Add(30 * time.Second).Truncate(time.Second)
		job := preparedJob("changed", at)
		ns, name := job.Namespace, podsOf(job)[0].Name

		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) })
		Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "withdrawn")
		Expect(time.Now()).To(BeTemporally("<", at))
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}), "a withdrawn pod is not an occurrence")

		// Resumed: the next occurrence is prepared again; a schedule change withdraws it.
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(false) })
		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
		name = podsOf(job)[0].Name
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Schedule = rarely })
		Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "withdrawn on a schedule change")
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}))
	})

	It("withdraws a prepared pod, uncounted, when a guarded rollout starts before the instant", func() {
		at := time.Now().Add(40 * time.Second).Truncate(time.Second)
		api, job := preparedGuarded("guarded", at)
		ns, name := job.Namespace, podsOf(job)[0].Name

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

	// The race this guards against: a pass withdraws a prepared pod a moment before its
	// instant, and its kubelet acts on the deletion only after the instant, so lockwrap
	// has already taken the lock and started the job. Released uncounted at once, the run
	// was in no counter, and its occurrence in none either (the pod's name made the
	// planner take it as started). The pod is counted from what its kubelet says: a run
	// is the occurrence's outcome; a pod that did not run leaves the occurrence to the
	// schedule (here: skipped in the rollout's blackout), counted once either way.
	DescribeTable("withdraws a prepared pod on a node and counts its occurrence once, from what its kubelet says",
		func(wordAfterInstant bool, word func(pod *corev1.Pod), counters v1alpha1.Counters, outcome string) {
			at := time.Now().Add(15 * time.Second).Truncate(time.Second) // room for a loaded machine: a fresh manager, the Deployment, the pod, the withdrawal
			api, job := preparedGuarded("raced", at)
			pod := podsOf(job)[0]
			ns, name := pod.Namespace, pod.Name
			runOnNode(&pod) // lockwrap runs, waiting for the instant (--not-before)

			// A rollout of the guarded Deployment begins before the instant: withdrawn.
			writeStatus(api, func(d *appsv1.Deployment) {
				deploymentDone(d)
				d.Status.AvailableReplicas = 1 // rolling out
			})
			Eventually(func() bool { p, _ := getPod(ns, name); return p.DeletionTimestamp != nil }, 5*time.Second).Should(BeTrue(), "withdrawn")
			Expect(time.Now()).To(BeTemporally("<", at))
			p, err := getPod(ns, name)
			Expect(err).NotTo(HaveOccurred(), "kept (Terminating) until its kubelet has said what happened")
			Expect(p.Finalizers).To(ContainElement(runpod.FinalizerTracking))

			if wordAfterInstant {
				// The pass after the instant does not decide the occurrence yet: its pod may
				// be running the job.
				Eventually(func() *metav1.Time { return getJob(job).Status.NextScheduleTime }, 15*time.Second).
					Should(HaveField("Time", BeTemporally(">", at)))
				st := getJob(job).Status
				Expect(st.Counters).To(Equal(v1alpha1.Counters{}), "nothing counted before the kubelet's word")
				Expect(st.Recent).To(BeEmpty())
			}
			word(p)
			// The kubelet removes the pod once its containers have stopped.
			Expect(k8sClient.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
			Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "released")
			Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 15*time.Second).Should(Equal(counters))
			Consistently(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 2*time.Second).Should(Equal(counters), "counted once")
			st := getJob(job).Status
			Expect(st.Recent).To(ConsistOf(And(HaveField("Occurrence.Time", BeTemporally("==", at)), HaveField("Outcome", outcome))))
			Expect(st.LastScheduleTime.Time).To(BeTemporally("==", at))
			Expect(podsOf(job)).To(BeEmpty(), "no second pod for the occurrence")
		},
		Entry("its job started after the instant: the run counts", true, func(pod *corev1.Pod) {
			finishPod(pod, corev1.PodFailed, 143, reportJSON(report.Report{Outcome: report.Failed, Occurrence: pod.Annotations[runpod.AnnotationScheduledTime],
				Holder: "h", FencingToken: 1, ExitCode: 143, StartedAt: time.Now().UTC().Format(time.RFC3339Nano)}))
		}, v1alpha1.Counters{Runs: 1, Failed: 1}, "Failed"),
		Entry("interrupted before the instant: the blackout skips the occurrence", false, func(pod *corev1.Pod) {
			finishPod(pod, corev1.PodFailed, 70, reportJSON(report.Report{Outcome: report.Interrupted, Occurrence: pod.Annotations[runpod.AnnotationScheduledTime],
				Message: "interrupted by terminated while waiting for the occurrence's instant; the command did not run"}))
		}, v1alpha1.Counters{SkippedBlackout: 1}, "SkippedBlackout"),
		Entry("interrupted, said after the instant: the blackout skips the occurrence", true, func(pod *corev1.Pod) {
			finishPod(pod, corev1.PodFailed, 70, reportJSON(report.Report{Outcome: report.Interrupted, Occurrence: pod.Annotations[runpod.AnnotationScheduledTime],
				Message: "interrupted by terminated while waiting for the occurrence's instant; the command did not run"}))
		}, v1alpha1.Counters{SkippedBlackout: 1}, "SkippedBlackout"),
	)

	// The schedule is edited after the instant while the withdrawn pod has not said: the
	// edit counts what the old schedule left unstarted, and leaves this occurrence to its
	// pod (status.dueBeforeChange, which the CRD must keep). Its job did not run: missed,
	// once. It used to be released uncounted, the occurrence in no counter.
	It("counts once the occurrence a schedule edit left to a withdrawn prepared pod", func() {
		at := time.Now().Add(15 * time.Second).Truncate(time.Second) // room for a loaded machine
		api, job := preparedGuarded("edited", at)
		pod := podsOf(job)[0]
		ns, name := pod.Namespace, pod.Name
		runOnNode(&pod)
		writeStatus(api, func(d *appsv1.Deployment) {
			deploymentDone(d)
			d.Status.AvailableReplicas = 1 // rolling out: withdrawn
		})
		Eventually(func() bool { p, _ := getPod(ns, name); return p.DeletionTimestamp != nil }, 5*time.Second).Should(BeTrue(), "withdrawn")

		time.Sleep(time.Until(at.Add(time.Second))) // the edit comes after the instant
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Schedule = dailyAt(at.Add(2 * time.Hour)) })
		Eventually(func() []string { return getJob(job).Status.DueBeforeChange }, 15*time.Second).Should(ConsistOf(name))
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}), "left to the pod")

		p, err := getPod(ns, name)
		Expect(err).NotTo(HaveOccurred())
		finishPod(p, corev1.PodFailed, 70, reportJSON(report.Report{Outcome: report.Interrupted, Occurrence: p.Annotations[runpod.AnnotationScheduledTime],
			Message: "interrupted by terminated while waiting for the occurrence's instant; the command did not run"}))
		Expect(k8sClient.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "released")
		missed := v1alpha1.Counters{Missed: 1}
		Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 15*time.Second).Should(Equal(missed))
		Consistently(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 2*time.Second).Should(Equal(missed), "counted once")
		st := getJob(job).Status
		Expect(st.Recent).To(ConsistOf(And(HaveField("Occurrence.Time", BeTemporally("==", at)), HaveField("Outcome", runstatus.OutcomeMissed),
			HaveField("Message", ContainSubstring("changed after it came")))))
		Expect(st.DueBeforeChange).To(BeEmpty())
	})

	// A prepared pod taken away before its instant by someone other than the controller —
	// a node drain's eviction, preemption, kubectl delete, its kubelet failing it — whose
	// job did not run: its occurrence has not come yet, so it is not counted; the
	// controller withdraws it as its own withdrawals, and the occurrence runs in a new
	// pod, counted once. It used to be counted (missed, or interrupted) at once, released,
	// and at the instant the planner found no pod of its name and made a second one: one
	// occurrence, two records.
	DescribeTable("withdraws, uncounted, a prepared pod taken away before its instant, and runs its occurrence once",
		func(takeAway func(pod *corev1.Pod)) {
			at := time.Now().Add(20 * time.Second).Truncate(time.Second) // room for a loaded machine
			job := preparedJob("taken", at)
			first := podsOf(job)[0]
			takeAway(&first)

			// A new pod of the occurrence replaces it; nothing is counted meanwhile.
			Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(
				ConsistOf(And(HaveField("Name", first.Name), Not(HaveField("UID", first.UID)))), "a new pod for the occurrence")
			Expect(time.Now()).To(BeTemporally("<", at), "replaced before the instant")
			Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}), "a pod taken away before its instant is not an occurrence")
			Expect(getJob(job).Status.Recent).To(BeEmpty())

			second := podsOf(job)[0]
			time.Sleep(time.Until(at)) // lockwrap's --not-before
			succeedsOnce(job, second, at)
		},
		Entry("deleted while unscheduled (kubectl delete, preemption)", func(pod *corev1.Pod) {
			Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		}),
		Entry("evicted from its node: lockwrap interrupted while waiting for the instant", func(pod *corev1.Pod) {
			runOnNode(pod)
			Expect(k8sClient.Delete(ctx, pod)).To(Succeed()) // the eviction: graceful, on a node
			finishPod(pod, corev1.PodFailed, 70, reportJSON(report.Report{Outcome: report.Interrupted, Occurrence: pod.Annotations[runpod.AnnotationScheduledTime],
				Message: "interrupted by terminated while waiting for the occurrence's instant; the command did not run"}))
			kubeletRemoves(pod)
		}),
		Entry("failed by its kubelet, not deleted (a node-pressure eviction)", func(pod *corev1.Pod) {
			bind(pod)
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p, err := getPod(pod.Namespace, pod.Name)
				if err != nil {
					return err
				}
				p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Annotations[runpod.AnnotationWrappedContainer], Image: p.Spec.Containers[0].Image,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 70, Reason: "Error",
						Message: reportJSON(report.Report{Outcome: report.Interrupted, Occurrence: p.Annotations[runpod.AnnotationScheduledTime],
							Message: "interrupted by terminated while waiting for the occurrence's instant; the command did not run"})}}}}
				return k8sClient.Status().Update(ctx, p)
			})).To(Succeed())
			// The controller deletes it (a pod that ended goes at once, no kubelet needed).
		}),
	)

	// A node's clock ahead of the controller's: lockwrap starts the prepared pod's job at
	// the instant on the node's clock (--not-before), and it may have ended before the
	// controller's clock reaches the instant. Its report is the occurrence's outcome,
	// counted once; at the controller's instant the occurrence is the pod's, not a second
	// pod's nor missed, whether the pod is kept in the history or not, and across a
	// manager restart in between.
	DescribeTable("counts once a prepared pod whose job ended before the controller's clock reached its instant",
		func(history int32, restart bool) {
			const skew = 10 * time.Second // the controller's clock behind the node's (margin for a restart on a loaded machine)
			stop := startManager(behind{skew})
			ns := newNamespace()
			at := time.Now().Add(6 * time.Second).Truncate(time.Second)
			job := newJob(ns, "skewed", dailyAt(at))
			job.Spec.PrepareAheadSeconds = ptr.To[int32](300)
			job.Spec.SuccessfulRunsHistoryLimit = ptr.To(history)
			createBefore(job, at)
			Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
			pod := podsOf(job)[0]
			Expect(pod.Name).To(Equal(runpod.Name("skewed", at)))

			// The node: lockwrap waits for the instant on its clock (time.Now here),
			// then the job runs and ends, all before the controller's clock reaches it.
			p, err := getPod(ns, pod.Name)
			Expect(err).NotTo(HaveOccurred())
			setRunning(p)
			Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
			time.Sleep(time.Until(at)) // lockwrap's --not-before, on the node's clock
			finishPod(&pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Occurrence: at.UTC().Format(time.RFC3339),
				Holder: "h", FencingToken: 1, StartedAt: time.Now().UTC().Format(time.RFC3339Nano)}))
			Expect(time.Now().Add(-skew)).To(BeTemporally("<", at), "the controller's clock is still before the instant")

			once := v1alpha1.Counters{Runs: 1, Succeeded: 1}
			Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 15*time.Second).Should(Equal(once))
			if restart {
				stop()
				startManager(behind{skew})
				Expect(time.Now().Add(-skew)).To(BeTemporally("<", at), "restarted before the controller's instant")
			}
			// Past the controller's instant (a pass is due at it) and a second more.
			Consistently(func(g Gomega) {
				st := getJob(job).Status
				g.Expect(st.Counters).To(Equal(once), "counted once, nothing missed")
				g.Expect(podsOf(job)).To(Or(BeEmpty(), HaveEach(HaveField("UID", pod.UID))), "no second pod for the occurrence")
			}, time.Until(at.Add(skew+time.Second)), 100*time.Millisecond).Should(Succeed())
			st := getJob(job).Status
			Expect(st.Recent).To(ConsistOf(And(HaveField("Occurrence.Time", BeTemporally("==", at)), HaveField("Outcome", "Succeeded"))))
			if history == 0 {
				Eventually(func() []corev1.Pod { return podsOf(job) }, 5*time.Second).Should(BeEmpty(), "no history kept")
			}
		},
		Entry("kept in the history", int32(3), false),
		Entry("no history (successfulRunsHistoryLimit 0)", int32(0), false),
		Entry("no history, the manager restarted before the controller's instant", int32(0), true),
	)

	// A node's clock behind the controller's: the pod, prepared ahead or created at the
	// controller's instant, tells lockwrap to wait for the instant on the node's clock
	// (--not-before), so the job never starts before it there. While lockwrap waits, its
	// container runs: the controller's starting deadline, passed on its own clock, does
	// not withdraw it, and its report is the occurrence's outcome, counted once.
	DescribeTable("starts nothing before the instant on a node whose clock is behind the controller's",
		func(prepareAhead int32) {
			// The test must play the kubelet (the pod running) between the pod's creation
			// and the controller's deadline: 6 s, room for a loaded machine.
			const skew = 10 * time.Second // the controller's clock ahead of the node's
			startManager(behind{-skew})
			ns := newNamespace()
			at := time.Now().Add(14 * time.Second).Truncate(time.Second)
			job := newJob(ns, "fast", dailyAt(at))
			job.Spec.PrepareAheadSeconds = ptr.To(prepareAhead)
			job.Spec.StartingDeadlineSeconds = ptr.To[int64](6) // shorter than the skew
			createBefore(job, at)
			Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second, 50*time.Millisecond).Should(HaveLen(1))
			pod := podsOf(job)[0]
			Expect(time.Now()).To(BeTemporally("<", at.Add(-time.Second)), "the pod exists before the node's instant")
			notBefore, err := time.Parse(time.RFC3339Nano, envOf(pod, config.EnvNotBefore))
			Expect(err).NotTo(HaveOccurred(), "lockwrap is told to wait for the instant")
			Expect(notBefore).To(BeTemporally("==", at))

			// The node: lockwrap's container runs, waiting for the instant on its clock.
			p, err := getPod(ns, pod.Name)
			Expect(err).NotTo(HaveOccurred())
			setRunning(p)
			Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
			Consistently(func(g Gomega) {
				p, err := getPod(ns, pod.Name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.DeletionTimestamp).To(BeNil(), "not withdrawn by the controller's deadline")
				g.Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}))
			}, time.Until(at), 100*time.Millisecond).Should(Succeed())
			succeedsOnce(job, pod, at)
		},
		Entry("created at the controller's instant", int32(0)),
		Entry("prepared ahead", int32(300)),
	)

	// A leader change between two clocks. The leader on time decides, at the instant, the
	// occurrence of a pod prepared ahead whose container started just before it (a slow
	// pull); then it stops, and the new leader's clock is behind the instant. For the new
	// leader the pod is still a prepared one, which a suspend would withdraw; but its
	// occurrence is decided (lastScheduleTime), and lockwrap started the job on the instant
	// on its node: the pod is kept, and its run counted once. The first leader's clock is
	// set by the spec: at its instant nothing else moves it, so its decision must be written
	// by the pass at the instant, not with the pod's start news 10 s later (deferral.go,
	// podNews), or the handover would find the occurrence undecided.
	It("keeps, across a leader change to a clock behind the instant, the prepared pod whose occurrence the old leader decided", func() {
		at := time.Now().Add(60 * time.Second).Truncate(time.Second)
		onTime := clocktesting.NewFakePassiveClock(time.Now())
		stopFirst := startManager(onTime)
		ns := newNamespace()
		job := newJob(ns, "handover", dailyAt(at))
		job.Spec.PrepareAheadSeconds = ptr.To[int32](300)
		createBefore(job, at)
		Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
		pod := podsOf(job)[0]
		Expect(pod.Annotations).To(HaveKey(runpod.AnnotationPreparedAhead))

		// The first leader's instant comes; the pod's container started 2 s before it.
		onTime.SetTime(at.Add(time.Second))
		bind(&pod)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := getPod(ns, pod.Name)
			if err != nil {
				return err
			}
			setRunning(p)
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(at.Add(-2 * time.Second))
			return k8sClient.Status().Update(ctx, p)
		})).To(Succeed())
		Eventually(func() *v1alpha1.LockedCronJobStatus { return &getJob(job).Status }, 15*time.Second).Should(
			HaveField("LastScheduleTime", HaveField("Time", BeTemporally("==", at))), "the first leader decides the occurrence at its instant")
		stopFirst()

		// The new leader, its clock 30 s behind the instant; the job is suspended.
		startManager(clocktesting.NewFakePassiveClock(at.Add(-30 * time.Second)))
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) })
		Consistently(func(g Gomega) {
			p, err := getPod(ns, pod.Name)
			g.Expect(err).NotTo(HaveOccurred(), "the decided pod is kept")
			g.Expect(p.UID).To(Equal(pod.UID))
			g.Expect(p.DeletionTimestamp).To(BeNil(), "not withdrawn")
			g.Expect(p.Annotations).NotTo(HaveKey(runpod.AnnotationWithdrawnAhead))
		}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
		succeedsOnce(job, pod, at)
	})
})

// bind binds pod to node-1, as the scheduler does.
func bind(pod *corev1.Pod) {
	GinkgoHelper()
	Expect(k8sClient.SubResource("binding").Create(ctx, pod, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}})).To(Succeed())
}

// runOnNode binds pod and marks its wrapped container running, as its kubelet does.
func runOnNode(pod *corev1.Pod) {
	GinkgoHelper()
	bind(pod)
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := getPod(pod.Namespace, pod.Name)
		if err != nil {
			return err
		}
		setRunning(p)
		return k8sClient.Status().Update(ctx, p)
	})).To(Succeed())
}

// kubeletRemoves deletes pod as its kubelet does once its containers have stopped (grace
// 0), unless the API server has removed it already (a pod that ended, and was released).
func kubeletRemoves(pod *corev1.Pod) {
	GinkgoHelper()
	p, err := getPod(pod.Namespace, pod.Name)
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p, client.GracePeriodSeconds(0)))).To(Succeed())
}

// succeedsOnce ends pod, job's pod of the occurrence at, with lockwrap's Succeeded report
// and expects the occurrence counted once, from it, and no other pod made for it.
func succeedsOnce(job *v1alpha1.LockedCronJob, pod corev1.Pod, at time.Time) {
	GinkgoHelper()
	finishPod(&pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Occurrence: at.UTC().Format(time.RFC3339),
		Holder: "h", FencingToken: 1, StartedAt: time.Now().UTC().Format(time.RFC3339Nano)}))
	once := v1alpha1.Counters{Runs: 1, Succeeded: 1}
	Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 15*time.Second).Should(Equal(once))
	Consistently(func(g Gomega) {
		g.Expect(getJob(job).Status.Counters).To(Equal(once), "counted once, nothing missed")
		g.Expect(podsOf(job)).To(HaveEach(HaveField("UID", pod.UID)), "no other pod for the occurrence")
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed())
	Expect(getJob(job).Status.Recent).To(ConsistOf(And(HaveField("Occurrence.Time", BeTemporally("==", at)), HaveField("Outcome", "Succeeded"))))
}

// behind is a clock d behind the real one (ahead if d < 0): a controller whose clock
// lags (or leads) its nodes'.
type behind struct{ d time.Duration }

func (b behind) Now() time.Time                  { return time.Now().Add(-b.d) }
func (b behind) Since(t time.Time) time.Duration { return b.Now().Sub(t) }

// preparedGuarded starts a manager and creates, in a new namespace, a job due daily at
// at, prepared up to 300 s ahead and guarded by the rollouts of Deployment api (created
// and settled first); it waits for the prepared pod.
func preparedGuarded(name string, at time.Time) (*appsv1.Deployment, *v1alpha1.LockedCronJob) {
	GinkgoHelper()
	var api *appsv1.Deployment
	job := preparedJob(name, at, func(job *v1alpha1.LockedCronJob) {
		api = newDeployment(job.Namespace, "api")
		Expect(k8sClient.Create(ctx, api)).To(Succeed())
		writeStatus(api, deploymentDone)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "api"}}}
	})
	return api, job
}

// preparedJob starts a manager and creates, in a new namespace, a job due daily at at,
// prepared up to 300 s ahead (changed by mutate first, when given); it waits for the
// prepared pod.
func preparedJob(name string, at time.Time, mutate ...func(*v1alpha1.LockedCronJob)) *v1alpha1.LockedCronJob {
	GinkgoHelper()
	startManager(clock.RealClock{})
	job := newJob(newNamespace(), name, dailyAt(at))
	job.Spec.PrepareAheadSeconds = ptr.To[int32](300)
	for _, m := range mutate {
		m(job)
	}
	createBefore(job, at)
	Eventually(func() []corev1.Pod { return podsOf(job) }, 15*time.Second).Should(HaveLen(1))
	return job
}
