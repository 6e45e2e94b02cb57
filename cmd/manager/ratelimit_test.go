package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// go test ./cmd/manager/ -run TestOneBudget

// --kube-api-qps/--kube-api-burst are one budget for the manager's API calls, whatever
// the resource: controller-runtime builds a REST client per resource type, and without a
// shared limiter each got a bucket of its own (issue 13: pod creations and status writes
// each ran at the full QPS, twice what the flag says). Leader election keeps a budget of
// its own, so that renewing the Lease never waits behind a burst of pod creations.
func TestOneBudget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	// A burst of 2 and a rate that refills nothing during the test.
	cfg, leCfg, err := clientConfigs(&rest.Config{Host: srv.URL}, 1e-6, 2)
	if err != nil {
		t.Fatal(err)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// A fixed mapping: discovery would spend the budget before the calls under test.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	mapper.Add(v1alpha1.GroupVersion.WithKind("LockedCronJob"), meta.RESTScopeNamespace)
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "ns", Name: "x"}
	if err := c.Get(ctx, key, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &v1alpha1.LockedCronJob{}); err != nil {
		t.Fatal(err)
	}
	if cfg.RateLimiter == nil || cfg.RateLimiter.TryAccept() {
		t.Error("a pod GET and a LockedCronJob GET did not spend one shared burst of 2")
	}
	if leCfg.RateLimiter != nil && leCfg.RateLimiter == cfg.RateLimiter {
		t.Error("leader election shares the controller's budget")
	}
	if leCfg.QPS != cfg.QPS || leCfg.Burst != cfg.Burst {
		t.Errorf("leader election at QPS %g/burst %d, want the flags' %g/%d", leCfg.QPS, leCfg.Burst, cfg.QPS, cfg.Burst)
	}
}

// TestBudgetFlags: a budget that would stop the manager's calls once its burst is spent (a
// rate of 0, or below: client-go's "no limit" for a config, not for a bucket; a burst
// below 1) is refused with the flags named, before any call.
func TestBudgetFlags(t *testing.T) {
	for _, c := range []struct {
		qps   float64
		burst int
	}{{0, 30}, {-1, 30}, {20, 0}} {
		if _, _, err := clientConfigs(&rest.Config{Host: "https://api.example"}, c.qps, c.burst); err == nil ||
			!strings.Contains(err.Error(), "--kube-api-qps") || !strings.Contains(err.Error(), "--kube-api-burst") {
			t.Errorf("qps %v burst %d: %v; want an error naming both flags", c.qps, c.burst, err)
		}
	}
	if _, _, err := clientConfigs(&rest.Config{Host: "https://api.example"}, 20, 30); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
