package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// The controller's side of spec.blackout: it reads the referenced workloads (from a cache
// of their own, stripped of pod templates), keeps status.rollouts, sets the Blackout
// condition and status.upcoming, and applies the decision of package blackout to the
// due occurrence. Workload events reach only the jobs that reference the workload,
// through a field index on LockedCronJobs.

// Reasons of the Blackout condition and of blackout Events. Condition reasons cannot hold
// names (they must match [A-Za-z0-9_,:]), so the message names the window or workload.
const (
	ReasonNoBlackout        = "NoBlackout"
	ReasonWindowOpen        = "WindowOpen"
	ReasonRolloutInProgress = "RolloutInProgress"
	ReasonRolloutSettling   = "RolloutSettling"
	ReasonWorkloadsUnknown  = "WorkloadsUnreadable"
	ReasonInvalidBlackout   = "InvalidBlackout"
	ReasonSkippedBlackout   = runstatus.OutcomeSkippedBlackout
	ReasonDeferred          = "Deferred"
)

// rolloutRefIndex indexes LockedCronJobs by the workloads they reference:
// "<Kind>/<name>" for a reference by name, "<Kind>/selector" for one by selector (the
// cache scopes the keys per namespace).
const rolloutRefIndex = ".spec.blackout.rollouts"

// upcomingCount is how many occurrences status.upcoming previews.
const upcomingCount = 5

// unreadableRetry is how soon a job whose workloads could not be read looks again.
const unreadableRetry = 5 * time.Second

// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch

func refKeys(job *v1alpha1.LockedCronJob) []string {
	if job.Spec.Blackout == nil {
		return nil
	}
	var keys []string
	for _, ref := range job.Spec.Blackout.Rollouts {
		k := string(ref.Kind) + "/" + ref.Name
		if ref.Selector != nil {
			k = string(ref.Kind) + "/selector"
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// workloadKinds are the kinds a rollout reference may name, with an empty object of each.
var workloadKinds = []struct {
	kind v1alpha1.WorkloadKind
	obj  func() client.Object
	list func() client.ObjectList
}{
	{v1alpha1.KindDeployment, func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }},
	{v1alpha1.KindStatefulSet, func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} }},
	{v1alpha1.KindDaemonSet, func() client.Object { return &appsv1.DaemonSet{} }, func() client.ObjectList { return &appsv1.DaemonSetList{} }},
}

// stripWorkload keeps in the workload cache only what rollout detection reads: metadata
// (labels, generation), replicas, update strategy and status. Pod templates,
// annotations and managed fields are most of a workload's size.
func stripWorkload(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Template = corev1.PodTemplateSpec{}
	case *appsv1.StatefulSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
		o.Spec.VolumeClaimTemplates = nil
	case *appsv1.DaemonSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		m.SetAnnotations(nil)
	}
	return obj, nil
}

// setupBlackout indexes LockedCronJobs by the workloads they reference and makes the
// workload cache; watchBlackout adds its watches to the controller.
func (r *LockedCronJobReconciler) setupBlackout(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.LockedCronJob{}, rolloutRefIndex, func(o client.Object) []string {
		return refKeys(o.(*v1alpha1.LockedCronJob))
	}); err != nil {
		return err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: stripWorkload,
	})
	if err != nil {
		return fmt.Errorf("workload cache: %w", err)
	}
	r.workloads = c
	return mgr.Add(c)
}

func (r *LockedCronJobReconciler) workloadSources() []source.Source {
	return []source.Source{
		workloadSource(r, &appsv1.Deployment{}, v1alpha1.KindDeployment),
		workloadSource(r, &appsv1.StatefulSet{}, v1alpha1.KindStatefulSet),
		workloadSource(r, &appsv1.DaemonSet{}, v1alpha1.KindDaemonSet),
	}
}

func workloadSource[T client.Object](r *LockedCronJobReconciler, obj T, kind v1alpha1.WorkloadKind) source.Source {
	return source.Kind(r.workloads, obj, handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o T) []reconcile.Request {
		return r.jobsReferencing(ctx, kind, o)
	}))
}

// jobsReferencing returns the jobs that reference the workload, by name or by a selector
// that matches its labels. Updates map both the old and the new object, so a label
// change that takes a workload out of a selector reaches the job too.
func (r *LockedCronJobReconciler) jobsReferencing(ctx context.Context, kind v1alpha1.WorkloadKind, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	add := func(j *v1alpha1.LockedCronJob) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(j)}
		if !slices.Contains(out, req) {
			out = append(out, req)
		}
	}
	for _, key := range []string{string(kind) + "/" + o.GetName(), string(kind) + "/selector"} {
		var jobs v1alpha1.LockedCronJobList
		if err := r.List(ctx, &jobs, client.InNamespace(o.GetNamespace()), client.MatchingFields{rolloutRefIndex: key}); err != nil {
			logf.FromContext(ctx).Error(err, "listing jobs that reference a workload", "kind", kind, "workload", o.GetName())
			continue
		}
		for i := range jobs.Items {
			j := &jobs.Items[i]
			if !strings.HasSuffix(key, "/selector") {
				add(j)
				continue
			}
			for _, ref := range j.Spec.Blackout.Rollouts {
				if ref.Kind != kind || ref.Selector == nil {
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
				if err == nil && sel.Matches(labels.Set(o.GetLabels())) {
					add(j)
					break
				}
			}
		}
	}
	return out
}

// blackoutState is what the blackout step of one pass knows.
type blackoutState struct {
	rules    *blackout.Rules
	rollouts []blackout.Rollout
	// unreadable is set when the workloads could not be read: nothing starts (fail closed).
	unreadable error
}

// observeBlackout compiles spec.blackout, reads the referenced workloads, and sets the
// Blackout condition, status.rollouts and status.upcoming. It returns nil if
// spec.blackout is invalid (Ready=False, with the field named, and an Event).
func (r *LockedCronJobReconciler) observeBlackout(ctx context.Context, p *pass, sched *schedule.Schedule) *blackoutState {
	job, st := p.job, p.status
	rules, err := blackout.Compile(job.Spec.Blackout, job.Spec.TimeZone)
	if err != nil {
		msg := err.Error()
		if c := meta.FindStatusCondition(st.Conditions, ConditionReady); c == nil || c.Reason != ReasonInvalidBlackout || c.Message != msg {
			p.eventf(corev1.EventTypeWarning, ReasonInvalidBlackout, "%s", msg)
		}
		p.setCondition(ConditionReady, false, ReasonInvalidBlackout, msg)
		p.setCondition(ConditionBlackout, false, ReasonInvalidBlackout, "spec.blackout is invalid; no occurrence starts until it is fixed: "+msg)
		st.Upcoming = nil
		return nil
	}
	bs := &blackoutState{rules: rules}
	bs.rollouts, bs.unreadable = r.observeRollouts(ctx, p, rules)

	// The Blackout condition, and a pass exactly when it changes.
	now := p.now
	switch b := rules.At(now, bs.rollouts); {
	case bs.unreadable != nil:
		p.setCondition(ConditionBlackout, true, ReasonWorkloadsUnknown, "referenced workloads could not be read; no occurrence starts: "+bs.unreadable.Error())
		p.requeueAt(unreadableRetry)
	case !b.Blocked():
		msg := "no blackout in effect"
		if rules.Empty() {
			msg = "no blackout configured"
		}
		p.setCondition(ConditionBlackout, false, ReasonNoBlackout, msg)
	default:
		p.setCondition(ConditionBlackout, true, conditionReason(b), describeBlock(b))
		if !b.Until.IsZero() {
			p.requeueAt(b.Until.Sub(now))
		}
	}
	if cond := meta.FindStatusCondition(st.Conditions, ConditionBlackout); cond != nil && cond.Status == metav1.ConditionFalse {
		// Not blocked: look again when the next window opens, so the condition turns True
		// then (while blocked, the pass at the blackout's end does it).
		if next := rules.NextOpening(now); !next.IsZero() {
			p.requeueAt(next.Sub(now))
		}
	}

	// status.upcoming: the next occurrences and what is expected to hold each back.
	times := sched.Upcoming(now, upcomingCount)
	previews := rules.Preview(times, now, bs.rollouts)
	st.Upcoming = nil
	for i, t := range times {
		st.Upcoming = append(st.Upcoming, v1alpha1.UpcomingOccurrence{Time: metav1.NewTime(t), BlockedBy: previews[i].By})
	}
	return bs
}

func conditionReason(b blackout.Block) string {
	switch b.Cause {
	case blackout.CauseWindow:
		return ReasonWindowOpen
	case blackout.CauseSettling:
		return ReasonRolloutSettling
	}
	return ReasonRolloutInProgress
}

// describeBlock says what blocks and until when, for conditions and events.
func describeBlock(b blackout.Block) string {
	var msg string
	switch b.Cause {
	case blackout.CauseWindow:
		msg = b.By + " is open"
	case blackout.CauseSettling:
		msg = b.By + " is settling after its rollout"
	default:
		msg = b.By + " is rolling out"
	}
	if b.Why != "" {
		msg += " (" + b.Why + ")"
	}
	if b.Until.IsZero() {
		return msg + "; until the rollout completes"
	}
	return msg + "; until " + b.Until.UTC().Format(time.RFC3339)
}

// observeRollouts reads the workloads the rules reference and updates status.rollouts:
// a workload is recorded when first seen rolling out, gets its completion time when seen
// complete, and is dropped once settled. The completion time is the Deployment's own
// (its Progressing condition) when it has one that is not older than the rollout we saw;
// otherwise the time this controller first saw the workload complete, which status keeps
// across restarts (a restart during a rollout sees it complete later, so settle ends
// later, never earlier). A workload that rolled out entirely while the controller was
// down, and records no completion itself, gets no settle time.
func (r *LockedCronJobReconciler) observeRollouts(ctx context.Context, p *pass, rules *blackout.Rules) ([]blackout.Rollout, error) {
	st, ns, now := p.status, p.job.Namespace, p.now
	prev := map[string]v1alpha1.ObservedRollout{}
	for _, o := range st.Rollouts {
		prev[string(o.Kind)+"/"+o.Name] = o
	}
	var out []blackout.Rollout
	var keep []v1alpha1.ObservedRollout
	seen := map[string]bool{}
	for _, ref := range rules.Refs {
		objs, err := r.readWorkloads(ctx, ns, ref)
		if err != nil {
			// status.rollouts stays as it was, so that a read error loses no completion time.
			return nil, fmt.Errorf("%s: %w", ref.Field, err)
		}
		for _, obj := range objs {
			inProgress, why, completed := blackout.RolloutOf(obj)
			w := blackout.Rollout{Kind: ref.Kind, Name: obj.GetName(), InProgress: inProgress, Why: why, Settle: ref.Settle}
			key := w.ID()
			old, had := prev[key]
			if inProgress {
				w.Since = now
				if had && old.CompletedAt == nil {
					w.Since = old.Since.Time
				}
			} else {
				switch {
				case had && old.CompletedAt == nil && (completed.IsZero() || completed.Before(old.Since.Time)):
					completed = now // seen rolling, now complete
				case had && old.CompletedAt != nil && completed.IsZero():
					completed = old.CompletedAt.Time
				}
				w.CompletedAt = completed
				w.Since = completed
				if had {
					w.Since = old.Since.Time
				}
			}
			out = append(out, w)
			if seen[key] {
				continue
			}
			if w.InProgress || (!w.SettledAt().IsZero() && now.Before(w.SettledAt())) {
				seen[key] = true
				o := v1alpha1.ObservedRollout{Kind: w.Kind, Name: w.Name, Since: metav1.NewTime(w.Since)}
				if !w.InProgress {
					o.CompletedAt = &metav1.Time{Time: w.CompletedAt}
				}
				keep = append(keep, o)
			}
		}
	}
	slices.SortFunc(keep, func(a, b v1alpha1.ObservedRollout) int {
		return strings.Compare(string(a.Kind)+"/"+a.Name, string(b.Kind)+"/"+b.Name)
	})
	st.Rollouts = keep
	return out, nil
}

// readWorkloads returns the workloads a reference names (none if it names one that does
// not exist: a missing workload is not rolling out).
func (r *LockedCronJobReconciler) readWorkloads(ctx context.Context, ns string, ref blackout.Ref) ([]client.Object, error) {
	for _, k := range workloadKinds {
		if k.kind != ref.Kind {
			continue
		}
		if ref.Selector == nil {
			obj := k.obj()
			if err := r.workloads.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, nil
				}
				return nil, err
			}
			return []client.Object{obj}, nil
		}
		list := k.list()
		if err := r.workloads.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: ref.Selector}); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		out := make([]client.Object, 0, len(items))
		for _, it := range items {
			out = append(out, it.(client.Object))
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown kind %q", ref.Kind)
}

// accountDeferred corrects Plan's missed count while an occurrence is deferred. A
// deferred occurrence leaves lastScheduleTime where it was, so Plan counts again, on
// every pass, the occurrences before it (already counted when it was deferred): those
// are taken off. If a newer occurrence has replaced it while the blackout lasted, it
// never started because of the blackout: it counts as skippedBlackout rather than
// missed (unless its own starting deadline had passed first).
func accountDeferred(p *pass, plan *schedule.Plan, sched *schedule.Schedule, earliest time.Time) {
	st := p.status
	deferred := st.Deferred
	st.Deferred = nil
	if deferred == nil || !deferred.After(earliest) || plan.Latest == nil || deferred.After(*plan.Latest) {
		return
	}
	before := sched.Plan(schedule.Input{Earliest: earliest, Now: deferred.Time})
	plan.Missed -= min(before.Missed, plan.Missed)
	if !plan.Latest.After(deferred.Time) || plan.Missed == 0 {
		return // still the latest: decided by applyBlackout, or missed by Plan
	}
	if dl := startingDeadline(p.job); dl != nil && plan.Latest.Sub(deferred.Time) > *dl {
		return // its deadline passed first: missed
	}
	plan.Missed--
	p.record(runstatus.OutcomeSkippedBlackout, deferred.Time, fmt.Sprintf("deferred, then superseded by occurrence %s while the blackout lasted", plan.Latest.UTC().Format(time.RFC3339)))
}

// applyBlackout decides what becomes of the due occurrence and records it. It returns
// true if the occurrence may start now.
func applyBlackout(p *pass, bs *blackoutState, due time.Time, wasDeferred *metav1.Time) bool {
	job, st := p.job, p.status
	occ := due.UTC().Format(time.RFC3339)
	if bs.unreadable != nil {
		// Fail closed: keep the occurrence due (within its deadline) until the workloads can be read.
		if wasDeferred == nil || !wasDeferred.Time.Equal(due) {
			p.eventf(corev1.EventTypeWarning, ReasonDeferred, "occurrence %s held back: referenced workloads could not be read: %v", occ, bs.unreadable)
		}
		st.Deferred = &metav1.Time{Time: due}
		return false
	}
	d := bs.rules.Decide(due, p.now, startingDeadline(job), bs.rollouts)
	switch d.Action {
	case blackout.Run:
		return true
	case blackout.Skip:
		st.LastScheduleTime = &metav1.Time{Time: due}
		p.record(runstatus.OutcomeSkippedBlackout, due, describeBlock(d.Block))
		return false
	case blackout.Miss:
		st.LastScheduleTime = &metav1.Time{Time: due}
		p.record(runstatus.OutcomeMissed, due, fmt.Sprintf("blackout past startingDeadlineSeconds (%s): %s", d.Deadline.UTC().Format(time.RFC3339), describeBlock(d.Block)))
		return false
	}
	// Defer: keep it due; come back when the blackout ends, or at its deadline.
	st.Deferred = &metav1.Time{Time: due}
	if wasDeferred == nil || !wasDeferred.Time.Equal(due) {
		latest := "no deadline"
		if !d.Deadline.IsZero() {
			latest = "at the latest " + d.Deadline.UTC().Format(time.RFC3339)
		}
		p.eventf(corev1.EventTypeNormal, ReasonDeferred, "occurrence %s deferred: %s; it starts when the blackout ends (%s)", occ, describeBlock(d.Block), latest)
		p.log.Info("occurrence decided", "outcome", ReasonDeferred, "occurrence", occ, "reason", describeBlock(d.Block), "latest", latest)
	}
	if !d.Block.Until.IsZero() {
		p.requeueAt(d.Block.Until.Sub(p.now))
	}
	if !d.Deadline.IsZero() {
		p.requeueAt(d.Deadline.Sub(p.now) + 10*time.Millisecond)
	}
	return false
}
