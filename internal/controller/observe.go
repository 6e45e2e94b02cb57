package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/metrics"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runstatus"
)

// countedOutcomes are the outcomes whose lockedcron_runs_total series exist from a job's
// first pass, at 0: an alert on increase() then sees the first occurrence of each (a
// counter series born at 1 shows no increase).
var countedOutcomes = append(append([]string(nil), outcomeNames(report.Outcomes)...), runstatus.OutcomeSkippedBlackout)

func outcomeNames(os []report.Outcome) []string {
	names := make([]string, 0, len(os))
	for _, o := range os {
		if string(o) != runstatus.OutcomeSkippedBlackout {
			names = append(names, string(o))
		}
	}
	return names
}

// observeStatus sets the job's gauges from the status a pass wrote: next and last
// occurrence, last success, active runs, lock backend, lock key. A time the status does
// not hold has no series (rather than a zero that reads as 1970).
func observeStatus(job *v1alpha1.LockedCronJob) {
	ns, name := job.Namespace, job.Name
	st := &job.Status
	setTime(metrics.NextRun, ns, name, st.NextScheduleTime)
	setTime(metrics.LastSchedule, ns, name, st.LastScheduleTime)
	setTime(metrics.LastSuccess, ns, name, st.LastSuccessfulTime)
	metrics.ActiveRuns.WithLabelValues(ns, name).Set(float64(st.ActiveCount))
	up := 0.0
	if meta.IsStatusConditionTrue(st.Conditions, ConditionLockBackendReady) {
		up = 1
	}
	metrics.BackendUp.WithLabelValues(ns, name).Set(up)
	// One info series per job (a changed lock key replaces it); the counters' series
	// are born at 0 on the job's first pass.
	if metrics.SetInfo(ns, name, st.LockKey) {
		for _, o := range countedOutcomes {
			metrics.Runs.WithLabelValues(ns, name, o).Add(0)
		}
		metrics.LockLost.WithLabelValues(ns, name).Add(0)
	}
}

func setTime(g *prometheus.GaugeVec, ns, name string, t *metav1.Time) {
	if t == nil {
		g.DeleteLabelValues(ns, name)
		return
	}
	g.WithLabelValues(ns, name).Set(float64(t.UnixNano()) / 1e9)
}
