package runpod

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestBuildWaitsForTheInstant: every scheduled occurrence's pod carries
// LOCKEDCRON_NOT_BEFORE = the occurrence, so that lockwrap starts nothing before the
// instant on its node's clock: a pod created ahead (spec.prepareAheadSeconds) waits for
// it, and so does one created at the manager's instant on a node whose clock is behind
// the manager's. Prepare-ahead changes nothing else in the pod; the deadlines stay
// relative to the occurrence.
func TestBuildWaitsForTheInstant(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	notBefore := func(p *corev1.Pod) []string {
		var v []string
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "LOCKEDCRON_NOT_BEFORE" && e.Value != "" { // empty: unset to lockwrap
				v = append(v, e.Value)
			}
		}
		return v
	}
	plain, err := Build(nightly(), occ, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := notBefore(plain); len(got) != 1 || got[0] != "2026-11-30T02:00:00Z" {
		t.Errorf("LOCKEDCRON_NOT_BEFORE without prepare-ahead: %q, want the occurrence", got)
	}
	for _, ahead := range []int32{0, 30} {
		job := nightly()
		job.Spec.PrepareAheadSeconds = ptr.To(ahead)
		got, err := Build(job, occ, opts)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(plain, got); d != "" {
			t.Errorf("prepareAheadSeconds %d changed the pod (-without +with):\n%s", ahead, d)
		}
	}
	// A window that began before the occurrence (its deadline): the pod ends Missed at
	// once, as before, rather than being refused by lockwrap for --not-before after
	// --not-after.
	o := opts
	o.NotAfter = occ.Add(-10 * time.Second)
	late, err := Build(nightly(), occ, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := notBefore(late); len(got) != 0 {
		t.Errorf("LOCKEDCRON_NOT_BEFORE %q after the pod's deadline", got)
	}
	// A manual run starts when asked: no wait.
	m, err := BuildManual(nightly(), ManualRun{ID: "r1", RequestedAt: occ}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := notBefore(m); len(got) != 0 {
		t.Errorf("manual run: LOCKEDCRON_NOT_BEFORE %q", got)
	}
}

// TestBuildPrepareAheadRefusesAWindowBeforeTheOccurrence: a pod created ahead whose
// deadline (a blackout window start) is before its occurrence could never run its job;
// Build says so instead of making a pod lockwrap refuses. A window starting at the
// occurrence makes a pod that ends Missed, as without prepare-ahead.
func TestBuildPrepareAheadRefusesAWindowBeforeTheOccurrence(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	job := nightly()
	job.Spec.PrepareAheadSeconds = ptr.To[int32](60)
	o := opts
	o.NotAfter = occ.Add(-10 * time.Second)
	if _, err := Build(job, occ, o); err == nil || !strings.Contains(err.Error(), "before the occurrence") {
		t.Fatalf("window before the occurrence: %v", err)
	}
	o.NotAfter = occ
	if _, err := Build(job, occ, o); err != nil {
		t.Fatalf("window at the occurrence: %v", err)
	}
	// Without prepare-ahead the pod is created at the instant: as before, no refusal.
	job.Spec.PrepareAheadSeconds = nil
	o.NotAfter = occ.Add(-10 * time.Second)
	if _, err := Build(job, occ, o); err != nil {
		t.Fatal(err)
	}
}
