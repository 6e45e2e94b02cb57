package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// Catching up: status.lastScheduleTime is the accounting watermark, and it can be behind
// the newest occurrence that has a pod:
//   - a pass created a pod and deferred its status write (deferral.go): nothing lies
//     between, every occurrence there has its pod;
//   - a pass created a pod and its status write did not land (the operator pod deleted
//     mid-pass, a conflict): what it decided about the occurrences before that pod's
//     (missed, deferred then superseded by a blackout) is in no counter;
//   - the controller was down after preparing a pod ahead of its instant, and the
//     occurrences before it fell due meanwhile.
// So the watermark moves up to the newest occurrence with a pod, and what lies between
// without a pod is decided again, as the pass that created the pod decided it: a
// deferred occurrence superseded while the blackout lasted (or missed, if its deadline
// passed first), the others missed. The soak found the second case: an occurrence
// deferred, then superseded in the pass that started the next one, lost with its write.

// gap is what lies between the watermark and the newest occurrence that has a pod.
type gap struct {
	// missed counts the occurrences without a pod, other than the deferred one; last is
	// the newest of them.
	missed int64
	last   time.Time
	// deferred: status.deferred lies in the gap and has no pod (superseded).
	deferred bool
}

// findGap returns the occurrences of sched in (from, to) that have no pod (started holds
// the occurrences that have one; to is the newest of them). deferred is status.deferred:
// the pass that deferred it decided the occurrences before it, so the gap starts there.
func findGap(sched *schedule.Schedule, from, to time.Time, deferred *time.Time, started []time.Time) gap {
	var g gap
	if !to.After(from) {
		return g
	}
	lo := from
	if deferred != nil && deferred.After(from) && !deferred.After(to) {
		lo = deferred.Add(-time.Nanosecond)
	}
	plan := sched.Plan(schedule.Input{Earliest: lo, Now: to.Add(-time.Nanosecond)})
	if plan.Latest == nil {
		return g
	}
	total := plan.Missed + 1
	has := func(t time.Time) bool { return slices.ContainsFunc(started, t.Equal) }
	var with []time.Time // occurrences in the gap that have a pod (once each)
	for _, t := range started {
		if t.After(lo) && t.Before(to) && sched.Next(t.Add(-time.Second)).Equal(t) && !slices.ContainsFunc(with, t.Equal) {
			with = append(with, t)
		}
	}
	total -= int64(len(with))
	if lo != from && !has(*deferred) {
		g.deferred = true
		total--
	}
	if total <= 0 {
		return g
	}
	g.missed = total
	// The newest occurrence without a pod: at most len(with)+1 steps back from to.
	hi := to.Add(-time.Nanosecond)
	for {
		t, ok := sched.LatestIn(lo, hi)
		if !ok {
			break
		}
		if !has(t) && !(g.deferred && t.Equal(*deferred)) {
			g.last = t
			break
		}
		hi = t.Add(-time.Nanosecond)
	}
	return g
}

// catchUp moves lastScheduleTime up to what this manager knows it decided (written: the
// watermark of its last status write that landed; created: occurrences whose pods it
// created, which the cache may not show yet) and to the newest occurrence with a pod, and
// records what lies between without a pod (see above). A prepared pod (its occurrence
// still to come) does not count.
func (p *pass) catchUp(pods []corev1.Pod, written time.Time, created []time.Time) {
	job, st := p.job, p.status
	if !written.IsZero() && !written.After(p.now) && (st.LastScheduleTime == nil || written.After(st.LastScheduleTime.Time)) {
		st.LastScheduleTime = &metav1.Time{Time: written}
	}
	var started []time.Time
	for i := range pods {
		occ, err := runstatus.Occurrence(&pods[i])
		if err == nil && pods[i].Name == runpod.Name(job.Name, occ) {
			started = append(started, occ)
		}
	}
	started = append(started, created...)
	var to time.Time
	for _, t := range started {
		if !t.After(p.now) && t.After(to) {
			to = t
		}
	}
	from := earliest(job, st)
	if to.IsZero() || !to.After(from) {
		return
	}
	mark := &to
	defer func() {
		if mark != nil {
			st.LastScheduleTime = &metav1.Time{Time: *mark}
		}
	}()
	sched, ok := observedSchedule(job.Spec.Schedule, job.Spec.TimeZone, st.ObservedSchedule)
	if !ok {
		return
	}
	if w, ok := firstWaiting(sched, p.waitingOccurrences(), from, to); ok {
		// A pod standing aside that may yet say whether its job ran holds the watermark
		// before its occurrence: its report counts it if the job ran; if not, the
		// schedule decides it (prepare.go), which it could not once the watermark had
		// passed it. What lies before it without a pod is decided now.
		to, mark = w, nil
		if prev, ok := sched.LatestIn(from, w.Add(-time.Nanosecond)); ok {
			mark = &prev
		}
	}
	// An occurrence whose pod was withdrawn ahead and did not run the job has a pod of
	// its name, lingering perhaps, but nothing decided it: it is missed, and says why.
	var unrun []asideEntry
	for _, a := range p.aside {
		if !a.waiting && a.occ.After(from) && a.occ.Before(to) && sched.Next(a.occ.Add(-time.Nanosecond)).Equal(a.occ) && !slices.ContainsFunc(started, a.occ.Equal) {
			unrun = append(unrun, a)
			started = append(started, a.occ)
		}
	}
	slices.SortFunc(unrun, func(a, b asideEntry) int { return a.occ.Compare(b.occ) })
	g := findGap(sched, from, to, timeOf(st.Deferred), started)
	at := to.UTC().Format(time.RFC3339)
	if g.deferred {
		dl := startingDeadline(job)
		if superseded, reason := blackout.Supersede(st.Deferred.Time, to, dl); superseded {
			p.record(runstatus.OutcomeSkippedBlackout, CauseSuperseded, st.Deferred.Time, reason)
		} else {
			p.record(runstatus.OutcomeMissed, CauseBlackoutPastDeadline, st.Deferred.Time, fmt.Sprintf("deferred, then not started within startingDeadlineSeconds (%s) while the blackout lasted", dl))
		}
		st.Deferred = nil
	}
	for _, a := range unrun {
		p.record(runstatus.OutcomeMissed, CauseSuperseded, a.occ, withdrawnUnrun(a.why, "occurrence "+at+" came before it was decided"))
	}
	p.recordN(runstatus.OutcomeMissed, CauseUnrecorded, g.last, g.missed, "not started, and no decision about it was recorded (a status write lost to a manager restart or a conflict, or the manager was down); occurrence "+at+" has a pod")
}

// firstWaiting is the earliest of waiting (the occurrences of pods standing aside that
// may yet say whether their job ran) that sched has in (from, to].
func firstWaiting(sched *schedule.Schedule, waiting []time.Time, from, to time.Time) (time.Time, bool) {
	var first time.Time
	for _, w := range waiting {
		if w.After(from) && !w.After(to) && sched.Next(w.Add(-time.Nanosecond)).Equal(w) && (first.IsZero() || w.Before(first)) {
			first = w
		}
	}
	return first, !first.IsZero()
}

// observedSchedule is the schedule the job's pods were created under: the one
// status.observedSchedule records (spec's until a first pass records one); false while
// it records a suspension.
func observedSchedule(spec, tz, observed string) (*schedule.Schedule, bool) {
	if observed != "" {
		parts := strings.Split(observed, "|")
		if len(parts) != 3 || parts[2] != "suspend=false" {
			return nil, false
		}
		spec, tz = parts[0], parts[1]
	}
	s, err := schedule.Parse(spec, tz)
	return s, err == nil
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}
