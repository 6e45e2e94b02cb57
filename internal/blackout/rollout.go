package blackout

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// RolloutOf reads a Deployment, StatefulSet or DaemonSet's spec and status the way
// `kubectl rollout status` does. inProgress is true while its controller has not
// observed the latest generation or not all replicas are updated and available; why
// says what is outstanding. completedAt is the completion time the object itself
// records, if any: for a Deployment, the lastUpdateTime of its Progressing condition
// with reason NewReplicaSetAvailable (set by the deployment controller when a rollout
// completes, so it survives restarts of this controller). StatefulSets and DaemonSets
// record none; the caller remembers when it saw them complete.
func RolloutOf(obj any) (inProgress bool, why string, completedAt time.Time) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return deployment(o)
	case *appsv1.StatefulSet:
		return statefulSet(o)
	case *appsv1.DaemonSet:
		return daemonSet(o)
	}
	return false, "", time.Time{}
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func deployment(d *appsv1.Deployment) (bool, string, time.Time) {
	var completed time.Time
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionTrue && c.Reason == "NewReplicaSetAvailable" {
			completed = c.LastUpdateTime.Time
		}
	}
	want, st := replicas(d.Spec.Replicas), d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return true, fmt.Sprintf("generation %d not yet observed (observed %d)", d.Generation, st.ObservedGeneration), time.Time{}
	case st.UpdatedReplicas < want:
		return true, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want), time.Time{}
	case st.Replicas > st.UpdatedReplicas:
		return true, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas), time.Time{}
	case st.AvailableReplicas < st.UpdatedReplicas || st.AvailableReplicas < want:
		return true, fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, want), time.Time{}
	}
	return false, "", completed
}

func statefulSet(s *appsv1.StatefulSet) (bool, string, time.Time) {
	want, st := replicas(s.Spec.Replicas), s.Status
	if st.ObservedGeneration < s.Generation {
		return true, fmt.Sprintf("generation %d not yet observed (observed %d)", s.Generation, st.ObservedGeneration), time.Time{}
	}
	if st.ReadyReplicas < want {
		return true, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want), time.Time{}
	}
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		// Pods are replaced only when someone deletes them: no rollout to wait for.
		return false, "", time.Time{}
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		if target := want - *ru.Partition; st.UpdatedReplicas < target {
			return true, fmt.Sprintf("%d of %d replicas above the partition updated", st.UpdatedReplicas, target), time.Time{}
		}
		return false, "", time.Time{}
	}
	if st.UpdatedReplicas < want {
		return true, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want), time.Time{}
	}
	if st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision {
		return true, fmt.Sprintf("revision %s not yet current (current %s)", st.UpdateRevision, st.CurrentRevision), time.Time{}
	}
	return false, "", time.Time{}
}

func daemonSet(d *appsv1.DaemonSet) (bool, string, time.Time) {
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return true, fmt.Sprintf("generation %d not yet observed (observed %d)", d.Generation, st.ObservedGeneration), time.Time{}
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled && d.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType:
		// OnDelete replaces a pod only when someone deletes it (as for a StatefulSet):
		// no rollout to wait for, and its updated count may stay behind for good.
		return true, fmt.Sprintf("%d of %d pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled), time.Time{}
	case st.NumberAvailable < st.DesiredNumberScheduled:
		return true, fmt.Sprintf("%d of %d pods available", st.NumberAvailable, st.DesiredNumberScheduled), time.Time{}
	}
	return false, "", time.Time{}
}
