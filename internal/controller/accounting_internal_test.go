package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runstatus"
)

// Plain table tests of the accounting steps that need no API server.

var t0 = time.Date(2026, 6, 6, 10, 0, 0, 0, time.UTC)

func plainJob(sched string) *v1alpha1.LockedCronJob {
	return &v1alpha1.LockedCronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1alpha1.LockedCronJobSpec{Schedule: sched, TimeZone: "UTC"},
	}
}

func TestRecord(t *testing.T) {
	for _, c := range []struct {
		outcome string
		n       int64
		want    v1alpha1.Counters
		typ     string
		note    string
	}{
		{runstatus.OutcomeMissed, 1, v1alpha1.Counters{Missed: 1}, corev1.EventTypeWarning, "occurrence 2026-06-06T10:00:00Z missed: why"},
		{runstatus.OutcomeMissed, 3, v1alpha1.Counters{Missed: 3}, corev1.EventTypeWarning, "3 occurrences up to 2026-06-06T10:00:00Z missed: why"},
		{runstatus.OutcomeSkippedBlackout, 1, v1alpha1.Counters{SkippedBlackout: 1}, corev1.EventTypeNormal, "occurrence 2026-06-06T10:00:00Z skipped: why"},
		{string(report.SuppressedDuplicate), 1, v1alpha1.Counters{DuplicatesSuppressed: 1}, corev1.EventTypeNormal, "occurrence 2026-06-06T10:00:00Z not started: why"},
		{runstatus.OutcomeMissed, 0, v1alpha1.Counters{}, "", ""},
	} {
		p := &pass{job: plainJob("@hourly"), status: &v1alpha1.LockedCronJobStatus{}, now: t0}
		p.recordN(c.outcome, "Cause", t0, c.n, "why")
		if p.status.Counters != c.want {
			t.Errorf("%s×%d: counters %+v, want %+v", c.outcome, c.n, p.status.Counters, c.want)
		}
		if c.n == 0 {
			if len(p.events)+len(p.status.Recent)+len(p.recorded) != 0 {
				t.Errorf("nothing to record, got %v %v %v", p.events, p.status.Recent, p.recorded)
			}
			continue
		}
		if len(p.events) != 1 || p.events[0].typ != c.typ || p.events[0].reason != c.outcome || p.events[0].cause != "Cause" || p.events[0].note != c.note {
			t.Errorf("%s×%d: events %+v, want one %s %s (cause Cause) %q", c.outcome, c.n, p.events, c.typ, c.outcome, c.note)
		}
		if len(p.status.Recent) != 1 || p.status.Recent[0].Outcome != c.outcome || !strings.HasSuffix(p.status.Recent[0].Message, "why") {
			t.Errorf("%s×%d: recent %+v", c.outcome, c.n, p.status.Recent)
		}
		if len(p.recorded) != 1 || p.recorded[0] != (recorded{c.outcome, c.n}) {
			t.Errorf("%s×%d: metric %+v", c.outcome, c.n, p.recorded)
		}
	}
}

func TestAccountUntilChange(t *testing.T) {
	last := metav1.NewTime(t0)
	for _, c := range []struct {
		name     string
		observed string
		at       time.Time
		missed   int64
		lastTo   time.Time
		deferred time.Time // status.deferred, if set
	}{
		{"the controller was down across a suspension: 3 hourly occurrences up to it", "0 * * * *|UTC|suspend=false", t0.Add(3*time.Hour + 30*time.Minute), 3, t0.Add(3 * time.Hour), time.Time{}},
		{"changed right away: nothing fell due", "0 * * * *|UTC|suspend=false", t0.Add(30 * time.Minute), 0, t0, time.Time{}},
		{"the change is an occurrence's own second: it counts", "0 * * * *|UTC|suspend=false", t0.Add(time.Hour), 1, t0.Add(time.Hour), time.Time{}},
		{"resumed: nothing ran while suspended", "0 * * * *|UTC|suspend=true", t0.Add(5 * time.Hour), 0, t0, time.Time{}},
		{"an old schedule that did not parse", "61 * * * *|UTC|suspend=false", t0.Add(5 * time.Hour), 0, t0, time.Time{}},
		{"garbage", "x", t0.Add(5 * time.Hour), 0, t0, time.Time{}},
		// status.deferred: the pass that deferred it decided the ones before it (here
		// 11:00, superseded by 12:00 while a blackout lasted), whatever lastScheduleTime
		// says. The soak found 11:00 counted twice (skippedBlackout, then missed here).
		{"deferred 12:00 after superseding 11:00", "0 * * * *|UTC|suspend=false", t0.Add(2*time.Hour + 30*time.Minute), 1, t0.Add(2 * time.Hour), t0.Add(2 * time.Hour)},
		{"deferred 12:00, changed at 14:30", "0 * * * *|UTC|suspend=false", t0.Add(4*time.Hour + 30*time.Minute), 3, t0.Add(4 * time.Hour), t0.Add(2 * time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &pass{job: plainJob("*/5 * * * *"), status: &v1alpha1.LockedCronJobStatus{LastScheduleTime: &last}, now: t0.Add(6 * time.Hour)}
			if !c.deferred.IsZero() {
				p.status.Deferred = &metav1.Time{Time: c.deferred}
			}
			accountUntilChange(p, c.observed, c.at)
			if p.status.Deferred != nil {
				t.Errorf("status.deferred %s stays after the change", p.status.Deferred)
			}
			if p.status.Counters.Missed != c.missed {
				t.Errorf("missed %d, want %d", p.status.Counters.Missed, c.missed)
			}
			if !p.status.LastScheduleTime.Time.Equal(c.lastTo) {
				t.Errorf("lastScheduleTime %s, want %s", p.status.LastScheduleTime.Time, c.lastTo)
			}
			if c.missed > 0 && !strings.Contains(p.status.Recent[0].Message, "changed at "+c.at.UTC().Format(time.RFC3339)) {
				t.Errorf("recent %q does not say when the spec changed", p.status.Recent[0].Message)
			}
		})
	}
}

func TestSpecChangedAt(t *testing.T) {
	now := t0.Add(time.Hour)
	entry := func(at time.Time, sub string, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "m", Time: &metav1.Time{Time: at}, Subresource: sub, FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	for _, c := range []struct {
		name string
		mf   []metav1.ManagedFieldsEntry
		want time.Time
	}{
		{"no managed fields: now", nil, now},
		{"the manager that set suspend", []metav1.ManagedFieldsEntry{
			entry(t0.Add(-time.Hour), "", `{"f:spec":{"f:schedule":{}}}`),
			entry(t0, "", `{"f:spec":{"f:suspend":{}}}`),
			entry(t0.Add(30*time.Minute), "", `{"f:metadata":{"f:labels":{}}}`),
			entry(t0.Add(40*time.Minute), "status", `{"f:status":{"f:observedSchedule":{}}}`),
		}, t0},
		{"a time after now (clock skew): now", []metav1.ManagedFieldsEntry{entry(now.Add(time.Minute), "", `{"f:spec":{"f:timeZone":{}}}`)}, now},
	} {
		j := plainJob("@hourly")
		j.ManagedFields = c.mf
		if got := specChangedAt(j, now); !got.Equal(c.want) {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestMissedReason(t *testing.T) {
	cond := func(typ, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
	}
	deadline := int64(60)
	for _, c := range []struct {
		name  string
		conds []metav1.Condition
		dl    *int64
		cause string
		want  string
	}{
		{"the Secret was missing", []metav1.Condition{cond(ConditionLockBackendReady, "SecretNotFound", "Secret ns/redis not found")}, nil,
			"SecretNotFound", "held back while the lock backend was not ready (SecretNotFound: Secret ns/redis not found)"},
		{"pod creation was forbidden", []metav1.Condition{cond(ConditionReady, ReasonInvalidTemplate, `creating pod j-1: pods "j-1" is forbidden: exceeded quota`)}, nil,
			ReasonInvalidTemplate, `held back (InvalidTemplate: creating pod j-1: pods "j-1" is forbidden: exceeded quota)`},
		{"pod creation was refused", []metav1.Condition{cond(ConditionReady, ReasonPodCreateRefused, "creating pod j-1: admission webhook denied")}, nil,
			ReasonPodCreateRefused, "held back (PodCreateRefused: creating pod j-1: admission webhook denied)"},
		{"the blackouts were invalid", []metav1.Condition{cond(ConditionReady, ReasonInvalidBlackout, "spec.blackouts[0]: bad")}, nil,
			ReasonInvalidBlackout, "held back (InvalidBlackout: spec.blackouts[0]: bad)"},
		// Conditions that hold no pod back (helper-100): the manager could not reach Redis,
		// which pods may still reach (lockwrap is the authority); the schedule refused
		// before the one in force, whose occurrences came after it was fixed.
		{"Redis unreachable from the manager", []metav1.Condition{cond(ConditionLockBackendReady, ReasonRedisUnreachable, "Redis at r:6379: connection refused")}, &deadline,
			CauseStartingDeadline, "not started within startingDeadlineSeconds (1m0s): the controller was down or busy"},
		{"the schedule refused before it was fixed", []metav1.Condition{cond(ConditionReady, ReasonInvalidSchedule, "spec.schedule: bad")}, nil,
			CauseSuperseded, "superseded by a later occurrence before it started: the controller was down or busy"},
		{"nothing held it back, with a deadline", nil, &deadline, CauseStartingDeadline, "not started within startingDeadlineSeconds (1m0s): the controller was down or busy"},
		{"nothing held it back, no deadline", nil, nil, CauseSuperseded, "superseded by a later occurrence before it started: the controller was down or busy"},
	} {
		j := plainJob("@hourly")
		j.Status.Conditions = c.conds
		j.Spec.StartingDeadlineSeconds = c.dl
		if cause, got := missedReason(&pass{job: j}); cause != c.cause || got != c.want {
			t.Errorf("%s:\n got %s %q\nwant %s %q", c.name, cause, got, c.cause, c.want)
		}
	}
}
