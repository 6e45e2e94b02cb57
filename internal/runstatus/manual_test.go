package runstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

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
