package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

const generated = "../../config/grafana/lockedcron.json"

// panelQuery is one query of the committed dashboard.
type panelQuery struct{ panel, expr string }

// committedQueries reads every panel target's expr, and every query variable's query,
// from the committed JSON.
func committedQueries(t *testing.T) []panelQuery {
	t.Helper()
	b, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []panelQuery
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, panelQuery{p.Title, tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			// label_values(<selector>, <label>): the selector is PromQL.
			inner := strings.TrimSuffix(strings.TrimPrefix(q, "label_values("), ")")
			inner = inner[:strings.LastIndex(inner, ",")]
			out = append(out, panelQuery{"variable " + v.Name, inner})
		}
	}
	return out
}

// Expand replaces the dashboard's variables the way Grafana would for "All".
func Expand(expr string) string {
	return strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$job", ".*").Replace(expr)
}

// The committed JSON is what the generator writes (`make manifests` was run).
func TestCommittedIsGenerated(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `make manifests` and commit it", generated)
	}
}

// Every query parses as PromQL, and every metric it names is one the manager serves
// (internal/metrics.Families; a histogram as _bucket, _sum or _count).
func TestQueriesNameServedMetrics(t *testing.T) {
	qs := committedQueries(t)
	if len(qs) < 8 {
		t.Fatalf("only %d queries in the dashboard", len(qs))
	}
	panels := map[string]bool{}
	for _, q := range qs {
		panels[q.panel] = true
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(Expand(q.expr))
		if err != nil {
			t.Errorf("panel %q: %q does not parse: %v", q.panel, q.expr, err)
			continue
		}
		named := 0
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			named++
			if !served(name) {
				t.Errorf("panel %q: metric %q is not served by internal/metrics", q.panel, name)
			}
			return nil
		})
		if named == 0 {
			t.Errorf("panel %q: %q names no metric", q.panel, q.expr)
		}
	}
	for _, want := range []string{"Runs by outcome", "Skipped vs ran per lock key", "Lock hold time (p50, p90)", "Lock wait time (p90)", "Schedule lag (p90)", "Lock lost", "Next run per job"} {
		if !panels[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// families is internal/metrics.Families of the operator's module (name → type), read
// through hack/metricfamilies so that this module does not build the operator's
// dependencies.
var families = func() map[string]string {
	cmd := exec.Command("go", "run", "./hack/metricfamilies")
	cmd.Dir = "../.."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		panic("go run ./hack/metricfamilies: " + err.Error())
	}
	var f map[string]string
	if err := json.Unmarshal(out, &f); err != nil {
		panic(err)
	}
	return f
}()

func served(name string) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] == "histogram" {
			return true
		}
	}
	return false
}

// The check itself catches a wrong name.
func TestServedRejectsUnknown(t *testing.T) {
	for _, name := range []string{"lockedcron_runs", "lockedcron_runs_total_bucket", "lockedcron_next_run_timestamp_seconds_count"} {
		if served(name) {
			t.Errorf("served(%q) = true", name)
		}
	}
	if !served("lockedcron_lock_hold_seconds_bucket") || !served("controller_runtime_reconcile_errors_total") {
		t.Error("served metrics rejected")
	}
}
