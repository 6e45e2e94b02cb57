package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestRunToldOnceWhenAStatusAnswerIsLost: a pass counts a finished pod and writes status;
// the write lands, but its answer is lost (a connection reset, a timeout while
// kube-apiserver restarts). The next pass reads the pod's name in status.countedPods and
// settles it without counting it again, so the run's Event and its lockedcron_runs_total
// increment, due once the status was written, were never made (helper-78). Whatever
// became of the write, the run is told once: by the pass after it when it landed, by
// the pass that counts the pod again when it did not; and no pass decides from the job as
// it was before a write that landed (the job cache behind it), as none does after a write
// whose answer came (decided).
func TestRunToldOnceWhenAStatusAnswerIsLost(t *testing.T) {
	for _, c := range []struct {
		name   string
		job    string
		landed bool // the write whose answer is lost was stored
		behind bool // the next pass reads the job from before that write (then the cache catches up)
	}{
		{"the write landed", "landed", true, false},
		{"the write landed, the next pass reads the job from before it", "landed-behind", true, true},
		{"the write did not land", "not-landed", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			t1 := passAt
			job := passJob("* * * * *", false)
			job.Name = c.job // a series of lockedcron_runs_total of its own
			job.Status.LastScheduleTime = &metav1.Time{Time: t1}
			pod := succeededPod(t, job, t1)

			lose := true // the first status write's answer
			var stale *v1alpha1.LockedCronJob
			staleReads := 0
			conflicts := 0 // status writes of passes that read the job from before a write
			api := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(job, pod).
				WithStatusSubresource(&v1alpha1.LockedCronJob{}).WithIndex(&corev1.Pod{}, ownerIndex, ownerIndexOf).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if j, ok := obj.(*v1alpha1.LockedCronJob); ok && stale != nil && staleReads > 0 {
							staleReads--
							stale.DeepCopyInto(j)
							return nil
						}
						return cl.Get(ctx, key, obj, opts...)
					},
					SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
						j, ok := obj.(*v1alpha1.LockedCronJob)
						if !ok || !lose {
							err := cl.Status().Update(ctx, obj, opts...)
							if apierrors.IsConflict(err) {
								conflicts++
							}
							return err
						}
						lose = false
						if c.behind {
							stale = &v1alpha1.LockedCronJob{}
							if err := cl.Get(ctx, client.ObjectKeyFromObject(j), stale); err != nil {
								return err
							}
							staleReads = 1
						}
						if c.landed {
							if err := cl.Status().Update(ctx, j.DeepCopy(), opts...); err != nil {
								return err
							}
						}
						return errors.New("http2: client connection lost")
					},
				}).Build()
			rec := events.NewFakeRecorder(100)
			h, _ := newTestHealth(t, "redis://127.0.0.1:1", time.Now)
			clk := clocktesting.NewFakeClock(t1.Add(5 * time.Second))
			r := &LockedCronJobReconciler{Client: api, APIReader: api, Clock: clk, health: h, Recorder: rec, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}
			runs := func() float64 {
				return runsTotal(t, job.Namespace, job.Name, "Succeeded")
			}
			before := runs()

			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err == nil {
				t.Fatal("the pass whose status answer was lost returned no error")
			}
			for range 3 {
				clk.Step(time.Second)
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
					t.Fatal(err)
				}
			}

			if c.behind && (stale == nil || staleReads != 0) {
				t.Fatal("no pass read the job from before the write")
			}
			if conflicts != 0 {
				// Its decisions made again, from before what the lost answer's write
				// decided (a pod started for an occurrence that write skipped).
				t.Errorf("%d passes decided from the job as it was before a write that landed", conflicts)
			}
			var cur corev1.Pod
			if err := api.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
				t.Fatal(err)
			}
			if cur.Labels[runpod.LabelCounted] != "true" {
				t.Fatalf("the pod is not marked counted after the passes: labels %v", cur.Labels)
			}
			var got v1alpha1.LockedCronJob
			if err := api.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
				t.Fatal(err)
			}
			if n := got.Status.Counters.Succeeded; n != 1 {
				t.Errorf("status counts %d succeeded, want 1", n)
			}
			if n := runs() - before; n != 1 {
				t.Errorf("lockedcron_runs_total{outcome=Succeeded} went up by %v, want 1", n)
			}
			told := 0
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.Contains(e, " Succeeded ") {
					told++
				}
			}
			if told != 1 {
				t.Errorf("%d Succeeded Events for the run, want 1", told)
			}
		})
	}
}

// succeededPod is job's pod for occ, its job run and succeeded, not yet counted.
func succeededPod(t *testing.T, job *v1alpha1.LockedCronJob, occ time.Time) *corev1.Pod {
	t.Helper()
	pod, err := runpod.Build(job, occ, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Finalizers = []string{runpod.FinalizerTracking}
	pod.Spec.NodeName = "n1"
	pod.Status.Phase = corev1.PodSucceeded
	at := occ.Format(time.RFC3339)
	rep := `{"v":1,"outcome":"Succeeded","occurrence":"` + at + `","key":"` + runpod.LockKey(job) + `","holder":"h","fencingToken":7,"startedAt":"` + at + `","exitCode":0}`
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Annotations[runpod.AnnotationWrappedContainer], State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Message: rep, StartedAt: metav1.NewTime(occ.Add(-time.Second)), FinishedAt: metav1.NewTime(occ.Add(2 * time.Second))}}}}
	return pod
}

// runsTotal is lockedcron_runs_total for the job and outcome, as the metrics endpoint
// would serve it.
func runsTotal(t *testing.T, ns, name, outcome string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "lockedcron_runs_total" {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			want := map[string]string{"namespace": ns, "name": name, "outcome": outcome}
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
