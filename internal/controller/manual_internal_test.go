package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// TestParseRunRequest: every bad run request is refused naming the annotation and the fix;
// good ones give the run's occurrence and contention.
func TestParseRunRequest(t *testing.T) {
	hourly, err := schedule.Parse("0 * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 9, 15, 42, 0, time.UTC)
	const (
		id  = v1alpha1.AnnotationRunRequest
		occ = v1alpha1.AnnotationRunOccurrence
		con = v1alpha1.AnnotationRunContention
	)
	for _, c := range []struct {
		name  string
		ann   map[string]string
		sched *schedule.Schedule
		err   []string // substrings of the error; nil: valid
	}{
		{name: "plain", ann: map[string]string{id: "fix-1"}, sched: hourly},
		{name: "upper case", ann: map[string]string{id: "Fix-1"}, sched: hourly, err: []string{id, `"Fix-1"`, "a-z, 0-9 and '-'"}},
		{name: "trailing dash", ann: map[string]string{id: "fix-"}, sched: hourly, err: []string{id, "starting and ending with a letter or digit"}},
		{name: "empty", ann: map[string]string{id: ""}, sched: hourly, err: []string{id}},
		{name: "64 characters", ann: map[string]string{id: strings.Repeat("a", 64)}, sched: hourly, err: []string{id, "1-63"}},
		{name: "63 characters", ann: map[string]string{id: strings.Repeat("a", 63)}, sched: hourly},
		{name: "contention", ann: map[string]string{id: "x", con: "wait"}, sched: hourly, err: []string{con, `"wait"`, "Wait", "FailFast"}},
		{name: "fail fast", ann: map[string]string{id: "x", con: "FailFast"}, sched: hourly},
		{name: "occurrence not a time", ann: map[string]string{id: "x", occ: "yesterday"}, sched: hourly, err: []string{occ, "RFC 3339", "2026-11-30T02:00:00Z"}},
		{name: "occurrence in the future", ann: map[string]string{id: "x", occ: "2026-11-30T10:00:00Z"}, sched: hourly, err: []string{occ, "in the future"}},
		{name: "not of the schedule", ann: map[string]string{id: "x", occ: "2026-11-30T08:30:00Z"}, sched: hourly, err: []string{occ, "not an occurrence of spec.schedule", "0 * * * *"}},
		{name: "schedule invalid", ann: map[string]string{id: "x", occ: "2026-11-30T08:00:00Z"}, sched: nil, err: []string{occ, "fix spec.schedule"}},
		{name: "an occurrence, in another zone", ann: map[string]string{id: "x", occ: "2026-11-30T09:00:00+01:00"}, sched: hourly},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := parseRunRequest(c.ann, c.sched, now)
			if c.err == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %+v", m)
			}
			for _, s := range c.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}

	m, err := parseRunRequest(map[string]string{id: "rerun", occ: "2026-11-30T09:00:00+01:00", con: "FailFast"}, hourly, now)
	if err != nil || !m.Occurrence.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) || m.Contention != "FailFast" || !m.RequestedAt.Equal(now) {
		t.Errorf("parsed %+v, %v", m, err)
	}
	m, _ = parseRunRequest(map[string]string{id: "now"}, hourly, now.Add(300*time.Millisecond))
	if !m.Occurrence.IsZero() || m.Contention != v1alpha1.ManualContentionWait || !m.RequestedAt.Equal(now) {
		t.Errorf("defaults %+v: want no occurrence, Wait, requested at %s", m, now)
	}
}

// TestRequestedBy: the manager that owns the run-request annotation in managedFields.
func TestRequestedBy(t *testing.T) {
	job := &v1alpha1.LockedCronJob{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:schedule":{}}}`)}},
		{Manager: "lockedcron", Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
		{Manager: "kubectl-annotate", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:metadata":{"f:annotations":{".":{},"f:scheduling.lockedcron.io/run-request":{},"f:scheduling.lockedcron.io/run-request-contention":{}}}}`)}},
	}}}
	if got := requestedBy(job); got != "kubectl-annotate" {
		t.Errorf("requestedBy = %q, want kubectl-annotate", got)
	}
	job.ManagedFields = job.ManagedFields[:2]
	if got := requestedBy(job); got != "" {
		t.Errorf("requestedBy without an owner = %q, want empty", got)
	}
}
