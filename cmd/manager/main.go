// Command manager runs the lockedcron controller: it creates one pod per occurrence of
// every LockedCronJob and folds the pods' lockwrap reports into status.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/controller"
	"github.com/lockedcron/lockedcron/internal/lock"
	lcmetrics "github.com/lockedcron/lockedcron/internal/metrics"
	"github.com/lockedcron/lockedcron/internal/metricsauth"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr, probeAddr, clusterName, wrapperImage, pullPolicy                    string
		leaderElect, secureMetrics                                                       bool
		qps, memoryLimitRatio                                                            float64
		burst, workers                                                                   int
		leaderElectionNamespace, leaderElectionID, redisAllowedHosts, watchNamespaces    string
		pprofAddr                                                                        string
		leaseDuration, renewDeadline, retryPeriod, reconcileTimeout, minScheduleInterval time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, to clients the API server authenticates (a bearer token, TokenReview) and authorizes (get on the non-resource URL /metrics, SubjectAccessReview: the metrics-reader ClusterRole). --metrics-secure=false serves plain HTTP to anyone who can reach the port.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz probes.")
	flag.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader so that only one manager acts at a time.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the manager's own namespace).")
	flag.StringVar(&leaderElectionID, "leader-election-id", "lockedcron.scheduling.lockedcron.io", "Name of the leader election Lease: two installations whose Leases share a namespace need different names, or only one of them ever leads. Change it only with every manager of the installation stopped: managers under two names would both lead.")
	flag.DurationVar(&leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a standby waits after the leader's last renewal before it takes the Lease over (a leader that stops gracefully hands the Lease back at once).")
	flag.DurationVar(&renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew before it gives up leading (and exits); less than the lease duration.")
	flag.DurationVar(&retryPeriod, "leader-election-retry-period", 2*time.Second, "How often the leader renews and standbys try to acquire the Lease.")
	flag.StringVar(&clusterName, "cluster-name", "", "This cluster's name in holder identities (<cluster>/<namespace>/<pod>/<pod uid>); default derived from the kube-system namespace UID.")
	flag.StringVar(&wrapperImage, "wrapper-image", "k8s.local/lockedcron:dev", "Image holding /lockwrap, copied into every job pod by an init container (normally this operator's own image).")
	flag.StringVar(&pullPolicy, "wrapper-image-pull-policy", string(corev1.PullIfNotPresent), "Pull policy of the wrapper image: Always, IfNotPresent or Never.")
	flag.Float64Var(&qps, "kube-api-qps", 20, "Queries per second to the API server, all of the manager's calls together (leader election has a budget of its own).")
	flag.IntVar(&burst, "kube-api-burst", 30, "Burst of queries to the API server, with --kube-api-qps.")
	flag.DurationVar(&reconcileTimeout, "reconcile-timeout", time.Minute, "How long one reconcile may take (at least 10s): a pass whose API call is never answered (an API server or network that stalls) is cancelled, its worker freed for other jobs, and the job tried again. A pass takes milliseconds, longer when it deletes many pods (a history limit lowered) at --kube-api-qps: such a pass is cut, and the next goes on where it stopped.")
	flag.DurationVar(&minScheduleInterval, "min-schedule-interval", 0, "A LockedCronJob whose schedule fires more often than this (its two closest occurrences; @every: its period) is not scheduled: Ready=False, reason InvalidSchedule, naming this flag. All jobs share the manager's API budget (--kube-api-qps) and workers, so on a cluster shared by tenants a few per-second schedules can make everyone's occurrences late; 1m is the native CronJob's floor. 0 (the default) allows any schedule, seconds included. Manual runs are not bounded by it.")
	flag.IntVar(&workers, "max-concurrent-reconciles", 5, "How many LockedCronJobs are reconciled at once (kube-controller-manager's --concurrent-cron-job-syncs is 5 too).")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "Comma list of namespaces: the manager caches and acts only there (its RBAC can then be namespaced Roles: config/namespaced). Default: all namespaces.")
	flag.StringVar(&redisAllowedHosts, "redis-allowed-hosts", "", "Comma list of the Redis endpoints LockedCronJobs may name: host names and globs (*.redis.internal) match the host as written in the URL, IPs and CIDRs match IP literals. Others are refused, by the controller and by lockwrap, before any connection. Link-local addresses (169.254.0.0/16, fe80::/10) and the cloud metadata addresses fd00:ec2::254 and 100.100.100.200 are refused unless a CIDR here allows them, with or without this list.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of Go's net/http/pprof endpoints (profiling; make bench-scale uses it). Empty (the default) disables them; never expose them outside the pod.")
	flag.Float64Var(&memoryLimitRatio, "memory-limit-ratio", 0.9, "Sets the Go runtime's soft memory limit (GOMEMLIMIT) to this fraction of the container's memory limit (its cgroup's), so that the garbage collector works harder near the limit rather than the manager being OOM-killed. 0 leaves the runtime alone; GOMEMLIMIT or AUTOMEMLIMIT in the environment win.")
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	// go-redis logs (a dial that failed again and again, a Sentinel's answer) through the
	// manager's logger, one escaped line each: a tenant's server is quoted in them.
	redisLog := ctrl.Log.WithName("redis")
	redis.SetLogger(lock.Logger{Print: func(line string) { redisLog.Info(line) }})

	switch corev1.PullPolicy(pullPolicy) {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("--wrapper-image-pull-policy %q: want Always, IfNotPresent or Never", pullPolicy)
	}
	if reconcileTimeout < 10*time.Second {
		return fmt.Errorf("--reconcile-timeout %s: want at least 10s (a pass's API calls wait their turn at --kube-api-qps, and must have time to be answered)", reconcileTimeout)
	}
	if minScheduleInterval < 0 {
		return fmt.Errorf("--min-schedule-interval %s: must not be negative", minScheduleInterval)
	}
	if workers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles %d: want at least 1", workers)
	}
	if leaderElect && !(retryPeriod > 0 && retryPeriod < renewDeadline && renewDeadline < leaseDuration) {
		return fmt.Errorf("--leader-election-retry-period (%s) < --leader-election-renew-deadline (%s) < --leader-election-lease-duration (%s) must hold, all above zero", retryPeriod, renewDeadline, leaseDuration)
	}
	if wrapperImage == "" {
		return fmt.Errorf("--wrapper-image is empty: give the image that holds /lockwrap")
	}
	if err := checkClusterName(clusterName); err != nil {
		return err
	}
	if _, err := setMemoryLimit(memoryLimitRatio, memlimit.FromCgroup, log); err != nil {
		return err
	}
	allowed, err := lock.ParseAllowedHosts(redisAllowedHosts)
	if err != nil {
		return fmt.Errorf("--redis-allowed-hosts: %w", err)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	kubeconfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, leCfg, err := clientConfigs(kubeconfig, qps, burst)
	if err != nil {
		return err
	}
	if err := waitForAPIServer(context.Background(), cfg, apiServerWait, log); err != nil {
		return err
	}

	if !secureMetrics {
		log.Info("metrics served over plain HTTP without authentication (--metrics-secure=false)", "address", metricsAddr)
	}
	metrics := metricsOptions(metricsAddr, secureMetrics)
	registerClientMetrics()
	cacheOpts, err := cacheOptions(watchNamespaces)
	if err != nil {
		return err
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionConfig:    leCfg,
		LeaderElectionNamespace: leaderElectionNamespace,
		// The process exits as soon as the manager stops, so handing the Lease back at
		// once is safe and lets a new pod take over without waiting for it to expire.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		Cache:                         cacheOpts,
		PprofBindAddress:              pprofAddr,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	if clusterName == "" {
		clusterName, err = derivedClusterName(context.Background(), mgr.GetAPIReader())
		if err != nil {
			return fmt.Errorf("--cluster-name not set and it could not be derived: %w", err)
		}
	}
	log.Info("starting", "watchNamespaces", watchNamespaces, "clusterName", clusterName, "wrapperImage", wrapperImage, "leaderElect", leaderElect, "redisAllowedHosts", allowed.String())

	r := &controller.LockedCronJobReconciler{
		MaxConcurrentReconciles: workers,
		MinScheduleInterval:     minScheduleInterval,
		ReconcileTimeout:        reconcileTimeout,
		Client:                  mgr.GetClient(),
		Pod: runpod.Options{
			ClusterName:            clusterName,
			WrapperImage:           wrapperImage,
			WrapperImagePullPolicy: corev1.PullPolicy(pullPolicy),
			RedisAllowedHosts:      allowed,
		},
	}
	for ns := range cacheOpts.DefaultNamespaces {
		r.WatchNamespaces = append(r.WatchNamespaces, ns)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	defer r.Close() // after the manager: the last passes' Events are sent
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// registerClientMetrics has the metrics endpoint serve how long the manager's API calls
// take (rest_client_request_duration_seconds) and how long they wait for its client
// budget, --kube-api-qps (rest_client_rate_limiter_duration_seconds): the two figures that
// tell a throttled manager from a slow API server (docs/monitoring.md).
func registerClientMetrics() {
	crmetrics.RegisterRESTClientMetrics(crmetrics.MetricRequestLatency, crmetrics.MetricRateLimiterLatency)
}

// metricsOptions serves metrics the kubebuilder way: over HTTPS, to callers whose
// bearer token the API server accepts (TokenReview) and allows to get /metrics
// (SubjectAccessReview), unless secure is false.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{
		BindAddress:   addr,
		SecureServing: secure,
		// HTTP/2 off (CVE-2023-44487, CVE-2023-39325), as kubebuilder does.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	// /metrics is served by internal/metrics' handler, which writes the per-job series a
	// few jobs at a time (controller-runtime's would gather the registry only); over
	// HTTPS, behind metricsauth's filter.
	o.FilterProvider = func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		if !secure {
			return lcmetrics.Filter, nil
		}
		// No CertDir: controller-runtime serves a self-signed certificate from memory
		// (the root filesystem is read-only); mount a real one to verify the server.
		auth, err := metricsauth.Filter(c, hc)
		if err != nil {
			return nil, err
		}
		return func(log logr.Logger, h http.Handler) (http.Handler, error) {
			h, err := lcmetrics.Filter(log, h)
			if err != nil {
				return nil, err
			}
			return auth(log, h)
		}, nil
	}
	return o
}

// cacheOptions is controller.CacheOptions, limited to the namespaces of the
// --watch-namespaces list when there is one: the manager then caches, watches and acts
// on LockedCronJobs, pods and workloads there only.
func cacheOptions(watch string) (cache.Options, error) {
	o := controller.CacheOptions()
	for _, ns := range strings.Split(watch, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return o, fmt.Errorf("--watch-namespaces: %q: %s", ns, strings.Join(errs, "; "))
		}
		if o.DefaultNamespaces == nil {
			o.DefaultNamespaces = map[string]cache.Config{}
		}
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	return o, nil
}

// clusterNamePattern is what --cluster-name may hold: it is the first part of every
// holder identity (<cluster>/<namespace>/<pod>/<pod uid>), shown in status, reports and
// `kubectl get lcj`, and compared by lockwrap; a "/" would shift its parts, a space or a
// control character its columns.
var clusterNamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// checkClusterName refuses a --cluster-name that does not fit clusterNamePattern (empty:
// derived from the kube-system namespace).
func checkClusterName(name string) error {
	if name == "" || clusterNamePattern.MatchString(name) {
		return nil
	}
	return fmt.Errorf("--cluster-name %q: want 1-63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit (it is the first part of every holder identity)", name)
}

// derivedClusterName names the cluster after its kube-system namespace UID, which is
// stable for the cluster's life and differs between clusters.
func derivedClusterName(ctx context.Context, r client.Reader) (string, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: "kube-system"}, &ns); err != nil {
		return "", err
	}
	return "cluster-" + string(ns.UID)[:8], nil
}
