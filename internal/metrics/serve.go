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
	metrics := Handler(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// Handler serves controller-runtime's registry, per-job families included, as its
// metrics server would (promhttp: the format and compression negotiated, name[] filters,
// errors as HTTP 500), writing the per-job families after the registry's. A registered
// family with a per-job family's name fails the scrape, as gathering them together does.
func Handler(log logr.Logger) http.Handler {
	return newHandler(registry, jobs, jobChunk, log)
}

func newHandler(reg prometheus.Gatherer, s *jobSeries, chunk int, log logr.Logger) http.Handler {
	checked := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := reg.Gather()
		for _, m := range mfs {
			if slices.ContainsFunc(jobFamilies, func(f *jobFamily) bool { return f.name == m.GetName() }) {
				err = errors.Join(err, fmt.Errorf("metric family %s is registered, and built per job too", m.GetName()))
			}
		}
		return mfs, err
	})
	inner := promhttp.HandlerFor(checked, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The format promhttp chooses (without OpenMetrics, as controller-runtime has it),
		// asked of it exactly, uncompressed: the per-job families follow in it, and the
		// whole is compressed here as promhttp would have compressed it.
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
		coding := contentCoding(r.Header)
		in := r.Clone(r.Context())
		in.Header.Set("Accept", string(format))
		in.Header.Del("Accept-Encoding")
		rw := &appender{ResponseWriter: w, gzip: coding == "gzip"}
		inner.ServeHTTP(rw, in)
		if rw.status == 0 {
			rw.WriteHeader(http.StatusOK)
		}
		if rw.status == http.StatusOK {
			var names []string
			if r.URL != nil {
				names = r.URL.Query()["name[]"]
			}
			if err := s.write(rw, format, chunk, names); err != nil && r.Context().Err() == nil {
				log.Error(err, "writing the per-job metric families")
			}
		}
		if rw.gz != nil {
			if err := rw.gz.Close(); err != nil && r.Context().Err() == nil {
				log.Error(err, "closing the compressed metrics response")
			}
		}
	})
}

// appender is the response promhttp writes the registry's families to, and Handler the
// per-job families after them: compressed when gzip was negotiated and the answer is 200
// (an error goes as it is).
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

// contentCoding chooses the response's content coding from the Accept-Encoding header as
// promhttp does: of its offers, identity then gzip, the one the highest q names (exactly
// or by *) wins, the earlier on a tie (identity when nothing is said); "" when that q is 0
// (promhttp then answers uncompressed).
func contentCoding(h http.Header) string {
	type spec struct {
		coding string
		q      float64
	}
	var specs []spec
	for _, line := range h.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(line, ",") {
			coding, params, _ := strings.Cut(part, ";")
			if coding = strings.TrimSpace(coding); coding == "" {
				continue
			}
			q := 1.0
			if params = strings.TrimSpace(params); params != "" {
				v, ok := strings.CutPrefix(params, "q=")
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if !ok || err != nil || f < 0 || f > 1 {
					continue // not a quality promhttp reads: the coding is not named
				}
				q = f
			}
			specs = append(specs, spec{coding, q})
		}
	}
	best, bestQ := "identity", -1.0
	for _, offer := range []string{"identity", "gzip"} {
		for _, s := range specs {
			if s.q > bestQ && (s.coding == "*" || s.coding == offer) {
				best, bestQ = offer, s.q
			}
		}
	}
	if bestQ == 0 {
		return ""
	}
	return best
}

// write writes the per-job families in format. In the text format each family goes a
// chunk of jobs at a time, the chunks after its first without its HELP and TYPE lines:
// one family, as the format wants it, built chunk by chunk. Other formats (protobuf, which
// Prometheus asks for with native histograms on) take a family as one message: each is
// built whole, one after the other, in the same scratch.
func (s *jobSeries) write(w io.Writer, format expfmt.Format, chunk int, names []string) error {
	families := jobFamilies
	if len(names) > 0 { // the scraper's name[] filter, as promhttp applies it to the registry's
		families = slices.DeleteFunc(slices.Clone(jobFamilies), func(f *jobFamily) bool { return !slices.Contains(names, f.name) })
		if len(families) == 0 {
			return nil
		}
	}
	snap, outcomes := s.snapshot()
	var sc scratch
	if format.FormatType() != expfmt.TypeTextPlain {
		enc := expfmt.NewEncoder(w, format)
		for _, f := range families {
			for _, mf := range sc.build(snap, outcomes, f) {
				if err := enc.Encode(mf); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var buf bytes.Buffer
	for _, f := range families {
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
