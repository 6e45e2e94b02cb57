// Package metrics defines the Prometheus metrics the manager exports on its metrics
// endpoint (controller-runtime's registry).
//
// The counters and gauges are labelled by the LockedCronJob's namespace and name only
// (plus the run outcome, or the lock key on the info series): one series set per job,
// whatever its pods or occurrences. Forget removes a deleted job's series. The four
// histograms are labelled by namespace only: a histogram is 13 series (10 buckets, +Inf,
// sum, count), so per job they were 52 series a job, 260,000 at 5,000 jobs, most of the
// manager's heap and of each scrape (issue 13). Lateness and lock times are properties of
// the manager and of a tenant's jobs together; a single job's are in its status and
// Events.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric names, for alert rules and the dashboard (see Families).
const (
	NameRuns         = "lockedcron_runs_total"
	NameLockWait     = "lockedcron_lock_wait_seconds"
	NameLockHold     = "lockedcron_lock_hold_seconds"
	NameScheduleLag  = "lockedcron_schedule_lag_seconds"
	NameStartLag     = "lockedcron_start_lag_seconds"
	NameLockLost     = "lockedcron_lock_lost_total"
	NameNextRun      = "lockedcron_next_run_timestamp_seconds"
	NameLastSchedule = "lockedcron_last_schedule_timestamp_seconds"
	NameLastSuccess  = "lockedcron_last_success_timestamp_seconds"
	NameActiveRuns   = "lockedcron_active_runs"
	NameBackendUp    = "lockedcron_backend_up"
	NameInfo         = "lockedcron_info"
	// NameReconcileErrors is controller-runtime's own counter of reconcile passes that
	// returned an error, labelled controller="lockedcronjob" for this manager's
	// reconciler; it is served on the same endpoint, so lockedcron defines no copy.
	NameReconcileErrors = "controller_runtime_reconcile_errors_total"
)

// Kind is a metric family's type.
type Kind string

// Kinds of Families.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Families lists every family the metrics endpoint serves for lockedcron, by name: what
// alert rules and the dashboard may query (a histogram also as _bucket, _sum, _count).
var Families = map[string]Kind{
	NameRuns:            Counter,
	NameLockWait:        Histogram,
	NameLockHold:        Histogram,
	NameScheduleLag:     Histogram,
	NameStartLag:        Histogram,
	NameLockLost:        Counter,
	NameNextRun:         Gauge,
	NameLastSchedule:    Gauge,
	NameLastSuccess:     Gauge,
	NameActiveRuns:      Gauge,
	NameBackendUp:       Gauge,
	NameInfo:            Gauge,
	NameReconcileErrors: Counter,
}

var (
	jobLabels       = []string{"namespace", "name"}
	namespaceLabels = []string{"namespace"}
)

var (
	// Runs counts finished occurrences by outcome (one per pod report, or controller decision).
	Runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameRuns,
		Help: "Finished occurrences by outcome (Succeeded, Failed, SkippedContention, SuppressedDuplicate, LockLost, Error, SkippedBlackout, Missed, Interrupted).",
	}, []string{"namespace", "name", "outcome"})

	// LockWait is how long pods waited for the lock (contention Retry), per namespace.
	LockWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameLockWait,
		Help:    "Time a pod waited before it acquired the lock or gave up.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	}, namespaceLabels)

	// LockHold is how long runs held the lock, per namespace.
	LockHold = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameLockHold,
		Help:    "Time from acquiring to releasing the lock.",
		Buckets: prometheus.ExponentialBuckets(0.1, 4, 10),
	}, namespaceLabels)

	// ScheduleLag is pod creation time minus scheduled time, per namespace.
	ScheduleLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameScheduleLag,
		Help:    "Pod creation time minus the occurrence's scheduled time.",
		Buckets: prometheus.ExponentialBuckets(0.005, 3, 10),
	}, namespaceLabels)

	// StartLag is when lockwrap started minus the scheduled time: ScheduleLag plus the
	// pod's scheduling, image and init container time (see ObserveStartLag), per namespace.
	StartLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameStartLag,
		Help:    "Time lockwrap started in the occurrence's pod minus the occurrence's scheduled time.",
		Buckets: prometheus.ExponentialBuckets(0.05, 3, 10),
	}, namespaceLabels)

	// LockLost counts runs that lost their lock while the job ran.
	LockLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameLockLost,
		Help: "Runs whose lock was lost while the job ran.",
	}, jobLabels)

	// NextRun is status.nextScheduleTime (absent while suspended or never firing).
	NextRun = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameNextRun,
		Help: "Unix time of the job's next scheduled occurrence (status.nextScheduleTime); absent while suspended or when the schedule never fires.",
	}, jobLabels)

	// LastSchedule is status.lastScheduleTime: with NextRun it gives the schedule's
	// interval (next - last), which alerts scale by.
	LastSchedule = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameLastSchedule,
		Help: "Unix time of the latest occurrence the job decided (started, skipped or missed; status.lastScheduleTime).",
	}, jobLabels)

	// LastSuccess is status.lastSuccessfulTime.
	LastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameLastSuccess,
		Help: "Unix time (scheduled time) of the latest occurrence that succeeded (status.lastSuccessfulTime); absent until one has.",
	}, jobLabels)

	// ActiveRuns is status.activeCount.
	ActiveRuns = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameActiveRuns,
		Help: "Pods of the job's occurrences still running (status.activeCount).",
	}, jobLabels)

	// BackendUp is the LockBackendReady condition.
	BackendUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameBackendUp,
		Help: "1 when the job's lock backend is usable (Secret read, Redis answered: condition LockBackendReady True), else 0.",
	}, jobLabels)

	// Info carries the job's lock key, to join the per-job series by lock key.
	Info = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: NameInfo,
		Help: "Always 1; lock_key is the job's lock key in effect (status.lockKey), to group jobs that share one.",
	}, []string{"namespace", "name", "lock_key"})
)

func init() {
	crmetrics.Registry.MustRegister(Runs, LockWait, LockHold, ScheduleLag, StartLag, LockLost,
		NextRun, LastSchedule, LastSuccess, ActiveRuns, BackendUp, Info)
}

// ObserveStartLag records a run's start lag: startedAt (when lockwrap started) minus the
// occurrence's scheduled time.
func ObserveStartLag(namespace string, scheduled, startedAt time.Time) {
	StartLag.WithLabelValues(namespace).Observe(startedAt.Sub(scheduled).Seconds())
}

// jobKeys remembers each job's lock key on its info series (namespace/name → key), so
// that SetInfo replaces a changed key's series without scanning every job's (a partial
// match walks all series: at 1,000 jobs it cost more CPU than the rest of a pass).
var jobKeys sync.Map

// SetInfo sets the job's info series to lockKey, dropping the series of the key it had
// before. It reports whether this is the job's first info series since the manager
// started (or since Forget).
func SetInfo(namespace, name, lockKey string) (first bool) {
	prev, loaded := jobKeys.Swap(namespace+"/"+name, lockKey)
	if loaded && prev.(string) != lockKey {
		Info.DeleteLabelValues(namespace, name, prev.(string))
	}
	Info.WithLabelValues(namespace, name, lockKey).Set(1)
	return !loaded
}

// Forget drops the series of a deleted LockedCronJob (the histograms are its
// namespace's).
func Forget(namespace, name string) {
	jobKeys.Delete(namespace + "/" + name)
	l := prometheus.Labels{"namespace": namespace, "name": name}
	Runs.DeletePartialMatch(l)
	LockLost.Delete(l)
	NextRun.Delete(l)
	LastSchedule.Delete(l)
	LastSuccess.Delete(l)
	ActiveRuns.Delete(l)
	BackendUp.Delete(l)
	Info.DeletePartialMatch(l)
}
