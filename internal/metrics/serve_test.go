package metrics

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// served asks h for the metrics with the request's Accept and Accept-Encoding headers and
// decodes the answer as a scraper does: the families by name, each once (a family written
// twice, or a second TYPE line, fails the decoding).
func served(t *testing.T, h http.Handler, accept, encoding string) (http.Header, map[string]*dto.MetricFamily) {
	t.Helper()
	return servedAt(t, h, "/metrics", accept, encoding)
}

// servedAt is served, for a target with a query.
func servedAt(t *testing.T, h http.Handler, target, accept, encoding string) (http.Header, map[string]*dto.MetricFamily) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("Accept %q: HTTP %d: %s", accept, rec.Code, rec.Body)
	}
	var body io.Reader = rec.Body
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	}
	dec := expfmt.NewDecoder(body, expfmt.ResponseFormat(rec.Header()))
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Accept %q, encoding %q: decoding the answer: %v", accept, encoding, err)
		}
		if _, ok := out[mf.GetName()]; ok {
			t.Fatalf("Accept %q, encoding %q: %s served twice", accept, encoding, mf.GetName())
		}
		out[mf.GetName()] = &mf
	}
	return rec.Header(), out
}

// The endpoint writes the per-job families a chunk of jobs at a time; what a scraper reads
// is what controller-runtime's handler served when the registry built them all at once:
// the same families, series, values, content type and compression, in every format
// Prometheus asks for.
func TestServedJobSeries(t *testing.T) {
	var forget []func()
	t.Cleanup(func() {
		for _, f := range forget {
			f()
		}
	})
	for i := range 40 {
		ns, name := fmt.Sprintf("served-%d", i%3), fmt.Sprintf("job-%02d", i)
		forget = append(forget, func() { Forget(ns, name) })
		switch i % 4 {
		case 0: // a job no pass has set the gauges of yet
			AddRuns(ns, name, "Missed", float64(i))
		case 1:
			SetJob(ns, name, JobState{NextRun: time.Unix(1700000000, 0), LockKey: `key "` + name + `"\n`})
			AddRuns(ns, name, "Succeeded", 2)
		default:
			SetJob(ns, name, JobState{NextRun: time.Unix(1700000000, 0), LastSchedule: time.Unix(1700000060, 5e8), LastSuccess: time.Unix(1, 0), Active: 1, BackendUp: true, LockKey: "k-" + name})
			AddRuns(ns, name, "Failed", 1)
			AddRuns(ns, name, "Succeeded", 0)
			AddLockLost(ns, name, float64(i%2))
		}
	}
	ScheduleLag.WithLabelValues("served-0").Observe(2)
	h := newHandler(registry, jobs, 7, logr.Discard()) // chunks of 7: families cut mid-job and mid-namespace
	whole := promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	for _, accept := range []string{
		"", // curl
		"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2", // Prometheus 3
		"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",                                                                               // Prometheus 2
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,text/plain;version=0.0.4;q=0.3",                                                                                     // native histograms on
	} {
		for _, encoding := range []string{"", "gzip", "gzip;q=0, identity", "*", "*, gzip;q=0", "gzip;q=0.5, identity", "identity;q=0.5, gzip", "deflate, gzip, br, zstd", "GZIP", "identity;q=0, *;q=0"} {
			header, got := served(t, h, accept, encoding)
			wantHeader, want := served(t, whole, accept, encoding)
			for _, k := range []string{"Content-Type", "Content-Encoding"} {
				if header.Get(k) != wantHeader.Get(k) {
					t.Errorf("Accept %q, encoding %q: %s %q, controller-runtime's handler %q", accept, encoding, k, header.Get(k), wantHeader.Get(k))
				}
			}
			if len(got) != len(want) {
				t.Errorf("Accept %q, encoding %q: %d families, controller-runtime's handler %d", accept, encoding, len(got), len(want))
			}
			for name, w := range want {
				if !strings.HasPrefix(name, "lockedcron_") {
					continue // the process's and the runtime's move between two requests
				}
				if g := got[name]; !proto.Equal(g, w) {
					t.Errorf("Accept %q, encoding %q: %s\n got %v\nwant %v", accept, encoding, name, g, w)
				}
			}
			if len(got[NameRuns].GetMetric()) < 40 || len(got[NameInfo].GetMetric()) != 30 {
				t.Errorf("Accept %q: %d run series, %d info series: want at least 40 and 30", accept, len(got[NameRuns].GetMetric()), len(got[NameInfo].GetMetric()))
			}
		}
	}
}

// A scraper's name[] filter applies to the per-job families as promhttp applies it to
// the registry's.
func TestServedNameFilter(t *testing.T) {
	SetJob("ns", "filtered", JobState{LockKey: "k"})
	t.Cleanup(func() { Forget("ns", "filtered") })
	ScheduleLag.WithLabelValues("ns").Observe(1)
	h := newHandler(registry, jobs, 7, logr.Discard())
	whole := promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	for _, q := range []string{"?name[]=" + NameInfo, "?name[]=" + NameScheduleLag, "?name[]=" + NameInfo + "&name[]=" + NameActiveRuns + "&name[]=" + NameScheduleLag, "?name[]=none"} {
		_, got := servedAt(t, h, "/metrics"+q, "", "gzip")
		_, want := servedAt(t, whole, "/metrics"+q, "", "gzip")
		if len(got) != len(want) {
			t.Errorf("%s: %d families, controller-runtime's handler %d", q, len(got), len(want))
		}
		for name, w := range want {
			if g := got[name]; !proto.Equal(g, w) {
				t.Errorf("%s: %s\n got %v\nwant %v", q, name, g, w)
			}
		}
	}
}

// A family whose first chunk of jobs has no series gets its HELP and TYPE from the first
// chunk that has; no jobs at all, no per-job family (and a valid, empty gzip stream).
func TestServedSparseFamilies(t *testing.T) {
	s := &jobSeries{jobs: map[jobKey]*jobRecord{}, index: map[string]int{"Succeeded": 0}, outcomePairs: []*dto.LabelPair{labelPair("outcome", "Succeeded")}}
	for _, encoding := range []string{"", "gzip"} {
		if _, got := served(t, newHandler(registry, s, 2, logr.Discard()), "", encoding); got[NameRuns] != nil || got[NameInfo] != nil {
			t.Errorf("no jobs, encoding %q: per-job families %v %v", encoding, got[NameRuns], got[NameInfo])
		}
	}
	// Two jobs no pass has set the gauges of (chunk 1), then one it has (chunk 2).
	s.jobs[jobKey{"a", "j1"}] = &jobRecord{runs: []float64{1}, born: 1}
	s.jobs[jobKey{"a", "j2"}] = &jobRecord{runs: []float64{2}, born: 1}
	s.jobs[jobKey{"a", "j3"}] = &jobRecord{runs: []float64{3}, born: 1, hasState: true, lockKey: "k", active: 1}
	snap, outcomes := s.snapshot()
	want := new(scratch).build(snap, outcomes, nil)
	for _, accept := range []string{"", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"} {
		_, got := served(t, newHandler(registry, s, 2, logr.Discard()), accept, "gzip")
		for _, w := range want {
			if g := got[w.GetName()]; !proto.Equal(g, w) {
				t.Errorf("Accept %q: %s\n got %v\nwant %v", accept, w.GetName(), g, w)
			}
		}
		if len(got[NameInfo].GetMetric()) != 1 || len(got[NameRuns].GetMetric()) != 3 {
			t.Errorf("Accept %q: %d info and %d run series, want 1 and 3", accept, len(got[NameInfo].GetMetric()), len(got[NameRuns].GetMetric()))
		}
	}
}

// A registry that fails is served as controller-runtime's handler serves it (HTTP 500,
// the error), nothing after it; one that holds a per-job family's name is refused.
func TestServedRegistryErrors(t *testing.T) {
	h := newHandler(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return nil, fmt.Errorf("gathering broke")
	}), jobs, 7, logr.Discard())
	SetJob("ns", "errors", JobState{LockKey: "k"})
	t.Cleanup(func() { Forget("ns", "errors") })
	for _, encoding := range []string{"", "gzip"} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", encoding)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "gathering broke") ||
			strings.Contains(rec.Body.String(), NameInfo) || rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("encoding %q: a registry that fails: HTTP %d, Content-Encoding %q, %q", encoding, rec.Code, rec.Header().Get("Content-Encoding"), rec.Body)
		}
	}
	// A family registered under a per-job family's name, once it has a series: each
	// scrape fails naming it, as gathering the two together does.
	clash := prometheus.NewRegistry()
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameInfo, Help: "another"}, []string{"x"})
	clash.MustRegister(vec)
	h = newHandler(clash, jobs, 7, logr.Discard())
	served(t, h, "", "")
	vec.WithLabelValues("a").Set(1)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), NameInfo+" is registered") {
		t.Errorf("a registered %s with a series, and the per-job one: HTTP %d %q, want 500 naming it", NameInfo, rec.Code, rec.Body)
	}
}

// Filter serves /metrics itself and leaves other paths to the handler it wraps.
func TestFilter(t *testing.T) {
	other := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "other") })
	h, err := Filter(logr.Discard(), other)
	if err != nil {
		t.Fatal(err)
	}
	SetJob("ns", "filter", JobState{LockKey: "k"})
	t.Cleanup(func() { Forget("ns", "filter") })
	if _, got := served(t, h, "", ""); got[NameInfo] == nil {
		t.Errorf("/metrics through Filter: no %s", NameInfo)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/extra", nil))
	if rec.Body.String() != "other" {
		t.Errorf("another path through Filter: %q, want the wrapped handler's", rec.Body)
	}
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// BenchmarkServe: a scrape of 5,000 jobs' per-job series (16 each) as Prometheus asks for
// it (text, gzip), served by Handler (the per-job families a chunk of jobs at a time) and
// by controller-runtime's handler over the registry (all at once). B/op is what a scrape
// allocates; the whole of it is garbage once the scrape is over.
//
//	go test ./internal/metrics -run '^$' -bench Serve -benchmem
func BenchmarkServe(b *testing.B) {
	for i := range 5000 {
		ns, name := fmt.Sprintf("bench-%d", i%10), fmt.Sprintf("job-%05d", i)
		SetJob(ns, name, JobState{NextRun: time.Now(), LastSchedule: time.Now(), LastSuccess: time.Now(), Active: 1, BackendUp: true, LockKey: "key-" + name})
		for _, o := range []string{"Succeeded", "Failed", "SkippedContention", "SuppressedDuplicate", "LockLost", "Missed", "Interrupted", "Error", "SkippedBlackout"} {
			AddRuns(ns, name, o, 0)
		}
		AddLockLost(ns, name, 0)
	}
	b.Cleanup(func() {
		for i := range 5000 {
			Forget(fmt.Sprintf("bench-%d", i%10), fmt.Sprintf("job-%05d", i))
		}
	})
	chunked := Handler(logr.Discard())
	whole := promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"chunked", chunked}, {"whole", whole}} {
		b.Run(h.name, func(b *testing.B) {
			for range b.N {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Accept", "text/plain;version=0.0.4")
				req.Header.Set("Accept-Encoding", "gzip")
				h.h.ServeHTTP(discard{http.Header{}}, req)
			}
		})
	}
}
