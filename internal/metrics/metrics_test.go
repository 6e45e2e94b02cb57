package metrics

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	AddRuns(ns, name, "Succeeded", 1)
	LockWait.WithLabelValues(ns).Observe(1)
	LockHold.WithLabelValues(ns).Observe(1)
	ScheduleLag.WithLabelValues(ns).Observe(1)
	ObserveStartLag(ns, time.Unix(100, 0), time.Unix(103, 500e6))
	AddLockLost(ns, name, 1)
	SetJob(ns, name, JobState{NextRun: time.Unix(1, 0), LastSchedule: time.Unix(1, 0), LastSuccess: time.Unix(1, 0), Active: 1, BackendUp: true, LockKey: "k"})
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
	for name, f := range gather(t) {
		for _, m := range f.GetMetric() {
			if l := labelsOf(m); l["namespace"] == "startlag" && l["name"] == "gone" {
				t.Errorf("%s%v survives Forget", name, l)
			}
		}
	}
	inNamespace := func(name string) int {
		n := 0
		for _, m := range gather(t)[name].GetMetric() {
			if labelsOf(m)["namespace"] == "startlag" {
				n++
			}
		}
		return n
	}
	if inNamespace(NameLockHold) == 0 {
		t.Error("Forget of one job dropped its namespace's histograms")
	}
	// Its last job gone, the namespace's histograms go too.
	Forget("startlag", "stays")
	for _, name := range []string{NameLockWait, NameLockHold, NameScheduleLag, NameStartLag} {
		if n := inNamespace(name); n != 0 {
			t.Errorf("%s: %d series of a namespace without jobs", name, n)
		}
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// A job's series, as the endpoint serves them: counters born at 0 by Add(0), gauges from
// the last SetJob (a zero time has no series), one info series with the lock key in
// effect; Forget drops them all, and the next SetJob is the job's first again.
func TestJobSeries(t *testing.T) {
	series := func() map[string]float64 {
		out := map[string]float64{}
		for name, f := range gather(t) {
			for _, m := range f.GetMetric() {
				l := labelsOf(m)
				if l["namespace"] != "ns" || l["name"] != "series" {
					continue
				}
				v := m.GetGauge().GetValue()
				if f.GetType() == dto.MetricType_COUNTER {
					v = m.GetCounter().GetValue()
				}
				key := name
				if o := l["outcome"] + l["lock_key"]; o != "" {
					key += "{" + o + "}"
				}
				out[key] = v
			}
		}
		return out
	}
	if !SetJob("ns", "series", JobState{NextRun: time.Unix(1700000000, 5e8), LockKey: "a"}) {
		t.Error("first SetJob of a job: first = false")
	}
	AddRuns("ns", "series", "Succeeded", 0)
	AddRuns("ns", "series", "Missed", 0)
	AddLockLost("ns", "series", 0)
	AddRuns("ns", "series", "Missed", 3)
	want := map[string]float64{
		NameRuns + "{Succeeded}": 0, NameRuns + "{Missed}": 3, NameLockLost: 0,
		NameNextRun: 1700000000.5, NameActiveRuns: 0, NameStreak: 0, NameBackendUp: 0, NameInfo + "{a}": 1,
	}
	if got := series(); !equal(got, want) {
		t.Errorf("series:\n got %v\nwant %v", got, want)
	}
	if SetJob("ns", "series", JobState{LastSchedule: time.Unix(1700000060, 0), LastSuccess: time.Unix(1700000000, 0), Active: 2, Streak: 4, BackendUp: true, LockKey: "b"}) {
		t.Error("second SetJob of a job: first = true")
	}
	AddLockLost("ns", "series", 1)
	want = map[string]float64{
		NameRuns + "{Succeeded}": 0, NameRuns + "{Missed}": 3, NameLockLost: 1,
		NameLastSchedule: 1700000060, NameLastSuccess: 1700000000, NameActiveRuns: 2, NameStreak: 4, NameBackendUp: 1, NameInfo + "{b}": 1,
	}
	if got := series(); !equal(got, want) {
		t.Errorf("series after a second status:\n got %v\nwant %v", got, want)
	}
	// The series are what a registry accepts when it merges them: valid names, labels
	// sorted, no two series alike, each of its family's type (a scrape builds them all,
	// a job's label pairs shared by its series).
	built := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return jobs.families(), nil })
	if _, err := (prometheus.Gatherers{built}).Gather(); err != nil {
		t.Errorf("the built families, merged as a registry merges them: %v", err)
	}
	for _, f := range jobs.families() {
		for _, m := range f.GetMetric() {
			if !slices.IsSortedFunc(m.GetLabel(), func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) }) {
				t.Errorf("%s: labels not sorted by name: %v", f.GetName(), m.GetLabel())
			}
		}
	}
	// A family registered under a per-job family's name is refused, not served twice.
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: NameInfo, Help: "another"}))
	if _, err := (withJobs{Registerer: reg, registry: reg}).Gather(); err == nil || !strings.Contains(err.Error(), NameInfo) {
		t.Errorf("a registered %s and the per-job one: %v, want an error naming it", NameInfo, err)
	}
	Forget("ns", "series")
	if got := series(); len(got) != 0 {
		t.Errorf("series after Forget: %v", got)
	}
	if !SetJob("ns", "series", JobState{LockKey: "b"}) {
		t.Error("SetJob after Forget: first = false")
	}
	Forget("ns", "series")
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// BenchmarkJobSeries: the heap the per-job series of 5,000 jobs hold (16 each: nine run
// outcomes, lock lost, six gauges), and what a scrape of them costs.
//
//	go test ./internal/metrics -run '^$' -bench JobSeries -benchmem
func BenchmarkJobSeries(b *testing.B) {
	outcomes := []string{"Succeeded", "Failed", "SkippedContention", "SuppressedDuplicate", "LockLost", "Missed", "Interrupted", "Error", "SkippedBlackout"}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 5000 {
		ns, name := fmt.Sprintf("bench-%d", i%10), fmt.Sprintf("job-%05d", i)
		SetJob(ns, name, JobState{NextRun: time.Now(), LastSchedule: time.Now(), LastSuccess: time.Now(), Active: 1, BackendUp: true, LockKey: "key-" + name})
		for _, o := range outcomes {
			AddRuns(ns, name, o, 0)
		}
		AddLockLost(ns, name, 0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ResetTimer()
	for range b.N {
		if _, err := crmetrics.Registry.Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
	for i := range 5000 {
		Forget(fmt.Sprintf("bench-%d", i%10), fmt.Sprintf("job-%05d", i))
	}
}
