package metrics

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The metrics endpoint (issue 13: memory at thousands of jobs). controller-runtime's
// handler gathers the registry, and with it every per-job family of every job at once:
// 18 MB at 5,000 jobs' 80,000 series, built and thrown away at each scrape (BenchmarkJobSeries).
// A collection during a scrape takes them for live and lets the heap grow to twice that
// again: at 5,000 jobs, scraped every 15 s, the manager's RSS rose by 20-26 MiB at each
// scrape, and its high-water mark with it. Handler serves the registry's own families as
// controller-runtime's handler does (promhttp), then writes the per-job families a few
// jobs at a time (BenchmarkServe).

// jobChunk is how many jobs' series Handler builds at a time in the text format: up to
// 16 series each, about 200 bytes a series.
const jobChunk = 256

// Filter has the metrics server (controller-runtime's, whose filters wrap its handlers)
// serve /metrics with Handler; other paths go to the handler it wraps. It is a
// metricsserver.Filter.
func Filter(log logr.Logger, h http.Handler) (http.Handler, error) {
	metrics, err := Handler(log)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// Handler serves controller-runtime's registry, per-job families included, as its
// metrics server would (promhttp, errors as HTTP 500), writing the per-job families after
// the registry's. It fails when a registered family has a per-job family's name (the
// exposition would hold it twice).
func Handler(log logr.Logger) (http.Handler, error) {
	return newHandler(registry, jobs, jobChunk, log)
}

func newHandler(reg prometheus.Gatherer, s *jobSeries, chunk int, log logr.Logger) (http.Handler, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range jobFamilies {
		if slices.ContainsFunc(mfs, func(m *dto.MetricFamily) bool { return m.GetName() == f.name }) {
			return nil, fmt.Errorf("metric family %s is registered, and built per job too", f.name)
		}
	}
	inner := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The format promhttp chooses (without OpenMetrics, as controller-runtime has it),
		// asked of it exactly, uncompressed: the per-job families follow in it.
		format := expfmt.Negotiate(r.Header)
		in := r.Clone(r.Context())
		in.Header.Set("Accept", string(format))
		in.Header.Del("Accept-Encoding")
		rw := &appender{ResponseWriter: w, gzip: acceptsGzip(r.Header.Get("Accept-Encoding"))}
		inner.ServeHTTP(rw, in)
		if rw.status == 0 {
			rw.WriteHeader(http.StatusOK)
		}
		if rw.status == http.StatusOK {
			if err := s.write(rw, format, chunk); err != nil {
				log.Error(err, "writing the per-job metric families")
			}
		}
		if rw.gz != nil {
			if err := rw.gz.Close(); err != nil {
				log.Error(err, "closing the compressed metrics response")
			}
		}
	}), nil
}

// appender is the response promhttp writes the registry's families to, and Handler the
// per-job families after them: compressed when the client takes gzip and the answer is
// 200 (an error goes as it is).
type appender struct {
	http.ResponseWriter
	gzip   bool
	status int
	gz     *gzip.Writer
}

func (a *appender) WriteHeader(code int) {
	if a.status != 0 {
		return
	}
	a.status = code
	if code == http.StatusOK && a.gzip {
		a.Header().Set("Content-Encoding", "gzip")
		a.Header().Del("Content-Length")
		a.gz = gzip.NewWriter(a.ResponseWriter)
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *appender) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	if a.gz != nil {
		return a.gz.Write(b)
	}
	return a.ResponseWriter.Write(b)
}

// acceptsGzip reads an Accept-Encoding header: gzip (any case) or * listed, with a q above 0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if coding = strings.TrimSpace(coding); !strings.EqualFold(coding, "gzip") && coding != "*" {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		return q > 0
	}
	return false
}

// write writes the per-job families in format. In the text format each family goes a
// chunk of jobs at a time, the chunks after its first without its HELP and TYPE lines:
// one family, as the format wants it, built chunk by chunk. Other formats (protobuf, which
// Prometheus asks for with native histograms on) take a family as one message: each is
// built whole, one after the other.
func (s *jobSeries) write(w io.Writer, format expfmt.Format, chunk int) error {
	snap, outcomes := s.snapshot()
	if format.FormatType() != expfmt.TypeTextPlain {
		enc := expfmt.NewEncoder(w, format)
		for _, f := range jobFamilies {
			for _, mf := range (*scratch)(nil).build(snap, outcomes, f) {
				if err := enc.Encode(mf); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var buf bytes.Buffer
	var sc scratch
	for _, f := range jobFamilies {
		first := true
		for lo := 0; lo < len(snap); lo += chunk {
			mfs := sc.build(snap[lo:min(lo+chunk, len(snap))], outcomes, f)
			if len(mfs) == 0 {
				continue
			}
			mf := mfs[0]
			if !first {
				mf.Help = nil // the text format writes HELP only when there is one; TYPE always
			}
			buf.Reset()
			if err := expfmt.NewEncoder(&buf, format).Encode(mf); err != nil {
				return err
			}
			b := buf.Bytes()
			if !first {
				typeLine, rest, ok := bytes.Cut(b, []byte("\n"))
				if !ok || !bytes.HasPrefix(typeLine, []byte("# TYPE ")) {
					return errors.New("metrics: a chunk of " + f.name + " does not start with its TYPE line")
				}
				b = rest
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			first = false
		}
	}
	return nil
}
