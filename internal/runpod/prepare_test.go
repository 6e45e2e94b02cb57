package runpod

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestBuildPrepareAhead: a job whose pods are created ahead of their occurrence
// (spec.prepareAheadSeconds) gets the pod it would get at the instant plus
// LOCKEDCRON_NOT_BEFORE = the occurrence, so that lockwrap waits for it; the deadlines
// stay relative to the occurrence. Without prepare-ahead (unset or 0) the pod is as before.
func TestBuildPrepareAhead(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	plain, err := Build(nightly(), occ, opts)
	if err != nil {
		t.Fatal(err)
	}
	job := nightly()
	job.Spec.PrepareAheadSeconds = ptr.To[int32](30)
	got, err := Build(job, occ, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := plain.DeepCopy()
	c := &want.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "LOCKEDCRON_NOT_BEFORE", Value: "2026-11-30T02:00:00Z"})
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Build() with prepareAheadSeconds mismatch (-want +got):\n%s", d)
	}

	job.Spec.PrepareAheadSeconds = ptr.To[int32](0)
	if got, err := Build(job, occ, opts); err != nil || cmp.Diff(plain, got) != "" {
		t.Errorf("prepareAheadSeconds 0 changed the pod (%v):\n%s", err, cmp.Diff(plain, got))
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
