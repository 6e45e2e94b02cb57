package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestClockBehindKeepsDecidedOccurrence: a pass whose clock reads before an occurrence
// status has already decided (lastScheduleTime: an NTP step back, a new leader on a node
// whose clock is slower) does not take that occurrence's pod for a prepared one. It used to
// withdraw it as "no longer the next occurrence" (or "suspended"): a running job was
// stopped, and a pod that had not started was released uncounted while no later pass came
// back to its occurrence, neither run nor counted.
func TestClockBehindKeepsDecidedOccurrence(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at.Add(time.Second))}}}}}
	unscheduled := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	for _, c := range []struct {
		name    string
		status  corev1.PodStatus
		node    string
		suspend bool
	}{
		{"its job running", running, "node-1", false},
		{"not started (unschedulable)", unscheduled, "", false},
		{"its job running, the job suspended", running, "node-1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := newJob("ns", "j", "* * * * *")
			job.Spec.TimeZone = "UTC"
			job.UID, job.Generation, job.CreationTimestamp = "uid-1", 1, metav1.NewTime(at.Add(-24*time.Hour))
			job.Spec.Suspend = ptr.To(c.suspend)
			job.Status.ObservedSchedule = fmt.Sprintf("%s|%s|suspend=%t", job.Spec.Schedule, job.Spec.TimeZone, c.suspend)
			job.Status.LastScheduleTime = &metav1.Time{Time: at} // decided: its start was news
			pod, err := runpod.Build(job, at, runpod.Options{ClusterName: "c", WrapperImage: "w"})
			if err != nil {
				t.Fatal(err)
			}
			pod.CreationTimestamp, pod.Spec.NodeName, pod.Status = metav1.NewTime(at), c.node, c.status

			s := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			if err := v1alpha1.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			cl := fake.NewClientBuilder().WithScheme(s).WithObjects(pod).Build()
			r := &LockedCronJobReconciler{Client: cl, APIReader: cl, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}

			// A pass 5 s before the occurrence on its clock: track, catch up, schedule.
			p := &pass{job: job, status: job.Status.DeepCopy(), now: at.Add(-5 * time.Second), log: logr.Discard()}
			var pods corev1.PodList
			if err := cl.List(context.Background(), &pods, client.InNamespace(job.Namespace)); err != nil {
				t.Fatal(err)
			}
			p.track(pods.Items)
			p.catchUp(p.standing(pods.Items), time.Time{}, nil)
			for i := range pods.Items {
				p.seen = append(p.seen, pods.Items[i].Name)
			}
			r.schedule(context.Background(), p, nil)
			for _, w := range p.withdrawn {
				t.Errorf("pod %s of the decided occurrence %s withdrawn: %q", w.pod.Name, at.Format(time.RFC3339), w.why)
			}
			if !p.status.LastScheduleTime.Time.Equal(at) {
				t.Errorf("lastScheduleTime %s, want %s", p.status.LastScheduleTime.Time, at)
			}
		})
	}
}
