package controller

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
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

// TestSlimJob: the cached job keeps of its managed fields what specChangedAt and
// requestedBy read, and they answer on it as on the whole object.
func TestSlimJob(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	entry := func(manager string, when *metav1.Time, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "scheduling.lockedcron.io/v1alpha1",
			Time: when, Subresource: sub, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	full := plainJob("@hourly")
	full.ManagedFields = []metav1.ManagedFieldsEntry{
		// kubectl apply: the whole spec, the schedule among it.
		entry("kubectl-client-side-apply", at(-time.Hour), "", `{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},`+
			`"f:spec":{".":{},"f:lock":{".":{},"f:redis":{".":{},"f:secretRef":{".":{},"f:name":{}}}},"f:schedule":{},"f:timeZone":{},`+
			`"f:jobTemplate":{".":{},"f:spec":{".":{},"f:containers":{},"f:restartPolicy":{}}}}}`),
		// kubectl patch of suspend, later.
		entry("kubectl-patch", at(0), "", `{"f:spec":{"f:suspend":{}}}`),
		// A label only: nothing the controller reads.
		entry("kubectl-label", at(30*time.Minute), "", `{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}`),
		// The manual trigger's annotation.
		entry("kubectl-lockedcron", at(40*time.Minute), "", `{"f:metadata":{"f:annotations":{"f:scheduling.lockedcron.io/run-request":{},"f:scheduling.lockedcron.io/run-request-contention":{}}}}`),
		// The controller's own status writes.
		entry("manager", at(50*time.Minute), "status", `{"f:status":{".":{},"f:observedSchedule":{},"f:schedule":{}}}`),
		// Not JSON: kept as it is (the functions skip what they cannot read).
		entry("odd", at(-2*time.Hour), "", `not json`),
	}
	now := t0.Add(2 * time.Hour)
	obj, err := slimJob(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*v1alpha1.LockedCronJob)

	if got, want := specChangedAt(slim, now), specChangedAt(full, now); !got.Equal(want) || !want.Equal(t0) {
		t.Errorf("specChangedAt: slim %s, whole %s; want %s (suspend patched)", got, want, t0)
	}
	if got, want := requestedBy(slim), requestedBy(full); got != want || want != "kubectl-lockedcron" {
		t.Errorf("requestedBy: slim %q, whole %q; want kubectl-lockedcron", got, want)
	}
	var managers []string
	size := 0
	for _, mf := range slim.ManagedFields {
		managers = append(managers, mf.Manager)
		size += len(mf.FieldsV1.Raw)
	}
	if want := []string{"kubectl-client-side-apply", "kubectl-patch", "kubectl-lockedcron", "odd"}; !slices.Equal(managers, want) {
		t.Errorf("entries kept: %q, want %q (no status, no label-only entry)", managers, want)
	}
	if got := string(slim.ManagedFields[0].FieldsV1.Raw); got != `{"f:spec":{"f:schedule":{},"f:timeZone":{}}}` {
		t.Errorf("apply entry slimmed to %s", got)
	}
	if got := string(slim.ManagedFields[2].FieldsV1.Raw); got != `{"f:metadata":{"f:annotations":{"f:scheduling.lockedcron.io/run-request":{}}}}` {
		t.Errorf("trigger entry slimmed to %s", got)
	}
	if first := slim.ManagedFields[0]; first.Time == nil || !first.Time.Equal(at(-time.Hour)) || first.Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("apply entry lost its time or operation: %+v", first)
	}

	// The spec edited after the trigger: the slim job says so too.
	full.ManagedFields = append(full.ManagedFields, entry("kubectl-edit", at(time.Hour), "", `{"f:spec":{"f:schedule":{}}}`))
	obj, _ = slimJob(full.DeepCopy())
	if got := specChangedAt(obj.(*v1alpha1.LockedCronJob), now); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("specChangedAt after the edit: %s, want %s", got, t0.Add(time.Hour))
	}

	if got, _ := slimJob("tombstone"); got != "tombstone" {
		t.Errorf("slimJob changed a non-job: %v", got)
	}
}
