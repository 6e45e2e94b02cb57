package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// go test ./cmd/manager/ -run TestWaitForAPIServer

func versionServer(t *testing.T, failFirst int64) (*rest.Config, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		if n := calls.Add(1); failFirst < 0 || n <= failFirst {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}, &calls
}

func TestWaitForAPIServer(t *testing.T) {
	// Down for its first three answers, then up: the manager goes on.
	cfg, calls := versionServer(t, 3)
	if err := waitForAPIServer(context.Background(), cfg, time.Minute, logr.Discard()); err != nil {
		t.Fatalf("kube-apiserver came back, but: %v", err)
	}
	if got := calls.Load(); got != 4 {
		t.Errorf("%d calls to /version, want 4 (three failures, one success)", got)
	}

	// Never up: a clear error once the time is over.
	cfg, _ = versionServer(t, -1)
	err := waitForAPIServer(context.Background(), cfg, time.Second, logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "did not answer within 1s") {
		t.Fatalf("error %v, want one saying kube-apiserver did not answer within 1s", err)
	}
}

// TestClusterName: --cluster-name is the first part of every holder identity
// (<cluster>/<namespace>/<pod>/<pod uid>), in status, reports and `kubectl get lcj`. A
// "/", a space, a line break or any length were taken as given.
func TestClusterName(t *testing.T) {
	for _, ok := range []string{"", "local", "prod-eu-1", "Prod_EU.1", "c", strings.Repeat("a", 63)} {
		if err := checkClusterName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"a/b", "prod eu", "prod\nkube-system x", "-a", "a-", strings.Repeat("a", 64), "é"} {
		err := checkClusterName(bad)
		if err == nil || !strings.Contains(err.Error(), "--cluster-name") {
			t.Errorf("%q: %v, want refused naming --cluster-name", bad, err)
		}
	}
}
