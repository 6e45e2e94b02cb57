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
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// The controller's side of spec.blackout: it reads the referenced workloads (from a cache
// of their own, stripped of pod templates), keeps status.rollouts, sets the Blackout
// condition and status.upcoming, and applies the decision of package blackout to the
// due occurrence. Workload events reach only the jobs that reference the workload,
// through a field index on LockedCronJobs.

// Reasons of the Blackout condition and of blackout Events (package blackout words them).
const (
	ReasonNoBlackout        = blackout.ReasonNoBlackout
	ReasonWindowOpen        = blackout.ReasonWindowOpen
	ReasonRolloutInProgress = blackout.ReasonRolloutInProgress
	ReasonRolloutSettling   = blackout.ReasonRolloutSettling
	ReasonWorkloadsUnknown  = blackout.ReasonWorkloadsUnknown
	ReasonInvalidBlackout   = blackout.ReasonInvalidBlackout
	ReasonSkippedBlackout   = runstatus.OutcomeSkippedBlackout
	ReasonDeferred          = blackout.ReasonDeferred
)

// rolloutRefIndex indexes LockedCronJobs by the workloads they reference (the keys are
// blackout.IndexKeys; the cache scopes them per namespace).
const rolloutRefIndex = ".spec.blackout.rollouts"

// upcomingCount is how many occurrences status.upcoming previews.
const upcomingCount = 5

// unreadableRetry is how soon a job whose workloads could not be read looks again.
const unreadableRetry = 5 * time.Second

// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list;watch

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
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.LockedCronJob{}, rolloutRefIndex, rolloutRefKeys); err != nil {
		return err
	}
	opts := cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: stripWorkload,
	}
	// In the namespaces the manager acts in only, as its own cache: with --watch-namespaces
	// its rights may be Roles there (config/namespaced), and a cluster-wide list was
	// refused, so that this cache never synced and the controller never started.
	for _, ns := range r.WatchNamespaces {
		if opts.DefaultNamespaces == nil {
			opts.DefaultNamespaces = map[string]cache.Config{}
		}
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return fmt.Errorf("workload cache: %w", err)
	}
	r.workloads = c
	return mgr.Add(c)
}

// rolloutRefKeys indexes a cached job by the workloads it references (rolloutRefIndex):
// a cachedJob by the keys slimJob kept (without decoding the job, for the old and the new
// job of every update), a *v1alpha1.LockedCronJob (a cache without slimJob) by its spec.
func rolloutRefKeys(o client.Object) []string {
	switch j := o.(type) {
	case *cachedJob:
		return j.rolloutKeys
	case *v1alpha1.LockedCronJob:
		return blackout.IndexKeys(j.Spec.Blackout)
	}
	return nil
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
	byName, bySelector := blackout.WorkloadKeys(kind, o.GetName())
	for _, key := range []string{byName, bySelector} {
		var jobs v1alpha1.LockedCronJobList
		if err := r.List(ctx, &jobs, client.InNamespace(o.GetNamespace()), client.MatchingFields{rolloutRefIndex: key}); err != nil {
			logf.FromContext(ctx).Error(err, "listing jobs that reference a workload", "kind", kind, "workload", o.GetName())
			continue
		}
		for i := range jobs.Items {
			j := &jobs.Items[i]
			if key == byName || blackout.Selects(j.Spec.Blackout, kind, o.GetLabels()) {
				add(j)
			}
		}
	}
	return out
}

// blackoutState is what the blackout step of one pass knows.
type blackoutState struct {
	rules    *blackout.Rules
	rollouts []blackout.Rollout
	// workloads are what each of rules.Refs names, as read (nil when unreadable).
	workloads [][]metav1.Object
	// unreadable is set when the workloads could not be read: nothing starts (fail closed).
	unreadable error
	// wasDeferred is status.deferred as the pass found it.
	wasDeferred *metav1.Time
}

// observeBlackout compiles spec.blackout, reads the referenced workloads, and sets the
// Blackout condition, status.rollouts and status.upcoming. Then it corrects the plan
// while an occurrence is deferred (accountDeferred) and, while a blackout is in effect,
// drops the pods that have not started their job. It returns nil if spec.blackout is
// invalid (Ready=False, with the field named, and an Event).
func (r *LockedCronJobReconciler) observeBlackout(ctx context.Context, p *pass, sched *schedule.Schedule, plan *schedule.Plan, earliest time.Time, deadline *time.Duration) *blackoutState {
	st, now := p.status, p.now
	bs, err := r.readBlackout(ctx, p)
	if err != nil {
		msg := err.Error()
		if p.setCondition(ConditionReady, false, ReasonInvalidBlackout, msg) {
			p.eventf(corev1.EventTypeWarning, ReasonInvalidBlackout, "%s", msg)
		}
		p.setCondition(ConditionBlackout, false, ReasonInvalidBlackout, "spec.blackout is invalid; no occurrence starts until it is fixed: "+msg)
		st.Upcoming = nil
		return nil
	}
	rules := bs.rules

	// The Blackout condition, and a pass exactly when it changes.
	c := rules.Condition(now, bs.rollouts, bs.unreadable)
	if bs.unreadable == nil {
		if none := blackout.Unmatched(rules.Refs, bs.workloads); none != "" {
			c.Message += "; " + none
		}
	}
	p.setCondition(ConditionBlackout, c.Blocked, c.Reason, c.Message)
	if !c.Recheck.IsZero() {
		p.requeueAt(c.Recheck.Sub(now))
	}
	if bs.unreadable != nil {
		p.requeueAt(unreadableRetry)
	}

	// status.upcoming: the next occurrences and what is expected to hold each back.
	st.Upcoming = rules.Upcoming(sched.Upcoming(now, upcomingCount), now, bs.rollouts)

	bs.wasDeferred = st.Deferred
	if bs.unreadable != nil {
		accountDeferred(p, plan, sched, earliest, deadline, "the workloads spec.blackout.rollouts names could not be read since")
		return bs
	}
	b := rules.At(now, bs.rollouts)
	holding := ""
	if b.Blocked() {
		holding = b.Describe() + ", which lasted past it"
	}
	accountDeferred(p, plan, sched, earliest, deadline, holding)
	if b.Blocked() {
		// A pod whose job has not started when a blackout is in effect was created
		// before the blackout began: it does not start (it is deleted, counted missed).
		p.withdrawUnstarted(b.Describe())
	}
	return bs
}

// readBlackout compiles spec.blackout (an error names the field) and reads, at the pass's
// time, the workloads it names and their rollouts into status.rollouts. A read error is
// kept in unreadable and status.rollouts stays as it was, so that it loses no completion
// time.
func (r *LockedCronJobReconciler) readBlackout(ctx context.Context, p *pass) (*blackoutState, error) {
	rules, err := blackout.Compile(p.job.Spec.Blackout, p.job.Spec.TimeZone)
	if err != nil {
		return nil, err
	}
	bs := &blackoutState{rules: rules}
	if bs.workloads, err = r.readRefs(ctx, p.job.Namespace, rules.Refs); err != nil {
		bs.unreadable = err
		return bs, nil
	}
	bs.rollouts, p.status.Rollouts = blackout.ObserveRollouts(p.now, rules.Refs, bs.workloads, p.status.Rollouts)
	return bs, nil
}

// readRefs reads the workloads each reference names (in the order of refs).
func (r *LockedCronJobReconciler) readRefs(ctx context.Context, ns string, refs []blackout.Ref) ([][]metav1.Object, error) {
	out := make([][]metav1.Object, 0, len(refs))
	for _, ref := range refs {
		objs, err := r.readWorkloads(ctx, ns, ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref.Field, err)
		}
		out = append(out, objs)
	}
	return out, nil
}

// readWorkloads returns the workloads a reference names (none if it names one that does
// not exist: a missing workload is not rolling out).
func (r *LockedCronJobReconciler) readWorkloads(ctx context.Context, ns string, ref blackout.Ref) ([]metav1.Object, error) {
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
			return []metav1.Object{obj}, nil
		}
		list := k.list()
		if err := r.workloads.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: ref.Selector}); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		out := make([]metav1.Object, 0, len(items))
		for _, it := range items {
			out = append(out, it.(metav1.Object))
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown kind %q", ref.Kind)
}

// accountDeferred applies blackout.CorrectDeferred to the plan while an occurrence is
// deferred, and records a deferred occurrence that a newer one superseded as
// skippedBlackout, and one whose startingDeadlineSeconds passed while it was deferred as
// missed for that (holding: what holds the job back now, as a clause; "" if nothing does). status.deferred
// is cleared: applyBlackout sets it again if the due occurrence is still held back.
func accountDeferred(p *pass, plan *schedule.Plan, sched *schedule.Schedule, earliest time.Time, deadline *time.Duration, holding string) {
	deferred := p.status.Deferred
	p.status.Deferred = nil
	if deferred == nil {
		return
	}
	decided := func() {
		// Decided: lastScheduleTime says so, or a reader that plans from it alone (a
		// schedule change, a suspension) would count it again.
		if st := p.status; st.LastScheduleTime == nil || deferred.After(st.LastScheduleTime.Time) {
			st.LastScheduleTime = deferred.DeepCopy()
		}
	}
	superseded, reason := blackout.CorrectDeferred(plan, sched, earliest, deferred.Time, deadline)
	switch {
	case superseded:
		p.record(runstatus.OutcomeSkippedBlackout, CauseSuperseded, deferred.Time, reason)
		decided()
	case deadline != nil && plan.Due == nil && plan.Missed > 0 && plan.Latest != nil && plan.Latest.Equal(deferred.Time):
		// Its deadline passed while it was deferred (the blackout's end was not known
		// when it was deferred, or moved later): the plan has it missed, and the pass
		// would say the controller was down or busy.
		why := fmt.Sprintf("deferred by a blackout and not started within startingDeadlineSeconds (%s)", deadline)
		if holding != "" {
			why += ": " + holding
		} else {
			why += ": the blackout ended too late for it, or the controller was down or busy when it ended"
		}
		p.record(runstatus.OutcomeMissed, CauseBlackoutPastDeadline, deferred.Time, why)
		plan.Missed--
		decided()
	}
}

// applyBlackout decides what becomes of the due occurrence (blackout.Rules.Decide) and
// records it. It returns true if the occurrence may start now.
func applyBlackout(p *pass, bs *blackoutState, due time.Time, deadline *time.Duration) bool {
	st := p.status
	occ := due.UTC().Format(time.RFC3339)
	announce := bs.wasDeferred == nil || !bs.wasDeferred.Time.Equal(due)
	if bs.unreadable != nil {
		// Fail closed: keep the occurrence due (within its deadline) until the workloads can be read.
		if announce {
			p.eventf(corev1.EventTypeWarning, ReasonDeferred, "occurrence %s held back: referenced workloads could not be read: %v", occ, bs.unreadable)
		}
		st.Deferred = &metav1.Time{Time: due}
		return false
	}
	d := bs.rules.Decide(due, p.now, deadline, bs.rollouts)
	switch d.Action {
	case blackout.Run:
		return true
	case blackout.Skip:
		st.LastScheduleTime = &metav1.Time{Time: due}
		p.record(runstatus.OutcomeSkippedBlackout, blackoutCause(d.Block), due, d.Reason())
		return false
	case blackout.Miss:
		st.LastScheduleTime = &metav1.Time{Time: due}
		p.record(runstatus.OutcomeMissed, CauseBlackoutPastDeadline, due, d.Reason())
		return false
	}
	// Defer: keep it due; come back when the blackout ends, or at its deadline.
	st.Deferred = &metav1.Time{Time: due}
	if announce {
		p.eventf(corev1.EventTypeNormal, ReasonDeferred, "occurrence %s deferred: %s; it starts when the blackout ends (%s)", occ, d.Reason(), d.Latest())
		p.log.Info("occurrence decided", "outcome", ReasonDeferred, "occurrence", occ, "reason", d.Reason(), "latest", d.Latest())
	}
	if !d.Block.Until.IsZero() {
		p.requeueAt(d.Block.Until.Sub(p.now))
	}
	if !d.Deadline.IsZero() {
		p.requeueAt(d.Deadline.Sub(p.now) + 10*time.Millisecond)
	}
	return false
}

// maxEventAction is the longest action the API server accepts on an Event.
const maxEventAction = 128

// blackoutCause is a blackout skip's Event series cause: the kind of block and what blocks
// (`Window window "maint"`, `Rollout Deployment/api`), so that each window or workload has
// a series of its own, whose note names it (a series keeps its first note: with the kind
// alone, a skip for window "b" after one for window "a" added to a series that named "a").
// Cut to the length an Event's action may have, on a character boundary.
func blackoutCause(b blackout.Block) string {
	return report.TruncateRunes(strings.TrimSpace(string(b.Cause)+" "+b.By), maxEventAction)
}

// keepMarker tells the blackout markers (markers.go) whether a blackout holds the job back
// now. A pass that stopped before the blackout step (a suspended job, an invalid
// schedule) reads spec.blackout now if the job has pods that may wait for the lock or a
// marker to end, and comes back when that changes (a window opens or closes, a settle
// ends: the blackout step's requeue, which such a pass does not reach). A pass that cannot
// tell (spec.blackout invalid, the workloads unreadable) changes nothing: the marker stays
// as it was, as no occurrence starts then either.
func (r *LockedCronJobReconciler) keepMarker(ctx context.Context, p *pass) {
	job := types.NamespacedName{Namespace: p.job.Namespace, Name: p.job.Name}
	bs := p.blackout
	if bs == nil {
		if len(p.active) == 0 && !r.markers.holding(job) {
			return
		}
		var err error
		if bs, err = r.blackoutNow(ctx, p); err != nil {
			return
		}
		if c := bs.rules.Condition(p.now, bs.rollouts, bs.unreadable); !c.Recheck.IsZero() {
			p.requeueAt(c.Recheck.Sub(p.now))
		}
		if bs.unreadable != nil {
			p.requeueAt(unreadableRetry)
		}
	}
	if bs.unreadable != nil {
		return
	}
	b := bs.rules.At(p.now, bs.rollouts)
	r.markers.observe(job, markerView{uid: p.job.UID, key: runpod.LockKey(p.job), secret: p.job.Spec.Lock.Redis.SecretRef.Name,
		guarded: p.job.Spec.Blackout != nil, blocked: b.Blocked(), reason: b.Describe()}, p.now)
}
