package metrics

import (
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
// values are what the vectors served. A record keeps its series' label pairs, made once
// (prometheus.MustNewConstMetric would make them anew for each series at every scrape:
// 80,000 series, half of a scrape's 58 MB at 5,000 jobs).

var (
	descRuns         = prometheus.NewDesc(NameRuns, "Finished occurrences by outcome (Succeeded, Failed, SkippedContention, SuppressedDuplicate, LockLost, Error, SkippedBlackout, Missed, Interrupted).", []string{"namespace", "name", "outcome"}, nil)
	descLockLost     = prometheus.NewDesc(NameLockLost, "Runs whose lock was lost while the job ran.", jobLabels, nil)
	descNextRun      = prometheus.NewDesc(NameNextRun, "Unix time of the job's next scheduled occurrence (status.nextScheduleTime); absent while suspended or when the schedule never fires.", jobLabels, nil)
	descLastSchedule = prometheus.NewDesc(NameLastSchedule, "Unix time of the latest occurrence the job decided (started, skipped or missed; status.lastScheduleTime).", jobLabels, nil)
	descLastSuccess  = prometheus.NewDesc(NameLastSuccess, "Unix time (scheduled time) of the latest occurrence that succeeded (status.lastSuccessfulTime); absent until one has.", jobLabels, nil)
	descActiveRuns   = prometheus.NewDesc(NameActiveRuns, "Pods of the job's occurrences still running (status.activeCount).", jobLabels, nil)
	descBackendUp    = prometheus.NewDesc(NameBackendUp, "1 when the job's lock backend is usable (Secret read, Redis answered: condition LockBackendReady True), else 0.", jobLabels, nil)
	descInfo         = prometheus.NewDesc(NameInfo, "Always 1; lock_key is the job's lock key in effect (status.lockKey), to group jobs that share one.", []string{"namespace", "name", "lock_key"}, nil)
)

// JobState is what the job's gauges show, from the status a pass wrote. A zero time has
// no series (rather than a value that reads as 1970).
type JobState struct {
	NextRun, LastSchedule, LastSuccess time.Time
	Active                             int32
	BackendUp                          bool
	LockKey                            string
}

type jobKey struct{ namespace, name string }

// jobRecord is one job's series. runs is indexed like outcomePairs; born marks the outcomes
// that have a series (a counter exists from its first Add, even of 0).
type jobRecord struct {
	runs         []float64
	born         uint64
	lockLost     float64
	lockLostBorn bool
	state        *JobState

	// The label pairs of its series, sorted by name as the exposition wants them: name,
	// namespace (pairs; a run's series adds the outcome's); lock_key, name, namespace
	// (infoPairs, made again when the lock key changes). Never changed in place: a
	// scrape reads them after it let go of the lock.
	pairs, infoPairs []*dto.LabelPair
}

// labelPair is one label of a series.
func labelPair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: &name, Value: &value}
}

// jobSeries holds every job's record and serves them (a prometheus.Collector).
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
		r = &jobRecord{pairs: []*dto.LabelPair{labelPair("name", name), labelPair("namespace", namespace)}}
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
	first = r.state == nil
	if first || r.state.LockKey != st.LockKey {
		r.infoPairs = append([]*dto.LabelPair{labelPair("lock_key", st.LockKey)}, r.pairs...)
	}
	r.state = &st
	return first
}

// Forget drops the series of a deleted LockedCronJob (the histograms are its
// namespace's).
func Forget(namespace, name string) {
	s := jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, jobKey{namespace, name})
}

func (s *jobSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuns, descLockLost, descNextRun, descLastSchedule, descLastSuccess, descActiveRuns, descBackendUp, descInfo} {
		ch <- d
	}
}

// series is one series of a job, on label pairs its record keeps.
type series struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value float64
	pairs []*dto.LabelPair
}

func (m *series) Desc() *prometheus.Desc { return m.desc }

func (m *series) Write(out *dto.Metric) error {
	out.Label = m.pairs
	if m.typ == prometheus.CounterValue {
		out.Counter = &dto.Counter{Value: &m.value}
	} else {
		out.Gauge = &dto.Gauge{Value: &m.value}
	}
	return nil
}

// Collect copies the records under the lock, then builds the series from the copy: a
// pass that counts an outcome waits for the copy (≈ 1 ms at 5,000 jobs), not for the
// scrape.
func (s *jobSeries) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	outcomes := s.outcomePairs[:len(s.outcomePairs):len(s.outcomePairs)]
	snap := make([]jobRecord, 0, len(s.jobs))
	for _, r := range s.jobs {
		c := *r
		c.runs = append([]float64(nil), r.runs...)
		snap = append(snap, c)
	}
	s.mu.RUnlock()
	for i := range snap {
		r := &snap[i]
		for i, v := range r.runs {
			if r.born&(1<<i) != 0 {
				ch <- &series{descRuns, prometheus.CounterValue, v, append(r.pairs[:len(r.pairs):len(r.pairs)], outcomes[i])}
			}
		}
		if r.lockLostBorn {
			ch <- &series{descLockLost, prometheus.CounterValue, r.lockLost, r.pairs}
		}
		st := r.state
		if st == nil {
			continue
		}
		for _, t := range []struct {
			d  *prometheus.Desc
			at time.Time
		}{{descNextRun, st.NextRun}, {descLastSchedule, st.LastSchedule}, {descLastSuccess, st.LastSuccess}} {
			if !t.at.IsZero() {
				ch <- &series{t.d, prometheus.GaugeValue, float64(t.at.UnixNano()) / 1e9, r.pairs}
			}
		}
		ch <- &series{descActiveRuns, prometheus.GaugeValue, float64(st.Active), r.pairs}
		up := 0.0
		if st.BackendUp {
			up = 1
		}
		ch <- &series{descBackendUp, prometheus.GaugeValue, up, r.pairs}
		ch <- &series{descInfo, prometheus.GaugeValue, 1, r.infoPairs}
	}
}
