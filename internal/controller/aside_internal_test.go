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
			job := passJob("* * * * *", false)
			job.Spec.PrepareAheadSeconds = ptr.To(int32(30))
			job.Spec.StartingDeadlineSeconds = c.deadline
			job.Status.LastScheduleTime = &metav1.Time{Time: t1.Add(-time.Minute)}
			pod := waitingWithdrawnPod(t, job, t1, "no longer the next occurrence to run (schedule change or blackout)")
			api := fakeAPI(t, pod)
			r := &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

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
	job := passJob("* * * * *", false)
	job.Spec.PrepareAheadSeconds = ptr.To(int32(30))
	job.Status.LastScheduleTime = &metav1.Time{Time: t1.Add(-time.Minute)}
	pod := withdrawnPreparedPod(t, job, t1, "no longer the next occurrence to run (schedule change or blackout)")
	pod.Finalizers = []string{"example.com/keep"} // ours released; another keeps it
	pod.Labels[runpod.LabelCounted] = "true"
	del := metav1.NewTime(t1.Add(-5 * time.Second))
	pod.DeletionTimestamp = &del
	api := fakeAPI(t, pod)
	r := &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

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
			job := passJob("* * * * *", false)
			job.Spec.PrepareAheadSeconds = ptr.To(int32(30))
			job.Status.LastScheduleTime = &metav1.Time{Time: t1.Add(-time.Minute)}
			pod := waitingWithdrawnPod(t, job, t1, "a blackout now covers its instant")
			api := fakeAPI(t, pod)
			r := &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

			// The user edits the schedule at t1+3s, while the pod has not said.
			job.Spec.Schedule = "30 * * * * *"
			job.Generation = 2
			p := passWith(t, r, job, t1.Add(3*time.Second))
			job.Status = *p.status

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
		})
	}
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

// TestNextPreparedPodDoesNotCountTheWithdrawnOneMissed: with prepareAheadSeconds longer
// than the schedule's step, the next occurrence's pod is prepared while t1's, withdrawn,
// has not said whether its job ran. Once t2 has come, its pod is the newest with a pod,
// and the occurrences between the watermark and it that have none were counted missed
// (no decision recorded) — t1 among them, which its pod's report then counted again. t1
// is counted once: by its pod's report if its job ran, missed if not.
func TestNextPreparedPodDoesNotCountTheWithdrawnOneMissed(t *testing.T) {
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
			next.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: next.Annotations[runpod.AnnotationWrappedContainer], State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t1)}}}}
			api := fakeAPI(t, withdrawn, next)
			r := &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

			p := passWith(t, r, job, t2.Add(500*time.Millisecond))
			job.Status = *p.status
			cur := podEnds(t, api, withdrawn, ran, t2.Add(2*time.Second))
			p = passWith(t, r, job, t2.Add(3*time.Second))
			job.Status = *p.status
			want := "Succeeded"
			if !ran {
				want = runstatus.OutcomeMissed
				// Released uncounted and its occurrence decided; a pass before the
				// release shows (the patch failed, or the cache lags) finds it again.
				p = passWith(t, r, job, t2.Add(3500*time.Millisecond))
				job.Status = *p.status
				cur.Finalizers = nil // its deletion ends
				if err := api.Update(context.Background(), cur); err != nil {
					t.Fatal(err)
				}
				p = passWith(t, r, job, t2.Add(4*time.Second))
			}
			if records := recordsOf(p.status.Recent, t1); len(records) != 1 || records[0] != want {
				t.Errorf("occurrence %s recorded %v, want once %s (counters %+v)", t1.Format(time.RFC3339), records, want, p.status.Counters)
			}
			for _, rec := range p.status.Recent {
				if !ran && rec.Occurrence.Time.Equal(t1) && !strings.Contains(rec.Message, "withdrawn (a blackout now covers its instant)") {
					t.Errorf("occurrence %s missed, saying %q: not why", t1.Format(time.RFC3339), rec.Message)
				}
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
	job := passJob("* * * * *", false)
	job.Spec.PrepareAheadSeconds = ptr.To(int32(300))
	job.Status.LastScheduleTime = &metav1.Time{Time: t1.Add(-time.Minute)}
	pod := waitingWithdrawnPod(t, job, t1, "a blackout now covers its instant")
	del := metav1.NewTime(t1.Add(-220 * time.Second)) // asked at t1−250s, a 30 s grace
	pod.DeletionTimestamp = &del
	api := fakeAPI(t, pod)
	r := &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

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
