// Command scale measures how late lockedcron's manager and the native CronJob controller
// (kube-controller-manager --controllers=cronjob-controller) create the children of N
// objects each scheduled every minute, side by side on one real etcd + kube-apiserver
// (envtest's control plane), with a real redis-server for the manager. No kubelet, no
// scheduler: the harness plays the kubelet only as far as the manager needs (it marks
// each new pod's wrapped container running, so that the next occurrence is not held back
// by the backlog bound "at most one pod per job waits to start"; native Jobs need nothing).
//
// It prints, per controller and N: creation lag p50/p90/p99/max (first seen by the
// harness's informer − scheduled minute), created/expected, API calls per occurrence
// (rest_client_requests_total from both processes' metrics endpoints), RSS and CPU
// seconds, and the ratio lockedcron/native. Run through hack/bench-scale.sh.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

const (
	kindLocked = "lockedcron"
	kindNative = "native"
	// kindNativePod is a native Job's pod (-native-pods): what runs, after the Job.
	kindNativePod = "native-pod"
	// jobScheduledAnnotation is what the CronJob controller stamps on each Job.
	jobScheduledAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"
	benchLabel             = "bench.lockedcron.io/scale"
)

type config struct {
	ns            []int
	namespaces    int
	window        int
	warmup        int
	qps           float64
	burst         int
	cronSyncs     int
	prepareAhead  int
	workers       int
	assets        string
	manager       string
	crds          string
	keep          bool
	profiles      string
	nativePods    bool
	native        bool
	memLimit      string
	gogc          string
	finishAfter   time.Duration
	kubeletStatus bool
	takeover      time.Duration
}

func main() {
	var c config
	var ns string
	flag.StringVar(&ns, "n", "20,1000", "Comma list of object counts N (N LockedCronJobs and N CronJobs each); 20 is the idle case.")
	flag.IntVar(&c.namespaces, "namespaces", 10, "Namespaces the objects are spread over.")
	flag.IntVar(&c.window, "window", 3, "Measured occurrences (minutes).")
	flag.IntVar(&c.warmup, "warmup", 1, "Occurrences after the objects exist that are not measured.")
	flag.Float64Var(&c.qps, "qps", 100, "Client QPS of both controllers (--kube-api-qps of each).")
	flag.IntVar(&c.burst, "burst", 200, "Client burst of both controllers (--kube-api-burst of each).")
	flag.IntVar(&c.cronSyncs, "concurrent-cron-job-syncs", 5, "kube-controller-manager --concurrent-cron-job-syncs (its default is 5).")
	flag.IntVar(&c.workers, "manager-workers", 0, "The manager's --max-concurrent-reconciles (0: its default).")
	flag.IntVar(&c.prepareAhead, "prepare-ahead", 0, "spec.prepareAheadSeconds of every LockedCronJob (0: unset).")
	flag.StringVar(&c.assets, "assets", "", "Folder with etcd, kube-apiserver and kube-controller-manager (hack/k8s-binaries.sh kube-controller-manager).")
	flag.StringVar(&c.manager, "manager", "", "The manager binary (go build ./cmd/manager).")
	flag.StringVar(&c.crds, "crds", "config/crd/bases", "Folder of the CRD manifests.")
	flag.BoolVar(&c.keep, "keep", false, "Keep the temporary folder (logs, certs) of each run.")
	flag.StringVar(&c.profiles, "cpuprofile", "", "Folder to write the manager's and the API server's CPU profiles over the window (manager-N<n>.pprof, apiserver-N<n>.pprof) and the manager's heap at the window's end (manager-N<n>.heap.pprof) to; go tool pprof reads them. Empty: none.")
	flag.BoolVar(&c.native, "native", true, "Create the N CronJobs beside the N LockedCronJobs. false: the LockedCronJobs alone, with the API server to themselves (kube-controller-manager still runs, with nothing to do; no native row and no ratios are printed), e.g. to see what prepare-ahead needs of the server at 5,000.")
	flag.BoolVar(&c.nativePods, "native-pods", false, "Also run kube-controller-manager's job-controller and print when each native Job's pod appears: pod against pod (a CronJob's child is a Job; its pod, which runs, comes after it and pays the API server's pod admission, as lockedcron's does). The job controller's calls then count in the native column.")
	flag.StringVar(&c.gogc, "manager-gogc", "", "GOGC of the manager process only (the collector's target: the heap grows to 1 + GOGC/100 times the live heap between collections). Empty: the runtime's default, 100.")
	flag.StringVar(&c.memLimit, "manager-gomemlimit", "", "GOMEMLIMIT of the manager process only (e.g. 230MiB: what --memory-limit-ratio 0.9 sets in a container limited to 256Mi, config/manager's limit). Empty: none, as outside a container.")
	flag.BoolVar(&c.kubeletStatus, "kubelet-status", false, "Write pod statuses as a v1.37 kubelet does: besides the containers' states, the five conditions, host and pod IPs, and per container image and container IDs, resources, volume mounts and user (the manager's cache holds finished pods: their size is what memory at thousands of jobs depends on). Off: only what the controllers read.")
	flag.DurationVar(&c.finishAfter, "finish-after", 0, "Also play the end of each lockedcron run: this long after the harness marks a pod running (after its instant, for a pod prepared ahead: lockwrap waits for it), it marks it Succeeded with a lockwrap report in the termination message, and the manager counts it (status, Event, the pod released). With -native-pods the Jobs' pods run and end the same way, so the job controller completes each Job and the CronJob controller sees it (status, Event, old Jobs deleted), and those calls count in the native column. 0: pods never end (the creation path only).")
	flag.DurationVar(&c.takeover, "takeover-before", 0, "Kill the manager (SIGKILL) this long before the window's first occurrence and start a new one in its place, as a standby takes over (here its caches start with it: the harness runs without leader election); its first passes list what the old one wrote (internal/controller/takeover.go). The manager's calls, work queue adds and CPU then count from the new process's start, the takeover's included. 0: no takeover.")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it; the figures are what matters here
	for _, s := range strings.Split(ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fatalf("-n %q: want a comma list of positive counts, e.g. 1000,5000", ns)
		}
		c.ns = append(c.ns, n)
	}
	if c.assets == "" || c.manager == "" {
		fatalf("-assets and -manager are required (hack/bench-scale.sh sets them)")
	}
	if c.window < 1 || c.namespaces < 1 || c.warmup < 0 {
		fatalf("-window and -namespaces must be ≥ 1, -warmup ≥ 0")
	}
	if c.takeover < 0 || c.takeover >= time.Minute || (c.takeover > 0 && c.warmup < 1) {
		fatalf("-takeover-before must be under 1m, and needs -warmup ≥ 1 (the old manager's runs, for the new one to take over)")
	}
	printMachine(c)
	var results []result
	for _, n := range c.ns {
		r, err := run(c, n)
		if err != nil {
			fatalf("N=%d: %v", n, err)
		}
		results = append(results, r...)
		printResults(c, n, r)
	}
	if len(c.ns) > 1 {
		fmt.Println("\n== summary")
		printTable(results)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-scale: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func printMachine(c config) {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("== machine: %d cpus (%s); load average at start %s\n", runtime.NumCPU(), model, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("== both controllers: client QPS %g, burst %d; kube-controller-manager --controllers=%s --concurrent-cron-job-syncs=%d; schedule \"* * * * *\" in %d namespaces; %d warm-up + %d measured occurrences\n",
		c.qps, c.burst, nativeControllers(c), c.cronSyncs, c.namespaces, c.warmup, c.window)
	if c.workers > 0 {
		fmt.Printf("== manager --max-concurrent-reconciles=%d\n", c.workers)
	}
	if c.gogc != "" {
		fmt.Printf("== manager GOGC=%s\n", c.gogc)
	}
	if c.memLimit != "" {
		fmt.Printf("== manager GOMEMLIMIT=%s\n", c.memLimit)
	}
	if c.finishAfter > 0 {
		fmt.Printf("== lockedcron runs end: each pod Succeeded %s after it runs (the harness plays lockwrap's report)\n", c.finishAfter)
		if c.nativePods {
			fmt.Printf("== native runs end too: each Job's pod Succeeded %s after it runs (job-controller completes the Job)\n", c.finishAfter)
		}
	}
	if c.kubeletStatus {
		fmt.Printf("== pod statuses as a kubelet writes them (conditions, IPs, container IDs, resources, mounts, user)\n")
	}
	if c.prepareAhead > 0 {
		fmt.Printf("== LockedCronJobs with prepareAheadSeconds: %d (negative lag: the pod existed before its instant)\n", c.prepareAhead)
	}
}

// result is one controller's figures at one N.
type result struct {
	kind     string
	n        int
	lag      lagStats
	created  int
	expected int
	calls    map[string]float64 // by method, over the window
	inWindow int                // children first seen in the window (the calls' denominator)
	cpu      time.Duration
	rss, hwm int64
	early    int // lockedcron with prepare-ahead: pods seen before their instant
	// native with -native-pods: the Jobs' pods
	podCreated int
	podLag     lagStats
	adds       float64 // work queue adds over the window
	peakDepth  float64 // the work queues' peak depth in the window
	// mean time of an API call at the server, and mean wait for the client's QPS
	// before it, over the window
	latency     map[string]time.Duration // by verb
	server      map[string]time.Duration // the API server's own time, by serverCalls
	limiterWait time.Duration
}

// serverCalls are the requests of each controller whose time in the API server the
// harness prints ("verb resource", subresources included).
var serverCalls = map[string][]string{
	kindNative: {"POST jobs", "PUT cronjobs", "POST events"},
	kindLocked: {"POST pods", "PUT lockedcronjobs"},
}

// apiserverTimes is the API server's apiserver_request_duration_seconds, sum and count
// by "verb resource", and its admission plugins' time
// (apiserver_admission_controller_admission_duration_seconds) by "operation name type".
// requests is apiserver_request_total by "verb group resource subresource".
type apiserverTimes struct{ sum, count, admitSum, admitCount, requests map[string]float64 }

func serverTimes(ctx context.Context, cs kubernetes.Interface) (apiserverTimes, error) {
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiserverTimes{}, fmt.Errorf("kube-apiserver metrics: %w", err)
	}
	var t apiserverTimes
	if t.sum, err = sumBy(string(b), "apiserver_request_duration_seconds_sum", "verb", "resource"); err != nil {
		return t, err
	}
	if t.count, err = sumBy(string(b), "apiserver_request_duration_seconds_count", "verb", "resource"); err != nil {
		return t, err
	}
	if t.requests, err = sumBy(string(b), "apiserver_request_total", "verb", "group", "resource", "subresource"); err != nil {
		return t, err
	}
	const admit = "apiserver_admission_controller_admission_duration_seconds"
	if t.admitSum, err = sumBy(string(b), admit+"_sum", "operation", "name", "type"); err != nil {
		return t, err
	}
	t.admitCount, err = sumBy(string(b), admit+"_count", "operation", "name", "type")
	return t, err
}

// admissionSummary is the CREATE admission plugins' time between two readings (all
// resources, both controllers: one API server), the costliest first.
func admissionSummary(before, after apiserverTimes) string {
	type plugin struct {
		key      string
		sum, cnt float64
	}
	var ps []plugin
	for k, v := range after.admitSum {
		if !strings.HasPrefix(k, "CREATE ") {
			continue
		}
		if d := v - before.admitSum[k]; d > 0 {
			ps = append(ps, plugin{strings.TrimPrefix(k, "CREATE "), d, after.admitCount[k] - before.admitCount[k]})
		}
	}
	slices.SortFunc(ps, func(a, b plugin) int { return cmp.Compare(b.sum, a.sum) })
	var parts []string
	for _, p := range ps[:min(len(ps), 5)] {
		parts = append(parts, fmt.Sprintf("%s %.2fs in %.0f calls (%s each)", p.key, p.sum, p.cnt, perCall(p.sum, p.cnt).Round(10*time.Microsecond)))
	}
	return strings.Join(parts, ", ")
}

// writeSummary is the write requests (POST, PUT, PATCH, DELETE) between two readings by
// "verb group resource subresource" ("" the core group, "?" none).
func writeSummary(before, after apiserverTimes) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(after.requests)) {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			continue
		}
		if d := after.requests[k] - before.requests[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	return strings.Join(parts, ", ")
}

// perCall is sum seconds over count calls, as a mean duration (0 without calls).
func perCall(sum, count float64) time.Duration {
	if count <= 0 {
		return 0
	}
	return time.Duration(sum / count * float64(time.Second))
}

func (r result) callsPerOcc() float64 {
	if r.inWindow == 0 {
		return 0
	}
	var s float64
	for _, v := range r.calls {
		s += v
	}
	return s / float64(r.inWindow)
}

// child is one Pod or Job as the harness first saw it.
type child struct {
	scheduled, seen time.Time
}

type recorder struct {
	mu   sync.Mutex
	seen map[string]map[string]child // kind -> namespace/name -> child
}

func (r *recorder) add(kind, key string, scheduled time.Time) bool {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[kind][key]; ok {
		return false
	}
	r.seen[kind][key] = child{scheduled: scheduled, seen: now}
	return true
}

func (r *recorder) snapshot(kind string) []child {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]child, 0, len(r.seen[kind]))
	for _, c := range r.seen[kind] {
		out = append(out, c)
	}
	return out
}

// proc is a child process of the harness, in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func start(name, dir string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var insecureHTTP = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback, self-signed serving certs
}

func get(url string) (string, error) {
	resp, err := insecureHTTP.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %.200s", url, resp.Status, b)
	}
	return string(b), nil
}

// waitHTTP polls url until it answers 200, the process exits, or timeout.
func waitHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited; its log ends:\n%s", p.name, p.tail())
		}
		_, last = get(url)
		return last == nil, nil
	})
	if err != nil && last != nil && !p.exited() {
		return fmt.Errorf("%s not ready at %s: %v (log %s)", p.name, url, last, p.log)
	}
	return err
}

func writeKubeconfig(env *envtest.Environment, cfg *rest.Config, name, path string) error {
	u, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// run measures both controllers at one N on a fresh control plane.
func run(c config, n int) (res []result, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", fmt.Sprintf("bench-scale-%d-", n))
	if err != nil {
		return nil, err
	}
	defer func() {
		if c.keep || err != nil {
			logf("logs and certs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	logf("N=%d: starting etcd + kube-apiserver (envtest control plane)", n)
	env := &envtest.Environment{
		BinaryAssetsDirectory:    c.assets,
		CRDDirectoryPaths:        []string{c.crds},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()

	kcmKC, mgrKC := filepath.Join(dir, "kcm.kubeconfig"), filepath.Join(dir, "manager.kubeconfig")
	if err := writeKubeconfig(env, cfg, "bench-kube-controller-manager", kcmKC); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(env, cfg, "bench-lockedcron-manager", mgrKC); err != nil {
		return nil, err
	}

	redisPort, err := freePort()
	if err != nil {
		return nil, err
	}
	// AOF on, as docs/lockwrap.md's "Redis settings" ask: without it every job's first pass
	// warns NotDurable (an Event per job, which the recorder keeps for 6 min).
	redis, err := start("redis", dir, nil, "redis-server", "--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1",
		"--dir", dir, "--daemonize", "no", "--appendonly", "yes", "--appendfsync", "everysec")
	if err != nil {
		return nil, err
	}
	defer redis.stop()

	kcmPort, err := freePort()
	if err != nil {
		return nil, err
	}
	kcm, err := start("kube-controller-manager", dir, nil, filepath.Join(c.assets, "kube-controller-manager"),
		"--kubeconfig="+kcmKC,
		"--controllers="+nativeControllers(c),
		"--leader-elect=false",
		fmt.Sprintf("--kube-api-qps=%g", c.qps),
		fmt.Sprintf("--kube-api-burst=%d", c.burst),
		fmt.Sprintf("--concurrent-cron-job-syncs=%d", c.cronSyncs),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--cert-dir="+filepath.Join(dir, "kcm-certs"),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
	)
	if err != nil {
		return nil, err
	}
	defer kcm.stop()

	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	pprofPort, err := freePort()
	if err != nil {
		return nil, err
	}
	mgrArgs := []string{
		"--leader-elect=false",
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprofPort),
		fmt.Sprintf("--kube-api-qps=%g", c.qps),
		fmt.Sprintf("--kube-api-burst=%d", c.burst),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		"--metrics-secure=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		"--cluster-name=bench",
	}
	if c.workers > 0 {
		mgrArgs = append(mgrArgs, fmt.Sprintf("--max-concurrent-reconciles=%d", c.workers))
	}
	mgrEnv := []string{"KUBECONFIG=" + mgrKC}
	if c.gogc != "" {
		mgrEnv = append(mgrEnv, "GOGC="+c.gogc)
	}
	if c.memLimit != "" {
		mgrEnv = append(mgrEnv, "GOMEMLIMIT="+c.memLimit)
	}
	mgr, err := start("manager", dir, mgrEnv, c.manager, mgrArgs...)
	if err != nil {
		return nil, err
	}
	defer func() { mgr.stop() }() // the one running at the end (-takeover-before starts another)
	kcmMetrics := fmt.Sprintf("https://127.0.0.1:%d/metrics", kcmPort)
	mgrMetrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	if err := waitHTTP(ctx, kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), 2*time.Minute); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, mgr, fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort), 2*time.Minute); err != nil {
		return nil, err
	}
	logf("N=%d: kube-controller-manager (pid %d), manager (pid %d), redis-server :%d (appendonly yes, appendfsync everysec) up", n, kcm.cmd.Process.Pid, mgr.cmd.Process.Pid, redisPort)

	// The harness's own client: fast, so that it never is the bottleneck.
	hcfg := rest.CopyConfig(cfg)
	hcfg.QPS, hcfg.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(hcfg)
	if err != nil {
		return nil, err
	}
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(hcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}

	rec := &recorder{seen: map[string]map[string]child{kindLocked: {}, kindNative: {}, kindNativePod: {}}}
	running := make(chan *corev1.Pod, 100000)
	factory := informers.NewSharedInformerFactory(cs, 0)
	podInf := factory.Core().V1().Pods().Informer()
	jobInf := factory.Batch().V1().Jobs().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if job, ok := pod.Labels[batchv1.JobNameLabel]; ok {
			if t, ok := nameScheduled(job); ok && rec.add(kindNativePod, pod.Namespace+"/"+pod.Name, t) && c.finishAfter > 0 {
				running <- pod // the native run ends too: its Job completes, the CronJob sees it
			}
			return
		}
		t, err := time.Parse(time.RFC3339, pod.Annotations[runpod.AnnotationScheduledTime])
		if err != nil {
			return
		}
		if rec.add(kindLocked, pod.Namespace+"/"+pod.Name, t) {
			running <- pod
		}
	}}); err != nil {
		return nil, err
	}
	if _, err := jobInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		job, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		if t, ok := jobScheduled(job); ok {
			rec.add(kindNative, job.Namespace+"/"+job.Name, t)
		}
	}}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	var simErrs errCounts
	for range 8 {
		go markRunning(ctx, cs, running, c.finishAfter, c.kubeletStatus, &simErrs)
	}

	cronJobs := n
	if !c.native {
		cronJobs = 0
	}
	logf("N=%d: creating %d namespaces, Redis Secrets, %d LockedCronJobs and %d CronJobs", n, c.namespaces, n, cronJobs)
	createStart := time.Now()
	if err := populate(ctx, cs, cl, c, n, redisPort); err != nil {
		return nil, err
	}
	created := time.Now()
	logf("N=%d: %d objects created in %s", n, n+cronJobs, created.Sub(createStart).Round(time.Second))

	all := occurrences(created.Add(10*time.Second), c.warmup+c.window)
	window := all[c.warmup:]
	from, to := window[0].Add(-time.Second), window[len(window)-1].Add(59*time.Second)
	logf("N=%d: measuring occurrences %s … %s (window %s – %s)", n, window[0].Format("15:04:05"), window[len(window)-1].Format("15:04:05"), from.Format("15:04:05"), to.Format("15:04:05"))

	var restarted time.Time
	if c.takeover > 0 {
		if err := sleepUntil(ctx, window[0].Add(-c.takeover), kcm, mgr); err != nil {
			return nil, err
		}
		if mgr, err = takeOver(ctx, mgr, dir, mgrEnv, c.manager, mgrArgs, fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)); err != nil {
			return nil, err
		}
		restarted = time.Now()
		logf("N=%d: takeover: the manager killed at %s, a new one (pid %d) ready %s later", n, window[0].Add(-c.takeover).Format("15:04:05.000"), mgr.cmd.Process.Pid, restarted.Sub(window[0].Add(-c.takeover)).Round(time.Millisecond))
	}
	if err := sleepUntil(ctx, from, kcm, mgr); err != nil {
		return nil, err
	}
	serverBefore, err := serverTimes(ctx, cs)
	if err != nil {
		return nil, err
	}
	before, err := snapshot(kcm, mgr, kcmMetrics, mgrMetrics)
	if err != nil {
		return nil, err
	}
	if !restarted.IsZero() {
		before[kindLocked] = procFigures{} // the new manager's counters start at its start: the takeover counts
	}
	profiled := make(chan error, 2)
	if c.profiles != "" {
		secs := int(to.Sub(from).Seconds())
		go func() {
			profiled <- profileCPU(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", pprofPort, secs),
				filepath.Join(c.profiles, fmt.Sprintf("manager-N%d.pprof", n)))
		}()
		go func() {
			// The API server's too: where the server time of each kind of call goes.
			body, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(secs)).DoRaw(ctx)
			if err == nil {
				err = saveProfile(bytes.NewReader(body), filepath.Join(c.profiles, fmt.Sprintf("apiserver-N%d.pprof", n)))
			}
			profiled <- err
		}()
	} else {
		profiled <- nil
		profiled <- nil
	}
	// The controllers' work queues, sampled through the window: their peak depth.
	peak := map[string]float64{}
	var peakMu sync.Mutex
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			if s, err := snapshot(kcm, mgr, kcmMetrics, mgrMetrics); err == nil {
				peakMu.Lock()
				for k, f := range s {
					peak[k] = max(peak[k], f.depth)
				}
				peakMu.Unlock()
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(scrapeEvery):
			}
		}
	}()
	err = sleepUntil(ctx, to, kcm, mgr)
	stopSampling()
	<-sampled
	if err != nil {
		return nil, err
	}
	after, err := snapshot(kcm, mgr, kcmMetrics, mgrMetrics)
	if err != nil {
		return nil, err
	}
	serverAfter, err := serverTimes(ctx, cs)
	if err != nil {
		return nil, err
	}
	logf("N=%d: admission plugins on CREATE over the window: %s", n, admissionSummary(serverBefore, serverAfter))
	logf("N=%d: writes the API server served over the window (all clients, the harness's included), by verb, group, resource and subresource: %s", n, writeSummary(serverBefore, serverAfter))
	for range 2 {
		if err := <-profiled; err != nil {
			logf("warning: CPU profile: %v", err)
		}
	}
	if c.profiles != "" {
		// The heap at the end of the window (what the RSS column holds), after a collection
		// (gc=1): without it the profile is the heap as of the last collection, which may
		// have run during one of the harness's metrics scrapes (a scrape of 5,000 jobs'
		// series builds ≈ 30 MB that a collection then takes for live).
		if err := profileCPU(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", pprofPort),
			filepath.Join(c.profiles, fmt.Sprintf("manager-N%d.heap.pprof", n))); err != nil {
			logf("warning: heap profile: %v", err)
		}
	}
	if line, err := memorySummary(mgrMetrics); err != nil {
		logf("warning: the manager's memory figures: %v", err)
	} else {
		logf("N=%d: manager memory at the window's end (Go runtime, MiB): %s", n, line)
	}
	if ps, err := sampleProc(mgr.cmd.Process.Pid); err == nil {
		logf("N=%d: manager RSS at the window's end (MiB): %d, of it anonymous %d, file-backed %d", n, ps.RSS>>20, ps.Anon>>20, ps.File>>20)
	}
	if err := eventSummary(ctx, cs); err != nil {
		logf("warning: listing Events: %v", err)
	}
	simErrs.each(func(msg string, n int) {
		logf("warning: marking a pod running failed %d times: %s", n, msg)
	})

	cancel() // informers and pod marking stop before the processes and the control plane
	inWindow := map[int64]bool{}
	for _, t := range window {
		inWindow[t.Unix()] = true
	}
	lagsOf := func(kind string) (lags []time.Duration, inWin, early int) {
		for _, ch := range rec.snapshot(kind) {
			if !ch.seen.Before(from) && !ch.seen.After(to) {
				inWin++
			}
			if inWindow[ch.scheduled.Unix()] && !ch.seen.After(to) {
				lag := ch.seen.Sub(ch.scheduled)
				lags = append(lags, lag)
				if lag < 0 {
					early++
				}
			}
		}
		return lags, inWin, early
	}
	kinds := []string{kindNative, kindLocked}
	if !c.native {
		kinds = kinds[1:]
	}
	for _, kind := range kinds {
		r := result{kind: kind, n: n, expected: n * len(window)}
		lags, inWin, early := lagsOf(kind)
		r.inWindow, r.created, r.early, r.lag = inWin, len(lags), early, summarize(lags)
		if kind == kindNative && c.nativePods {
			podLags, _, _ := lagsOf(kindNativePod)
			r.podCreated, r.podLag = len(podLags), summarize(podLags)
		}
		b, a := before[kind], after[kind]
		r.calls = map[string]float64{}
		for m, v := range a.calls {
			if d := v - b.calls[m]; d > 0 {
				r.calls[m] = d
			}
		}
		r.adds = a.adds - b.adds
		r.latency = map[string]time.Duration{}
		for verb, sum := range a.latSum {
			if n := a.latCount[verb] - b.latCount[verb]; n > 0 {
				r.latency[verb] = perCall(sum-b.latSum[verb], n)
			}
		}
		r.server = map[string]time.Duration{}
		for _, k := range serverCalls[kind] {
			r.server[k] = perCall(serverAfter.sum[k]-serverBefore.sum[k], serverAfter.count[k]-serverBefore.count[k])
		}
		r.limiterWait = perCall(total(a.waitSum)-total(b.waitSum), total(a.waitCount)-total(b.waitCount))
		r.peakDepth = max(peak[kind], a.depth)
		r.cpu = a.proc.CPU - b.proc.CPU
		r.rss, r.hwm = a.proc.RSS, a.proc.HWM
		res = append(res, r)
	}
	logf("N=%d: done; stopping", n)
	return res, nil
}

// takeOver kills old (the whole process group, SIGKILL: a crash, nothing handed over) and
// starts another manager with the same arguments, returning it once readyURL answers.
func takeOver(ctx context.Context, old *proc, dir string, env []string, bin string, args []string, readyURL string) (*proc, error) {
	_ = syscall.Kill(-old.cmd.Process.Pid, syscall.SIGKILL)
	<-old.done
	p, err := start("manager-after-takeover", dir, env, bin, args...)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, p, readyURL, 2*time.Minute); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// markRunning plays the kubelet for the manager's pods, and with -native-pods for the Jobs'
// pods: the (wrapped) container runs, and with finishAfter > 0 it ends that long after,
// Succeeded (with lockwrap's report in a lockedcron pod). With kubelet true the status has
// what a real kubelet writes besides (kubeletFields).
func markRunning(ctx context.Context, cs kubernetes.Interface, pods <-chan *corev1.Pod, finishAfter time.Duration, kubelet bool, errs *errCounts) {
	for {
		var pod *corev1.Pod
		select {
		case <-ctx.Done():
			return
		case pod = <-pods:
		}
		now := metav1.Now().UTC().Format(time.RFC3339)
		wrapped := pod.Annotations[runpod.AnnotationWrappedContainer]
		if wrapped == "" && len(pod.Spec.Containers) > 0 {
			wrapped = pod.Spec.Containers[0].Name // a Job's pod
		}
		image := ""
		for _, c := range pod.Spec.Containers {
			if c.Name == wrapped {
				image = c.Image
			}
		}
		var inits []any
		for _, c := range pod.Spec.InitContainers {
			inits = append(inits, containerStatus(c.Name, c.Image, map[string]any{"terminated": map[string]any{"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}, kubelet))
		}
		st := map[string]any{"phase": "Running", "startTime": now, "initContainerStatuses": inits,
			"containerStatuses": []any{containerStatus(wrapped, image, map[string]any{"running": map[string]any{"startedAt": now}}, kubelet)}}
		patch, err := statusPatch(st, now, pod, kubelet)
		if err != nil {
			errs.add(err)
			continue
		}
		var last error
		_ = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6}, func(ctx context.Context) (bool, error) {
			_, last = cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			return last == nil, nil
		})
		if last != nil && ctx.Err() == nil {
			errs.add(last)
		}
		if finishAfter > 0 && last == nil {
			// A pod prepared ahead of its instant: lockwrap waits for the instant, so the
			// job runs from then, and ends finishAfter later.
			ran := time.Now()
			if at, err := time.Parse(time.RFC3339, pod.Annotations[runpod.AnnotationScheduledTime]); err == nil && at.After(ran) {
				ran = at
			}
			time.AfterFunc(time.Until(ran)+finishAfter, func() {
				markSucceeded(ctx, cs, pod, wrapped, image, now, ran.UTC().Format(time.RFC3339Nano), kubelet, errs)
			})
		}
	}
}

// markSucceeded ends a running pod as its kubelet would after the job ran: phase
// Succeeded, the (wrapped) container terminated (it started at started); a lockedcron
// pod's with lockwrap's Succeeded report as its termination message (the job ran from
// ran), a Job's pod's without one.
func markSucceeded(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, wrapped, image, started, ran string, kubelet bool, errs *errCounts) {
	end := metav1.Now().UTC().Format(time.RFC3339Nano)
	terminated := map[string]any{"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": end[:19] + "Z"}
	if occ, ok := pod.Annotations[runpod.AnnotationScheduledTime]; ok {
		msg, err := report.Encode(report.Report{Outcome: report.Succeeded, Occurrence: occ,
			Key: pod.Name, Holder: "bench/" + pod.Name, FencingToken: 1, AcquiredAt: ran, StartedAt: ran, ReleasedAt: end})
		if err != nil {
			errs.add(err)
			return
		}
		terminated["message"] = string(msg)
	}
	st := map[string]any{"phase": "Succeeded", "containerStatuses": []any{containerStatus(wrapped, image, map[string]any{"terminated": terminated}, kubelet)}}
	patch, err := statusPatch(st, started, pod, kubelet)
	if err != nil {
		errs.add(err)
		return
	}
	if _, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
		errs.add(err)
	}
}

// statusPatch is the merge patch that sets a pod's status to st, with what a kubelet also
// writes (kubeletFields) when kubelet is true.
func statusPatch(st map[string]any, at string, pod *corev1.Pod, kubelet bool) ([]byte, error) {
	if kubelet {
		kubeletFields(st, at, pod)
	}
	return json.Marshal(map[string]any{"status": st})
}

// containerStatus is one container's status in the kubelet's words; with kubelet true, with
// what a v1.37 kubelet also writes: image and container IDs (the latter in a terminated
// state too), resources, volume mounts, user.
func containerStatus(name, image string, state map[string]any, kubelet bool) map[string]any {
	_, running := state["running"]
	cs := map[string]any{"name": name, "image": image, "imageID": "", "ready": running, "started": running, "restartCount": 0, "state": state}
	if kubelet {
		cs["imageID"] = image + "@sha256:768e5c6f5cb6db0794eec98dc7a967f40631746c32232b78a3105fb946f3ab83"
		cs["containerID"] = "containerd://" + strings.Repeat(fmt.Sprintf("%08x", rand.Uint32()), 8)
		if term, ok := state["terminated"].(map[string]any); ok {
			term["containerID"] = cs["containerID"] // a kubelet writes it in the terminated state too
		}
		cs["resources"] = map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}, "limits": map[string]any{"memory": "64Mi"}}
		cs["allocatedResources"] = map[string]any{"cpu": "10m", "memory": "16Mi"}
		cs["volumeMounts"] = []any{
			map[string]any{"name": "lockwrap", "mountPath": "/lockwrap"},
			map[string]any{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true, "recursiveReadOnly": "Disabled"},
		}
		cs["user"] = map[string]any{"linux": map[string]any{"uid": 65532, "gid": 65532, "supplementalGroups": []int{65532}}}
	}
	return cs
}

// kubeletFields adds to a pod status what a kubelet writes besides its containers' states:
// the five conditions, host and pod IPs. (The QoS class the API server sets at creation,
// from the pod's resources, and it is immutable: a kubelet never writes it.)
func kubeletFields(st map[string]any, at string, pod *corev1.Pod) {
	var conds []any
	for _, typ := range []string{"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"} {
		c := map[string]any{"type": typ, "status": "True", "lastTransitionTime": at, "lastProbeTime": nil, "observedGeneration": 1}
		if st["phase"] == "Succeeded" && (typ == "Ready" || typ == "ContainersReady") {
			c["status"], c["reason"] = "False", "PodCompleted"
		}
		conds = append(conds, c)
	}
	ip := fmt.Sprintf("10.244.%d.%d", rand.IntN(250), rand.IntN(250))
	st["conditions"], st["observedGeneration"] = conds, pod.Generation
	st["hostIP"], st["hostIPs"] = "10.0.0.7", []any{map[string]any{"ip": "10.0.0.7"}}
	st["podIP"], st["podIPs"] = ip, []any{map[string]any{"ip": ip}}
}

// errCounts counts errors by message, for one warning line each.
type errCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *errCounts) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[err.Error()]++
}

func (e *errCounts) each(f func(msg string, n int)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for m, n := range e.n {
		f(m, n)
	}
}

func jobScheduled(job *batchv1.Job) (time.Time, bool) {
	if v, ok := job.Annotations[jobScheduledAnnotation]; ok {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t, true
		}
	}
	// Older controllers: the name ends in the scheduled time in minutes since the epoch.
	return nameScheduled(job.Name)
}

// nameScheduled is the scheduled time a CronJob's Job name ends in (minutes since the
// epoch).
func nameScheduled(name string) (time.Time, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return time.Time{}, false
	}
	m, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(m*60, 0), true
}

type procFigures struct {
	calls map[string]float64
	// client-go's rest_client_request_duration_seconds and
	// rest_client_rate_limiter_duration_seconds, sum and count by verb: how long calls
	// took at the API server, and how long they waited for the client's QPS.
	latSum, latCount, waitSum, waitCount map[string]float64
	adds                                 float64 // workqueue_adds_total, the controllers' queues
	depth                                float64 // workqueue_depth, the controllers' queues
	proc                                 procSample
}

// eventSeriesQueue is the name of the manager's queue of Event series PATCHes.
const eventSeriesQueue = "lockedcron-event-series"

func snapshot(kcm, mgr *proc, kcmURL, mgrURL string) (map[string]procFigures, error) {
	out := map[string]procFigures{}
	for kind, p := range map[string]*proc{kindNative: kcm, kindLocked: mgr} {
		url := kcmURL
		if kind == kindLocked {
			url = mgrURL
		}
		text, err := get(url)
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", p.name, err)
		}
		calls, err := requestsByMethod(text)
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", p.name, err)
		}
		adds, err := sumBy(text, "workqueue_adds_total", "name")
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", p.name, err)
		}
		depth, err := sumBy(text, "workqueue_depth", "name")
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", p.name, err)
		}
		// The controllers' queues: not the manager's queue of Event series PATCHes
		// (internal/controller/recorder.go), which a recorder's refresh fills with one
		// entry per series every 30 minutes.
		delete(adds, eventSeriesQueue)
		delete(depth, eventSeriesQueue)
		f := procFigures{calls: calls, adds: total(adds), depth: total(depth)}
		for _, m := range []struct {
			name string
			to   *map[string]float64
		}{
			{"rest_client_request_duration_seconds_sum", &f.latSum},
			{"rest_client_request_duration_seconds_count", &f.latCount},
			{"rest_client_rate_limiter_duration_seconds_sum", &f.waitSum},
			{"rest_client_rate_limiter_duration_seconds_count", &f.waitCount},
		} {
			if *m.to, err = sumBy(text, m.name, "verb"); err != nil {
				return nil, fmt.Errorf("%s metrics: %w", p.name, err)
			}
		}
		if f.proc, err = sampleProc(p.cmd.Process.Pid); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[kind] = f
	}
	return out, nil
}

func sleepUntil(ctx context.Context, t time.Time, procs ...*proc) error {
	for time.Now().Before(t) {
		for _, p := range procs {
			if p.exited() {
				return fmt.Errorf("%s exited; its log ends:\n%s", p.name, p.tail())
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Until(t), time.Second)):
		}
	}
	return nil
}

// populate creates the namespaces, a Redis Secret in each, and n objects of each kind,
// spread round-robin, with 16 writers.
func populate(ctx context.Context, cs kubernetes.Interface, cl client.Client, c config, n, redisPort int) error {
	for i := range c.namespaces {
		name := fmt.Sprintf("bench-%02d", i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := cs.CoreV1().Secrets(name).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "redis"},
			StringData: map[string]string{"url": fmt.Sprintf("redis://127.0.0.1:%d/0", redisPort)},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	podSpec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name: "job", Image: "k8s.local/lockedcron-e2e-job:dev", ImagePullPolicy: corev1.PullNever,
			Command: []string{"/usr/local/bin/e2e-job"},
		}},
	}
	idx := make(chan int)
	errc := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				ns := fmt.Sprintf("bench-%02d", i%c.namespaces)
				name := fmt.Sprintf("job-%05d", i)
				lcj := &v1alpha1.LockedCronJob{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{benchLabel: "true"}},
					Spec: v1alpha1.LockedCronJobSpec{
						Schedule: "* * * * *",
						Lock:     v1alpha1.LockSpec{Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}},
						Template: corev1.PodTemplateSpec{Spec: podSpec},
					},
				}
				if c.prepareAhead > 0 {
					s := int32(c.prepareAhead)
					lcj.Spec.PrepareAheadSeconds = &s
				}
				cj := &batchv1.CronJob{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{benchLabel: "true"}},
					Spec: batchv1.CronJobSpec{
						Schedule: "* * * * *",
						JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
							Template: corev1.PodTemplateSpec{Spec: podSpec},
						}},
					},
				}
				err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 6}, func(ctx context.Context) (bool, error) {
					err := cl.Create(ctx, lcj)
					if err == nil || isAlreadyExists(err) {
						return true, nil
					}
					return false, nil
				})
				if err == nil && c.native {
					err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 6}, func(ctx context.Context) (bool, error) {
						_, err := cs.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
						return err == nil || isAlreadyExists(err), nil
					})
				}
				if err != nil {
					select {
					case errc <- fmt.Errorf("creating %s/%s: %w", ns, name, err):
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		idx <- i
	}
	close(idx)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func isAlreadyExists(err error) bool {
	var st interface{ Status() metav1.Status }
	return errors.As(err, &st) && st.Status().Reason == metav1.StatusReasonAlreadyExists
}

// byKey prints a map as "key value, key value", in key order.
func byKey[V any](m map[string]V, value func(V) string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+value(m[k]))
	}
	return strings.Join(parts, ", ")
}

func printResults(c config, n int, rs []result) {
	label := fmt.Sprintf("N=%d", n)
	if n <= 20 {
		label += " (idle)"
	}
	load, _ := os.ReadFile("/proc/loadavg")
	cronJobs := n
	if !c.native {
		cronJobs = 0
	}
	fmt.Printf("\n== %s: %d LockedCronJobs and %d CronJobs, \"* * * * *\", %d namespaces, client QPS %g / burst %d each; load average after the window %s\n",
		label, n, cronJobs, c.namespaces, c.qps, c.burst, strings.Join(strings.Fields(string(load))[:3], " "))
	printTable(rs)
	for _, r := range rs {
		perOcc := byKey(r.calls, func(n float64) string { return fmt.Sprintf("%.2f", n/float64(max(r.inWindow, 1))) })
		fmt.Printf("  %-10s API calls per occurrence by method: %s (%d children created in the window)\n", r.kind, perOcc, r.inWindow)
		fmt.Printf("  %-10s work queue: %.2f adds per occurrence, peak depth %.0f\n", r.kind, r.adds/float64(max(r.inWindow, 1)), r.peakDepth)
		lat := byKey(r.latency, func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() })
		var srv []string
		for _, k := range serverCalls[r.kind] {
			srv = append(srv, fmt.Sprintf("%s %s", k, r.server[k].Round(100*time.Microsecond)))
		}
		fmt.Printf("  %-10s API call time (mean): as the client saw it %s; waiting for the client's QPS %s; in the API server (apiserver_request_duration_seconds) %s\n",
			r.kind, lat, r.limiterWait.Round(100*time.Microsecond), strings.Join(srv, ", "))
		if r.kind == kindLocked && c.prepareAhead > 0 {
			fmt.Printf("  %-10s pods that existed before their instant: %d of %d (%.1f%%)\n", r.kind, r.early, r.expected, 100*float64(r.early)/float64(max(r.expected, 1)))
		}
	}
	if !c.native {
		return
	}
	var nat, lc result
	for _, r := range rs {
		if r.kind == kindNative {
			nat = r
		} else {
			lc = r
		}
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	fmt.Printf("  ratio lockedcron/native: lag p50 %s, p99 %s, max %s; API calls/occurrence %s; RSS %s; CPU %s\n",
		ratio(lc.lag.P50.Seconds(), nat.lag.P50.Seconds()), ratio(lc.lag.P99.Seconds(), nat.lag.P99.Seconds()),
		ratio(lc.lag.Max.Seconds(), nat.lag.Max.Seconds()), ratio(lc.callsPerOcc(), nat.callsPerOcc()),
		ratio(float64(lc.rss), float64(nat.rss)), ratio(lc.cpu.Seconds(), nat.cpu.Seconds()))
	if c.nativePods {
		fmt.Printf("  native pods (job-controller): created %d/%d, lag p50 %s, p90 %s, p99 %s, max %s\n", nat.podCreated, nat.expected,
			secs(nat.podLag.P50), secs(nat.podLag.P90), secs(nat.podLag.P99), secs(nat.podLag.Max))
		fmt.Printf("  ratio lockedcron pod / native Job's pod: lag p50 %s, p99 %s, max %s\n",
			ratio(lc.lag.P50.Seconds(), nat.podLag.P50.Seconds()), ratio(lc.lag.P99.Seconds(), nat.podLag.P99.Seconds()),
			ratio(lc.lag.Max.Seconds(), nat.podLag.Max.Seconds()))
	}
}

func printTable(rs []result) {
	fmt.Printf("  %-10s %6s %13s %8s %8s %8s %8s %10s %15s %7s\n", "controller", "N", "created/exp", "lag p50", "p90", "p99", "max", "calls/occ", "RSS (HWM) MiB", "CPU s")
	for _, r := range rs {
		fmt.Printf("  %-10s %6d %13s %8s %8s %8s %8s %10.2f %15s %7.1f\n", r.kind, r.n,
			fmt.Sprintf("%d/%d", r.created, r.expected), secs(r.lag.P50), secs(r.lag.P90), secs(r.lag.P99), secs(r.lag.Max),
			r.callsPerOcc(), fmt.Sprintf("%d (%d)", r.rss>>20, r.hwm>>20), r.cpu.Seconds())
	}
}

func secs(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// scrapeEvery is how often the harness reads both processes' metrics during the window
// (for the work queues' peak depth): a common Prometheus scrape interval. Each scrape
// costs the scraped process CPU in proportion to its series — the manager serves a few
// dozen per LockedCronJob, kube-controller-manager none per CronJob — so a harness
// scraping every 2 s (as it first did) charged the manager a third of its CPU at
// 1,000 jobs for work no deployment asks of it.
const scrapeEvery = 15 * time.Second

// profileCPU saves a profile of the manager from its pprof endpoint (for the CPU profile,
// url asks for the window's length) to file.
func profileCPU(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return saveProfile(resp.Body, file)
}

// saveProfile writes a profile read from body to file.
func saveProfile(body io.Reader, file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return err
	}
	logf("profile: %s (go tool pprof -top %s)", file, file)
	return f.Close()
}

// nativeControllers are kube-controller-manager's --controllers: the CronJob controller,
// and with -native-pods the Job controller that makes the Jobs' pods.
func nativeControllers(c config) string {
	if c.nativePods {
		return "cronjob-controller,job-controller"
	}
	return "cronjob-controller"
}

// eventSummary logs the manager's Events at the window's end by type, reason and action:
// how many exist and how many are series (the events/v1 recorder caches each it wrote
// until its series ends, 6 min after its last repeat, or for 6 min a single one: that
// cache is part of the manager's heap).
func eventSummary(ctx context.Context, cs kubernetes.Interface) error {
	type key struct{ typ, reason, action string }
	count, series := map[key]int{}, map[key]int{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := cs.EventsV1().Events("").List(ctx, opts)
		if err != nil {
			return err
		}
		for _, e := range l.Items {
			if e.ReportingController != "lockedcron-controller" {
				continue
			}
			k := key{e.Type, e.Reason, e.Action}
			count[k]++
			if e.Series != nil {
				series[k]++
			}
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	keys := slices.SortedFunc(maps.Keys(count), func(a, b key) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(a.reason, b.reason), cmp.Compare(a.action, b.action))
	})
	for _, k := range keys {
		logf("manager Events: %d %s %s action %s (%d series)", count[k], k.typ, k.reason, k.action, series[k])
	}
	return nil
}

// memorySummary reads where the manager's memory is from its Go runtime metrics: the
// heap's live objects and the size it may grow to before the next collection, heap spans
// idle and not yet returned to the OS (part of RSS), returned ones (not), stacks, and all
// the runtime holds.
func memorySummary(url string) (string, error) {
	text, err := get(url)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, m := range []struct{ name, what string }{
		{"go_memstats_heap_alloc_bytes", "heap objects"},
		{"go_memstats_heap_inuse_bytes", "heap spans in use"},
		{"go_memstats_next_gc_bytes", "next GC at"},
		{"go_memstats_heap_idle_bytes", "heap idle"},
		{"go_memstats_heap_released_bytes", "of it returned"},
		{"go_memstats_stack_inuse_bytes", "stacks"},
		{"go_memstats_sys_bytes", "runtime total"},
	} {
		v, err := sumBy(text, m.name)
		if err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", m.what, total(v)/(1<<20)))
	}
	return strings.Join(parts, ", "), nil
}
