//go:build soak

// The soak (issue 14): contenders for one lock key in three namespaces and a lockwrap loop on
// the host, a second key with blackout windows and Defer, random jobs, a seeded schedule of
// overlapping faults, and at the end the external checker (test/soak/checker) on what the
// jobs recorded on a second Redis and what the contenders reported. Run it with
// `make soak` / `make soak-short` (hack/soak.sh holds the cluster lock, deploys the operator
// from this checkout and builds the host binaries).
package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
	"github.com/lockedcron/lockedcron/test/soak/checker"
)

const (
	mainKey     = "soak/main"
	blackoutKey = "soak/blackout"
	jobName     = "soak"
	hostName    = "vm-crontab"
	ttl         = 6 * time.Second
	renew       = 2 * time.Second
	killGrace   = 2 * time.Second
	deadline    = 60 // startingDeadlineSeconds: pods take 20 s and more to start on a loaded node
	podGateway  = "10.244.0.1"
)

// contender is one LockedCronJob of the soak.
type contender struct {
	ns, key, schedule string
	policy            v1alpha1.ContentionPolicy
	blackout          *v1alpha1.BlackoutSpec
	sleep, sleepMax   string
	prepareAhead      int32 // spec.prepareAheadSeconds (0: off)
}

type config struct {
	duration        time.Duration
	seed            int64
	schedule        string // the main key's
	blackoutSched   string
	out             string
	lockwrap, job   string // host binaries
	repo            string
	apiserverFaults bool
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func loadConfig(t *testing.T) config {
	d, err := time.ParseDuration(envOr("SOAK_DURATION", "40m"))
	if err != nil {
		t.Fatalf("SOAK_DURATION: %v (a Go duration such as 40m)", err)
	}
	seed := time.Now().UnixNano() % 1_000_000
	if s := os.Getenv("SOAK_SEED"); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED: %v (an integer)", err)
		}
	}
	c := config{duration: d, seed: seed, schedule: envOr("SOAK_SCHEDULE", "*/2 * * * * *"),
		blackoutSched: envOr("SOAK_BLACKOUT_SCHEDULE", "*/4 * * * * *"),
		out:           os.Getenv("SOAK_OUT"), lockwrap: os.Getenv("SOAK_LOCKWRAP"), job: os.Getenv("SOAK_JOB"),
		repo: envOr("SOAK_REPO", "../.."), apiserverFaults: os.Getenv("SOAK_APISERVER_FAULTS") != "0"}
	if c.out == "" || c.lockwrap == "" || c.job == "" || os.Getenv("KUBECONFIG") == "" {
		t.Fatal("run through hack/soak.sh (make soak): it sets KUBECONFIG, SOAK_OUT, SOAK_LOCKWRAP and SOAK_JOB")
	}
	return c
}

// soak is the state of one run.
type soak struct {
	t         *testing.T
	cfg       config
	faultsEnd time.Time // a fault that needs a target waits for one until then
	k8s       client.Client
	cs        *kubernetes.Clientset
	lockR     *redistest.Server
	auditR    *redistest.Server
	proxy     *redistest.Proxy
	toxic     *toxicLink
	lockRDB   *redis.Client
	// held and released count the pods watchPods held with finalizerObserved and let go.
	held, released atomic.Int64

	redisMu sync.Mutex // one Redis fault at a time: a stall during a restart would fail the restart's wait
	// apiserverMu: one kube-apiserver restart at a time.
	apiserverMu sync.Mutex

	mu        sync.Mutex
	decisions map[string]checker.Decision // by namespace/pod, or host/<unix>
	hostOccs  []time.Time
	hostProcs map[int]bool // process group ids of running host lockwraps
	faults    map[FaultKind]int
	faultLog  []string
	kills     []checker.Kill    // the runs job-kill-9 hit
	deleted   []checker.Deleted // the holders whose pods holder-pod-deleted deleted, or the controller withdrew ahead
}

func TestSoak(t *testing.T) {
	cfg := loadConfig(t)
	ctx := context.Background()
	s := &soak{t: t, cfg: cfg, decisions: map[string]checker.Decision{}, hostProcs: map[int]bool{}, faults: map[FaultKind]int{}}
	t.Logf("soak: seed %d, duration %v, schedule %q (main) / %q (blackout), output %s", cfg.seed, cfg.duration, cfg.schedule, cfg.blackoutSched, cfg.out)
	s.connect()
	logCtx, stopLogs := context.WithCancel(ctx)
	logsDone := make(chan struct{})
	if err := os.MkdirAll(filepath.Join(cfg.out, "manager-logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(logsDone)
		keepManagerLogs(logCtx, envOr("SOAK_POD_LOGS", "/var/log/pods"), filepath.Join(cfg.out, "manager-logs"))
	}()
	defer func() { stopLogs(); <-logsDone }()

	// 1. Two Redis: the lock's (AOF, restarted and stalled by faults, a freezable proxy in
	// front of it for the host loop, behind a Toxiproxy one) and the audit's, which no fault touches.
	bind := redistest.WithArgs("--bind", "127.0.0.1 "+podGateway)
	s.lockR = redistest.Start(t, redistest.WithPersistence(), bind)
	s.auditR = redistest.Start(t, redistest.WithPersistence(), bind)
	s.proxy = redistest.StartProxy(t, s.lockR.Addr())
	s.toxic = startToxicLink(t, s.proxy.Addr())
	s.lockRDB = s.lockR.Client()
	defer s.lockRDB.Close()
	podURL := func(r *redistest.Server) string { return fmt.Sprintf("redis://%s:%d/0", podGateway, r.Port) }

	// 2. The contenders.
	window := &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Windows: []v1alpha1.BlackoutWindow{
		{Name: "each-minute", Schedule: "30 * * * * *", Duration: &metav1.Duration{Duration: 10 * time.Second}},
	}}
	cons := []contender{
		{ns: "soak-a", key: mainKey, schedule: cfg.schedule, policy: v1alpha1.ContentionSkip, sleep: "300ms", sleepMax: "9s"},
		// Prepared ahead: its pods exist before their instants (lockwrap waits for them),
		// through the faults, and are withdrawn when the soak suspends the job.
		{ns: "soak-b", key: mainKey, schedule: cfg.schedule, policy: v1alpha1.ContentionSkip, sleep: "300ms", sleepMax: "9s", prepareAhead: 10},
		{ns: "soak-c", key: mainKey, schedule: cfg.schedule, policy: v1alpha1.ContentionRetry, sleep: "300ms", sleepMax: "9s"},
		{ns: "soak-d", key: blackoutKey, schedule: cfg.blackoutSched, policy: v1alpha1.ContentionSkip, blackout: window, sleep: "200ms", sleepMax: "3s"},
		{ns: "soak-e", key: blackoutKey, schedule: cfg.blackoutSched, policy: v1alpha1.ContentionSkip, blackout: window, sleep: "200ms", sleepMax: "3s", prepareAhead: 10},
	}
	keyOf := map[string]string{}
	for _, c := range cons {
		keyOf[c.ns] = c.key
	}
	t.Cleanup(func() { s.deleteNamespaces(cons) })
	s.watchPods(ctx, keyOf)
	waitOddSecond()
	for _, c := range cons {
		s.create(ctx, c, podURL(s.lockR), podURL(s.auditR))
	}
	start := time.Now()

	// 3. The host loop, the "VM crontab": lockwrap through the proxies, for each instant.
	sched, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse(cfg.schedule)
	if err != nil {
		t.Fatal(err)
	}
	stopHost := make(chan struct{})
	var hostWG sync.WaitGroup
	hostWG.Add(1)
	go func() { defer hostWG.Done(); s.hostLoop(sched, start, stopHost, &hostWG) }()

	// 4. Faults, from the seeded plan, each in its own goroutine so that they overlap.
	plan := PlanFaults(cfg.seed, cfg.duration, ttl)
	var injected []Fault
	s.faultsEnd = start.Add(cfg.duration - 30*time.Second)
	var faultWG sync.WaitGroup
	for _, f := range plan {
		if f.Kind == FaultAPIServerRestart && !cfg.apiserverFaults {
			continue
		}
		injected = append(injected, f)
		faultWG.Add(1)
		go func() {
			defer faultWG.Done()
			time.Sleep(time.Until(start.Add(f.At)))
			s.inject(ctx, f)
		}()
	}
	time.Sleep(time.Until(start.Add(cfg.duration)))
	faultWG.Wait() // every fault healed (the plan ends 30 s before the end)
	t.Logf("soak: %v elapsed; suspending", time.Since(start).Round(time.Second))

	// 5. Stop: suspend every LockedCronJob between two occurrences, stop the host loop at
	// the same instant, let everything finish and be counted.
	waitStopSecond()
	for _, c := range cons {
		s.suspend(ctx, c.ns)
	}
	close(stopHost)
	hostWG.Wait()
	s.settle(ctx, cons)
	t.Logf("soak: %d pods held until their last state was recorded, %d of them let go once deleted", s.held.Load(), s.released.Load())

	// 6. Check.
	h := s.history(ctx, cons)
	res := checker.Check(h, 2*time.Minute)
	s.writeResult(res, h, plan)
	s.expectWorkDone(res)
	s.mu.Lock()
	if missing := FaultsMissing(injected, s.faults); len(missing) > 0 {
		t.Errorf("faults that never found anything to hit: %s: the soak did not exercise them", strings.Join(missing, ", "))
	}
	s.mu.Unlock()
	if !res.OK() {
		html := filepath.Join(cfg.out, "history.html")
		if err := res.WriteVisualization(html); err != nil {
			t.Errorf("visualization: %v", err)
		}
		for _, v := range res.Violations {
			t.Errorf("violation: %v", v)
		}
		t.Errorf("%d violations (seed %d); porcupine's view of the history: %s", len(res.Violations), cfg.seed, html)
	}
}

func (s *soak) connect() {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		s.t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		s.t.Fatal(err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	if s.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		s.t.Fatal(err)
	}
	if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		s.t.Fatal(err)
	}
}

// waitOddSecond sleeps until 300 ms past an odd second: no occurrence of an even-second
// schedule (*/2, */4) is at the second a change is stamped with (managed fields have
// second precision), so each side of it is unambiguous.
func waitOddSecond() {
	now := time.Now()
	next := now.Truncate(time.Second).Add(time.Second)
	if next.Unix()%2 == 0 {
		next = next.Add(time.Second)
	}
	time.Sleep(time.Until(next.Add(300 * time.Millisecond)))
}

// waitStopSecond sleeps until 300 ms past second 37 of a minute, an odd second (see
// waitOddSecond) inside the blackout key's window (:30 for 10 s), after :32 was deferred
// and then superseded by :36: the suspension meets a deferred occurrence (it once counted
// the superseded one twice).
func waitStopSecond() {
	now := time.Now()
	next := now.Truncate(time.Minute).Add(37 * time.Second)
	if !next.After(now) {
		next = next.Add(time.Minute)
	}
	time.Sleep(time.Until(next.Add(300 * time.Millisecond)))
}

func (s *soak) create(ctx context.Context, c contender, lockURL, auditURL string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "redis", Namespace: c.ns}, StringData: map[string]string{"url": lockURL}}
	job := &v1alpha1.LockedCronJob{
		ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: c.ns},
		Spec: v1alpha1.LockedCronJobSpec{
			Schedule:                   c.schedule,
			StartingDeadlineSeconds:    ptr.To[int64](deadline),
			SuccessfulRunsHistoryLimit: ptr.To[int32](30),
			FailedRunsHistoryLimit:     ptr.To[int32](30),
			Lock: v1alpha1.LockSpec{Key: c.key, TTL: &metav1.Duration{Duration: ttl}, RenewInterval: &metav1.Duration{Duration: renew},
				KillGracePeriod: &metav1.Duration{Duration: killGrace}, Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}},
			Contention: v1alpha1.ContentionSpec{Policy: c.policy},
			Blackout:   c.blackout,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{
					Name: "job", Image: "k8s.local/lockedcron-e2e-job:dev", ImagePullPolicy: corev1.PullNever,
					Command: []string{"/usr/local/bin/e2e-job", "--sleep=" + c.sleep, "--sleep-max=" + c.sleepMax,
						"--fail-percent=15", "--label=" + c.key, "--termination-log=/dev/null"},
					Env: []corev1.EnvVar{
						{Name: "E2E_REDIS_URL", Value: auditURL},
						{Name: "E2E_SEED", Value: strconv.FormatInt(s.cfg.seed, 10)},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					},
				}},
			}},
		},
	}
	if c.prepareAhead > 0 {
		job.Spec.PrepareAheadSeconds = ptr.To(c.prepareAhead)
	}
	if c.policy == v1alpha1.ContentionRetry {
		job.Spec.Contention.Retry = &v1alpha1.RetrySpec{Attempts: 8, Backoff: &metav1.Duration{Duration: 500 * time.Millisecond},
			MaxBackoff: &metav1.Duration{Duration: 2 * time.Second}}
	}
	for _, o := range []client.Object{ns, sec, job} {
		if err := s.k8s.Create(ctx, o); err != nil {
			s.t.Fatalf("create %s %s: %v (a namespace left from an earlier soak? delete soak-* namespaces)", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
}

func (s *soak) deleteNamespaces(cons []contender) {
	ctx := context.Background()
	for _, c := range cons {
		_ = s.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}})
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range cons {
			if err := s.k8s.Get(ctx, types.NamespacedName{Name: c.ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				s.releasePods(ctx, c.ns)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Errorf("soak namespaces not gone after 3 min: %v", err)
	}
}

// finalizerObserved is the soak's own finalizer on its pods: a pod stays until the soak
// has seen its last state. Without it, a pod that finished and was deleted while the
// informer's watch was down (a kube-apiserver restart, and the reflector's backoff after
// it) reached the informer only as a deletion with the last state it had seen, and its
// report was never recorded (the 40-minute soak of seed 151716392, docs/reliability.md).
const finalizerObserved = "soak.lockedcron.io/observed"

// watchPods records every soak pod's report (its termination message) as it finishes: the
// controller deletes pods beyond the history limits, and faults delete pods too. It holds
// each pod with finalizerObserved from the first time it sees it until the pod is deleted
// and the controller has counted it (its tracking finalizer gone): its status is final
// then, and recorded before the pod may go.
func (s *soak) watchPods(ctx context.Context, keyOf map[string]string) {
	f := informers.NewSharedInformerFactoryWithOptions(s.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = runpod.LabelJob + "=" + jobName
	}))
	inf := f.Core().V1().Pods().Informer()
	see := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				pod, _ = d.Obj.(*corev1.Pod)
			}
		}
		if pod == nil || keyOf[pod.Namespace] == "" {
			return
		}
		if d, ok, withdrawn := decisionOf(pod, keyOf[pod.Namespace]); ok {
			s.mu.Lock()
			s.decisions[pod.Namespace+"/"+pod.Name] = d
			s.mu.Unlock()
		} else if withdrawn.Holder != "" {
			// Its lockwrap may have taken the lock before the kubelet's SIGTERM (the
			// instant passed as the pod was withdrawn) and let it go unstarted: a skip
			// behind it is behind a holder that was there.
			s.mu.Lock()
			if !slices.Contains(s.deleted, withdrawn) {
				s.deleted = append(s.deleted, withdrawn)
			}
			s.mu.Unlock()
		}
		s.holdPod(ctx, pod)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }, DeleteFunc: see})
	stop := make(chan struct{})
	s.t.Cleanup(func() { close(stop) })
	f.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		s.t.Fatal("pod informer did not sync")
	}
}

// holdPod adds finalizerObserved to a live pod that lacks it, and removes it from a
// deleted pod the controller has counted (after see recorded its last state). Strategic
// merge patches: finalizers merge as a set, so neither side's patch undoes the other's.
func (s *soak) holdPod(ctx context.Context, pod *corev1.Pod) {
	held := slices.Contains(pod.Finalizers, finalizerObserved)
	var patch string
	switch {
	case pod.DeletionTimestamp == nil && !held:
		patch = `{"metadata":{"finalizers":["` + finalizerObserved + `"]}}`
	case pod.DeletionTimestamp != nil && held && !slices.Contains(pod.Finalizers, runpod.FinalizerTracking):
		patch = `{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + finalizerObserved + `"]}}`
	default:
		return
	}
	_, err := s.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	switch {
	case err == nil && pod.DeletionTimestamp == nil:
		s.held.Add(1)
	case err == nil:
		s.released.Add(1)
	case !apierrors.IsNotFound(err):
		// The next event about the pod (or releasePods at the end) tries again.
		s.t.Logf("soak: finalizer on pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// releasePods removes finalizerObserved from every pod still holding it (the pod
// informer stops before the namespaces are deleted).
func (s *soak) releasePods(ctx context.Context, ns string) {
	pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if slices.Contains(p.Finalizers, finalizerObserved) {
			_, _ = s.cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType,
				[]byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["`+finalizerObserved+`"]}}`), metav1.PatchOptions{})
		}
	}
}

// decisionOf reads a finished pod's report; withdrawn names the holder of a pod withdrawn
// ahead of its instant, whose report is no decision.
func decisionOf(pod *corev1.Pod, key string) (d checker.Decision, ok bool, withdrawn checker.Deleted) {
	name := pod.Annotations[runpod.AnnotationWrappedContainer]
	occ, err := time.Parse(time.RFC3339, pod.Annotations[runpod.AnnotationScheduledTime])
	if err != nil {
		return checker.Decision{}, false, checker.Deleted{}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != name || cs.State.Terminated == nil || cs.State.Terminated.Message == "" {
			continue
		}
		rep, err := report.Decode([]byte(cs.State.Terminated.Message))
		if err != nil {
			return checker.Decision{}, false, checker.Deleted{}
		}
		d := fromReport(pod.Namespace, key, occ, rep)
		if _, ahead := pod.Annotations[runpod.AnnotationWithdrawnAhead]; ahead && !d.Ran() && rep.StartedAt == "" {
			// Withdrawn before its instant (prepareAheadSeconds; the soak's suspension at its
			// end), and its job did not start: no decision of its job. The controller
			// releases it uncounted and decides the occurrence as if it had never been.
			return checker.Decision{}, false, checker.Deleted{Key: key, Holder: rep.Holder}
		}
		return d, true, checker.Deleted{}
	}
	return checker.Decision{}, false, checker.Deleted{}
}

func fromReport(contender, key string, occ time.Time, rep report.Report) checker.Decision {
	return checker.Decision{Contender: contender, Key: key, Occurrence: occ, Outcome: rep.Outcome, Holder: rep.Holder,
		HeldBy: rep.HeldBy, Token: rep.FencingToken, ExitCode: rep.ExitCode, LockLost: rep.LockLost, Message: rep.Message}
}

// hostLoop runs lockwrap for each instant of the schedule after start, until stop.
func (s *soak) hostLoop(sched cron.Schedule, start time.Time, stop <-chan struct{}, wg *sync.WaitGroup) {
	dir := filepath.Join(s.cfg.out, "host")
	_ = os.MkdirAll(dir, 0o755)
	for at := sched.Next(start); ; at = sched.Next(at) {
		select {
		case <-stop:
			return
		case <-time.After(time.Until(at)):
		}
		select {
		case <-stop: // the LockedCronJobs were suspended before this instant
			return
		default:
		}
		s.mu.Lock()
		s.hostOccs = append(s.hostOccs, at)
		s.mu.Unlock()
		wg.Add(1)
		go func() { defer wg.Done(); s.hostRun(dir, at) }()
	}
}

func (s *soak) hostRun(dir string, at time.Time) {
	rep, ok := runHostLockwrap(s.t, hostLockwrap{
		lockwrap: s.cfg.lockwrap, job: s.cfg.job, dir: dir, redisURL: s.toxic.URL() + "/0", auditURL: s.auditR.URL() + "/0",
		key: mainKey, holder: hostName + "/" + strconv.FormatInt(at.Unix(), 10), contention: "skip", seed: s.cfg.seed,
		ttl: ttl, renew: renew, killGrace: killGrace,
	}, at, &s.mu, s.hostProcs)
	if !ok {
		return // no report: the checker names the occurrence
	}
	s.mu.Lock()
	s.decisions["host/"+strconv.FormatInt(at.Unix(), 10)] = fromReport(hostName, mainKey, at, rep)
	s.mu.Unlock()
}

// hostLockwrap is how a host contender runs lockwrap and the job.
type hostLockwrap struct {
	lockwrap, job, dir    string
	redisURL, auditURL    string
	key, holder           string
	contention            string
	extra                 []string // more lockwrap flags
	sleepMax              string   // the job's longest run (default 9s)
	seed                  int64
	ttl, renew, killGrace time.Duration
}

// runHostLockwrap runs lockwrap for occurrence at, its process group in groups (under mu)
// while it runs, and returns its report (false when it left none, or none that decodes).
func runHostLockwrap(t *testing.T, h hostLockwrap, at time.Time, mu *sync.Mutex, groups map[int]bool) (report.Report, bool) {
	occ := at.UTC().Format(time.RFC3339)
	rep := filepath.Join(h.dir, strconv.FormatInt(at.Unix(), 10)+".json")
	args := []string{"--redis-url", h.redisURL, "--key", h.key,
		"--ttl", h.ttl.String(), "--renew-interval", h.renew.String(), "--kill-grace", h.killGrace.String(),
		"--occurrence", occ, "--holder", h.holder, "--contention", h.contention, "--termination-log", rep}
	sleepMax := h.sleepMax
	if sleepMax == "" {
		sleepMax = "9s"
	}
	args = append(append(args, h.extra...), "--", h.job, "--sleep=300ms", "--sleep-max="+sleepMax, "--fail-percent=15",
		"--label="+h.key, "--termination-log=/dev/null")
	cmd := exec.Command(h.lockwrap, args...)
	// TMPDIR in the run's directory: a SIGKILLed lockwrap leaves its watermark directory
	// behind (in a pod it goes with the container), here it goes with the test's.
	cmd.Env = append(os.Environ(), "E2E_REDIS_URL="+h.auditURL, "E2E_SEED="+strconv.FormatInt(h.seed, 10), "POD_NAME="+h.holder, "TMPDIR="+h.dir)
	log, _ := os.Create(rep + ".log")
	if log != nil {
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Errorf("host lockwrap: %v", err)
		return report.Report{}, false
	}
	mu.Lock()
	groups[cmd.Process.Pid] = true
	mu.Unlock()
	_ = cmd.Wait()
	mu.Lock()
	delete(groups, cmd.Process.Pid)
	mu.Unlock()
	b, err := os.ReadFile(rep)
	if err != nil {
		return report.Report{}, false
	}
	r, err := report.Decode(b)
	return r, err == nil
}

func (s *soak) suspend(ctx context.Context, ns string) {
	var job v1alpha1.LockedCronJob
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: jobName}, &job); err != nil {
			return false, nil
		}
		patch := client.MergeFrom(job.DeepCopy())
		job.Spec.Suspend = ptr.To(true)
		return s.k8s.Patch(ctx, &job, patch, client.FieldOwner("soak")) == nil, nil
	})
	if err != nil {
		s.t.Fatalf("suspend %s: %v", ns, err)
	}
}

// settle waits until no pod of a soak job runs and every one is counted.
func (s *soak) settle(ctx context.Context, cons []contender) {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range cons {
			var job v1alpha1.LockedCronJob
			if err := s.k8s.Get(ctx, types.NamespacedName{Namespace: c.ns, Name: jobName}, &job); err != nil {
				last = err.Error()
				return false, nil
			}
			if job.Status.ActiveCount != 0 || job.Status.Deferred != nil {
				last = fmt.Sprintf("%s: active %d, deferred %v", c.ns, job.Status.ActiveCount, job.Status.Deferred)
				return false, nil
			}
			var pods corev1.PodList
			if err := s.k8s.List(ctx, &pods, client.InNamespace(c.ns), client.MatchingLabels{runpod.LabelJob: jobName}); err != nil {
				return false, nil
			}
			marked := map[string]bool{}
			for _, p := range pods.Items {
				if p.Labels[runpod.LabelCounted] != "true" {
					last = fmt.Sprintf("pod %s/%s not counted", p.Namespace, p.Name)
					return false, nil
				}
				marked[p.Name] = true
			}
			// A counted pod's name stays in countedPods until the job's next status
			// write once its pod is marked; never for a pod unmarked or gone.
			for _, name := range job.Status.CountedPods {
				if !marked[name] {
					last = fmt.Sprintf("%s: countedPods names %s, not a pod marked counted", c.ns, name)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatalf("the soak jobs did not settle within 5 min: %s", last)
	}
}

// history gathers what the checker reads: the audit list, the reports, the counters and the
// occurrences each contender was due to decide.
func (s *soak) history(ctx context.Context, cons []contender) checker.History {
	var h checker.History
	entries, err := s.auditR.Client().LRange(ctx, audit.List, 0, -1).Result()
	if err != nil {
		s.t.Fatal(err)
	}
	recs, err := audit.Parse(entries)
	if err != nil {
		s.t.Fatal(err)
	}
	h.Executions = executions(s.t, recs)
	s.mu.Lock()
	for _, d := range s.decisions {
		h.Decisions = append(h.Decisions, d)
	}
	h.Contenders = append(h.Contenders, checker.Contender{Name: hostName, Key: mainKey, Scheduled: slices.Clone(s.hostOccs)})
	h.Kills = slices.Clone(s.kills)
	h.Deleted = slices.Clone(s.deleted)
	s.mu.Unlock()
	for _, c := range cons {
		var job v1alpha1.LockedCronJob
		if err := s.k8s.Get(ctx, types.NamespacedName{Namespace: c.ns, Name: jobName}, &job); err != nil {
			s.t.Fatal(err)
		}
		sched, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse(c.schedule)
		if err != nil {
			s.t.Fatal(err)
		}
		// The job's occurrences run from its creation to its suspension, and on to the
		// first one after it if the controller decided that one: a pass that started
		// just before the suspension reached its cache decides it (as every controller
		// acts on what it has seen), and it is the job's to account for. Any later
		// decision stays outside and shows as a violation.
		from, to := job.CreationTimestamp.Time, suspendedAt(&job)
		if last := job.Status.LastScheduleTime; last != nil && last.Time.Equal(sched.Next(to)) {
			to = last.Time
		}
		var occs []time.Time
		for at := sched.Next(from); !at.After(to); at = sched.Next(at) {
			occs = append(occs, at)
		}
		h.Contenders = append(h.Contenders, checker.Contender{Name: c.ns, Key: c.key, Scheduled: occs, Counters: ptr.To(job.Status.Counters),
			Blackout: job.Spec.Blackout != nil})
	}
	return h
}

// executions are the runs the audit records show.
func executions(t *testing.T, recs []audit.Record) []checker.Execution {
	var out []checker.Execution
	for _, r := range audit.Runs(recs) {
		occ, err := time.Parse(time.RFC3339, r.Occurrence)
		if err != nil {
			t.Fatalf("audit record with occurrence %q: %v", r.Occurrence, err)
		}
		e := checker.Execution{Key: r.Label, Occurrence: occ, Holder: r.Holder, Token: r.FencingToken, Start: r.Start, Exit: r.ExitCode}
		if r.Finished {
			e.End = r.End
		}
		out = append(out, e)
	}
	return out
}

// suspendedAt is when the soak set spec.suspend (its managed fields' time).
func suspendedAt(job *v1alpha1.LockedCronJob) time.Time {
	for _, mf := range job.ManagedFields {
		if mf.Manager == "soak" && mf.Subresource == "" && mf.Time != nil {
			return mf.Time.Time
		}
	}
	return time.Now()
}

// inject carries out one fault and heals it.
func (s *soak) inject(ctx context.Context, f Fault) {
	kind, note := f.Kind, ""
	switch f.Kind {
	case FaultHolderPodDeleted:
		// Wait (up to the end of the faults) for a moment a pod holds the lock.
		note = untilHit(s.faultsEnd, func() string { return s.deleteHolderPod(ctx) })
	case FaultJobKill9:
		note = untilHit(s.faultsEnd, s.killJob)
	case FaultLockwrapStopped:
		note = untilHit(s.faultsEnd, func() string { return s.stopHostLockwrap(max(f.For, ttl+time.Second)) })
	case FaultRedisRestart:
		s.redisMu.Lock()
		s.lockR.Restart()
		s.redisMu.Unlock()
		note = "lock Redis SIGKILLed and started (AOF)"
	case FaultRedisStall:
		s.redisMu.Lock()
		s.lockR.Pause()
		time.Sleep(f.For)
		s.lockR.Resume()
		s.redisMu.Unlock()
		note = fmt.Sprintf("lock Redis SIGSTOPped for %v", f.For)
	case FaultNetworkCut:
		s.proxy.Freeze()
		time.Sleep(f.For)
		s.proxy.Thaw()
		note = fmt.Sprintf("host loop's link to Redis frozen for %v", f.For)
	case FaultNetworkToxic:
		note = s.toxic.inject(f)
	case FaultOperatorDeleted:
		// Tried again until it lands: a kube-apiserver restart at the same time refuses it.
		note = untilHit(s.faultsEnd, func() string {
			err := s.cs.CoreV1().Pods("lockedcron-system").DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=lockedcron"})
			if err != nil {
				s.t.Logf("soak: operator-pod-deleted: %v (tried again)", err)
				return ""
			}
			return "operator pod deleted"
		})
	case FaultAPIServerRestart:
		// One restart at a time: two overlapping ones both stop the same kube-apiserver
		// and both start one; the second cannot bind its port, and the first outlives
		// the cluster's teardown (its pid file names the other).
		s.apiserverMu.Lock()
		defer s.apiserverMu.Unlock()
		out, err := exec.Command(filepath.Join(s.cfg.repo, "hack/soak.sh"), "restart-apiserver").CombinedOutput()
		if err != nil {
			s.t.Errorf("kube-apiserver restart: %v\n%s", err, out)
		}
		note = "kube-apiserver stopped and started"
	}
	if note == "" {
		return // nothing to hit until the end of the faults: not counted (and the soak fails if no fault of its kind landed)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[kind]++
	s.faultLog = append(s.faultLog, fmt.Sprintf("%s +%v %s: %s", time.Now().UTC().Format("15:04:05.000"), f.At, kind, note))
}

func (s *soak) deleteHolderPod(ctx context.Context) string {
	v, _ := s.lockRDB.Get(ctx, lock.LockKey(mainKey)).Result()
	_, holder, _ := strings.Cut(v, " ")
	parts := strings.Split(holder, "/") // <cluster>/<namespace>/<pod>/<pod uid>
	if len(parts) == 4 && strings.HasPrefix(parts[1], "soak-") {
		if err := s.cs.CoreV1().Pods(parts[1]).Delete(ctx, parts[2], metav1.DeleteOptions{}); err != nil {
			s.t.Logf("soak: holder-pod-deleted: deleting %s: %v", holder, err)
			return "" // not landed: tried again
		}
		s.mu.Lock()
		s.deleted = append(s.deleted, checker.Deleted{Key: mainKey, Holder: holder})
		s.mu.Unlock()
		return "deleted holder " + holder
	}
	return "" // the host loop holds it, or nobody
}

// killJob SIGKILLs a running job process of the main key (in a pod or on the host).
func (s *soak) killJob() string {
	run, note := killJobRun([]string{"/usr/local/bin/e2e-job", s.cfg.job}, mainKey, s.t.Logf)
	if run != nil {
		s.mu.Lock()
		s.kills = append(s.kills, *run)
		s.mu.Unlock()
	}
	return note
}

// stopHostLockwrap SIGSTOPs a running host lockwrap's process group (lockwrap and its job, a
// paused VM) for d, then SIGCONTs it.
func (s *soak) stopHostLockwrap(d time.Duration) string {
	return stopOneGroup(&s.mu, s.hostProcs, d)
}

// stopOneGroup SIGSTOPs one of the process groups in groups (read under mu) for d, then
// SIGCONTs it; "" when there was none to stop.
func stopOneGroup(mu *sync.Mutex, groups map[int]bool, d time.Duration) string {
	mu.Lock()
	var pgid int
	for p := range groups {
		pgid = p
	}
	mu.Unlock()
	if pgid == 0 {
		return ""
	}
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		return ""
	}
	time.Sleep(d)
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	return fmt.Sprintf("host lockwrap group %d stopped for %v", pgid, d)
}

// expectWorkDone fails a soak that proved nothing: fewer contended occurrences of the main
// key than SOAK_MIN_OCCURRENCES, or a key on which hardly anything ran (a broken setup
// — pods that never start, a Redis nobody reaches — has no violations either).
func (s *soak) expectWorkDone(res checker.Result) {
	minOcc, err := MinOccurrences()
	if err != nil {
		s.t.Error(err)
	}
	for _, k := range res.Keys {
		if k.Key == mainKey && k.Scheduled < minOcc {
			s.t.Errorf("%s: %d contended occurrences, want at least %d (SOAK_MIN_OCCURRENCES)", k.Key, k.Scheduled, minOcc)
		}
		switch {
		case k.Executed == 0:
			s.t.Errorf("%s: nothing ran in %d occurrences: the soak did not exercise the lock (pods never started? Redis unreachable?)", k.Key, k.Scheduled)
		case k.Key == mainKey && k.Executed*10 < k.Scheduled:
			s.t.Errorf("%s: only %d of %d occurrences ran: the soak hardly exercised the lock", k.Key, k.Executed, k.Scheduled)
		case k.Key == blackoutKey && k.Blackout == 0:
			// The blackout key exists to exercise blackout decisions (a window opens every
			// minute) next to runs. Its runs are few by design: its pods queue for the
			// node behind the main key's, and an occurrence whose predecessor has not
			// started is missed (the backlog bound), so no share of runs is asked of it.
			s.t.Errorf("%s: no occurrence held by a blackout window in %d: the soak did not exercise blackouts", k.Key, k.Scheduled)
		}
	}
	if len(res.Keys) != 2 {
		s.t.Errorf("keys in the history: %d, want 2 (%s, %s)", len(res.Keys), mainKey, blackoutKey)
	}
}

// summary is what the soak prints and writes to result.json.
type summary struct {
	Seed       int64               `json:"seed"`
	Duration   string              `json:"duration"`
	Schedule   string              `json:"schedule"`
	Keys       []checker.KeyStats  `json:"keys"`
	Faults     map[FaultKind]int   `json:"faults"`
	Violations []checker.Violation `json:"violations"`
	FaultLog   []string            `json:"faultLog"`
}

func (s *soak) writeResult(res checker.Result, h checker.History, plan []Fault) {
	s.mu.Lock()
	sum := summary{Seed: s.cfg.seed, Duration: s.cfg.duration.String(), Schedule: s.cfg.schedule, Keys: res.Keys,
		Faults: s.faults, Violations: res.Violations, FaultLog: s.faultLog}
	s.mu.Unlock()
	writeResult(s.t, s.cfg.out, sum, h, FaultKinds)
}

// writeResult writes result.json, history.json and result.txt (the table, also printed)
// to out.
func writeResult(t *testing.T, out string, sum summary, h checker.History, kinds []FaultKind) {
	b, _ := json.MarshalIndent(sum, "", "  ")
	_ = os.WriteFile(filepath.Join(out, "result.json"), b, 0o644)
	hb, _ := json.MarshalIndent(h, "", " ")
	_ = os.WriteFile(filepath.Join(out, "history.json"), hb, 0o644)
	f, err := os.Create(filepath.Join(out, "result.txt"))
	if err != nil {
		t.Errorf("result.txt: %v", err)
		return
	}
	defer f.Close()
	printSummary(io.MultiWriter(os.Stdout, f), sum, kinds)
}

func printSummary(w io.Writer, sum summary, kinds []FaultKind) {
	fmt.Fprintf(w, "\nsoak result: seed %d, duration %s, schedule %q\n\n", sum.Seed, sum.Duration, sum.Schedule)
	fmt.Fprintln(w, "| key | scheduled | executed | runs (re-runs) | succeeded | failed | lock lost | skipped | suppressed | blackout | missed | interrupted | errors | fenced overlaps | re-runs after a lost holder's success | re-runs after a kill past the end record |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range sum.Keys {
		fmt.Fprintf(w, "| %s | %d | %d | %d (%d) | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", k.Key, k.Scheduled, k.Executed,
			k.Executions, k.Reruns, k.Succeeded, k.Failed, k.LockLost, k.Skipped, k.Suppressed, k.Blackout, k.Missed, k.Interrupted, k.Errors, k.FencedOverlaps, k.LostHolderReruns,
			k.KilledReruns)
	}
	fmt.Fprintln(w, "\n| fault | injected |\n|---|---|")
	for _, k := range kinds {
		fmt.Fprintf(w, "| %s | %d |\n", k, sum.Faults[k])
	}
	fmt.Fprintf(w, "\nviolations: %d\n", len(sum.Violations))
	for _, v := range sum.Violations {
		fmt.Fprintf(w, "  %v\n", v)
	}
}
