package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The per-job series (issue 13: memory at thousands of jobs). Held as prometheus
// CounterVecs and GaugeVecs they cost ≈ 500 bytes a series — label pairs, a hash entry
// and a metric object each — and a job has 16 of them (nine run outcomes, the lock-lost
// counter, six gauges): 42 MiB at 5,000 jobs, a third of the manager's live heap. Here a
// job is one record of plain numbers, and the series are built when the endpoint is
// scraped, as kube-state-metrics does. The families, their types, help texts, labels and
// values are what the vectors served.

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

// jobRecord is one job's series. runs is indexed like outcomes; born marks the outcomes
// that have a series (a counter exists from its first Add, even of 0).
type jobRecord struct {
	runs         []float64
	born         uint64
	lockLost     float64
	lockLostBorn bool
	state        *JobState
}

// jobSeries holds every job's record and serves them (a prometheus.Collector).
type jobSeries struct {
	mu       sync.RWMutex
	jobs     map[jobKey]*jobRecord
	outcomes []string       // every outcome seen, in first-seen order
	index    map[string]int // outcome → position in outcomes
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
		if len(s.outcomes) == 64 {
			return // more outcomes than the bitmask holds: there are nine
		}
		i = len(s.outcomes)
		s.outcomes = append(s.outcomes, outcome)
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

// Collect copies the records under the lock, then builds the series from the copy: a
// pass that counts an outcome waits for the copy (≈ 1 ms at 5,000 jobs), not for the
// scrape.
func (s *jobSeries) Collect(ch chan<- prometheus.Metric) {
	type entry struct {
		k jobKey
		r jobRecord
	}
	s.mu.RLock()
	outcomes := s.outcomes[:len(s.outcomes):len(s.outcomes)]
	snap := make([]entry, 0, len(s.jobs))
	for k, r := range s.jobs {
		e := entry{k, *r}
		e.r.runs = append([]float64(nil), r.runs...)
		snap = append(snap, e)
	}
	s.mu.RUnlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, e := range snap {
		k, r := e.k, &e.r
		for i, v := range r.runs {
			if r.born&(1<<i) != 0 {
				ch <- prometheus.MustNewConstMetric(descRuns, prometheus.CounterValue, v, k.namespace, k.name, outcomes[i])
			}
		}
		if r.lockLostBorn {
			ch <- prometheus.MustNewConstMetric(descLockLost, prometheus.CounterValue, r.lockLost, k.namespace, k.name)
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
				gauge(t.d, float64(t.at.UnixNano())/1e9, k.namespace, k.name)
			}
		}
		gauge(descActiveRuns, float64(st.Active), k.namespace, k.name)
		up := 0.0
		if st.BackendUp {
			up = 1
		}
		gauge(descBackendUp, up, k.namespace, k.name)
		gauge(descInfo, 1, k.namespace, k.name, st.LockKey)
	}
}
