package runpod

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// TestNotAfterBlackoutWindow: lockwrap gets the earlier of the starting deadline and the
// next known blackout window start, so that a pod that starts late never runs its job
// inside a window that began after it was created.
func TestNotAfterBlackoutWindow(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	const unset = "<unset>"
	for _, tc := range []struct {
		name     string
		deadline *int64
		window   time.Time
		want     string
	}{
		{"deadline only", ptr.To[int64](120), time.Time{}, "2026-11-30T02:02:00Z"},
		{"window before the deadline", ptr.To[int64](120), occ.Add(90 * time.Second), "2026-11-30T02:01:30Z"},
		{"window after the deadline", ptr.To[int64](120), occ.Add(time.Hour), "2026-11-30T02:02:00Z"},
		{"window, no deadline", nil, occ.Add(time.Hour), "2026-11-30T03:00:00Z"},
		{"window start rounds down to the second", nil, occ.Add(1500 * time.Millisecond), "2026-11-30T02:00:01Z"},
		{"neither", nil, time.Time{}, unset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := nightly()
			job.Spec.StartingDeadlineSeconds = tc.deadline
			o := opts
			o.NotAfter = tc.window
			pod, err := Build(job, occ, o)
			if err != nil {
				t.Fatal(err)
			}
			got := unset
			for _, e := range pod.Spec.Containers[0].Env {
				if e.Name == "LOCKEDCRON_NOT_AFTER" && e.Value != "" { // empty: unset to lockwrap
					got = e.Value
				}
			}
			if got != tc.want {
				t.Errorf("LOCKEDCRON_NOT_AFTER = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestBuildAddsTrackingFinalizer: every pod is created with the tracking finalizer, so
// that a pod deleted before it was counted is still counted.
func TestBuildAddsTrackingFinalizer(t *testing.T) {
	pod, err := Build(nightly(), time.Unix(3600, 0), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Finalizers) != 1 || pod.Finalizers[0] != FinalizerTracking {
		t.Errorf("finalizers = %v, want [%s]", pod.Finalizers, FinalizerTracking)
	}
}
