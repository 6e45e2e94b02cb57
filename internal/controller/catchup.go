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
	defer func() { st.LastScheduleTime = &metav1.Time{Time: to} }()
	sched, ok := observedSchedule(job.Spec.Schedule, job.Spec.TimeZone, st.ObservedSchedule)
	if !ok {
		return
	}
	// A pod standing aside that may yet say its job ran does not move the watermark, but
	// its occurrence is not one without a pod: if its job ran, its report counts it; if
	// not, track counts it missed (passedOver).
	started = append(started, p.waitingOccurrences()...)
	upTo := to
	if st.ObservedSchedule != "" && st.ObservedSchedule != observedSpec(job) {
		// The spec changed after the schedule status records (the pass that saw the
		// change lost its write): the newest pod may be the new schedule's, and what the
		// old one had after the change was never an occurrence of a schedule in force.
		if changed := specChangedAt(job, p.now); changed.Before(to) {
			upTo = changed.Add(time.Nanosecond)
		}
	}
	g := findGap(sched, from, upTo, timeOf(st.Deferred), started)
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
	p.recordN(runstatus.OutcomeMissed, CauseUnrecorded, g.last, g.missed, "not started, and no decision about it was recorded (a status write lost to a manager restart or a conflict, or the manager was down); occurrence "+at+" has a pod")
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
