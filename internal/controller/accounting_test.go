package controller

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// runPods plays the kubelet for the pods of ns that the test does not finish itself:
// each new pod's wrapped container is set running, so that it counts as started (envtest
// runs no kubelet; without it every pod would wait to start forever).
func runPods(ns string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var pods corev1.PodList
			if err := k8sClient.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				// The API server makes new pods Pending.
				if len(p.Status.ContainerStatuses) > 0 || (p.Status.Phase != "" && p.Status.Phase != corev1.PodPending) || p.DeletionTimestamp != nil {
					continue
				}
				setRunning(p)
				_ = k8sClient.Status().Update(ctx, p) // a conflict: the test wrote first
			}
		}
	}()
	DeferCleanup(func() { close(stop); <-done })
}

func setRunning(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: p.Annotations[runpod.AnnotationWrappedContainer], Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}
}

// denyPods makes admission refuse every pod in ns (a ValidatingAdmissionPolicy, as a
// quota or a policy engine would), and waits until it does.
func denyPods(ns string) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-pods-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "no pods in this namespace"}},
		},
	}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-pods-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() {
		_ = k8sClient.Delete(ctx, binding)
		_ = k8sClient.Delete(ctx, policy)
	})
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	Eventually(func() bool {
		err := k8sClient.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	}, 10*time.Second, 100*time.Millisecond).Should(BeTrue(), "the policy is in force")
}

func getPod(ns, name string) (*corev1.Pod, error) {
	var p corev1.Pod
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
	return &p, err
}

func gone(ns, name string) func() bool {
	return func() bool {
		_, err := getPod(ns, name)
		return apierrors.IsNotFound(err)
	}
}

func envValue(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

var _ = Describe("Accounting: every occurrence counted exactly once", func() {
	DescribeTable("counts each occurrence missed once while it cannot start, with the reason",
		func(block func(ns string, job *v1alpha1.LockedCronJob), reason string) {
			startManager(clock.RealClock{})
			ns := newNamespace()
			job := newJob(ns, "blocked", "* * * * * *")
			block(ns, job)
			Expect(k8sClient.Create(ctx, job)).To(Succeed())
			created := getJob(job).CreationTimestamp.Time

			// One occurrence a second: missed never outgrows the occurrences so far (it grew
			// 1, 2, 3, 5, 7 … when every pass counted the earlier ones again).
			bound := func() int64 { return int64(time.Since(created)/time.Second) + 1 }
			Eventually(func() int64 { return getJob(job).Status.Counters.Missed }, 10*time.Second).Should(BeNumerically(">=", 2))
			Consistently(func() bool { return getJob(job).Status.Counters.Missed <= bound() }, 4*time.Second, 200*time.Millisecond).Should(BeTrue())
			st := getJob(job).Status
			Expect(st.Recent).NotTo(BeEmpty())
			Expect(st.Recent[0].Outcome).To(Equal(runstatus.OutcomeMissed))
			Expect(st.Recent[0].Message).To(And(ContainSubstring("held back"), ContainSubstring(reason)))
			Expect(eventNotes(job, ReasonMissed)).To(ContainElement(ContainSubstring(reason)))
			Expect(podsOf(job)).To(BeEmpty())
		},
		Entry("the Redis Secret is missing", func(ns string, job *v1alpha1.LockedCronJob) {
			job.Spec.Lock.Redis.SecretRef.Name = "missing"
		}, "SecretNotFound"),
		Entry("admission forbids the pod", func(ns string, job *v1alpha1.LockedCronJob) {
			denyPods(ns)
		}, "forbidden"),
	)

	It("after downtime across a suspension, counts the occurrences up to the suspension as missed", func() {
		ns := newNamespace()
		job := newJob(ns, "suspended-while-down", "* * * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		created := getJob(job).CreationTimestamp.Time
		// A first pass observes the schedule (its clock before any occurrence), then the
		// controller is down.
		stop := startManager(clocktesting.NewFakePassiveClock(created.Add(-time.Hour)))
		Eventually(func() string { return getJob(job).Status.ObservedSchedule }).Should(HaveSuffix("suspend=false"))
		stop()
		Eventually(time.Now, 10*time.Second, 100*time.Millisecond).Should(BeTemporally(">", created.Add(3200*time.Millisecond)))
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) })
		suspendedAt := time.Now()
		Eventually(time.Now, 10*time.Second, 100*time.Millisecond).Should(BeTemporally(">", suspendedAt.Add(2*time.Second)))

		startManager(clock.RealClock{})
		Eventually(func() string { return getJob(job).Status.ObservedSchedule }).Should(HaveSuffix("suspend=true"))
		st := getJob(job).Status
		// Occurrences in (created, suspension]: 3 or 4 (managed fields have second precision);
		// none from the suspension on.
		Expect(st.Counters.Missed).To(BeNumerically(">=", 3))
		Expect(st.Counters.Missed).To(BeNumerically("<=", int64(suspendedAt.Sub(created)/time.Second)+1))
		Expect(st.Recent).To(ContainElement(And(HaveField("Outcome", runstatus.OutcomeMissed), HaveField("Message", ContainSubstring("suspend")))))
		Expect(podsOf(job)).To(BeEmpty())
	})

	// The mirror of the above: what falls due under the new schedule after the change and
	// before the controller sees it (it was down, or just slow) is the new schedule's. It
	// starts (within its deadline) or is counted missed; it is never dropped without a word.
	DescribeTable("after downtime across a change, starts the occurrence that fell after it",
		func(before func(*v1alpha1.LockedCronJob), change func(*v1alpha1.LockedCronJob)) {
			ns := newNamespace()
			occ := time.Now().Add(10 * time.Second).Truncate(time.Second) // room for a manager's first pass, stop and the change
			job := newJob(ns, "changed-while-down", dailyAt(occ))
			job.Spec.StartingDeadlineSeconds = ptr.To[int64](60)
			before(job)
			createBefore(job, occ)
			// A first pass observes the job as created, then the controller is down.
			stop := startManager(clock.RealClock{})
			Eventually(func() string { return getJob(job).Status.ObservedSchedule }).ShouldNot(BeEmpty())
			stop()
			changed := updateJob(job, change)
			Expect(specChangedAt(changed, time.Now())).To(BeTemporally("<", occ), "the change must land before the occurrence")
			// The occurrence passes while the controller is down.
			Eventually(time.Now, 15*time.Second, 100*time.Millisecond).Should(BeTemporally(">", occ.Add(time.Second)))

			startManager(clock.RealClock{})
			Eventually(func() error { _, err := getPod(ns, runpod.Name(job.Name, occ)); return err }).Should(Succeed(),
				"occurrence %s, after the change, neither started nor counted", occ.UTC().Format(time.RFC3339))
			Expect(getJob(job).Status.Counters.Missed).To(BeZero())
		},
		Entry("a resume", func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) },
			func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(false) }),
		Entry("a schedule edit", func(j *v1alpha1.LockedCronJob) { j.Spec.TimeZone = "Asia/Tokyo" },
			func(j *v1alpha1.LockedCronJob) { j.Spec.TimeZone = "UTC" }),
	)

	// A change the controller never saw as a change: the job was created suspended and
	// resumed before its first pass (the controller was down through both). Its first pass
	// must not take the spec it sees for the one in force since the creation: the
	// occurrence in between fell in the suspension and must not run, however long its
	// deadline. What the spec was before the change is unknown, so the pass says so. An
	// edit of the metadata only (the same field manager labelling the job) changes no spec:
	// the occurrence is due and runs.
	DescribeTable("after downtime from the creation, an edit before the first pass",
		func(suspended bool, edit func(*v1alpha1.LockedCronJob), runs bool) {
			ns := newNamespace()
			occ := time.Now().Add(4 * time.Second).Truncate(time.Second)
			job := newJob(ns, "edited-before-seen", dailyAt(occ))
			job.Spec.StartingDeadlineSeconds = ptr.To[int64](600)
			job.Spec.Suspend = ptr.To(suspended)
			createBefore(job, occ)
			// The occurrence passes; then the job is edited.
			Eventually(time.Now, 15*time.Second, 100*time.Millisecond).Should(BeTemporally(">", occ.Add(time.Second)))
			edited := updateJob(job, edit)
			Expect(specChangedAt(edited, time.Now())).To(BeTemporally(">", occ), "the edit must land after the occurrence")

			startManager(clock.RealClock{})
			Eventually(func() string { return getJob(job).Status.ObservedSchedule }).Should(HaveSuffix("suspend=false"))
			st := getJob(job).Status
			if runs {
				Expect(podsOf(job)).To(ConsistOf(HaveField("Name", runpod.Name(job.Name, occ))), "occurrence %s is due", occ.UTC().Format(time.RFC3339))
				Expect(st.ScheduleSince.Time).To(BeTemporally("==", job.CreationTimestamp.Time))
				Expect(eventNotes(job, ReasonChangedBeforeSeen)).To(BeEmpty())
				return
			}
			resumed := specChangedAt(edited, time.Now())
			Expect(podsOf(job)).To(BeEmpty(), "occurrence %s fell in the suspension", occ.UTC().Format(time.RFC3339))
			Expect(st.ScheduleSince.Time).To(BeTemporally("==", resumed), "in force from the resume, not the creation")
			Expect(st.Counters.Missed).To(BeZero(), "not counted: under a suspension an occurrence is not due")
			Expect(st.NextScheduleTime.Time).To(BeTemporally("==", occ.Add(24*time.Hour)))
			Eventually(func() []string { return eventNotes(job, ReasonChangedBeforeSeen) }).Should(ContainElement(And(
				ContainSubstring(resumed.UTC().Format(time.RFC3339)), ContainSubstring("neither started nor counted"))))
		},
		Entry("created suspended, then resumed: never runs the occurrence of the suspension", true,
			func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(false) }, false),
		Entry("labelled by the same field manager: runs it", false,
			func(j *v1alpha1.LockedCronJob) { j.Labels = map[string]string{"team": "billing"} }, true),
	)

	It("deletes a pod that has not started by its deadline and counts it missed with the pod's own reason", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(5 * time.Second).Truncate(time.Second)
		job := newJob(ns, "stuck", dailyAt(at))
		job.Spec.StartingDeadlineSeconds = ptr.To[int64](8) // room for the kubelet's word before it, on a loaded machine
		createBefore(job, at)
		name := runpod.Name("stuck", at)
		var pod *corev1.Pod
		Eventually(func() error { var err error; pod, err = getPod(ns, name); return err }, 10*time.Second).Should(Succeed())
		Expect(pod.Finalizers).To(ContainElement(runpod.FinalizerTracking))
		pod.Status.Phase = corev1.PodPending
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", Image: "busybox", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "busybox"`}}}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(func() int32 { return getJob(job).Status.ActiveCount }).Should(Equal(int32(1)))

		Eventually(gone(ns, name), 15*time.Second).Should(BeTrue(), "deleted at occurrence + startingDeadlineSeconds")
		Expect(time.Now()).To(BeTemporally(">=", at.Add(8*time.Second)))
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }).Should(Equal(int64(1)))
		st := getJob(job).Status
		Expect(st.ActiveCount).To(BeZero())
		Expect(st.Recent[0].Outcome).To(Equal(string(report.Missed)))
		Expect(st.Recent[0].Pod).To(Equal(name))
		Expect(st.Recent[0].Message).To(ContainSubstring("ImagePullBackOff"))
		Eventually(func() []string { return eventNotes(job, string(report.Missed)) }).Should(ContainElement(ContainSubstring("ImagePullBackOff")))
		Consistently(func() int64 { return getJob(job).Status.Counters.Missed }, 2*time.Second).Should(Equal(int64(1)), "counted once")
	})

	It("deletes a pod still waiting after the default pending timeout (no startingDeadlineSeconds)", func() {
		ns := newNamespace()
		job := newJob(ns, "pending", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		pod := createPodFor(job, time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC))
		p, err := getPod(ns, pod.Name)
		Expect(err).NotTo(HaveOccurred())
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient memory."}}
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())

		// The controller looks an hour and a minute after the pod was created.
		startManager(clocktesting.NewFakePassiveClock(time.Now().Add(tracking.DefaultPendingTimeout + time.Minute)))
		Eventually(gone(ns, pod.Name), 20*time.Second).Should(BeTrue())
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }).Should(Equal(int64(1)))
		Expect(getJob(job).Status.Recent[0].Message).To(And(ContainSubstring("pending timeout (1h0m0s)"), ContainSubstring("Unschedulable: 0/3 nodes are available")))
	})

	It("adds no pod while an earlier one has not started: the occurrence is missed, named as such", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "backlog", "* * * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() []corev1.Pod { return podsOf(job) }, 5*time.Second).Should(HaveLen(1))
		first := podsOf(job)[0]
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }, 5*time.Second).Should(BeNumerically(">=", 2))
		Expect(podsOf(job)).To(HaveLen(1), "one pod waits; no backlog")
		st := getJob(job).Status
		Expect(st.Recent[0].Message).To(And(ContainSubstring("pod "+first.Name), ContainSubstring("has not started")))

		// Once it starts, the next occurrence gets its pod.
		p, err := getPod(ns, first.Name)
		Expect(err).NotTo(HaveOccurred())
		setRunning(p)
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		Eventually(func() []corev1.Pod { return podsOf(job) }, 5*time.Second).Should(HaveLen(2))
	})

	It("tells lockwrap not to start after the next blackout window opens", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(5 * time.Second).Truncate(time.Second)
		start, end := metav1.NewTime(at.Add(time.Hour)), metav1.NewTime(at.Add(2*time.Hour))
		job := newJob(ns, "notafter", dailyAt(at))
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "later", Start: &start, End: &end}}}
		createBefore(job, at)
		var pod *corev1.Pod
		Eventually(func() error { var err error; pod, err = getPod(ns, runpod.Name("notafter", at)); return err }, 10*time.Second).Should(Succeed())
		Expect(envValue(pod, "LOCKEDCRON_NOT_AFTER")).To(Equal(start.UTC().Format(time.RFC3339)))
	})

	// podBeforeRollout creates a job guarded by the rollout of Deployment web, waits for
	// the pod of its occurrence (3 s ahead), and returns the job, the pod and a function
	// that starts the rollout.
	podBeforeRolloutWrapped := func(name string, wrap func(client.Client) client.Client) (*v1alpha1.LockedCronJob, *corev1.Pod, func()) {
		startManagerWrapped(clock.RealClock{}, CacheOptions(), wrap)
		ns := newNamespace()
		d := newDeployment(ns, "web")
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		writeStatus(d, deploymentDone)
		at := time.Now().Add(5 * time.Second).Truncate(time.Second)
		job := newJob(ns, name, dailyAt(at))
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "web"}}}
		createBefore(job, at)
		var pod *corev1.Pod
		Eventually(func() error { var err error; pod, err = getPod(ns, runpod.Name(name, at)); return err }, 10*time.Second).Should(Succeed())
		return job, pod, func() {
			writeStatus(d, func(d *appsv1.Deployment) {
				deploymentDone(d)
				d.Status.AvailableReplicas = 1 // rolling out
			})
		}
	}
	podBeforeRollout := func(name string) (*v1alpha1.LockedCronJob, *corev1.Pod, func()) {
		return podBeforeRolloutWrapped(name, nil)
	}

	It("deletes a pod that has not started when a rollout blackout begins, and counts it missed", func() {
		job, pod, rollout := podBeforeRollout("caught")
		rollout()
		Eventually(gone(pod.Namespace, pod.Name), 5*time.Second).Should(BeTrue())
		Eventually(func() int64 { return getJob(job).Status.Counters.Missed }).Should(Equal(int64(1)))
		Expect(getJob(job).Status.Recent[0].Message).To(ContainSubstring("a blackout began before its job started: Deployment/web is rolling out"))
	})

	// The soak found it: a pod whose job started just before a blackout began, its Running
	// status not yet seen, was counted missed and deleted; its report (Failed, exit 143)
	// came a second later and was never counted. A pod on a node may have started: it is
	// deleted, and counted from what its kubelet says.
	DescribeTable("withdraws a pod on a node that has not started when a blackout begins, and counts what its kubelet says",
		func(kubelet func(pod *corev1.Pod), counters v1alpha1.Counters, msg string) {
			job, pod, rollout := podBeforeRollout("raced")
			ns, name := pod.Namespace, pod.Name
			bind(pod)
			Eventually(func() string { p, _ := getPod(ns, name); return p.Spec.NodeName }).Should(Equal("node-1"))

			rollout()
			Eventually(func() bool { p, _ := getPod(ns, name); return p.DeletionTimestamp != nil }, 5*time.Second).Should(BeTrue(), "withdrawn")
			st := getJob(job).Status
			Expect(st.Counters.Missed+st.Counters.Runs).To(BeZero(), "nothing counted before the kubelet's word")
			pod, _ = getPod(ns, name)
			Expect(pod.Annotations).To(HaveKeyWithValue(runpod.AnnotationWithdrawn, ContainSubstring("a blackout began before its job started")))

			kubelet(pod)
			// (A bound pod stays Terminating without a kubelet to confirm its deletion.)
			Eventually(func() string { p, _ := getPod(ns, name); return p.Labels[runpod.LabelCounted] }, 5*time.Second).Should(Equal("true"), "counted and released")
			Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }).Should(Equal(counters))
			if msg != "" {
				Expect(getJob(job).Status.Recent[0].Message).To(ContainSubstring(msg))
			}
		},
		Entry("its job had started: the report counts", func(pod *corev1.Pod) {
			finishPod(pod, corev1.PodFailed, 143, reportJSON(report.Report{Outcome: report.Failed, Occurrence: pod.Annotations[runpod.AnnotationScheduledTime],
				Holder: "h", FencingToken: 1, ExitCode: 143}))
		}, v1alpha1.Counters{Runs: 1, Failed: 1}, ""),
		Entry("it never started: missed, for the blackout", func(pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodFailed
			Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		}, v1alpha1.Counters{Missed: 1}, "a blackout began before its job started: Deployment/web is rolling out"),
	)

	// The sibling of the one above: the pass decides from its cache, and the cache can
	// show a pod unbound that the scheduler has already bound (the binding's event not
	// delivered yet), whose kubelet may then start it. Counted missed at once (as an
	// unbound pod was) and released, its run went uncounted. Only the API server's view
	// at the deletion is sure (it refuses to bind a pod being deleted): a pod is counted
	// as never started only once it is deleted, and a deleted bound pod waits for its
	// kubelet's word.
	It("counts a pod its cache showed unbound from its kubelet's word when a blackout begins", func() {
		job, pod, rollout := podBeforeRolloutWrapped("stale", func(c client.Client) client.Client {
			return unboundUntilDeleted{c}
		})
		ns, name := pod.Namespace, pod.Name
		bind(pod)

		rollout()
		Eventually(func() bool { p, _ := getPod(ns, name); return p.DeletionTimestamp != nil }, 5*time.Second).Should(BeTrue(), "withdrawn")
		st := getJob(job).Status
		Expect(st.Counters).To(Equal(v1alpha1.Counters{}), "nothing counted before the kubelet's word")
		pod, _ = getPod(ns, name)
		finishPod(pod, corev1.PodFailed, 143, reportJSON(report.Report{Outcome: report.Failed, Occurrence: pod.Annotations[runpod.AnnotationScheduledTime],
			Holder: "h", FencingToken: 1, ExitCode: 143, StartedAt: time.Now().UTC().Format(time.RFC3339Nano)}))
		Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 5*time.Second).Should(Equal(v1alpha1.Counters{Runs: 1, Failed: 1}))
		Eventually(func() string { p, _ := getPod(ns, name); return p.Labels[runpod.LabelCounted] }, 5*time.Second).Should(Equal("true"), "counted and released")
	})

	It("tracks pods with a finalizer: counted and released in one pass, still counted when deleted first", func() {
		ns := newNamespace()
		job := newJob(ns, "tracked", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		// While the controller is down: one pod finishes and is deleted, one is deleted
		// before it started, one finishes normally.
		finished := createPodFor(job, base)
		finishPod(finished, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 1}))
		Expect(k8sClient.Delete(ctx, finished)).To(Succeed())
		pending := createPodFor(job, base.Add(time.Minute))
		Expect(k8sClient.Delete(ctx, pending)).To(Succeed())
		kept := createPodFor(job, base.Add(2*time.Minute))
		finishPod(kept, corev1.PodFailed, 1, reportJSON(report.Report{Outcome: report.Failed, Holder: "h", FencingToken: 2, ExitCode: 1}))
		p, err := getPod(ns, finished.Name)
		Expect(err).NotTo(HaveOccurred(), "the finalizer keeps a deleted pod until it is counted")
		Expect(p.DeletionTimestamp).NotTo(BeNil())

		startManager(clock.RealClock{})
		Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }).Should(Equal(v1alpha1.Counters{Runs: 2, Succeeded: 1, Failed: 1, Missed: 1}))
		Eventually(gone(ns, finished.Name)).Should(BeTrue())
		Eventually(gone(ns, pending.Name)).Should(BeTrue())
		Expect(getJob(job).Status.Recent).To(ContainElement(And(HaveField("Pod", pending.Name), HaveField("Message", ContainSubstring("deleted before its job started")))))
		Eventually(func() []string {
			p, err := getPod(ns, kept.Name)
			Expect(err).NotTo(HaveOccurred())
			return p.Finalizers
		}).Should(BeEmpty(), "released in the pass that counted it")
		Eventually(func() []string { return unmarkedCounted(job) }).Should(BeEmpty())
		Consistently(func() v1alpha1.Counters { return getJob(job).Status.Counters }, 2*time.Second).Should(Equal(v1alpha1.Counters{Runs: 2, Succeeded: 1, Failed: 1, Missed: 1}))
	})

	DescribeTable("leaves no pod with the finalizer when its LockedCronJob is deleted",
		func(policy metav1.DeletionPropagation) {
			startManager(clock.RealClock{})
			ns := newNamespace()
			job := newJob(ns, "owner", rarely)
			Expect(k8sClient.Create(ctx, job)).To(Succeed())
			base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			waiting := createPodFor(job, base)
			running := createPodFor(job, base.Add(time.Minute))
			setRunning(running)
			Expect(k8sClient.Status().Update(ctx, running)).To(Succeed())
			// (A start is news once its job has run startNewsDelay: up to 11 s after it.)
			Eventually(func() int32 { return getJob(job).Status.ActiveCount }, 30*time.Second).Should(Equal(int32(2)))

			Expect(k8sClient.Delete(ctx, getJob(job), client.PropagationPolicy(policy))).To(Succeed())
			// envtest runs no garbage collector: the pods stay, without the finalizer (with
			// foreground deletion, the job waits for them).
			for _, name := range []string{waiting.Name, running.Name} {
				Eventually(func() []string {
					p, err := getPod(ns, name)
					Expect(err).NotTo(HaveOccurred())
					return p.Finalizers
				}).Should(BeEmpty(), "pod %s released", name)
			}
		},
		Entry("background (kubectl delete)", metav1.DeletePropagationBackground),
		Entry("foreground", metav1.DeletePropagationForeground),
	)

	It("counts an OnFailure pod once per occurrence, with its attempts", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "retries", rarely)
		job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		occ := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
		pod := createPodFor(job, occ)
		Expect(pod.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyOnFailure))

		// Two failed attempts (the last one's report stays as lastTerminationState), then
		// one that succeeds.
		p, err := getPod(ns, pod.Name)
		Expect(err).NotTo(HaveOccurred())
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "job", Image: "busybox", RestartCount: 2,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: now, FinishedAt: now,
				Message: reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 3})}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: now, FinishedAt: now,
				Message: reportJSON(report.Report{Outcome: report.Failed, Holder: "h", FencingToken: 3, ExitCode: 1})}},
		}}
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())

		Eventually(func() []string { return unmarkedCounted(job) }).Should(BeEmpty())
		Eventually(func() v1alpha1.Counters { return getJob(job).Status.Counters }).Should(Equal(v1alpha1.Counters{Runs: 1, Succeeded: 1}))
		rec := getJob(job).Status.Recent[0]
		Expect(rec.Outcome).To(Equal(string(report.Succeeded)))
		Expect(rec.Message).To(ContainSubstring("after 3 attempts"))
		Expect(strings.Count(rec.Message, "attempts")).To(Equal(1))
	})

	It("defaults spec.backoffLimit to 6, as a Job's", func() {
		ns := newNamespace()
		job := newJob(ns, "defaulted", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Expect(getJob(job).Spec.BackoffLimit).To(HaveValue(BeEquivalentTo(v1alpha1.DefaultBackoffLimit)))
	})
})

// unboundUntilDeleted is the manager's client whose cache shows its pods unbound until
// they are deleted: a binding whose watch event has not arrived when the pass decides.
type unboundUntilDeleted struct{ client.Client }

func (c unboundUntilDeleted) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if pods, ok := list.(*corev1.PodList); ok {
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				pods.Items[i].Spec.NodeName = ""
			}
		}
	}
	return nil
}
