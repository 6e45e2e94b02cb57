//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/promtest"
)

// promResult is the part of a Prometheus API answer the test reads.
type promResult struct {
	Status string `json:"status"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
		} `json:"result"`
		Alerts []struct {
			Labels   map[string]string `json:"labels"`
			State    string            `json:"state"`
			ActiveAt string            `json:"activeAt"`
			Value    string            `json:"value"`
		} `json:"alerts"`
	} `json:"data"`
}

// dashboardQueries reads every panel query of the generated Grafana dashboard.
func dashboardQueries() map[string]string {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "grafana", "lockedcron.json"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	ExpectWithOffset(1, json.Unmarshal(b, &d)).To(Succeed())
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, t := range p.Targets {
			out[fmt.Sprintf("%s #%d", p.Title, i+1)] = t.Expr
		}
	}
	return out
}

// A real Prometheus server (the Debian package's binary) on the host scrapes the
// operator's HTTPS metrics endpoint with a ServiceAccount token bound to metrics-reader,
// evaluates the shipped rules (config/prometheus, extracted by hack/promrules, unchanged:
// the two alerts checked here have no `for`), and answers the dashboard's queries.
var _ = Describe("monitoring with a real Prometheus", Ordered, func() {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	scraperNS := "e2e-mon-prom-" + suffix
	var namespaces []string
	scenario := func(name string) string {
		ns := "e2e-mon-" + name + "-" + suffix
		namespaces = append(namespaces, ns)
		return ns
	}
	var promURL, dir string

	AfterEach(func() { dumpOnFailure(namespaces...) })
	AfterAll(func() {
		for _, ns := range append(namespaces, scraperNS) {
			_, _ = kubectl("delete", "namespace", ns, "--wait=false")
		}
		_, _ = kubectl("delete", "clusterrolebinding", "e2e-mon-prometheus-"+suffix, "--ignore-not-found")
	})

	promGet := func(path string, q url.Values) (promResult, error) {
		var r promResult
		resp, err := http.Get(promURL + path + "?" + q.Encode())
		if err != nil {
			return r, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return r, fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
		return r, json.Unmarshal(b, &r)
	}

	BeforeAll(func() {
		var err error
		dir, err = os.MkdirTemp("", "lockedcron-prometheus-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)

		// The scraper's identity: a ServiceAccount bound to the shipped metrics-reader role.
		out, err := kubectl("create", "namespace", scraperNS)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl("-n", scraperNS, "create", "serviceaccount", "prometheus")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl("create", "clusterrolebinding", "e2e-mon-prometheus-"+suffix,
			"--clusterrole=lockedcron-metrics-reader", "--serviceaccount="+scraperNS+":prometheus")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl("-n", scraperNS, "create", "token", "prometheus", "--duration=2h")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(os.WriteFile(filepath.Join(dir, "token"), []byte(strings.TrimSpace(out)), 0o600)).To(Succeed())

		// The shipped rules, as a plain rule file.
		cmd := exec.CommandContext(ctx, "go", "run", "./hack/promrules", "-o", filepath.Join(dir, "rules.yaml"), "config/prometheus/prometheusrule.yaml")
		cmd.Dir = filepath.Join("..", "..")
		b, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(b))

		target, err := url.Parse(envOr("LOCKEDCRON_E2E_METRICS_URL", "https://127.0.0.1:18080/metrics")) // config/local
		Expect(err).NotTo(HaveOccurred())
		cfg := fmt.Sprintf(`global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files: [rules.yaml]
scrape_configs:
- job_name: lockedcron
  scheme: %s
  metrics_path: %s
  authorization:
    type: Bearer
    credentials_file: token
  tls_config:
    insecure_skip_verify: true
  static_configs:
  - targets: [%q]
`, target.Scheme, target.Path, target.Host)
		prom, err := promtest.Start(envOr("PROMETHEUS", "prometheus"), dir, cfg)
		Expect(err).NotTo(HaveOccurred())
		promURL = prom.URL
		DeferCleanup(func() {
			prom.Stop()
			if CurrentSpecReport().Failed() {
				fmt.Fprintf(GinkgoWriter, "\nprometheus log:\n%s\n", prom.Log())
			}
		})

		// The operator's endpoint is scraped (up == 1): token, TLS and authorization work.
		Eventually(func(g Gomega) {
			r, err := promGet("/api/v1/query", url.Values{"query": {`up{job="lockedcron"} == 1`}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Data.Result).To(HaveLen(1))
		}, time.Minute, time.Second).Should(Succeed())
	})

	It("runs the manager with a soft memory limit of 0.9 of its container's memory limit", func() {
		// --memory-limit-ratio 0.9 (the default), read from the pod's cgroup by the
		// manager itself: the Go runtime reports it as go_gc_gomemlimit_bytes.
		out, err := kubectl("-n", operatorNS, "get", "deployment", operatorDep, "-o",
			`jsonpath={.spec.template.spec.containers[?(@.name=="manager")].resources.limits.memory}`)
		Expect(err).NotTo(HaveOccurred(), out)
		limit, err := resource.ParseQuantity(strings.TrimSpace(out))
		Expect(err).NotTo(HaveOccurred(), "the manager's memory limit %q", out)
		want := uint64(float64(limit.Value()) * 0.9)
		Eventually(func(g Gomega) {
			r, err := promGet("/api/v1/query", url.Values{"query": {`go_gc_gomemlimit_bytes{job="lockedcron"}`}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Data.Result).To(HaveLen(1))
			g.Expect(r.Data.Result[0].Value).To(HaveLen(2))
			g.Expect(r.Data.Result[0].Value[1]).To(Equal(strconv.FormatUint(want, 10)))
		}, time.Minute, time.Second).Should(Succeed())
	})

	It("shows LockedCronLockLost and LockedCronRunsMissed firing, and data for every dashboard query", func() {
		withSpec := func(m, spec string) string {
			return strings.Replace(m, "  successfulRunsHistoryLimit: 100", spec+"  successfulRunsHistoryLimit: 100", 1)
		}
		// Runs that succeed, and a second job on the same key that waits for the lock
		// (then finds the occurrence done): lock hold, lock wait, runs per lock key.
		shared := "e2e/mon-shared-" + suffix
		steady := job{ns: scenario("steady"), name: "steady", key: shared, schedule: "*/10 * * * * *", ttl: "10s", kill: "2s", sleep: "3s", label: "mon-steady-" + suffix}
		waiter := job{ns: scenario("waiter"), name: "waiter", key: shared, schedule: "*/10 * * * * *", ttl: "10s", kill: "2s", sleep: "3s", label: "mon-waiter-" + suffix}
		apply(steady)
		out, err := kubectlIn(withSpec(waiter.manifest(), "  contention:\n    policy: Retry\n    retry:\n      attempts: 30\n      backoff: 200ms\n      maxBackoff: 1s\n"), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)

		// Missed: a pod cannot start its job within startingDeadlineSeconds 1 (the init
		// container alone takes longer on this cluster), so lockwrap reports Missed.
		missed := job{ns: scenario("missed"), name: "missed", key: "e2e/mon-missed-" + suffix, schedule: "*/10 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "mon-missed-" + suffix}
		out, err = kubectlIn(strings.Replace(missed.manifest(), "spec:\n  schedule:", "spec:\n  startingDeadlineSeconds: 1\n  schedule:", 1), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)

		// Lock lost: while a run holds the lock, the lock disappears from Redis; the next
		// renewal fails and lockwrap reports LockLost.
		lost := job{ns: scenario("lost"), name: "lost", key: "e2e/mon-lost-" + suffix, schedule: "*/20 * * * * *", ttl: "6s", kill: "1s", sleep: "60s", label: "mon-lost-" + suffix}
		apply(lost)
		Eventually(func() (int64, error) { return rdb.Exists(ctx, lock.LockKey(lost.key)).Result() }, 2*time.Minute, 200*time.Millisecond).Should(Equal(int64(1)))
		Expect(rdb.Del(ctx, lock.LockKey(lost.key)).Err()).To(Succeed())
		suspend(lost)
		Eventually(func() int64 { return get(lost).Status.Counters.LockLost }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 1))
		Eventually(func() int64 { return get(missed).Status.Counters.Missed }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 1))
		suspend(missed)

		firing := func(alert, ns string) func(Gomega) {
			return func(g Gomega) {
				r, err := promGet("/api/v1/alerts", nil)
				g.Expect(err).NotTo(HaveOccurred())
				found := false
				for _, a := range r.Data.Alerts {
					if a.Labels["alertname"] == alert && a.Labels["namespace"] == ns && a.State == "firing" {
						found = true
						fmt.Fprintf(GinkgoWriter, "firing: %v since %s, value %s\n", a.Labels, a.ActiveAt, a.Value)
					}
				}
				g.Expect(found).To(BeTrue(), "%s for %s not firing", alert, ns)
			}
		}
		Eventually(firing("LockedCronLockLost", lost.ns), time.Minute, time.Second).Should(Succeed())
		Eventually(firing("LockedCronRunsMissed", missed.ns), time.Minute, time.Second).Should(Succeed())
		// What the operator serves for the lost job, as Prometheus scraped it (printed for
		// docs/monitoring.md).
		sample, err := promGet("/api/v1/query", url.Values{"query": {fmt.Sprintf(`{__name__=~"lockedcron_.*", namespace=%q}`, lost.ns)}})
		Expect(err).NotTo(HaveOccurred())
		Expect(sample.Data.Result).NotTo(BeEmpty())
		for _, s := range sample.Data.Result {
			fmt.Fprintf(GinkgoWriter, "series: %v = %v\n", s.Metric, s.Value)
		}
		// Not for the jobs that lost nothing and missed nothing.
		r, err := promGet("/api/v1/alerts", nil)
		Expect(err).NotTo(HaveOccurred())
		for _, a := range r.Data.Alerts {
			if a.Labels["alertname"] == "LockedCronLockLost" || a.Labels["alertname"] == "LockedCronRunsMissed" {
				Expect(a.Labels["namespace"]).NotTo(BeElementOf(steady.ns, waiter.ns), "%v", a.Labels)
			}
		}

		// Every dashboard query, for this scenario's namespaces, returns series.
		Eventually(func() int64 {
			return get(waiter).Status.Counters.DuplicatesSuppressed + get(waiter).Status.Counters.Succeeded
		}, 2*time.Minute, time.Second).Should(BeNumerically(">=", 1))
		nsRE := "e2e-mon-.*-" + suffix
		queries := dashboardQueries()
		Expect(queries).NotTo(BeEmpty(), "no queries read from the dashboard")
		for panel, expr := range queries {
			q := strings.NewReplacer("$__rate_interval", "5m", "$namespace", nsRE, "$job", ".*").Replace(expr)
			Eventually(func(g Gomega) {
				r, err := promGet("/api/v1/query", url.Values{"query": {q}})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(r.Data.Result).NotTo(BeEmpty(), "panel %s: %s", panel, q)
				fmt.Fprintf(GinkgoWriter, "panel %q: %d series\n", panel, len(r.Data.Result))
			}, time.Minute, 2*time.Second).Should(Succeed())
		}
		suspend(steady, waiter)
	})
})
