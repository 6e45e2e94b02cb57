//go:build linux

package wrapper

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/defaults"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// TestStraysLeftAreReported: when the search for the command's processes gives up (a
// process whose memory cannot be read, behind a hung mount; one it may not kill), some
// may outlive the lock's release and run alongside the next holder. The report says so:
// only lockwrap's stderr did, and the report read as a clean success.
func TestStraysLeftAreReported(t *testing.T) {
	killRunFn = func(string, bool) error {
		return errors.New("processes of the command still alive after 200 rounds of SIGKILL")
	}
	t.Cleanup(func() { killRunFn = killRun })
	s := redistest.Start(t)
	cfg, cmd, err := config.Parse([]string{"--redis-url", s.URL(), "--key", "strays-left", "--holder", "a",
		"--occurrence", time.Now().UTC().Truncate(time.Minute).Format(time.RFC3339), "--termination-log", t.TempDir() + "/report", "--", "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	rep, code := Run(context.Background(), cfg, cmd, Deps{Locker: RedisLocker{L: lock.New(s.Client())}, Stderr: &stderr})
	if code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("%d %+v", code, rep)
	}
	if !strings.Contains(strings.Join(rep.Warnings, "\n"), "may outlive the lock's release: processes of the command still alive") {
		t.Errorf("the report does not say processes may be left: %q", rep.Warnings)
	}
}

// TestStrayNotPermittedIsReported: a process of the run lockwrap may not signal (a
// set-user-ID program it started, running as another user) survives the search. It was
// passed over as if it were gone, and the search said none was left.
func TestStrayNotPermittedIsReported(t *testing.T) {
	const mark = "LOCKEDCRON_TEST_STRAY_EPERM"
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), mark+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	killFn = func(pid int, sig syscall.Signal) error {
		if pid == cmd.Process.Pid {
			return syscall.EPERM
		}
		return syscall.Kill(pid, sig)
	}
	t.Cleanup(func() { killFn = syscall.Kill })

	err := killRun(mark, true)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) || !strings.Contains(err.Error(), "not permitted") {
		t.Errorf("killRun = %v, want it to name pid %d, not permitted", err, cmd.Process.Pid)
	}
}

// TestIsMarkedReadsTheWholeEnvironment: a process is the run's when a variable of its
// environment is named the mark: the first one as well as a later one; a variable whose
// name only ends with the mark, or whose value holds it, is not.
func TestIsMarkedReadsTheWholeEnvironment(t *testing.T) {
	const mark = "LOCKEDCRON_TEST_MARK"
	needle := markNeedle(mark)
	for _, c := range []struct {
		env  []string
		want bool
	}{
		{[]string{mark + "=1"}, true},
		{[]string{mark + "=1", "A=b"}, true},
		{[]string{"A=b", mark + "=1"}, true},
		{[]string{"A=b", mark + "="}, true},
		{[]string{"X" + mark + "=1"}, false},
		{[]string{"A=b", "X" + mark + "=1"}, false},
		{[]string{"A=" + mark + "=1"}, false},
		{[]string{"A=b"}, false},
	} {
		cmd := exec.Command("sleep", "60")
		cmd.Env = c.env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Start returns once exec has begun; the new environment is readable only once
		// the kernel has laid it out (until then it reads empty).
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			env, err := environ(cmd.Process.Pid)
			return err == nil && len(env) > 0, nil
		}); err != nil {
			t.Fatal(err)
		}
		got := isMarked(cmd.Process.Pid, needle)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if got != c.want {
			t.Errorf("environment %q: marked %v, want %v", c.env, got, c.want)
		}
	}
}

// TestDescendants: the look's tree. 10 is lockwrap, and the run's leader started at tick
// 100: 11 is the leader, 12 its child, 13 a zombie below 12, 14 a child of 13 (alive); 20 a
// child lockwrap had from its start (tick 50), 21 below it; 22 one of 20's (tick 60), its
// parent ended, adopted by 10; 30 a process whose parent 31 ended while /proc was read (31
// is not listed; asked again, 30's parent is 10, its reaper); 40 another's.
func TestDescendants(t *testing.T) {
	entries := []procEntry{
		{pid: 11, ppid: 10, start: 100}, {pid: 12, ppid: 11, start: 101}, {pid: 13, ppid: 12, start: 102, ended: true},
		{pid: 14, ppid: 13, start: 103},
		{pid: 20, ppid: 10, start: 50}, {pid: 21, ppid: 20, start: 120}, {pid: 22, ppid: 10, start: 60},
		{pid: 30, ppid: 31, start: 130},
		{pid: 40, ppid: 1, start: 2},
	}
	parent := func(pid int) (int, bool) {
		if pid == 30 {
			return 10, true
		}
		return 0, false
	}
	got := descendants(10, entries, 100, parent)
	slices.Sort(got)
	if want := []int{11, 12, 14, 30}; !slices.Equal(got, want) {
		t.Errorf("descendants = %v, want %v", got, want)
	}
	// Before the run's start is known, every one below lockwrap.
	got = descendants(10, entries, 0, parent)
	slices.Sort(got)
	if want := []int{11, 12, 14, 20, 21, 22, 30}; !slices.Equal(got, want) {
		t.Errorf("descendants, no run start = %v, want %v", got, want)
	}
}

// TestDescendantOf: 5 below 4 below 3 below lockwrap (2); 4 ends during the walk, and 5
// is given to lockwrap, its reaper: still a descendant, and now lockwrap's child. The
// starttime returned is the top's, as the walk read it (process n started at 100·n).
func TestDescendantOf(t *testing.T) {
	parents := map[int]int{5: 4, 4: 3, 3: 2, 7: 1, 8: 3}
	stat := func(pid int) (int, uint64, bool) { p, ok := parents[pid]; return p, uint64(100 * pid), ok }
	if top, start, ok := descendantOf(8, 2, stat); !ok || top != 3 || start != 300 {
		t.Errorf("8 below 3 below 2: %d %d %v, want 3 300 true", top, start, ok)
	}
	reads := 0
	ending := func(pid int) (int, uint64, bool) {
		reads++
		if pid == 4 && reads > 1 { // 4 ends once 5's parent has been read
			delete(parents, 4)
			parents[5] = 2
			return 0, 0, false
		}
		return stat(pid)
	}
	if top, start, ok := descendantOf(5, 2, ending); !ok || top != 5 || start != 500 {
		t.Errorf("a process whose ancestor ended during the walk: %d %d %v, want 5 500 true", top, start, ok)
	}
	if _, _, ok := descendantOf(7, 2, ending); ok {
		t.Error("a process of another parent: a descendant")
	}
	if _, _, ok := descendantOf(9, 2, ending); ok {
		t.Error("a process that cannot be read: a descendant")
	}
}

// TestLookAgainWhileOrphansAreCollected: a look that finds nothing while the reaper
// collects orphans may have missed a process of the run that moved (it forks and exits,
// again and again: each move leaves an orphan): the search looks again, and ends only
// after a look during which nothing was collected.
func TestLookAgainWhileOrphansAreCollected(t *testing.T) {
	var collected uint64
	looks := 0
	lookRunFn = func(string, bool, func(int)) error {
		looks++
		if looks <= 3 {
			collected++ // an orphan collected during this look
		}
		return nil
	}
	orphansReapedFn = func() uint64 { return collected }
	t.Cleanup(func() { lookRunFn, orphansReapedFn = lookRun, orphansReaped })
	if err := killRun("LOCKEDCRON_TEST_MARK", true); err != nil || looks != 4 {
		t.Errorf("killRun = %v after %d looks, want nil after 4 (3 during which orphans were collected, then a quiet one)", err, looks)
	}
}

// TestKillPointLooksAgainWhileOrphansAreCollected: the kill point's look, in the
// background, looks again as killStrays does while orphans are collected (a process of the
// run that keeps moving escaped its single look, and ran past the lock's expiry until the
// leader had been reaped).
func TestKillPointLooksAgainWhileOrphansAreCollected(t *testing.T) {
	var mu sync.Mutex
	var collected uint64
	looks := 0
	lookRunFn = func(string, bool, func(int)) error {
		mu.Lock()
		defer mu.Unlock()
		looks++
		if looks <= 3 {
			collected++
		}
		return nil
	}
	orphansReapedFn = func() uint64 { mu.Lock(); defer mu.Unlock(); return collected }
	t.Cleanup(func() { lookRunFn, orphansReapedFn = lookRun, orphansReaped })
	e := newEscapees("LOCKEDCRON_TEST_MARK", 1<<30)
	e.signal(syscall.SIGKILL)
	e.looking.Wait()
	e.close()
	if looks != 4 {
		t.Errorf("the kill point looked %d times, want 4 (3 during which orphans were collected, then a quiet one)", looks)
	}
}

// TestExitedStrayIsNotLeft: a process of the run that has exited, its parent not having
// collected it yet (a zombie), runs nothing: a refused signal to it (it ran as another
// user) does not make the report warn that it may outlive the lock.
func TestExitedStrayIsNotLeft(t *testing.T) {
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Wait() })
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return exited(zombie.Process.Pid), nil
	}); err != nil {
		t.Fatalf("pid %d never became a zombie: %v", zombie.Process.Pid, err)
	}
	if exited(live.Process.Pid) {
		t.Errorf("a running process (pid %d) taken for exited", live.Process.Pid)
	}
	if !exited(1 << 30) {
		t.Error("a pid that does not exist not taken for exited")
	}

	// A process whose leader thread has ended reads Z while its other threads run on: it
	// was taken for exited (and a refused signal to it for no process left). The test
	// binary makes one ("__leaderless", process_test.go).
	dir := t.TempDir()
	leaderless := exec.Command(os.Args[0], "__leaderless", dir)
	if err := leaderless.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leaderless.Process.Kill(); _ = leaderless.Wait() })
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(leaderless.Process.Pid) + "/stat")
		return err == nil && strings.Contains(string(st), ") Z "), nil
	}); err != nil {
		t.Fatalf("pid %d's leader thread never ended: %v", leaderless.Process.Pid, err)
	}
	if exited(leaderless.Process.Pid) {
		t.Errorf("a process whose leader thread ended, its other threads running on (pid %d), taken for exited", leaderless.Process.Pid)
	}
}

// downLease is a lock whose Redis is cut while the command runs: every renewal fails with
// a transient error; the result is recorded (finished) once the run ends.
type downLease struct {
	mu       sync.Mutex
	finished string
}

func (*downLease) Renew(context.Context) error { return errors.New("dial tcp: i/o timeout") }
func (l *downLease) FinishWith(_ context.Context, st string, _ lock.FinishOptions) (lock.FinishResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished = st
	return lock.FinishResult{}, nil
}
func (*downLease) Release(context.Context) error { return nil }

func (l *downLease) state() string { l.mu.Lock(); defer l.mu.Unlock(); return l.finished }

// downLocker grants a downLease and keeps when the grant was asked for (the lock cannot
// expire before then + ttl).
type downLocker struct {
	l  *downLease
	mu sync.Mutex
	at time.Time
}

func (d *downLocker) Acquire(context.Context, lock.Request) (*Grant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = time.Now()
	return &Grant{Lease: d.l, Fence: 1}, nil
}

// TestExitBeforeTheStopPointWhileStraysAreSought: Redis is cut; the command exits 0 at
// ~200ms, well before its SIGTERM point (1.4s: ttl 2s − kill grace 500ms − margin 100ms).
// The search for its strays then lasts past that point (one stuck on a hung mount makes
// it take up to strayDeadline). Wait, which gave supervise the exit, returned only after
// that search: the SIGTERM point fell due first, its exitGrace saw no exit, and the run
// was taken for stopped and recorded "failed", so the occurrence's next contender ran it
// again. The first process's exit is what decides: seen before the stop, it is the end.
func TestExitBeforeTheStopPointWhileStraysAreSought(t *testing.T) {
	cfg, cmd, err := config.Parse([]string{"--redis-url", "redis://unused", "--key", "k", "--ttl", "2s",
		"--renew-interval", "200ms", "--kill-grace", "500ms", "--termination-log", "", "--", "sleep", "0.2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lk := &downLocker{l: &downLease{}}
	killRunFn = func(string, bool) error {
		lk.mu.Lock()
		termAt := lk.at.Add(cfg.TTL - cfg.KillGrace - defaults.Margin(cfg.TTL))
		lk.mu.Unlock()
		time.Sleep(time.Until(termAt.Add(300 * time.Millisecond)))
		return nil
	}
	t.Cleanup(func() { killRunFn = killRun })
	var stderr strings.Builder
	rep, code := Run(context.Background(), cfg, cmd, Deps{Locker: lk, Stderr: &stderr})
	if st := lk.l.state(); code != 0 || st != lock.StateSucceeded || rep.Outcome != report.Succeeded {
		t.Fatalf("the command exited 0 before its stop point: exit %d, %q recorded, outcome %s (%q); stderr: %s",
			code, st, rep.Outcome, rep.Message, stderr.String())
	}
}

// TestEscapedProcessDiesBeforeExpiry: Redis is cut; the command's first process ignores
// SIGTERM and dies of the SIGKILL at the kill point (expiry − margin: 900ms). A process it
// moved to a session of its own (setsid), which ignores SIGTERM too, is in the group that
// neither signal reaches: it was looked for only once the first process had been reaped
// (killStrays), and a look that takes a while (300ms here: a host with many processes, a
// slow environment read; up to strayDeadline) let it work on past the lock's expiry,
// alongside the next holder. The stop points now look for the run's processes
// themselves, the SIGTERM point's look ahead of the kill point.
func TestEscapedProcessDiesBeforeExpiry(t *testing.T) {
	lookRunFn = func(m string, d bool, each func(int)) error {
		time.Sleep(300 * time.Millisecond)
		return lookRun(m, d, each)
	}
	t.Cleanup(func() { lookRunFn = lookRun })
	for _, c := range []struct {
		name string
		trap string // the first process's answer to SIGTERM
		code int
	}{
		{"the first process ignores SIGTERM", `trap '' TERM`, 128 + int(syscall.SIGKILL)},
		// It exits between the SIGTERM point and the kill point: the kill point waited for
		// the stray search its exit began, and the escaped process, found and held at the
		// SIGTERM point, lived until that search reached it (helper-83).
		{"the first process exits in the kill grace", `trap 'sleep 0.35; exit 0' TERM`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			script := c.trap + `
setsid sh -c 'trap "" TERM; while [ -d "$1" ]; do date +%s%N > "$1/beat.tmp"; mv "$1/beat.tmp" "$1/beat"; sleep 0.01; done' sh "$1" &
while [ -d "$1" ]; do sleep 0.01; done`
			cfg, cmd, err := config.Parse([]string{"--redis-url", "redis://unused", "--key", "k", "--ttl", "1s",
				"--renew-interval", "200ms", "--kill-grace", "500ms", "--termination-log", "", "--", "sh", "-c", script, "sh", dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			lk := &downLocker{l: &downLease{}}
			var stderr strings.Builder
			rep, code := Run(context.Background(), cfg, cmd, Deps{Locker: lk, Stderr: &stderr})
			if code != c.code || rep.Outcome != report.LockLost {
				t.Fatalf("exit %d, outcome %s: want %d, LockLost; stderr: %s", code, rep.Outcome, c.code, stderr.String())
			}
			b, err := os.ReadFile(filepath.Join(dir, "beat"))
			if err != nil {
				t.Fatal(err)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			lk.mu.Lock()
			expiry := lk.at.Add(cfg.TTL) // Redis expires the lock no earlier than the acquire's send + ttl
			lk.mu.Unlock()
			if last := time.Unix(0, ns); !last.Before(expiry) {
				t.Fatalf("the escaped process's last heartbeat came %v after the lock could expire", last.Sub(expiry))
			}
		})
	}
}

// TestProvisionalReportBeforeTheStraysAreSought: the report of a run whose command has
// exited is handed to Main (Deps.Exited, which writes it to the termination log) as soon as
// its first process is reaped, before the search for its strays (up to strayDeadline) and
// the record of its result: lockwrap ended meanwhile (a kubelet's SIGKILL at the end of the
// pod's grace) leaves it.
func TestProvisionalReportBeforeTheStraysAreSought(t *testing.T) {
	killRunFn = func(string, bool) error { time.Sleep(time.Second); return nil }
	t.Cleanup(func() { killRunFn = killRun })
	cfg, cmd, err := config.Parse([]string{"--redis-url", "redis://unused", "--key", "k", "--holder", "h", "--ttl", "10s",
		"--renew-interval", "2s", "--kill-grace", "2s", "--termination-log", "", "--", "sh", "-c", "exit 3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lk := &downLocker{l: &downLease{}}
	var stderr strings.Builder
	var got []report.Report
	var at time.Time
	rep, code := Run(context.Background(), cfg, cmd, Deps{Locker: lk, Stderr: &stderr, Exited: func(r report.Report) {
		got, at = append(got, r), time.Now()
	}})
	ended := time.Now()
	if code != 3 || rep.Outcome != report.Failed {
		t.Fatalf("exit %d, %+v; stderr: %s", code, rep, stderr.String())
	}
	if len(got) != 1 {
		t.Fatalf("Exited called %d times, want once", len(got))
	}
	if p := got[0]; p.Outcome != report.Failed || p.ExitCode != 3 || p.Holder != "h" || p.FencingToken != 1 || p.StartedAt == "" ||
		!strings.Contains(p.Message, "before failed was recorded") {
		t.Fatalf("provisional report %+v", p)
	}
	if lead := ended.Sub(at); lead < 800*time.Millisecond {
		t.Fatalf("the provisional report came %v before Run's end: not before the stray search (1 s)", lead)
	}
}
