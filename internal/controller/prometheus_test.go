package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lockedcron/lockedcron/internal/metrics"
	"github.com/lockedcron/lockedcron/internal/promtest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer ln.Close()
	return ln.Addr().String()
}

// startPrometheus runs the Debian package's prometheus in a temp dir, scraping target
// every second and evaluating the shipped rules (config/prometheus, via hack/promrules)
// every second; it returns the server's URL.
func startPrometheus(target string) string {
	dir := GinkgoT().TempDir()
	cmd := exec.Command("go", "run", "./hack/promrules", "-o", filepath.Join(dir, "rules.yaml"), "config/prometheus/prometheusrule.yaml")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), string(out))
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n- job_name: lockedcron\n  static_configs: [{targets: [%q]}]\n", target)
	prom, err := promtest.Start("", dir, cfg)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		prom.Stop()
		if CurrentSpecReport().Failed() {
			fmt.Fprintf(GinkgoWriter, "\nprometheus log:\n%s\n", prom.Log())
		}
	})
	return prom.URL
}

// promAPI GETs a Prometheus API path and decodes data into v.
func promAPI(base, path string, q url.Values, v any) error {
	resp, err := http.Get(base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	return json.Unmarshal(env.Data, v)
}

type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// The shipped rules in a real Prometheus that scrapes a real manager's metrics endpoint
// (plain HTTP here; the e2e suite scrapes the deployed operator over HTTPS): a lost lock
// and a missed occurrence fire LockedCronLockLost and LockedCronRunsMissed for their job
// only, with the rules' own `for` (none for these two).
var _ = Describe("alerts in a real Prometheus", func() {
	It("fires LockedCronLockLost and LockedCronRunsMissed for the job that lost its lock and missed a run", func() {
		metricsAddr := freeAddr()
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme: scheme,
			// The endpoint as the manager serves it: the per-job series written by
			// metrics.Filter's handler, which this real Prometheus parses.
			Metrics: metricsserver.Options{BindAddress: metricsAddr, FilterProvider: func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
				return metrics.Filter, nil
			}},
			HealthProbeBindAddress: "0",
			Cache:                  CacheOptions(),
			Controller:             ctrlConfig(),
		})
		Expect(err).NotTo(HaveOccurred())
		r := &LockedCronJobReconciler{Client: mgr.GetClient(), Clock: clock.RealClock{},
			Pod: runpod.Options{ClusterName: "test", WrapperImage: "w", WrapperImagePullPolicy: corev1.PullNever}}
		Expect(r.SetupWithManager(mgr)).To(Succeed())
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		DeferCleanup(func() { mcancel(); Eventually(done, 30*time.Second).Should(BeClosed()); r.Close() })

		prom := startPrometheus(metricsAddr)
		ns := newNamespace()
		bad, good := newJob(ns, "bad", rarely), newJob(ns, "good", rarely)
		Expect(k8sClient.Create(ctx, bad)).To(Succeed())
		Expect(k8sClient.Create(ctx, good)).To(Succeed())
		// Prometheus has scraped both jobs' counters at 0 (the first pass creates them).
		Eventually(func(g Gomega) {
			var res []any
			g.Expect(promAPI(prom, "/api/v1/query", url.Values{"query": {fmt.Sprintf(`lockedcron_lock_lost_total{namespace=%q} == 0`, ns)}}, &struct {
				Result *[]any `json:"result"`
			}{&res})).To(Succeed())
			g.Expect(res).To(HaveLen(2))
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		lost := createPodFor(bad, t0)
		finishPod(lost, corev1.PodFailed, 143, reportJSON(report.Report{Outcome: report.LockLost, Occurrence: t0.Format(time.RFC3339), Holder: "h", FencingToken: 3, LockLost: true}))
		missed := createPodFor(bad, t0.Add(time.Minute))
		finishPod(missed, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Missed, Occurrence: t0.Add(time.Minute).Format(time.RFC3339)}))
		ok := createPodFor(good, t0)
		finishPod(ok, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Occurrence: t0.Format(time.RFC3339), Holder: "g", FencingToken: 1}))

		Eventually(func(g Gomega) {
			var alerts struct {
				Alerts []promAlert `json:"alerts"`
			}
			g.Expect(promAPI(prom, "/api/v1/alerts", nil, &alerts)).To(Succeed())
			firing := map[string]string{}
			for _, a := range alerts.Alerts {
				if a.Labels["namespace"] != ns {
					continue
				}
				g.Expect(a.Labels["name"]).To(Equal("bad"), "alert %v for a job that lost nothing", a.Labels)
				if a.State == "firing" {
					firing[a.Labels["alertname"]] = a.Annotations["summary"]
					fmt.Fprintf(GinkgoWriter, "firing: %v %q\n", a.Labels, a.Annotations["summary"])
				}
			}
			g.Expect(firing).To(HaveKeyWithValue("LockedCronLockLost", "LockedCronJob "+ns+"/bad lost its lock during a run"))
			g.Expect(firing).To(HaveKeyWithValue("LockedCronRunsMissed", "LockedCronJob "+ns+"/bad missed occurrences"))
		}, time.Minute, time.Second).Should(Succeed())

		// What the endpoint served for the job (printed for docs/monitoring.md).
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(body), "\n") {
			if strings.Contains(l, `namespace="`+ns+`"`) && strings.Contains(l, `name="bad"`) && !strings.Contains(l, "_bucket") {
				fmt.Fprintln(GinkgoWriter, l)
			}
		}
	})
})
