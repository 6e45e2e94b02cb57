package controller

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// Manual runs (docs/manual-runs.md): a new id in the job's run-request annotation asks
// for one run, through the same lockwrap and lock key; status.lastRunRequest records the
// id handled, in the pass's one status write, and the pod's name is a function of the
// id, so that one id never makes two pods, also across manager restarts.

// Reasons of the Events about run requests.
const (
	ReasonManualRunStarted = "ManualRunStarted"
	ReasonManualRunRefused = "ManualRunRefused"
)

// requestID is the form of a request id: a label value's, lower case (1-63 of [a-z0-9-],
// alphanumeric at both ends).
var requestID = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// runRequestChanged wakes the reconciler when the run-request annotations change (the
// watch otherwise only follows generation changes, which annotations do not make).
var runRequestChanged = predicate.Funcs{
	UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		o, n := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
		for _, k := range []string{v1alpha1.AnnotationRunRequest, v1alpha1.AnnotationRunOccurrence, v1alpha1.AnnotationRunContention} {
			if o[k] != n[k] {
				return true
			}
		}
		return false
	},
}

// parseRunRequest reads a run request from the job's annotations (the id is present).
// sched is the job's parsed schedule (nil when it does not parse); remembered is how long
// after an occurrence the ledger still knows whether it succeeded (dedupe.retention − the
// lock's ttl: lockwrap's own limit, after which it runs nothing). It is a pure function:
// the error names the annotation and the fix.
func parseRunRequest(ann map[string]string, sched *schedule.Schedule, now time.Time, remembered time.Duration) (runpod.ManualRun, error) {
	m := runpod.ManualRun{ID: ann[v1alpha1.AnnotationRunRequest], RequestedAt: now.Truncate(time.Second), Contention: v1alpha1.ManualContentionWait}
	if !requestID.MatchString(m.ID) {
		return m, fmt.Errorf("annotation %s: %s is not a request id: use 1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit (e.g. run-%d)",
			v1alpha1.AnnotationRunRequest, shown(m.ID), now.Unix())
	}
	switch c, set := ann[v1alpha1.AnnotationRunContention]; {
	case !set || c == v1alpha1.ManualContentionWait:
	case c == v1alpha1.ManualContentionFailFast:
		m.Contention = c
	default:
		return m, fmt.Errorf("annotation %s: %s is not a contention: use %s (wait for the lock, the default) or %s (skip if it is held)",
			v1alpha1.AnnotationRunContention, shown(c), v1alpha1.ManualContentionWait, v1alpha1.ManualContentionFailFast)
	}
	v, set := ann[v1alpha1.AnnotationRunOccurrence]
	if !set {
		return m, nil
	}
	occ, err := report.ParseTime(v)
	if err != nil {
		return m, fmt.Errorf("annotation %s: %s is not an RFC 3339 time of the years 0001–9999: write the scheduled time as status.recent shows it (e.g. 2026-11-30T02:00:00Z), or remove the annotation for a run of its own",
			v1alpha1.AnnotationRunOccurrence, shown(v))
	}
	occ = occ.UTC()
	m.Occurrence = occ
	at := occ.Format(time.RFC3339)
	switch {
	case occ.After(now):
		return m, fmt.Errorf("annotation %s: %s is in the future: only an occurrence that has come can be run again (remove the annotation to run now)",
			v1alpha1.AnnotationRunOccurrence, at)
	case sched == nil:
		return m, fmt.Errorf("annotation %s: spec.schedule does not parse, so %s cannot be checked as one of its occurrences: fix spec.schedule",
			v1alpha1.AnnotationRunOccurrence, at)
	case occ.Nanosecond() != 0 || !sched.Next(occ.Add(-time.Second)).Equal(occ):
		return m, fmt.Errorf("annotation %s: %s is not an occurrence of spec.schedule %q: name a scheduled time (status.recent lists them)",
			v1alpha1.AnnotationRunOccurrence, at, sched.String())
	case !now.Before(occ.Add(remembered)):
		return m, fmt.Errorf("annotation %s: %s is older than what the ledger remembers of an occurrence (spec.dedupe.retention − spec.lock.ttl = %v): whether it succeeded is no longer known, so it cannot run again (lockwrap would count it Missed); remove the annotation for a run of its own",
			v1alpha1.AnnotationRunOccurrence, at, remembered)
	}
	return m, nil
}

// requestOwner is a managedFields entry that owns the run-request annotation.
type requestOwner struct {
	manager string
	// stamped is the entry's last write (the request or later); zero when the entry has no
	// time (a server-side apply that changed nothing leaves one: kubernetes#127938).
	stamped time.Time
	// ownsSpec: the entry owns spec fields too (its manager wrote the spec).
	ownsSpec bool
}

// requestOwners are the managedFields entries that own the run-request annotation, in
// the order the API server lists them.
func requestOwners(job *v1alpha1.LockedCronJob) []requestOwner {
	key := "f:" + v1alpha1.AnnotationRunRequest
	var out []requestOwner
	for _, mf := range job.ManagedFields {
		fields, ok := ownedFields(mf)
		if !ok {
			continue
		}
		if _, ok := fields.Metadata.Annotations[key]; ok {
			o := requestOwner{manager: mf.Manager, ownsSpec: len(fields.Spec) > 0}
			if mf.Time != nil {
				o.stamped = mf.Time.Time
			}
			out = append(out, o)
		}
	}
	return out
}

// requestedBy is the field manager that owns the run-request annotation (managedFields),
// "" when none says so.
func requestedBy(owners []requestOwner) string {
	if len(owners) > 0 {
		return owners[0].manager
	}
	return ""
}

// stampSkew is how far before a job's creation a request may be stamped and still be
// taken for one made after it: the API servers of a control plane stamp with their own
// clocks.
const stampSkew = 5 * time.Second

// createdWithRequest reports whether the job's run request was there when the job was
// created. A job restored from a backup, or deleted and applied again from its YAML,
// carries its last request; its status, the only memory of the ids handled, and its UID,
// part of the run's ledger id, are new. An entry that owns the request says so: stamped
// well before the creation (a restore that kept the entries), or no later than the
// creation's second by the manager that wrote the spec too (the creator, who owns every
// field it wrote; a request made in the same second, by `kubectl annotate` or the
// plugin, owns no spec field). Without an entry that says (managedFields stripped), it is
// not known, and the request is taken as one.
func createdWithRequest(job *v1alpha1.LockedCronJob, owners []requestOwner) bool {
	created := job.CreationTimestamp.Time
	for _, o := range owners {
		if !o.stamped.IsZero() && (o.stamped.Before(created.Add(-stampSkew)) || (!o.stamped.After(created) && o.ownsSpec)) {
			return true
		}
	}
	return false
}

// requestTime is the earliest time an entry that owns the run request was stamped: the
// request was made then or before. ok is false when no entry says.
func requestTime(owners []requestOwner) (at time.Time, ok bool) {
	for _, o := range owners {
		if !o.stamped.IsZero() && (!ok || o.stamped.Before(at)) {
			at, ok = o.stamped, true
		}
	}
	return at, ok
}

// manualRun handles the job's run request when its id is not the one status records:
// it refuses an invalid one (status, Event, no pod), or creates the run's one pod and
// adds it to p.active. The backend check (berr) is the pass's.
func (r *LockedCronJobReconciler) manualRun(ctx context.Context, p *pass, backend redis.UniversalClient, berr *backendError) {
	if pod := r.handleRunRequest(ctx, p, backend, berr); pod != nil {
		p.active = append(p.active, pod)
	}
}

func (r *LockedCronJobReconciler) handleRunRequest(ctx context.Context, p *pass, backend redis.UniversalClient, berr *backendError) *corev1.Pod {
	job, st := p.job, p.status
	id, ok := job.Annotations[v1alpha1.AnnotationRunRequest]
	id = runpod.RequestKey(id)
	if !ok || (st.LastRunRequest != nil && st.LastRunRequest.ID == id) {
		return nil
	}
	sched, _ := schedule.Parse(job.Spec.Schedule, job.Spec.TimeZone)
	m, perr := parseRunRequest(job.Annotations, sched, p.now, job.Spec.Dedupe.RetentionDuration()-job.Spec.Lock.TTLDuration())
	owners := requestOwners(job)
	rr := runRequestRecord(id, owners, m)
	refuse := func(msg string) *corev1.Pod {
		rr.Refused = runstatus.StatusText(msg) // it may quote the API server or a webhook
		st.LastRunRequest = rr
		p.eventf(corev1.EventTypeWarning, ReasonManualRunRefused, "run request %q: %s", id, msg)
		p.log.Info("run request refused", "id", id, "reason", msg)
		return nil
	}
	if perr != nil && !requestID.MatchString(job.Annotations[v1alpha1.AnnotationRunRequest]) {
		return refuse(perr.Error()) // no pod can be this id's
	}

	// A pod of this id is there already: the pass that created it did not get its status
	// write (and so its Events, which follow that write) through — a conflict, a restart
	// in between —, or the id was asked for again while its earlier pod is still kept.
	// This pass records the request as its pod was built (the qualifiers may have been
	// edited since, or no longer pass: a spec.schedule edit, time past the ledger's
	// memory; the pod runs the job all the same), and, while the pod has not finished
	// (the first case), says it started: its Event, too, is sent only if this status
	// write lands, so it is sent once. A finished one started nothing now.
	name := runpod.ManualName(job.Name, id)
	var existing corev1.Pod
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, &existing); {
	case err == nil:
		if !metav1.IsControlledBy(&existing, job) || existing.Labels[runpod.LabelRunRequest] != id {
			return refuse(fmt.Sprintf("pod %s exists and is not this request's: choose another id", name))
		}
		built := runpod.ManualRunOf(&existing)
		rr = runRequestRecord(id, owners, built)
		rr.Pod = name
		st.LastRunRequest = rr
		if !runstatus.Finished(&existing) {
			manualRunStarted(p, rr, built, name, true)
		}
		return nil
	case !apierrors.IsNotFound(err):
		p.log.Error(err, "reading a run request's pod; trying again", "pod", name)
		p.requeueAt(backendRetry)
		return nil
	}
	if perr != nil {
		return refuse(perr.Error())
	}

	if createdWithRequest(job, owners) {
		return refuse("it was there when the job was created (a restore, a re-applied or copied manifest), so it may have run before under an earlier job of this name: a run request is a change to an existing job; set a new id to run")
	}
	// A request waits unhandled while the backend is not ready (or the controller is
	// down), as an occurrence does, and, like one, not for ever: it expires when it was not
	// handled within the time a handled one may wait for the lock. Its time is that of the
	// managedFields entries that own it (requestTime).
	if at, ok := requestTime(owners); ok && !p.now.Before(at.Add(runpod.ManualWaitLimit)) {
		return refuse(fmt.Sprintf("requested at %s and not handled within %s (the lock backend was not ready, the workloads spec.blackout.rollouts names could not be read, or the controller was down): request again with a new id",
			at.UTC().Format(time.RFC3339), runpod.ManualWaitLimit))
	}

	// The blackout now, not the Blackout condition: a pass that stopped before the
	// schedule's blackout step (a suspended job) leaves the condition as it was.
	bs, err := r.blackoutNow(ctx, p)
	switch {
	case err != nil:
		return refuse(err.Error())
	case bs.unreadable != nil:
		// Whether a rollout holds it back cannot be told: it waits, unhandled, as for a
		// backend that is not ready (the workloads' cache not synced yet, the manager's
		// RBAC for them taken away a while), and expires as such a request does. The
		// Blackout condition says why.
		p.log.V(1).Info("run request waits for the rollout workloads to be readable", "id", id, "error", bs.unreadable.Error())
		p.requeueAt(unreadableRetry)
		return nil
	}
	if b := bs.rules.At(p.now, bs.rollouts); b.Blocked() {
		return refuse(fmt.Sprintf("a blackout is in effect (%s): request again when it ends", b.Describe()))
	}
	if berr != nil && berr.blocking() {
		// No pod could take the lock; the request waits (unhandled) for the backend, as an
		// occurrence does. LockBackendReady says why.
		p.log.V(1).Info("run request waits for the lock backend", "id", id, "reason", berr.Error())
		return nil
	}
	key := runpod.LockKey(job)
	if !m.Occurrence.IsZero() && backend != nil && berr == nil {
		q := ledgerQuestion{client.ObjectKeyFromObject(job), job.UID, id, key, m.Occurrence.UnixNano(), backend}
		a, ok := r.ledger.answer(ctx, q, func(ctx context.Context) (bool, error) {
			return r.backends.succeeded(ctx, backend, key, m.Occurrence)
		})
		switch {
		case !ok:
			// Asked off this worker; the answer wakes the job.
			p.log.V(1).Info("run request waits for the ledger's answer", "id", id)
			return nil
		case a.err != nil:
			p.log.V(1).Info("ledger check failed; the wrapper decides", "occurrence", m.Occurrence.Format(time.RFC3339), "error", a.err.Error())
		case a.succeeded && !r.health.readSince(types.NamespacedName{Namespace: job.Namespace, Name: job.Spec.Lock.Redis.SecretRef.Name}, a.asked, backend):
			// A refusal is for good; the Secret (read once a minute) may have been edited
			// since to name another Redis. It is read again, and a pass that finds it
			// unchanged takes this answer.
			r.ledger.keep(q, a)
			p.requeueAt(conflictRetry)
			return nil
		case a.succeeded:
			return refuse(fmt.Sprintf("occurrence %s already succeeded (the ledger of lock key %q says so); only an occurrence that did not succeed can be run again: remove annotation %s to run it as a run of its own",
				m.Occurrence.Format(time.RFC3339), key, v1alpha1.AnnotationRunOccurrence))
		}
	}

	// Like a scheduled run's, its job does not start once the next window has opened.
	opts := r.Pod
	opts.NotAfter = bs.rules.NextOpening(p.now)
	opts.MadeAt = p.now // a blackout that begins after this holds the pod back (markers.go)
	pod, err := runpod.BuildManual(job, m, opts)
	if err != nil {
		return refuse(err.Error())
	}
	if nameStillCounted(p, pod.Name) {
		return nil
	}
	if err := r.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Created since the read above (another pass, a stale cache): the next pass
			// records it.
			p.requeueAt(conflictRetry)
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// Refused (Pod Security, a quota): a request is answered now, and the user asks
			// again once something changed. (A scheduled occurrence's refused pod is asked
			// for again within its deadline: nobody else would ask.)
			return refuse(fmt.Sprintf("creating pod %s: %v", name, err))
		}
		p.log.Error(err, "creating a run request's pod; trying again", "pod", name)
		p.requeueAt(backendRetry)
		return nil
	}
	rr.Pod = pod.Name
	st.LastRunRequest = rr
	manualRunStarted(p, rr, m, pod.Name, false)
	return pod
}

// runRequestRecord is status's record of request id, run as m.
func runRequestRecord(id string, owners []requestOwner, m runpod.ManualRun) *v1alpha1.RunRequest {
	rr := &v1alpha1.RunRequest{ID: id, RequestedBy: requestedBy(owners), Contention: m.Contention, HandledAt: metav1.Time{Time: m.RequestedAt}}
	if !m.Occurrence.IsZero() {
		rr.Occurrence = &metav1.Time{Time: m.Occurrence}
	}
	return rr
}

// manualRunStarted says that run request rr has its pod, created by this pass or found
// (created by an earlier one): an Event and a log line.
func manualRunStarted(p *pass, rr *v1alpha1.RunRequest, m runpod.ManualRun, podName string, found bool) {
	how := "created pod " + podName
	if found {
		how = "found pod " + podName + ", created by an earlier pass"
	}
	what := "a run of its own"
	if !m.Occurrence.IsZero() {
		what = "occurrence " + m.Occurrence.Format(time.RFC3339) + " again"
	}
	by := ""
	if rr.RequestedBy != "" {
		by = " by " + rr.RequestedBy
	}
	p.eventf(corev1.EventTypeNormal, ReasonManualRunStarted, "run request %q%s: %s (%s, contention %s)", rr.ID, by, how, what, m.Contention)
	p.log.Info("manual run started", "id", rr.ID, "pod", podName, "requestedBy", rr.RequestedBy)
}

// blackoutNow is spec.blackout at the pass's time: the schedule step's, or, when the pass
// did not get that far (a suspended job, whose manual runs still run, or an invalid
// schedule), read now. An error names spec.blackout when it does not compile.
func (r *LockedCronJobReconciler) blackoutNow(ctx context.Context, p *pass) (*blackoutState, error) {
	if p.blackout != nil {
		return p.blackout, nil
	}
	return r.readBlackout(ctx, p)
}

// maxShown is how much of an annotation's value a refusal quotes.
const maxShown = 80

// shown quotes an annotation's value for a message, cut to maxShown bytes: an annotation
// may hold up to 256 KiB, and the refusal goes into status and an Event.
func shown(v string) string {
	if len(v) <= maxShown {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q… (%d bytes)", report.TruncateRunes(v, maxShown), len(v))
}
