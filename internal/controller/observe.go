package controller

import (
	"time"

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
// not hold has no series (rather than a zero that reads as 1970). The counters' series
// are born at 0 on the job's first pass.
func observeStatus(job *v1alpha1.LockedCronJob) {
	ns, name := job.Namespace, job.Name
	st := &job.Status
	first := metrics.SetJob(ns, name, metrics.JobState{
		NextRun:      orZero(st.NextScheduleTime),
		LastSchedule: orZero(st.LastScheduleTime),
		LastSuccess:  orZero(st.LastSuccessfulTime),
		Active:       st.ActiveCount,
		Streak:       runstatus.UnsuccessfulStreak(st.Recent),
		BackendUp:    meta.IsStatusConditionTrue(st.Conditions, ConditionLockBackendReady),
		LockKey:      st.LockKey,
	})
	if first {
		for _, o := range countedOutcomes {
			metrics.AddRuns(ns, name, o, 0)
		}
		metrics.AddLockLost(ns, name, 0)
	}
}

func orZero(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
