// Package controller holds the LockedCronJob reconciler: thin steps around the pure
// packages schedule (when), runpod (what pod) and runstatus (what happened).
//
// It is no API package: controller-gen makes no CRD of its types (cachedJob embeds
// TypeMeta and ObjectMeta to read as a job, which would make it a kind); its RBAC markers
// are read.
//
// +kubebuilder:skip
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/metrics"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// Condition types.
const (
	ConditionReady            = "Ready"
	ConditionLockBackendReady = "LockBackendReady"
	ConditionBlackout         = "Blackout"
)

// Reasons of the Ready condition and of Events. They are stable: alerts may match them.
const (
	ReasonScheduled          = "Scheduled"
	ReasonSuspended          = "Suspended"
	ReasonInvalidSchedule    = "InvalidSchedule"
	ReasonScheduleNeverFires = "ScheduleNeverFires"
	ReasonInvalidTemplate    = "InvalidTemplate"
	ReasonLockBackend        = "LockBackendUnavailable"
	// ReasonStarted is no longer emitted: a routine pod creation has no Event (the pod is
	// the record; issue 13). Kept so that nothing else reuses the reason.
	ReasonStarted      = "Started"
	ReasonMissed       = "Missed"
	ReasonPodNameTaken = "PodNameTaken"
	// ReasonPodCreateUnknown: a pod POST failed without an answer (timeout, connection
	// reset); whether the pod exists is checked before anything else is planned.
	ReasonPodCreateUnknown = "PodCreateUnknown"
	// ReasonPodCreateRefused: the API server refused a pod POST for now (a quota, Pod
	// Security, throttling: anything but an invalid pod); the occurrence stays due within
	// its deadline and the pod is asked for again.
	ReasonPodCreateRefused = "PodCreateRefused"
	ReasonReportInvalid    = "ReportInvalid"
	// ReasonChangedBeforeSeen: spec.schedule, spec.timeZone or spec.suspend changed after
	// the job's creation and before the controller first saw it (it was down); what fell
	// due before the change is neither started nor counted.
	ReasonChangedBeforeSeen = "ChangedBeforeFirstSeen"
	// ReasonStatusRejected: the API server refused the job's status as the controller
	// writes it back (a value it stored but cannot take again: a time past the year 9999
	// in UTC); the job's runs are not recorded nor its pods counted until the field is
	// corrected.
	ReasonStatusRejected = "StatusRejected"
	// ReasonStatusAhead: status.lastScheduleTime or status.scheduleSince was further
	// ahead of the controller's clock than maxStatusAhead; the schedule runs from the
	// clock's current second.
	ReasonStatusAhead = "StatusAheadOfClock"
)

// ownerIndex indexes pods by the name of their controlling LockedCronJob. A pass lists
// its job's pods with client.MatchingFields{ownerIndex: name} in the job's namespace.
const ownerIndex = ".metadata.controller.lockedcronjob"

// ownerIndexName is the informer's index that a cached List with
// client.MatchingFields{ownerIndex: …} reads: controller-runtime's name for a field's
// index ("field:" and the field), keyed "namespace/value" in a namespace. SetupWithManager
// adds it to the pod informer itself rather than through IndexField, which keys every pod
// twice, the second time under "__all_namespaces/value" for a List across namespaces that
// no pass makes: at 5,000 jobs and their 20,000 pods that key held 1.7 MB of a 45 MB live
// heap (issue 13; 162 against 79 bytes a pod in a client-go indexer). If controller-runtime
// came to name its field indexes otherwise, every pass's List would fail (no such index);
// to key them otherwise, every pass would list no pods. The envtest suite, which lists
// through the manager's cache, fails either way.
const ownerIndexName = "field:" + ownerIndex

// ownerIndexKeys is the owner index's key of a pod: its namespace and the name of the
// LockedCronJob that controls it, or of the one its label names for a pod no owner
// controls any more that is still the controller's to deal with (orphanedJob, which a
// pass takes for a foreign pod); none for any other pod.
func ownerIndexKeys(obj any) ([]string, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return nil, nil
	}
	name, ok := indexedJob(o)
	if !ok {
		return nil, nil
	}
	return []string{o.GetNamespace() + "/" + name}, nil
}

// backendRetry is how soon a job whose lock backend is not usable is looked at again
// (Secrets are read, not watched, so that the manager never lists them).
const backendRetry = 15 * time.Second

// conflictRetry is how soon a pass whose status write lost a conflict runs again.
const conflictRetry = 100 * time.Millisecond

// LockedCronJobReconciler creates one pod per occurrence and folds the pods' reports
// into status.
type LockedCronJobReconciler struct {
	client.Client
	// APIReader reads Secrets straight from the API server.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Clock is the time source; SetupWithManager defaults it to the real clock.
	Clock clock.PassiveClock
	// Pod holds the controller-wide pod settings (cluster name, wrapper image).
	Pod runpod.Options

	backends      *backends
	health        *health
	ledger        *ledgerLookups
	markers       *blackoutMarkers
	decided       decided
	unanswered    unanswered // status writes whose answer was lost (lostanswer.go)
	caughtUp      caughtUp
	stopRecording func() // the recorder SetupWithManager made (newRecorder); nil if given one
	// MaxConcurrentReconciles is how many jobs are reconciled at once (default 5, as
	// kube-controller-manager's --concurrent-cron-job-syncs).
	MaxConcurrentReconciles int
	// ReconcileTimeout bounds one reconcile (default one minute): a pass whose API call
	// is never answered is cancelled, its worker freed, and the job tried again.
	ReconcileTimeout time.Duration
	// SecretTTL is how long a Secret read is reused (default one minute): a changed
	// Secret is seen within it and one ProbeInterval. ProbeInterval is how often each
	// Secret's Redis is pinged in the background (default 10s).
	SecretTTL, ProbeInterval time.Duration
	// workloads caches the Deployments, StatefulSets and DaemonSets that blackouts
	// reference (see blackout.go).
	workloads cache.Cache
	// WatchNamespaces are the namespaces the manager acts in (--watch-namespaces); none:
	// all. A new leader lists them to see its caches catch up (takeover.go).
	WatchNamespaces []string
	// MinScheduleInterval (--min-schedule-interval): a job whose schedule fires more often
	// is not scheduled (Ready=False InvalidSchedule). Zero: any schedule.
	MinScheduleInterval time.Duration
	gaps                scheduleGaps
}

// +kubebuilder:rbac:groups=scheduling.lockedcron.io,resources=lockedcronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.lockedcron.io,resources=lockedcronjobs/status,verbs=update
// +kubebuilder:rbac:groups=scheduling.lockedcron.io,resources=lockedcronjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system

// pass is the state of one reconcile: the status being built and the Events to emit
// once it is written.
type pass struct {
	job     *v1alpha1.LockedCronJob
	status  *v1alpha1.LockedCronJobStatus
	now     time.Time
	log     logr.Logger
	told    // what the pass tells once its status is written
	requeue time.Duration

	// The job's pods, as track sorted them (see accounting.go).
	active      []*corev1.Pod
	countedPods []string        // status.countedPods: counted this pass, or not yet marked
	marked      map[string]bool // pods seen labelled counted (deferrable)
	mark        []*corev1.Pod   // to label counted and release (after the status write)
	doomed      []*corev1.Pod   // counted as never started: to delete
	history     []*corev1.Pod   // finished and marked: pruned to the history limits
	// withdrawn: prepared ahead, no longer wanted before their instant: deleted with the
	// reason noted (runpod.AnnotationWithdrawnAhead), counted only if their job ran.
	withdrawn []withdrawal
	// holdCreates: the occurrence's pod POST lost its answer (decided.noteUnsure: one
	// doubt per job, which a second lost answer would replace) or was refused for now
	// (it stays due, and a prepared next pod would make it a backlog miss): the pass
	// prepares no next occurrence. (A run request's pod is its own.)
	holdCreates bool
	// aside: withdrawn ahead and not (or not yet) known to have run, by name: they do not
	// stand for their occurrence, which the schedule decides once they have said
	// (prepare.go).
	aside map[string]asideEntry
	// withdrawing: not started as far as they say, and must not start
	// (tracking.Withdraw): deleted with the reason noted, counted from what the deletion
	// (unbound) or the kubelet says.
	withdrawing []withdrawal
	// dueBeforeChange: pods withdrawn ahead whose occurrence a change of the schedule left
	// to them in this pass (accountUntilChange): status.dueBeforeChange.
	dueBeforeChange []string
	seen            []string // names of all the job's pods in the cache
	// blackout: what the schedule step found of spec.blackout (nil when it did not get
	// that far: suspended, an invalid schedule or blackout); a run request reads it.
	blackout *blackoutState
	// plannedFrom, when set, is where distrustAhead made the schedule start: a first pass
	// or a schedule change does not move scheduleSince back before it.
	plannedFrom time.Time
}

// newPass starts a pass for job at now, with a status of its own that trusts no time too
// far ahead of now (distrustAhead).
func newPass(job *v1alpha1.LockedCronJob, now time.Time, log logr.Logger) *pass {
	p := &pass{job: job, status: job.Status.DeepCopy(), now: now, log: log}
	p.distrustAhead()
	return p
}

// maxStatusAhead is how far ahead of a pass's clock status.lastScheduleTime and
// status.scheduleSince are still trusted. The controller writes them from its own clock,
// never ahead of it, but a pass whose clock is behind the one that wrote them (an NTP
// step back, a new leader on a node whose clock is slower) reads them ahead by as much,
// and must take them as they are: lastScheduleTime says which occurrences are decided
// (tracking.Input.Decided). Further ahead they would stop the schedule until then: a
// time written by hand through the status subresource, or by a replica whose clock was
// far ahead.
const maxStatusAhead = 10 * time.Minute

// distrustAhead drops a lastScheduleTime or scheduleSince further ahead than
// maxStatusAhead: the schedule runs from the clock's current second, what fell due before
// it without a pod is neither run nor counted (nobody knows what was), and a Warning Event
// says so. Pods that exist are tracked and counted as ever (but for a prepared pod whose
// instant the new plan lacks: it is withdrawn), and lockwrap's ledger still refuses an
// occurrence that already ran.
func (p *pass) distrustAhead() {
	st, limit := p.status, p.now.Add(maxStatusAhead)
	var ahead []string
	for _, f := range []struct {
		name string
		t    *metav1.Time
	}{{"status.lastScheduleTime", st.LastScheduleTime}, {"status.scheduleSince", st.ScheduleSince}} {
		if f.t != nil && f.t.After(limit) {
			ahead = append(ahead, f.name+" "+f.t.UTC().Format(time.RFC3339))
		}
	}
	if len(ahead) == 0 {
		return
	}
	// The schedule runs from the start of the current second, stored as the API server
	// stores times (whole seconds): an occurrence in this second (a pass at an instant) is
	// planned, the ones before it are not.
	now := p.now.Truncate(time.Second)
	p.plannedFrom = now.Add(-time.Second)
	p.eventf(corev1.EventTypeWarning, ReasonStatusAhead,
		"%s more than %s ahead of the controller's clock: not trusted; the schedule runs from the clock's current second, %s, and what fell due before it without a pod is neither run nor counted",
		strings.Join(ahead, " and "), maxStatusAhead, now.UTC().Format(time.RFC3339))
	p.log.Info("status ahead of the clock, not trusted", "fields", ahead, "now", now)
	st.LastScheduleTime, st.ScheduleSince = nil, &metav1.Time{Time: p.plannedFrom}
}

// event is an Event the pass emits once its status is written. cause, for a series reason
// (seriesReasons), keys the series with the reason: what made the condition, in one word.
type event struct{ typ, reason, cause, note string }

// told is what a pass tells once its status is written (emit): Events, and the metrics
// of the runs it counted and of the occurrences it decided.
type told struct {
	events []event
	// counted are results folded in this pass.
	counted []runstatus.Result
	// recorded are the controller's own decisions.
	recorded []recorded
}

func (p *pass) eventf(typ, reason, format string, args ...any) {
	p.causedEventf(typ, reason, "", format, args...)
}

// causedEventf is eventf for a series reason whose cause can change while the condition
// lasts (a Missed for a missing Secret, then for a pod that does not start).
func (p *pass) causedEventf(typ, reason, cause, format string, args ...any) {
	// Escaped, as in status: a note may quote what a tenant or a kubelet wrote.
	note := printable.Text(fmt.Sprintf(format, args...))
	if len(note) > maxEventNote {
		// The API server refuses a longer note, and the Event with it (a kubelet's pull
		// error, Pod Security's refusal and a report's warnings can be that long).
		note = report.Shorten(note, maxEventNote-len("…"))
	}
	p.events = append(p.events, event{typ, reason, cause, note})
}

// maxConditionMessage is the longest message a condition may hold (metav1.Condition's
// maxLength, in characters: bytes bound it).
const maxConditionMessage = 32768

// maxEventNote is the longest note the API server accepts on an Event (events/v1).
const maxEventNote = 1024

func (p *pass) requeueAt(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

// setCondition sets the condition, its message with the controls a terminal acts on
// escaped (it may quote what a tenant, a kubelet or a Redis server wrote) and cut to what
// a condition holds, and reports whether its status, reason or message changed.
func (p *pass) setCondition(typ string, ok bool, reason, msg string) (changed bool) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	// A longer message (a tenant's url of thousands of hosts, each quoted) gets the whole
	// status write refused, at every pass.
	msg = report.Shorten(printable.Text(msg), maxConditionMessage-len("…"))
	prev := meta.FindStatusCondition(p.status.Conditions, typ)
	changed = prev == nil || prev.Status != s || prev.Reason != reason || prev.Message != msg
	meta.SetStatusCondition(&p.status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: p.job.Generation,
	})
	return changed
}

// Reconcile runs one pass for one LockedCronJob.
func (r *LockedCronJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	// 1: load the job.
	var job v1alpha1.LockedCronJob
	err := r.Get(ctx, req.NamespacedName, &job)
	if _, notHeld := job.Annotations[annotationTemplateNotHeld]; err == nil && notHeld {
		// The cache holds it without its template (too large to hold: slimJob): read whole,
		// and as the cache would hold it otherwise (the managed fields a pass reads), before
		// anything reads it (the lost-answer check compares its resourceVersion with the
		// writes it made; the deletion check) (helper-117).
		job = v1alpha1.LockedCronJob{}
		if err = r.APIReader.Get(ctx, req.NamespacedName, &job); err == nil {
			job.ManagedFields = slimManagedFields(job.ManagedFields)
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			// The job cache can be behind the job's creation (its pod's event came first; a
			// new leader's caches): releasing the pods of a job that exists would let one be
			// deleted uncounted. The server says.
			if live, err := liveMeta(ctx, r.APIReader, v1alpha1.GroupVersion.WithKind("LockedCronJob"), req.NamespacedName); err != nil {
				return ctrl.Result{}, err
			} else if live != nil {
				return ctrl.Result{RequeueAfter: caughtUpRetry}, nil
			}
			metrics.Forget(req.Namespace, req.Name)
			r.health.forget(req.NamespacedName)
			r.markers.forget(req.NamespacedName)
			r.decided.forget(req.NamespacedName)
			r.unanswered.forget(req.NamespacedName)
			// No pod of a deleted job keeps the tracking finalizer.
			return ctrl.Result{}, r.releasePods(ctx, req.Namespace, req.Name, "", time.Time{})
		}
		return ctrl.Result{}, err
	}
	// An earlier pass's status write whose answer was lost (lostanswer.go).
	if wait, err := r.checkUnanswered(ctx, &job); err != nil {
		return ctrl.Result{}, err
	} else if wait {
		return ctrl.Result{RequeueAfter: caughtUpRetry}, nil
	}
	if !job.DeletionTimestamp.IsZero() {
		// Foreground deletion waits for the pods: release them.
		return ctrl.Result{}, r.releasePods(ctx, job.Namespace, job.Name, job.UID, decidedUpTo(&job.Status))
	}
	p := newPass(&job, r.Clock.Now(), log)

	// 2: list its pods (through the owner index of the cache).
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingFields{ownerIndex: job.Name}); err != nil {
		return ctrl.Result{}, err
	}

	// 2b: after an election, nothing until the caches show what the leaders before wrote
	// (takeover.go).
	if after, err := r.caughtUp.wait(ctx, r.APIReader, &job, pods.Items, p.now, log); err != nil {
		return ctrl.Result{}, err
	} else if after > 0 {
		return ctrl.Result{RequeueAfter: after}, nil
	}

	// 2c: only the job's own pods, not those of an earlier job of its name (released).
	own, foreign := ownPods(pods.Items, job.UID)
	if err := r.releaseForeign(ctx, &job, foreign); err != nil {
		// Another job's pods: this job's pass goes on, and they are looked at again.
		log.Error(err, "releasing the pods of an earlier job of this name; trying again", "in", backendRetry)
		p.requeueAt(backendRetry)
	}

	// 3: count each pod once: fold the reports of finished pods, count the pods that never
	// started (deleted, or past their deadline) missed; the rest are active.
	p.track(own)
	if err := r.resolveUnsure(ctx, &job, p.now); err != nil {
		return ctrl.Result{}, err
	}
	// lastScheduleTime up to the newest occurrence decided (catchup.go).
	written, created := r.decided.of(&job)
	p.catchUp(p.standing(own), written, created)
	for i := range own {
		p.seen = append(p.seen, own[i].Name)
	}

	// 4: is the lock backend usable? (As last seen: no Redis round trip here, and the
	// Secret read at most once a minute; see health.go.)
	bst := r.health.state(ctx, req.NamespacedName, job.Spec.Lock.Redis.SecretRef.Name)
	warnings, berr := bst.warnings, bst.err
	switch {
	case !bst.known:
		// Redis not probed yet: the condition stays as it was; the probe's answer wakes
		// this job.
	case berr != nil:
		p.setCondition(ConditionLockBackendReady, false, berr.reason, berr.Error())
		p.requeueAt(backendRetry)
	case len(warnings) > 0:
		// Usable, and lockwrap is the authority: pods are still created; users are told.
		if notDurableEvent(meta.FindStatusCondition(p.status.Conditions, ConditionLockBackendReady), warnings) {
			p.eventf(corev1.EventTypeWarning, ReasonNotDurable, "%s", durabilityMessage(warnings))
		}
		p.setCondition(ConditionLockBackendReady, true, ReasonNotDurable, durabilityMessage(warnings))
	default:
		p.setCondition(ConditionLockBackendReady, true, ReasonRedisReachable, "Secret read and Redis answered")
	}

	// 5: plan the schedule and start the due occurrence.
	if created := r.schedule(ctx, p, berr); created != nil {
		p.active = append(p.active, created)
	}
	r.manualRun(ctx, p, bst.client, berr) // 5d: a new run request (manual.go)
	r.keepMarker(ctx, p)                  // 5e: the blackout marker in Redis (markers.go)

	// 6: status that follows from the world.
	setActive(p.status, p.active)
	p.bookkeeping()
	p.status.LockKey = runpod.LockKey(&job)
	p.status.ObservedGeneration = job.Generation

	// 7: write status once (unless it only records a pod not yet started: deferral.go),
	// then act on what it records.
	p.requeueForNews()
	latest := ""
	if p.status.LastScheduleTime != nil {
		latest = runpod.Name(job.Name, p.status.LastScheduleTime.Time)
	}
	prune := p.prunable()
	// A status time dropped as ahead of the clock (distrustAhead) is written over at once.
	if !equality.Semantic.DeepEqual(&job.Status, p.status) && (recordsUnwritten(prune, job.Status.LastScheduleTime) || !p.plannedFrom.IsZero() ||
		!deferrable(&job.Status, p.status, podNews(p.active, p.now), latest, func(n string) bool { return p.marked[n] })) {
		sentOn := job.ResourceVersion
		job.Status = *p.status
		// Strict: a CRD older than the manager (helm upgrade leaves CRDs as they are)
		// would prune the fields it does not know, and the accounting they carry with
		// them, saying so only in a warning; refused, the write names them.
		if err := r.Status().Update(ctx, &job, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			if apierrors.IsConflict(err) {
				// A newer version is on its way to the cache. Status updates do not bring
				// us back (the watch filters on generation), so look again shortly: a
				// pass that no pod or workload event follows (an occurrence skipped
				// in a blackout) would otherwise stall until the next event.
				log.V(1).Info("status conflict, retrying with the newer version")
				return ctrl.Result{RequeueAfter: conflictRetry}, nil
			}
			if apierrors.IsInvalid(err) {
				// Retrying cannot help: the status holds a value the API server stored and
				// refuses back (its message names the field). Say so where users look.
				action, note := statusRejected(&job, err)
				r.Recorder.Eventf(seriesRef(&job), nil, corev1.EventTypeWarning, ReasonStatusRejected, action, "%s", note)
			} else if fields := unknownFields(err); fields != "" {
				r.Recorder.Eventf(seriesRef(&job), nil, corev1.EventTypeWarning, ReasonStatusRejected, "UpdateStatus", "%s", report.Shorten(fmt.Sprintf(
					"status not written, and the job's runs not recorded nor its pods counted until it is: the installed LockedCronJob CRD lacks fields this manager writes (%s): the CRD is older than the manager (helm upgrade does not update CRDs). "+
						"Apply the CRD of the manager's release (kubectl apply --server-side -f dist/chart/crds/ or the release's install.yaml)", fields), maxEventNote-len("…")))
			} else if tooLarge(err) {
				// Not landed, and no retry will land while the job is as large.
				r.Recorder.Eventf(seriesRef(&job), nil, corev1.EventTypeWarning, ReasonStatusRejected, "UpdateStatus", "%s", report.Shorten(fmt.Sprintf(
					"status not written, and the job's runs not recorded nor its pods counted until it is: the job would be too large for the API server to store (%v; etcd stores at most 1.5 MiB by default, and the job takes %d KiB). "+
						"Make spec.template smaller: a large value (an env value, a script, an annotation) belongs in a ConfigMap the pod mounts or reads", err, jsonSize(&job)>>10), maxEventNote-len("…")))
			} else if answerLost(err) {
				r.unanswered.keep(&job, sentOn, &p.told) // it may have landed
			}
			return ctrl.Result{}, err
		}
		if lst := job.Status.LastScheduleTime; lst != nil {
			r.decided.noteWritten(&job, lst.Time) // until the job cache shows this write
		}
	}
	observeStatus(&job)
	r.emit(&job, &p.told)
	if err := r.markCounted(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteWithdrawn(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.pruneHistory(ctx, prune); err != nil {
		return ctrl.Result{}, err
	}

	// 8: come back at the next occurrence.
	return ctrl.Result{RequeueAfter: p.requeue}, nil
}

// tooLarge reports whether err refuses a write for the object's size: etcd's "request is
// too large" (the API server passes it on as a 500, which would otherwise be taken for an
// answer that may have been lost) or the API server's own 413.
func tooLarge(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsInternalError(err) && strings.Contains(err.Error(), "request is too large")
}

// jsonSize is how many bytes obj takes as JSON (0 if it cannot be encoded).
func jsonSize(obj any) int {
	b, _ := json.Marshal(obj)
	return len(b)
}

// unknownFields names the fields a strict write was refused for ("" if it was not): the
// API server's "strict decoding error: unknown field \"status.x\", unknown field …".
func unknownFields(err error) string {
	if !apierrors.IsBadRequest(err) {
		return ""
	}
	msg := err.Error()
	i := strings.Index(msg, "unknown field ")
	if i < 0 {
		return ""
	}
	return msg[i:]
}

// statusRejected is the StatusRejected Event's action and note for err, a status write
// the API server refused as invalid. The action is the first field it names, so that each
// field has a series of its own whose note names it (a series keeps its first note).
func statusRejected(job *v1alpha1.LockedCronJob, err error) (action, note string) {
	action = "Reconcile"
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if c.Field != "" {
				action = report.TruncateRunes(c.Field, maxEventAction)
				break
			}
		}
	}
	note = fmt.Sprintf("status not written, and the job's runs not recorded nor its pods counted until it is: %v. "+
		"A value stored in status that the controller cannot write back (a time past the year 9999 in UTC) is corrected or removed with "+
		"kubectl edit lockedcronjob %s -n %s --subresource=status", err, job.Name, job.Namespace)
	return action, report.Shorten(note, maxEventNote-len("…"))
}

// seriesReasons are the Events that repeat while nothing new happens. Each forms one series
// per job and reason (issue 13: "Events aggregated"): the events/v1 recorder creates the
// first, patches the series on the second, and only counts later ones until its periodic
// refresh (30 min; a series ends after 6 min without one). The series keeps its first
// note; status.recent keeps each occurrence's message, lockedcron_runs_total counts them.
// A lasting condition's series is per reason and cause (the Event's action, e.g. Missed
// for SecretNotFound, then for Backlog): a series that kept its first note across a
// change of cause went on telling a cause that had gone.
//   - The routine outcomes of a healthy job: every run ends in one of them (Succeeded
//     where it ran, SkippedContention on the other replicas and clusters). One Event each
//     cost the API server a call per run besides the pod.
//   - The repeats of a lasting condition: Missed and SkippedBlackout at each occurrence,
//     LockBackendUnavailable at each pass (every backendRetry) while the backend cannot
//     be used. One Event each made a broken Secret shared by 1,000 jobs cost 1,000 Event
//     POSTs every 15 s, and at 5,000 jobs under saturation the Missed Events spent as many
//     calls as the pods (1.13 POSTs per occurrence): misses made more misses.
//
// The other reasons stay one Event each: each is news (a failed run, an invalid report or
// template, a manual run), and e2e counts the "no pod created" SuppressedDuplicate Events.
var seriesReasons = map[string]bool{
	string(report.Succeeded): true, string(report.SkippedContention): true,
	ReasonMissed: true, ReasonSkippedBlackout: true, ReasonLockBackend: true,
	ReasonStatusRejected:   true, // at each retry of the pass while the field stays
	ReasonPodNameTaken:     true, // at each pass while another's pod (an earlier job's of this name) holds it
	ReasonPodCreateRefused: true, // at each pass while the API server refuses the pod
}

// seriesRef is the job as an Event's regarding object for a series: without its
// resourceVersion, which every status write moves and which is part of the recorder's
// key for "the same Event again". It is a reference already, which the recorder takes as
// it is: the recorder keeps each series' Event, and a reference it builds from the job
// holds an API version string of its own in each (issue 13: memory at thousands of jobs).
func seriesRef(job *v1alpha1.LockedCronJob) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: jobAPIVersion, Kind: jobKind, Namespace: job.Namespace, Name: job.Name, UID: job.UID}
}

// jobAPIVersion and jobKind name a LockedCronJob in references (seriesRef, ownerJob).
var jobAPIVersion, jobKind = v1alpha1.GroupVersion.String(), "LockedCronJob"

// jobGroupPrefix starts the API version of a reference to a LockedCronJob of any version.
var jobGroupPrefix = v1alpha1.GroupVersion.Group + "/"

// isJobRef tells a reference to a LockedCronJob by its group and kind, whatever its
// version, as controller-runtime's Owns and the garbage collector tell an owner: the pods
// a manager serving another version of the API made stay their jobs' (an upgrade's).
func isJobRef(apiVersion, kind string) bool {
	return kind == jobKind && strings.HasPrefix(apiVersion, jobGroupPrefix) && !strings.Contains(apiVersion[len(jobGroupPrefix):], "/")
}

func eventType(o report.Outcome) string {
	switch o {
	case report.Failed, report.LockLost, report.Error, report.Missed, report.Interrupted:
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

func describe(r runstatus.Result) string {
	rep := r.Report
	occ := r.Occurrence.UTC().Format(time.RFC3339)
	if r.Cut {
		// Its outcome alone is known: no holder, token or exit code to show.
		return fmt.Sprintf("occurrence %s: pod %s: %s (%s)", occ, r.Pod, rep.Outcome, rep.Message)
	}
	switch rep.Outcome {
	case report.SkippedContention:
		return fmt.Sprintf("occurrence %s: lock %q held by %s; pod %s skipped", occ, rep.Key, rep.HeldBy, r.Pod)
	case report.SuppressedDuplicate:
		// Its message says why: the occurrence succeeded elsewhere, or failed in an earlier
		// pod of this name (lock.SuppressedError).
		return fmt.Sprintf("occurrence %s already run; pod %s did not run it (%s)", occ, r.Pod, rep.Message)
	case report.Error:
		return fmt.Sprintf("occurrence %s: pod %s: %s", occ, r.Pod, rep.Message)
	case report.Missed, report.Interrupted:
		msg := fmt.Sprintf("occurrence %s: pod %s did not run the job (%s)", occ, r.Pod, rep.Outcome)
		if m := runstatus.Message(rep); m != "" {
			msg += ": " + m
		}
		return msg
	}
	msg := fmt.Sprintf("occurrence %s ran in pod %s as %s (fencing token %d), exit code %d", occ, r.Pod, rep.Holder, rep.FencingToken, rep.ExitCode)
	if m := runstatus.Message(rep); m != "" {
		msg += ": " + m
	}
	return msg
}

// observedSpec is what status.observedSchedule records of the job's spec: schedule, zone
// and suspension (observedRefused appended while the schedule is refused).
func observedSpec(job *v1alpha1.LockedCronJob) string {
	return fmt.Sprintf("%s|%s|suspend=%t", job.Spec.Schedule, job.Spec.TimeZone, job.Spec.Suspended())
}

// observedRefused marks an observed schedule that was refused, and so not in force.
const observedRefused = "|refused"

// schedule plans the occurrences since the last pass and starts the due one. It returns
// the pod it created, if any.
func (r *LockedCronJobReconciler) schedule(ctx context.Context, p *pass, berr *backendError) *corev1.Pod {
	job, st := p.job, p.status
	// A schedule refused (it does not parse, or fires more often than the operator
	// allows) is not in force, and is observed as such: the one that replaces it, even the
	// same one put back, is in force from then on, and nothing before starts.
	sched, err := schedule.Parse(job.Spec.Schedule, job.Spec.TimeZone)
	var refused, withdrawWhy string
	switch {
	case err != nil:
		refused, withdrawWhy = fmt.Sprintf("spec.schedule/spec.timeZone: %v", err), "spec.schedule is invalid"
	case r.MinScheduleInterval > 0:
		if gap := r.gaps.of(job.Spec.Schedule, job.Spec.TimeZone, sched, p.now); gap > 0 && gap < r.MinScheduleInterval {
			refused = fmt.Sprintf("spec.schedule %q fires %v apart at the closest, more often than this operator allows (--min-schedule-interval %v): schedule it less often; no occurrence starts until then",
				job.Spec.Schedule, gap, r.MinScheduleInterval)
			withdrawWhy = "spec.schedule fires more often than --min-schedule-interval"
		}
	}
	observed := observedSpec(job)
	if refused != "" {
		observed += observedRefused
	}
	switch {
	case st.ObservedSchedule == "":
		st.ScheduleSince = job.CreationTimestamp.DeepCopy()
		if changed := specChangedAt(job, p.now); job.Generation > 1 && changed.After(job.CreationTimestamp.Time) {
			// The spec changed before this first pass (the controller was down): the spec
			// seen now is in force from the change. Before it the job may have been
			// suspended or on another schedule; nothing of that is recorded, so nothing of
			// it is run or counted, and the Event says so. (A field manager's time moves
			// with any field it changes; metadata.generation moves only with the spec.)
			st.ScheduleSince = &metav1.Time{Time: changed}
			p.eventf(corev1.EventTypeNormal, ReasonChangedBeforeSeen,
				"spec.schedule/timeZone/suspend changed at %s, after the job's creation at %s and before the controller first saw it: what fell due before the change is neither started nor counted",
				changed.UTC().Format(time.RFC3339), job.CreationTimestamp.UTC().Format(time.RFC3339))
		}
	case st.ObservedSchedule != observed:
		// A new schedule (or a resume) never runs what fell before it; what fell due under
		// the old one after the last pass and up to the change (say, while the controller
		// was down across a suspension) is counted missed now (none under a refused one).
		// What fell due under the new one after the change is the new one's, however late
		// this pass sees it: it starts within its deadline or is counted missed (the
		// change, not this pass, bounds it). A schedule refused, or accepted, from now for
		// the operator's flag (the spec did not change) changed now: accepted, it is in
		// force from now; refused, what fell due under it up to now is counted missed.
		changed := specChangedAt(job, p.now)
		if st.ObservedSchedule == observed+observedRefused || st.ObservedSchedule+observedRefused == observed {
			changed = p.now
		}
		accountUntilChange(p, st.ObservedSchedule, changed)
		st.ScheduleSince = &metav1.Time{Time: changed}
	}
	if !p.plannedFrom.IsZero() && (st.ScheduleSince == nil || p.plannedFrom.After(st.ScheduleSince.Time)) {
		// What fell due before a status time that was not trusted is not known: a
		// first pass or a schedule change counts none of it missed.
		st.ScheduleSince = &metav1.Time{Time: p.plannedFrom}
	}
	st.ObservedSchedule = observed
	if refused != "" {
		if p.setCondition(ConditionReady, false, ReasonInvalidSchedule, refused) {
			p.eventf(corev1.EventTypeWarning, ReasonInvalidSchedule, "%s", refused)
		}
		st.NextScheduleTime, st.Upcoming = nil, nil
		p.withdrawPrepared(none, none, withdrawWhy)
		return nil
	}
	if job.Spec.Suspended() {
		p.setCondition(ConditionReady, true, ReasonSuspended, "suspended: no new occurrences start; running pods go on")
		st.NextScheduleTime, st.Upcoming, st.Deferred = nil, nil, nil
		p.withdrawPrepared(none, none, "suspended")
		return nil
	}

	deadline := startingDeadline(job)
	plan := sched.Plan(schedule.Input{Earliest: earliest(job, st), Now: p.now, StartingDeadline: deadline})
	if plan.Next.IsZero() {
		st.NextScheduleTime = nil
		p.setCondition(ConditionReady, false, ReasonScheduleNeverFires, fmt.Sprintf("spec.schedule %q never fires: no date it names exists (as 31 February), or every time it names falls where the clocks of spec.timeZone skip ahead; fix spec.schedule", job.Spec.Schedule))
	} else {
		st.NextScheduleTime = &metav1.Time{Time: plan.Next}
		p.setCondition(ConditionReady, true, ReasonScheduled, "next occurrence "+plan.Next.UTC().Format(time.RFC3339))
		p.requeueAt(plan.Next.Sub(p.now) + 10*time.Millisecond)
	}

	// 5a: blackout: read the referenced workloads, preview the next occurrences, account
	// for a deferred occurrence, drop pods that a blackout now holds back.
	bs := r.observeBlackout(ctx, p, sched, &plan, earliest(job, st), deadline)
	p.blackout = bs
	if bs == nil {
		p.withdrawPrepared(none, inSchedule(sched), "spec.blackout is invalid")
		return nil // spec.blackout is invalid: Ready=False names the field
	}
	// A prepared pod stays only while it is for the next occurrence of this schedule
	// and no blackout covers its instant (or holds everything now).
	p.withdrawPrepared(func(occ time.Time) bool {
		return occ.Equal(plan.Next) && bs.unreadable == nil && !bs.rules.At(occ, bs.rollouts).Blocked() && !bs.rules.At(p.now, bs.rollouts).Blocked()
	}, inSchedule(sched), "no longer the next occurrence to run (schedule change or blackout)")

	if name, occ, ok := p.asideUndecided(sched, earliest(job, st)); ok {
		// Its prepared pod was withdrawn, and may have run the job all the same: the
		// occurrence is decided once the pod has said and is gone (prepare.go), and
		// nothing after it before then — counted missed (its deadline passed, a later
		// one came), it was counted again by its pod's report.
		p.log.V(1).Info("occurrence waits for its withdrawn pod", "occurrence", occ.UTC().Format(time.RFC3339), "pod", name)
		p.requeueAt(asideRetry)
		return nil
	}
	if plan.Missed > 0 {
		// Each occurrence is decided once: those before the due one are missed now, and
		// lastScheduleTime moves past them even if the due one cannot start in this
		// pass, so that no later pass counts them again.
		last := *plan.Latest
		if plan.Due != nil {
			if prev := sched.Plan(schedule.Input{Earliest: earliest(job, st), Now: plan.Due.Add(-time.Nanosecond)}); prev.Latest != nil {
				last = *prev.Latest
			}
		}
		cause, reason := missedReason(p)
		if plan.MissedEstimated {
			reason += " (count estimated)"
		}
		p.recordN(runstatus.OutcomeMissed, cause, last, plan.Missed, reason)
		st.LastScheduleTime = &metav1.Time{Time: last}
	}
	if plan.Due == nil {
		if plan.Latest != nil {
			st.LastScheduleTime = &metav1.Time{Time: *plan.Latest}
		}
		return r.prepare(ctx, p, &plan, bs, berr)
	}
	due := *plan.Due
	name := runpod.Name(job.Name, due)
	if p.hasPod(name) && !p.isAside(name) {
		// Created ahead of its time (prepareAheadSeconds), or by a pass whose status
		// write was deferred: nothing to do, and no POST to find out.
		st.LastScheduleTime = &metav1.Time{Time: due}
		return r.prepare(ctx, p, &plan, bs, berr)
	}
	// 5b: a blackout skips or defers the due occurrence.
	if !applyBlackout(p, bs, due, deadline) {
		return nil
	}
	if p.isAside(name) {
		// Its pod was withdrawn ahead and did not run the job, but it still holds the
		// occurrence's name (it lingers: its node gone, another finalizer): the occurrence
		// waits for it, within its deadline, and is superseded otherwise. (After the
		// blackout step: one that a blackout skips is skipped, not waited on.)
		p.log.V(1).Info("occurrence waits for its withdrawn pod to be gone", "occurrence", due.UTC().Format(time.RFC3339), "pod", name)
		p.requeueAt(asideRetry)
		return nil
	}
	if berr != nil && berr.blocking() {
		// No pod can take the lock; the occurrence waits (within its deadline) for the Secret.
		p.causedEventf(corev1.EventTypeWarning, ReasonLockBackend, berr.reason, "occurrence %s not started: %v", due.UTC().Format(time.RFC3339), berr)
		return nil
	}
	// 5c: the backlog is bounded: while an earlier pod has not started its job, the due
	// occurrence adds no pod; it is missed (the earlier pod keeps its place).
	if waiting := p.unstarted(due); waiting != nil {
		st.LastScheduleTime = &metav1.Time{Time: due}
		p.record(runstatus.OutcomeMissed, CauseBacklog, due, backlogReason(waiting))
		return nil
	}
	if created := r.startOccurrence(ctx, p, due, bs.rules.NextOpening(p.now), time.Time{}); created != nil {
		return created
	}
	return r.prepare(ctx, p, &plan, bs, berr)
}

func earliest(job *v1alpha1.LockedCronJob, st *v1alpha1.LockedCronJobStatus) time.Time {
	t := job.CreationTimestamp.Time
	for _, m := range []*metav1.Time{st.LastScheduleTime, st.ScheduleSince} {
		if m != nil && m.After(t) {
			t = m.Time
		}
	}
	return t
}

func startingDeadline(job *v1alpha1.LockedCronJob) *time.Duration {
	if job.Spec.StartingDeadlineSeconds == nil {
		return nil
	}
	d := time.Duration(*job.Spec.StartingDeadlineSeconds) * time.Second
	return &d
}

// startOccurrence creates the occurrence's pod. The pod must not start its job after the
// next blackout window opens (windowStart). It does not ask Redis whether the occurrence
// already succeeded elsewhere: that round trip would hold a worker, and lockwrap decides
// anyway (its report says SuppressedDuplicate, counted as such).
// notBefore, when set, is the instant lockwrap waits for (a pod created ahead of it).
func (r *LockedCronJobReconciler) startOccurrence(ctx context.Context, p *pass, due time.Time, windowStart, notBefore time.Time) *corev1.Pod {
	job, st := p.job, p.status
	occ := due.UTC().Format(time.RFC3339)
	opts := r.Pod
	opts.NotAfter = windowStart
	opts.MadeAt = p.now // a blackout that begins after this holds the pod back (markers.go)
	pod, err := runpod.Build(job, due, opts)
	if err != nil {
		msg := err.Error()
		p.setCondition(ConditionReady, false, ReasonInvalidTemplate, msg)
		p.eventf(corev1.EventTypeWarning, ReasonInvalidTemplate, "occurrence %s not started: %s", occ, msg)
		return nil
	}
	if !notBefore.IsZero() {
		pod.Annotations[runpod.AnnotationPreparedAhead] = "true" // withdrawPrepared
	}
	if nameStillCounted(p, pod.Name) {
		return nil
	}
	if err := r.Create(ctx, pod); err != nil {
		if !notBefore.IsZero() && apierrors.IsAlreadyExists(err) {
			return nil // prepared by an earlier pass whose pod the cache has not shown yet
		}
		if answerLost(err) {
			// The pod may exist: the next pass (soon) asks the API server before it plans,
			// and this one creates nothing more (one doubt per job: a second replaced it).
			r.decided.noteUnsure(job, due)
			p.holdCreates = true
			p.eventf(corev1.EventTypeWarning, ReasonPodCreateUnknown, "occurrence %s: creating pod %s: %v; checking whether it was created", occ, pod.Name, err)
			p.requeueAt(unsureRetry)
			return nil
		}
		if apierrors.IsInvalid(err) {
			p.eventf(corev1.EventTypeWarning, ReasonInvalidTemplate, "occurrence %s: creating pod %s: %v", occ, pod.Name, err)
			p.setCondition(ConditionReady, false, ReasonInvalidTemplate, fmt.Sprintf("creating pod %s: %v", pod.Name, err))
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			// Refused for now (a quota used up, Pod Security, throttling): the occurrence
			// stays due within its deadline, and the pass comes back for it. It was taken
			// for an invalid template, and nothing came back before the next occurrence.
			p.eventf(corev1.EventTypeWarning, ReasonPodCreateRefused, "occurrence %s: creating pod %s: %v; asking again within its deadline", occ, pod.Name, err)
			p.setCondition(ConditionReady, false, ReasonPodCreateRefused, fmt.Sprintf("creating pod %s: %v", pod.Name, err))
			p.requeueAt(backendRetry)
			p.holdCreates = true // a prepared next pod would make this one a backlog miss
			return nil
		}
		// The deterministic name makes AlreadyExists mean "already started", if it is ours.
		var existing corev1.Pod
		switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), &existing); {
		case apierrors.IsNotFound(err):
			// Gone since the POST (another's pod, deleted as the garbage collector does):
			// the name is free and the occurrence still due. Taken for started, it had no
			// pod, and was neither run nor counted.
			p.requeueAt(asideRetry)
			p.holdCreates = true
			return nil
		case err == nil && !metav1.IsControlledBy(&existing, job) && existing.DeletionTimestamp != nil:
			// Another's pod on its way out (an earlier job of this name's, withdrawn or
			// deleted by the garbage collector, its kubelet still stopping it): its end
			// may wake no pass of this job (a pod no job controls, or none of its label),
			// so the pass looks again until the name is free, the occurrence still due:
			// each second through its grace, then as long again as it has been stuck, up
			// to ten seconds (a pod on a node that is gone for good may stay for days; the
			// occurrence starts at most that late once it is gone).
			stuck := p.now.Sub(existing.DeletionTimestamp.Time)
			typ := corev1.EventTypeNormal
			if stuck > tracking.TerminatingGrace {
				typ = corev1.EventTypeWarning
			}
			p.eventf(typ, ReasonPodNameTaken, "occurrence %s: pod %s exists, is not ours and is being deleted; starting the occurrence once it is gone", occ, pod.Name)
			p.requeueAt(min(max(stuck, asideRetry), 10*time.Second))
			p.holdCreates = true
			return nil
		case err == nil && !metav1.IsControlledBy(&existing, job):
			p.eventf(corev1.EventTypeWarning, ReasonPodNameTaken, "occurrence %s: pod %s exists and is not ours", occ, pod.Name)
			return nil
		}
		st.LastScheduleTime = &metav1.Time{Time: due}
		if notBefore.IsZero() {
			r.decided.noteCreated(job, due)
		}
		return nil
	}
	if !notBefore.IsZero() {
		p.log.Info("occurrence prepared", "occurrence", occ, "pod", pod.Name)
		return pod
	}
	st.LastScheduleTime = &metav1.Time{Time: due}
	r.decided.noteCreated(job, due)
	metrics.ScheduleLag.WithLabelValues(job.Namespace).Observe(p.now.Sub(due).Seconds())
	// No Event: the pod is the record (its own Events follow it); an Event per occurrence
	// would double the API calls of the creation path.
	p.log.Info("occurrence started", "occurrence", occ, "pod", pod.Name)
	return pod
}

func setActive(st *v1alpha1.LockedCronJobStatus, active []*corev1.Pod) {
	refs := make([]corev1.ObjectReference, 0, len(active))
	for _, p := range active {
		refs = append(refs, corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1"})
	}
	slices.SortFunc(refs, func(a, b corev1.ObjectReference) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	if len(refs) == 0 {
		refs = nil
	}
	st.Active = refs
	st.ActiveCount = int32(len(active))
}

func (r *LockedCronJobReconciler) emit(job *v1alpha1.LockedCronJob, p *told) {
	for _, e := range p.events {
		var regarding runtime.Object = job
		action := "Reconcile"
		if seriesReasons[e.reason] {
			regarding = seriesRef(job)
			if e.cause != "" {
				action = e.cause
			}
		}
		r.Recorder.Eventf(regarding, nil, e.typ, e.reason, action, "%s", e.note)
	}
	for _, d := range p.recorded {
		metrics.AddRuns(job.Namespace, job.Name, d.outcome, float64(d.n))
	}
	for _, res := range p.counted {
		rep := res.Report
		metrics.AddRuns(job.Namespace, job.Name, string(rep.Outcome), 1)
		if rep.Attempts > 1 {
			// It waited for the lock (Retry, a manual run's Wait: held, or Redis unreachable
			// between attempts); a first attempt's waitedMs is the connection's set-up.
			metrics.LockWait.WithLabelValues(job.Namespace).Observe(float64(rep.WaitedMs) / 1000)
		}
		a, errA := report.ParseTime(rep.AcquiredAt)
		b, errB := report.ParseTime(rep.ReleasedAt)
		if errA == nil && errB == nil {
			metrics.LockHold.WithLabelValues(job.Namespace).Observe(b.Sub(a).Seconds())
		}
		if rep.Outcome == report.LockLost || rep.LockLost {
			metrics.AddLockLost(job.Namespace, job.Name, 1)
		}
		if _, ok := res.StartLag(); ok && res.Trigger != v1alpha1.TriggerManual {
			// Start lag: the job process's start − its scheduled time (report.startedAt).
			metrics.ObserveStartLag(job.Namespace, res.Occurrence, res.StartedAt)
		}
	}
}

// prunable is the oldest counted pods beyond the history limits (runstatus.Prune).
func (p *pass) prunable() []*corev1.Pod {
	keepOK, keepFailed := 3, 1
	if v := p.job.Spec.SuccessfulRunsHistoryLimit; v != nil {
		keepOK = int(*v)
	}
	if v := p.job.Spec.FailedRunsHistoryLimit; v != nil {
		keepFailed = int(*v)
	}
	return runstatus.Prune(p.history, keepOK, keepFailed, p.now)
}

// pruneHistory deletes the pods prunable picked, once the pass's status is written.
func (r *LockedCronJobReconciler) pruneHistory(ctx context.Context, prune []*corev1.Pod) error {
	for _, pod := range prune {
		if err := r.Delete(ctx, pod, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting old pod %s: %w", pod.Name, err)
		}
	}
	return nil
}

// SetupWithManager registers the reconciler, the pod owner index and the watches: pods it
// owns, and the workloads blackouts reference (mapped to the referencing jobs only).
func (r *LockedCronJobReconciler) SetupWithManager(mgr ctrl.Manager) (err error) {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		rec, stop, rerr := newRecorder(mgr, "lockedcron-controller")
		if rerr != nil {
			return rerr
		}
		r.Recorder, r.stopRecording = rec, stop
		defer func() {
			if err != nil { // no manager will run: the recorder stops here
				stop()
				r.Recorder, r.stopRecording = nil, nil
			}
		}()
	}
	r.caughtUp.namespaces = r.WatchNamespaces
	r.backends = newBackends(r.APIReader)
	r.backends.allowed = r.Pod.RedisAllowedHosts // the same endpoints as lockwrap
	r.health = newHealth(r.backends)
	r.ledger = newLedgerLookups(func(job types.NamespacedName) { r.health.wakeJobs([]types.NamespacedName{job}) })
	if r.SecretTTL > 0 {
		r.health.secretTTL = r.SecretTTL
	}
	if r.ProbeInterval > 0 {
		r.health.probeInterval = r.ProbeInterval
	}
	if err := mgr.Add(r.health); err != nil {
		return err
	}
	r.markers = newBlackoutMarkers(r.Clock.Now, r.markerClient)
	if err := mgr.Add(r.markers); err != nil {
		return err
	}
	// Started when this manager is elected, as the reconciler is: when it began to lead,
	// for the alerts on what a new leader counts in its first pass (its counters' series
	// born above 0, never scraped at 0).
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		metrics.LeadingSince.Set(float64(r.Clock.Now().UnixNano()) / 1e9)
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = 5
	}
	if r.ReconcileTimeout <= 0 {
		r.ReconcileTimeout = time.Minute
	}
	// Not waiting for the informer to sync, as IndexField does not: set up before the
	// manager starts, it has not started.
	pods, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if err := pods.AddIndexers(toolscache.Indexers{ownerIndexName: ownerIndexKeys}); err != nil {
		return err
	}
	if err := r.setupBlackout(mgr); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.LockedCronJob{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, runRequestChanged))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(ownerRequest), builder.WithPredicates(podEvents))
	for _, src := range r.workloadSources() {
		b = b.WatchesRawSource(src)
	}
	b = b.WatchesRawSource(source.Channel(r.health.wake, &handler.TypedEnqueueRequestForObject[*v1alpha1.LockedCronJob]{}))
	return b.Named("lockedcronjob").WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles, ReconciliationTimeout: r.ReconcileTimeout}).Complete(r)
}

// ownerJob names the LockedCronJob that controls a pod (its controller owner reference),
// false for a pod no LockedCronJob controls.
func ownerJob(o client.Object) (string, bool) {
	if c, ok := o.(*cachedPod); ok && c.hasOwner() { // the cache's pod, read without building its references
		owner := c.owner.Value()
		if owner.controller != isTrue || !isJobRef(owner.apiVersion, owner.kind) {
			return "", false
		}
		return owner.name, true
	}
	owner := metav1.GetControllerOfNoCopy(o)
	if owner == nil || !isJobRef(owner.APIVersion, owner.Kind) {
		return "", false
	}
	return owner.Name, true
}

// indexedJob names the job a pass lists pod o for (the owner index): the one that
// controls it (ownerJob), else, for a pod no owner controls, the one its label names
// (orphanedJob).
func indexedJob(o client.Object) (string, bool) {
	if name, ok := ownerJob(o); ok {
		return name, true
	}
	return orphanedJob(o)
}

// orphanedJob names the job of a pod that no owner controls (from its runpod.LabelJob)
// while there is something to do about it: the tracking finalizer holds it, or it is
// marked as prepared ahead (its instant may be to come: preparedForNothing; or, withdrawn,
// its end frees the name its job's occurrence needs). Letting it go takes both off
// (letGo). Metadata alone says: the takeover's list reads no more.
// Such a pod is one of a job deleted with --cascade=orphan, whose references the garbage
// collector took off, or one whose references someone removed by hand. No job counts it
// any more. The pass that finds its job being deleted releases it; one that did not see
// it (the manager was down, the collector was quicker, a job of the name was created
// again since) lists it through the owner index and releases it, deleting it first if
// it is still prepared ahead of its instant (releasePods, releaseForeign). Without that
// its finalizer would hold it for good, once deleted, in Terminating, and a prepared one
// would run its job at the instant for no job.
func orphanedJob(o client.Object) (string, bool) {
	if metav1.GetControllerOfNoCopy(o) != nil {
		return "", false
	}
	_, prepared := o.GetAnnotations()[runpod.AnnotationPreparedAhead]
	if !slices.Contains(o.GetFinalizers(), runpod.FinalizerTracking) && !prepared {
		return "", false
	}
	name := o.GetLabels()[runpod.LabelJob]
	return name, name != ""
}

// ownerRequest wakes the pass of the job that controls a pod, in the pod's namespace
// (LockedCronJobs are namespaced). It does what the builder's Owns does, less the
// RESTMapper look-up Owns makes on every pod event to learn whether the owner is
// namespaced (issue 13: at 5,000 jobs that look-up made 8% of the manager's allocations).
//
// A pod no job controls any more wakes the pass of the job its label names while there
// is something to do about it (orphanedJob).
func ownerRequest(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := indexedJob(o)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// Close stops what SetupWithManager started beside the manager's runnables: the Redis
// clients and the Event recorder, whose last Events are sent first. Call it once the
// manager has stopped.
func (r *LockedCronJobReconciler) Close() {
	if r.stopRecording != nil {
		r.stopRecording()
	}
	if r.backends != nil {
		r.backends.close()
	}
}

// scheduleGaps keeps each schedule's MinGap (a few milliseconds to find, up to ~20 for one
// whose times the zone's clocks skip), by its text and zone: jobs share schedules, and a
// job's passes its own.
type scheduleGaps struct {
	mu   sync.Mutex
	gaps map[string]time.Duration
}

// maxScheduleGaps bounds scheduleGaps: past it, it starts again empty.
const maxScheduleGaps = 10000

func (g *scheduleGaps) of(spec, tz string, s *schedule.Schedule, now time.Time) time.Duration {
	key := spec + "\x00" + tz
	g.mu.Lock()
	gap, ok := g.gaps[key]
	g.mu.Unlock()
	if ok {
		return gap
	}
	gap = s.MinGap(now)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gaps == nil || len(g.gaps) >= maxScheduleGaps {
		g.gaps = map[string]time.Duration{}
	}
	g.gaps[key] = gap
	return gap
}
