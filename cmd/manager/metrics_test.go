package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"github.com/go-logr/logr"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lcmetrics "github.com/lockedcron/lockedcron/internal/metrics"
)

// The manager's metrics endpoint as main configures it, against a real API server
// (envtest: KUBEBUILDER_ASSETS, as `make test` sets it): refused without a token (401),
// refused for a ServiceAccount without metrics-reader (403) or a token the API server does
// not accept (401), served to one bound to the shipped metrics-reader ClusterRole, itself
// or through its group (200); plain HTTP only with --metrics-secure=false; client-go's
// call and rate-limiter latencies served.
// KUBEBUILDER_ASSETS="$(hack/k8s-binaries.sh)" go test ./cmd/manager/ -run TestMetrics
func TestMetricsEndpointAuth(t *testing.T) {
	needAssets(t)
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var reader rbacv1.ClusterRole
	if err := yaml.Unmarshal(docs(t, "config", "rbac", "metrics_reader_role.yaml")[0], &reader); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokenIn := func(ns, sa string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	token := func(sa string) string { t.Helper(); return tokenIn("default", sa) }
	scraper, other := token("scraper"), token("other")
	// A scraper allowed through a group: every ServiceAccount of the namespace monitoring.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	viaGroup := tokenIn("monitoring", "prometheus")
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "monitoring-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:monitoring"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "scraper"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	start := func(secure bool) string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := metricsserver.NewServer(metricsOptions(addr, secure), cfg, hc)
		if err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithCancel(ctx)
		t.Cleanup(scancel)
		go func() { _ = srv.Start(sctx) }()
		return addr
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url, bearer string) (int, string) {
		t.Helper()
		var (
			code int
			body string
		)
		// The server starts in the background: wait until it answers.
		deadline := time.Now().Add(30 * time.Second)
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := hc.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				code, body = resp.StatusCode, string(b)
				return code, body
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", url, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	addr := start(true)
	url := fmt.Sprintf("https://%s/metrics", addr)
	if code, _ := get(url, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := get(url, other); code != http.StatusForbidden {
		t.Errorf("token without metrics-reader: %d, want 403", code)
	}
	if code, body := get(url, scraper); code != http.StatusOK || !strings.Contains(body, "# HELP") {
		t.Errorf("metrics-reader token: %d %.200q, want 200 with metrics", code, body)
	}
	if code, _ := get(url, other); code != http.StatusForbidden {
		t.Errorf("token without metrics-reader, after an allowed scrape: %d, want 403", code)
	}
	if code, _ := get(url, viaGroup); code != http.StatusOK {
		t.Errorf("token of a ServiceAccount whose group is bound to metrics-reader: %d, want 200", code)
	}
	if code, _ := get(url, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("a token the API server does not accept: %d, want 401", code)
	}
	if code, _ := get(fmt.Sprintf("http://%s/metrics", addr), scraper); code == http.StatusOK {
		t.Errorf("plain HTTP to the secure endpoint: 200")
	}

	plain := start(false)
	if code, body := get(fmt.Sprintf("http://%s/metrics", plain), ""); code != http.StatusOK || !strings.Contains(body, "# HELP") {
		t.Errorf("--metrics-secure=false: %d, want 200 over plain HTTP", code)
	}

	// The figures docs/monitoring.md tells operators to read when jobs start late: how
	// long API calls take, and how long they wait for the client's QPS.
	registerClientMetrics()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// And the per-job series, which a scrape builds beside the registry (internal/metrics).
	lcmetrics.SetJob("team-a", "served", lcmetrics.JobState{BackendUp: true, LockKey: "team-a/served"})
	defer lcmetrics.Forget("team-a", "served")
	_, body := get(fmt.Sprintf("http://%s/metrics", plain), "")
	_, secureBody := get(url, scraper)
	for _, series := range []string{`rest_client_request_duration_seconds_count{host=`, `rest_client_rate_limiter_duration_seconds_count{host=`,
		`lockedcron_info{lock_key="team-a/served",name="served",namespace="team-a"} 1`, `lockedcron_backend_up{name="served",namespace="team-a"} 1`} {
		if !strings.Contains(body, series) {
			t.Errorf("the metrics endpoint does not serve %s…", series)
		}
		if !strings.Contains(secureBody, series) {
			t.Errorf("the metrics endpoint over HTTPS does not serve %s…", series)
		}
	}
	// Through internal/metrics' handler, which writes the per-job families after the
	// registry's (gathered with the registry, they would come sorted by name, before
	// rest_client_…): not every series at once.
	for what, b := range map[string]string{"HTTP": body, "HTTPS": secureBody} {
		if i, j := strings.Index(b, "# TYPE lockedcron_info "), strings.Index(b, "# TYPE rest_client_request_duration_seconds "); i < j {
			t.Errorf("over %s, lockedcron_info at %d, before the registry's rest_client_request_duration_seconds at %d: not served by internal/metrics' handler", what, i, j)
		}
	}
}

// TestMetricsReviewsSpendNoneOfTheManagersBudget: whoever reaches the metrics port makes
// the guard review each token it has not seen. Those reviews drew on the manager's one
// client budget (--kube-api-qps/--kube-api-burst): a flood of forged tokens held back
// every job's pod creations and status writes, and occurrences past their deadline were
// counted missed. They have a budget of their own (metricsauth).
func TestMetricsReviewsSpendNoneOfTheManagersBudget(t *testing.T) {
	var reviews atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false}}`))
	}))
	t.Cleanup(api.Close)
	// The manager's budget: a burst of 5 that does not refill during the test.
	cfg, _, err := clientConfigs(&rest.Config{Host: api.URL}, 1e-6, 5)
	if err != nil {
		t.Fatal(err)
	}
	filter, err := metricsOptions(":0", true).FilterProvider(cfg, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	h, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // five requests, each with a token of its own
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", fmt.Sprintf("Bearer forged-%d", i))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d, want 401", i, rec.Code)
		}
	}
	if n := reviews.Load(); n != 5 {
		t.Fatalf("%d TokenReviews for 5 new tokens", n)
	}
	if !cfg.RateLimiter.TryAccept() {
		t.Error("5 /metrics requests with forged tokens spent the budget the manager's pod creations and status writes draw on")
	}
}
