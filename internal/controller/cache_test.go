package controller

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

// go test ./internal/controller/ -run TestSlimPod

func TestSlimPod(t *testing.T) {
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "j-1", Namespace: "ns", Labels: map[string]string{runpod.LabelJob: "j"},
			Annotations:   map[string]string{runpod.AnnotationScheduledTime: "2026-06-06T10:00:00Z"},
			Finalizers:    []string{runpod.FinalizerTracking},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			InitContainers: []corev1.Container{{Name: "lockwrap-install", Image: "k8s.local/lockedcron:dev"}},
			Containers:     []corev1.Container{{Name: "job", Image: "busybox", Command: []string{"/lockwrap/lockwrap", "--", "date"}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	obj, err := slimPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*corev1.Pod)
	if slim.Spec.NodeName != "node-1" || len(slim.Spec.Containers) != 0 || len(slim.Spec.InitContainers) != 0 || slim.ManagedFields != nil {
		t.Errorf("slim pod keeps spec %+v, managed fields %v; want only spec.nodeName", slim.Spec, slim.ManagedFields)
	}
	if slim.Status.Phase != corev1.PodRunning || len(slim.Status.ContainerStatuses) != 1 || slim.Labels[runpod.LabelJob] != "j" ||
		slim.Annotations[runpod.AnnotationScheduledTime] == "" || len(slim.Finalizers) != 1 {
		t.Errorf("slim pod lost what a pass reads: %+v", slim)
	}

	// markCounted's patch, computed between two slim copies, touches labels and
	// finalizers only: never the spec it no longer holds.
	marked := slim.DeepCopy()
	marked.Labels[runpod.LabelCounted] = "true"
	controllerutil.RemoveFinalizer(marked, runpod.FinalizerTracking)
	data, err := client.StrategicMergeFrom(slim).Data(marked)
	if err != nil {
		t.Fatal(err)
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	if _, ok := patch["spec"]; ok || len(patch) != 1 {
		t.Errorf("patch %s: want metadata only", data)
	}

	// A tombstone passes unchanged.
	if got, _ := slimPod("tombstone"); got != "tombstone" {
		t.Errorf("slimPod changed a non-pod: %v", got)
	}
}
