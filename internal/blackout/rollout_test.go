package blackout

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRolloutOf(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 6, 6, 10, 0, 0, 0, time.UTC))
	dep := func(gen, obs int64, want, replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(want)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: obs, Replicas: replicas, UpdatedReplicas: updated,
				AvailableReplicas: available, ReadyReplicas: available, Conditions: conds},
		}
	}
	complete := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: done}
	progressing := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", LastUpdateTime: done}
	sts := func(gen, obs int64, want, ready, updated int32, cur, upd string, strategy appsv1.StatefulSetUpdateStrategy) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(want), UpdateStrategy: strategy},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: obs, Replicas: want, ReadyReplicas: ready, UpdatedReplicas: updated,
				CurrentRevision: cur, UpdateRevision: upd},
		}
	}
	rolling := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	partition := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}
	onDelete := appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	ds := func(gen, obs int64, desired, updated, available int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: obs, DesiredNumberScheduled: desired,
				UpdatedNumberScheduled: updated, NumberAvailable: available, CurrentNumberScheduled: desired},
		}
	}
	// OnDelete: the DaemonSet controller replaces a pod only when someone deletes it, so
	// its updated count can stay behind for good (kubectl rollout status refuses it).
	dsOnDelete := func(d *appsv1.DaemonSet) *appsv1.DaemonSet {
		d.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
		return d
	}
	cases := []struct {
		name          string
		obj           any
		want          bool
		wantCompleted time.Time
	}{
		{"Deployment: steady, completion from Progressing", dep(2, 2, 3, 3, 3, 3, complete), false, done.Time},
		{"Deployment: steady, no condition", dep(2, 2, 3, 3, 3, 3), false, time.Time{}},
		{"Deployment: generation not observed", dep(3, 2, 3, 3, 3, 3, complete), true, time.Time{}},
		{"Deployment: not all updated", dep(3, 3, 3, 4, 1, 3, progressing), true, time.Time{}},
		{"Deployment: old replicas still there", dep(3, 3, 3, 4, 3, 3, progressing), true, time.Time{}},
		{"Deployment: updated but not available", dep(3, 3, 3, 3, 3, 2, progressing), true, time.Time{}},
		{"Deployment: scaled to zero", dep(2, 2, 0, 0, 0, 0, complete), false, done.Time},
		{"Deployment: nil replicas means 1", &appsv1.Deployment{}, true, time.Time{}},
		{"StatefulSet: steady", sts(2, 2, 3, 3, 3, "r2", "r2", rolling), false, time.Time{}},
		{"StatefulSet: generation not observed", sts(3, 2, 3, 3, 3, "r2", "r2", rolling), true, time.Time{}},
		{"StatefulSet: revision not current", sts(3, 3, 3, 3, 3, "r2", "r3", rolling), true, time.Time{}},
		{"StatefulSet: not all updated", sts(3, 3, 3, 3, 1, "r2", "r3", rolling), true, time.Time{}},
		{"StatefulSet: not all ready", sts(3, 3, 3, 2, 3, "r3", "r3", rolling), true, time.Time{}},
		{"StatefulSet: partition reached", sts(3, 3, 3, 3, 1, "r2", "r3", partition), false, time.Time{}},
		{"StatefulSet: partition not reached", sts(3, 3, 3, 3, 0, "r2", "r3", partition), true, time.Time{}},
		{"StatefulSet: OnDelete waits for nobody", sts(3, 3, 3, 3, 0, "r2", "r3", onDelete), false, time.Time{}},
		{"DaemonSet: steady", ds(4, 4, 5, 5, 5), false, time.Time{}},
		{"DaemonSet: generation not observed", ds(5, 4, 5, 5, 5), true, time.Time{}},
		{"DaemonSet: not all updated", ds(5, 5, 5, 2, 5), true, time.Time{}},
		{"DaemonSet: not all available", ds(5, 5, 5, 5, 4), true, time.Time{}},
		{"DaemonSet: no nodes", ds(1, 1, 0, 0, 0), false, time.Time{}},
		{"DaemonSet: OnDelete waits for nobody", dsOnDelete(ds(5, 5, 5, 0, 5)), false, time.Time{}},
		{"DaemonSet: OnDelete, generation not observed", dsOnDelete(ds(6, 5, 5, 0, 5)), true, time.Time{}},
		{"DaemonSet: OnDelete, not all available", dsOnDelete(ds(5, 5, 5, 0, 4)), true, time.Time{}},
		{"something else", &corev1.Pod{}, false, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why, completed := RolloutOf(c.obj)
			if got != c.want {
				t.Fatalf("inProgress = %t (%s), want %t", got, why, c.want)
			}
			if got && why == "" {
				t.Fatalf("no reason given")
			}
			if !completed.Equal(c.wantCompleted) {
				t.Fatalf("completedAt = %s, want %s", completed, c.wantCompleted)
			}
		})
	}
}
