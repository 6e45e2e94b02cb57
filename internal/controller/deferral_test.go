package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// go test ./internal/controller/ -run 'TestDeferrable|TestCatchUp'

func scheduledStatus(last, next time.Time, active ...string) *v1alpha1.LockedCronJobStatus {
	st := &v1alpha1.LockedCronJobStatus{
		LastScheduleTime: &metav1.Time{Time: last},
		NextScheduleTime: &metav1.Time{Time: next},
		Upcoming:         []v1alpha1.UpcomingOccurrence{{Time: metav1.NewTime(next)}},
		Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonScheduled,
			Message: "next occurrence " + next.Format(time.RFC3339), LastTransitionTime: metav1.NewTime(t0)}},
		ObservedSchedule: "* * * * *|UTC|suspend=false",
	}
	for _, a := range active {
		st.Active = append(st.Active, corev1.ObjectReference{Kind: "Pod", Name: a})
	}
	st.ActiveCount = int32(len(st.Active))
	return st
}

func TestDeferrable(t *testing.T) {
	m := time.Minute
	before := scheduledStatus(t0, t0.Add(m))
	notStarted := func(string) bool { return false }
	started := func(string) bool { return true }
	for _, c := range []struct {
		name    string
		next    *v1alpha1.LockedCronJobStatus
		started func(string) bool
		want    bool
	}{
		{"a created pod that has not started", scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1"), notStarted, true},
		{"the same pod once it runs", scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1"), started, false},
		{"a counter", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1")
			s.Counters.Missed = 1
			return s
		}(), notStarted, false},
		{"the Ready condition turning False", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m))
			s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionFalse, ReasonInvalidTemplate
			return s
		}(), notStarted, false},
		{"a blackout in the preview", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m))
			s.Upcoming[0].BlockedBy = "window nightly"
			return s
		}(), notStarted, false},
		{"a new schedule", func() *v1alpha1.LockedCronJobStatus {
			s := scheduledStatus(t0.Add(m), t0.Add(2*m))
			s.ObservedSchedule = "*/2 * * * *|UTC|suspend=false"
			return s
		}(), notStarted, false},
	} {
		if got := deferrable(before, c.next, c.started); got != c.want {
			t.Errorf("%s: deferrable %t, want %t", c.name, got, c.want)
		}
	}
	// While a started pod is active, the schedule columns are kept current.
	if deferrable(scheduledStatus(t0, t0.Add(m), "j-1"), scheduledStatus(t0.Add(m), t0.Add(2*m), "j-1"), started) {
		t.Error("lastScheduleTime deferred while a pod runs")
	}
	// A pod that leaves active is always news, started or not.
	if deferrable(scheduledStatus(t0, t0.Add(m), "j-1"), scheduledStatus(t0, t0.Add(m)), notStarted) {
		t.Error("a pod leaving active was deferred")
	}
}
