package wrapper_test

// Each test here reproduces a way the promise "one run per occurrence, never two at once"
// was broken (issue 8), on real Redis with real processes, and must keep failing if the
// fix is undone.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// readNanos reads a file holding `date +%s%N`.
func readNanos(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", path, b, err)
	}
	return time.Unix(0, n)
}

// TestStalledRedisNeverOverlaps: holder A reaches Redis through a proxy that freezes (a
// stalled network; A's renewals get no reply). Contender B (Retry) reaches Redis directly
// and takes the occurrence over once A's lock expires. A's command — which ignores
// SIGTERM — must be dead before B's starts. It used to run ~5.6 s alongside B's.
func TestStalledRedisNeverOverlaps(t *testing.T) {
	s := redistest.Start(t)
	for i := range 3 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			proxy := redistest.StartProxy(t, s.Addr())
			dir := t.TempDir()
			aBeat, bStart := filepath.Join(dir, "a-beat"), filepath.Join(dir, "b-start")
			occ := occAt(2*time.Hour + time.Duration(i)*time.Minute)
			// A's command ignores SIGTERM and writes a heartbeat every 20ms until killed.
			a, aLog := runAsyncLog(t, nil, cmdArgs(flags(proxy.URL(), "stall", "a", "--occurrence", occ,
				"--ttl", "4s", "--renew-interval", "1s", "--kill-grace", "2s"),
				"sh", "-c", `trap '' TERM; while :; do date +%s%N > "$1.tmp"; mv "$1.tmp" "$1"; sleep 0.02; done`, "sh", aBeat)...)
			eventually(t, "a's command running", func() bool { _, err := os.Stat(aBeat); return err == nil })
			proxy.Freeze()
			frozenAt := time.Now()
			b := runAsync(t, nil, cmdArgs(flags(s.URL(), "stall", "b", "--occurrence", occ,
				"--ttl", "4s", "--renew-interval", "1s", "--kill-grace", "2s",
				"--contention", "retry", "--retry-attempts", "1000", "--retry-backoff", "20ms", "--retry-max-backoff", "50ms"),
				"sh", "-c", `date +%s%N > "$1"`, "sh", bStart)...)
			rb := await(t, b)
			if rb.rep.Outcome != report.Succeeded || !rb.rep.Recovered {
				t.Fatalf("b: %+v", rb)
			}
			proxy.Thaw()
			ra := await(t, a)
			aEnd, bBegan := readNanos(t, aBeat), readNanos(t, bStart)
			t.Logf("froze at %s; a's last heartbeat %s, b started %s (gap %v)", frozenAt.Format("15:04:05.000"),
				aEnd.Format("15:04:05.000"), bBegan.Format("15:04:05.000"), bBegan.Sub(aEnd))
			if !aEnd.Before(bBegan) {
				t.Fatalf("overlap: a's command still ran at %s, b's started at %s", aEnd.Format(time.RFC3339Nano), bBegan.Format(time.RFC3339Nano))
			}
			if ra.rep.Outcome != report.LockLost || !ra.rep.LockLost || ra.code != 128+int(syscall.SIGKILL) ||
				!strings.Contains(ra.rep.Message, "before the lock can expire") {
				t.Fatalf("a: %+v; stderr %s", ra, aLog)
			}
			if rb.rep.FencingToken <= ra.rep.FencingToken {
				t.Fatalf("fences a %d, b %d", ra.rep.FencingToken, rb.rep.FencingToken)
			}
		})
	}
}

// TestFrozenHolderIsNotASuccess: lockwrap is SIGSTOPped past its ttl while its command
// exits 0; another holder takes the occurrence over meanwhile. On resume the run cannot
// prove it held the lock to the end: LockLost, never a clean Succeeded.
func TestFrozenHolderIsNotASuccess(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	ctx := context.Background()
	g := newGate(t)
	a := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "frozen-ok", "a", "--ttl", "1s", "--renew-interval", "200ms",
		"--kill-grace", "300ms"), g.cmd(0)...)...)
	g.waitStarted(t)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	g.release(t) // the command exits 0 while lockwrap is frozen
	eventually(t, "a's lock to expire", func() bool { return rdb.Exists(ctx, lock.LockKey("frozen-ok")).Val() == 0 })
	rb, _ := run(t, nil, cmdArgs(flags(s.URL(), "frozen-ok", "b", "--ttl", "5s", "--kill-grace", "1s"), "true")...)
	if rb.Outcome != report.Succeeded || !rb.Recovered {
		t.Fatalf("b: %+v", rb)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	ra, code := a.wait(t)
	if ra.Outcome != report.LockLost || !ra.LockLost || code != 0 || ra.ExitCode != 0 {
		t.Fatalf("a: %d %+v", code, ra)
	}
	// b's success stays in the ledger.
	if h := rdb.HGet(ctx, lock.RunKey("frozen-ok", mustTime(occurrence)), "holder").Val(); h != "b" {
		t.Fatalf("ledger holder %q", h)
	}
}

// TestRestartedContainerTakesOver: lockwrap is SIGKILLed mid-run (an OOM kill) and its
// container restarted (restartPolicy OnFailure): the new lockwrap, same holder and
// occurrence, finds the lock held under its own name. That is its crashed predecessor:
// it takes over with a higher fence instead of skipping and leaving the occurrence
// `running` for ever.
func TestRestartedContainerTakesOver(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	holder := "cluster/ns/job-1796000000"
	first := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "oom", holder, "--ttl", "30s"),
		"sh", "-c", `touch "$1/started"; while [ -d "$1" ]; do sleep 0.02; done`, "sh", dir)...)
	eventually(t, "first command started", func() bool { _, err := os.Stat(filepath.Join(dir, "started")); return err == nil })
	// The kernel's OOM kill takes the whole container: lockwrap, and its command (which
	// ends its loop once its directory is gone).
	_ = first.cmd.Process.Kill()
	_ = os.RemoveAll(dir)
	<-first.done // killed: no report
	ctx := context.Background()
	rdb := admin(t, s)
	firstFence, _ := rdb.HGet(ctx, lock.RunKey("oom", mustTime(occurrence)), "fence").Int64()
	if pttl := rdb.PTTL(ctx, lock.LockKey("oom")).Val(); pttl < 20*time.Second {
		t.Fatalf("the first run's lock should still be held (pttl %v)", pttl)
	}
	rep, code := run(t, nil, cmdArgs(flags(s.URL(), "oom", holder, "--ttl", "30s"), "true")...)
	if code != 0 || rep.Outcome != report.Succeeded || !rep.Recovered || rep.FencingToken <= firstFence {
		t.Fatalf("restart: %d %+v (first fence %d)", code, rep, firstFence)
	}
	if ok, _ := lock.Succeeded(ctx, rdb, "oom", mustTime(occurrence)); !ok {
		t.Fatal("occurrence not recorded as succeeded")
	}
	// Another holder is still turned away while a run is going on, as before.
	g := newGate(t)
	occ2 := occAt(30 * time.Minute)
	r := runAsync(t, nil, cmdArgs(flags(s.URL(), "oom", holder, "--occurrence", occ2), g.cmd(0)...)...)
	g.waitStarted(t)
	other, _ := run(t, nil, cmdArgs(flags(s.URL(), "oom", "cluster/ns/job-other", "--occurrence", occ2), "true")...)
	if other.Outcome != report.SkippedContention {
		t.Fatalf("other holder: %+v", other)
	}
	g.release(t)
	await(t, r)
}

// TestEvictedLedgerStillRecordsSuccess: the running entry vanished mid-run (evicted, or
// lost in a restart); finishing records `succeeded` anyway, so the occurrence never runs
// again.
func TestEvictedLedgerStillRecordsSuccess(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	ctx := context.Background()
	g := newGate(t)
	r := runAsync(t, nil, cmdArgs(flags(s.URL(), "evict", "a"), g.cmd(0)...)...)
	g.waitStarted(t)
	if n := rdb.Del(ctx, lock.RunKey("evict", mustTime(occurrence))).Val(); n != 1 {
		t.Fatalf("no running entry to evict (%d)", n)
	}
	g.release(t)
	if res := await(t, r); res.rep.Outcome != report.Succeeded || len(res.rep.Warnings) > 1 {
		t.Fatalf("%+v", res)
	}
	dir := t.TempDir()
	again, _ := run(t, nil, cmdArgs(flags(s.URL(), "evict", "b"), "touch", filepath.Join(dir, "ran"))...)
	if again.Outcome != report.SuppressedDuplicate {
		t.Fatalf("second run: %+v", again)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the occurrence ran twice")
	}
}

// TestFencingSurvivesDataLoss: Redis restarted without persistence forgets the fence
// counter; the next holder's token is still higher than every earlier one.
func TestFencingSurvivesDataLoss(t *testing.T) {
	s := redistest.Start(t) // no AOF, no RDB
	var last int64
	for i := range 3 {
		occ := occAt(3*time.Hour + time.Duration(i)*time.Minute)
		rep, _ := run(t, nil, cmdArgs(flags(s.URL(), "loss", "a", "--occurrence", occ), "true")...)
		if rep.Outcome != report.Succeeded || rep.FencingToken <= last {
			t.Fatalf("run %d: %+v (previous token %d)", i, rep, last)
		}
		if !strings.Contains(strings.Join(rep.Warnings, "; "), "appendonly") {
			t.Fatalf("no durability warning for a Redis without persistence: %+v", rep)
		}
		last = rep.FencingToken
		s.Restart()
		if n := admin(t, s).DBSize(context.Background()).Val(); n != 0 {
			t.Fatalf("the restart kept %d keys; this test needs a Redis that loses data", n)
		}
	}
}

// TestPastDeadlineIsMissed: a pod that starts after occurrence + startingDeadlineSeconds
// (stuck Pending for hours) does not run its command, whatever the policy, and touches
// nothing in Redis.
func TestPastDeadlineIsMissed(t *testing.T) {
	s := redistest.Start(t)
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for _, policy := range [][]string{{"--contention", "skip"}, {"--contention", "retry", "--retry-attempts", "5"}} {
		dir := t.TempDir()
		args := append(flags(s.URL(), "late", "a", "--not-after", past), policy...)
		rep, code := run(t, nil, cmdArgs(args, "touch", filepath.Join(dir, "ran"))...)
		if code != 0 || rep.Outcome != report.Missed || !strings.Contains(rep.Message, "deadline") {
			t.Fatalf("%v: %d %+v", policy, code, rep)
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Fatalf("%v: the command ran after its deadline", policy)
		}
	}
	if n := admin(t, s).DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("a missed run wrote %d keys", n)
	}
	// Before the deadline it runs.
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if rep, _ := run(t, nil, cmdArgs(flags(s.URL(), "late", "a", "--not-after", future), "true")...); rep.Outcome != report.Succeeded {
		t.Fatalf("%+v", rep)
	}
}

// TestOccurrenceOlderThanTheLedger: the ledger remembers an occurrence's success for
// --dedupe-retention. A run of it that starts later (a cluster whose controller was down
// or frozen past the retention, a starting deadline longer than it) found no entry and ran
// it a second time. It is missed instead once the occurrence is older than the retention
// less the ttl, and runs while it is not.
func TestOccurrenceOlderThanTheLedger(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	// The occurrence 52 to 53 s ago: inside a retention of 1m less a ttl of 2s for at
	// least five seconds, for the first run to be granted on a loaded host. (57 s before
	// now, truncated, left only the rest of the current second: started late in one, the
	// first run was missed; 56 s left about one.)
	occ := time.Now().Truncate(time.Second).Add(-52 * time.Second)
	args := func(holder string) []string {
		return append(flags(s.URL(), "old", holder), "--occurrence", occ.UTC().Format(time.RFC3339), "--ttl", "2s", "--renew-interval", "500ms", "--kill-grace", "1s", "--dedupe-retention", "1m")
	}
	if rep, code := run(t, nil, cmdArgs(args("a"), "true")...); code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("a: %d %+v", code, rep)
	}
	// The retention ends (the entry expires), and the occurrence is older than 58 s.
	admin(t, s).PExpire(ctx, lock.RunKey("old", occ), time.Millisecond)
	time.Sleep(time.Until(occ.Add(58*time.Second + 10*time.Millisecond)))
	dir := t.TempDir()
	rep, code := run(t, nil, cmdArgs(args("b"), "touch", filepath.Join(dir, "ran"))...)
	if code != 0 || rep.Outcome != report.Missed || !strings.Contains(rep.Message, "--dedupe-retention") {
		t.Fatalf("b: %d %+v", code, rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("an occurrence older than the ledger's retention ran again")
	}
}

// TestSignalDuringRetryIsInterrupted: SIGTERM while waiting for the lock (a retry
// backoff) ends the run as Interrupted — never as SkippedContention.
func TestSignalDuringRetryIsInterrupted(t *testing.T) {
	s := redistest.Start(t)
	g := newGate(t)
	a := runAsync(t, nil, cmdArgs(flags(s.URL(), "intr", "a"), g.cmd(0)...)...)
	g.waitStarted(t)
	base := evalCalls(t, s)
	b := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "intr", "b", "--contention", "retry", "--retry-attempts", "1000",
		"--retry-backoff", "500ms", "--retry-max-backoff", "1s"), "true")...)
	eventually(t, "b to be turned away", func() bool { return evalCalls(t, s) >= base+1 })
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rep, code := b.wait(t)
	if code != wrapper.ExitInternal || rep.Outcome != report.Interrupted || !strings.Contains(rep.Message, "terminated") {
		t.Fatalf("b: %d %+v", code, rep)
	}
	g.release(t)
	await(t, a)
}

// TestPartitionAtTheEndIsNotASuccess: the command exits 0 just as holder A's link to Redis
// is cut (a frozen proxy); A cannot record the success, its lock expires, and B runs the
// occurrence again (the ledger says nobody finished it). A's report must say the lock was
// lost — a clean Succeeded would claim the occurrence done once while it ran twice. The
// 40-minute soak found two such runs reported Succeeded with only a warning.
func TestPartitionAtTheEndIsNotASuccess(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	ctx := context.Background()
	proxy := redistest.StartProxy(t, s.Addr())
	g := newGate(t)
	a := startLockwrap(t, nil, cmdArgs(flags(proxy.URL(), "cut-at-end", "a", "--ttl", "1s", "--renew-interval", "200ms",
		"--kill-grace", "300ms"), g.cmd(0)...)...)
	g.waitStarted(t)
	proxy.Freeze()
	g.release(t) // the command exits 0; lockwrap cannot reach Redis to record it
	eventually(t, "a's lock to expire", func() bool { return rdb.Exists(ctx, lock.LockKey("cut-at-end")).Val() == 0 })
	rb, _ := run(t, nil, cmdArgs(flags(s.URL(), "cut-at-end", "b", "--ttl", "5s", "--kill-grace", "1s"), "true")...)
	if rb.Outcome != report.Succeeded {
		t.Fatalf("b: %+v", rb)
	}
	ra, code := a.wait(t)
	proxy.Thaw()
	if ra.Outcome != report.LockLost || !ra.LockLost || code != 0 || ra.ExitCode != 0 ||
		!strings.Contains(ra.Message, "may run this occurrence again") {
		t.Fatalf("a: %d %+v", code, ra)
	}
}

// TestPartitionAtTheEndOfALongLock: as TestPartitionAtTheEndIsNotASuccess, with a ttl
// longer than the 10 s lockwrap used to retry recording a result (the default ttl is
// 30 s). While its lock has not expired nobody else can run the occurrence, so A keeps
// trying: when Redis answers again before then, the success is recorded and B is
// suppressed; when it does not, A's report says the lock was lost. A used to give up
// after 10 s and report a clean Succeeded; its lock then expired with nothing recorded,
// and B ran the occurrence again.
func TestPartitionAtTheEndOfALongLock(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		ttl     string // renewals every ttl/8: the lock expires 7/8 to 1 ttl after the cut
		thawAt  time.Duration
		wantA   report.Outcome
		wantB   report.Outcome
		message string
	}{
		{"Redis back before the lock expires", "16s", 12 * time.Second, report.Succeeded, report.SuppressedDuplicate, ""},
		{"Redis back after the lock expired", "14s", 0, report.LockLost, report.Succeeded, "may run this occurrence again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			rdb := admin(t, s)
			proxy := redistest.StartProxy(t, s.Addr())
			ttl, err := time.ParseDuration(tc.ttl)
			if err != nil {
				t.Fatal(err)
			}
			g := newGate(t)
			// A holder per case: the cases run in parallel, on one host, and one lockwrap
			// of a holder, key and occurrence runs at a time in a network namespace.
			a := startLockwrap(t, nil, cmdArgs(flags(proxy.URL(), "cut-at-end-long", "a-"+tc.ttl, "--ttl", tc.ttl, "--renew-interval", (ttl/8).String(),
				"--kill-grace", "1s"), g.cmd(0)...)...)
			g.waitStarted(t)
			proxy.Freeze()
			g.release(t) // the command exits 0; lockwrap cannot reach Redis to record it
			if tc.thawAt > 0 {
				time.AfterFunc(tc.thawAt, proxy.Thaw) // the partition lasts thawAt
			}
			ra, code := a.wait(t)
			proxy.Thaw()
			if ra.Outcome != tc.wantA || ra.LockLost != (tc.wantA == report.LockLost) || code != 0 || !strings.Contains(ra.Message, tc.message) {
				t.Fatalf("a: %d %+v, want %s", code, ra, tc.wantA)
			}
			eventually(t, "a's lock to be gone", func() bool { return rdb.Exists(ctx, lock.LockKey("cut-at-end-long")).Val() == 0 })
			if rb, _ := run(t, nil, cmdArgs(flags(s.URL(), "cut-at-end-long", "b", "--ttl", "5s", "--kill-grace", "1s"), "true")...); rb.Outcome != tc.wantB {
				t.Fatalf("b: %+v, want %s", rb, tc.wantB)
			}
		})
	}
}

// TestPartitionAtTheEndThenSIGTERM: A's link is cut as its command exits 0, and A, retrying
// the record while its long lock is still valid, is sent SIGTERM (its pod is being
// deleted; the kubelet's grace is shorter than the ttl). A stops retrying at once and
// reports LockLost — nothing recorded the success, another holder may run the occurrence
// once the lock expires — before the lock has expired, so the report is written within
// the grace: killed later, it wrote none, and the pod was counted an Error.
func TestPartitionAtTheEndThenSIGTERM(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	proxy := redistest.StartProxy(t, s.Addr())
	g := newGate(t)
	// The command ignores SIGTERM (those forwarded to it below) and exits 0 when released.
	a := startLockwrap(t, nil, cmdArgs(flags(proxy.URL(), "cut-then-term", "a", "--ttl", "30s", "--renew-interval", "5s",
		"--kill-grace", "2s"), "sh", "-c", `trap '' TERM; touch "$1/started"; while [ ! -e "$1/release" ] && [ -d "$1" ]; do sleep 0.02; done`, "sh", g.dir)...)
	g.waitStarted(t)
	proxy.Freeze()
	g.release(t)
	// SIGTERM until lockwrap ends: the first ones may reach it while it still waits for
	// its command (forwarded to a command that is gone), one then while it retries.
	eventually(t, "lockwrap to end on SIGTERM", func() bool {
		if len(a.done) > 0 {
			return true
		}
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		return false
	})
	ra, code := a.wait(t)
	left := rdb.PTTL(context.Background(), lock.LockKey("cut-then-term")).Val()
	proxy.Thaw()
	if ra.Outcome != report.LockLost || !ra.LockLost || code != 0 || !strings.Contains(ra.Message, "interrupted by terminated before Redis answered") {
		t.Fatalf("a: %d %+v, want LockLost: interrupted before Redis answered", code, ra)
	}
	if left <= 0 {
		t.Fatalf("a ended after its lock expired (pttl %v): it kept retrying past the SIGTERM", left)
	}
}

// lostReplyLocker: the first Acquire really runs on Redis (it takes the lock), but its
// reply is lost: the caller sees an i/o timeout `delay` later (go-redis read timeouts and
// retries). Later attempts go through. From then on the holder's link is cut: renewals
// fail with a transient error (the same flaky network).
type lostReplyLocker struct {
	real    wrapper.RedisLocker
	delay   time.Duration
	calls   atomic.Int32
	firstAt atomic.Int64
}

func (l *lostReplyLocker) Acquire(ctx context.Context, req lock.Request) (*wrapper.Grant, error) {
	if l.calls.Add(1) == 1 {
		l.firstAt.Store(time.Now().UnixNano())
		if _, err := l.real.Acquire(ctx, req); err != nil {
			return nil, err
		}
		time.Sleep(l.delay)
		return nil, errors.New("read tcp 127.0.0.1:6379: i/o timeout")
	}
	g, err := l.real.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	g.Lease = cutLease{g.Lease}
	return g, nil
}

// Abandon forwards to the real locker (lockwrap undoes a lost attempt through it).
func (l *lostReplyLocker) Abandon(ctx context.Context, req lock.Request) error {
	return l.real.Abandon(ctx, req)
}

type cutLease struct{ wrapper.Lease }

func (cutLease) Renew(context.Context) error { return errors.New("dial tcp: connection refused") }

// TestResentAcquireNeverOverlaps: A's first acquire takes the lock in Redis but its reply is
// lost (A sees an i/o timeout 1.5 s later) and A sends it again with the same token; then
// A's link is cut and A cannot renew. Contender B (Retry) takes the occurrence over once
// A's lock expires. A's command — which ignores SIGTERM — must be dead before B's starts.
// lockwrap counts the ttl from the attempt that answered; the resend used to be granted
// with what was left of the first attempt's ttl, and A's command ran ~1.4 s alongside B's.
func TestResentAcquireNeverOverlaps(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	dir := t.TempDir()
	aBeat, bStart := filepath.Join(dir, "a-beat"), filepath.Join(dir, "b-start")
	occ := occAt(4 * time.Hour)
	l := &lostReplyLocker{real: wrapper.RedisLocker{L: lock.New(rdb)}, delay: 1500 * time.Millisecond}
	cfgA, cmdA, err := config.Parse(append(flags(s.URL(), "resent", "a", "--occurrence", occ,
		"--ttl", "3s", "--renew-interval", "1s", "--kill-grace", "1s",
		"--contention", "retry", "--retry-attempts", "5", "--retry-backoff", "10ms", "--retry-max-backoff", "10ms", "--"),
		"sh", "-c", `trap '' TERM; while :; do date +%s%N > "$1.tmp"; mv "$1.tmp" "$1"; sleep 0.02; done`, "sh", aBeat), nil)
	if err != nil {
		t.Fatal(err)
	}
	aDone := make(chan result, 1)
	aErr := &syncBuf{}
	go func() {
		rep, code := wrapper.Run(context.Background(), cfgA, cmdA, wrapper.Deps{Locker: l, Stderr: aErr})
		aDone <- result{rep, code}
	}()
	eventually(t, "a's command running", func() bool { _, err := os.Stat(aBeat); return err == nil })
	t.Logf("a's command started %v after the first (lost) acquire; lock pttl now %v",
		time.Since(time.Unix(0, l.firstAt.Load())).Round(time.Millisecond), rdb.PTTL(context.Background(), lock.LockKey("resent")).Val())
	b := runAsync(t, nil, cmdArgs(flags(s.URL(), "resent", "b", "--occurrence", occ,
		"--ttl", "3s", "--renew-interval", "1s", "--kill-grace", "1s",
		"--contention", "retry", "--retry-attempts", "1000", "--retry-backoff", "20ms", "--retry-max-backoff", "50ms"),
		"sh", "-c", `date +%s%N > "$1"`, "sh", bStart)...)
	rb := await(t, b)
	ra := await(t, aDone)
	t.Logf("a: %d %+v\nstderr: %s", ra.code, ra.rep, aErr)
	t.Logf("b: %d %+v", rb.code, rb.rep)
	if rb.rep.Outcome != report.Succeeded {
		t.Fatalf("b: %+v", rb)
	}
	aEnd, bBegan := readNanos(t, aBeat), readNanos(t, bStart)
	t.Logf("a's last heartbeat %s, b started %s", aEnd.Format("15:04:05.000"), bBegan.Format("15:04:05.000"))
	if !aEnd.Before(bBegan) {
		t.Fatalf("OVERLAP: a's command still ran %v after b's started (fences a %d, b %d)", aEnd.Sub(bBegan).Round(time.Millisecond),
			ra.rep.FencingToken, rb.rep.FencingToken)
	}
}

// TestNothingOfTheCommandOutlivesIt: the command is its process group. A member that
// ignores the SIGTERM of a lost lock's stop, when the leader obeys it, and one the command
// left in the background when it ended, are gone when lockwrap returns: they would run on
// past the kill point, or past the release, alongside the next holder's run. In a pod the
// end of lockwrap (PID 1) kills them, but only after the release; outside one nothing did.
func TestNothingOfTheCommandOutlivesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		down bool // renewals fail: the lock is lost and the command stopped
		cmd  string
	}{
		{"stopped for a lost lock, a member ignoring SIGTERM", true, `(trap '' TERM; while [ -d "$1" ]; do sleep 0.02; done) & echo $$ > "$1/pgid"; wait`},
		{"ended, a member left in the background", false, `(trap '' TERM; while [ -d "$1" ]; do sleep 0.02; done) & echo $$ > "$1/pgid"; sleep 0.3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := &flakyLease{down: func() bool { return tc.down }}
			cfg := fakeCfg(t, "--kill-grace", "300ms") // ttl 1s: SIGTERM at ~600ms, SIGKILL at ~900ms
			rep, code := wrapper.Run(context.Background(), cfg, []string{"sh", "-c", tc.cmd, "sh", dir},
				wrapper.Deps{Locker: fakeLocker{lease: l}, Stderr: &syncBuf{}})
			t.Logf("lockwrap → %d %s %q", code, rep.Outcome, rep.Message)
			b, err := os.ReadFile(filepath.Join(dir, "pgid"))
			if err != nil {
				t.Fatal(err)
			}
			pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			// Killed members are zombies until their new parent reaps them (which may never
			// happen where PID 1 does not reap): wait for no live member, not for a member
			// that lives on (it loops until the test's directory goes).
			eventually(t, "no live process left in the command's group", func() bool { return liveInGroup(t, pgid) == 0 })
		})
	}
}

// A command's process that leaves its group (setsid, as a daemon does) is still the
// command's: it, and what it started, are killed before the run is recorded and the lock
// released. It used to run on past the release (outside a pod until it ended, in a pod
// until lockwrap, PID 1, exited), alongside the next holder's run.
func TestNothingOfTheCommandOutlivesItsLockOutsideItsGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		down bool
	}{{"ended", false}, {"stopped for a lost lock", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// The stray leaves the group and the session, ignores SIGTERM, and starts a child of
			// its own; the command waits for both pids, then ends (or is stopped).
			stray := `trap "" TERM; sleep 1000 & echo $! > "$1/child"; echo $$ > "$1/stray"; while [ -d "$1" ]; do sleep 0.02; done`
			cmd := `setsid sh -c '` + stray + `' sh "$1" & while [ ! -s "$1/stray" ] || [ ! -s "$1/child" ]; do sleep 0.01; done; ` +
				map[bool]string{false: "exit 0", true: "sleep 1000"}[tc.down]
			var alive []string
			l := &finishHook{flakyLease: &flakyLease{down: func() bool { return tc.down }}, at: func() {
				for _, f := range []string{"stray", "child"} {
					if pid := readPid(t, filepath.Join(dir, f)); processLive(pid) {
						alive = append(alive, fmt.Sprintf("%s %d", f, pid))
					}
				}
			}}
			killAtCleanup(t, filepath.Join(dir, "stray"), filepath.Join(dir, "child")) // should the fix fail
			cfg := fakeCfg(t, "--kill-grace", "300ms")
			rep, code := wrapper.Run(context.Background(), cfg, []string{"sh", "-c", cmd, "sh", dir},
				wrapper.Deps{Locker: fakeLocker{lease: l}, Stderr: &syncBuf{}})
			t.Logf("lockwrap → %d %s %q", code, rep.Outcome, rep.Message)
			if l.calls == 0 {
				t.Fatal("the run was never recorded")
			}
			if len(alive) > 0 {
				t.Errorf("alive when the run was recorded, before the release: %v", alive)
			}
		})
	}
}

// finishHook is a lease that calls at when the run is recorded (before the release).
type finishHook struct {
	*flakyLease
	at    func()
	calls int
}

func (l *finishHook) FinishWith(ctx context.Context, st string, o lock.FinishOptions) (lock.FinishResult, error) {
	l.calls++
	l.at()
	return l.flakyLease.FinishWith(ctx, st, o)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// processLive: pid has a thread that is not a zombie (one killed and not reaped yet is
// one; so is, in its own stat, the leader thread of a process whose other threads run).
func processLive(pid int) bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(fields) > 0 && fields[0] != "Z" {
			return true
		}
	}
	return false
}

// TestGivingUpLeavesNoLock: A's only acquire attempt (--contention skip) takes the lock in
// Redis but its reply is lost; A gives up (Error, the command not run). The lock and the
// running entry it wrote must not stay behind: B, right after, runs the occurrence, as a
// fresh run. They used to stay for a ttl: B skipped a lock nobody held, and the run after
// it reported recovered, the occurrence taken for a crashed run's.
func TestGivingUpLeavesNoLock(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	l := &lostReplyLocker{real: wrapper.RedisLocker{L: lock.New(rdb)}}
	cfgA, cmdA, err := config.Parse(append(flags(s.URL(), "given-up", "a", "--ttl", "1h", "--"), "true"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ra, code := wrapper.Run(context.Background(), cfgA, cmdA, wrapper.Deps{Locker: l, Stderr: &syncBuf{}})
	if ra.Outcome != report.Error || code == 0 || ra.StartedAt != "" {
		t.Fatalf("a: %d %+v, want Error, the command not run", code, ra)
	}
	rb, _ := run(t, nil, cmdArgs(flags(s.URL(), "given-up", "b", "--ttl", "5s", "--kill-grace", "1s"), "true")...)
	if rb.Outcome != report.Succeeded || rb.Recovered {
		t.Fatalf("b: %+v, want a fresh Succeeded", rb)
	}
}

// liveInGroup counts the processes of process group pgid that are not zombies (/proc).
func liveInGroup(t *testing.T, pgid int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp …: comm may hold spaces and parentheses.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			n++
		}
	}
	return n
}

// lateGrantLocker answers an acquire only delay after Redis granted it (a reply slower
// than the ttl, or lockwrap stalled), and says when Redis granted it.
type lateGrantLocker struct {
	real    wrapper.RedisLocker
	delay   time.Duration
	granted chan struct{}
}

func (l *lateGrantLocker) Acquire(ctx context.Context, req lock.Request) (*wrapper.Grant, error) {
	g, err := l.real.Acquire(ctx, req)
	close(l.granted)
	time.Sleep(l.delay)
	return g, err
}

// TestLateGrantDoesNotStart: a grant that reaches lockwrap after its kill point — the
// lock may have expired and be another holder's — does not start the command. It used to
// start it, alongside the next holder's, until the first renewal found the lock gone.
func TestLateGrantDoesNotStart(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	dir := t.TempDir()
	occ := time.Now().UTC().Format(time.RFC3339)
	timing := []string{"--occurrence", occ, "--ttl", "2s", "--renew-interval", "500ms", "--kill-grace", "1s"}
	l := &lateGrantLocker{real: wrapper.RedisLocker{L: lock.New(rdb)}, delay: 2500 * time.Millisecond, granted: make(chan struct{})}
	cfgA, cmdA, err := config.Parse(append(append(flags(s.URL(), "late-grant", "a"), timing...), "--", "touch", filepath.Join(dir, "a-ran")), nil)
	if err != nil {
		t.Fatal(err)
	}
	aDone := make(chan result, 1)
	go func() {
		rep, code := wrapper.Run(context.Background(), cfgA, cmdA, wrapper.Deps{Locker: l, Stderr: &syncBuf{}})
		aDone <- result{rep, code}
	}()
	<-l.granted
	// A's lock expires while its grant is on its way; B takes the occurrence over.
	eventually(t, "a's lock expired", func() bool { return rdb.Exists(context.Background(), lock.LockKey("late-grant")).Val() == 0 })
	b := runAsync(t, nil, cmdArgs(append(flags(s.URL(), "late-grant", "b"), timing...), "sh", "-c", `touch "$1"; sleep 1`, "sh", filepath.Join(dir, "b-ran"))...)
	a := await(t, aDone)
	if a.code != wrapper.ExitInternal || a.rep.Outcome != report.Error || !strings.Contains(a.rep.Message, "the command did not run") {
		t.Fatalf("a: %d %+v", a.code, a.rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "a-ran")); err == nil {
		t.Fatal("a started its command after its kill point, the lock expired and taken over")
	}
	if rb := await(t, b); rb.rep.Outcome != report.Succeeded {
		t.Fatalf("b: %+v", rb.rep)
	}
}

// TestFailoverToALaggingReplicaNeverOverlaps: with --min-replicas, A's lock lives on a
// master and its replica. The replica is promoted while the old master, cut off from it,
// still answers A (a partition, then a failover): A's renewals reach the old master only.
// The promoted replica expires the lock a ttl after the last renewal it got, and B,
// talking to it, takes the occurrence over. A's command — which ignores SIGTERM — must be
// dead before B's starts: a renewal counts only once the replicas acknowledge it. Renewals
// used to skip the WAIT, A counted its lock from renewals the new master never saw, and its
// command ran on alongside B's until the test stopped the old master.
func TestFailoverToALaggingReplicaNeverOverlaps(t *testing.T) {
	m := redistest.Start(t)
	r := redistest.StartReplicaOf(t, m)
	dir := t.TempDir()
	aBeat, bStart := filepath.Join(dir, "a-beat"), filepath.Join(dir, "b-start")
	a, aLog := runAsyncLog(t, nil, cmdArgs(flags(m.URL(), "lagging", "a", "--ttl", "3s", "--renew-interval", "1s",
		"--kill-grace", "1s", "--min-replicas", "1"),
		"sh", "-c", `trap '' TERM; while :; do date +%s%N > "$1.tmp"; mv "$1.tmp" "$1"; sleep 0.02; done`, "sh", aBeat)...)
	eventually(t, "a's command running", func() bool { _, err := os.Stat(aBeat); return err == nil })
	r.Do("REPLICAOF", "NO", "ONE")
	b := runAsync(t, nil, cmdArgs(flags(r.URL(), "lagging", "b", "--ttl", "3s", "--renew-interval", "1s", "--kill-grace", "1s",
		"--contention", "retry", "--retry-attempts", "1000", "--retry-backoff", "20ms", "--retry-max-backoff", "50ms"),
		"sh", "-c", `date +%s%N > "$1"`, "sh", bStart)...)
	rb := await(t, b)
	if rb.rep.Outcome != report.Succeeded || !rb.rep.Recovered {
		t.Fatalf("b: %+v", rb)
	}
	m.Stop() // ends A's renewals if they still get through, so that A ends
	ra := await(t, a)
	aEnd, bBegan := readNanos(t, aBeat), readNanos(t, bStart)
	t.Logf("a's last heartbeat %s, b started %s (gap %v)", aEnd.Format("15:04:05.000"), bBegan.Format("15:04:05.000"), bBegan.Sub(aEnd))
	if !aEnd.Before(bBegan) {
		t.Fatalf("OVERLAP: a's command still ran %v after b's started", aEnd.Sub(bBegan).Round(time.Millisecond))
	}
	if ra.rep.Outcome != report.LockLost || ra.code != 128+int(syscall.SIGKILL) ||
		!strings.Contains(ra.rep.Message, "lock lost") || !strings.Contains(aLog.String(), "not enough replicas acknowledged: 0 of 1") {
		t.Fatalf("a: %+v; stderr %s", ra, aLog)
	}
}

// TestPodMadeAgainDoesNotRunTheOccurrenceAgain: the controller makes one pod name per
// occurrence. A leader paused past its lease can, on resume, create the occurrence's pod
// again after the new leader ran it (and it failed) and pruned it: same name, new UID.
// That pod must not run the occurrence a second time. It used to: only a success was
// suppressed.
func TestPodMadeAgainDoesNotRunTheOccurrenceAgain(t *testing.T) {
	s := redistest.Start(t)
	ran := filepath.Join(t.TempDir(), "ran")
	pod := func(uid string) []string {
		return cmdArgs(flags(s.URL(), "made-again", "eu-1/billing/nightly-1/"+uid, "--holder-instance", uid),
			"sh", "-c", `echo x >> "$1"; exit 1`, "sh", ran)
	}
	if rep, code := run(t, nil, pod("uid-1")...); rep.Outcome != report.Failed || code != 1 {
		t.Fatalf("first pod: %d %+v", code, rep)
	}
	rep, code := run(t, nil, pod("uid-2")...)
	b, _ := os.ReadFile(ran)
	if rep.Outcome != report.SuppressedDuplicate || code != 0 || rep.HeldBy != "eu-1/billing/nightly-1/uid-1" || string(b) != "x\n" {
		t.Fatalf("the pod made again: %d %+v; the command ran %d times", code, rep, bytes.Count(b, []byte("x")))
	}
	// It says the occurrence failed there: it used to say it had succeeded.
	if !strings.Contains(rep.Message, "it failed in eu-1/billing/nightly-1/uid-1") || strings.Contains(rep.Message, "succeeded") {
		t.Errorf("the pod made again says %q", rep.Message)
	}
}

// slowGrantLocker grants the real lock, then holds the grant back for delay (a WAIT for a
// lagging replica, a slow reply).
type slowGrantLocker struct {
	real  wrapper.RedisLocker
	delay time.Duration
}

func (l slowGrantLocker) Acquire(ctx context.Context, req lock.Request) (*wrapper.Grant, error) {
	g, err := l.real.Acquire(ctx, req)
	time.Sleep(l.delay)
	return g, err
}

// TestSlowGrantIsRenewedInTime: a grant that reaches lockwrap half a ttl after it was sent
// still leaves the command running to its end. The first renewal is due a renew interval
// after the acquisition was sent, not after the command started: it used to come
// 1.5 s + 1 s after the acquisition, past the kill point (3 s − 1 s grace − 0.1 s), and a
// command holding a live lock was stopped as if the lock were lost.
func TestSlowGrantIsRenewedInTime(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	cfg, cmd, err := config.Parse(cmdArgs(flags(s.URL(), "slow-grant", "a", "--ttl", "3s", "--renew-interval", "1s",
		"--kill-grace", "1s"), "sleep", "1.5"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuf
	rep, code := wrapper.Run(context.Background(), cfg, cmd, wrapper.Deps{
		Locker: slowGrantLocker{real: wrapper.RedisLocker{L: lock.New(rdb)}, delay: 1500 * time.Millisecond}, Stderr: &stderr})
	if code != 0 || rep.Outcome != report.Succeeded || rep.LockLost {
		t.Fatalf("%d %+v; stderr %s", code, rep, stderr.String())
	}
}

// TestCommandDiesWithLockwrap: lockwrap SIGKILLed (the OOM killer, kill -9) outside a pod
// takes its command with it. The command used to run on with nobody renewing the lock:
// past its expiry, alongside the next holder's run. (In a pod lockwrap is PID 1, and its
// death ends every process of the pod.)
func TestCommandDiesWithLockwrap(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	beat, pidFile := filepath.Join(dir, "beat"), filepath.Join(dir, "pid")
	p := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "orphan", "a", "--ttl", "3s", "--renew-interval", "1s", "--kill-grace", "1s"),
		"sh", "-c", `echo $$ > "$2"; trap '' TERM; while :; do date +%s%N > "$1.tmp"; mv "$1.tmp" "$1"; sleep 0.02; done`, "sh", beat, pidFile)...)
	eventually(t, "the command running", func() bool { _, err := os.Stat(beat); return err == nil })
	t.Cleanup(func() { // a command that outlived lockwrap must not outlive the test
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The heartbeat stops: none for half a second, within the test's patience.
	eventually(t, "the command's heartbeat to stop", func() bool { return time.Since(readNanos(t, beat)) > 500*time.Millisecond })
	if last := readNanos(t, beat); last.After(killed.Add(200 * time.Millisecond)) {
		t.Fatalf("the command ran %v after lockwrap was killed", last.Sub(killed).Round(time.Millisecond))
	}
}

// termAtFinishLocker grants the real lock; its lease's FinishWith gets a SIGTERM while the
// finish is on the wire (the pod deleted as its command ends; systemd's KillMode
// control-group, which signals lockwrap and its child together): the signal, then a
// round trip's worth of wire, then the real call.
type termAtFinishLocker struct {
	real wrapper.RedisLocker
	sigs chan os.Signal
}

func (l termAtFinishLocker) Acquire(ctx context.Context, req lock.Request) (*wrapper.Grant, error) {
	g, err := l.real.Acquire(ctx, req)
	if err == nil {
		g.Lease = termAtFinishLease{g.Lease, l.sigs}
	}
	return g, err
}

type termAtFinishLease struct {
	wrapper.Lease
	sigs chan os.Signal
}

func (l termAtFinishLease) FinishWith(ctx context.Context, state string, opts lock.FinishOptions) (lock.FinishResult, error) {
	l.sigs <- syscall.SIGTERM
	time.Sleep(50 * time.Millisecond)
	return l.Lease.FinishWith(ctx, state, opts)
}

// TestStopSignalDuringAHealthyFinishLetsItLand: a SIGTERM that comes while the result is
// being recorded ends the retries of a Redis that does not answer, not the attempt under
// way on one that does. It used to cancel that attempt: a success Redis was about to
// record was lost (reported LockLost, "not recorded"), the lock stayed until its ttl, and
// a contender that retries recovered the occurrence and ran it again.
func TestStopSignalDuringAHealthyFinishLetsItLand(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	cfg, cmd, err := config.Parse(cmdArgs(flags(s.URL(), "term-at-finish", "a", "--ttl", "30s", "--renew-interval", "10s",
		"--kill-grace", "10s"), "true"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 4)
	var stderr syncBuf
	rep, code := wrapper.Run(context.Background(), cfg, cmd, wrapper.Deps{
		Locker: termAtFinishLocker{real: wrapper.RedisLocker{L: lock.New(rdb)}, sigs: sigs}, Signals: sigs, Stderr: &stderr})
	if code != 0 || rep.Outcome != report.Succeeded || rep.LockLost {
		t.Fatalf("%d %+v; stderr %s", code, rep, stderr.String())
	}
	ctx := context.Background()
	if ok, err := lock.Succeeded(ctx, rdb, "term-at-finish", mustTime(occurrence)); !ok || err != nil {
		t.Fatalf("the success is not in the ledger: %v %v", ok, err)
	}
	if n := rdb.Exists(ctx, lock.LockKey("term-at-finish")).Val(); n != 0 {
		t.Fatal("the lock is still held")
	}
}

// TestWaitingRunDoesNotStartInABlackout: B (contention retry, its job's UID and the time
// its pod was made given) waits behind holder A when a rollout of its job begins: the
// controller sets the job's blackout marker. When A lets the lock go, B must not start
// its command in the rollout: it is counted missed, holds no lock, and says why. It used
// to take the lock and run (the gap "a Wait or Retry pod already waiting when a rollout
// begins runs in it").
func TestWaitingRunDoesNotStartInABlackout(t *testing.T) {
	s := redistest.Start(t)
	c := admin(t, s)
	ctx := context.Background()
	g := newGate(t)
	a := runAsync(t, nil, cmdArgs(flags(s.URL(), "guarded", "a"), g.cmd(0)...)...)
	g.waitStarted(t)

	made := time.Now().Add(-time.Minute)
	ran := filepath.Join(t.TempDir(), "ran")
	base := evalCalls(t, s)
	// B runs the next occurrence (A's success does not suppress it).
	b := runAsync(t, nil, cmdArgs(flags(s.URL(), "guarded", "b", "--occurrence", occAt(time.Minute), "--contention", "retry", "--retry-attempts", "1000",
		"--retry-backoff", "20ms", "--retry-max-backoff", "50ms",
		"--blackout-id", "job-uid", "--made-at", made.UTC().Format(time.RFC3339Nano)), "touch", ran)...)
	eventually(t, "b to be turned away", func() bool { return evalCalls(t, s) >= base+1 })

	if err := lock.SetBlackout(ctx, c, "guarded", "job-uid", time.Now(), "rollout of Deployment/web", time.Minute); err != nil {
		t.Fatal(err)
	}
	g.release(t)
	if r := await(t, a); r.rep.Outcome != report.Succeeded {
		t.Fatalf("a: %+v", r.rep)
	}
	r := await(t, b)
	if _, err := os.Stat(ran); err == nil {
		t.Fatalf("b ran its command in the blackout: %+v", r.rep)
	}
	if r.code != 0 || r.rep.Outcome != report.Missed || !strings.Contains(r.rep.Message, "rollout of Deployment/web") {
		t.Fatalf("b: %d %+v, want Missed naming the blackout", r.code, r.rep)
	}
	if v := c.Get(ctx, lock.LockKey("guarded")).Val(); v != "" {
		t.Fatalf("lock left held by %q", v)
	}
}
