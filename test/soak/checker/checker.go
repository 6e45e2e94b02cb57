// Package checker judges the history of a soak run from the outside: it reads only what the
// job recorded (the audit list: occurrence, key, holder, fencing token, start, end, exit),
// what each contender reported (lockwrap's reports: the pods' termination messages, the
// host loop's report files) and the LockedCronJobs' counters, never the code it checks.
//
// The rules (each broken one is a Violation):
//
//   - Duplicate: an occurrence of a key runs at most once, except that a run which did not
//     succeed (exit ≠ 0, killed before its end record, or SIGKILLed by the soak between its
//     end record and its exit, which its lockwrap reported as a failure with exit code 137:
//     counted as KilledReruns) may be followed by
//     another run of the same occurrence — the documented re-run of a failed or crashed
//     occurrence. No run may start after a run of the same occurrence that succeeded —
//     unless that run's holder reported LockLost: its lockwrap was paused (SIGSTOP, a
//     frozen node) between the job's exit and recording it, the lock expired, and the next
//     holder found the occurrence not done. No lease can prevent that (docs/idempotency.md);
//     it is counted (LostHolderReruns), not excused silently.
//   - Overlap: no two runs of a key overlap in time. Each run is a critical section: an
//     acquire at its start and a release at its end, checked with porcupine against a lock
//     model (a history that needs two holders at once is not linearizable). A run its
//     holder reported LockLost lost the lock at some unknown instant between its start and
//     its end, so its release may be placed anywhere in that interval: the overlap a paused
//     holder causes is the one fencing tokens exist for, and it is counted (FencedOverlaps),
//     not excused silently.
//   - Token: fencing tokens of a key increase strictly in start order.
//   - Early: no run starts before its occurrence. A pod prepared ahead
//     (prepareAheadSeconds) exists before its instant; its lockwrap waits for the instant
//     (the soak's node and host share one clock).
//   - Lost: a contender that stood back stood back for a run that happened. An "already
//     done" (SuppressedDuplicate) names a run of that occurrence on the audit list; a skip
//     names a holder that ran, reported, or whose pod the soak deleted; a job counts
//     occurrences skipped for a blackout only if it has one. Otherwise the occurrence was
//     lost: nobody ran it, and the contenders were told it was taken care of.
//   - Accounting: each contender decides each occurrence it was scheduled for exactly once;
//     a run a contender reports has its audit record and the reverse; a skip names the
//     holder; a contender's counters equal its reports, and account for every occurrence
//     without a report (missed, blackout, suppressed before a pod was made).
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
)

// Execution is one run of a job, as the job itself recorded it on the audit list.
type Execution struct {
	Key        string
	Occurrence time.Time
	Holder     string
	Token      int64
	Start      time.Time
	// End is zero when the run left no end record (killed outright): it ended at an
	// unknown instant after Start.
	End  time.Time
	Exit int
}

// Decision is what one contender reported about one occurrence: a lockwrap report.
type Decision struct {
	Contender  string
	Key        string
	Occurrence time.Time
	Outcome    report.Outcome
	Holder     string // the contender's holder identity for this occurrence
	HeldBy     string // who held the lock when it skipped
	Token      int64
	ExitCode   int
	LockLost   bool
	Message    string
}

// Ran reports whether the decision says the job started.
func (d Decision) Ran() bool {
	return d.Outcome == report.Succeeded || d.Outcome == report.Failed || d.Outcome == report.LockLost
}

// Contender is one place that declares the key's schedule: a LockedCronJob (with Counters)
// or a host loop running lockwrap (Counters nil: its reports are all there is).
type Contender struct {
	Name string
	Key  string
	// Scheduled are the occurrences it was due to decide over the soak.
	Scheduled []time.Time
	Counters  *v1alpha1.Counters
	// Blackout: the LockedCronJob has a spec.blackout.
	Blackout bool
}

// History is everything the checker is given.
type History struct {
	Executions []Execution
	Decisions  []Decision
	Contenders []Contender
	// Kills are the runs the soak SIGKILLed (job-kill-9).
	Kills []Kill
	// Deleted are the holders whose pods were deleted without a decision: by the soak
	// (holder-pod-deleted), or withdrawn by the controller ahead of their instant.
	Deleted []Deleted
}

// Deleted is a holder whose pod was deleted, perhaps while it held the key's lock.
type Deleted struct {
	Key    string
	Holder string
}

// Kill is one run of a job the soak SIGKILLed, named as its audit records name it.
type Kill struct {
	Key        string
	Holder     string
	Occurrence time.Time
}

// Kind names the rule a Violation breaks.
type Kind string

const (
	KindDuplicate  Kind = "Duplicate"
	KindOverlap    Kind = "Overlap"
	KindToken      Kind = "TokenOrder"
	KindEarly      Kind = "Early"
	KindLost       Kind = "Lost"
	KindAccounting Kind = "Accounting"
	KindCounters   Kind = "Counters"
)

// Violation is one broken rule, with the records that show it.
type Violation struct {
	Kind    Kind
	Key     string
	Message string
}

func (v Violation) String() string { return fmt.Sprintf("%s [%s]: %s", v.Kind, v.Key, v.Message) }

// KeyStats are the figures of one key: occurrences by fate, runs, contender decisions.
type KeyStats struct {
	Key string
	// Scheduled: distinct occurrences any contender was due to decide.
	Scheduled int
	// Executed: occurrences that ran at least once; Executions counts every run
	// (Reruns: runs after a failed or crashed run of the same occurrence).
	Executed, Executions, Reruns int
	// NotRun: scheduled occurrences that never ran (every contender skipped, was
	// suppressed, missed it or was in a blackout).
	NotRun int
	// Decisions of the contenders, by outcome (reports and counters).
	Succeeded, Failed, LockLost, Skipped, Suppressed, Missed, Blackout, Interrupted, Errors int64
	// FencedOverlaps: runs overlapping a run whose holder reported LockLost.
	FencedOverlaps int
	// LostHolderReruns: runs of an occurrence that had succeeded in a run whose holder
	// reported LockLost (the success could not be recorded in time).
	LostHolderReruns int
	// KilledReruns: runs of an occurrence after a run the soak SIGKILLed between its end
	// record (exit 0) and its exit, which its lockwrap reported as a failure.
	KilledReruns int
}

// Result is the verdict.
type Result struct {
	Violations []Violation
	Keys       []KeyStats
	// Linearizable is porcupine's verdict on mutual exclusion (all keys).
	Linearizable porcupine.CheckResult

	model porcupine.Model
	info  porcupine.LinearizationInfo
}

// OK reports whether no rule was broken.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// WriteVisualization writes porcupine's HTML view of the lock history to path: the runs of
// each key as intervals, and, when mutual exclusion failed, the longest linearization it
// found and where it got stuck.
func (r Result) WriteVisualization(path string) error {
	return porcupine.VisualizePath(r.model, r.info, path)
}

// Check judges h. timeout bounds porcupine's search (0: none).
func Check(h History, timeout time.Duration) Result {
	var res Result
	execs := append([]Execution(nil), h.Executions...)
	sort.SliceStable(execs, func(i, j int) bool { return execs[i].Start.Before(execs[j].Start) })
	byKey := map[string][]int{}
	for i, e := range execs {
		byKey[e.Key] = append(byKey[e.Key], i)
	}
	lost := lostRuns(h.Decisions)
	killed := killedRuns(h.Kills, h.Decisions)
	stats := map[string]*KeyStats{}
	stat := func(key string) *KeyStats {
		if s, ok := stats[key]; ok {
			return s
		}
		s := &KeyStats{Key: key}
		stats[key] = s
		return s
	}
	for key, idx := range byKey {
		s := stat(key)
		res.Violations = append(res.Violations, checkDuplicates(key, execs, idx, lost, killed, s)...)
		res.Violations = append(res.Violations, checkTokens(key, execs, idx)...)
		res.Violations = append(res.Violations, checkEarly(key, execs, idx)...)
		s.FencedOverlaps = fencedOverlaps(execs, idx, lost)
	}
	res.model = lockModel(execs, lost)
	ops := lockOperations(execs, lost)
	res.Linearizable, res.info = porcupine.CheckOperationsVerbose(res.model, ops, timeout)
	if res.Linearizable != porcupine.Ok {
		res.Violations = append(res.Violations, overlapViolations(execs, byKey, lost, res.Linearizable)...)
	}
	res.Violations = append(res.Violations, checkAccounting(h, execs, stat)...)
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.Keys = append(res.Keys, *stats[k])
	}
	return res
}

// runID joins a run with its contender's report: one holder identity runs one occurrence
// at a time.
type runID struct {
	key, holder string
	occ         int64
}

func runIDOf(key, holder string, occ time.Time) runID { return runID{key, holder, occ.Unix()} }

// lostRuns are the runs their holders reported as having lost the lock.
func lostRuns(ds []Decision) map[runID]bool {
	m := map[runID]bool{}
	for _, d := range ds {
		if d.Outcome == report.LockLost || d.LockLost {
			m[runIDOf(d.Key, d.Holder, d.Occurrence)] = true
		}
	}
	return m
}

// killedRuns are the runs the soak SIGKILLed that their holders reported as killed by it: a
// failure with exit code 137 (128 + SIGKILL). A kill can land after the job's end record
// (exit 0) and before its exit: its lockwrap then saw a killed job and recorded a failure,
// and the occurrence may run again, although the audit list says it exited 0. A kill its
// holder reported otherwise (a success: it landed on a job that had exited; no report) is
// not one: the run's end record stands.
func killedRuns(kills []Kill, ds []Decision) map[runID]bool {
	byKill := map[runID]bool{}
	for _, d := range ds {
		if d.Outcome == report.Failed && d.ExitCode == 128+9 {
			byKill[runIDOf(d.Key, d.Holder, d.Occurrence)] = true
		}
	}
	m := map[runID]bool{}
	for _, k := range kills {
		if id := runIDOf(k.Key, k.Holder, k.Occurrence); byKill[id] {
			m[id] = true
		}
	}
	return m
}

func (e Execution) id() runID { return runIDOf(e.Key, e.Holder, e.Occurrence) }

// failed: the job did not exit 0 (killed before its end record, or failed), so its
// occurrence may be run again. A job that exited 0 after its holder lost the lock still
// succeeded: lockwrap records that if it still can, and the occurrence must not run again
// (except as a LostHolderRerun, see checkDuplicates).
func (e Execution) failed() bool {
	return e.End.IsZero() || e.Exit != 0
}

func (e Execution) String() string {
	end := "no end record"
	if !e.End.IsZero() {
		end = e.End.UTC().Format("15:04:05.000")
	}
	return fmt.Sprintf("{occurrence %s holder %s token %d start %s end %s exit %d}",
		e.Occurrence.UTC().Format(time.RFC3339), e.Holder, e.Token, e.Start.UTC().Format("15:04:05.000"), end, e.Exit)
}

func checkDuplicates(key string, execs []Execution, idx []int, lost, killed map[runID]bool, s *KeyStats) []Violation {
	var out []Violation
	byOcc := map[int64][]int{}
	var order []int64
	for _, i := range idx {
		o := execs[i].Occurrence.Unix()
		if _, ok := byOcc[o]; !ok {
			order = append(order, o)
		}
		byOcc[o] = append(byOcc[o], i)
	}
	s.Executions += len(idx)
	s.Executed += len(byOcc)
	for _, o := range order {
		runs := byOcc[o] // in start order
		s.Reruns += len(runs) - 1
		for j := 1; j < len(runs); j++ {
			// Every earlier run judges this one: a success of its own records is a
			// Duplicate unless it is excused (killed past its end record, or its holder
			// lost the lock), and the re-run is counted as excused only when every earlier
			// success is.
			var dup *Execution
			killedOne, lostOne := false, false
			for _, prev := range runs[:j] {
				e := &execs[prev]
				switch {
				case e.failed(): // not a success by its own records
				case killed[e.id()]:
					killedOne = true
				case lost[e.id()]:
					lostOne = true
				case dup == nil:
					dup = e
				}
			}
			switch {
			case dup != nil:
				out = append(out, Violation{Kind: KindDuplicate, Key: key, Message: fmt.Sprintf(
					"occurrence %s ran again after it succeeded: %v then %v",
					dup.Occurrence.UTC().Format(time.RFC3339), *dup, execs[runs[j]])})
			case killedOne:
				s.KilledReruns++
			case lostOne:
				s.LostHolderReruns++
			}
		}
	}
	return out
}

func checkTokens(key string, execs []Execution, idx []int) []Violation {
	var out []Violation
	for j := 1; j < len(idx); j++ {
		a, b := execs[idx[j-1]], execs[idx[j]]
		if b.Token <= a.Token {
			out = append(out, Violation{Kind: KindToken, Key: key, Message: fmt.Sprintf(
				"fencing token did not increase in start order: %v then %v", a, b)})
		}
	}
	return out
}

func checkEarly(key string, execs []Execution, idx []int) []Violation {
	var out []Violation
	for _, i := range idx {
		if e := execs[i]; e.Start.Before(e.Occurrence) {
			out = append(out, Violation{Kind: KindEarly, Key: key, Message: fmt.Sprintf(
				"a run started %v before its occurrence: %v", e.Occurrence.Sub(e.Start), e)})
		}
	}
	return out
}

// overlaps reports whether a and b (a started first) overlap; a run without an end record
// is taken to end at its successor's start, the most favourable reading (its holder's
// lockwrap bounds it, and the lock model checks the rest).
func overlaps(a, b Execution) bool {
	return !a.End.IsZero() && b.Start.Before(a.End)
}

func fencedOverlaps(execs []Execution, idx []int, lost map[runID]bool) int {
	n := 0
	for j := 1; j < len(idx); j++ {
		for _, i := range idx[:j] {
			if overlaps(execs[i], execs[idx[j]]) && lost[execs[i].id()] {
				n++
			}
		}
	}
	return n
}

// overlapViolations names the pairs that made the history non-linearizable.
func overlapViolations(execs []Execution, byKey map[string][]int, lost map[runID]bool, verdict porcupine.CheckResult) []Violation {
	var out []Violation
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		idx := byKey[key]
		for j := 1; j < len(idx); j++ {
			for _, i := range idx[:j] {
				if overlaps(execs[i], execs[idx[j]]) && !lost[execs[i].id()] {
					out = append(out, Violation{Kind: KindOverlap, Key: key, Message: fmt.Sprintf(
						"two holders ran at once: %v overlaps %v", execs[i], execs[idx[j]])})
				}
			}
		}
	}
	if len(out) == 0 { // porcupine found what the pairwise view did not name (or timed out)
		out = append(out, Violation{Kind: KindOverlap, Message: fmt.Sprintf("the lock history is not linearizable (porcupine: %s)", verdict)})
	}
	return out
}

// decidedCounts are a contender's decisions by outcome.
type decidedCounts map[report.Outcome]int64

func checkAccounting(h History, execs []Execution, stat func(string) *KeyStats) []Violation {
	var out []Violation
	add := func(kind Kind, key, format string, args ...any) {
		out = append(out, Violation{Kind: kind, Key: key, Message: fmt.Sprintf(format, args...)})
	}
	// Every run reported has its audit record, and every audit record its report.
	audited := map[runID]int{}
	for _, e := range execs {
		audited[e.id()]++
	}
	reported := map[runID]int64{}
	for _, d := range h.Decisions {
		if !d.Ran() {
			continue
		}
		id := runIDOf(d.Key, d.Holder, d.Occurrence)
		reported[id] = d.Token
		if audited[id] == 0 && d.ExitCode < 128 { // a job SIGKILLed at once may not have written
			add(KindAccounting, d.Key, "%s reported %s for %s as %s (token %d) but the audit list has no run of it",
				d.Contender, d.Outcome, d.Occurrence.UTC().Format(time.RFC3339), d.Holder, d.Token)
		}
	}
	for _, e := range execs {
		tok, ok := reported[e.id()]
		switch {
		case !ok:
			add(KindAccounting, e.Key, "the audit list has a run no contender reported: %v", e)
		case tok != e.Token:
			add(KindAccounting, e.Key, "the run's holder reported token %d, its job was given %d: %v", tok, e.Token, e)
		}
		if audited[e.id()] > 1 {
			add(KindDuplicate, e.Key, "holder %s ran occurrence %s %d times", e.Holder, e.Occurrence.UTC().Format(time.RFC3339), audited[e.id()])
			audited[e.id()] = 1 // once per holder
		}
	}

	out = append(out, checkLost(h, execs)...)

	occs := map[string]map[int64]bool{}
	for _, c := range h.Contenders {
		s := stat(c.Key)
		if occs[c.Key] == nil {
			occs[c.Key] = map[int64]bool{}
		}
		scheduled := map[int64]bool{}
		for _, t := range c.Scheduled {
			scheduled[t.Unix()] = true
			occs[c.Key][t.Unix()] = true
		}
		seen := map[int64]int{}
		counts := decidedCounts{}
		for _, d := range h.Decisions {
			if d.Contender != c.Name {
				continue
			}
			o := d.Occurrence.Unix()
			seen[o]++
			counts[d.Outcome]++
			if !scheduled[o] {
				add(KindAccounting, c.Key, "%s decided %s, which was not scheduled for it (%s)", c.Name, d.Occurrence.UTC().Format(time.RFC3339), d.Outcome)
			}
			if seen[o] == 2 {
				add(KindAccounting, c.Key, "%s decided occurrence %s more than once", c.Name, d.Occurrence.UTC().Format(time.RFC3339))
			}
			if d.Outcome == report.SkippedContention && d.HeldBy == "" {
				add(KindAccounting, c.Key, "%s skipped %s without naming the holder", c.Name, d.Occurrence.UTC().Format(time.RFC3339))
			}
		}
		undecided := int64(0)
		for o := range scheduled {
			if seen[o] == 0 {
				undecided++
			}
		}
		s.Succeeded += counts[report.Succeeded]
		s.Failed += counts[report.Failed]
		s.LockLost += counts[report.LockLost]
		s.Skipped += counts[report.SkippedContention]
		s.Interrupted += counts[report.Interrupted]
		if c.Counters == nil {
			s.Suppressed += counts[report.SuppressedDuplicate]
			s.Missed += counts[report.Missed]
			s.Errors += counts[report.Error]
			if undecided > 0 {
				add(KindAccounting, c.Key, "%s has no report for %d of its %d scheduled occurrences", c.Name, undecided, len(scheduled))
			}
			continue
		}
		cv := checkCounters(c, counts, undecided)
		out = append(out, cv...)
		k := c.Counters
		s.Suppressed += k.DuplicatesSuppressed
		s.Missed += k.Missed
		s.Blackout += k.SkippedBlackout
		s.Errors += k.Failed - (k.Runs - k.Succeeded)
	}
	for key, set := range occs {
		s := stat(key)
		s.Scheduled = len(set)
		s.NotRun = s.Scheduled - s.Executed
		if s.NotRun < 0 {
			add(KindAccounting, key, "%d occurrences ran that no contender was scheduled for", -s.NotRun)
		}
	}
	return out
}

// checkLost finds contenders that stood back for a run that did not happen.
func checkLost(h History, execs []Execution) []Violation {
	var out []Violation
	add := func(key, format string, args ...any) {
		out = append(out, Violation{Kind: KindLost, Key: key, Message: fmt.Sprintf(format, args...)})
	}
	type keyHolder struct{ key, holder string }
	ran := map[runID]bool{}
	known := map[keyHolder]bool{}
	for _, e := range execs {
		ran[e.id()] = true
		known[keyHolder{e.Key, e.Holder}] = true
	}
	for _, d := range h.Decisions {
		known[keyHolder{d.Key, d.Holder}] = true
	}
	for _, d := range h.Deleted {
		known[keyHolder{d.Key, d.Holder}] = true
	}
	for _, d := range h.Decisions {
		occ := d.Occurrence.UTC().Format(time.RFC3339)
		switch {
		case d.Outcome == report.SuppressedDuplicate && failedInOurName(d):
			// An earlier pod of this name failed it (its entry says so; its run may have
			// failed before the job wrote a record): not run again, by design.
		case d.Outcome == report.SuppressedDuplicate && !ran[runIDOf(d.Key, d.HeldBy, d.Occurrence)]:
			add(d.Key, "%s was told occurrence %s was done already (by %q), but the audit list has no run of it by that holder", d.Contender, occ, d.HeldBy)
		case d.Outcome == report.SkippedContention && d.HeldBy != "" && !known[keyHolder{d.Key, d.HeldBy}]:
			add(d.Key, "%s skipped %s behind %q, a holder that never ran, reported, or had its pod deleted", d.Contender, occ, d.HeldBy)
		}
	}
	for _, c := range h.Contenders {
		if c.Counters != nil && !c.Blackout && c.Counters.SkippedBlackout > 0 {
			add(c.Key, "%s counted %d occurrences skipped for a blackout, but it has no spec.blackout", c.Name, c.Counters.SkippedBlackout)
		}
	}
	return out
}

// failedInOurName: d was suppressed because an earlier holder of its own name (its holder
// up to the last "/": the pod's name, without its UID) failed the occurrence.
func failedInOurName(d Decision) bool {
	i, j := strings.LastIndex(d.Holder, "/"), strings.LastIndex(d.HeldBy, "/")
	return strings.Contains(d.Message, "it failed in") && i > 0 && j > 0 && d.Holder[:i] == d.HeldBy[:j] && d.Holder != d.HeldBy
}

// checkCounters compares a LockedCronJob's counters with its reports: the outcomes only a
// pod reports must be equal; the ones the controller may also record without a pod
// (missed, blackout, suppressed before creating a pod, a deleted pod's Error) must cover
// exactly the occurrences without a report.
func checkCounters(c Contender, n decidedCounts, undecided int64) []Violation {
	k := c.Counters
	var out []Violation
	bad := func(format string, args ...any) {
		out = append(out, Violation{Kind: KindCounters, Key: c.Key, Message: c.Name + ": " + fmt.Sprintf(format, args...)})
	}
	eq := func(name string, counter, reports int64) {
		if counter != reports {
			bad("counters.%s = %d, but its pods reported %d", name, counter, reports)
		}
	}
	ge := func(name string, counter, reports int64) int64 {
		if counter < reports {
			bad("counters.%s = %d, fewer than the %d its pods reported", name, counter, reports)
			return 0
		}
		return counter - reports
	}
	eq("runs", k.Runs, n[report.Succeeded]+n[report.Failed]+n[report.LockLost])
	eq("succeeded", k.Succeeded, n[report.Succeeded])
	eq("skippedContention", k.SkippedContention, n[report.SkippedContention])
	eq("interrupted", k.Interrupted, n[report.Interrupted])
	extra := ge("failed", k.Failed, n[report.Failed]+n[report.LockLost]+n[report.Error])
	extra += ge("duplicatesSuppressed", k.DuplicatesSuppressed, n[report.SuppressedDuplicate])
	extra += ge("missed", k.Missed, n[report.Missed])
	extra += k.SkippedBlackout
	if extra != undecided {
		bad("%d scheduled occurrences have no pod report, but the counters account for %d without one (missed %d, skippedBlackout %d, duplicatesSuppressed %d, failed %d; reports: %s)",
			undecided, extra, k.Missed, k.SkippedBlackout, k.DuplicatesSuppressed, k.Failed, n)
	}
	return out
}

func (n decidedCounts) String() string {
	var parts []string
	for _, o := range report.Outcomes {
		if n[o] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, n[o]))
		}
	}
	return strings.Join(parts, ", ")
}
