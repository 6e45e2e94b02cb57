package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// The integration suite runs the reconciler in a real manager against a real
// kube-apiserver and etcd (envtest; `make test` builds them from Go modules and sets
// KUBEBUILDER_ASSETS) and a real redis-server. envtest runs no kubelet: tests finish
// pods by writing their status, termination message included.

// rarely is a schedule that does not fire while a spec runs, for specs whose pods are
// their own: yearly, on the 1st of the month five or six months from the run. ("0 0 1 1 *"
// fired, and gave a pending pod to count, in a spec that ran across New Year's midnight.)
var rarely = fmt.Sprintf("0 0 1 %d *", (int(time.Now().UTC().Month())+5)%12+1)

var (
	cfg       *rest.Config
	k8sClient client.Client
	testEnv   *envtest.Environment
	scheme    = runtime.NewScheme()
	redisSrv  *redistest.Server
	ctx       context.Context
	cancel    context.CancelFunc
	nsCounter atomic.Int32
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	// Waits end as soon as their condition holds; the ceiling only matters on a loaded
	// machine, where a manager's first pass over earlier specs' jobs can take seconds
	// (Gomega's default of 1s made specs fail under load, never a wrong controller).
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "Controller Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(), "run through `make test`, which builds kube-apiserver and etcd and sets KUBEBUILDER_ASSETS")

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	redisSrv = redistest.Start(GinkgoTB())
})

// Every spec leaves its jobs suspended. envtest runs no namespace controller, so a spec's
// jobs outlive it, and every later spec's manager would go on running their occurrences
// (some every second, their pods never started, each counted missed): passes that later
// specs time would queue behind them on a loaded machine.
var _ = AfterEach(func() {
	var jobs v1alpha1.LockedCronJobList
	Expect(k8sClient.List(ctx, &jobs)).To(Succeed())
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if ptr.Deref(j.Spec.Suspend, false) || j.DeletionTimestamp != nil {
			continue
		}
		Expect(client.IgnoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var out v1alpha1.LockedCronJob
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(j), &out); err != nil {
				return err
			}
			out.Spec.Suspend = ptr.To(true)
			return k8sClient.Update(ctx, &out)
		}))).To(Succeed(), "suspending %s/%s", j.Namespace, j.Name)
	}
})

var _ = AfterSuite(func() {
	cancel()
	Expect(testEnv.Stop()).To(Succeed())
})

// startManager runs a manager with the reconciler until the returned stop is called.
// Each test runs its own, so that it can stop and restart it, or run two at once.
func startManager(clk clock.PassiveClock) (stop func()) {
	return startManagerWith(clk, CacheOptions())
}

// startManagerWith is startManager with the manager's cache options (--watch-namespaces).
func startManagerWith(clk clock.PassiveClock, cacheOpts cache.Options) (stop func()) {
	return startManagerWrapped(clk, cacheOpts, nil)
}

// startManagerWrapped is startManagerWith whose reconciler's client is wrap(the manager's
// client) (nil: unwrapped): a spec can make the cache lag, or a call fail.
func startManagerWrapped(clk clock.PassiveClock, cacheOpts cache.Options, wrap func(client.Client) client.Client) (stop func()) {
	return startManagerOn(cfg, clk, cacheOpts, wrap, nil)
}

// startManagerOn is startManagerWrapped talking to the API server at restCfg, its
// reconciler changed by tune (nil: as is) before it is set up.
func startManagerOn(restCfg *rest.Config, clk clock.PassiveClock, cacheOpts cache.Options, wrap func(client.Client) client.Client, tune func(*LockedCronJobReconciler)) (stop func()) {
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheOpts,
		Controller:             ctrlConfig(),
	})
	Expect(err).NotTo(HaveOccurred())
	c := mgr.GetClient()
	if wrap != nil {
		c = wrap(c)
	}
	r := &LockedCronJobReconciler{
		Client: c,
		Clock:  clk,
		Pod:    runpod.Options{ClusterName: "test", WrapperImage: "k8s.local/lockedcron:dev", WrapperImagePullPolicy: corev1.PullNever},
		// Specs change Secrets and wait for the condition to follow: read and probe often.
		SecretTTL: 2 * time.Second, ProbeInterval: time.Second,
	}
	if tune != nil {
		tune(r)
	}
	Expect(r.SetupWithManager(mgr)).To(Succeed())
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		mcancel()
		Eventually(done, 30*time.Second).Should(BeClosed())
		r.Close()
	}
	DeferCleanup(stop)
	return stop
}

// newNamespace makes a fresh namespace holding a Secret "redis" for the suite's Redis.
func newNamespace() string {
	ns := fmt.Sprintf("t%d", nsCounter.Add(1))
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis"},
		StringData: map[string]string{"url": redisSrv.URL()},
	})).To(Succeed())
	return ns
}

// newJob is a LockedCronJob as a user writes it (defaults come from the API server).
func newJob(ns, name, sched string) *v1alpha1.LockedCronJob {
	return &v1alpha1.LockedCronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.LockedCronJobSpec{
			Schedule: sched,
			Lock:     v1alpha1.LockSpec{Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "job", Image: "busybox", Command: []string{"/bin/sh", "-c", "echo hi"}}},
			}},
		},
	}
}

// dailyAt is a 6-field schedule that fires once a day at t's second (UTC).
func dailyAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d %d * * *", t.Second(), t.Minute(), t.Hour())
}

// createBefore creates job, whose schedule fires at at, and stops the spec if the API
// server stamped its creation at or after at. A job never runs an occurrence at or before
// its creation (creationTimestamp, in whole seconds), so on a machine too loaded to create
// it in time the spec would otherwise wait for a pod that is rightly never created, and
// its timeout would read like a controller that stalled.
func createBefore(job *v1alpha1.LockedCronJob, at time.Time) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, job)).To(Succeed())
	Expect(job.CreationTimestamp.Time).To(BeTemporally("<", at),
		"job %s/%s was created at %s, not before its occurrence %s: the machine is too slow for this spec's margin",
		job.Namespace, job.Name, job.CreationTimestamp.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
}

func getJob(j *v1alpha1.LockedCronJob) *v1alpha1.LockedCronJob {
	var out v1alpha1.LockedCronJob
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKeyFromObject(j), &out)).To(Succeed())
	return &out
}

// updateJob changes a job's spec the way a user would, retrying when the controller's
// status write got there first (spec and status share the resourceVersion).
func updateJob(j *v1alpha1.LockedCronJob, mutate func(*v1alpha1.LockedCronJob)) *v1alpha1.LockedCronJob {
	var out v1alpha1.LockedCronJob
	ExpectWithOffset(1, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(j), &out); err != nil {
			return err
		}
		mutate(&out)
		return k8sClient.Update(ctx, &out)
	})).To(Succeed())
	return &out
}

func podsOf(j *v1alpha1.LockedCronJob) []corev1.Pod {
	var pods corev1.PodList
	ExpectWithOffset(1, k8sClient.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{runpod.LabelJob: j.Name})).To(Succeed())
	return pods.Items
}

// unmarkedCounted returns the names in the job's status.countedPods whose pods are not
// labelled counted: counted pods the controller has yet to mark. (A marked pod's name
// stays until the job's next status write: deferral.go.)
func unmarkedCounted(j *v1alpha1.LockedCronJob) []string {
	var out []string
	for _, name := range getJob(j).Status.CountedPods {
		var p corev1.Pod
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: name}, &p)
		if err != nil || p.Labels[runpod.LabelCounted] != "true" {
			out = append(out, name)
		}
	}
	return out
}

// finishPod writes the status a kubelet would: the wrapped container terminated with
// the given termination message.
func finishPod(pod *corev1.Pod, phase corev1.PodPhase, exitCode int32, message string) {
	// Retried on a conflict, as a kubelet's status update is: the controller may note
	// something on the pod (a withdrawal's annotation) between the read and the write.
	ExpectWithOffset(1, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p corev1.Pod
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		now := metav1.Now()
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name:  p.Spec.Containers[0].Name,
			Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Message: message, Reason: "Completed", StartedAt: now, FinishedAt: now,
			}},
		}}
		return k8sClient.Status().Update(ctx, &p)
	})).To(Succeed())
}

// createPodFor creates, as the controller would, the pod of an occurrence (tests that
// need many finished pods at chosen times create them directly).
func createPodFor(j *v1alpha1.LockedCronJob, occurrence time.Time) *corev1.Pod {
	pod, err := runpod.Build(getJob(j), occurrence, runpod.Options{ClusterName: "test", WrapperImage: "w"})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, k8sClient.Create(ctx, pod)).To(Succeed())
	return pod
}

func eventReasons(j *v1alpha1.LockedCronJob) []string {
	var list eventsv1.EventList
	ExpectWithOffset(1, k8sClient.List(ctx, &list, client.InNamespace(j.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == j.Name && e.Regarding.Kind == "LockedCronJob" {
			out = append(out, e.Reason)
		}
	}
	return out
}

func eventNotes(j *v1alpha1.LockedCronJob, reason string) []string {
	var out []string
	for _, e := range eventsAbout(j, reason) {
		out = append(out, e.Note)
	}
	return out
}

// eventsAbout lists the Events of a reason about a job.
func eventsAbout(j *v1alpha1.LockedCronJob, reason string) []eventsv1.Event {
	var list eventsv1.EventList
	ExpectWithOffset(2, k8sClient.List(ctx, &list, client.InNamespace(j.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == j.Name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// ctrlConfig lets several managers in one test process register the same controller.
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}
