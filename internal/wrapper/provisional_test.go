package wrapper_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper"
)

// readReportFile decodes the report at path, or says why there is none.
func readReportFile(t *testing.T, p *lockwrapProc) report.Report {
	t.Helper()
	b, err := os.ReadFile(p.report)
	if err != nil || len(b) == 0 {
		t.Fatalf("no report after lockwrap was killed (%v, %d bytes): the run left nothing for the controller to count; stderr: %s", err, len(b), p.stderr)
	}
	rep, err := report.Decode(b)
	if err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	t.Logf("report: %s", b)
	return rep
}

// TestKilledAfterTheCommandExitedLeavesAReport: the command exits 0 as lockwrap's link to
// Redis freezes; lockwrap retries the record (until its lock would expire, the rule) and
// is SIGKILLed meanwhile, as a kubelet does at the end of a pod's grace. The termination
// log must hold a report of the run (the command's exit, holder, fencing token, start),
// LockLost: nothing recorded the success and another holder may run the occurrence again.
// Before, lockwrap wrote its report only at its end: none, and the controller counted the
// pod "exited 137 without a valid report" (the soak of seed 951265272).
func TestKilledAfterTheCommandExitedLeavesAReport(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	proxy := redistest.StartProxy(t, s.Addr())
	g := newGate(t)
	a := startLockwrap(t, nil, cmdArgs(flags(proxy.URL(), "killed-after-exit", "a", "--ttl", "10s", "--renew-interval", "2s",
		"--kill-grace", "2s"), g.cmd(0)...)...)
	g.waitStarted(t)
	fence, _ := rdb.Get(context.Background(), lock.FenceKey("killed-after-exit")).Int64()
	proxy.Freeze()
	g.release(t) // the command exits 0; lockwrap cannot record it
	released := time.Now()
	// The provisional report is written once lockwrap has the command's exit (a loaded
	// host may take a while); then it is still retrying the record, a second on at least.
	eventually(t, "the provisional report", func() bool {
		b, err := os.ReadFile(a.report)
		return err == nil && len(b) > 0
	})
	time.Sleep(time.Until(released.Add(time.Second)))
	if len(a.done) > 0 {
		t.Fatalf("lockwrap ended within %v of its command's exit with Redis frozen and its lock valid for 10 s; stderr: %s", time.Since(released).Round(time.Millisecond), a.stderr)
	}
	_ = a.cmd.Process.Kill()
	<-a.done
	proxy.Thaw()
	rep := readReportFile(t, a)
	if rep.Outcome != report.LockLost || !rep.LockLost || rep.ExitCode != 0 || rep.Holder != "a" || rep.Key != "killed-after-exit" ||
		rep.FencingToken != fence || fence == 0 || rep.StartedAt == "" || rep.AcquiredAt == "" || rep.ReleasedAt != "" ||
		!strings.Contains(rep.Message, "before succeeded was recorded") {
		t.Fatalf("report %+v, want the provisional LockLost of a run that exited 0 (fence %d)", rep, fence)
	}
}

// TestSIGTERMThatStoppedTheCommandBoundsTheFinish: the soak's failure. A pod is deleted: the
// kubelet's one SIGTERM reaches lockwrap while its command runs and is forwarded, the
// command ends 143, and Redis stalls then. lockwrap used to retry the record until its
// lock would expire (a ttl longer than the pod's grace: 6 s against 5 s in the soak), and
// was SIGKILLed without a report. The SIGTERM that ended the command bounds the record's
// retries as one during them does (stopGrace): lockwrap ends within the grace, LockLost.
func TestSIGTERMThatStoppedTheCommandBoundsTheFinish(t *testing.T) {
	s := redistest.Start(t)
	proxy := redistest.StartProxy(t, s.Addr())
	g := newGate(t)
	a := startLockwrap(t, nil, cmdArgs(flags(proxy.URL(), "term-then-stall", "a", "--ttl", "10s", "--renew-interval", "2s",
		"--kill-grace", "2s"), "sh", "-c", `trap 'exit 143' TERM; touch "$1/started"; while [ -d "$1" ]; do sleep 0.02; done`, "sh", g.dir)...)
	g.waitStarted(t)
	proxy.Freeze()
	defer proxy.Thaw()
	sent := time.Now()
	_ = a.cmd.Process.Signal(syscall.SIGTERM) // once, as a kubelet does
	select {
	case <-a.done:
	case <-time.After(4 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		t.Fatalf("lockwrap still recording its result 4 s after the SIGTERM that stopped its command (a pod's grace is often shorter); stderr: %s", a.stderr)
	}
	took := time.Since(sent)
	rep := readReportFile(t, a)
	if rep.Outcome != report.LockLost || !rep.LockLost || rep.ExitCode != 143 ||
		!strings.Contains(rep.Message, "interrupted by terminated before Redis answered") {
		t.Fatalf("report %+v (after %v), want LockLost: interrupted before Redis answered", rep, took)
	}
}

// TestProvisionalOutcome: what a run ended after its command's exit reports.
func TestProvisionalOutcome(t *testing.T) {
	base := report.Report{Outcome: report.Error, Holder: "h", Key: "k", FencingToken: 7, StartedAt: "2026-12-07T04:26:29.827Z",
		ReleasedAt: "x", Warnings: []string{"w"}}
	lost := base
	lost.LockLost, lost.Message = true, "lock lost: renewal"
	for _, tc := range []struct {
		name    string
		rep     report.Report
		code    int
		stopped bool
		want    report.Outcome
	}{
		{"exit 0: nothing recorded the success", base, 0, false, report.LockLost},
		{"exit 143", base, 143, false, report.Failed},
		{"exit 1", base, 1, false, report.Failed},
		{"stopped for the lock", lost, 143, true, report.LockLost},
		{"exit 0 after the lock was lost", lost, 0, false, report.LockLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := wrapper.Provisional(tc.rep, tc.code, tc.stopped, time.Now())
			if p.Outcome != tc.want || p.ExitCode != tc.code || p.Holder != "h" || p.FencingToken != 7 || p.StartedAt == "" ||
				p.ReleasedAt != "" || len(p.Warnings) != 1 || p.LockLost != (tc.want == report.LockLost) ||
				!strings.Contains(p.Message, "before its final report") || (tc.rep.Message != "" && !strings.HasPrefix(p.Message, tc.rep.Message)) {
				t.Fatalf("%+v", p)
			}
			if _, err := report.Encode(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}
