package metrics

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func gather(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

func touchAll(ns, name string) {
	Runs.WithLabelValues(ns, name, "Succeeded").Inc()
	LockWait.WithLabelValues(ns).Observe(1)
	LockHold.WithLabelValues(ns).Observe(1)
	ScheduleLag.WithLabelValues(ns).Observe(1)
	ObserveStartLag(ns, time.Unix(100, 0), time.Unix(103, 500e6))
	LockLost.WithLabelValues(ns, name).Inc()
	NextRun.WithLabelValues(ns, name).Set(1)
	LastSchedule.WithLabelValues(ns, name).Set(1)
	LastSuccess.WithLabelValues(ns, name).Set(1)
	ActiveRuns.WithLabelValues(ns, name).Set(1)
	BackendUp.WithLabelValues(ns, name).Set(1)
	Info.WithLabelValues(ns, name, "k").Set(1)
}

// Families, which rules and the dashboard are checked against, is exactly what the
// registry serves under lockedcron_, with the right types and a help text each.
func TestFamiliesMatchRegistry(t *testing.T) {
	touchAll("ns", "families")
	t.Cleanup(func() { Forget("ns", "families") })
	served := gather(t)
	types := map[dto.MetricType]Kind{dto.MetricType_COUNTER: Counter, dto.MetricType_GAUGE: Gauge, dto.MetricType_HISTOGRAM: Histogram}
	for name, f := range served {
		if !strings.HasPrefix(name, "lockedcron_") {
			continue
		}
		if kind, ok := Families[name]; !ok {
			t.Errorf("%s is served but not in Families", name)
		} else if types[f.GetType()] != kind {
			t.Errorf("%s: served as %s, Families says %s", name, f.GetType(), kind)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", name)
		}
	}
	for name := range Families {
		if _, ok := served[name]; !ok && strings.HasPrefix(name, "lockedcron_") {
			t.Errorf("%s is in Families but not served", name)
		}
	}
}

// Labels stay bounded: namespace and name (plus outcome, or the lock key on the info
// series), never a pod or an occurrence; a histogram's only label is the namespace, so
// that its 13 series are per namespace, not per job.
func TestLabelsAreBounded(t *testing.T) {
	touchAll("ns", "labels")
	t.Cleanup(func() { Forget("ns", "labels") })
	allowed := map[string]bool{"namespace": true, "name": true, "outcome": true, "lock_key": true}
	for name, f := range gather(t) {
		if !strings.HasPrefix(name, "lockedcron_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !allowed[l.GetName()] {
					t.Errorf("%s has label %q", name, l.GetName())
				}
				if f.GetType() == dto.MetricType_HISTOGRAM && l.GetName() != "namespace" {
					t.Errorf("histogram %s has label %q: histograms are per namespace", name, l.GetName())
				}
			}
		}
	}
}

// One job's observations land in its namespace's histograms; Forget drops the job's own
// series and leaves the namespace's histograms to its other jobs.
func TestStartLagAndForget(t *testing.T) {
	touchAll("startlag", "gone")
	touchAll("startlag", "stays")
	var found bool
	for _, m := range gather(t)[NameStartLag].GetMetric() {
		if labelsOf(m)["namespace"] == "startlag" {
			found = true
			if got := m.GetHistogram().GetSampleSum(); got != 7 {
				t.Errorf("start lag sum = %v, want 7 (startedAt - scheduled, twice)", got)
			}
		}
	}
	if !found {
		t.Fatal("no start lag series")
	}
	Forget("startlag", "gone")
	t.Cleanup(func() { Forget("startlag", "stays") })
	for name, f := range gather(t) {
		for _, m := range f.GetMetric() {
			if l := labelsOf(m); l["namespace"] == "startlag" && l["name"] == "gone" {
				t.Errorf("%s%v survives Forget", name, l)
			}
		}
	}
	if n := len(gather(t)[NameLockHold].GetMetric()); n == 0 {
		t.Error("Forget of one job dropped its namespace's histograms")
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestSetInfoKeepsOneSeriesPerJob(t *testing.T) {
	keys := func() []string {
		var out []string
		for _, m := range gather(t)[NameInfo].GetMetric() {
			if l := labelsOf(m); l["namespace"] == "ns" && l["name"] == "info" {
				out = append(out, l["lock_key"])
			}
		}
		return out
	}
	if !SetInfo("ns", "info", "a") {
		t.Error("first SetInfo of a job: first = false")
	}
	if SetInfo("ns", "info", "a") {
		t.Error("second SetInfo of a job: first = true")
	}
	SetInfo("ns", "other", "a") // another job's series stays
	SetInfo("ns", "info", "b")
	if got := keys(); len(got) != 1 || got[0] != "b" {
		t.Errorf("info series of the job after its key changed to b: %v, want [b]", got)
	}
	Forget("ns", "info")
	if got := keys(); len(got) != 0 {
		t.Errorf("info series after Forget: %v", got)
	}
	if !SetInfo("ns", "info", "b") {
		t.Error("SetInfo after Forget: first = false")
	}
	Forget("ns", "info")
	Forget("ns", "other")
}
