// Package metrics defines the Prometheus metrics the manager exports on its metrics
// endpoint: histograms in controller-runtime's registry, and per-job series, which the
// endpoint's own handler (Handler) writes after the registry's.
//
// The counters and gauges are labelled by the LockedCronJob's namespace and name only
// (plus the run outcome, or the lock key on the info series): one series set per job,
// whatever its pods or occurrences, built at scrape time from one record per job
// (jobs.go). Forget removes a deleted job's series. The four
// histograms are labelled by namespace only: a histogram is 13 series (10 buckets, +Inf,
// sum, count), so per job they were 52 series a job, 260,000 at 5,000 jobs, most of the
// manager's heap and of each scrape (issue 13). Lateness and lock times are properties of
// the manager and of a tenant's jobs together; a single job's are in its status and
// Events.
package metrics

import (
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
	NameStreak       = "lockedcron_unsuccessful_streak"
	NameLeadingSince = "lockedcron_leading_since_timestamp_seconds"
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
	NameStreak:          Gauge,
	NameLeadingSince:    Gauge,
	NameBackendUp:       Gauge,
	NameInfo:            Gauge,
	NameReconcileErrors: Counter,
}

var (
	jobLabels       = []string{"namespace", "name"}
	namespaceLabels = []string{"namespace"}
)

var (
	// LockWait is how long pods waited for the lock (contention Retry), per namespace.
	LockWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameLockWait,
		Help:    "Time a pod waited before it acquired the lock or gave up, for runs that tried more than once (a first attempt that got the lock or was skipped waited for nothing and is not observed).",
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
		Name: NameScheduleLag,
		Help: "Pod creation time minus the occurrence's scheduled time.",
		// 5 ms to 44 min: a manager down or far behind (a failover) creates pods minutes
		// late, which a last bucket of 98 s told as "up to 1m38s" (helper-110).
		Buckets: prometheus.ExponentialBuckets(0.005, 3, 13),
	}, namespaceLabels)

	// StartLag is when the job's command started (the report's startedAt, after the lock
	// was taken) minus the scheduled time: ScheduleLag plus the pod's scheduling, image,
	// init container and lock time (see ObserveStartLag), per namespace; scheduled runs only.
	StartLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    NameStartLag,
		Help:    "Time the job's command started in the occurrence's pod (its report's startedAt) minus the occurrence's scheduled time; scheduled runs only.",
		Buckets: prometheus.ExponentialBuckets(0.05, 3, 10),
	}, namespaceLabels)
)

// LeadingSince is when this manager was elected leader (Unix seconds; 0 on a standby):
// a counter's series a new leader makes may be born above 0 in its first pass, never
// scraped at 0, and the alerts on increase() see those only with it.
var LeadingSince = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: NameLeadingSince,
	Help: "Unix time this manager became the leader; 0 while it is a standby.",
})

func init() {
	crmetrics.Registry.MustRegister(LockWait, LockHold, ScheduleLag, StartLag, LeadingSince)
	// Whatever gathers controller-runtime's registry gathers the per-job families too, all
	// at once (a metrics server without Filter serves them so). Every package's init has
	// run before the manager starts its metrics server.
	registry = crmetrics.Registry
	crmetrics.Registry = withJobs{Registerer: crmetrics.Registry, registry: crmetrics.Registry}
}

// registry is controller-runtime's registry without the per-job families, which Handler
// writes itself.
var registry prometheus.Gatherer

// ObserveStartLag records a run's start lag: startedAt (when the job's command started,
// from its report) minus the occurrence's scheduled time.
func ObserveStartLag(namespace string, scheduled, startedAt time.Time) {
	StartLag.WithLabelValues(namespace).Observe(startedAt.Sub(scheduled).Seconds())
}
