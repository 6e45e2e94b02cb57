package tracking

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestDecideManualRun: a manual run's pod waits to start until ManualWaitLimit after
// its request, even when it re-runs an occurrence from long ago and the job's
// startingDeadlineSeconds is short; after that it is counted missed, naming the limit.
func TestDecideManualRun(t *testing.T) {
	requested := occ.Add(10 * time.Hour) // re-running the 02:00 occurrence at noon
	manual := func(p *corev1.Pod) {
		p.Labels = map[string]string{runpod.LabelRunRequest: "rerun-1"}
		p.Annotations[runpod.AnnotationRequestedAt] = requested.Format(time.RFC3339)
		p.CreationTimestamp.Time = requested
	}
	in := Input{StartingDeadline: ptr.To(30 * time.Second)}

	in.Now = requested.Add(time.Minute)
	d := Decide(pod(manual, waiting("ContainerCreating", "")), occ, in)
	if d.Verdict != Active || !d.Recheck.Equal(requested.Add(runpod.ManualWaitLimit)) {
		t.Fatalf("a minute after the request: %+v, want Active until %s", d, requested.Add(runpod.ManualWaitLimit))
	}
	in.Now = requested.Add(runpod.ManualWaitLimit)
	d = Decide(pod(manual, waiting("ContainerCreating", "")), occ, in)
	if d.Verdict != Withdraw || !strings.Contains(d.Reason, "manual run's wait limit") {
		t.Fatalf("at the limit: %+v, want Withdraw naming the manual wait limit", d)
	}
	// The same pod without the request is an occurrence's: long past its deadline.
	in.Now = requested.Add(time.Minute)
	if d := Decide(pod(waiting("ContainerCreating", "")), occ, in); d.Verdict != Withdraw {
		t.Fatalf("scheduled pod: %+v", d)
	}
}
