package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// Prepare-ahead (spec.prepareAheadSeconds, issue 13): the next occurrence's pod is
// created up to that many seconds before its instant, so that scheduling, image pull and
// container start are done by then; lockwrap waits for the instant (--not-before) on the
// node's clock and only then takes the lock. The occurrence is decided at its instant as
// any other: until then the pod is "prepared", and a pass that finds it no longer
// wanted — the job suspended, the schedule changed, a blackout now covering the instant
// — withdraws it: the pod is deleted, the reason noted on it first
// (runpod.AnnotationWithdrawnAhead). Its kubelet may act on the deletion only after the
// instant, when lockwrap has already started the job (the pass decided a moment before
// it, or the kubelet is slow under load), so the pod keeps its tracking finalizer until
// it has said: if its job ran, its report is its occurrence's outcome, counted as any
// other; if not (interrupted while waiting for the instant, or it never started), it is
// released uncounted and the schedule decides its occurrence as if it had never been
// (skipped in the blackout that withdrew it, say). Until then the occurrence waits: it
// is counted once either way, and no second pod of its name is made.
// If the controller is down then, nobody withdraws it: at its instant lockwrap runs the
// job (still under the lock and the ledger), as a pod created at the instant would.
// Deleting the job withdraws its prepared pods as well, whatever the propagation:
// with --cascade=orphan the garbage collector keeps them, and the pass that finds the
// job being deleted or gone deletes them (releasePods).

// asideRetry is how soon a pass that left an occurrence to its withdrawn pod looks again
// (the pod's own events usually come first).
const asideRetry = time.Second

// prepareAhead is spec.prepareAheadSeconds as a duration (0: off).
func prepareAhead(job *v1alpha1.LockedCronJob) time.Duration {
	if job.Spec.PrepareAheadSeconds == nil || *job.Spec.PrepareAheadSeconds <= 0 {
		return 0
	}
	return time.Duration(*job.Spec.PrepareAheadSeconds) * time.Second
}

// prepare creates the next occurrence's pod ahead of its instant when it is time to, and
// comes back when it will be. It returns the pod it created, if any.
func (r *LockedCronJobReconciler) prepare(ctx context.Context, p *pass, plan *schedule.Plan, bs *blackoutState, berr *backendError) *corev1.Pod {
	ahead := prepareAhead(p.job)
	if ahead == 0 || plan.Next.IsZero() || p.holdCreates {
		return nil
	}
	next := plan.Next
	if at := next.Add(-ahead); at.After(p.now) {
		p.requeueAt(at.Sub(p.now))
		return nil
	}
	if p.hasPod(runpod.Name(p.job.Name, next)) {
		return nil
	}
	// Only an occurrence that would start at its instant as things stand is prepared;
	// anything else is decided at the instant, the usual way.
	if bs.unreadable != nil || bs.rules.At(next, bs.rollouts).Blocked() || bs.rules.At(p.now, bs.rollouts).Blocked() {
		return nil
	}
	if berr != nil && berr.blocking() {
		return nil
	}
	if p.unstarted(next) != nil {
		return nil
	}
	return r.startOccurrence(ctx, p, next, bs.rules.NextOpening(next), next)
}

// hasPod reports whether the pass saw a pod of that name (active or finished).
func (p *pass) hasPod(name string) bool {
	for _, n := range p.seen {
		if n == name {
			return true
		}
	}
	return false
}

// withdrawPrepared takes back the prepared pods (tracking.StillPrepared: marked, occurrence
// still to come and not decided) that the job no longer wants: all of them when
// suspended, otherwise those that are not for next or whose instant a blackout now
// covers. why says which. inForce says whether the schedule in force has an occurrence:
// a prepared pod whose instant has come (on this pass's clock) but whose container has not
// started (its job cannot have begun: an image still pulling, a slow node) is taken back
// too when its occurrence is after the spec's change (status.scheduleSince: whole seconds,
// as managedFields keep it; an occurrence in the change's second was in force) and the
// schedule in force does not have it: the job was suspended, or its schedule edited, a
// moment before the instant, and the pass that sees it runs after it (the workqueue
// behind). A started one (lockwrap runs, and may have begun the job) is left to run.
func (p *pass) withdrawPrepared(keep, inForce func(occ time.Time) bool, why string) {
	decided := decidedUpTo(p.status)
	changed := time.Time{}
	if since := p.status.ScheduleSince; since != nil {
		changed = since.Time
	}
	for _, pod := range p.active {
		occ, err := runstatus.Occurrence(pod)
		if err != nil || pod.Name != runpod.Name(p.job.Name, occ) || p.isAside(pod.Name) || keep(occ) {
			continue
		}
		// Not in force, its occurrence is nobody's to count (however the pass after its
		// instant took its pod for it: lastScheduleTime).
		_, marked := pod.Annotations[runpod.AnnotationPreparedAhead]
		if tracking.StillPrepared(pod, occ, p.now, decided) ||
			marked && occ.After(changed) && !tracking.Started(pod) && !inForce(occ) {
			p.withdrawAhead(pod, why)
		}
	}
}

// none is an inForce for a job none of whose occurrences is in force (suspended, its
// schedule refused), and a keep that keeps nothing.
func none(time.Time) bool { return false }

// inSchedule is the inForce of a schedule in force.
func inSchedule(sched *schedule.Schedule) func(time.Time) bool { return sched.Has }

// withdrawAhead notes why pod, prepared ahead, is withdrawn (the annotation, then the
// deletion, after the status write: deleteWithdrawn). It stays active, aside, until its
// kubelet has said whether its job ran.
func (p *pass) withdrawAhead(pod *corev1.Pod, why string) {
	p.withdrawn = append(p.withdrawn, withdrawal{pod, why})
	occ, _ := runstatus.Occurrence(pod)
	p.putAside(pod.Name, asideEntry{occ, true})
	p.log.Info("prepared pod withdrawn", "pod", pod.Name, "occurrence", occ.UTC().Format(time.RFC3339), "reason", why)
}

// setAside records, from its verdict, whether a pod withdrawn ahead of its instant
// stands aside from its occurrence: until it has said (Active), or for good if its job
// did not run (Withdrawn). A pod that ran (Report, Lost) stands for it.
func (p *pass) setAside(pod *corev1.Pod, v tracking.Verdict) {
	why, ahead := pod.Annotations[runpod.AnnotationWithdrawnAhead]
	if !ahead || (v != tracking.Active && v != tracking.Withdrawn) {
		return
	}
	occ, _ := runstatus.Occurrence(pod)
	p.putAside(pod.Name, asideEntry{occ, v == tracking.Active})
	if v == tracking.Active && pod.DeletionTimestamp == nil {
		p.withdrawn = append(p.withdrawn, withdrawal{pod, why}) // noted, but its deletion failed: again
	}
}

// asideEntry is a pod standing aside: its occurrence, and whether it may yet say that
// its job ran (waiting: Active) or is known not to have (Withdrawn).
type asideEntry struct {
	occ     time.Time
	waiting bool
}

func (p *pass) putAside(name string, a asideEntry) {
	if p.aside == nil {
		p.aside = map[string]asideEntry{}
	}
	p.aside[name] = a
}

func (p *pass) isAside(name string) bool {
	_, ok := p.aside[name]
	return ok
}

// asideUndecided returns the earliest occurrence of sched after decided (the watermark)
// that has come by the pass's time and that a pod standing aside, not yet known whether
// its job ran, was made for, and that pod's name: the schedule waits for it. A pod known
// not to have run (released, and perhaps lingering: its node gone) holds nothing back;
// its occurrence is decided as if it had never been. Nor does one of an occurrence sched
// does not have (made under a schedule since edited): sched decides nothing about it.
func (p *pass) asideUndecided(sched *schedule.Schedule, decided time.Time) (string, time.Time, bool) {
	var name string
	var first time.Time
	for n, a := range p.aside {
		if a.waiting && a.occ.After(decided) && !a.occ.After(p.now) && (first.IsZero() || a.occ.Before(first)) &&
			sched.Has(a.occ) {
			name, first = n, a.occ
		}
	}
	return name, first, !first.IsZero()
}

// waitingOccurrences are the occurrences of the pods standing aside that may yet say
// their job ran: each is that pod's to count (catchUp counts it as started).
func (p *pass) waitingOccurrences() []time.Time {
	var out []time.Time
	for _, a := range p.aside {
		if a.waiting {
			out = append(out, a.occ)
		}
	}
	return out
}

// standing is pods without those that stand aside from their occurrence.
func (p *pass) standing(pods []corev1.Pod) []corev1.Pod {
	if len(p.aside) == 0 {
		return pods
	}
	var out []corev1.Pod
	for i := range pods {
		if !p.isAside(pods[i].Name) {
			out = append(out, pods[i])
		}
	}
	return out
}

// deleteWithdrawn withdraws the prepared pods no longer wanted (withdrawPod, noting why
// under runpod.AnnotationWithdrawnAhead); one noted but not deleted (the delete failed)
// is deleted by the next pass (setAside).
func (r *LockedCronJobReconciler) deleteWithdrawn(ctx context.Context, p *pass) error {
	for _, w := range p.withdrawn {
		if err := r.withdrawPod(ctx, w, runpod.AnnotationWithdrawnAhead); err != nil {
			return err
		}
	}
	return nil
}
