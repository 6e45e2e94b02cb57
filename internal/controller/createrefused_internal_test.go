package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestRefusedPodCreateIsTriedAgainWithinTheDeadline: a pod POST refused for now — a
// namespace's ResourceQuota used up at the top of the hour, API throttling that outlasts
// client-go's retries — leaves the occurrence due until its deadline, and the pass comes
// back for it. It was taken for an invalid template: no pass came back before the next
// occurrence (an hour here), which then counted this one missed. A pod the API server
// finds invalid is not tried again until something changes.
func TestRefusedPodCreateIsTriedAgainWithinTheDeadline(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		name   string
		err    error
		retry  bool
		reason string
	}{
		{"quota", apierrors.NewForbidden(gr, "j-x", errString("exceeded quota: compute, requested: cpu=1, used: cpu=4, limited: cpu=4")), true, ReasonPodCreateRefused},
		{"throttled", apierrors.NewTooManyRequests("the server has received too many requests", 1), true, ReasonPodCreateRefused},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "j-x", field.ErrorList{field.Invalid(field.NewPath("spec", "containers").Index(0).Child("image"), "", "required")}), false, ReasonInvalidTemplate},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := passJob("0 * * * *", false)
			job.Spec.StartingDeadlineSeconds = ptr.To(int64(600))
			// The next occurrence is within prepare-ahead: it is not prepared while this
			// one is refused (its pod would make this one a backlog miss).
			job.Spec.PrepareAheadSeconds = ptr.To(int32(3600))
			job.Status.LastScheduleTime = &metav1.Time{Time: passAt.Add(-time.Hour)}
			cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if pod, ok := obj.(*corev1.Pod); ok && pod.Name == runpod.Name(job.Name, passAt) {
						return c.err // the due occurrence's; the next one's would pass
					}
					return cl.Create(ctx, obj, opts...)
				},
			}).Build()
			r := testReconciler(cl)
			p := passWith(t, r, job, passAt.Add(time.Second))
			cond := meta.FindStatusCondition(p.status.Conditions, ConditionReady)
			if cond == nil || cond.Reason != c.reason {
				t.Errorf("Ready %+v, want reason %s", cond, c.reason)
			}
			if p.status.Counters.Missed != 0 {
				t.Errorf("missed %d: the occurrence is still due", p.status.Counters.Missed)
			}
			var pods corev1.PodList
			if err := cl.List(context.Background(), &pods); c.retry && (err != nil || len(pods.Items) != 0) {
				t.Errorf("pods %d (%v): the next occurrence was prepared while this one is refused", len(pods.Items), err)
			}
			soon := p.requeue > 0 && p.requeue <= time.Minute
			if soon != c.retry {
				t.Errorf("next pass in %s; want one within a minute: %v (the deadline is 10 min, the next occurrence an hour away)", p.requeue, c.retry)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestOneUnsurePOSTPerPass: a pass whose due pod POST's answer was lost (the pod stored,
// kube-apiserver restarting) did not stop there: it prepared the next occurrence, whose
// POST failed too (connection refused: not stored). The manager keeps one doubt per job,
// and the second replaced the first: a pass after the next instant, its pod cache not
// yet showing the stored pod, counted the due occurrence missed while its pod ran it.
// Nothing more is created in a pass after a lost answer; the next pass asks first.
func TestOneUnsurePOSTPerPass(t *testing.T) {
	job := passJob("* * * * *", false)
	job.Spec.PrepareAheadSeconds = ptr.To(int32(60))
	job.Status.LastScheduleTime = &metav1.Time{Time: passAt.Add(-time.Minute)}
	api := fakeAPI(t)
	posts := 0
	cache := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			posts++
			if posts == 1 {
				if err := api.Create(ctx, obj, opts...); err != nil {
					t.Fatal(err)
				}
				return errString("http2: client connection lost")
			}
			return errString("dial tcp 10.0.0.1:6443: connect: connection refused")
		},
	}).Build()
	r := &LockedCronJobReconciler{Client: cache, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}
	p1 := passWith(t, r, job, passAt.Add(500*time.Millisecond))
	if occ, ok := r.decided.unsureOf(job); !ok || !occ.Equal(passAt) {
		t.Errorf("after %d POSTs the doubt is about %v (%v), want the due occurrence %s", posts, occ, ok, passAt.Format(time.RFC3339))
	}
	job.Status = *p1.status
	p2 := passWith(t, r, job, passAt.Add(90*time.Second))
	if n := p2.status.Counters.Missed; n != 0 {
		t.Errorf("occurrence %s counted missed (%d) while its pod exists: %+v", passAt.Format(time.RFC3339), n, p2.status.Recent)
	}
}

// TestNameFreedBetweenPOSTAndReadStaysDue: the due occurrence's POST finds its name taken
// by another's pod (an earlier job's of this name, which the garbage collector deletes),
// and that pod is gone by the time the pass reads it. The name is free: the occurrence
// stays due and the pass comes back for it. It was taken for one this job had started —
// no pod made, never run, never counted (the envtest "runs an occurrence the old job had
// prepared a pod for" failed so under load).
func TestNameFreedBetweenPOSTAndReadStaysDue(t *testing.T) {
	job := passJob("0 * * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: passAt.Add(-time.Hour)}
	name := runpod.Name(job.Name, passAt)
	taken := true
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Name == name && taken {
				taken = false // deleted right after this answer
				return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, name)
			}
			return cl.Create(ctx, obj, opts...)
		},
	}).Build()
	r := testReconciler(cl)
	p := passWith(t, r, job, passAt.Add(time.Second))
	if lst := p.status.LastScheduleTime; lst != nil && !lst.Time.Before(passAt) {
		t.Errorf("lastScheduleTime %v: the occurrence taken for started, with no pod", lst)
	}
	if p.requeue <= 0 || p.requeue > 5*time.Second {
		t.Errorf("next pass in %s, want one within seconds: the name is free", p.requeue)
	}
	job.Status = *p.status
	p = passWith(t, r, job, passAt.Add(2*time.Second))
	var pod corev1.Pod
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: name}, &pod); err != nil {
		t.Errorf("the occurrence's pod not made once its name was free: %v", err)
	}
}
