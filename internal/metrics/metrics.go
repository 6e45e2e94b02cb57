// Package metrics defines the Prometheus metrics the manager exports on its metrics
// endpoint (controller-runtime's registry).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// Runs counts finished occurrences by outcome (one per pod report, or controller decision).
	Runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockedcron_runs_total",
		Help: "Finished occurrences by outcome (Succeeded, Failed, SkippedContention, SuppressedDuplicate, LockLost, Error, SkippedBlackout, Missed).",
	}, []string{"namespace", "name", "outcome"})

	// LockWait is how long pods waited for the lock (contention Retry).
	LockWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lockedcron_lock_wait_seconds",
		Help:    "Time a pod waited before it acquired the lock or gave up.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	}, []string{"namespace", "name"})

	// LockHold is how long runs held the lock.
	LockHold = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lockedcron_lock_hold_seconds",
		Help:    "Time from acquiring to releasing the lock.",
		Buckets: prometheus.ExponentialBuckets(0.1, 4, 10),
	}, []string{"namespace", "name"})

	// ScheduleLag is pod creation time minus scheduled time.
	ScheduleLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lockedcron_schedule_lag_seconds",
		Help:    "Pod creation time minus the occurrence's scheduled time.",
		Buckets: prometheus.ExponentialBuckets(0.005, 3, 10),
	}, []string{"namespace", "name"})

	// LockLost counts runs that lost their lock while the job ran.
	LockLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockedcron_lock_lost_total",
		Help: "Runs whose lock was lost while the job ran.",
	}, []string{"namespace", "name"})
)

func init() {
	crmetrics.Registry.MustRegister(Runs, LockWait, LockHold, ScheduleLag, LockLost)
}

// Forget drops the series of a deleted LockedCronJob.
func Forget(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	Runs.DeletePartialMatch(l)
	LockWait.Delete(l)
	LockHold.Delete(l)
	ScheduleLag.Delete(l)
	LockLost.Delete(l)
}
