package blackout

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

var t0 = time.Date(2026, 6, 6, 10, 0, 0, 0, time.UTC)

func TestBlockReasonAndDescribe(t *testing.T) {
	until := t0.Add(90 * time.Minute)
	for _, c := range []struct {
		b            Block
		reason, desc string
	}{
		{Block{Cause: CauseWindow, By: `window "maint"`, Until: until}, ReasonWindowOpen,
			`window "maint" is open; until 2026-06-06T11:30:00Z`},
		{Block{Cause: CauseSettling, By: "Deployment/api", Until: until, Why: "rollout completed 2026-06-06T09:50:00Z, settling"}, ReasonRolloutSettling,
			"Deployment/api is settling after its rollout (rollout completed 2026-06-06T09:50:00Z, settling); until 2026-06-06T11:30:00Z"},
		{Block{Cause: CauseRollout, By: "StatefulSet/db", Why: "1 of 3 replicas updated"}, ReasonRolloutInProgress,
			"StatefulSet/db is rolling out (1 of 3 replicas updated); until the rollout completes"},
		{Block{Cause: CauseEstimated, By: "DaemonSet/agent", Until: until}, ReasonRolloutInProgress,
			"DaemonSet/agent is rolling out; until 2026-06-06T11:30:00Z"},
		{Block{Cause: CauseWindow, By: "window spec.blackout.windows[0]", Until: until.In(time.FixedZone("X", 3600))}, ReasonWindowOpen,
			"window spec.blackout.windows[0] is open; until 2026-06-06T11:30:00Z"},
	} {
		if got := c.b.Reason(); got != c.reason {
			t.Errorf("%+v: Reason() = %q, want %q", c.b, got, c.reason)
		}
		if got := c.b.Describe(); got != c.desc {
			t.Errorf("%+v: Describe() = %q, want %q", c.b, got, c.desc)
		}
	}
}

func TestDecisionReason(t *testing.T) {
	b := Block{Cause: CauseWindow, By: `window "w"`, Until: t0.Add(time.Hour)}
	deadline := t0.Add(time.Minute)
	for _, c := range []struct {
		d              Decision
		reason, latest string
	}{
		{Decision{Action: Skip, Block: b}, `window "w" is open; until 2026-06-06T11:00:00Z`, "no deadline"},
		{Decision{Action: Defer, Block: b}, `window "w" is open; until 2026-06-06T11:00:00Z`, "no deadline"},
		{Decision{Action: Defer, Block: b, Deadline: deadline}, `window "w" is open; until 2026-06-06T11:00:00Z`, "at the latest 2026-06-06T10:01:00Z"},
		{Decision{Action: Miss, Block: b, Deadline: deadline},
			`blackout past startingDeadlineSeconds (2026-06-06T10:01:00Z): window "w" is open; until 2026-06-06T11:00:00Z`, "at the latest 2026-06-06T10:01:00Z"},
	} {
		if got := c.d.Reason(); got != c.reason {
			t.Errorf("%s: Reason() = %q, want %q", c.d.Action, got, c.reason)
		}
		if got := c.d.Latest(); got != c.latest {
			t.Errorf("%s: Latest() = %q, want %q", c.d.Action, got, c.latest)
		}
	}
}

func TestCondition(t *testing.T) {
	windows := mustCompile(t, &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{recurring("nightly", "0 2 * * *", 2*time.Hour)}}, "UTC")
	empty := mustCompile(t, nil, "UTC")
	night := at(t0, 3, 0, 0)
	rolling := []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true, Why: "1 of 2 replicas updated"}}
	settling := []Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", CompletedAt: t0.Add(-time.Minute), Settle: 10 * time.Minute}}
	for _, c := range []struct {
		name       string
		rules      *Rules
		now        time.Time
		rollouts   []Rollout
		unreadable error
		want       ConditionState
	}{
		{"nothing configured", empty, t0, nil, nil,
			ConditionState{Reason: ReasonNoBlackout, Message: "no blackout configured"}},
		{"outside the window: look again when it opens", windows, t0, nil, nil,
			ConditionState{Reason: ReasonNoBlackout, Message: "no blackout in effect", Recheck: at(t0.Add(24*time.Hour), 2, 0, 0)}},
		{"inside the window: look again when it closes", windows, night, nil, nil,
			ConditionState{Blocked: true, Reason: ReasonWindowOpen, Message: `window "nightly" is open; until 2026-06-06T04:00:00Z`, Recheck: at(t0, 4, 0, 0)}},
		{"a rollout in progress: end unknown", windows, t0, rolling, nil,
			ConditionState{Blocked: true, Reason: ReasonRolloutInProgress, Message: "Deployment/api is rolling out (1 of 2 replicas updated); until the rollout completes"}},
		{"settling", empty, t0, settling, nil,
			ConditionState{Blocked: true, Reason: ReasonRolloutSettling, Recheck: t0.Add(9 * time.Minute),
				Message: "Deployment/api is settling after its rollout (rollout completed 2026-06-06T09:59:00Z, settling); until 2026-06-06T10:09:00Z"}},
		{"workloads unreadable: fail closed", windows, t0, nil, errors.New("forbidden"),
			ConditionState{Blocked: true, Reason: ReasonWorkloadsUnknown, Message: "referenced workloads could not be read; no occurrence starts: forbidden"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, c.rules.Condition(c.now, c.rollouts, c.unreadable)); diff != "" {
				t.Errorf("Condition (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpcoming(t *testing.T) {
	rules := mustCompile(t, &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{recurring("nightly", "0 2 * * *", 2*time.Hour)}}, "UTC")
	times := []time.Time{at(t0, 1, 0, 0), at(t0, 2, 0, 0), at(t0, 3, 0, 0), at(t0, 4, 0, 0)}
	want := []v1alpha1.UpcomingOccurrence{
		{Time: metav1.NewTime(times[0])},
		{Time: metav1.NewTime(times[1]), BlockedBy: `window "nightly"`},
		{Time: metav1.NewTime(times[2]), BlockedBy: `window "nightly"`},
		{Time: metav1.NewTime(times[3])},
	}
	if diff := cmp.Diff(want, rules.Upcoming(times, t0.Add(-24*time.Hour), nil)); diff != "" {
		t.Errorf("Upcoming (-want +got):\n%s", diff)
	}
	if got := rules.Upcoming(nil, t0, nil); got != nil {
		t.Errorf("no times: %v, want nil", got)
	}
}

// deploy is a Deployment named name, rolling out or complete (at done, if not zero).
func deploy(name string, rolling bool, done time.Time) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1},
	}
	if rolling {
		d.Status.UpdatedReplicas = 0
	}
	if !done.IsZero() {
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
			Reason: "NewReplicaSetAvailable", LastUpdateTime: metav1.NewTime(done)}}
	}
	return d
}

func TestObserveRollouts(t *testing.T) {
	settle := 10 * time.Minute
	api := Ref{Field: "spec.blackout.rollouts[0]", Kind: v1alpha1.KindDeployment, Name: "api", Settle: settle}
	since := t0.Add(-5 * time.Minute)
	inProgress := v1alpha1.ObservedRollout{Kind: v1alpha1.KindDeployment, Name: "api", Since: metav1.NewTime(since)}
	completedAt := func(t time.Time) v1alpha1.ObservedRollout {
		o := inProgress
		o.CompletedAt = &metav1.Time{Time: t}
		return o
	}
	for _, c := range []struct {
		name      string
		refs      []Ref
		workloads [][]metav1.Object
		prev      []v1alpha1.ObservedRollout
		want      []Rollout
		wantKeep  []v1alpha1.ObservedRollout
	}{
		{"first seen rolling: recorded since now", []Ref{api}, [][]metav1.Object{{deploy("api", true, time.Time{})}}, nil,
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true, Why: "0 of 1 replicas updated", Since: t0, Settle: settle}},
			[]v1alpha1.ObservedRollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: metav1.NewTime(t0)}}},
		{"still rolling: keeps its start", []Ref{api}, [][]metav1.Object{{deploy("api", true, time.Time{})}}, []v1alpha1.ObservedRollout{inProgress},
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true, Why: "0 of 1 replicas updated", Since: since, Settle: settle}},
			[]v1alpha1.ObservedRollout{inProgress}},
		{"seen rolling, now complete with no time of its own: completed now", []Ref{api}, [][]metav1.Object{{deploy("api", false, time.Time{})}}, []v1alpha1.ObservedRollout{inProgress},
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: since, CompletedAt: t0, Settle: settle}},
			[]v1alpha1.ObservedRollout{completedAt(t0)}},
		{"seen rolling, its own completion older than the rollout seen: completed now", []Ref{api}, [][]metav1.Object{{deploy("api", false, since.Add(-time.Hour))}}, []v1alpha1.ObservedRollout{inProgress},
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: since, CompletedAt: t0, Settle: settle}},
			[]v1alpha1.ObservedRollout{completedAt(t0)}},
		{"seen rolling, its own completion time wins", []Ref{api}, [][]metav1.Object{{deploy("api", false, t0.Add(-time.Minute))}}, []v1alpha1.ObservedRollout{inProgress},
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: since, CompletedAt: t0.Add(-time.Minute), Settle: settle}},
			[]v1alpha1.ObservedRollout{completedAt(t0.Add(-time.Minute))}},
		{"completion recorded earlier is kept across passes", []Ref{api}, [][]metav1.Object{{deploy("api", false, time.Time{})}}, []v1alpha1.ObservedRollout{completedAt(t0.Add(-2 * time.Minute))},
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: since, CompletedAt: t0.Add(-2 * time.Minute), Settle: settle}},
			[]v1alpha1.ObservedRollout{completedAt(t0.Add(-2 * time.Minute))}},
		{"settled: dropped from status", []Ref{api}, [][]metav1.Object{{deploy("api", false, time.Time{})}}, []v1alpha1.ObservedRollout{completedAt(t0.Add(-settle))},
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: since, CompletedAt: t0.Add(-settle), Settle: settle}},
			nil},
		{"rolled out unseen, no completion of its own: no settle", []Ref{api}, [][]metav1.Object{{deploy("api", false, time.Time{})}}, nil,
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", Settle: settle}},
			nil},
		{"rolled out unseen, its own completion: settles from it", []Ref{api}, [][]metav1.Object{{deploy("api", false, t0.Add(-time.Minute))}}, nil,
			[]Rollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: t0.Add(-time.Minute), CompletedAt: t0.Add(-time.Minute), Settle: settle}},
			[]v1alpha1.ObservedRollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: metav1.NewTime(t0.Add(-time.Minute)), CompletedAt: &metav1.Time{Time: t0.Add(-time.Minute)}}}},
		{"a missing workload is not rolling out; its record goes", []Ref{api}, [][]metav1.Object{nil}, []v1alpha1.ObservedRollout{inProgress},
			nil, nil},
		{"two references to one workload: read twice, kept once, status sorted",
			[]Ref{{Kind: v1alpha1.KindStatefulSet, Name: "z"}, api, {Kind: v1alpha1.KindDeployment, Name: "api"}},
			[][]metav1.Object{{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "z", Generation: 1}}}, {deploy("api", true, time.Time{})}, {deploy("api", true, time.Time{})}},
			nil,
			[]Rollout{
				{Kind: v1alpha1.KindStatefulSet, Name: "z", InProgress: true, Why: "generation 1 not yet observed (observed 0)", Since: t0},
				{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true, Why: "0 of 1 replicas updated", Since: t0, Settle: settle},
				{Kind: v1alpha1.KindDeployment, Name: "api", InProgress: true, Why: "0 of 1 replicas updated", Since: t0},
			},
			[]v1alpha1.ObservedRollout{{Kind: v1alpha1.KindDeployment, Name: "api", Since: metav1.NewTime(t0)}, {Kind: v1alpha1.KindStatefulSet, Name: "z", Since: metav1.NewTime(t0)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, keep := ObserveRollouts(t0, c.refs, c.workloads, c.prev)
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(Rollout{})); diff != "" {
				t.Errorf("rollouts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantKeep, keep); diff != "" {
				t.Errorf("status.rollouts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCorrectDeferred(t *testing.T) {
	hourly, err := schedule.Parse("0 * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	minute := time.Minute
	for _, c := range []struct {
		name             string
		earliest, now    time.Time
		deferred         time.Time
		deadline         *time.Duration
		wantMissed       int64
		wantDue          time.Time
		wantSuperseded   bool
		wantReasonSuffix string
	}{
		{"nothing deferred: plan unchanged", t0.Add(-3 * time.Hour), t0.Add(time.Minute), time.Time{}, nil, 2, t0, false, ""},
		{"the occurrences before the deferred one are not counted again", t0.Add(-3 * time.Hour), t0.Add(time.Minute), t0, nil, 0, t0, false, ""},
		{"a newer occurrence superseded it: skippedBlackout, not missed", t0.Add(-3 * time.Hour), t0.Add(time.Hour), t0, nil, 0, t0.Add(time.Hour), true,
			"deferred, then superseded by occurrence 2026-06-06T11:00:00Z while the blackout lasted"},
		{"its deadline passed first: missed", t0.Add(-time.Hour), t0.Add(time.Hour), t0, &minute, 1, t0.Add(time.Hour), false, ""},
		{"deferred before earliest: ignored", t0, t0.Add(2 * time.Hour), t0, nil, 1, t0.Add(2 * time.Hour), false, ""},
		{"deferred after the latest occurrence: ignored", t0.Add(-3 * time.Hour), t0.Add(time.Minute), t0.Add(time.Hour), nil, 2, t0, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := hourly.Plan(schedule.Input{Earliest: c.earliest, Now: c.now, StartingDeadline: c.deadline})
			superseded, reason := CorrectDeferred(&plan, hourly, c.earliest, c.deferred, c.deadline)
			if plan.Missed != c.wantMissed {
				t.Errorf("Missed = %d, want %d", plan.Missed, c.wantMissed)
			}
			if plan.Due == nil || !plan.Due.Equal(c.wantDue) {
				t.Errorf("Due = %v, want %s", plan.Due, c.wantDue)
			}
			if superseded != c.wantSuperseded || reason != c.wantReasonSuffix {
				t.Errorf("superseded, reason = %t, %q; want %t, %q", superseded, reason, c.wantSuperseded, c.wantReasonSuffix)
			}
		})
	}
}

func TestIndexKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		spec *v1alpha1.BlackoutSpec
		want []string
	}{
		{"no blackout", nil, nil},
		{"windows only", &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{recurring("w", "0 2 * * *", time.Hour)}}, nil},
		{"by kind and name, by kind for selectors, once each", &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{
			{Kind: v1alpha1.KindDeployment, Name: "api"},
			{Kind: v1alpha1.KindStatefulSet, Selector: &metav1.LabelSelector{}},
			{Kind: v1alpha1.KindStatefulSet, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}},
			{Kind: v1alpha1.KindDeployment, Name: "api"},
		}}, []string{"Deployment/api", "StatefulSet/selector"}},
	} {
		if diff := cmp.Diff(c.want, IndexKeys(c.spec)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	byName, bySelector := WorkloadKeys(v1alpha1.KindDaemonSet, "agent")
	if byName != "DaemonSet/agent" || bySelector != "DaemonSet/selector" {
		t.Errorf("WorkloadKeys = %q, %q", byName, bySelector)
	}
}

func TestSelects(t *testing.T) {
	spec := &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{
		{Kind: v1alpha1.KindDeployment, Name: "web"},
		{Kind: v1alpha1.KindStatefulSet, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}},
		{Kind: v1alpha1.KindDaemonSet, Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}},
	}}
	for _, c := range []struct {
		name   string
		spec   *v1alpha1.BlackoutSpec
		kind   v1alpha1.WorkloadKind
		labels map[string]string
		want   bool
	}{
		{"matching labels", spec, v1alpha1.KindStatefulSet, map[string]string{"tier": "db", "x": "y"}, true},
		{"other labels", spec, v1alpha1.KindStatefulSet, map[string]string{"tier": "web"}, false},
		{"no labels", spec, v1alpha1.KindStatefulSet, nil, false},
		{"other kind", spec, v1alpha1.KindDeployment, map[string]string{"tier": "db"}, false},
		{"a reference by name is not a selector", spec, v1alpha1.KindDeployment, map[string]string{"app": "web"}, false},
		{"an invalid selector selects nothing", spec, v1alpha1.KindDaemonSet, map[string]string{"app": "x"}, false},
		{"no blackout", nil, v1alpha1.KindStatefulSet, map[string]string{"tier": "db"}, false},
	} {
		if got := Selects(c.spec, c.kind, c.labels); got != c.want {
			t.Errorf("%s: Selects = %t, want %t", c.name, got, c.want)
		}
	}
}

// A rollout reference that matches no workload guards nothing, and says so (a misspelled
// name, `name: API` for Deployment api, used to leave the guard off without a sign).
func TestUnmatched(t *testing.T) {
	rules := mustCompile(t, &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{
		{Kind: v1alpha1.KindDeployment, Name: "api"},
		{Kind: v1alpha1.KindDeployment, Name: "API"},
		{Kind: v1alpha1.KindStatefulSet, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}}, "UTC")
	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api"}}
	if got := Unmatched(rules.Refs, [][]metav1.Object{{api}, {api}, {api}}); got != "" {
		t.Errorf("every reference matches: %q", got)
	}
	want := "guarding nothing: Deployment/API not found (spec.blackout.rollouts[1]), no StatefulSet matches app=db (spec.blackout.rollouts[2])"
	if got := Unmatched(rules.Refs, [][]metav1.Object{{api}, nil, nil}); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
