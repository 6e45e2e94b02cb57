package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			pod, err := runpod.Build(job, t1, runpod.Options{ClusterName: "c", WrapperImage: "w"})
			if err != nil {
				t.Fatal(err)
			}
			pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
			pod.Annotations[runpod.AnnotationWithdrawnAhead] = "no longer the next occurrence to run (schedule change or blackout)"
			pod.Finalizers = []string{runpod.FinalizerTracking}
			pod.Spec.NodeName = "n1"
			del := metav1.NewTime(t1.Add(50 * time.Second)) // deleted at t1−1s, a 51 s grace
			pod.DeletionTimestamp = &del
			wrapped := pod.Annotations[runpod.AnnotationWrappedContainer]
			waiting := metav1.NewTime(t1.Add(-25 * time.Second))
			pod.Status.Phase = corev1.PodRunning
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: waiting}}}}
			api := fakeAPI(t, pod)
			r := &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

			p1 := passWith(t, r, job, c.waitAt)
			if n := p1.status.Counters.Missed; n != 0 {
				t.Fatalf("while the withdrawn pod has not said: %d missed (%+v)", n, p1.status.Recent)
			}
			job.Status = *p1.status

			// Its kubelet says: the job ran (lockwrap started it at t1) and succeeded, or
			// lockwrap, waiting for t1, was stopped before it.
			var cur corev1.Pod
			if err := api.Get(context.Background(), client.ObjectKeyFromObject(pod), &cur); err != nil {
				t.Fatal(err)
			}
			rep := `{"v":1,"outcome":"Interrupted","occurrence":"` + t1.Format(time.RFC3339) + `","key":"ns/j","holder":"h","exitCode":143}`
			cur.Status.Phase = corev1.PodFailed
			if c.ran {
				rep = `{"v":1,"outcome":"Succeeded","occurrence":"` + t1.Format(time.RFC3339) + `","key":"ns/j","holder":"h","fencingToken":7,"startedAt":"` + t1.Format(time.RFC3339Nano) + `","exitCode":0}`
				cur.Status.Phase = corev1.PodSucceeded
			}
			cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Message: rep, StartedAt: waiting, FinishedAt: metav1.NewTime(c.saidAt.Add(-time.Second))}}}}
			if err := api.Status().Update(context.Background(), &cur); err != nil {
				t.Fatal(err)
			}
			p2 := passWith(t, r, job, c.saidAt)
			if !c.ran {
				// Released uncounted (its finalizer off, so its deletion ends); the pass
				// after its pod is gone decides t1 as if it had never been.
				if !slices.ContainsFunc(p2.mark, func(m *corev1.Pod) bool { return m.Name == cur.Name }) {
					t.Fatalf("the withdrawn pod that did not run is not released: mark %v", p2.mark)
				}
				if err := api.Get(context.Background(), client.ObjectKeyFromObject(pod), &cur); err != nil {
					t.Fatal(err)
				}
				cur.Finalizers = nil
				if err := api.Update(context.Background(), &cur); err != nil {
					t.Fatal(err)
				}
				job.Status = *p2.status
				p2 = passWith(t, r, job, c.saidAt.Add(time.Second))
			}
			var records []string
			for _, rec := range p2.status.Recent {
				if rec.Occurrence.Time.Equal(t1) {
					records = append(records, rec.Outcome)
				}
			}
			want := runstatus.OutcomeMissed
			if c.ran {
				want = "Succeeded"
			}
			if len(records) != 1 || records[0] != want {
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
	pod, err := runpod.Build(job, t1, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
	pod.Annotations[runpod.AnnotationWithdrawnAhead] = "no longer the next occurrence to run (schedule change or blackout)"
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
	var records []string
	for _, rec := range p.status.Recent {
		if rec.Occurrence.Time.Equal(t1) {
			records = append(records, rec.Outcome)
		}
	}
	if len(records) != 1 || records[0] != runstatus.OutcomeMissed {
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
	t1 := passAt
	job := passJob("* * * * *", false)
	job.Spec.PrepareAheadSeconds = ptr.To(int32(30))
	job.Status.LastScheduleTime = &metav1.Time{Time: t1.Add(-time.Minute)}
	pod, err := runpod.Build(job, t1, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
	pod.Annotations[runpod.AnnotationWithdrawnAhead] = "a blackout now covers its instant"
	pod.Finalizers = []string{runpod.FinalizerTracking}
	pod.Spec.NodeName = "n1"
	del := metav1.NewTime(t1.Add(50 * time.Second))
	pod.DeletionTimestamp = &del
	wrapped := pod.Annotations[runpod.AnnotationWrappedContainer]
	started := metav1.NewTime(t1.Add(-25 * time.Second))
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
	api := fakeAPI(t, pod)
	r := &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

	// The user edits the schedule at t1+3s, while the pod has not said.
	job.Spec.Schedule = "30 * * * * *"
	job.Generation = 2
	p1 := passWith(t, r, job, t1.Add(3*time.Second))
	job.Status = *p1.status

	var cur corev1.Pod
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(pod), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = corev1.PodSucceeded
	rep := `{"v":1,"outcome":"Succeeded","occurrence":"` + t1.Format(time.RFC3339) + `","key":"ns/j","holder":"h","fencingToken":7,"startedAt":"` + t1.Format(time.RFC3339Nano) + `","exitCode":0}`
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: wrapped, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Message: rep, StartedAt: started, FinishedAt: metav1.NewTime(t1.Add(5 * time.Second))}}}}
	if err := api.Status().Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	p2 := passWith(t, r, job, t1.Add(6*time.Second))
	var records []string
	for _, rec := range p2.status.Recent {
		if rec.Occurrence.Time.Equal(t1) {
			records = append(records, rec.Outcome)
		}
	}
	if len(records) != 1 || records[0] != "Succeeded" {
		t.Errorf("occurrence %s recorded %v, want once Succeeded (counters %+v)", t1.Format(time.RFC3339), records, p2.status.Counters)
	}
}
