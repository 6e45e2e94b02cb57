package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// go test ./internal/controller/ -run 'TestDeferrable|TestCatchUp|TestRecordsUnwritten'

func scheduledStatus(last, next time.Time, active ...string) *v1alpha1.LockedCronJobStatus {
	st := &v1alpha1.LockedCronJobStatus{
		LastScheduleTime: &metav1.Time{Time: last},
		NextScheduleTime: &metav1.Time{Time: next},
		Upcoming:         []v1alpha1.UpcomingOccurrence{{Time: metav1.NewTime(next)}},
		Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonScheduled,
			Message: "next occurrence " + next.Format(time.RFC3339), LastTransitionTime: metav1.NewTime(t0)}},
		ObservedSchedule: "* * * * *|UTC|suspend=false",
	}
	for _, a := range active {
		st.Active = append(st.Active, corev1.ObjectReference{Kind: "Pod", Name: a})
	}
	st.ActiveCount = int32(len(st.Active))
	return st
}

func TestDeferrable(t *testing.T) {
	m := time.Minute
	before := scheduledStatus(t0, t0.Add(m))
	notStarted := func(string) bool { return false }
	started := func(string) bool { return true }
	none := func(string) bool { return false }
	for _, c := range []struct {
		name    string
		next    *v1alpha1.LockedCronJobStatus
		started func(string) bool
		want    bool
	}{
		{"a created pod that has not started", scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1"), notStarted, true},
		{"the same pod once it runs", scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1"), started, false},
		{"a counter", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1")
			s.Counters.Missed = 1
			return s
		}(), notStarted, false},
		{"the Ready condition turning False", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m))
			s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionFalse, ReasonInvalidTemplate
			return s
		}(), notStarted, false},
		{"a blackout in the preview", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m))
			s.Upcoming[0].BlockedBy = "window nightly"
			return s
		}(), notStarted, false},
		{"a new schedule", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m))
			s.ObservedSchedule = "*/2 * * * *|UTC|suspend=false"
			return s
		}(), notStarted, false},
	} {
		if got := deferrable(before, c.next, c.started, "j-1", none); got != c.want {
			t.Errorf("%s: deferrable %t, want %t", c.name, got, c.want)
		}
	}
	// A prepared pod, listed and running, reaching its instant: the schedule columns move.
	if deferrable(scheduledStatus(t0, t0.Add(m), "j-1"), scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1"), started, "j-1", none) {
		t.Error("lastScheduleTime deferred when the pod of its occurrence runs")
	}
	// An earlier occurrence's pod still running, a new occurrence's pod created and not
	// started: the new pod is written with its start, not at its creation.
	onlyJ0 := func(name string) bool { return name == "j-0" }
	if !deferrable(scheduledStatus(t0, t0.Add(m), "j-0"), scheduledStatus(t0.Add(m), t0.Add(2*m), "j-0", "j-1"), onlyJ0, "j-1", none) {
		t.Error("a new occurrence's pod not yet started was written because an earlier one runs")
	}
	// ... and once the new pod has news, it is written.
	if deferrable(scheduledStatus(t0, t0.Add(m), "j-0"), scheduledStatus(t0.Add(m), t0.Add(2*m), "j-0", "j-1"), started, "j-1", none) {
		t.Error("a new occurrence's started pod was deferred")
	}
	// A pod that leaves active is always news, started or not.
	if deferrable(scheduledStatus(t0, t0.Add(m), "j-1"), scheduledStatus(t0, t0.Add(m)), notStarted, "j-1", none) {
		t.Error("a pod leaving active was deferred")
	}

	// status.countedPods: dropping a pod already labelled counted is left to the next
	// write (issue 13: that drop alone cost a second status PUT per run).
	counted := func(names ...string) *v1alpha1.LockedCronJobStatus {
		s := scheduledStatus(t0, t0.Add(m))
		s.CountedPods = names
		return s
	}
	marked := func(name string) bool { return name == "j-0" }
	if !deferrable(counted("j-0"), counted(), notStarted, "", marked) {
		t.Error("the drop of a pod labelled counted from countedPods was written on its own")
	}
	// A name whose pod is not (or no longer) seen labelled counted is written at once: a
	// name stays in countedPods only while its pod exists, so no new pod can take it.
	if deferrable(counted("j-0", "j-1"), counted(), notStarted, "", marked) {
		t.Error("the drop of a pod not seen labelled counted was deferred")
	}
	// A pod counted in this pass is news.
	if deferrable(counted(), counted("j-1"), notStarted, "", marked) {
		t.Error("a newly counted pod was deferred")
	}
	// A name kept (its pod counted before a restart and marked only now) with the drop.
	if !deferrable(counted("j-0", "j-2"), counted("j-2"), notStarted, "", marked) {
		t.Error("the drop was written because another name stays")
	}
}

// A pod's start is news for status startNewsDelay after its job started (a short job's
// start and end are one write); being stuck, an ended pod, a restart, or a start the
// kubelet gave no time for are news at once; a pod starting has none.
func TestNewsAt(t *testing.T) {
	started := t0.Add(3 * time.Second)
	pod := func(phase corev1.PodPhase, cs ...corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"scheduling.lockedcron.io/wrapped-container": "job"}},
			Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: cs},
		}
	}
	running := func(at time.Time, restarts int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "job", RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}
	}
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "job", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		ok   bool
		at   time.Time
	}{
		{"created", pod(corev1.PodPending), false, time.Time{}},
		{"container creating", pod(corev1.PodPending, waiting("ContainerCreating")), false, time.Time{}},
		{"image pull failing: at once", pod(corev1.PodPending, waiting("ImagePullBackOff")), true, time.Time{}},
		{"running its first attempt: startNewsDelay after it started", pod(corev1.PodRunning, running(started, 0)), true, started.Add(startNewsDelay)},
		{"restarted: at once", pod(corev1.PodRunning, running(started, 1)), true, time.Time{}},
		{"running, no start time: at once", pod(corev1.PodRunning, running(time.Time{}, 0)), true, time.Time{}},
		{"running phase, no container status: at once", pod(corev1.PodRunning), true, time.Time{}},
		{"ended: at once", pod(corev1.PodSucceeded, running(started, 0)), true, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			at, ok := newsAt(c.pod)
			if ok != c.ok || !at.Equal(c.at) {
				t.Errorf("newsAt = %s, %t; want %s, %t", at, ok, c.at, c.ok)
			}
		})
	}
	p := pod(corev1.PodRunning, running(started, 0))
	if podNews([]*corev1.Pod{p}, started.Add(startNewsDelay-time.Millisecond))("p") || !podNews([]*corev1.Pod{p}, started.Add(startNewsDelay))("p") {
		t.Error("podNews: a running pod's start is news from startNewsDelay after it, not before")
	}
}

// A pass that prunes the pod of a scheduled occurrence after the written lastScheduleTime
// writes its status first: the pod was the only record that the occurrence was decided.
func TestRecordsUnwritten(t *testing.T) {
	podAt := func(occ time.Time, manual bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: runpod.Name("j", occ), Labels: map[string]string{},
			Annotations: map[string]string{runpod.AnnotationScheduledTime: occ.Format(time.RFC3339)}}}
		if manual {
			p.Labels[runpod.LabelRunRequest] = "r1"
		}
		return p
	}
	m := time.Minute
	written := &metav1.Time{Time: t0.Add(m)}
	for _, c := range []struct {
		name    string
		prune   []*corev1.Pod
		written *metav1.Time
		want    bool
	}{
		{"nothing pruned", nil, nil, false},
		{"occurrences the status records", []*corev1.Pod{podAt(t0, false), podAt(t0.Add(m), false)}, written, false},
		{"an occurrence after the written one", []*corev1.Pod{podAt(t0, false), podAt(t0.Add(2*m), false)}, written, true},
		{"no lastScheduleTime written", []*corev1.Pod{podAt(t0, false)}, nil, true},
		{"a manual run after it: no scheduled occurrence", []*corev1.Pod{podAt(t0.Add(2*m), true)}, written, false},
	} {
		if got := recordsUnwritten(c.prune, c.written); got != c.want {
			t.Errorf("%s: %t, want %t", c.name, got, c.want)
		}
	}
}

// TestDecidingAPreparedPodIsNews: the write that moves lastScheduleTime onto a pod prepared
// ahead (its instant come) is never deferred, whenever its job started. Until that write
// lands, the pod is still a prepared one for a pass whose clock is behind the instant (a
// new leader on a slower node; tracking.StillPrepared), and a suspend, schedule edit or
// blackout then would withdraw it: a job that lockwrap had started on the instant was
// stopped. It was deferred while the job had run less than startNewsDelay (a container that
// started less than that before the instant: a slow pull, a short prepareAheadSeconds).
// A pod that was not prepared ahead is its occurrence's from its creation on, and its
// start is still written with its news.
func TestDecidingAPreparedPodIsNews(t *testing.T) {
	at := t0.Add(time.Minute)
	job := passJob("* * * * *", false)
	pod := func(prepared bool, started time.Time) *corev1.Pod {
		p, err := runpod.Build(job, at, runpod.Options{ClusterName: "c", WrapperImage: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if prepared {
			p.Annotations[runpod.AnnotationPreparedAhead] = "true"
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}
		return p
	}
	name := runpod.Name(job.Name, at)
	none := func(string) bool { return false }
	for _, listed := range []bool{false, true} {
		var old *v1alpha1.LockedCronJobStatus
		if listed { // the pod's start was written before its instant
			old = scheduledStatus(t0, at, name)
		} else {
			old = scheduledStatus(t0, at)
		}
		next := scheduledStatus(at, at.Add(time.Minute), name) // the pass just after the instant decides it
		now := at.Add(time.Second)
		for _, c := range []struct {
			prepared   bool
			started    time.Time
			deferrable bool
		}{
			{prepared: true, started: at.Add(-2 * time.Second)},
			{prepared: true, started: at.Add(-time.Minute)},
			{prepared: false, started: at.Add(500 * time.Millisecond), deferrable: true}, // created at its instant: its start is news later
		} {
			active := []*corev1.Pod{pod(c.prepared, c.started)}
			if got := deferrable(old, next, podNews(active, now), name, none); got != c.deferrable {
				t.Errorf("pod prepared %v, its job started %v from the instant, listed before %v: deferrable %v, want %v",
					c.prepared, c.started.Sub(at), listed, got, c.deferrable)
			}
		}
	}
}
