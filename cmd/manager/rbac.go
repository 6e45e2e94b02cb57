package main

// Leader election: a Lease (and its Events) in the manager's own namespace only.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=lockedcron-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=lockedcron-system,resources=events,verbs=create;patch
