package checker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// world builds a consistent history: contenders ns-a, ns-b (LockedCronJobs with counters)
// and vm (a host loop) contend for key "k" every 2 s; the one named for each occurrence
// runs it for 1 s and the others skip, naming it.
type world struct {
	h       History
	counter map[string]*v1alpha1.Counters
}

func newWorld() *world {
	w := &world{counter: map[string]*v1alpha1.Counters{}}
	for _, c := range []string{"ns-a", "ns-b", "vm"} {
		con := Contender{Name: c, Key: "k"}
		if c != "vm" {
			w.counter[c] = &v1alpha1.Counters{}
			con.Counters = w.counter[c]
		}
		w.h.Contenders = append(w.h.Contenders, con)
	}
	return w
}

func holder(c string, occ time.Time) string { return c + "/" + occ.Format("150405") }

// occ schedules occurrence n for every contender; winner runs it (from +100ms for dur,
// exiting exit); the rest skip. token is the winner's fencing token.
func (w *world) occ(n int, winner string, token int64, dur time.Duration, exit int) time.Time {
	at := t0.Add(time.Duration(n) * 2 * time.Second)
	for i := range w.h.Contenders {
		w.h.Contenders[i].Scheduled = append(w.h.Contenders[i].Scheduled, at)
	}
	start := at.Add(100 * time.Millisecond)
	w.h.Executions = append(w.h.Executions, Execution{Key: "k", Occurrence: at, Holder: holder(winner, at), Token: token,
		Start: start, End: start.Add(dur), Exit: exit})
	out := report.Succeeded
	if exit != 0 {
		out = report.Failed
	}
	w.decide(winner, at, Decision{Outcome: out, Token: token, ExitCode: exit})
	for _, c := range []string{"ns-a", "ns-b", "vm"} {
		if c != winner {
			w.decide(c, at, Decision{Outcome: report.SkippedContention, HeldBy: holder(winner, at)})
		}
	}
	return at
}

// decide adds c's report for at and counts it as the controller would.
func (w *world) decide(c string, at time.Time, d Decision) {
	d.Contender, d.Key, d.Occurrence, d.Holder = c, "k", at, holder(c, at)
	w.h.Decisions = append(w.h.Decisions, d)
	k := w.counter[c]
	if k == nil {
		return
	}
	switch d.Outcome {
	case report.Succeeded:
		k.Runs++
		k.Succeeded++
	case report.Failed, report.LockLost:
		k.Runs++
		k.Failed++
	case report.SkippedContention:
		k.SkippedContention++
	case report.SuppressedDuplicate:
		k.DuplicatesSuppressed++
	}
	if d.Outcome == report.LockLost {
		k.LockLost++
	}
}

// clean is a history with the permitted irregularities: a failed run followed by a
// re-run of the same occurrence, a run without an end record (killed), an occurrence
// missed by a LockedCronJob without any pod, and a holder paused past its TTL that
// reported LockLost while the next holder ran (a fenced overlap).
func clean() *world {
	w := newWorld()
	tok := int64(100)
	next := func() int64 { tok += 10; return tok }
	for n := 0; n < 20; n++ {
		w.occ(n, []string{"ns-a", "ns-b", "vm"}[n%3], next(), time.Second, 0)
	}
	// Occurrence 20: ns-a fails; ns-b (Retry) runs it again; vm skipped.
	at := t0.Add(40 * time.Second)
	for i := range w.h.Contenders {
		w.h.Contenders[i].Scheduled = append(w.h.Contenders[i].Scheduled, at)
	}
	s := at.Add(100 * time.Millisecond)
	w.h.Executions = append(w.h.Executions,
		Execution{Key: "k", Occurrence: at, Holder: holder("ns-a", at), Token: next(), Start: s, End: s.Add(300 * time.Millisecond), Exit: 3},
		Execution{Key: "k", Occurrence: at, Holder: holder("ns-b", at), Token: next(), Start: s.Add(500 * time.Millisecond), End: s.Add(time.Second)})
	w.decide("ns-a", at, Decision{Outcome: report.Failed, Token: tok - 10, ExitCode: 3})
	w.decide("ns-b", at, Decision{Outcome: report.Succeeded, Token: tok})
	w.decide("vm", at, Decision{Outcome: report.SkippedContention, HeldBy: holder("ns-a", at)})
	// Occurrence 21: vm's job killed outright (no end record); 22: ns-b missed it without a pod.
	at = w.occ(21, "vm", next(), time.Second, 0)
	w.h.Executions[len(w.h.Executions)-1].End = time.Time{}
	w.h.Decisions[len(w.h.Decisions)-3].ExitCode = 137
	w.h.Decisions[len(w.h.Decisions)-3].Outcome = report.Failed
	_ = at
	at = w.occ(22, "ns-a", next(), time.Second, 0)
	w.h.Decisions = w.h.Decisions[:len(w.h.Decisions)-2] // drop ns-b's and vm's reports …
	w.counter["ns-b"].SkippedContention--
	w.counter["ns-b"].Missed++ // … ns-b's controller counted it missed
	w.decide("vm", at, Decision{Outcome: report.SkippedContention, HeldBy: holder("ns-a", at)})
	// Occurrence 23: vm's holder frozen past its TTL for 5 s; ns-a runs 24 meanwhile.
	at = w.occ(23, "vm", next(), 5*time.Second, 143)
	w.h.Decisions[len(w.h.Decisions)-3].Outcome = report.LockLost
	w.occ(24, "ns-a", next(), time.Second, 0)
	return w
}

func kinds(r Result) []Kind {
	var ks []Kind
	for _, v := range r.Violations {
		if !slices.Contains(ks, v.Kind) {
			ks = append(ks, v.Kind)
		}
	}
	slices.Sort(ks)
	return ks
}

func TestCleanHistoryPasses(t *testing.T) {
	w := clean()
	// A skip behind a holder whose pod the soak deleted before it reported is no loss.
	w.h.Deleted = append(w.h.Deleted, Deleted{Key: "k", Holder: "ns-a/deleted"})
	for i, d := range w.h.Decisions {
		if d.Contender == "vm" && d.Outcome == report.SkippedContention {
			w.h.Decisions[i].HeldBy = "ns-a/deleted"
			break
		}
	}
	r := Check(w.h, 10*time.Second)
	if !r.OK() {
		t.Fatalf("clean history: %v", r.Violations)
	}
	if len(r.Keys) != 1 {
		t.Fatalf("keys: %+v", r.Keys)
	}
	k := r.Keys[0]
	want := KeyStats{Key: "k", Scheduled: 25, Executed: 25, Executions: 26, Reruns: 1, NotRun: 0,
		Succeeded: 23, Failed: 2, LockLost: 1, Skipped: 48, Missed: 1, FencedOverlaps: 1}
	if k != want {
		t.Fatalf("stats:\n got %+v\nwant %+v", k, want)
	}
}

func TestPlantedViolationsAreCaught(t *testing.T) {
	last := func(w *world) *Execution { return &w.h.Executions[len(w.h.Executions)-1] }
	cases := []struct {
		name  string
		plant func(w *world)
		want  []Kind
		// text the violation message must contain
		says string
	}{
		{"duplicate: an occurrence runs again after it succeeded", func(w *world) {
			at := t0.Add(2 * time.Second) // occurrence 1: ns-b ran it and succeeded; ns-a runs it later too
			w.h.Executions = append(w.h.Executions, Execution{Key: "k", Occurrence: at, Holder: holder("ns-a", at) + "-late",
				Token: 9999, Start: t0.Add(60 * time.Second), End: t0.Add(61 * time.Second)})
			w.h.Decisions = append(w.h.Decisions, Decision{Contender: "late", Key: "k", Occurrence: at, Holder: holder("ns-a", at) + "-late",
				Outcome: report.Succeeded, Token: 9999})
			w.h.Contenders = append(w.h.Contenders, Contender{Name: "late", Key: "k", Scheduled: []time.Time{at}})
		}, []Kind{KindDuplicate}, "ran again after it succeeded"},
		{"overlap: a run starts before the previous holder's ends", func(w *world) {
			e := &w.h.Executions[5] // 10.1s–11.1s; 4 runs 8.1s–9.1s: stretch 4 to 10.5s
			w.h.Executions[4].End = e.Start.Add(400 * time.Millisecond)
		}, []Kind{KindOverlap}, "two holders ran at once"},
		{"token goes backwards", func(w *world) {
			w.h.Executions[7].Token = w.h.Executions[6].Token - 1
			for i, d := range w.h.Decisions {
				if d.Holder == w.h.Executions[7].Holder && d.Ran() {
					w.h.Decisions[i].Token = w.h.Executions[7].Token
				}
			}
		}, []Kind{KindToken}, "did not increase"},
		{"a run starts before its occurrence (a prepared pod that did not wait)", func(w *world) {
			e := &w.h.Executions[3]
			e.Start, e.End = e.Occurrence.Add(-50*time.Millisecond), e.Occurrence.Add(200*time.Millisecond)
		}, []Kind{KindEarly}, "50ms before its occurrence"},
		{"unaccounted occurrence: the host loop has no report for one", func(w *world) {
			at := w.h.Executions[9].Occurrence
			w.h.Decisions = slices.DeleteFunc(w.h.Decisions, func(d Decision) bool { return d.Contender == "vm" && d.Occurrence.Equal(at) })
		}, []Kind{KindAccounting}, "vm has no report for 1"},
		{"unaccounted occurrence: scheduled, no pod, no counter", func(w *world) {
			at := t0.Add(100 * time.Second)
			w.h.Contenders[0].Scheduled = append(w.h.Contenders[0].Scheduled, at)
		}, []Kind{KindCounters}, "1 scheduled occurrences have no pod report"},
		{"a run nobody reported", func(w *world) {
			*last(w) = Execution{Key: "k", Occurrence: last(w).Occurrence, Holder: "ghost", Token: last(w).Token, Start: last(w).Start, End: last(w).End}
		}, []Kind{KindAccounting}, "no contender reported"},
		{"counter mismatch: runs one too many", func(w *world) {
			w.counter["ns-a"].Runs++
		}, []Kind{KindCounters}, "counters.runs"},
		{"counter mismatch: a skip counted as missed", func(w *world) {
			w.counter["ns-b"].SkippedContention--
			w.counter["ns-b"].Missed++
		}, []Kind{KindCounters}, "skippedContention"},
		// Lost occurrences (helper-103: each of these passed): every contender stood back
		// for a run nobody made.
		{"lost: told the occurrence was done, nobody ran it", func(w *world) {
			at := w.h.Executions[5].Occurrence
			w.h.Executions = slices.Delete(w.h.Executions, 5, 6)
			w.h.Decisions = slices.DeleteFunc(w.h.Decisions, func(d Decision) bool { return d.Occurrence.Equal(at) })
			for _, c := range []string{"ns-a", "ns-b", "vm"} {
				w.decide(c, at, Decision{Outcome: report.SuppressedDuplicate, HeldBy: "ns-a/ghost"})
			}
			for _, k := range w.counter {
				k.SkippedContention-- // the skips dropped above
			}
		}, []Kind{KindLost}, `was told occurrence 2026-11-30T12:00:10Z was done already (by "ns-a/ghost")`},
		{"lost: every contender skipped behind a holder that never was", func(w *world) {
			at := w.h.Executions[5].Occurrence
			winner := w.h.Executions[5].Holder
			w.h.Executions = slices.Delete(w.h.Executions, 5, 6)
			w.h.Decisions = slices.DeleteFunc(w.h.Decisions, func(d Decision) bool { return d.Holder == winner })
			w.decide(strings.SplitN(winner, "/", 2)[0], at, Decision{Outcome: report.SkippedContention, HeldBy: "nobody-ever/ran"})
			for i, d := range w.h.Decisions {
				if d.Occurrence.Equal(at) {
					w.h.Decisions[i].HeldBy = "nobody-ever/ran"
				}
			}
			if k := w.counter[strings.SplitN(winner, "/", 2)[0]]; k != nil {
				k.Runs--
				k.Succeeded--
			}
		}, []Kind{KindLost}, `skipped 2026-11-30T12:00:10Z behind "nobody-ever/ran"`},
		{"lost: counted skipped for a blackout the job does not have", func(w *world) {
			w.counter["ns-a"].SkippedBlackout++
			w.h.Contenders[0].Scheduled = append(w.h.Contenders[0].Scheduled, t0.Add(100*time.Second))
		}, []Kind{KindLost}, "ns-a counted 1 occurrences skipped for a blackout, but it has no spec.blackout"},
		{"a skip that names no holder", func(w *world) {
			for i, d := range w.h.Decisions {
				if d.Outcome == report.SkippedContention {
					w.h.Decisions[i].HeldBy = ""
					break
				}
			}
		}, []Kind{KindAccounting}, "without naming the holder"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := clean()
			tc.plant(w)
			r := Check(w.h, 10*time.Second)
			if got := kinds(r); !slices.Equal(got, tc.want) {
				t.Fatalf("violation kinds = %v, want %v: %v", got, tc.want, r.Violations)
			}
			var all []string
			for _, v := range r.Violations {
				all = append(all, v.String())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.says) {
				t.Fatalf("no violation says %q: %v", tc.says, all)
			}
		})
	}
}

func TestOverlapIsNotLinearizableAndVisualized(t *testing.T) {
	w := clean()
	w.h.Executions[4].End = w.h.Executions[5].Start.Add(time.Second)
	r := Check(w.h, 10*time.Second)
	if r.Linearizable == porcupine.Ok || r.OK() {
		t.Fatalf("porcupine accepted two holders at once: %v", r.Linearizable)
	}
	path := filepath.Join(t.TempDir(), "history.html")
	if err := r.WriteVisualization(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The page names the runs by their holders (DescribeOperation).
	if !strings.Contains(string(b), w.h.Executions[4].Holder) || !strings.Contains(string(b), "acquire") {
		t.Fatalf("visualization does not show the runs (%d bytes)", len(b))
	}
}

// The lock model alone: a paused holder's LockLost run may overlap the next one, but the
// same overlap without the LockLost report is a violation.
func TestLockLostIsTheOnlyExcuse(t *testing.T) {
	w := clean()
	for i, d := range w.h.Decisions {
		if d.Outcome == report.LockLost {
			w.h.Decisions[i].Outcome = report.Failed
			if k := w.counter[d.Contender]; k != nil {
				k.LockLost--
			}
		}
	}
	r := Check(w.h, 10*time.Second)
	if got := kinds(r); !slices.Equal(got, []Kind{KindOverlap}) {
		t.Fatalf("kinds = %v: %v", got, r.Violations)
	}
}

// A success whose holder reported LockLost (its lockwrap was paused after the job exited,
// the lock expired before the success was recorded) may be run again by the next holder:
// counted as a re-run after a lost holder's success, not a violation. The same re-run after
// a success whose holder kept the lock stays a violation (TestPlantedViolationsAreCaught).
func TestRerunAfterALostHoldersSuccessIsCountedNotAViolation(t *testing.T) {
	w := clean()
	at := t0.Add(2 * time.Second)
	for i, d := range w.h.Decisions {
		if d.Occurrence.Equal(at) && d.Outcome == report.Succeeded {
			w.h.Decisions[i].LockLost = true
		}
	}
	w.h.Executions = append(w.h.Executions, Execution{Key: "k", Occurrence: at, Holder: holder("ns-a", at) + "-late",
		Token: 9999, Start: t0.Add(60 * time.Second), End: t0.Add(61 * time.Second)})
	w.h.Decisions = append(w.h.Decisions, Decision{Contender: "late", Key: "k", Occurrence: at, Holder: holder("ns-a", at) + "-late",
		Outcome: report.Succeeded, Token: 9999})
	w.h.Contenders = append(w.h.Contenders, Contender{Name: "late", Key: "k", Scheduled: []time.Time{at}})
	r := Check(w.h, 10*time.Second)
	if slices.Contains(kinds(r), KindDuplicate) {
		t.Fatalf("re-run after a lost holder's success reported as a duplicate: %v", r.Violations)
	}
	var reruns int
	for _, k := range r.Keys {
		reruns += k.LostHolderReruns
	}
	if reruns != 1 {
		t.Fatalf("LostHolderReruns = %d, want 1 (%v)", reruns, r.Violations)
	}
}

// killedAfterItsEndRecord is clean() plus occurrence 30, whose ns-a job wrote its end record
// (exit 0) and was then SIGKILLed by the soak before it exited (seed 801356052, CI of
// 2026-12-03): lockwrap saw a killed job and recorded a failure, reported as Failed with
// exit code 137, and ns-b ran the occurrence again, with success. kill says whether the soak
// logged the kill; outcome and exit are what ns-a's lockwrap reported; third adds a run of
// vm after ns-b's success.
func killedAfterItsEndRecord(kill bool, outcome report.Outcome, exit int, third bool) History {
	w := clean()
	at := w.occ(30, "ns-a", 9000, time.Second, 0)
	d := &w.h.Decisions[len(w.h.Decisions)-3]
	d.Outcome, d.ExitCode = outcome, exit
	c := w.counter["ns-a"]
	if outcome != report.Succeeded {
		c.Succeeded--
		c.Failed++
	}
	// ns-b's skip of 30 (and vm's, with third) becomes a run of it after ns-a's.
	again := []string{"ns-b"}
	if third {
		again = append(again, "vm")
	}
	w.h.Decisions = slices.DeleteFunc(w.h.Decisions, func(d Decision) bool {
		return slices.Contains(again, d.Contender) && d.Occurrence.Equal(at)
	})
	w.counter["ns-b"].SkippedContention--
	for i, con := range again {
		s := at.Add(time.Duration(1500+1500*i) * time.Millisecond)
		tok := int64(9010 + 10*i)
		w.h.Executions = append(w.h.Executions, Execution{Key: "k", Occurrence: at, Holder: holder(con, at), Token: tok,
			Start: s, End: s.Add(time.Second)})
		w.decide(con, at, Decision{Outcome: report.Succeeded, Token: tok})
	}
	if kill {
		w.h.Kills = append(w.h.Kills, Kill{Key: "k", Holder: holder("ns-a", at), Occurrence: at})
	}
	return w.h
}

// A job the soak SIGKILLed between its end record (exit 0) and its exit did not succeed:
// its lockwrap saw it killed and recorded a failure, and the occurrence may run again,
// counted. The same re-run stays a Duplicate when the soak did not kill the job (its exit
// status was what lockwrap reported wrongly), when its lockwrap reported a success (the kill
// landed on a job that had exited already) or another failure than the kill's, and a run
// after the re-run's success is a Duplicate whatever came before it.
func TestRunKilledAfterItsEndRecordMayRunAgain(t *testing.T) {
	r := Check(killedAfterItsEndRecord(true, report.Failed, 137, false), 10*time.Second)
	if !r.OK() {
		t.Fatalf("a re-run after a job killed past its end record is a violation: %v", r.Violations)
	}
	if r.Keys[0].KilledReruns != 1 {
		t.Errorf("KilledReruns = %d, want 1 (counted, not excused silently)", r.Keys[0].KilledReruns)
	}
	for _, c := range []struct {
		name    string
		kill    bool
		outcome report.Outcome
		exit    int
		third   bool
	}{
		{"no kill logged", false, report.Failed, 137, false},
		{"killed but reported a success", true, report.Succeeded, 0, false},
		{"killed but reported another failure", true, report.Failed, 70, false},
		{"a run after the re-run's success", true, report.Failed, 137, true},
	} {
		r := Check(killedAfterItsEndRecord(c.kill, c.outcome, c.exit, c.third), 10*time.Second)
		if got := kinds(r); !slices.Equal(got, []Kind{KindDuplicate}) {
			t.Errorf("%s: kinds = %v, want [Duplicate]: %v", c.name, got, r.Violations)
		}
	}
}

// "Already run" by an earlier pod of the same name, which failed it (its run may have failed
// before its job wrote a record): not run again, by design (the ledger's "it failed in …,
// an earlier pod of this name"), and no loss. The same suppression naming another pod's
// holder, or saying the occurrence succeeded, needs a run on the audit list.
func TestSuppressedAfterAnEarlierPodOfOurNameFailedIsNoLoss(t *testing.T) {
	at := t0.Add(100 * time.Second)
	for _, tc := range []struct {
		name, heldBy, message string
		lost                  bool
	}{
		{"failed in an earlier pod of this name", "cl/ns-b/pod-100/uid-1", "lock: occurrence already run: it failed in cl/ns-b/pod-100/uid-1, an earlier pod of this name; a pod made again under that name does not run it again", false},
		{"failed in a pod of another name", "cl/ns-a/pod-100/uid-1", "lock: occurrence already run: it failed in cl/ns-a/pod-100/uid-1, an earlier pod of this name; a pod made again under that name does not run it again", true},
		{"succeeded, by nobody on the audit list", "cl/ns-b/pod-100/uid-1", "lock: occurrence already succeeded: by cl/ns-b/pod-100/uid-1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := clean()
			w.h.Contenders[1].Scheduled = append(w.h.Contenders[1].Scheduled, at)
			w.counter["ns-b"].DuplicatesSuppressed++
			w.h.Decisions = append(w.h.Decisions, Decision{Contender: "ns-b", Key: "k", Occurrence: at,
				Holder: "cl/ns-b/pod-100/uid-2", HeldBy: tc.heldBy, Outcome: report.SuppressedDuplicate, Message: tc.message})
			r := Check(w.h, 10*time.Second)
			if got := slices.Contains(kinds(r), KindLost); got != tc.lost {
				t.Fatalf("lost %v, want %v: %v", got, tc.lost, r.Violations)
			}
		})
	}
}
