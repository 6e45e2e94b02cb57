package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

// apiServerWait is how long the manager waits at start-up for kube-apiserver to answer.
const apiServerWait = 5 * time.Minute

// apiServerBackoff paces the start-up checks: quick at first, then every 5 s.
var apiServerBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 10, Cap: 5 * time.Second}

// waitForAPIServer waits until kube-apiserver answers (GET /version), for at most
// timeout. A manager started while it is down (restarted with it, or after it lost its
// Lease to the restart and exited) would otherwise fail its set-up ("failed to
// determine if *v1.Pod is namespaced") and crash-loop, and the kubelet's back-off would
// keep it down long after kube-apiserver is back: the soak saw scheduling stop for over
// a minute.
func waitForAPIServer(ctx context.Context, cfg *rest.Config, timeout time.Duration, log logr.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube-apiserver client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	err = apiServerBackoff.DelayFunc().Until(ctx, true, false, func(ctx context.Context) (bool, error) {
		last = dc.RESTClient().Get().AbsPath("/version").Do(ctx).Error()
		if last != nil {
			log.Info("waiting for kube-apiserver", "host", cfg.Host, "error", last.Error())
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver at %s did not answer within %s: %w", cfg.Host, timeout, last)
	}
	return nil
}

// clientConfigs returns the configuration of the manager's API clients, at qps/burst,
// and a copy for leader election. The flags are one budget for all of the manager's API
// calls (pod creations, status writes, Secret reads, Events, lists and watches), as
// kube-controller-manager's client QPS is for a controller: controller-runtime builds a
// REST client per resource type, each with a token bucket of its own unless the
// configuration carries one. Leader election has its own, so that renewing the Lease
// never waits behind a burst of pod creations.
func clientConfigs(base *rest.Config, qps float64, burst int) (cfg, leaderElection *rest.Config, err error) {
	// A bucket that does not refill (0) or a negative rate (client-go's "no limit" for a
	// config's QPS, not for a bucket) would stop every call once the burst is spent.
	if !(qps > 0) || burst < 1 {
		return nil, nil, fmt.Errorf("--kube-api-qps %v --kube-api-burst %d: want a rate above 0 and a burst of at least 1 (one budget for all of the manager's API calls)", qps, burst)
	}
	cfg = rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.WarningHandlerWithContext = apiWarnings{crlog.NewKubeAPIWarningLogger(crlog.KubeAPIWarningLoggerOptions{})}
	leaderElection = rest.CopyConfig(cfg)
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	return cfg, leaderElection, nil
}

// apiWarnings logs the API server's warnings as controller-runtime's client does, but for
// those every pod of the controller draws on purpose (runpod.IsOwnWarning): three a pod,
// nothing to act on.
type apiWarnings struct {
	log rest.WarningHandlerWithContext
}

func (w apiWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, message string) {
	if !runpod.IsOwnWarning(message) {
		w.log.HandleWarningHeaderWithContext(ctx, code, agent, message)
	}
}
