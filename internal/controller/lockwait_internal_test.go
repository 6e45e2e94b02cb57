package controller

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/metrics"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runstatus"
)

// TestLockWaitIsOnlyForRunsThatFoundTheLockHeld: lockedcron_lock_wait_seconds is the time
// pods waited for a held lock (the dashboard's "Lock wait time"). A run whose first
// attempt got the lock, or was skipped at once, waited for nothing: its waitedMs is the
// connection's set-up and a round trip, and observing it filled the histogram with every
// run of every job, Skip ones too, and its p90 said nothing about contention.
func TestLockWaitIsOnlyForRunsThatFoundTheLockHeld(t *testing.T) {
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "lockwait-test", Name: "j"}}
	observed := func() (uint64, float64) {
		var m dto.Metric
		if err := metrics.LockWait.WithLabelValues(job.Namespace).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	r := &LockedCronJobReconciler{}
	for _, c := range []struct {
		name     string
		rep      report.Report
		observed bool
	}{
		{"acquired at the first attempt", report.Report{Outcome: report.Succeeded, Attempts: 1, WaitedMs: 14}, false},
		{"skipped at the first attempt (Skip)", report.Report{Outcome: report.SkippedContention, Attempts: 1, WaitedMs: 9}, false},
		{"acquired at the third attempt (Retry)", report.Report{Outcome: report.Succeeded, Attempts: 3, WaitedMs: 2500}, true},
		{"gave up after eight attempts (Retry)", report.Report{Outcome: report.SkippedContention, Attempts: 8, WaitedMs: 4000}, true},
	} {
		n0, sum0 := observed()
		r.emit(job, &told{counted: []runstatus.Result{{Pod: "p", Report: c.rep}}})
		n1, sum1 := observed()
		switch {
		case c.observed && (n1 != n0+1 || math.Abs(sum1-sum0-float64(c.rep.WaitedMs)/1000) > 1e-9):
			t.Errorf("%s: %d observations of %v s, want 1 of %v s", c.name, n1-n0, sum1-sum0, float64(c.rep.WaitedMs)/1000)
		case !c.observed && n1 != n0:
			t.Errorf("%s: observed (%v s): it did not wait for a held lock", c.name, sum1-sum0)
		}
	}
}
