// Command dashboard writes lockedcron's Grafana dashboard (config/grafana/lockedcron.json,
// `make manifests`), written as code with the Grafana Foundation SDK. It is a module of
// its own so that the SDK, and the PromQL parser its test uses, stay out of the
// operator's module.
//
//	go run . -o ../../config/grafana/lockedcron.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Metric names (internal/metrics; the test checks each one the dashboard queries
// against what the manager serves).
const (
	runs            = "lockedcron_runs_total"
	lockWait        = "lockedcron_lock_wait_seconds"
	lockHold        = "lockedcron_lock_hold_seconds"
	scheduleLag     = "lockedcron_schedule_lag_seconds"
	lockLost        = "lockedcron_lock_lost_total"
	nextRun         = "lockedcron_next_run_timestamp_seconds"
	lastSuccess     = "lockedcron_last_success_timestamp_seconds"
	activeRuns      = "lockedcron_active_runs"
	backendUp       = "lockedcron_backend_up"
	info            = "lockedcron_info"
	reconcileErrors = "controller_runtime_reconcile_errors_total"
)

// UID is the dashboard's uid (stable: links and provisioning refer to it).
const UID = "lockedcron"

// sel selects the jobs the dashboard's variables chose; nsSel their namespaces (the
// histograms are per namespace, not per job).
const (
	sel   = `namespace=~"$namespace", name=~"$job"`
	nsSel = `namespace=~"$namespace"`
)

var ds = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("$datasource")}

func ptr[T any](v T) *T { return &v }

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(ds).Expr(expr).LegendFormat(legend)
}

func graph(title, description, unit string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Description(description).Datasource(ds).
		Unit(unit).Height(8).Span(12)
}

// perLockKey joins a per-job rate of runs with the outcome matcher to the jobs' lock keys.
func perLockKey(outcomes string) string {
	return fmt.Sprintf(`sum by (lock_key) (increase(%s{%s, outcome=~%q}[$__rate_interval]) * on (namespace, name) group_left (lock_key) %s{%s})`,
		runs, sel, outcomes, info, sel)
}

func quantile(q, hist string) string {
	return fmt.Sprintf(`histogram_quantile(%s, sum by (namespace, le) (rate(%s_bucket{%s}[$__rate_interval])))`, q, hist, nsSel)
}

// Build is the dashboard.
func Build() (dashboard.Dashboard, error) {
	return dashboard.NewDashboardBuilder("lockedcron").
		Uid(UID).
		Description("LockedCronJobs: runs by outcome, lock contention per key, lock hold and wait, schedule lag, lost locks, next runs. Alerts and runbooks: docs/monitoring.md.").
		Tags([]string{"lockedcron", "kubernetes"}).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("namespace").Label("Namespace").Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr(fmt.Sprintf("label_values(%s, namespace)", info))}).
			Multi(true).IncludeAll(true).AllValue(".*").Refresh(dashboard.VariableRefreshOnTimeRangeChanged)).
		WithVariable(dashboard.NewQueryVariableBuilder("job").Label("LockedCronJob").Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr(fmt.Sprintf(`label_values(%s{namespace=~"$namespace"}, name)`, info))}).
			Multi(true).IncludeAll(true).AllValue(".*").Refresh(dashboard.VariableRefreshOnTimeRangeChanged)).
		WithRow(dashboard.NewRowBuilder("Runs")).
		WithPanel(graph("Runs by outcome", "Finished occurrences per interval, by outcome (lockedcron_runs_total).", "short").
			DrawStyle(common.GraphDrawStyleBars).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
			WithTarget(query(fmt.Sprintf(`sum by (outcome) (increase(%s{%s}[$__rate_interval]))`, runs, sel), "{{outcome}}"))).
		WithPanel(graph("Skipped vs ran per lock key", "Per lock key: occurrences run (Succeeded, Failed, LockLost) and pods that skipped because the lock was held. Skips with no run of the key: see LockedCronSkippedWithoutRunner.", "short").
			WithTarget(query(perLockKey("Succeeded|Failed|LockLost"), "{{lock_key}} ran")).
			WithTarget(query(perLockKey("SkippedContention"), "{{lock_key}} skipped"))).
		WithRow(dashboard.NewRowBuilder("Lock")).
		WithPanel(graph("Lock hold time (p50, p90)", "Time from acquiring to releasing the lock, per namespace (lockedcron_lock_hold_seconds).", "s").
			WithTarget(query(quantile("0.5", lockHold), "p50 {{namespace}}")).
			WithTarget(query(quantile("0.9", lockHold), "p90 {{namespace}}"))).
		WithPanel(graph("Lock wait time (p90)", "Time pods waited for a held lock before acquiring it or giving up, per namespace (lockedcron_lock_wait_seconds).", "s").
			WithTarget(query(quantile("0.9", lockWait), "{{namespace}}"))).
		WithPanel(graph("Lock lost", "Runs that lost their lock while the job ran (lockedcron_lock_lost_total); see LockedCronLockLost.", "short").
			DrawStyle(common.GraphDrawStyleBars).
			WithTarget(query(fmt.Sprintf(`sum by (namespace, name) (increase(%s{%s}[$__rate_interval]))`, lockLost, sel), "{{namespace}}/{{name}}"))).
		WithPanel(graph("Lock backend up", "1 while the job's Redis is usable (lockedcron_backend_up).", "short").
			Min(0).
			WithTarget(query(fmt.Sprintf(`%s{%s}`, backendUp, sel), "{{namespace}}/{{name}}"))).
		WithRow(dashboard.NewRowBuilder("Schedule")).
		WithPanel(graph("Schedule lag (p90)", "Pod creation time minus the occurrence's scheduled time, per namespace (lockedcron_schedule_lag_seconds).", "s").
			WithTarget(query(quantile("0.9", scheduleLag), "{{namespace}}"))).
		WithPanel(graph("Active runs", "Pods of occurrences still running (lockedcron_active_runs).", "short").
			Min(0).
			WithTarget(query(fmt.Sprintf(`%s{%s}`, activeRuns, sel), "{{namespace}}/{{name}}"))).
		WithPanel(table.NewPanelBuilder().Title("Next run per job").
			Description("Next scheduled occurrence and last successful one per job (lockedcron_next_run_timestamp_seconds, lockedcron_last_success_timestamp_seconds); a suspended job has no next run.").
			Datasource(ds).Unit("dateTimeAsIso").Height(8).Span(24).
			WithTarget(query(fmt.Sprintf(`%s{%s} * 1000`, nextRun, sel), "next run").Instant().Format(prometheus.PromQueryFormatTable).RefId("next")).
			WithTarget(query(fmt.Sprintf(`%s{%s} * 1000`, lastSuccess, sel), "last success").Instant().Format(prometheus.PromQueryFormatTable).RefId("success"))).
		WithRow(dashboard.NewRowBuilder("Operator")).
		WithPanel(graph("Reconcile errors", "Reconcile passes of the lockedcron manager that returned an error (controller-runtime's controller_runtime_reconcile_errors_total); see LockedCronReconcileErrors.", "short").
			WithTarget(query(fmt.Sprintf(`sum by (controller) (increase(%s{controller="lockedcronjob"}[$__rate_interval]))`, reconcileErrors), "{{controller}}"))).
		Build()
}

// JSON is the dashboard as config/grafana/lockedcron.json holds it.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func main() {
	out := flag.String("o", "-", "output file (- for stdout)")
	flag.Parse()
	b, err := JSON()
	if err == nil {
		if *out == "-" {
			_, err = os.Stdout.Write(b)
		} else {
			err = os.WriteFile(*out, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}
