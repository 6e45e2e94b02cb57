package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// scheduleEdited sets job's schedule as an edit at `at` records it (its managed fields).
func scheduleEdited(job *v1alpha1.LockedCronJob, spec string, at time.Time) {
	job.Generation++
	job.Spec.Schedule = spec
	job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
		Time: &metav1.Time{Time: at}, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:schedule":{}}}`)}}}
}

// TestScheduleNotInForceThenBackStartsNothingBefore: a schedule the controller refuses (it
// does not parse; it fires more often than --min-schedule-interval) is not in force, and
// the one that replaces it — the old one put back, a typo reverted — is in force from then
// on: nothing before it starts. The refusing pass recorded nothing of what it saw, so the
// schedule put back looked unchanged, and its latest occurrence of the refused period
// started late (30 min, 8 h: helper-90), what docs/schedule.md says never happens.
func TestScheduleNotInForceThenBackStartsNothingBefore(t *testing.T) {
	t10 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		spec        string
		refused     string // "": the same spec, refused for a flag tightened
		minInterval time.Duration
		// refusedAt: when it was refused (edited, or the manager restarted with the flag);
		// back: when the schedule is in force again; backMin: the flag then; edited: an
		// edit put it back (else the manager's flag changed).
		refusedAt time.Duration
		back      time.Duration
		backMin   time.Duration
		edited    bool
		// missed: what fell due under the spec in force before the refusal, up to it.
		missed int64
	}{
		{"hourly, a schedule that does not parse, reverted 2 h later", "0 * * * *", "0 * * * * * *", 0, 30 * time.Minute, 150 * time.Minute, 0, true, 0},
		{"hourly, refused for --min-schedule-interval, reverted 2 h later", "0 * * * *", "* * * * * *", time.Minute, 30 * time.Minute, 150 * time.Minute, time.Minute, true, 0},
		{"daily, refused for --min-schedule-interval, reverted the next day", "0 10 * * *", "* * * * * *", time.Minute, 30 * time.Minute, 25 * time.Hour, time.Minute, true, 0},
		{"hourly, refused for --min-schedule-interval, the flag lifted 2 h later", "0 * * * *", "* * * * *", time.Hour, 30 * time.Minute, 150 * time.Minute, 0, false, 0},
		{"hourly, 11:00 not started, edited at 11:30 to what does not parse, reverted", "0 * * * *", "0 * * * * * *", 0, 90 * time.Minute, 150 * time.Minute, 0, true, 1},
		{"hourly, 11:00 and 12:00 not started, the flag tightened at 12:30, lifted at 13:30", "0 * * * *", "", 2 * time.Hour, 150 * time.Minute, 210 * time.Minute, 0, false, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := passJob(c.spec, false)
			job.Status.LastScheduleTime = &metav1.Time{Time: t10}
			scheduleEdited(job, c.spec, t10.Add(-20*time.Hour)) // its managed fields: set long before
			r := testReconciler(fakeAPI(t))
			r.MinScheduleInterval = c.minInterval
			if c.refused != "" {
				scheduleEdited(job, c.refused, t10.Add(c.refusedAt))
			}
			p := passWith(t, r, job, t10.Add(c.refusedAt+time.Second))
			if ready := meta.FindStatusCondition(p.status.Conditions, ConditionReady); ready == nil || ready.Reason != ReasonInvalidSchedule {
				t.Fatalf("schedule %q not refused: %+v", job.Spec.Schedule, ready)
			}
			if p.status.Counters.Missed != c.missed {
				t.Errorf("refused: %d missed, want %d (what fell due before, up to the refusal)", p.status.Counters.Missed, c.missed)
			}
			job.Status = *p.status
			back := t10.Add(c.back)
			if c.edited {
				scheduleEdited(job, c.spec, back)
			} // else unchanged: the manager restarts with another flag
			r = testReconciler(fakeAPI(t))
			r.MinScheduleInterval = c.backMin
			p = passWith(t, r, job, back.Add(5*time.Second))
			for _, a := range p.active {
				t.Errorf("pod %s created at %s: an occurrence from before the schedule was in force again (%s)",
					a.Name, back.Add(5*time.Second).Format(time.RFC3339), back.Format(time.RFC3339))
			}
			if ready := meta.FindStatusCondition(p.status.Conditions, ConditionReady); ready == nil || ready.Reason != ReasonScheduled {
				t.Errorf("schedule in force again, Ready: %+v", ready)
			}
			if p.status.Counters.Missed != c.missed {
				t.Errorf("in force again: %d missed, want %d (nothing of the refused time)", p.status.Counters.Missed, c.missed)
			}
		})
	}
}

// TestLostWriteAfterScheduleChangeCountsTheSameMissed: the controller down from 10:00:30,
// the schedule changed at 10:05 from every minute to every ten; the pass back at 10:10:01
// counts 10:01–10:05 missed and starts 10:10, and its status write is lost. The next pass
// counts the same five: it counted the old schedule's minutes after the change too (9),
// which were never occurrences of a schedule in force.
func TestLostWriteAfterScheduleChangeCountsTheSameMissed(t *testing.T) {
	t10 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	job := passJob("* * * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: t10}
	scheduleEdited(job, "*/10 * * * *", t10.Add(5*time.Minute))
	r, p1 := runPass(t, job, t10.Add(10*time.Minute+time.Second))
	if len(p1.active) != 1 || p1.status.Counters.Missed != 5 {
		t.Fatalf("first pass: %d pods, %d missed; want the 10:10 pod and 5 missed", len(p1.active), p1.status.Counters.Missed)
	}
	p2 := passWith(t, r, job, t10.Add(10*time.Minute+2*time.Second)) // its write lost
	if p2.status.Counters.Missed != 5 {
		t.Errorf("after the lost write %d missed, want 5 (10:01–10:05, up to the change): %+v", p2.status.Counters.Missed, p2.status.Recent)
	}
}
