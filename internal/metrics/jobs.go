package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The per-job series (issue 13: memory at thousands of jobs). Held as prometheus
// CounterVecs and GaugeVecs they cost ≈ 500 bytes a series — label pairs, a hash entry
// and a metric object each — and a job has 16 of them (nine run outcomes, the lock-lost
// counter, six gauges): 42 MiB at 5,000 jobs, a third of the manager's live heap. Here a
// job is one record of plain numbers, and the series are built when the endpoint is
// scraped, as kube-state-metrics does. The families, their types, help texts, labels and
// values are what the vectors served. A record holds numbers and the lock key; a scrape
// makes the label pairs, each job's once (BenchmarkJobSeries: 1.3-1.7 MiB held at 5,000
// jobs, 3.4-3.8 when each record kept its pairs).
//
// A scrape builds them as the exposition's own structures, each family's in a few arrays
// (build), and the metrics endpoint (Handler, serve.go) writes them after what
// controller-runtime's registry gathers. Served through the registry as a Collector, every
// series went through its checks one by one (a metric object, a Write, a hash, a
// consistency check): 29 MB a scrape of 5,000 jobs' 80,000 series; built in arrays, 17 MB
// (BenchmarkJobSeries). TestJobSeries checks the families as the registry would.

// jobFamily is one per-job family: what its series are and how to read a record's value.
type jobFamily struct {
	name, help string
	typ        dto.MetricType
}

var (
	famRuns         = jobFamily{NameRuns, "Finished occurrences by outcome (Succeeded, Failed, SkippedContention, SuppressedDuplicate, LockLost, Error, SkippedBlackout, Missed, Interrupted).", dto.MetricType_COUNTER}
	famLockLost     = jobFamily{NameLockLost, "Runs whose lock was lost while the job ran.", dto.MetricType_COUNTER}
	famNextRun      = jobFamily{NameNextRun, "Unix time of the job's next scheduled occurrence (status.nextScheduleTime); absent while suspended or when the schedule never fires.", dto.MetricType_GAUGE}
	famLastSchedule = jobFamily{NameLastSchedule, "Unix time of the latest occurrence the job decided (started, skipped or missed; status.lastScheduleTime).", dto.MetricType_GAUGE}
	famLastSuccess  = jobFamily{NameLastSuccess, "Unix time (scheduled time) of the latest occurrence that succeeded (status.lastSuccessfulTime); absent until one has.", dto.MetricType_GAUGE}
	famActiveRuns   = jobFamily{NameActiveRuns, "Pods of the job's occurrences still running (status.activeCount).", dto.MetricType_GAUGE}
	famStreak       = jobFamily{NameStreak, "The job's latest occurrences (status.recent, at most 10) that ended without success since its last success: Failed, LockLost, Error, Missed, Interrupted; skips and suppressed duplicates (the lock held, a blackout, already done) neither count nor end it.", dto.MetricType_GAUGE}
	famBackendUp    = jobFamily{NameBackendUp, "1 when the job's lock backend is usable (Secret read, Redis answered: condition LockBackendReady True), else 0.", dto.MetricType_GAUGE}
	famInfo         = jobFamily{NameInfo, "Always 1; lock_key is the job's lock key in effect (status.lockKey), to group jobs that share one.", dto.MetricType_GAUGE}
)

// JobState is what the job's gauges show, from the status a pass wrote. A zero time has
// no series (rather than a value that reads as 1970).
type JobState struct {
	NextRun, LastSchedule, LastSuccess time.Time
	Active                             int32
	// Streak: the latest occurrences that ended without success, since the last success.
	Streak    int32
	BackendUp bool
	LockKey   string
}

type jobKey struct{ namespace, name string }

// The per-job series' label names (a scrape's label pairs point at them).
var labelName, labelNamespace, labelLockKey = "name", "namespace", "lock_key"

// jobRecord is one job's series. runs is indexed like outcomePairs; born marks the outcomes
// that have a series (a counter exists from its first Add, even of 0). The gauges are
// kept as the values they serve: times (next run, last schedule, last success) in Unix
// seconds, timesSet marking those that have a series. The label pairs are made by each
// scrape: kept per job, with their strings, they were two thirds of what a job held.
type jobRecord struct {
	runs         []float64
	born         uint64
	lockLost     float64
	times        [3]float64
	lockKey      string
	active       int32
	streak       int32
	timesSet     uint8
	lockLostBorn bool
	hasState     bool
	backendUp    bool
}

// labelPair is one label of a series.
func labelPair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: &name, Value: &value}
}

// jobSeries holds every job's record; families builds their series for a scrape.
type jobSeries struct {
	mu   sync.RWMutex
	jobs map[jobKey]*jobRecord
	// outcomePairs are the label pairs of every outcome seen, in first-seen order,
	// shared by every job; index is an outcome's position in them.
	outcomePairs []*dto.LabelPair
	index        map[string]int
}

var jobs = &jobSeries{jobs: map[jobKey]*jobRecord{}, index: map[string]int{}}

// record returns the job's record, made if missing. Callers hold mu.
func (s *jobSeries) record(namespace, name string) *jobRecord {
	k := jobKey{namespace, name}
	r := s.jobs[k]
	if r == nil {
		r = &jobRecord{}
		s.jobs[k] = r
	}
	return r
}

// AddRuns adds n finished occurrences of outcome to the job's lockedcron_runs_total (n
// 0 makes the series exist).
func AddRuns(namespace, name, outcome string, n float64) {
	s := jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[outcome]
	if !ok {
		if len(s.outcomePairs) == 64 {
			return // more outcomes than the bitmask holds: there are nine
		}
		i = len(s.outcomePairs)
		s.outcomePairs = append(s.outcomePairs, labelPair("outcome", outcome))
		s.index[outcome] = i
	}
	r := s.record(namespace, name)
	for len(r.runs) <= i {
		r.runs = append(r.runs, 0)
	}
	r.runs[i] += n
	r.born |= 1 << i
}

// AddLockLost adds n to the job's lockedcron_lock_lost_total (0 makes it exist).
func AddLockLost(namespace, name string, n float64) {
	s := jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.record(namespace, name)
	r.lockLost += n
	r.lockLostBorn = true
}

// SetJob sets the job's gauges and info series. It reports whether the job had no
// gauges yet since the manager started (or since Forget).
func SetJob(namespace, name string, st JobState) (first bool) {
	s := jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.record(namespace, name)
	first = !r.hasState
	r.hasState, r.active, r.streak, r.backendUp, r.lockKey, r.timesSet = true, st.Active, st.Streak, st.BackendUp, st.LockKey, 0
	for i, t := range []time.Time{st.NextRun, st.LastSchedule, st.LastSuccess} {
		if !t.IsZero() {
			r.times[i] = float64(t.UnixNano()) / 1e9
			r.timesSet |= 1 << i
		}
	}
	return first
}

// Forget drops the series of a deleted LockedCronJob, and its namespace's histograms
// when it was the namespace's last job (short-lived namespaces, a CI's or a preview's,
// kept 52 series each until the manager restarted: helper-110).
func Forget(namespace, name string) {
	s := jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, jobKey{namespace, name})
	for k := range s.jobs {
		if k.namespace == namespace {
			return
		}
	}
	for _, h := range []*prometheus.HistogramVec{LockWait, LockHold, ScheduleLag, StartLag} {
		h.DeleteLabelValues(namespace)
	}
}

// snapped is a job's record as a scrape copied it.
type snapped struct {
	key jobKey
	jobRecord
}

// snapshot copies the records under the lock: a pass that counts an outcome waits for
// the copy (≈ 1 ms at 5,000 jobs), not for the scrape. Jobs come in the order of their
// namespace and name. outcomes are the outcomes' label pairs, indexed as a record's runs.
func (s *jobSeries) snapshot() (snap []snapped, outcomes []*dto.LabelPair) {
	s.mu.RLock()
	outcomes = s.outcomePairs[:len(s.outcomePairs):len(s.outcomePairs)]
	snap = make([]snapped, 0, len(s.jobs))
	for k, r := range s.jobs {
		c := snapped{k, *r}
		c.runs = append([]float64(nil), r.runs...)
		snap = append(snap, c)
	}
	s.mu.RUnlock()
	slices.SortFunc(snap, func(a, b snapped) int {
		return cmp.Or(strings.Compare(a.key.namespace, b.key.namespace), strings.Compare(a.key.name, b.key.name))
	})
	return snap, outcomes
}

// jobFamilies are the per-job families in the order they are served.
var jobFamilies = []*jobFamily{&famRuns, &famLockLost, &famNextRun, &famLastSchedule, &famLastSuccess, &famActiveRuns, &famStreak, &famBackendUp, &famInfo}

// families builds every per-job family of every job at once (what the registry gathers:
// 18 MB at 5,000 jobs, BenchmarkJobSeries); the metrics endpoint writes them a few jobs
// at a time instead (Handler).
func (s *jobSeries) families() []*dto.MetricFamily {
	snap, outcomes := s.snapshot()
	return new(scratch).build(snap, outcomes, nil)
}

// jobPairs are a job's label pairs: its series' and its info series'.
type jobPairs struct{ pairs, info []*dto.LabelPair }

// scratch is what one family of a chunk of jobs is built in, kept for the next chunk's
// (Handler writes each before it builds the next): a scrape then allocates one chunk's
// worth, not every series' (BenchmarkServe).
type scratch struct {
	pairs    []dto.LabelPair
	ptrs     []*dto.LabelPair
	labelled []jobPairs
	runPairs []*dto.LabelPair
	family   dto.MetricFamily
	arrays   familyArrays
}

// take sets *buf to length n, zeroed, reusing its array when it has room, and returns it.
func take[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
		return *buf
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}

// build builds the per-job families of snap's jobs, or only the family only when it is
// set; a family without series is left out, as the registry leaves it out. Built in sc
// (only one family's arrays when only is set): valid until its next build.
func (sc *scratch) build(snap []snapped, outcomes []*dto.LabelPair, only *jobFamily) []*dto.MetricFamily {
	// Each job's label pairs, sorted by name as the exposition wants them: name,
	// namespace (a run's series adds the outcome's); lock_key, name, namespace (info).
	labelled, all3, ptrs := take(&sc.labelled, len(snap)), take(&sc.pairs, 3*len(snap)), take(&sc.ptrs, 5*len(snap))
	for i := range snap {
		r, k, lp, p := &snap[i].jobRecord, &snap[i].key, all3[3*i:3*i+3], ptrs[5*i:5*i+5]
		lp[0].Name, lp[0].Value = &labelName, &k.name
		lp[1].Name, lp[1].Value = &labelNamespace, &k.namespace
		lp[2].Name, lp[2].Value = &labelLockKey, &r.lockKey
		p[0], p[1], p[2], p[3], p[4] = &lp[0], &lp[1], &lp[2], &lp[0], &lp[1]
		labelled[i] = jobPairs{p[0:2:2], p[2:5:5]}
	}
	gauges := [3]*jobFamily{&famNextRun, &famLastSchedule, &famLastSuccess}
	each := func(emitAny func(f *jobFamily, pairs []*dto.LabelPair, outcome int, v float64)) {
		emit := func(f *jobFamily, pairs []*dto.LabelPair, outcome int, v float64) {
			if only == nil || f == only {
				emitAny(f, pairs, outcome, v)
			}
		}
		for i := range snap {
			r, pairs := &snap[i].jobRecord, labelled[i].pairs
			for o, v := range r.runs {
				if r.born&(1<<o) != 0 {
					emit(&famRuns, pairs, o, v)
				}
			}
			if r.lockLostBorn {
				emit(&famLockLost, pairs, -1, r.lockLost)
			}
			if !r.hasState {
				continue
			}
			for g, f := range gauges {
				if r.timesSet&(1<<g) != 0 {
					emit(f, pairs, -1, r.times[g])
				}
			}
			emit(&famActiveRuns, pairs, -1, float64(r.active))
			emit(&famStreak, pairs, -1, float64(r.streak))
			up := 0.0
			if r.backendUp {
				up = 1
			}
			emit(&famBackendUp, pairs, -1, up)
			emit(&famInfo, labelled[i].info, -1, 1)
		}
	}

	// Count each family's series, make its arrays, then fill them.
	count := map[*jobFamily]int{}
	each(func(f *jobFamily, _ []*dto.LabelPair, _ int, _ float64) { count[f]++ })
	built := map[*jobFamily]*familyArrays{}
	for f, n := range count {
		if only != nil {
			built[f] = sc.arrays.reset(&sc.family, f, n)
		} else { // every family at once: each its own arrays
			built[f] = new(familyArrays).reset(new(dto.MetricFamily), f, n)
		}
	}
	runPairs := take(&sc.runPairs, 3*count[&famRuns])[:0] // name, namespace, outcome
	each(func(f *jobFamily, pairs []*dto.LabelPair, outcome int, v float64) {
		if outcome >= 0 {
			start := len(runPairs)
			runPairs = append(append(runPairs, pairs...), outcomes[outcome])
			pairs = runPairs[start:len(runPairs):len(runPairs)]
		}
		built[f].add(pairs, v)
	})
	var out []*dto.MetricFamily
	for _, f := range jobFamilies {
		if count[f] > 0 {
			out = append(out, built[f].family)
		}
	}
	return out
}

// familyArrays is a family being built: its metrics, their values and counters or gauges,
// each in one array.
type familyArrays struct {
	family   *dto.MetricFamily
	metrics  []dto.Metric
	values   []float64
	counters []dto.Counter
	gauges   []dto.Gauge
	counter  bool // counters are in use, else gauges
	n        int
}

// reset readies a and its family mf for n series of f, reusing their arrays where they
// have room.
func (a *familyArrays) reset(mf *dto.MetricFamily, f *jobFamily, n int) *familyArrays {
	metricPtrs := take(&mf.Metric, n)
	*mf = dto.MetricFamily{Name: &f.name, Help: &f.help, Type: f.typ.Enum(), Metric: metricPtrs}
	a.family, a.n = mf, 0
	a.metrics, a.values = take(&a.metrics, n), take(&a.values, n)
	a.counter = f.typ == dto.MetricType_COUNTER
	if a.counter {
		take(&a.counters, n)
	} else {
		take(&a.gauges, n)
	}
	return a
}

func (a *familyArrays) add(pairs []*dto.LabelPair, v float64) {
	i := a.n
	a.n++
	a.values[i] = v
	m := &a.metrics[i]
	m.Label = pairs
	if a.counter {
		a.counters[i].Value = &a.values[i]
		m.Counter = &a.counters[i]
	} else {
		a.gauges[i].Value = &a.values[i]
		m.Gauge = &a.gauges[i]
	}
	a.family.Metric[i] = m
}

// withJobs is controller-runtime's registry, which the manager's other metrics are
// registered with, and the per-job families, added when it is gathered, all at once:
// every family once, the families sorted by name (a family's series come by namespace
// and name, not sorted by label values as the registry sorts its own). It takes the
// registry's place (init), so that whatever gathers the registry has every family; the
// manager's metrics endpoint serves them through Handler, without building them all at
// once.
type withJobs struct {
	prometheus.Registerer
	registry prometheus.Gatherer
}

func (w withJobs) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := w.registry.Gather()
	for _, f := range jobs.families() {
		if slices.ContainsFunc(mfs, func(m *dto.MetricFamily) bool { return m.GetName() == f.GetName() }) {
			err = errors.Join(err, fmt.Errorf("metric family %s is registered, and built per job too", f.GetName()))
			continue
		}
		mfs = append(mfs, f)
	}
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return mfs, err
}
