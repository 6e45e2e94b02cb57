package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
)

// TestAsideOccurrenceIsCountedOnce: a pod prepared ahead of t1 and withdrawn just before
// it (a blackout, a suspension, a schedule edit) whose kubelet acts on the deletion only
// after lockwrap has started the job, or not at all: the pod stands aside from t1 until
// it has said whether its job ran (prepare.go), and t1 is counted once either way. A pass
// after t1's deadline or at the next instant, while the pod had not said, used to count
// t1 missed — and then the pod's report counted it again.
func TestAsideOccurrenceIsCountedOnce(t *testing.T) {
	t1 := passAt
	for _, c := range []struct {
		name     string
		deadline *int64
		waitAt   time.Time // the pass while the pod has not said
		saidAt   time.Time // the pass once it has
		ran      bool
	}{
		{"deadline passed, the job ran", ptr.To(int64(10)), t1.Add(11 * time.Second), t1.Add(20 * time.Second), true},
		{"next instant, the job ran", nil, t1.Add(time.Minute + 500*time.Millisecond), t1.Add(time.Minute + 10*time.Second), true},
		{"deadline passed, the job did not run", ptr.To(int64(10)), t1.Add(11 * time.Second), t1.Add(20 * time.Second), false},
		{"next instant, the job did not run", nil, t1.Add(time.Minute + 500*time.Millisecond), t1.Add(time.Minute + 10*time.Second), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := preparedMinuteJob(t1, 30)
			job.Spec.StartingDeadlineSeconds = c.deadline
			pod, api, r := waitingWithdrawnRig(t, job, t1, "no longer the next occurrence to run (schedule change or blackout)")

			p1 := passWith(t, r, job, c.waitAt)
			if n := p1.status.Counters.Missed; n != 0 {
				t.Fatalf("while the withdrawn pod has not said: %d missed (%+v)", n, p1.status.Recent)
			}
			job.Status = *p1.status

			// Its kubelet says: the job ran (lockwrap started it at t1) and succeeded, or
			// lockwrap, waiting for t1, was stopped before it.
			cur := podEnds(t, api, pod, c.ran, c.saidAt.Add(-time.Second))
			p2 := passWith(t, r, job, c.saidAt)
			if !c.ran {
				// Released uncounted (its finalizer off, so its deletion ends); the pass
				// after its pod is gone decides t1 as if it had never been.
				if !slices.ContainsFunc(p2.mark, func(m *corev1.Pod) bool { return m.Name == cur.Name }) {
					t.Fatalf("the withdrawn pod that did not run is not released: mark %v", p2.mark)
				}
				cur.Finalizers = nil
				if err := api.Update(context.Background(), cur); err != nil {
					t.Fatal(err)
				}
				job.Status = *p2.status
				p2 = passWith(t, r, job, c.saidAt.Add(time.Second))
			}
			want := runstatus.OutcomeMissed
			if c.ran {
				want = "Succeeded"
			}
			if records := recordsOf(p2.status.Recent, t1); len(records) != 1 || records[0] != want {
				t.Errorf("occurrence %s recorded %v, want once %s (counters %+v)", t1.Format(time.RFC3339), records, want, p2.status.Counters)
			}
		})
	}
}

// TestLingeringWithdrawnPodHoldsNothingBack: a pod withdrawn ahead whose job did not run
// is released, but it can linger (its node gone, so nothing confirms the deletion; another
// finalizer). It no longer stands for its occurrence, which the schedule decides as if it
// had never been: the next occurrence supersedes it. Waiting for such a pod to be gone
// stopped the job's schedule for as long as it lingered.
func TestLingeringWithdrawnPodHoldsNothingBack(t *testing.T) {
	t1, t2 := passAt, passAt.Add(time.Minute)
	job := preparedMinuteJob(t1, 30)
	pod := withdrawnPreparedPod(t, job, t1, "no longer the next occurrence to run (schedule change or blackout)")
	pod.Finalizers = []string{"example.com/keep"} // ours released; another keeps it
	pod.Labels[runpod.LabelCounted] = "true"
	del := metav1.NewTime(t1.Add(-5 * time.Second))
	pod.DeletionTimestamp = &del
	api := fakeAPI(t, pod)
	r := testReconciler(api)

	// While t1 is due, its pod still holds its name: t1 waits, undecided (it used to be
	// taken for started, since a pod of its name was there, and never counted).
	p0 := passWith(t, r, job, t1.Add(time.Second))
	if st := p0.status.LastScheduleTime; len(p0.status.Recent) != 0 || st == nil || !st.Time.Before(t1) {
		t.Errorf("while t1 is due: recent %+v, lastScheduleTime %v; want t1 undecided", p0.status.Recent, st)
	}
	job.Status = *p0.status

	p := passWith(t, r, job, t2.Add(500*time.Millisecond))
	if records := recordsOf(p.status.Recent, t1); len(records) != 1 || records[0] != runstatus.OutcomeMissed {
		t.Errorf("occurrence %s recorded %v, want once Missed", t1.Format(time.RFC3339), records)
	}
	if st := p.status.LastScheduleTime; st == nil || st.Time.Before(t2) {
		t.Errorf("lastScheduleTime %v: the schedule waits for a pod that did not run (next pass in %s)", st, p.requeue)
	}
}

// TestScheduleEditWhileAWithdrawnPodWaitsCountsItOnce: a schedule edit (or a
// suspension) while a withdrawn prepared pod has not said whether its job ran counted its
// occurrence missed (not started before the change), and then the pod's report counted
// it again. It is the pod's to count.
func TestScheduleEditWhileAWithdrawnPodWaitsCountsItOnce(t *testing.T) {
	for _, ran := range []bool{true, false} {
		t.Run(fmt.Sprintf("ran=%v", ran), func(t *testing.T) {
			t1 := passAt
			job := preparedMinuteJob(t1, 30)
			pod, api, r := waitingWithdrawnRig(t, job, t1, "a blackout now covers its instant")

			// The user edits the schedule at t1+3s, while the pod has not said.
			job.Spec.Schedule = "30 * * * * *"
			job.Generation = 2
			p := passWith(t, r, job, t1.Add(3*time.Second))
			job.Status = *p.status
			// The change leaves t1 to its pod, in the write that records the change, and
			// a pass before the pod says keeps it so.
			p = passWith(t, r, job, t1.Add(4*time.Second))
			job.Status = *p.status
			if got := job.Status.DueBeforeChange; !slices.Equal(got, []string{pod.Name}) {
				t.Errorf("status.dueBeforeChange %v, want [%s]", got, pod.Name)
			}

			cur := podEnds(t, api, pod, ran, t1.Add(5*time.Second))
			p = passWith(t, r, job, t1.Add(6*time.Second))
			want := "Succeeded"
			if !ran {
				// Not run, and the schedule it was made under is gone: missed, as the
				// change counted the others that had not started.
				want = runstatus.OutcomeMissed
				job.Status = *p.status
				cur.Finalizers = nil
				if err := api.Update(context.Background(), cur); err != nil {
					t.Fatal(err)
				}
				p = passWith(t, r, job, t1.Add(7*time.Second))
			}
			if records := recordsOf(p.status.Recent, t1); len(records) != 1 || records[0] != want {
				t.Errorf("occurrence %s recorded %v, want once %s (counters %+v)", t1.Format(time.RFC3339), records, want, p.status.Counters)
			}
			if got := p.status.DueBeforeChange; len(got) != 0 {
				t.Errorf("status.dueBeforeChange %v once the pod has said", got)
			}
		})
	}
}

// preparedMinuteJob is a job every minute, its pods prepared ahead seconds before their
// instant, whose occurrences up to t1−1m are decided.
func preparedMinuteJob(t1 time.Time, ahead int32) *v1alpha1.LockedCronJob {
	job := passJob("* * * * *", false)
	job.Spec.PrepareAheadSeconds = ptr.To(ahead)
	job.Status.LastScheduleTime = &metav1.Time{Time: t1.Add(-time.Minute)}
	return job
}

// waitingWithdrawnRig is job's waitingWithdrawnPod for t1, withdrawn for why, a fake API
// server holding it, and a reconciler on that server.
func waitingWithdrawnRig(t *testing.T, job *v1alpha1.LockedCronJob, t1 time.Time, why string) (*corev1.Pod, client.Client, *LockedCronJobReconciler) {
	t.Helper()
	pod := waitingWithdrawnPod(t, job, t1, why)
	api := fakeAPI(t, pod)
	return pod, api, testReconciler(api)
}

// withdrawnPreparedPod is job's pod for occ, prepared ahead and then withdrawn for why.
func withdrawnPreparedPod(t *testing.T, job *v1alpha1.LockedCronJob, occ time.Time, why string) *corev1.Pod {
	t.Helper()
	pod, err := runpod.Build(job, occ, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
	pod.Annotations[runpod.AnnotationWithdrawnAhead] = why
	return pod
}

// waitingWithdrawnPod is a withdrawn prepared pod that has not said whether its job ran:
// deleted at occ−1s with a 51 s grace, its tracking finalizer on, its wrapped container
// running since occ−25s (lockwrap waiting for the instant, or the job under way).
func waitingWithdrawnPod(t *testing.T, job *v1alpha1.LockedCronJob, occ time.Time, why string) *corev1.Pod {
	t.Helper()
	pod := withdrawnPreparedPod(t, job, occ, why)
	pod.Finalizers = []string{runpod.FinalizerTracking}
	pod.Spec.NodeName = "n1"
	del := metav1.NewTime(occ.Add(50 * time.Second))
	pod.DeletionTimestamp = &del
	wrapped := pod.Annotations[runpod.AnnotationWrappedContainer]
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(occ.Add(-25 * time.Second))}}}}
	return pod
}

// podEnds has the kubelet say, at finished, how a waitingWithdrawnPod's job ended: it ran
// (lockwrap started it at its instant) and succeeded, or lockwrap was stopped while
// waiting for the instant. It returns the pod as the API server holds it then.
func podEnds(t *testing.T, api client.Client, pod *corev1.Pod, ran bool, finished time.Time) *corev1.Pod {
	t.Helper()
	var cur corev1.Pod
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(pod), &cur); err != nil {
		t.Fatal(err)
	}
	occ, _ := runstatus.Occurrence(pod)
	rep := `{"v":1,"outcome":"Interrupted","occurrence":"` + occ.Format(time.RFC3339) + `","key":"ns/j","holder":"h","exitCode":143}`
	cur.Status.Phase = corev1.PodFailed
	if ran {
		rep = `{"v":1,"outcome":"Succeeded","occurrence":"` + occ.Format(time.RFC3339) + `","key":"ns/j","holder":"h","fencingToken":7,"startedAt":"` + occ.Format(time.RFC3339Nano) + `","exitCode":0}`
		cur.Status.Phase = corev1.PodSucceeded
	}
	wrapped := pod.Annotations[runpod.AnnotationWrappedContainer]
	started := pod.Status.ContainerStatuses[0].State.Running.StartedAt
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Message: rep, StartedAt: started, FinishedAt: metav1.NewTime(finished)}}}}
	if err := api.Status().Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	return &cur
}

// editedAwayJob is a job every minute, prepared 30 s ahead, whose schedule was edited at
// t1−10s to one without t1 ("5/10 * * * * *"), its watermark at watermark; and t1's
// prepared pod, withdrawn by the edit, which has not said whether its job ran.
func editedAwayJob(t *testing.T, t1, watermark time.Time) (*v1alpha1.LockedCronJob, *corev1.Pod) {
	t.Helper()
	job := passJob("* * * * *", false)
	job.Spec.PrepareAheadSeconds = ptr.To(int32(30))
	pod := waitingWithdrawnPod(t, job, t1, "no longer the next occurrence to run (schedule change or blackout)")
	job.Spec.Schedule, job.Generation = "5/10 * * * * *", 2
	job.Status.ObservedSchedule = "5/10 * * * * *|UTC|suspend=false"
	job.Status.ScheduleSince = &metav1.Time{Time: t1.Add(-10 * time.Second)}
	job.Status.LastScheduleTime = &metav1.Time{Time: watermark}
	return job, pod
}

// recordsOf is the outcomes status.recent holds for occ.
func recordsOf(recent []v1alpha1.RunRecord, occ time.Time) []string {
	var out []string
	for _, rec := range recent {
		if rec.Occurrence.Time.Equal(occ) {
			out = append(out, rec.Outcome)
		}
	}
	return out
}

// TestNextPodWhileAWithdrawnOneWaitsCountsEachOnce: t2's pod exists and runs while t1's,
// withdrawn, has not said whether its job ran (a state the schedule step does not make
// itself — it prepares only the next occurrence and waits at t1 — but a lagging cache, a
// clock behind, or a schedule edit can show). Each occurrence is counted once:
//   - t1 by its pod's report if its job ran, missed if not. Counted missed as one
//     without a pod, it was counted again by the report; taken for one with a pod and
//     passed over, it was never counted if its job did not run.
//   - t2 by its own report, once: its pod finishes and is pruned (no history kept)
//     before t1's pod says. A watermark held before t1 meanwhile had the schedule
//     decide t2 again afterwards (a second pod for it).
func TestNextPodWhileAWithdrawnOneWaitsCountsEachOnce(t *testing.T) {
	for _, ran := range []bool{true, false} {
		t.Run(fmt.Sprintf("ran=%v", ran), func(t *testing.T) {
			t1, t2 := passAt, passAt.Add(10*time.Second)
			job := passJob("*/10 * * * * *", false)
			job.Spec.PrepareAheadSeconds = ptr.To(int32(30))
			job.Status.LastScheduleTime = &metav1.Time{Time: t1.Add(-10 * time.Second)}
			withdrawn := waitingWithdrawnPod(t, job, t1, "a blackout now covers its instant")
			next, err := runpod.Build(job, t2, runpod.Options{ClusterName: "c", WrapperImage: "w"})
			if err != nil {
				t.Fatal(err)
			}
			next.Annotations[runpod.AnnotationPreparedAhead] = "true"
			next.Finalizers = []string{runpod.FinalizerTracking}
			next.Spec.NodeName = "n1"
			next.Status.Phase = corev1.PodRunning
			wrapped := next.Annotations[runpod.AnnotationWrappedContainer]
			next.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t1)}}}}
			api := fakeAPI(t, withdrawn, next)
			r := testReconciler(api)
			ctx := context.Background()
			pass := func(at time.Duration) *pass {
				p := passWith(t, r, job, t2.Add(at))
				job.Status = *p.status
				return p
			}

			pass(500 * time.Millisecond)
			// t2's job succeeds; its pod is counted, then marked and pruned.
			if err := api.Get(ctx, client.ObjectKeyFromObject(next), next); err != nil {
				t.Fatal(err)
			}
			next.Status.Phase = corev1.PodSucceeded
			rep := `{"v":1,"outcome":"Succeeded","occurrence":"` + t2.Format(time.RFC3339) + `","key":"ns/j","holder":"h","fencingToken":8,"startedAt":"` + t2.Format(time.RFC3339Nano) + `","exitCode":0}`
			next.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Message: rep, StartedAt: metav1.NewTime(t1), FinishedAt: metav1.NewTime(t2.Add(time.Second))}}}}
			if err := api.Status().Update(ctx, next); err != nil {
				t.Fatal(err)
			}
			pass(1500 * time.Millisecond)
			next.Finalizers = nil
			if err := api.Update(ctx, next); err != nil {
				t.Fatal(err)
			}
			if err := api.Delete(ctx, next); err != nil {
				t.Fatal(err)
			}
			pass(2 * time.Second)

			cur := podEnds(t, api, withdrawn, ran, t2.Add(2500*time.Millisecond))
			p := pass(3 * time.Second)
			want := "Succeeded"
			if !ran {
				want = runstatus.OutcomeMissed
				// Released uncounted and its occurrence decided; a pass before the
				// release shows (the patch failed, or the cache lags) finds it again.
				pass(3500 * time.Millisecond)
				cur.Finalizers = nil // its deletion ends
				if err := api.Update(ctx, cur); err != nil {
					t.Fatal(err)
				}
				p = pass(4 * time.Second)
			}
			p = pass(5 * time.Second)
			if records := recordsOf(p.status.Recent, t1); len(records) != 1 || records[0] != want {
				t.Errorf("occurrence %s recorded %v, want once %s (counters %+v)", t1.Format(time.RFC3339), records, want, p.status.Counters)
			}
			for _, rec := range p.status.Recent {
				if !ran && rec.Occurrence.Time.Equal(t1) && !strings.Contains(rec.Message, "withdrawn (a blackout now covers its instant)") {
					t.Errorf("occurrence %s missed, saying %q: not why", t1.Format(time.RFC3339), rec.Message)
				}
			}
			if records := recordsOf(p.status.Recent, t2); len(records) != 1 || records[0] != "Succeeded" {
				t.Errorf("occurrence %s recorded %v, want once Succeeded (counters %+v)", t2.Format(time.RFC3339), records, p.status.Counters)
			}
			var again corev1.Pod
			if err := api.Get(ctx, client.ObjectKeyFromObject(next), &again); err == nil {
				t.Errorf("occurrence %s, run and counted, has a second pod %s", t2.Format(time.RFC3339), again.Name)
			}
		})
	}
}

// TestSilentWithdrawnPodIsCountedOnceAtItsInstant: a pod prepared well ahead and
// withdrawn from a node that has gone silent. Its deletion's grace ended before its
// instant; it was counted Lost (Error) then, and its occurrence, still to come, was
// decided again when it came. It is counted once, at its instant.
func TestSilentWithdrawnPodIsCountedOnceAtItsInstant(t *testing.T) {
	t1 := passAt
	job := preparedMinuteJob(t1, 300)
	pod := waitingWithdrawnPod(t, job, t1, "a blackout now covers its instant")
	del := metav1.NewTime(t1.Add(-220 * time.Second)) // asked at t1−250s, a 30 s grace
	pod.DeletionTimestamp = &del
	api := fakeAPI(t, pod)
	r := testReconciler(api)

	var recent []v1alpha1.RunRecord
	for _, at := range []time.Duration{-150 * time.Second, -30 * time.Second, 500 * time.Millisecond, 10 * time.Second, time.Minute + 500*time.Millisecond} {
		p := passWith(t, r, job, t1.Add(at))
		job.Status = *p.status
		recent = p.status.Recent
	}
	if records := recordsOf(recent, t1); len(records) != 1 || records[0] != "Error" {
		t.Errorf("occurrence %s recorded %v, want once Error (counters %+v)", t1.Format(time.RFC3339), records, job.Status.Counters)
	}
}

// TestWithdrawnPodOfAnEditedAwayOccurrenceIsNotCounted: the schedule is edited at
// t1−10s to one without t1, and t1's prepared pod withdrawn; the new schedule's pods run
// and the watermark goes past t1 before that pod says its job did not run. No schedule in
// force had t1 when it came: nothing is counted for it (it was counted missed, "the
// schedule changed before it said so", or not, as the timing went).
func TestWithdrawnPodOfAnEditedAwayOccurrenceIsNotCounted(t *testing.T) {
	t1 := passAt
	job, pod := editedAwayJob(t, t1, t1.Add(5*time.Second))
	api := fakeAPI(t, pod)
	r := testReconciler(api)

	podEnds(t, api, pod, false, t1.Add(5500*time.Millisecond))
	p := passWith(t, r, job, t1.Add(6*time.Second))
	if records := recordsOf(p.status.Recent, t1); len(records) != 0 || p.status.Counters.Missed != 0 {
		t.Errorf("occurrence %s, of no schedule in force, recorded %v (counters %+v)", t1.Format(time.RFC3339), records, p.status.Counters)
	}
	if !slices.ContainsFunc(p.mark, func(m *corev1.Pod) bool { return m.Name == pod.Name }) {
		t.Errorf("its pod is not released: mark %v", p.mark)
	}
}

// TestWithdrawnPodOfAnEditedAwayOccurrenceHoldsNothingBack: the schedule is edited at
// t1−10s to one without t1, while t1's prepared pod, withdrawn, has not said whether its
// job ran (its kubelet has until its grace ends). The new schedule's occurrence at t1+5s
// starts on time: no decision of the new schedule waits for a pod of an occurrence it
// does not have.
func TestWithdrawnPodOfAnEditedAwayOccurrenceHoldsNothingBack(t *testing.T) {
	t1 := passAt
	job, pod := editedAwayJob(t, t1, t1.Add(-5*time.Second))
	api := fakeAPI(t, pod)
	r := testReconciler(api)

	p := passWith(t, r, job, t1.Add(5500*time.Millisecond))
	due := t1.Add(5 * time.Second)
	var created corev1.Pod
	if err := api.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: runpod.Name(job.Name, due)}, &created); err != nil {
		t.Errorf("occurrence %s of the new schedule not started while a pod of the old one has not said: %v (lastScheduleTime %v, requeue %s)", due.Format(time.RFC3339), err, p.status.LastScheduleTime, p.requeue)
	}
}

// TestWithdrawnPodOfASuspendedOccurrenceIsNotCounted: the job is suspended at t1−20s
// (t1's prepared pod withdrawn) and resumed at t1+3s; the resumed schedule's next pod
// runs and the watermark goes past t1 before that pod says its job did not run. The job
// was suspended at t1: nothing is counted for it. (The resume, the latest change of the
// schedule, came after t1, and t1 was counted missed as one a change had left to its pod.)
func TestWithdrawnPodOfASuspendedOccurrenceIsNotCounted(t *testing.T) {
	t1, t2 := passAt, passAt.Add(time.Minute)
	job := passJob("* * * * *", false)
	job.Spec.PrepareAheadSeconds = ptr.To(int32(30))
	pod := waitingWithdrawnPod(t, job, t1, "the job is suspended")
	job.Status.ScheduleSince = &metav1.Time{Time: t1.Add(3 * time.Second)}
	job.Status.LastScheduleTime = &metav1.Time{Time: t2}
	api := fakeAPI(t, pod)
	r := testReconciler(api)

	podEnds(t, api, pod, false, t2.Add(time.Second))
	p := passWith(t, r, job, t2.Add(2*time.Second))
	if records := recordsOf(p.status.Recent, t1); len(records) != 0 || p.status.Counters.Missed != 0 {
		t.Errorf("occurrence %s, while the job was suspended, recorded %v (counters %+v)", t1.Format(time.RFC3339), records, p.status.Counters)
	}
}

// TestUndeletedWithdrawnPodHoldsNoBacklog: a prepared pod withdrawn (noted) whose
// deletion failed, its job not started, of an occurrence a schedule edit took away: the
// new schedule's due occurrence starts; it is not counted missed behind the withdrawn pod
// as a backlog.
func TestUndeletedWithdrawnPodHoldsNoBacklog(t *testing.T) {
	t1 := passAt
	job, pod := editedAwayJob(t, t1, t1.Add(-5*time.Second))
	pod.DeletionTimestamp = nil
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Annotations[runpod.AnnotationWrappedContainer], State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	api := fakeAPI(t, pod)
	r := testReconciler(api)

	p := passWith(t, r, job, t1.Add(5500*time.Millisecond))
	due := t1.Add(5 * time.Second)
	if records := recordsOf(p.status.Recent, due); len(records) != 0 {
		t.Errorf("occurrence %s recorded %v behind the withdrawn pod", due.Format(time.RFC3339), p.status.Recent)
	}
	var created corev1.Pod
	if err := api.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: runpod.Name(job.Name, due)}, &created); err != nil {
		t.Errorf("occurrence %s not started: %v", due.Format(time.RFC3339), err)
	}
}

// TestLingeringWithdrawnPodInABlackout: t1's prepared pod was withdrawn because a
// blackout window covers t1, did not run, and lingers (its node gone). At t1 the blackout
// skips the occurrence. The wait for the pod's name to be free came before the blackout
// step: t1 waited, and was counted missed once superseded, not skipped.
func TestLingeringWithdrawnPodInABlackout(t *testing.T) {
	t1 := passAt
	job := preparedMinuteJob(t1, 30)
	s, e := metav1.NewTime(t1.Add(-10*time.Second)), metav1.NewTime(t1.Add(30*time.Second))
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "maint", Start: &s, End: &e}}}
	pod := withdrawnPreparedPod(t, job, t1, "a blackout now covers its instant")
	pod.Finalizers = []string{"example.com/keep"} // ours released; another keeps it
	pod.Labels[runpod.LabelCounted] = "true"
	del := metav1.NewTime(t1.Add(-5 * time.Second))
	pod.DeletionTimestamp = &del
	api := fakeAPI(t, pod)
	r := testReconciler(api)

	p := passWith(t, r, job, t1.Add(time.Second))
	if records := recordsOf(p.status.Recent, t1); len(records) != 1 || records[0] != runstatus.OutcomeSkippedBlackout {
		t.Errorf("occurrence %s in the blackout recorded %v, want once %s (requeue %s)", t1.Format(time.RFC3339), records, runstatus.OutcomeSkippedBlackout, p.requeue)
	}
}

// TestEndedUndeletedWithdrawnPodIsDeleted: a prepared pod noted withdrawn whose deletion
// failed, and which ended before a pass made it again (its lockwrap interrupted): it is
// released uncounted and deleted. It was released and left, holding its occurrence's name
// (the occurrence waited for it, then was superseded) until history pruning took it.
func TestEndedUndeletedWithdrawnPodIsDeleted(t *testing.T) {
	t1 := passAt
	job := preparedMinuteJob(t1, 30)
	pod := waitingWithdrawnPod(t, job, t1, "a blackout now covers its instant")
	pod.DeletionTimestamp = nil
	api := fakeAPI(t, pod)
	r := testReconciler(api)
	podEnds(t, api, pod, false, t1.Add(-2*time.Second))

	p := passWith(t, r, job, t1.Add(-time.Second))
	if !slices.ContainsFunc(p.doomed, func(d *corev1.Pod) bool { return d.Name == pod.Name }) {
		t.Errorf("the withdrawn pod, ended and not deleted, is not deleted: doomed %v", p.doomed)
	}
	if c := p.status.Counters; c != (v1alpha1.Counters{}) {
		t.Errorf("counted %+v, want nothing", c)
	}

	// Marked, but the deletion failed: the next pass deletes it again.
	job.Status = *p.status
	var cur corev1.Pod
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(pod), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Labels[runpod.LabelCounted] = "true"
	cur.Finalizers = nil
	if err := api.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	p = passWith(t, r, job, t1.Add(-500*time.Millisecond))
	if !slices.ContainsFunc(p.doomed, func(d *corev1.Pod) bool { return d.Name == pod.Name }) {
		t.Errorf("marked, its deletion failed: not deleted again: doomed %v", p.doomed)
	}
}
