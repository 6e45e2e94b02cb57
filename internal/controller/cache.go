package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

// CacheOptions makes the manager's cache hold only the pods this operator creates
// (labelled with runpod.LabelJob), not every pod of the cluster, and of each only what
// the controller reads (slimPod).
func CacheOptions() cache.Options {
	ours, err := labels.NewRequirement(runpod.LabelJob, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.NewSelector().Add(*ours), Transform: slimPod},
	}}
}

// slimPod keeps of a pod what the controller reads (issue 13: memory at thousands of
// jobs): its metadata without managed fields, spec.nodeName, and its status. The rest of
// the spec (containers, the init container, volumes, security contexts) and the managed
// fields are most of a pod's size, and no pass reads them; the controller writes pods
// only by patches computed between two copies of the cached object (markCounted), which
// carry none of it. Anything else (a tombstone) passes unchanged.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
	return pod, nil
}
