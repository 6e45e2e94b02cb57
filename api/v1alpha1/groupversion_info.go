// Package v1alpha1 contains the LockedCronJob API of the scheduling.lockedcron.io group.
// +kubebuilder:object:generate=true
// +groupName=scheduling.lockedcron.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "scheduling.lockedcron.io", Version: "v1alpha1"}

	// SchemeBuilder adds this package's types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
