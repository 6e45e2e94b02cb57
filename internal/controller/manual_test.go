package controller

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// requestRun sets the job's run-request annotations as `kubectl annotate --overwrite`
// would (field manager kubectl-annotate): id, and occurrence/contention when given
// (removed otherwise).
func requestRun(j *v1alpha1.LockedCronJob, id string, extra map[string]string) {
	ExpectWithOffset(1, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var out v1alpha1.LockedCronJob
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(j), &out); err != nil {
			return err
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		delete(out.Annotations, v1alpha1.AnnotationRunOccurrence)
		delete(out.Annotations, v1alpha1.AnnotationRunContention)
		out.Annotations[v1alpha1.AnnotationRunRequest] = id
		for k, v := range extra {
			out.Annotations[k] = v
		}
		return k8sClient.Update(ctx, &out, client.FieldOwner("kubectl-annotate"))
	})).To(Succeed())
}

// handled waits until status.lastRunRequest is the request id's, and returns it.
func handled(j *v1alpha1.LockedCronJob, id string) *v1alpha1.RunRequest {
	var rr *v1alpha1.RunRequest
	EventuallyWithOffset(1, func() string {
		rr = getJob(j).Status.LastRunRequest
		if rr == nil {
			return ""
		}
		return rr.ID
	}).Should(Equal(id))
	return rr
}

// manualPods are the job's pods of manual runs, by request id.
func manualPods(j *v1alpha1.LockedCronJob) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range podsOf(j) {
		if id, ok := p.Labels[runpod.LabelRunRequest]; ok {
			out[id] = p.UID
		}
	}
	return out
}

// hasEnv reports whether the pod gives lockwrap the variable: set, and not empty (an
// empty one is unset to lockwrap; runpod sets lockwrap's other settings empty).
func hasEnv(pod *corev1.Pod, name string) bool {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == name && (e.Value != "" || e.ValueFrom != nil) {
			return true
		}
	}
	return false
}

var _ = Describe("Manual runs", func() {
	It("creates exactly one pod per request id, also when a manager restart lost the status write", func() {
		stop := startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "adhoc", dailyAt(time.Now().Add(12*time.Hour)))
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return getJob(job).Status.LockKey }).ShouldNot(BeEmpty())

		requestRun(job, "first", nil)
		rr := handled(job, "first")
		Expect(rr.Pod).To(Equal(runpod.ManualName("adhoc", "first")))
		Expect(rr.RequestedBy).To(Equal("kubectl-annotate"))
		Expect(rr.Contention).To(Equal(v1alpha1.ManualContentionWait))
		Expect(rr.Refused).To(BeEmpty())
		Expect(rr.Occurrence).To(BeNil())

		var pod corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: rr.Pod}, &pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue(runpod.LabelRunRequest, "first"))
		Expect(envValue(&pod, "LOCKEDCRON_LOCK_KEY")).To(Equal(ns + "/adhoc"))
		Expect(envValue(&pod, "LOCKEDCRON_RUN_ID")).To(Equal("manual:" + string(getJob(job).UID) + ":first"))
		Expect(envValue(&pod, "LOCKEDCRON_CONTENTION")).To(Equal("retry"))
		Expect(getJob(job).Status.ActiveCount).To(Equal(int32(1)))
		Eventually(func() []string { return eventNotes(job, ReasonManualRunStarted) }).Should(ConsistOf(
			ContainSubstring(`run request "first" by kubectl-annotate: created pod ` + rr.Pod)))

		requestRun(job, "second", map[string]string{v1alpha1.AnnotationRunContention: v1alpha1.ManualContentionFailFast})
		rr2 := handled(job, "second")
		Expect(rr2.Pod).To(Equal(runpod.ManualName("adhoc", "second")))
		Expect(rr2.Contention).To(Equal(v1alpha1.ManualContentionFailFast))
		before := manualPods(job)
		Expect(before).To(HaveLen(2))
		// (Events are posted by the recorder's goroutine; one in flight when the manager stops is dropped.)
		Eventually(func() []string { return eventNotes(job, ReasonManualRunStarted) }).Should(HaveLen(2))

		// The manager stops; the status write that recorded "second" is lost, and with it
		// its Event, which is sent only after that write (as if it crashed between creating
		// the pod and writing status).
		stop()
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			j := getJob(job)
			j.Status.LastRunRequest = rr.DeepCopy()
			return k8sClient.Status().Update(ctx, j)
		})).To(Succeed())
		Expect(getJob(job).Status.LastRunRequest.ID).To(Equal("first"))
		for _, e := range eventsAbout(job, ReasonManualRunStarted) {
			if strings.Contains(e.Note, `"second"`) {
				Expect(k8sClient.Delete(ctx, &e)).To(Succeed())
			}
		}

		startManager(clock.RealClock{})
		rr2 = handled(job, "second")
		Expect(rr2.Pod).To(Equal(runpod.ManualName("adhoc", "second")), "the existing pod is recorded")
		Expect(manualPods(job)).To(Equal(before), "no pod created or replaced")
		// The pass that records it says it started, once (it used to say nothing).
		Eventually(func() []string { return eventNotes(job, ReasonManualRunStarted) }).Should(ContainElement(
			ContainSubstring(`run request "second" by kubectl-annotate: found pod ` + rr2.Pod + `, created by an earlier pass`)))
		Consistently(func() []string { return eventNotes(job, ReasonManualRunStarted) }, 2*time.Second).Should(HaveLen(2), "one start per request id")

		// The run is counted like any run, as manual, without touching the schedule's
		// accounting.
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: rr.Pod}, &pod)).To(Succeed())
		finishPod(&pod, corev1.PodSucceeded, 0, reportJSON(report.Report{V: report.Version, Outcome: report.Succeeded,
			Key: ns + "/adhoc", Holder: "test/" + ns + "/" + rr.Pod, FencingToken: 7}))
		Eventually(func() int64 { return getJob(job).Status.Counters.Succeeded }).Should(Equal(int64(1)))
		st := getJob(job).Status
		Expect(st.Counters.Runs).To(Equal(int64(1)))
		Expect(st.Recent).To(HaveLen(1))
		Expect(st.Recent[0].Trigger).To(Equal(v1alpha1.TriggerManual))
		Expect(st.Recent[0].Pod).To(Equal(rr.Pod))
		Expect(st.LastScheduleTime).To(BeNil(), "a manual run is no scheduled occurrence")
		Expect(st.Counters.Missed).To(BeZero())
	})

	It("does not let a manual pod that has not started hold back a scheduled occurrence", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(6 * time.Second).Truncate(time.Second)
		job := newJob(ns, "both", dailyAt(at))
		createBefore(job, at)
		requestRun(job, "early", nil)
		Expect(handled(job, "early").Pod).NotTo(BeEmpty())

		// envtest runs no kubelet: the manual pod never starts. The occurrence still gets
		// its pod, and nothing is missed.
		var p corev1.Pod
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: runpod.Name("both", at)}, &p)
		}, 20*time.Second).Should(Succeed())
		// The scheduled pod runs (the test plays the kubelet): status lists both.
		p.Status.Phase = corev1.PodRunning
		Expect(k8sClient.Status().Update(ctx, &p)).To(Succeed())
		Eventually(func() int32 { return getJob(job).Status.ActiveCount }).Should(Equal(int32(2)))
		st := getJob(job).Status
		Expect(st.Counters.Missed).To(BeZero())
		Expect(st.LastScheduleTime.Time).To(BeTemporally("==", at))
	})

	It("re-runs an occurrence that did not succeed, and refuses one the ledger says succeeded", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "rerun", "0 * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return getJob(job).Status.LockKey }).ShouldNot(BeEmpty())
		key := ns + "/rerun"
		succeeded := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
		failed := succeeded.Add(-time.Hour)

		// The ledger, written through the lock as lockwrap does: one success, one failure.
		l := lock.New(redisSrv.Client())
		for occ, state := range map[time.Time]string{succeeded: lock.StateSucceeded, failed: lock.StateFailed} {
			lease, err := l.Acquire(ctx, lock.Request{Key: key, Occurrence: occ, Holder: "other/ns/pod", TTL: 5 * time.Second})
			Expect(err).NotTo(HaveOccurred())
			Expect(lease.Finish(ctx, state)).To(Succeed())
		}

		requestRun(job, "again-ok", map[string]string{v1alpha1.AnnotationRunOccurrence: succeeded.Format(time.RFC3339)})
		rr := handled(job, "again-ok")
		Expect(rr.Pod).To(BeEmpty())
		Expect(rr.Refused).To(And(ContainSubstring("already succeeded"), ContainSubstring(succeeded.Format(time.RFC3339)),
			ContainSubstring(v1alpha1.AnnotationRunOccurrence)))
		Expect(rr.Occurrence.Time).To(BeTemporally("==", succeeded))
		Expect(manualPods(job)).To(BeEmpty())
		Eventually(func() []string { return eventNotes(job, ReasonManualRunRefused) }).Should(ConsistOf(ContainSubstring("already succeeded")))

		requestRun(job, "again-failed", map[string]string{v1alpha1.AnnotationRunOccurrence: failed.Format(time.RFC3339)})
		rr = handled(job, "again-failed")
		Expect(rr.Refused).To(BeEmpty())
		var pod corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: rr.Pod}, &pod)).To(Succeed())
		Expect(envValue(&pod, "LOCKEDCRON_OCCURRENCE")).To(Equal(failed.Format(time.RFC3339)))
		Expect(hasEnv(&pod, "LOCKEDCRON_RUN_ID")).To(BeFalse(), "a re-run is the occurrence's ledger entry")
		Expect(pod.Annotations).To(HaveKeyWithValue(runpod.AnnotationScheduledTime, failed.Format(time.RFC3339)))
	})

	It("refuses invalid requests with a message naming the annotation, and creates no pod", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "bad", "0 * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return getJob(job).Status.LockKey }).ShouldNot(BeEmpty())
		future := time.Now().UTC().Truncate(time.Hour).Add(2 * time.Hour).Format(time.RFC3339)
		offSchedule := time.Now().UTC().Truncate(time.Hour).Add(-90 * time.Minute).Format(time.RFC3339)

		for _, c := range []struct {
			id    string
			extra map[string]string
			says  []string
		}{
			{"Not_An_ID", nil, []string{v1alpha1.AnnotationRunRequest, "a-z, 0-9 and '-'"}},
			{"bad-contention", map[string]string{v1alpha1.AnnotationRunContention: "Later"}, []string{v1alpha1.AnnotationRunContention, "Wait", "FailFast"}},
			{"bad-time", map[string]string{v1alpha1.AnnotationRunOccurrence: "yesterday"}, []string{v1alpha1.AnnotationRunOccurrence, "RFC 3339"}},
			{"future", map[string]string{v1alpha1.AnnotationRunOccurrence: future}, []string{v1alpha1.AnnotationRunOccurrence, "in the future"}},
			{"off-schedule", map[string]string{v1alpha1.AnnotationRunOccurrence: offSchedule}, []string{v1alpha1.AnnotationRunOccurrence, "not an occurrence of spec.schedule"}},
		} {
			requestRun(job, c.id, c.extra)
			rr := handled(job, c.id)
			Expect(rr.Pod).To(BeEmpty(), c.id)
			for _, s := range c.says {
				Expect(rr.Refused).To(ContainSubstring(s), c.id)
			}
		}
		Expect(manualPods(job)).To(BeEmpty())
		Eventually(func() []string { return eventNotes(job, ReasonManualRunRefused) }).Should(HaveLen(5))
		Expect(getJob(job).Status.Counters).To(Equal(v1alpha1.Counters{}), "a refused request counts no run")
	})

	It("does not run a request the job was created with (a restore, a re-applied manifest), and runs the next", func() {
		// A LockedCronJob restored from a backup, or deleted and applied again from its YAML,
		// still carries the last run request; its status (the only memory of handled ids) and
		// its UID (part of the run's ledger id) are new, so the old request ran again.
		startManager(clock.RealClock{})
		ns := newNamespace()
		job := newJob(ns, "restored", dailyAt(time.Now().Add(12*time.Hour)))
		job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "before-the-backup"}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		rr := handled(job, "before-the-backup")
		Expect(rr.Pod).To(BeEmpty())
		Expect(rr.Refused).To(ContainSubstring("there when the job was created"))
		Expect(manualPods(job)).To(BeEmpty(), "the request the job was created with ran")
		Eventually(func() []string { return eventNotes(job, ReasonManualRunRefused) }).Should(ConsistOf(ContainSubstring("set a new id")))

		requestRun(job, "after", nil)
		rr = handled(job, "after")
		Expect(rr.Refused).To(BeEmpty())
		Expect(manualPods(job)).To(HaveKey("after"))
	})

	It("refuses a request not handled within the hour, as expired (the backend was not ready, the controller down)", func() {
		// A request made while the job's Redis Secret was missing waited unhandled and ran
		// whenever the Secret was fixed, hours later. Here the controller's clock is two
		// hours past the request (its managedFields time, the API server's).
		startManager(clocktesting.NewFakePassiveClock(time.Now().Add(2 * time.Hour)))
		ns := newNamespace()
		job := newJob(ns, "late", dailyAt(time.Now().Add(12*time.Hour)))
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return getJob(job).Status.LockKey }).ShouldNot(BeEmpty())
		requestRun(job, "stale", nil)
		rr := handled(job, "stale")
		Expect(rr.Pod).To(BeEmpty())
		Expect(rr.Refused).To(ContainSubstring("not handled within 1h0m0s"))
		Expect(manualPods(job)).To(BeEmpty(), "a request two hours old ran")
	})
})
