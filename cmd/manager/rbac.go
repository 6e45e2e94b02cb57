package main

// Leader election: a Lease (and its Events) in the manager's own namespace only.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=lockedcron-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=lockedcron-system,resources=events,verbs=create;patch

// Metrics over HTTPS (internal/metricsauth): the manager asks the
// API server who a scraper is and whether it may get /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
