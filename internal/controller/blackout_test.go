package controller

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// envtest runs no workload controllers: tests create Deployments, StatefulSets and
// DaemonSets and write their status as those controllers would.

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func newDeployment(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func newStatefulSet(ns, name string, labels map[string]string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](3),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:    podTemplate(name),
		},
	}
}

func newDaemonSet(ns, name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

// writeStatus reads obj, lets set change it and writes its status, retrying on conflicts.
func writeStatus[T client.Object](obj T, set func(T)) {
	EventuallyWithOffset(1, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		set(obj)
		return k8sClient.Status().Update(ctx, obj)
	}).Should(Succeed())
}

func deploymentDone(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
}

func statefulSetDone(s *appsv1.StatefulSet) {
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3,
		AvailableReplicas: 3, CurrentRevision: "db-2", UpdateRevision: "db-2"}
}

func daemonSetDone(d *appsv1.DaemonSet) {
	d.Status = appsv1.DaemonSetStatus{ObservedGeneration: d.Generation, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2,
		UpdatedNumberScheduled: 2, NumberAvailable: 2, NumberReady: 2}
}

// blackoutIs is the Blackout condition as "Status/Reason: message".
func blackoutIs(j *v1alpha1.LockedCronJob) string {
	c := condition(j, ConditionBlackout)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

func occurrenceOf(p corev1.Pod) time.Time {
	t, err := time.Parse(time.RFC3339, p.Annotations[runpod.AnnotationScheduledTime])
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return t
}

var _ = Describe("Blackout", func() {
	It("detects rollouts from Deployment, StatefulSet and DaemonSet status, with settle", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		api, db, agent := newDeployment(ns, "api"), newStatefulSet(ns, "db", map[string]string{"tier": "data"}), newDaemonSet(ns, "agent")
		other := newStatefulSet(ns, "cache", map[string]string{"tier": "cache"})
		for _, o := range []client.Object{api, db, agent, other} {
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
		}
		writeStatus(api, deploymentDone)
		writeStatus(db, statefulSetDone)
		writeStatus(other, statefulSetDone)
		writeStatus(agent, daemonSetDone)

		job := newJob(ns, "guarded", rarely)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{
			{Kind: v1alpha1.KindDeployment, Name: "api", Settle: &metav1.Duration{Duration: 8 * time.Second}},
			{Kind: v1alpha1.KindStatefulSet, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "data"}}},
			{Kind: v1alpha1.KindDaemonSet, Name: "agent", Settle: &metav1.Duration{Duration: 6 * time.Second}},
		}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return blackoutIs(job) }).Should(HavePrefix("False/NoBlackout"))

		By("a Deployment whose new generation is not yet observed")
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(api), d)).To(Succeed())
		d.Spec.Template.Annotations = map[string]string{"restartedAt": time.Now().Format(time.RFC3339)}
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		Eventually(func() string { return blackoutIs(job) }).Should(And(HavePrefix("True/RolloutInProgress"), ContainSubstring("Deployment/api"), ContainSubstring("not yet observed")))
		Expect(getJob(job).Status.Rollouts).To(ConsistOf(HaveField("Name", "api")))
		writeStatus(api, func(d *appsv1.Deployment) {
			deploymentDone(d)
			d.Status.UpdatedReplicas = 1
		})
		Eventually(func() string { return blackoutIs(job) }).Should(ContainSubstring("1 of 2 replicas updated"))

		By("the Deployment completes: its Progressing condition dates the completion; settle 8s (a settling state a late pass still sees)")
		writeStatus(api, func(d *appsv1.Deployment) {
			deploymentDone(d)
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
				Reason: "NewReplicaSetAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		})
		Eventually(func() string { return blackoutIs(job) }).Should(And(HavePrefix("True/RolloutSettling"), ContainSubstring("Deployment/api")))
		Eventually(func() string { return blackoutIs(job) }, 15*time.Second).Should(HavePrefix("False/NoBlackout"), "requeued when the settle time ends")
		Expect(getJob(job).Status.Rollouts).To(BeEmpty())

		By("a StatefulSet picked by selector, its update revision not yet current")
		writeStatus(db, func(s *appsv1.StatefulSet) {
			statefulSetDone(s)
			s.Status.UpdateRevision = "db-3"
		})
		Eventually(func() string { return blackoutIs(job) }).Should(And(HavePrefix("True/RolloutInProgress"), ContainSubstring("StatefulSet/db"), ContainSubstring("db-3")))
		writeStatus(db, func(s *appsv1.StatefulSet) {
			statefulSetDone(s)
			s.Status.ReadyReplicas, s.Status.AvailableReplicas = 2, 2
		})
		Eventually(func() string { return blackoutIs(job) }).Should(ContainSubstring("2 of 3 replicas ready"))
		writeStatus(db, statefulSetDone)
		Eventually(func() string { return blackoutIs(job) }).Should(HavePrefix("False/NoBlackout"))

		By("a StatefulSet the selector does not pick")
		writeStatus(other, func(s *appsv1.StatefulSet) {
			statefulSetDone(s)
			s.Status.ReadyReplicas, s.Status.AvailableReplicas = 0, 0
		})
		Consistently(func() string { return blackoutIs(job) }, time.Second).Should(HavePrefix("False/NoBlackout"))

		By("a DaemonSet not updated everywhere, then settling 6s from when the controller saw it complete")
		writeStatus(agent, func(d *appsv1.DaemonSet) {
			daemonSetDone(d)
			d.Status.UpdatedNumberScheduled = 1
		})
		Eventually(func() string { return blackoutIs(job) }).Should(And(HavePrefix("True/RolloutInProgress"), ContainSubstring("DaemonSet/agent"), ContainSubstring("1 of 2 pods updated")))
		writeStatus(agent, daemonSetDone)
		Eventually(func() string { return blackoutIs(job) }).Should(And(HavePrefix("True/RolloutSettling"), ContainSubstring("DaemonSet/agent")))
		rs := getJob(job).Status.Rollouts
		Expect(rs).To(HaveLen(1))
		Expect(rs[0].CompletedAt).NotTo(BeNil())
		Eventually(func() string { return blackoutIs(job) }, 10*time.Second).Should(HavePrefix("False/NoBlackout"))
		Expect(getJob(job).Status.Counters.SkippedBlackout).To(BeZero())
	})

	It("skips the occurrences inside a window that opens and closes around them", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		open := time.Now().Add(8 * time.Second).Truncate(time.Second) // room for a run before the window on a loaded machine
		closeAt := open.Add(3 * time.Second)
		start, end := metav1.NewTime(open), metav1.NewTime(closeAt)
		runPods(ns) // a kubelet: pods start (one that had not would be dropped when the window opens)
		job := newJob(ns, "windowed", "* * * * * *")
		job.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](50)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "maint", Start: &start, End: &end}}}
		createBefore(job, open)

		Eventually(func() []v1alpha1.UpcomingOccurrence { return getJob(job).Status.Upcoming }).Should(
			ContainElement(HaveField("BlockedBy", `window "maint"`)), "the preview shows the window ahead")
		Eventually(func() string { return blackoutIs(job) }, 15*time.Second).Should(And(HavePrefix("True/WindowOpen"), ContainSubstring(`window "maint"`), ContainSubstring(closeAt.UTC().Format(time.RFC3339))))
		Eventually(func() string { return blackoutIs(job) }, 10*time.Second).Should(HavePrefix("False/NoBlackout"))
		Eventually(func() []corev1.Pod { return podsOf(job) }, 10*time.Second).Should(ContainElement(
			Satisfy(func(p corev1.Pod) bool { return !occurrenceOf(p).Before(closeAt) })), "runs again once the window closed")

		for _, p := range podsOf(job) {
			occ := occurrenceOf(p)
			Expect(!occ.Before(open) && occ.Before(closeAt)).To(BeFalse(), "pod %s runs an occurrence inside the window", p.Name)
		}
		Expect(podsOf(job)).To(ContainElement(Satisfy(func(p corev1.Pod) bool { return occurrenceOf(p).Before(open) })), "ran before the window")
		st := getJob(job).Status
		Expect(st.Counters.SkippedBlackout).To(BeNumerically(">=", 1))
		Expect(st.Counters.SkippedBlackout).To(BeNumerically("<=", 3), "three occurrences in [open, close)")
		Expect(st.Recent).To(ContainElement(And(HaveField("Outcome", runstatus.OutcomeSkippedBlackout), HaveField("Message", ContainSubstring(`window "maint"`)))))
		// Its Event series is the window's own (the action names it), not every window's.
		Expect(eventsAbout(job, ReasonSkippedBlackout)).To(ContainElement(And(
			HaveField("Action", `Window window "maint"`), HaveField("Note", ContainSubstring(`window "maint"`)))))
	})

	It("defers an occurrence to the end of the window, and misses it when that is past the deadline", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		occ := time.Now().Add(5 * time.Second).Truncate(time.Second)
		window := func(end time.Time) []v1alpha1.BlackoutWindow {
			s, e := metav1.NewTime(occ.Add(-time.Second)), metav1.NewTime(end)
			return []v1alpha1.BlackoutWindow{{Name: "freeze", Start: &s, End: &e}}
		}
		deferred := newJob(ns, "deferred", dailyAt(occ))
		deferred.Spec.StartingDeadlineSeconds = ptr.To[int64](30)
		deferred.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Windows: window(occ.Add(3 * time.Second))}
		createBefore(deferred, occ)
		late := newJob(ns, "late", dailyAt(occ))
		late.Spec.StartingDeadlineSeconds = ptr.To[int64](2)
		late.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Windows: window(occ.Add(5 * time.Second))}
		createBefore(late, occ)

		Eventually(func() *metav1.Time { return getJob(deferred).Status.Deferred }, 10*time.Second).Should(
			Satisfy(func(t *metav1.Time) bool { return t != nil && t.Time.Equal(occ) }))
		Expect(podsOf(deferred)).To(BeEmpty())
		Eventually(func() []string { return eventNotes(deferred, ReasonDeferred) }).Should(ConsistOf(ContainSubstring(`window "freeze"`)))

		var pod corev1.Pod
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: runpod.Name("deferred", occ)}, &pod)
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(time.Now()).To(BeTemporally(">=", occ.Add(3*time.Second)), "started when the window closed, not before")
		Expect(pod.Annotations).To(HaveKeyWithValue(runpod.AnnotationScheduledTime, occ.UTC().Format(time.RFC3339)), "the deferred occurrence keeps its scheduled time")
		Eventually(func() *metav1.Time { return getJob(deferred).Status.Deferred }).Should(BeNil())
		Expect(getJob(deferred).Status.LastScheduleTime.Time).To(BeTemporally("==", occ))
		Expect(getJob(deferred).Status.Counters.SkippedBlackout).To(BeZero())

		Eventually(func() int64 { return getJob(late).Status.Counters.Missed }, 10*time.Second).Should(Equal(int64(1)))
		Expect(getJob(late).Status.Recent[0].Outcome).To(Equal(runstatus.OutcomeMissed))
		Expect(getJob(late).Status.Recent[0].Message).To(ContainSubstring("startingDeadlineSeconds"))
		Eventually(func() []string { return eventNotes(late, ReasonMissed) }).Should(ContainElement(ContainSubstring(`window "freeze"`)))
		Consistently(func() []corev1.Pod { return podsOf(late) }, 3*time.Second).Should(BeEmpty(), "never started late")
	})

	It("with Defer, a window that spans several occurrences runs the last one at its end; the others count as skippedBlackout", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		// Every 2 s; the window [open, open+3s) holds the occurrences open and open+2s
		// (one-off window times have second precision: metav1.Time).
		open := time.Now().Add(9 * time.Second).Truncate(time.Second) // room for a fresh manager's first passes on a loaded machine
		if open.Unix()%2 != 0 {
			open = open.Add(time.Second)
		}
		closeAt, last := open.Add(3*time.Second), open.Add(2*time.Second)
		s, e := metav1.NewTime(open), metav1.NewTime(closeAt)
		runPods(ns)
		job := newJob(ns, "swallowed", "*/2 * * * * *")
		job.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](50)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Windows: []v1alpha1.BlackoutWindow{{Name: "w", Start: &s, End: &e}}}
		createBefore(job, open)
		Eventually(func() error {
			var p corev1.Pod
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: runpod.Name("swallowed", last)}, &p)
		}, 20*time.Second, 50*time.Millisecond).Should(Succeed(), "the last occurrence in the window starts at its end")
		Expect(time.Now()).To(BeTemporally(">=", closeAt))
		for _, p := range podsOf(job) {
			Expect(occurrenceOf(p)).NotTo(BeTemporally("==", open), "pod %s runs the superseded occurrence", p.Name)
		}
		Eventually(func() int64 { return getJob(job).Status.Counters.SkippedBlackout }).Should(Equal(int64(1)))
		st := getJob(job).Status
		Expect(st.Counters.Missed).To(BeZero())
		Expect(st.Recent).To(ContainElement(HaveField("Message", ContainSubstring("superseded"))))
		Eventually(func() []string { return eventReasons(job) }).Should(ContainElements(ReasonDeferred, ReasonSkippedBlackout))
	})

	It("with Defer, a suspension while an occurrence is deferred counts each occurrence of the window once", func() {
		// The soak found it: in a window, occurrence A deferred, then superseded by B
		// (skippedBlackout) and B deferred; the suspension then counted A missed again.
		startManager(clock.RealClock{})
		ns := newNamespace()
		s, e := metav1.NewTime(time.Now().Add(-time.Second)), metav1.NewTime(time.Now().Add(time.Minute))
		job := newJob(ns, "suspended-in-window", "*/2 * * * * *")
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Windows: []v1alpha1.BlackoutWindow{{Name: "w", Start: &s, End: &e}}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() bool {
			st := getJob(job).Status
			return st.Counters.SkippedBlackout >= 1 && st.Deferred != nil
		}, 10*time.Second, 50*time.Millisecond).Should(BeTrue(), "one occurrence superseded, the next deferred")
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Suspend = ptr.To(true) })
		Eventually(func() string { return getJob(job).Status.ObservedSchedule }).Should(HaveSuffix("suspend=true"))
		got := getJob(job)
		sched, err := schedule.Parse(got.Spec.Schedule, "UTC")
		Expect(err).NotTo(HaveOccurred())
		var want int64 // the occurrences in (creation, suspension]
		for at := sched.Next(got.CreationTimestamp.Time); !at.After(specChangedAt(got, time.Now())); at = sched.Next(at) {
			want++
		}
		st := got.Status
		Expect(st.Counters.SkippedBlackout+st.Counters.Missed).To(Equal(want), "skippedBlackout %d + missed %d", st.Counters.SkippedBlackout, st.Counters.Missed)
		Expect(st.Deferred).To(BeNil())
		Expect(podsOf(job)).To(BeEmpty())
	})

	It("defers an occurrence while a Deployment rolls out: starts when it completes, misses past the deadline", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		for _, n := range []string{"web", "slow"} {
			d := newDeployment(ns, n)
			Expect(k8sClient.Create(ctx, d)).To(Succeed())
			writeStatus(d, func(d *appsv1.Deployment) {
				deploymentDone(d)
				d.Status.AvailableReplicas = 1 // rolling out
			})
		}
		occ := time.Now().Add(5 * time.Second).Truncate(time.Second)
		mk := func(name, dep string, deadline int64) *v1alpha1.LockedCronJob {
			j := newJob(ns, name, dailyAt(occ))
			j.Spec.StartingDeadlineSeconds = ptr.To(deadline)
			j.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: dep}}}
			createBefore(j, occ)
			return j
		}
		waits, gives := mk("waits", "web", 60), mk("gives-up", "slow", 2)
		Eventually(func() *metav1.Time { return getJob(waits).Status.Deferred }, 10*time.Second).ShouldNot(BeNil())
		Eventually(func() []string { return eventNotes(waits, ReasonDeferred) }).Should(ContainElement(ContainSubstring("Deployment/web is rolling out")))
		Expect(getJob(waits).Status.Upcoming).NotTo(BeEmpty())
		Consistently(func() []corev1.Pod { return podsOf(waits) }, time.Second).Should(BeEmpty())

		writeStatus(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, deploymentDone)
		Eventually(func() []corev1.Pod { return podsOf(waits) }, 5*time.Second).Should(HaveLen(1), "started by the Deployment's event, not by polling")
		Expect(occurrenceOf(podsOf(waits)[0])).To(BeTemporally("==", occ))

		Eventually(func() int64 { return getJob(gives).Status.Counters.Missed }, 10*time.Second).Should(Equal(int64(1)))
		Expect(getJob(gives).Status.Deferred).To(BeNil())
		Expect(podsOf(gives)).To(BeEmpty())
		// Missed for the rollout, not "the controller was down or busy" (helper-98).
		Expect(getJob(gives).Status.Recent).To(ContainElement(And(HaveField("Outcome", runstatus.OutcomeMissed),
			HaveField("Message", And(ContainSubstring("Deployment/slow is rolling out"), ContainSubstring("lasted past it"))))))
	})

	It("reports a window schedule or a selector CEL cannot check as Ready=False naming the field", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "badwindow", "* * * * * *")
		// Valid windows are 12 hours away from now (the manager runs on the real clock):
		// fixed hours made the spec fail whenever CI ran inside them (23:00–24:00 UTC).
		away := (time.Now().UTC().Hour() + 12) % 24
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{
			{Schedule: fmt.Sprintf("0 %d * * 6", away), Duration: &metav1.Duration{Duration: time.Hour}},
			{Schedule: "0 25 * * *", Duration: &metav1.Duration{Duration: time.Hour}},
		}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(job, ConditionReady) }).Should(
			Satisfy(func(c *metav1.Condition) bool {
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonInvalidBlackout && c.Message != "" &&
					c.Message[:len("spec.blackout.windows[1].schedule")] == "spec.blackout.windows[1].schedule"
			}))
		Eventually(func() []string { return eventReasons(job) }).Should(ContainElement(ReasonInvalidBlackout))
		Consistently(func() []corev1.Pod { return podsOf(job) }, 1500*time.Millisecond).Should(BeEmpty(), "nothing starts while the blackout cannot be read")

		job2 := newJob(ns, "badselector", "@hourly")
		job2.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment,
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}}}}
		Expect(k8sClient.Create(ctx, job2)).To(Succeed())
		Eventually(func() string {
			c := condition(job2, ConditionReady)
			if c == nil {
				return ""
			}
			return c.Reason + ": " + c.Message
		}).Should(HavePrefix(ReasonInvalidBlackout + ": spec.blackout.rollouts[0].selector: "))

		By("fixing it brings the job back")
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Blackout.Windows[1].Schedule = fmt.Sprintf("0 %d * * *", away) })
		Eventually(func() []corev1.Pod { return podsOf(job) }, 5*time.Second).ShouldNot(BeEmpty())
	})
	// A reference that matches no workload guards nothing: right for a workload deleted or
	// scaled away, silent for a misspelled name. The Blackout condition says which.
	It("says in the Blackout condition which rollout references match no workload", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		api := newDeployment(ns, "api")
		Expect(k8sClient.Create(ctx, api)).To(Succeed())
		writeStatus(api, deploymentDone)
		job := newJob(ns, "misspelled", rarely)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{
			{Kind: v1alpha1.KindDeployment, Name: "api"}, {Kind: v1alpha1.KindDeployment, Name: "apii"}}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return blackoutIs(job) }).Should(Equal(
			"False/NoBlackout: no blackout in effect; guarding nothing: Deployment/apii not found (spec.blackout.rollouts[1])"))

		By("fixed, it says nothing more")
		updateJob(job, func(j *v1alpha1.LockedCronJob) { j.Spec.Blackout.Rollouts = j.Spec.Blackout.Rollouts[:1] })
		Eventually(func() string { return blackoutIs(job) }).Should(Equal("False/NoBlackout: no blackout in effect"))
	})
})

var _ = Describe("accountDeferred", func() {
	t0 := time.Date(2026, 6, 6, 10, 0, 0, 0, time.UTC)
	hourly, _ := schedule.Parse("0 * * * *", "UTC")
	run := func(deadline *int64, earliest, now time.Time) (*pass, schedule.Plan) {
		job := newJob("x", "j", "0 * * * *")
		job.Spec.StartingDeadlineSeconds = deadline
		p := &pass{job: job, status: &v1alpha1.LockedCronJobStatus{Deferred: &metav1.Time{Time: t0}}, now: now}
		var dl *time.Duration
		if deadline != nil {
			d := time.Duration(*deadline) * time.Second
			dl = &d
		}
		plan := hourly.Plan(schedule.Input{Earliest: earliest, Now: now, StartingDeadline: dl})
		accountDeferred(p, &plan, hourly, earliest, dl, "")
		return p, plan
	}
	It("does not count again the occurrences before the deferred one", func() {
		p, plan := run(nil, t0.Add(-3*time.Hour), t0.Add(time.Minute))
		Expect(plan.Missed).To(BeZero(), "09:00 and 08:00 were counted when 10:00 was deferred")
		Expect(*plan.Due).To(BeTemporally("==", t0))
		Expect(p.status.Counters.SkippedBlackout).To(BeZero())
	})
	It("counts a deferred occurrence a newer one replaced as skippedBlackout, not missed", func() {
		p, plan := run(nil, t0.Add(-3*time.Hour), t0.Add(time.Hour))
		Expect(plan.Missed).To(BeZero())
		Expect(*plan.Due).To(BeTemporally("==", t0.Add(time.Hour)))
		Expect(p.status.Counters.SkippedBlackout).To(Equal(int64(1)))
		Expect(p.status.Deferred).To(BeNil())
		Expect(p.status.LastScheduleTime.Time).To(BeTemporally("==", t0), "the superseded occurrence is decided: no later plan counts it")
		Expect(p.status.Recent).To(ConsistOf(HaveField("Outcome", runstatus.OutcomeSkippedBlackout)))
		Expect(p.events).To(HaveLen(1))
		Expect(p.events[0].reason).To(Equal(ReasonSkippedBlackout))
	})
	It("leaves it missed when its deadline passed first", func() {
		p, plan := run(ptr.To[int64](60), t0.Add(-time.Hour), t0.Add(time.Hour))
		Expect(plan.Missed).To(Equal(int64(1)))
		Expect(p.status.Counters.SkippedBlackout).To(BeZero())
		Expect(p.status.Deferred).To(BeNil())
	})
})

var _ = Describe("Blackout markers", func() {
	// The gap they close: a pod whose lockwrap already waits for the lock when a rollout
	// begins (a manual run's Wait, a Retry) cannot be withdrawn (the controller cannot tell
	// it from one running its job) and used to start its job in the rollout when the lock
	// came free. Also a suspended job's manual run, whose passes stop before the blackout
	// step.
	It("keeps each job's marker in its lock's Redis while a rollout holds it back, and a pod made before cannot take the lock", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		d := newDeployment(ns, "web")
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		writeStatus(d, deploymentDone)
		occ := time.Now().Add(6 * time.Second).Truncate(time.Second) // room for two creations on a loaded machine
		guarded := func(name string, suspend bool) *v1alpha1.LockedCronJob {
			j := newJob(ns, name, dailyAt(occ))
			j.Spec.Suspend = ptr.To(suspend)
			j.Spec.Lock.Key = "markers-" + ns + "-" + name
			j.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutSkip, Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "web"}}}
			createBefore(j, occ)
			return getJob(j)
		}
		scheduled, suspended := guarded("scheduled", false), guarded("suspended", true)
		// Each pod says its job and when it was made: the scheduled occurrence's, and the
		// suspended job's manual run's. Made before the rollout, they wait (no kubelet
		// here), as pods whose lockwrap waits for the lock.
		requestRun(suspended, "before-the-rollout", nil)
		handled(suspended, "before-the-rollout")
		Eventually(func() []corev1.Pod { return podsOf(scheduled) }, 10*time.Second).Should(HaveLen(1))
		envOf := func(j *v1alpha1.LockedCronJob) (map[string]string, time.Time) {
			GinkgoHelper()
			pods := podsOf(j)
			Expect(pods).To(HaveLen(1))
			env := map[string]string{}
			for _, e := range pods[0].Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			madeAt, err := time.Parse(time.RFC3339Nano, env["LOCKEDCRON_MADE_AT"])
			Expect(err).NotTo(HaveOccurred(), "the pod says when it was made")
			Expect(madeAt).To(BeTemporally("~", pods[0].CreationTimestamp.Time, 10*time.Second), "the pass that made it")
			Expect(env["LOCKEDCRON_BLACKOUT_ID"]).To(Equal(string(j.UID)))
			return env, madeAt
		}
		envOf(scheduled)
		env, madeAt := envOf(suspended)

		rc := redisSrv.Client()
		DeferCleanup(rc.Close)
		markerOf := func(j *v1alpha1.LockedCronJob) func() string {
			return func() string { return rc.Get(ctx, lock.BlackoutKey(j.Spec.Lock.Key, string(j.UID))).Val() }
		}
		Consistently(markerOf(scheduled), time.Second).Should(BeEmpty(), "no blackout, no marker")

		writeStatus(d, func(d *appsv1.Deployment) {
			deploymentDone(d)
			d.Status.AvailableReplicas = 1 // rolling out
		})
		for _, j := range []*v1alpha1.LockedCronJob{scheduled, suspended} {
			Eventually(markerOf(j), 10*time.Second).Should(ContainSubstring("Deployment/web is rolling out"), j.Name)
			Expect(rc.PTTL(ctx, lock.BlackoutKey(j.Spec.Lock.Key, string(j.UID))).Val()).To(And(BeNumerically(">", 0), BeNumerically("<=", markerTTL)), "a marker lives its ttl unless written again")
		}
		_, err := lock.New(rc).Acquire(ctx, lock.Request{Key: suspended.Spec.Lock.Key, RunID: env["LOCKEDCRON_RUN_ID"], Holder: "waiting-pod",
			TTL: 30 * time.Second, BlackoutID: env["LOCKEDCRON_BLACKOUT_ID"], MadeAt: madeAt})
		Expect(err).To(MatchError(lock.ErrBlackout), "the pod made before the rollout does not take the lock in it")

		writeStatus(d, deploymentDone)
		for _, j := range []*v1alpha1.LockedCronJob{scheduled, suspended} {
			Eventually(markerOf(j), 10*time.Second).Should(BeEmpty(), "the rollout over, the marker is gone: "+j.Name)
		}
	})

	It("keeps a suspended job's marker through a window that opens and closes with no event", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		open := time.Now().Add(10 * time.Second).Truncate(time.Second) // room for the request's pod first, on a loaded machine
		start, end := metav1.NewTime(open), metav1.NewTime(open.Add(8*time.Second))
		j := newJob(ns, "suspended", dailyAt(time.Now().Add(12*time.Hour)))
		j.Spec.Suspend = ptr.To(true)
		j.Spec.Lock.Key = "markers-" + ns
		j.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "maint", Start: &start, End: &end}}}
		createBefore(j, open)
		j = getJob(j)
		requestRun(j, "before-the-window", nil) // its pod waits (no kubelet here)
		Expect(handled(j, "before-the-window").Pod).NotTo(BeEmpty(), "the run's pod, made before the window")
		Expect(time.Now()).To(BeTemporally("<", open), "the machine is too slow for this spec's margin")

		rc := redisSrv.Client()
		DeferCleanup(rc.Close)
		marker := func() string { return rc.Get(ctx, lock.BlackoutKey(j.Spec.Lock.Key, string(j.UID))).Val() }
		Eventually(marker, 20*time.Second, 100*time.Millisecond).Should(ContainSubstring(`window "maint"`), "the window opened: its pass comes by itself")
		Eventually(marker, 20*time.Second, 100*time.Millisecond).Should(BeEmpty(), "the window closed")
	})
})
