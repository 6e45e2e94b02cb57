package runstatus

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestFoldManualRun: a manual run's pod is counted like any run, and status.recent says
// it was manual; an occurrence's says Scheduled.
func TestFoldManualRun(t *testing.T) {
	var st v1alpha1.LockedCronJobStatus
	manual := finishedPod("job-m-abc", t0, corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"c/ns/job-m-abc","fencingToken":9}`)
	manual.Labels = map[string]string{runpod.LabelRunRequest: "fix-1"}
	Fold(&st, ResultOf(manual))
	Fold(&st, ResultOf(finishedPod("job-1", t0.Add(-60e9), corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"c/ns/job-1","fencingToken":8}`)))
	if st.Counters.Runs != 2 || st.Counters.Succeeded != 2 {
		t.Errorf("counters %+v, want 2 runs, 2 succeeded", st.Counters)
	}
	if len(st.Recent) != 2 || st.Recent[0].Trigger != v1alpha1.TriggerManual || st.Recent[0].Pod != "job-m-abc" || st.Recent[1].Trigger != v1alpha1.TriggerScheduled {
		t.Errorf("recent %+v, want the manual run then the scheduled one", st.Recent)
	}
}

// rerunPod is the finished pod of a manual run of occurrence occ requested at req.
func rerunPod(name string, occ, req time.Time) *corev1.Pod {
	p := finishedPod(name, occ, corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"c/ns/`+name+`","fencingToken":99}`)
	p.Labels = map[string]string{runpod.LabelRunRequest: "fix-1"}
	p.Annotations[runpod.AnnotationRequestedAt] = req.Format(time.RFC3339)
	p.CreationTimestamp = metav1.NewTime(req)
	return p
}

// TestRerunOfAnOldOccurrenceIsListedAsItRan: a manual run of an occurrence older than
// the ten newest (a */1 job's failed run, re-run half an hour later) is listed in
// status.recent, at the time it was requested: ordered by occurrence, it was cut at once,
// and `kubectl lockedcron history`, and `run --wait` once its pod was gone, never saw it.
func TestRerunOfAnOldOccurrenceIsListedAsItRan(t *testing.T) {
	var st v1alpha1.LockedCronJobStatus
	for i := range RecentLimit {
		Fold(&st, ResultOf(finishedPod(fmt.Sprintf("job-%d", i), t0.Add(-time.Duration(i)*time.Minute), corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"h","fencingToken":1}`)))
	}
	Fold(&st, ResultOf(rerunPod("job-m-abc", t0.Add(-30*time.Minute), t0.Add(30*time.Second))))
	if len(st.Recent) != RecentLimit || st.Recent[0].Pod != "job-m-abc" || st.Recent[0].RequestedAt == nil ||
		!st.Recent[0].RequestedAt.Time.Equal(t0.Add(30*time.Second)) || !st.Recent[0].Occurrence.Time.Equal(t0.Add(-30*time.Minute)) {
		t.Fatalf("recent %+v: want the re-run first (requested after every listed occurrence), with its occurrence and request time", st.Recent)
	}
	// A later scheduled occurrence comes before it; it stays while it is among the ten
	// newest by when they ran.
	Fold(&st, ResultOf(finishedPod("job-new", t0.Add(time.Minute), corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"h","fencingToken":2}`)))
	if st.Recent[0].Pod != "job-new" || st.Recent[1].Pod != "job-m-abc" {
		t.Errorf("recent %v, %v first: want the 02:01 occurrence, then the re-run requested at 02:00:30", st.Recent[0].Pod, st.Recent[1].Pod)
	}
}

// TestRerunPodIsPrunedAsItRan: the pods kept as history are the newest by when they ran:
// a re-run of an old occurrence, just ended, was the first pruned (oldest occurrence).
func TestRerunPodIsPrunedAsItRan(t *testing.T) {
	now := t0.Add(time.Hour)
	rerun := rerunPod("job-m-abc", t0.Add(-30*time.Minute), now.Add(-time.Minute))
	pods := []*corev1.Pod{
		finishedPod("job-a", now.Add(-5*time.Minute), corev1.PodSucceeded, ""),
		finishedPod("job-b", now.Add(-4*time.Minute), corev1.PodSucceeded, ""),
		finishedPod("job-c", now.Add(-3*time.Minute), corev1.PodSucceeded, ""),
		rerun,
	}
	pruned := Prune(pods, 3, 1, now)
	if len(pruned) != 1 || pruned[0].Name != "job-a" {
		var names []string
		for _, p := range pruned {
			names = append(names, p.Name)
		}
		t.Errorf("pruned %v, want job-a (the oldest run): the re-run ran last", names)
	}
}

// TestRerunIsTheLastHolder (helper-96): a re-run of 01:30's occurrence, requested at
// 02:00:30 after 02:00 ran, held the lock last (token 99). lastHolder was ordered by
// occurrence and stayed on 02:00's run, while lastSuccess and recent[0] named the re-run;
// a scheduled run that comes after the re-run's request is the last holder again.
func TestRerunIsTheLastHolder(t *testing.T) {
	var st v1alpha1.LockedCronJobStatus
	Fold(&st, ResultOf(finishedPod("job-1", t0, corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"c/ns/job-1","fencingToken":8}`)))
	Fold(&st, ResultOf(rerunPod("job-m-abc", t0.Add(-30*time.Minute), t0.Add(30*time.Second))))
	if st.LastHolder.FencingToken != 99 || st.LastHolder.RequestedAt == nil || !st.LastHolder.Occurrence.Time.Equal(t0.Add(-30*time.Minute)) {
		t.Fatalf("lastHolder %+v (lastSuccess token %d, recent[0] %s): the re-run's, with its request time and occurrence", *st.LastHolder, st.LastSuccess.FencingToken, st.Recent[0].Pod)
	}
	// Folded late, a scheduled run from before the request does not take it back …
	Fold(&st, ResultOf(finishedPod("job-0", t0.Add(-time.Minute), corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"c/ns/job-0","fencingToken":7}`)))
	if st.LastHolder.FencingToken != 99 {
		t.Errorf("lastHolder %+v: an occurrence before the re-run's request took it", *st.LastHolder)
	}
	// … one after it does.
	Fold(&st, ResultOf(finishedPod("job-2", t0.Add(time.Minute), corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"c/ns/job-2","fencingToken":100}`)))
	if st.LastHolder.FencingToken != 100 || st.LastHolder.RequestedAt != nil {
		t.Errorf("lastHolder %+v: want the scheduled run after the re-run", *st.LastHolder)
	}
}
