package runstatus

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

var t0 = time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)

func finishedPod(name string, occ time.Time, phase corev1.PodPhase, msg string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			runpod.AnnotationScheduledTime:    occ.Format(time.RFC3339),
			runpod.AnnotationWrappedContainer: "job",
		}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "not me"}}},
			{Name: "job", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg, ExitCode: 0}}},
		}},
	}
}

func TestResultOfReadsTheWrappedContainer(t *testing.T) {
	r := ResultOf(finishedPod("p", t0, corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","holder":"c/ns/p","fencingToken":4}`))
	if r.Invalid != nil {
		t.Fatal(r.Invalid)
	}
	want := Result{Pod: "p", Occurrence: t0, Trigger: "Scheduled", Report: report.Report{V: 1, Outcome: report.Succeeded, Holder: "c/ns/p", FencingToken: 4}}
	if d := cmp.Diff(want, r); d != "" {
		t.Error(d)
	}
}

// A pod withdrawn while its lockwrap waited for the lock (a blackout began) reports
// Interrupted by the signal; the count says why it came.
func TestResultOfAWithdrawnWaitingPodSaysWhy(t *testing.T) {
	msg := `{"v":1,"outcome":"Interrupted","message":"signal terminated; the command did not run"}`
	pod := finishedPod("p", t0, corev1.PodFailed, msg)
	pod.Annotations[runpod.AnnotationWithdrawn] = "a blackout began while it waited for the lock: rollout of Deployment/web"
	r := ResultOf(pod)
	if want := "signal terminated; the command did not run (withdrawn: a blackout began while it waited for the lock: rollout of Deployment/web)"; r.Report.Message != want {
		t.Errorf("message %q, want %q", r.Report.Message, want)
	}
	// A run that ended by itself, its pod withdrawn too late to matter, says what it said.
	pod = finishedPod("p", t0, corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded"}`)
	pod.Annotations[runpod.AnnotationWithdrawn] = "past its deadline"
	if r := ResultOf(pod); r.Report.Message != "" {
		t.Errorf("message %q", r.Report.Message)
	}
}

func TestResultOfWithoutAValidReportIsAnError(t *testing.T) {
	for name, pod := range map[string]*corev1.Pod{
		"not json":        finishedPod("p", t0, corev1.PodFailed, "panic: boom"),
		"empty":           finishedPod("p", t0, corev1.PodFailed, ""),
		"future version":  finishedPod("p", t0, corev1.PodFailed, `{"v":2,"outcome":"Succeeded"}`),
		"unknown outcome": finishedPod("p", t0, corev1.PodFailed, `{"v":1,"outcome":"Maybe"}`),
		// The pod GC fails a pod of a lost node as its kubelet last said: running. The job
		// may have run, perhaps to its end: not "never started".
		"failed while its job container ran": {ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{runpod.AnnotationWrappedContainer: "job"}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeletionByPodGC", ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			r := ResultOf(pod)
			if r.Invalid == nil || r.Report.Outcome != report.Error || r.Report.Message == "" {
				t.Fatalf("got %+v, want an Error result that says why", r)
			}
		})
	}
}

// TestResultOfAReportTheKubeletCut: the kubelet keeps of each container's termination
// message its share of 12 KiB among the pod's containers, and containers that admission
// webhooks inject (a mesh, a secrets agent) or kubectl debug adds later are not known
// when the pod is built: a report cut to that share is no JSON, and its run was counted
// Error. Its outcome, which the report holds first, is counted, saying it was cut.
func TestResultOfAReportTheKubeletCut(t *testing.T) {
	full, err := report.Encode(report.Report{Outcome: report.Succeeded, Key: strings.Repeat("k", 512), Holder: "c/ns/p/u",
		FencingToken: 9, Message: strings.Repeat("m", 1500)})
	if err != nil {
		t.Fatal(err)
	}
	share := 12 * 1024 / 9
	r := ResultOf(finishedPod("p", t0, corev1.PodSucceeded, string(full[:share])))
	if r.Invalid != nil || r.Report.Outcome != report.Succeeded || !strings.Contains(r.Report.Message, "cut") {
		t.Fatalf("a %d-byte report cut to %d bytes: %+v, want its outcome, said to be cut", len(full), share, r)
	}
	// A cut report says nothing of its holder: the last holder known stays.
	st := &v1alpha1.LockedCronJobStatus{LastHolder: &v1alpha1.Holder{Identity: "c/ns/before/u", FencingToken: 8, Occurrence: &metav1.Time{Time: t0.Add(-time.Hour)}}}
	Fold(st, r)
	if st.LastHolder.Identity != "c/ns/before/u" || st.LastSuccess != nil || st.Counters.Succeeded != 1 {
		t.Errorf("a cut report folded as %+v, last success %+v", st.LastHolder, st.LastSuccess)
	}
	// The outcome itself cut, or a whole message that is not a report: nothing to read.
	for _, msg := range []string{`{"v":1,"outcome":"Succ`, `{"v":1,"outcome":"Succeeded","v":2}`, `{"v":1,"outcome":"Succeeded"} and more`} {
		if r := ResultOf(finishedPod("p", t0, corev1.PodFailed, msg)); r.Invalid == nil {
			t.Errorf("%q read as %s", msg, r.Report.Outcome)
		}
	}
}

// A pod its kubelet failed before its job container ran (a node-pressure eviction, an
// admission refusal, a failed init container) never started: Missed, with the pod's
// reason, as the spec says of pods that never start. It used to be counted Error.
func TestResultOfNeverStartedIsMissed(t *testing.T) {
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"evicted before its containers ran": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{runpod.AnnotationWrappedContainer: "job"}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}},
			"pod ended before its job container started: Evicted: The node was low on resource: memory."},
		"its job container still waiting": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{runpod.AnnotationWrappedContainer: "job"}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu", ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}},
			"pod ended before its job container started: OutOfcpu"},
		"no word at all": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
			"pod ended before its job container started"},
		// The pod says nothing; its init container does (lockwrap's install refusing a
		// controller newer than it: the logs the kubelet kept as its message).
		"lockwrap's install container refused": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{runpod.AnnotationWrappedContainer: "job"}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: runpod.InitContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 70, Reason: "Error", Message: "lockwrap: cp: this lockwrap is an older build\n"}}}}}},
			"pod ended before its job container started: init container " + runpod.InitContainerName + ": exited 70: Error: lockwrap: cp: this lockwrap is an older build"},
	} {
		t.Run(name, func(t *testing.T) {
			r := ResultOf(c.pod)
			if r.Invalid != nil || r.Report.Outcome != report.Missed || r.Report.Message != c.want {
				t.Fatalf("got %+v, want Missed %q", r, c.want)
			}
			var st v1alpha1.LockedCronJobStatus
			Fold(&st, r)
			if st.Counters != (v1alpha1.Counters{Missed: 1}) {
				t.Errorf("counters %+v, want one missed", st.Counters)
			}
		})
	}
}

func TestFoldCounters(t *testing.T) {
	for _, tc := range []struct {
		rep  report.Report
		want v1alpha1.Counters
	}{
		{report.Report{Outcome: report.Succeeded}, v1alpha1.Counters{Runs: 1, Succeeded: 1}},
		{report.Report{Outcome: report.Succeeded, LockLost: true}, v1alpha1.Counters{Runs: 1, Succeeded: 1, LockLost: 1}},
		{report.Report{Outcome: report.Failed}, v1alpha1.Counters{Runs: 1, Failed: 1}},
		{report.Report{Outcome: report.LockLost}, v1alpha1.Counters{Runs: 1, Failed: 1, LockLost: 1}},
		{report.Report{Outcome: report.LockLost, LockLost: true}, v1alpha1.Counters{Runs: 1, Failed: 1, LockLost: 1}},
		{report.Report{Outcome: report.Missed}, v1alpha1.Counters{Missed: 1}},
		{report.Report{Outcome: report.Interrupted}, v1alpha1.Counters{Interrupted: 1}},
		{report.Report{Outcome: report.SkippedContention}, v1alpha1.Counters{SkippedContention: 1}},
		{report.Report{Outcome: report.SuppressedDuplicate}, v1alpha1.Counters{DuplicatesSuppressed: 1}},
		{report.Report{Outcome: report.Error}, v1alpha1.Counters{Failed: 1}},
	} {
		t.Run(fmt.Sprintf("%s lockLost=%t", tc.rep.Outcome, tc.rep.LockLost), func(t *testing.T) {
			var st v1alpha1.LockedCronJobStatus
			Fold(&st, Result{Pod: "p", Occurrence: t0, Report: tc.rep})
			if d := cmp.Diff(tc.want, st.Counters); d != "" {
				t.Error(d)
			}
			if len(st.Recent) != 1 || st.Recent[0].Outcome != string(tc.rep.Outcome) {
				t.Errorf("recent = %+v", st.Recent)
			}
		})
	}
}

func TestFoldLastHolderFollowsTheNewestOccurrence(t *testing.T) {
	var st v1alpha1.LockedCronJobStatus
	iso := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	Fold(&st, Result{Pod: "b", Occurrence: t0.Add(time.Minute), Report: report.Report{Outcome: report.Succeeded, Holder: "c/ns/b", FencingToken: 8,
		AcquiredAt: iso(t0.Add(time.Minute)), ReleasedAt: iso(t0.Add(time.Minute + 1500*time.Millisecond))}})
	// An older occurrence finishing later does not take over lastHolder.
	Fold(&st, Result{Pod: "a", Occurrence: t0, Report: report.Report{Outcome: report.Failed, Holder: "c/ns/a", FencingToken: 7}})
	if st.LastHolder.Identity != "c/ns/b" || st.LastHolder.FencingToken != 8 {
		t.Errorf("lastHolder = %+v, want c/ns/b token 8", st.LastHolder)
	}
	if st.Recent[0].Pod != "b" || st.Recent[0].Duration.Duration != 1500*time.Millisecond {
		t.Errorf("recent[0] = %+v, want pod b held 1.5s", st.Recent[0])
	}
	if !st.LastSuccessfulTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("lastSuccessfulTime = %v", st.LastSuccessfulTime)
	}
	// A newer occurrence skipped here names who ran it elsewhere.
	Fold(&st, Result{Pod: "c", Occurrence: t0.Add(2 * time.Minute), Report: report.Report{Outcome: report.SkippedContention, Holder: "c/ns/c", HeldBy: "other/ns/x"}})
	if st.LastHolder.Identity != "other/ns/x" || st.Recent[0].Holder != "other/ns/x" {
		t.Errorf("after a skip: lastHolder = %+v, recent[0] = %+v", st.LastHolder, st.Recent[0])
	}
}

func TestAddRecentKeepsTheNewestTen(t *testing.T) {
	var st v1alpha1.LockedCronJobStatus
	for i := 0; i < 15; i++ {
		// Out of order on purpose.
		AddRecent(&st, v1alpha1.RunRecord{Occurrence: metav1.NewTime(t0.Add(time.Duration((i*7)%15) * time.Minute))})
	}
	if len(st.Recent) != RecentLimit {
		t.Fatalf("len = %d", len(st.Recent))
	}
	for i, r := range st.Recent {
		if want := t0.Add(time.Duration(14-i) * time.Minute); !r.Occurrence.Time.Equal(want) {
			t.Errorf("recent[%d] = %v, want %v", i, r.Occurrence.Time, want)
		}
	}
}

// TestAddRecentCutsLongMessages: a record may quote a condition's message (up to 32
// KiB: a Secret's url that names many hosts, a template's error), and one is added at
// each occurrence while the condition lasts; ten of them, escaped, made the object
// hundreds of KiB, and with an API server's HTML escaping a status write could pass
// etcd's limit (helper-114). Each is cut, escaped first, on a UTF-8 boundary.
func TestAddRecentCutsLongMessages(t *testing.T) {
	var st v1alpha1.LockedCronJobStatus
	long := strings.Repeat("<héllo>\x00", 4000)
	for i := 0; i < RecentLimit; i++ {
		AddRecent(&st, v1alpha1.RunRecord{Occurrence: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute)), Message: long})
	}
	for i, r := range st.Recent {
		if len(r.Message) > MessageLimit || !strings.HasSuffix(r.Message, "…") || !utf8.ValidString(r.Message) {
			t.Fatalf("recent[%d].message: %d bytes, ends %q, want at most %d ending in …", i, len(r.Message), r.Message[len(r.Message)-8:], MessageLimit)
		}
	}
	AddRecent(&st, v1alpha1.RunRecord{Occurrence: metav1.NewTime(t0.Add(time.Hour)), Message: "short\n"})
	if got := st.Recent[0].Message; got != printable.Text("short\n") {
		t.Errorf("a short message = %q, want it only escaped", got)
	}
}

func TestPruneOldestBeyondLimits(t *testing.T) {
	var pods []*corev1.Pod
	for i := 0; i < 6; i++ {
		phase := corev1.PodSucceeded
		if i%3 == 0 {
			phase = corev1.PodFailed
		}
		pods = append(pods, finishedPod(string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute), phase, ""))
	}
	// succeeded: b c e f -> keep e f; failed: a d -> keep d.
	now := t0.Add(time.Hour)
	var got []string
	for _, p := range Prune(pods, 2, 1, now) {
		got = append(got, p.Name)
	}
	if d := cmp.Diff([]string{"b", "c", "a"}, got); d != "" {
		t.Error(d)
	}
	if del := Prune(pods, 10, 10, now); len(del) != 0 {
		t.Errorf("within limits, deleted %d", len(del))
	}
}

// An OnFailure pod whose last start ran nothing past spec.backoffLimit (exit 0, so the
// pod Succeeded) failed its occurrence: it is history among the failed pods, not pruned
// for successes (helper-111).
func TestPruneKeepsAGivenUpPodAmongTheFailed(t *testing.T) {
	givenUp := finishedPod("given-up", t0, corev1.PodSucceeded, `{"v":1,"outcome":"Error","message":"not run again: this is attempt 8 in this pod"}`)
	givenUp.Status.ContainerStatuses[1].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3, Message: `{"v":1,"outcome":"Failed","exitCode":3}`}
	if Succeeded(givenUp) {
		t.Fatal("a given-up pod counts as succeeded")
	}
	ok := finishedPod("ok", t0.Add(time.Minute), corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded"}`)
	skipped := finishedPod("skipped", t0.Add(2*time.Minute), corev1.PodSucceeded, `{"v":1,"outcome":"SkippedContention"}`)
	var got []string
	for _, p := range Prune([]*corev1.Pod{givenUp, ok, skipped}, 0, 5, t0.Add(time.Hour)) {
		got = append(got, p.Name)
	}
	if d := cmp.Diff([]string{"ok", "skipped"}, got); d != "" {
		t.Errorf("pruned (-want +got):\n%s", d)
	}
}

// A pod being deleted (one the controller counted before it ended, another container of
// it running on) is going: it takes no place among the kept ones, and the user's last
// failed run is not pruned for it.
func TestPruneKeepsWhatIsNotBeingDeleted(t *testing.T) {
	going := finishedPod("going", t0.Add(time.Minute), corev1.PodFailed, "")
	going.DeletionTimestamp = &metav1.Time{Time: t0.Add(2 * time.Minute)}
	pods := []*corev1.Pod{finishedPod("last-failure", t0, corev1.PodFailed, ""), going}
	if del := Prune(pods, 1, 1, t0.Add(time.Hour)); len(del) != 0 {
		t.Errorf("pruned %s for a pod being deleted", del[0].Name)
	}
}

// A pod whose occurrence is still to come by the controller's clock (its node's clock
// ahead) ran early: it is what says its occurrence ran, so it stays until the clock has
// reached it, whatever the limits, and the pods before it are pruned as if it were not
// there.
func TestPruneKeepsAnOccurrenceStillToCome(t *testing.T) {
	early := finishedPod("early", t0.Add(2*time.Minute), corev1.PodSucceeded, "")
	pods := []*corev1.Pod{finishedPod("a", t0, corev1.PodSucceeded, ""), early}
	for _, c := range []struct {
		now  time.Time
		keep int
		want []string
	}{
		{t0.Add(2*time.Minute - time.Second), 0, []string{"a"}},
		{t0.Add(2*time.Minute - time.Second), 1, nil},
		{t0.Add(2 * time.Minute), 0, []string{"a", "early"}},
		{t0.Add(2 * time.Minute), 1, []string{"a"}},
	} {
		var got []string
		for _, p := range Prune(pods, c.keep, c.keep, c.now) {
			got = append(got, p.Name)
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("now %s, keep %d: %s", c.now, c.keep, d)
		}
	}
}

// Every outcome lockwrap can report is counted somewhere, and exactly once.
func TestFoldCountsEveryOutcome(t *testing.T) {
	for _, o := range report.Outcomes {
		var st v1alpha1.LockedCronJobStatus
		Fold(&st, Result{Pod: "p", Occurrence: t0, Report: report.Report{Outcome: o}})
		c := st.Counters
		outcomes := c.Succeeded + c.Failed + c.SkippedContention + c.DuplicatesSuppressed + c.Missed + c.Interrupted
		if outcomes != 1 {
			t.Errorf("%s: counters %+v, want exactly one outcome counter", o, c)
		}
	}
}

// Jobs that did not run (missed, interrupted) name no holder and no success.
func TestFoldNotRunLeavesHolderAlone(t *testing.T) {
	for _, o := range []report.Outcome{report.Missed, report.Interrupted} {
		var st v1alpha1.LockedCronJobStatus
		Fold(&st, Result{Pod: "a", Occurrence: t0, Report: report.Report{Outcome: report.Succeeded, Holder: "c/ns/a", FencingToken: 3}})
		Fold(&st, Result{Pod: "b", Occurrence: t0.Add(time.Minute), Report: report.Report{Outcome: o, Holder: "c/ns/b",
			Message: "started 2h after its deadline"}})
		if st.LastHolder.Identity != "c/ns/a" || !st.LastSuccessfulTime.Time.Equal(t0) {
			t.Errorf("%s: lastHolder = %+v, lastSuccessfulTime = %v", o, st.LastHolder, st.LastSuccessfulTime)
		}
		if st.Counters.Runs != 1 {
			t.Errorf("%s: runs = %d, want 1", o, st.Counters.Runs)
		}
		if r := st.Recent[0]; r.Pod != "b" || r.Outcome != string(o) || r.Message != "started 2h after its deadline" {
			t.Errorf("%s: recent[0] = %+v", o, r)
		}
	}
}

func TestFoldWarningsReachTheRecentRecord(t *testing.T) {
	for name, tc := range map[string]struct {
		rep  report.Report
		want string
	}{
		"none":          {report.Report{Outcome: report.Succeeded}, ""},
		"message only":  {report.Report{Outcome: report.Failed, Message: "exit 3"}, "exit 3"},
		"warnings only": {report.Report{Outcome: report.Succeeded, Warnings: []string{"redis has no persistence", "maxmemory-policy allkeys-lru can evict the lock"}}, "warning: redis has no persistence; warning: maxmemory-policy allkeys-lru can evict the lock"},
		"both":          {report.Report{Outcome: report.LockLost, Message: "renewal lost", Warnings: []string{"redis has no persistence"}}, "renewal lost; warning: redis has no persistence"},
		"blank warning": {report.Report{Outcome: report.Succeeded, Warnings: []string{" ", "ledger not recorded"}}, "warning: ledger not recorded"},
	} {
		t.Run(name, func(t *testing.T) {
			var st v1alpha1.LockedCronJobStatus
			Fold(&st, Result{Pod: "p", Occurrence: t0, Report: tc.rep})
			if got := st.Recent[0].Message; got != tc.want {
				t.Errorf("message = %q, want %q", got, tc.want)
			}
		})
	}
}

// A report read from a pod keeps its warnings all the way to status.
func TestResultOfKeepsWarnings(t *testing.T) {
	r := ResultOf(finishedPod("p", t0, corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded","warnings":["redis has no persistence"]}`))
	var st v1alpha1.LockedCronJobStatus
	Fold(&st, r)
	if got := st.Recent[0].Message; got != "warning: redis has no persistence" {
		t.Errorf("message = %q", got)
	}
}

// TestStartLag: the report's startedAt becomes Result.StartedAt, and the start lag is
// measured from the occurrence the pod was created for; a run whose command never started
// (or an older lockwrap's report without startedAt) has none.
func TestStartLag(t *testing.T) {
	r := ResultOf(finishedPod("p", t0, corev1.PodSucceeded,
		`{"v":1,"outcome":"Succeeded","startedAt":"2026-11-30T02:00:00.012345678Z"}`))
	if r.Invalid != nil {
		t.Fatal(r.Invalid)
	}
	if want := t0.Add(12345678 * time.Nanosecond); !r.StartedAt.Equal(want) {
		t.Fatalf("StartedAt %v, want %v", r.StartedAt, want)
	}
	if lag, ok := r.StartLag(); !ok || lag != 12345678*time.Nanosecond {
		t.Fatalf("StartLag %v %v", lag, ok)
	}
	for name, msg := range map[string]string{
		"interrupted while waiting": `{"v":1,"outcome":"Interrupted","message":"interrupted by terminated while waiting"}`,
		"no startedAt":              `{"v":1,"outcome":"Succeeded"}`,
		"unreadable startedAt":      `{"v":1,"outcome":"Succeeded","startedAt":"soon"}`,
	} {
		r := ResultOf(finishedPod("p", t0, corev1.PodSucceeded, msg))
		if lag, ok := r.StartLag(); ok || !r.StartedAt.IsZero() {
			t.Errorf("%s: start lag %v", name, lag)
		}
	}
	if _, ok := (Result{StartedAt: t0}).StartLag(); ok {
		t.Error("start lag without an occurrence")
	}
}

// TestOnFailureRunThenAnAttemptThatDidNotRunIsARun (helper-96): under restartPolicy
// OnFailure an attempt that ran the job and failed is restarted; the restart, past the
// occurrence's deadline (or behind another holder, or in a blackout), does not run it
// again, reports Missed (SkippedContention) and exits 0. Counted with the last attempt's
// outcome, the run that happened and failed was counted missed ("never started"): no
// failure, no lastHolder, an alert on failed runs silent.
func TestOnFailureRunThenAnAttemptThatDidNotRunIsARun(t *testing.T) {
	failed := `{"v":1,"outcome":"Failed","holder":"c/ns/p/u","fencingToken":9,"acquiredAt":"2026-11-30T02:00:00.1Z","startedAt":"2026-11-30T02:00:00.2Z","releasedAt":"2026-11-30T02:10:00Z","exitCode":1,"message":"command exited 1"}`
	for _, c := range []struct {
		name, last, before string
		runs, failed       int64
		missed, skipped    int64
		holder             bool
	}{
		{"failed, then too late to retry", `{"v":1,"outcome":"Missed","message":"too late to start"}`, failed, 1, 1, 0, 0, true},
		{"failed, then another holder", `{"v":1,"outcome":"SkippedContention","heldBy":"c/ns/next","message":"held"}`, failed, 1, 1, 0, 0, true},
		{"lockwrap's own error, then too late: no run known", `{"v":1,"outcome":"Missed","message":"too late to start"}`, `{"v":1,"outcome":"Error","message":"redis: connection refused"}`, 0, 0, 1, 0, false},
		{"failed, then a retry that succeeded", `{"v":1,"outcome":"Succeeded","holder":"c/ns/p/u","fencingToken":10}`, failed, 1, 0, 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := finishedPod("p", t0, corev1.PodSucceeded, c.last)
			pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			cs := &pod.Status.ContainerStatuses[1]
			cs.RestartCount = 1
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Message: c.before}
			var st v1alpha1.LockedCronJobStatus
			Fold(&st, ResultOf(pod))
			got := st.Counters
			if got.Runs != c.runs || got.Failed != c.failed || got.Missed != c.missed || got.SkippedContention != c.skipped {
				t.Errorf("counters %+v, want runs %d failed %d missed %d skipped %d", got, c.runs, c.failed, c.missed, c.skipped)
			}
			if (st.LastHolder != nil && st.LastHolder.Identity == "c/ns/p/u") != c.holder {
				t.Errorf("lastHolder %+v: the pod's own run is the last holder: %t", st.LastHolder, c.holder)
			}
		})
	}
}

// TestUnsuccessfulStreak: the occurrences that ended without success since the last one
// that succeeded, newest first; skips, blackouts and suppressed duplicates in between
// neither count nor end it (an alert on three in a row must not depend on the gaps
// between occurrences, nor fire for a job whose runs another holder made).
func TestUnsuccessfulStreak(t *testing.T) {
	rec := func(outcomes ...string) []v1alpha1.RunRecord {
		var out []v1alpha1.RunRecord
		for _, o := range outcomes {
			out = append(out, v1alpha1.RunRecord{Outcome: o})
		}
		return out
	}
	for _, c := range []struct {
		recent []v1alpha1.RunRecord
		want   int32
	}{
		{nil, 0},
		{rec("Succeeded", "Failed", "Failed"), 0},
		{rec("Failed", "Missed", "Succeeded", "Failed"), 2},
		{rec("Failed", "SkippedContention", "SkippedBlackout", "SuppressedDuplicate", "LockLost", "Error", "Interrupted", "Succeeded"), 4},
		{rec("SkippedContention", "SkippedContention"), 0},
		{rec("Failed", "Failed", "Failed"), 3}, // never succeeded
	} {
		if got := UnsuccessfulStreak(c.recent); got != c.want {
			t.Errorf("%v: %d, want %d", c.recent, got, c.want)
		}
	}
}
