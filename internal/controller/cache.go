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
// (labelled with runpod.LabelJob), not every pod of the cluster.
func CacheOptions() cache.Options {
	ours, err := labels.NewRequirement(runpod.LabelJob, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.NewSelector().Add(*ours)},
	}}
}
