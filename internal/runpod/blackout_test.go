package runpod

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// TestPodsNameTheirJobAndWhenTheyWereMade: every pod the controller makes, scheduled or
// manual, tells lockwrap its job's UID and when it was made (Options.MadeAt, to the
// millisecond), so that a blackout of the job that begins while the pod waits for the
// lock holds it back (lock.SetBlackout). Without MadeAt (a caller that does not know)
// neither is set, and lockwrap runs unguarded, as before.
func TestPodsNameTheirJobAndWhenTheyWereMade(t *testing.T) {
	made := time.Date(2026, 12, 6, 17, 0, 0, 123_456_789, time.UTC)
	o := opts
	o.MadeAt = made
	occ := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	scheduled, err := Build(nightly(), occ, o)
	if err != nil {
		t.Fatal(err)
	}
	manual, err := BuildManual(nightly(), ManualRun{ID: "fix-1", RequestedAt: made, Contention: v1alpha1.ManualContentionWait}, o)
	if err != nil {
		t.Fatal(err)
	}
	for name, pod := range map[string]*corev1.Pod{"scheduled": scheduled, "manual": manual} {
		cfg := lockwrapConfig(t, pod, nil)
		if cfg.BlackoutID != "uid-1" || !cfg.MadeAt.Equal(made.Truncate(time.Millisecond)) {
			t.Errorf("%s pod: lockwrap gets job %q made at %v, want %q and %v", name, cfg.BlackoutID, cfg.MadeAt, "uid-1", made.Truncate(time.Millisecond))
		}
	}

	o.MadeAt = time.Time{}
	unguarded, err := Build(nightly(), occ, o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := lockwrapConfig(t, unguarded, nil); cfg.BlackoutID != "" || !cfg.MadeAt.IsZero() {
		t.Errorf("without MadeAt: lockwrap gets job %q made at %v, want neither", cfg.BlackoutID, cfg.MadeAt)
	}
}
