package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

func TestPodEventsWakeOnlyOnWhatAPassReads(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "job-1", Namespace: "ns", Finalizers: []string{runpod.FinalizerTracking},
				Labels:          map[string]string{runpod.LabelJob: "job"},
				Annotations:     map[string]string{runpod.AnnotationWrappedContainer: "main"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "job", UID: "u", Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
	}
	running := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	cases := []struct {
		name   string
		before []func(*corev1.Pod)
		change func(*corev1.Pod)
		want   bool
	}{
		{"scheduled to a node", nil, func(p *corev1.Pod) {
			p.Spec.NodeName = "node"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}, false},
		{"init container running", nil, func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "lockwrap-install", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		}, false},
		{"resource version only", nil, func(p *corev1.Pod) { p.ResourceVersion = "2" }, false},
		{"the job started", nil, running, true},
		{"stuck pulling its image", nil, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		}, true},
		{"unschedulable", nil, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		}, true},
		{"finished", []func(*corev1.Pod){running}, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true},
		{"restarted in place", []func(*corev1.Pod){running}, func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 1 }, true},
		{"deleted", []func(*corev1.Pod){running}, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }, true},
		{"marked counted", nil, func(p *corev1.Pod) { p.Labels = map[string]string{runpod.LabelCounted: "true"} }, true},
		{"released", nil, func(p *corev1.Pod) { p.Finalizers = nil }, true},
		{"the job ended while another container runs on", []func(*corev1.Pod){running, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
		}}, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.Now()}}
		}, true},
		// A pod of one container: the kubelet writes the container's end, then the phase;
		// the phase wakes the job.
		{"the job of a one-container pod ended, its phase not yet written", []func(*corev1.Pod){running, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }},
			func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.Now()}}
			}, false},
		{"the job ended and a proxy that had ended waits to run again", []func(*corev1.Pod){func(p *corev1.Pod) {
			p.Spec.RestartPolicy, p.Status.Phase = corev1.RestartPolicyOnFailure, corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{
				{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.Now()}}},
				{Name: "proxy", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.Now()}}}}
		}}, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		}, true},
		// The job deleted with --cascade=orphan: the garbage collector takes the
		// pod's references off, and the finalizer would hold it for good.
		{"orphaned by its job's deletion", nil, func(p *corev1.Pod) { p.OwnerReferences = nil }, true},
		{"deleted by someone else, then withdrawn ahead", []func(*corev1.Pod){func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }},
			func(p *corev1.Pod) { p.Annotations[runpod.AnnotationWithdrawnAhead] = "deleted before its instant" }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := base()
			for _, f := range c.before {
				f(old)
			}
			next := old.DeepCopy()
			c.change(next)
			if got := podEvents.Update(crevent.UpdateEvent{ObjectOld: old, ObjectNew: next}); got != c.want {
				t.Errorf("update %q wakes the job: %t, want %t", c.name, got, c.want)
			}
		})
	}
	if podEvents.Create(crevent.CreateEvent{Object: base()}) {
		t.Error("a pod's create event wakes its job: the pass that created it already accounted for it")
	}
	// A job deleted while no manager ran (background deletion, its namespace deleted):
	// the garbage collector marked its pods deleted and the tracking finalizer holds
	// them. A new leader sees them only as create events (its first list), and no event
	// of the job that is gone: without a pass for each, they stayed Terminating for good,
	// and their namespace with them (helper-78).
	held := base()
	held.DeletionTimestamp = &metav1.Time{}
	if !podEvents.Create(crevent.CreateEvent{Object: held}) {
		t.Error("a pod being deleted and held by the tracking finalizer, first seen, wakes no pass to release it")
	}
	held.Finalizers = nil
	if podEvents.Create(crevent.CreateEvent{Object: held}) {
		t.Error("a pod being deleted without the tracking finalizer wakes its job: nothing to release")
	}
	// A job deleted with --cascade=orphan while no manager ran: its pods, no owner's
	// any more, are held by the finalizer (and one prepared ahead would run at its
	// instant). A new leader's first list must wake a pass for each, by its label,
	// whose job is gone (releasePods).
	orphan := base()
	orphan.OwnerReferences = nil
	if !podEvents.Create(crevent.CreateEvent{Object: orphan}) {
		t.Error("an orphaned pod that the tracking finalizer holds, first seen, wakes no pass to release it")
	}
	if got := ownerRequest(context.Background(), orphan); len(got) != 1 || got[0].Name != "job" || got[0].Namespace != "ns" {
		t.Errorf("an orphaned pod wakes %v, want the pass of the job its label names", got)
	}
	orphan.Finalizers = nil
	if podEvents.Create(crevent.CreateEvent{Object: orphan}) || len(ownerRequest(context.Background(), orphan)) != 0 {
		t.Error("an orphaned pod released already wakes a pass")
	}
	if !podEvents.Delete(crevent.DeleteEvent{Object: base()}) {
		t.Error("a pod's delete event does not wake its job")
	}
}
