package wrapper_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/defaults"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// The test binary doubles as lockwrap when this variable is set, so tests can run real
// lockwrap processes (to freeze them, signal them) without building one.
const asLockwrap = "LOCKWRAP_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == stampArg {
		os.Exit(stampMain(os.Args[2]))
	}
	if len(os.Args) == 3 && os.Args[1] == leaderlessArg {
		leaderlessMain(os.Args[2])
	}
	if len(os.Args) == 3 && os.Args[1] == hopperArg {
		hopperMain(os.Args[2])
	}
	if os.Getenv(asLockwrap) == "1" {
		os.Exit(wrapper.Main(os.Args[1:], os.Getenv, os.Stderr))
	}
	code := m.Run()
	if wrapper.ReaperActive() {
		fmt.Fprintln(os.Stderr, "an in-process test made the test binary a reaper (Main got past its flags): run lockwrap as a process (runWrapped) instead")
		code = 1
	}
	os.Exit(code)
}

// The tests' occurrences are of the day before the run, not of a fixed date: lockwrap
// does not start an occurrence older than what the ledger remembers (--dedupe-retention,
// 7 days unless told), and a fixed date made every test that ran one fail a week after it
// was written.
var (
	occBase    = time.Now().UTC().Truncate(time.Hour).Add(-24 * time.Hour)
	occurrence = occAt(0)
)

// occAt is the occurrence d after the tests' first (RFC 3339, as --occurrence takes it).
func occAt(d time.Duration) string { return occBase.Add(d).Format(time.RFC3339) }

// gate is a child command that touches started, waits for release to exist, then exits
// with code.
type gate struct{ dir string }

// A failing test releases its gates, and a gate whose directory is gone stops waiting, so
// no child outlives the test.
func newGate(t *testing.T) gate {
	g := gate{t.TempDir()}
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(g.dir, "release"), nil, 0o644) })
	return g
}

func (g gate) cmd(code int) []string {
	return []string{"sh", "-c", `touch "$1/started"; while [ ! -e "$1/release" ] && [ -d "$1" ]; do sleep 0.02; done; exit $2`,
		"sh", g.dir, fmt.Sprint(code)}
}
func (g gate) waitStarted(t *testing.T) {
	t.Helper()
	eventually(t, "child started", func() bool { _, err := os.Stat(filepath.Join(g.dir, "started")); return err == nil })
}
func (g gate) release(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// run parses args (flags, "--", command) like lockwrap and runs the occurrence in process.
func run(t *testing.T, env map[string]string, args ...string) (report.Report, int) {
	t.Helper()
	cfg, cmd, err := config.Parse(args, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	var stderr syncBuf
	rep, code := wrapper.Run(context.Background(), cfg, cmd, wrapper.Deps{Stderr: &stderr})
	t.Logf("lockwrap %v → %d %+v; stderr: %s", args, code, rep, stderr.String())
	return rep, code
}

type result struct {
	rep  report.Report
	code int
}

func runAsync(t *testing.T, env map[string]string, args ...string) <-chan result {
	ch, _ := runAsyncLog(t, env, args...)
	return ch
}

func runAsyncLog(t *testing.T, env map[string]string, args ...string) (<-chan result, *syncBuf) {
	ch := make(chan result, 1)
	stderr := &syncBuf{}
	go func() {
		cfg, cmd, err := config.Parse(args, func(k string) string { return env[k] })
		if err != nil {
			ch <- result{report.Report{Message: err.Error()}, -1}
			return
		}
		rep, code := wrapper.Run(context.Background(), cfg, cmd, wrapper.Deps{Stderr: stderr})
		ch <- result{rep, code}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("lockwrap %v stderr: %s", args, stderr)
		}
	})
	return ch, stderr
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("lockwrap did not finish")
	}
	return result{}
}

// flags are a run's flags for occurrence (fixed dates, in the past): the ledger's
// retention is the longest, so that lockwrap still runs them (an occurrence older than
// --dedupe-retention − --ttl is missed: TestOccurrenceOlderThanTheLedger).
func flags(url, key, holder string, more ...string) []string {
	return append([]string{"--redis-url", url, "--key", key, "--holder", holder, "--occurrence", occurrence,
		"--dedupe-retention", defaults.MaxRetention.String()}, more...)
}

func cmdArgs(base []string, cmd ...string) []string {
	return append(append(append([]string{}, base...), "--"), cmd...)
}

func admin(t *testing.T, s *redistest.Server) *redis.Client {
	c := s.Client()
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTwoContendersOneRuns(t *testing.T) {
	s := redistest.Start(t)
	g := newGate(t)
	a := runAsync(t, nil, cmdArgs(flags(s.URL(), "two", "holder-a"), g.cmd(0)...)...)
	g.waitStarted(t)
	counter := filepath.Join(t.TempDir(), "ran-b")
	rb, code := run(t, nil, cmdArgs(flags(s.URL(), "two", "holder-b"), "touch", counter)...)
	if code != 0 || rb.Outcome != report.SkippedContention || rb.HeldBy != "holder-a" || rb.Attempts != 1 {
		t.Fatalf("b: %d %+v", code, rb)
	}
	if _, err := os.Stat(counter); err == nil {
		t.Fatal("b ran its command")
	}
	g.release(t)
	ra := await(t, a)
	if ra.code != 0 || ra.rep.Outcome != report.Succeeded || ra.rep.FencingToken <= 0 || ra.rep.AcquiredAt == "" || ra.rep.ReleasedAt == "" {
		t.Fatalf("a: %+v", ra)
	}
}

func TestRetry(t *testing.T) {
	s := redistest.Start(t)
	g := newGate(t)
	a := runAsync(t, nil, cmdArgs(flags(s.URL(), "retry", "a"), g.cmd(0)...)...)
	g.waitStarted(t)

	// Gives up after the attempts, with the count.
	rb, code := run(t, nil, cmdArgs(flags(s.URL(), "retry", "b", "--contention", "retry",
		"--retry-attempts", "3", "--retry-backoff", "10ms", "--retry-max-backoff", "40ms"), "true")...)
	if code != 0 || rb.Outcome != report.SkippedContention || rb.Attempts != 3 || rb.HeldBy != "a" ||
		!strings.Contains(rb.Message, "gave up after 3 attempts") {
		t.Fatalf("give up: %d %+v", code, rb)
	}
	// A deadline in the past stops after the first attempt.
	rd, _ := run(t, nil, cmdArgs(flags(s.URL(), "retry", "d", "--contention", "retry",
		"--retry-deadline", time.Now().Add(-time.Second).UTC().Format(time.RFC3339)), "true")...)
	if rd.Outcome != report.SkippedContention || rd.Attempts != 1 || !strings.Contains(rd.Message, "deadline") {
		t.Fatalf("deadline: %+v", rd)
	}

	// Acquires once a releases; use the next occurrence so b is not suppressed.
	c := runAsync(t, nil, cmdArgs(flags(s.URL(), "retry", "c", "--occurrence", occAt(time.Minute),
		"--contention", "retry", "--retry-attempts", "1000", "--retry-backoff", "10ms", "--retry-max-backoff", "50ms"), "true")...)
	// Release a once c has been turned away at least twice.
	base := evalCalls(t, s)
	eventually(t, "c to retry", func() bool { return evalCalls(t, s) >= base+2 })
	g.release(t)
	ra := await(t, a)
	if ra.rep.Outcome != report.Succeeded {
		t.Fatalf("a: %+v", ra)
	}
	rc := await(t, c)
	if rc.code != 0 || rc.rep.Outcome != report.Succeeded || rc.rep.Attempts < 2 || rc.rep.FencingToken <= ra.rep.FencingToken || rc.rep.WaitedMs <= 0 {
		t.Fatalf("c: %+v", rc)
	}
}

// evalCalls is how many scripts the server has run (EVALSHA calls).
func evalCalls(t *testing.T, s *redistest.Server) int {
	info := admin(t, s).Info(context.Background(), "commandstats").Val()
	var n int
	if _, rest, ok := strings.Cut(info, "cmdstat_evalsha:calls="); ok {
		fmt.Sscanf(rest, "%d", &n)
	}
	return n
}

func TestSuppressedDuplicateAndExitCodes(t *testing.T) {
	s := redistest.Start(t)
	ra, code := run(t, nil, cmdArgs(flags(s.URL(), "dup", "a"), "true")...)
	if code != 0 || ra.Outcome != report.Succeeded {
		t.Fatalf("a: %d %+v", code, ra)
	}
	ok, err := lock.Succeeded(context.Background(), admin(t, s), "dup", mustTime(occurrence))
	if err != nil || !ok {
		t.Fatalf("ledger: %v %v", ok, err)
	}
	rb, code := run(t, nil, cmdArgs(flags(s.URL(), "dup", "b"), "sh", "-c", "exit 9")...)
	if code != 0 || rb.Outcome != report.SuppressedDuplicate || rb.HeldBy != "a" || !strings.Contains(rb.Message, "by a") {
		t.Fatalf("b: %d %+v", code, rb)
	}

	// A failing command: its code passes through, the ledger says failed, and the same
	// occurrence may run again.
	occ2 := occAt(5 * time.Minute)
	rc, code := run(t, nil, cmdArgs(flags(s.URL(), "dup", "c", "--occurrence", occ2), "sh", "-c", "exit 3")...)
	if code != 3 || rc.Outcome != report.Failed || rc.ExitCode != 3 {
		t.Fatalf("exit 3: %d %+v", code, rc)
	}
	if st := admin(t, s).HGet(context.Background(), lock.RunKey("dup", mustTime(occ2)), "state").Val(); st != "failed" {
		t.Fatalf("ledger %q", st)
	}
	// Killed by a signal: 128+signal.
	rd, code := run(t, nil, cmdArgs(flags(s.URL(), "dup", "d", "--occurrence", occ2), "sh", "-c", "kill -KILL $$")...)
	if code != 128+9 || rd.Outcome != report.Failed || rd.FencingToken <= rc.FencingToken {
		t.Fatalf("killed: %d %+v", code, rd)
	}
	// The child's environment.
	out := filepath.Join(t.TempDir(), "env")
	occ3 := occAt(10 * time.Minute)
	re, _ := run(t, map[string]string{config.EnvRedisPassword: ""}, cmdArgs(flags(s.URL(), "dup", "e", "--occurrence", occ3),
		"sh", "-c", `echo "$LOCKEDCRON_FENCING_TOKEN $LOCKEDCRON_OCCURRENCE $LOCKEDCRON_HOLDER" > "$1"`, "sh", out)...)
	b, _ := os.ReadFile(out)
	if want := fmt.Sprintf("%d %s e\n", re.FencingToken, occ3); string(b) != want {
		t.Fatalf("child env %q, want %q", b, want)
	}
	// A command that does not exist: 70 before the child starts.
	rf, code := run(t, nil, cmdArgs(flags(s.URL(), "dup", "f", "--occurrence", occAt(15*time.Minute)), "/no/such/command")...)
	if code != wrapper.ExitInternal || rf.Outcome != report.Error || !strings.Contains(rf.Message, "/no/such/command") {
		t.Fatalf("missing command: %d %+v", code, rf)
	}
}

// TestChildGetsRunID: a run with an id of its own (a manual run) tells its command the id,
// however lockwrap was given it: its occurrence is the time it was asked for, which can be a
// scheduled occurrence's second, and a job keying its effects must tell the two apart. A
// run without one has none, even if its parent's environment had one.
func TestChildGetsRunID(t *testing.T) {
	s := redistest.Start(t)
	out := filepath.Join(t.TempDir(), "env")
	show := []string{"sh", "-c", `echo "${LOCKEDCRON_RUN_ID-unset}" > "$1"`, "sh", out}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{flags(s.URL(), "rid", "a", "--run-id", "manual:uid:fix-1"), nil, "manual:uid:fix-1"},
		{flags(s.URL(), "rid", "b"), map[string]string{config.EnvRunID: "manual:uid:fix-2"}, "manual:uid:fix-2"},
		{flags(s.URL(), "rid", "c", "--occurrence", occAt(20*time.Minute)), nil, "unset"},
	} {
		cfg, cmd, err := config.Parse(cmdArgs(c.args, show...), func(k string) string { return c.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		environ := append(os.Environ(), config.EnvRunID+"=from-the-parent")
		if rep, code := wrapper.Run(context.Background(), cfg, cmd, wrapper.Deps{Environ: environ}); code != 0 || rep.Outcome != report.Succeeded {
			t.Fatalf("%v: %d %+v", c.args, code, rep)
		}
		if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != c.want {
			t.Errorf("%v: the command saw LOCKEDCRON_RUN_ID %q, want %q", c.args, strings.TrimSpace(string(b)), c.want)
		}
	}
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// lockwrapProc runs the test binary as lockwrap with the report in a file.
type lockwrapProc struct {
	cmd    *exec.Cmd
	report string
	stderr *syncBuf
	done   chan int
}

func startLockwrap(t testing.TB, env []string, args ...string) *lockwrapProc {
	t.Helper()
	p := &lockwrapProc{report: filepath.Join(t.TempDir(), "report.json"), stderr: &syncBuf{}, done: make(chan int, 1)}
	p.cmd = exec.Command(os.Args[0], append([]string{"--termination-log", p.report}, args...)...)
	// TMPDIR in the test's directory: a lockwrap the test kills leaves its watermark
	// directory behind (in a pod it goes with the container), here it goes with the test's.
	p.cmd.Env = append(append(os.Environ(), asLockwrap+"=1", "TMPDIR="+filepath.Dir(p.report)), env...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		p.done <- code
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
	})
	return p
}

func (p *lockwrapProc) wait(t testing.TB) (report.Report, int) {
	t.Helper()
	select {
	case code := <-p.done:
		b, err := os.ReadFile(p.report)
		if err != nil {
			t.Fatalf("report: %v; stderr: %s", err, p.stderr)
		}
		rep, err := report.Decode(b)
		if err != nil {
			t.Fatalf("report %s: %v", b, err)
		}
		t.Logf("lockwrap process → %d %s; stderr: %s", code, b, p.stderr)
		return rep, code
	case <-time.After(60 * time.Second):
		t.Fatalf("lockwrap process did not exit; stderr: %s", p.stderr)
	}
	return report.Report{}, 0
}

func TestFrozenHolderLosesToNewHolder(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	ctx := context.Background()
	gA := newGate(t)
	a := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "frozen", "a", "--ttl", "1s", "--renew-interval", "200ms",
		"--kill-grace", "500ms"), gA.cmd(0)...)...)
	gA.waitStarted(t)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// a's lock expires; b takes it (a's crashed-looking run is recovered).
	eventually(t, "a's lock to expire", func() bool { return rdb.Exists(ctx, lock.LockKey("frozen")).Val() == 0 })
	gB := newGate(t)
	b := runAsync(t, nil, cmdArgs(flags(s.URL(), "frozen", "b", "--ttl", "5s", "--kill-grace", "1s"), gB.cmd(0)...)...)
	gB.waitStarted(t)
	bValue := rdb.Get(ctx, lock.LockKey("frozen")).Val()
	if !strings.HasSuffix(bValue, " b") {
		t.Fatalf("lock value %q", bValue)
	}
	// a resumes: its renewal fails, it terminates its child, and b's lock is untouched.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	ra, code := a.wait(t)
	// Both stop points passed while it was frozen: SIGTERM and SIGKILL go out at once.
	if ra.Outcome != report.LockLost || !ra.LockLost || (code != 128+int(syscall.SIGTERM) && code != 128+int(syscall.SIGKILL)) || ra.ExitCode != code {
		t.Fatalf("a: %d %+v", code, ra)
	}
	if v := rdb.Get(ctx, lock.LockKey("frozen")).Val(); v != bValue {
		t.Fatalf("lock after a finished: %q, want b's %q", v, bValue)
	}
	if h := rdb.HGet(ctx, lock.RunKey("frozen", mustTime(occurrence)), "holder").Val(); h != "b" {
		t.Fatalf("ledger holder %q", h)
	}
	gB.release(t)
	rb := await(t, b)
	if rb.rep.Outcome != report.Succeeded || !rb.rep.Recovered || rb.rep.FencingToken <= ra.FencingToken {
		t.Fatalf("b: %+v (a's fence %d)", rb, ra.FencingToken)
	}
}

func TestRedisDownPastTTLLosesLock(t *testing.T) {
	for _, onLost := range []string{"terminate", "continue"} {
		t.Run(onLost, func(t *testing.T) {
			s := redistest.Start(t, redistest.WithPersistence())
			g := newGate(t)
			r, stderr := runAsyncLog(t, nil, cmdArgs(flags(s.URL(), "down", "a", "--ttl", "1s", "--renew-interval", "250ms",
				"--kill-grace", "500ms", "--on-lost", onLost), g.cmd(0)...)...)
			g.waitStarted(t)
			s.Stop()
			if onLost == "continue" {
				// Once the loss is noticed, finish the command and bring Redis back.
				eventually(t, "the loss", func() bool { return strings.Contains(stderr.String(), "lock lost") })
				g.release(t)
				s.Start()
			}
			res := await(t, r)
			switch onLost {
			case "terminate":
				if res.rep.Outcome != report.LockLost || !res.rep.LockLost || res.code != 128+int(syscall.SIGTERM) ||
					!strings.Contains(res.rep.Message, "unreachable") {
					t.Fatalf("%+v", res)
				}
			case "continue":
				// A run that cannot prove it held the lock to the end is never a clean success.
				if res.rep.Outcome != report.LockLost || !res.rep.LockLost || res.code != 0 {
					t.Fatalf("%+v", res)
				}
			}
		})
	}
}

func TestRedisBackBeforeTTL(t *testing.T) {
	s := redistest.Start(t, redistest.WithPersistence())
	g := newGate(t)
	r := runAsync(t, nil, cmdArgs(flags(s.URL(), "blip", "a", "--ttl", "3s", "--renew-interval", "500ms", "--kill-grace", "1s"), g.cmd(0)...)...)
	g.waitStarted(t)
	s.Restart() // killed and back well within the ttl; the AOF keeps the lock
	rdb := admin(t, s)
	ctx := context.Background()
	// Wait for a renewal on the restarted server (the ttl is reset above 2.5s).
	eventually(t, "a renewal after the restart", func() bool { return rdb.PTTL(ctx, lock.LockKey("blip")).Val() > 2600*time.Millisecond })
	g.release(t)
	res := await(t, r)
	if res.rep.Outcome != report.Succeeded || res.rep.LockLost || res.code != 0 {
		t.Fatalf("%+v", res)
	}
	if ok, _ := lock.Succeeded(ctx, rdb, "blip", mustTime(occurrence)); !ok {
		t.Fatal("ledger not succeeded")
	}
}

func TestSignalsForwarded(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	// The child traps TERM and exits 7; lockwrap passes 7 through.
	p := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "sig", "a"),
		"sh", "-c", `trap 'exit 7' TERM; touch "$1/started"; while [ -d "$1" ]; do sleep 0.02; done`, "sh", dir)...)
	eventually(t, "child started", func() bool { _, err := os.Stat(filepath.Join(dir, "started")); return err == nil })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rep, code := p.wait(t)
	if code != 7 || rep.Outcome != report.Failed || rep.ExitCode != 7 {
		t.Fatalf("%d %+v", code, rep)
	}
	// SIGINT to lockwrap reaches a child that does not handle it: 128+2.
	g := newGate(t)
	p = startLockwrap(t, nil, cmdArgs(flags(s.URL(), "sig", "b", "--occurrence", occAt(time.Hour)), g.cmd(0)...)...)
	g.waitStarted(t)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if rep, code := p.wait(t); code != 128+int(syscall.SIGINT) || rep.Outcome != report.Failed {
		t.Fatalf("%d %+v", code, rep)
	}
}

func TestBadInputExits70AndWritesNothing(t *testing.T) {
	s := redistest.Start(t)
	ok := []string{"--redis-url", s.URL(), "--key", "bad", "--occurrence", occurrence}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", append([]string{"--nope", "1"}, ok...), "-nope: unknown flag"},
		{"missing key", []string{"--redis-url", s.URL()}, "--key: required"},
		{"bad url", []string{"--redis-url", "http://x", "--key", "k"}, "--redis-url:"},
		{"url port", []string{"--redis-url", "redis://h:99999", "--key", "k"}, "bad port"},
		{"ttl zero", append([]string{"--ttl", "0s"}, ok...), "--ttl: 0s must be between 1s and 24h"},
		{"ttl junk", append([]string{"--ttl", "soon"}, ok...), "--ttl:"},
		{"renew too long", append([]string{"--ttl", "10s", "--renew-interval", "6s"}, ok...), "--renew-interval: 6s is more than half the ttl"},
		{"bad occurrence", []string{"--redis-url", s.URL(), "--key", "k", "--occurrence", "yesterday"}, "--occurrence:"},
		{"no dashdash", append(append([]string{}, ok...), "true"), "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name != "no dashdash" {
				args = append(append(append([]string{}, args...), "--"), "true")
			}
			p := startLockwrap(t, nil, args...)
			rep, code := p.wait(t)
			if code != wrapper.ExitInternal || rep.Outcome != report.Error || !strings.Contains(rep.Message, tc.want) ||
				!strings.Contains(p.stderr.String(), tc.want) {
				t.Fatalf("%d %+v, want message with %q", code, rep, tc.want)
			}
		})
	}
	// The environment works like the flags; a bad value names the flag and the variable.
	p := startLockwrap(t, []string{config.EnvRedisURL + "=" + s.URL(), config.EnvKey + "=bad", config.EnvTTL + "=-1s"}, "--", "true")
	if rep, code := p.wait(t); code != 70 || !strings.Contains(rep.Message, "--ttl") || !strings.Contains(rep.Message, config.EnvTTL) {
		t.Fatalf("%d %+v", code, rep)
	}
	if n := admin(t, s).DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("bad input wrote %d keys", n)
	}
}

func TestEnvAndUnreachableRedis(t *testing.T) {
	// Flags win over variables; Redis unreachable → 70 with the reason.
	env := []string{config.EnvRedisURL + "=redis://127.0.0.1:1", config.EnvKey + "=k", config.EnvHolder + "=env-holder"}
	p := startLockwrap(t, env, "--holder", "flag-holder", "--", "true")
	rep, code := p.wait(t)
	if code != 70 || rep.Outcome != report.Error || rep.Holder != "flag-holder" || rep.Key != "k" ||
		!strings.Contains(rep.Message, "connection refused") || !strings.Contains(p.stderr.String(), "connection refused") {
		t.Fatalf("%d %+v", code, rep)
	}
}

func TestMinReplicasNotMet(t *testing.T) {
	s := redistest.Start(t)
	rep, code := run(t, nil, cmdArgs(flags(s.URL(), "mr", "a", "--min-replicas", "1", "--ttl", "1s", "--renew-interval", "200ms", "--kill-grace", "0s"), "true")...)
	if code != 70 || rep.Outcome != report.Error || !strings.Contains(rep.Message, "not enough replicas") {
		t.Fatalf("%d %+v", code, rep)
	}
	if n := admin(t, s).Exists(context.Background(), lock.LockKey("mr"), lock.RunKey("mr", mustTime(occurrence))).Val(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

func TestTLSAndACL(t *testing.T) {
	s := redistest.Start(t, redistest.WithTLS())
	s.Do("ACL", "SETUSER", "lockwrap", "on", ">pw", "resetkeys", "~lockedcron:*", "-@all",
		"+evalsha", "+eval", "+wait", "+hget", "+ping", "+get", "+set", "+del", "+hset", "+pexpire")
	s.Do("ACL", "SETUSER", "default", "off")
	env := map[string]string{config.EnvRedisCACert: string(s.CACert()), config.EnvRedisPassword: "pw"}
	rep, code := run(t, env, cmdArgs(flags(s.URL(), "tls", "a", "--redis-username", "lockwrap"), "true")...)
	if code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("%d %+v", code, rep)
	}
	// CA from a file; wrong password → 70.
	ca := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(ca, s.CACert(), 0o600)
	rep, code = run(t, map[string]string{config.EnvRedisPassword: "wrong"},
		cmdArgs(flags(s.URL(), "tls", "a", "--redis-username", "lockwrap", "--redis-ca-file", ca), "true")...)
	if code != 70 || !strings.Contains(rep.Message, "WRONGPASS") {
		t.Fatalf("%d %+v", code, rep)
	}
}

func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, key := range []string{"a", "b", "c"} {
		rep, code := run(t, nil, cmdArgs(flags(c.URL(), key, "x"), "true")...)
		if code != 0 || rep.Outcome != report.Succeeded {
			t.Fatalf("%s: %d %+v", key, code, rep)
		}
		rep, _ = run(t, nil, cmdArgs(flags(c.URL(), key, "y"), "true")...)
		if rep.Outcome != report.SuppressedDuplicate {
			t.Fatalf("%s again: %+v", key, rep)
		}
	}
}

func TestSentinelFailoverDuringRun(t *testing.T) {
	sg := redistest.StartSentinel(t, 1, 3)
	g := newGate(t)
	r := runAsync(t, nil, cmdArgs(flags(sg.URL(), "failover", "a", "--ttl", "15s", "--renew-interval", "1s",
		"--kill-grace", "2s", "--min-replicas", "1"), g.cmd(0)...)...)
	g.waitStarted(t)
	newMaster := sg.Failover()
	nm := redis.NewClient(&redis.Options{Addr: newMaster, Protocol: 2, DisableIdentity: true})
	defer nm.Close()
	ctx := context.Background()
	// The lock survived (the replica had acknowledged it) and renewals reach the new master.
	eventually(t, "a renewal on the new master", func() bool {
		v, err := nm.Get(ctx, lock.LockKey("failover")).Result()
		return err == nil && strings.HasSuffix(v, " a") && nm.PTTL(ctx, lock.LockKey("failover")).Val() > 14500*time.Millisecond
	})
	g.release(t)
	res := await(t, r)
	if res.code != 0 || res.rep.Outcome != report.Succeeded || res.rep.LockLost {
		t.Fatalf("%+v", res)
	}
	if ok, err := lock.Succeeded(ctx, nm, "failover", mustTime(occurrence)); !ok || err != nil {
		t.Fatalf("ledger on the new master: %v %v", ok, err)
	}
}

func TestCopySelf(t *testing.T) {
	dir := t.TempDir()
	if err := wrapper.CopySelf(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "lockwrap"))
	if err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("%v %v", fi, err)
	}
	self, _ := os.Executable()
	st, _ := os.Stat(self)
	if fi.Size() != st.Size() {
		t.Fatalf("size %d, want %d", fi.Size(), st.Size())
	}
	var stderr bytes.Buffer
	if code := wrapper.Main([]string{"cp"}, os.Getenv, &stderr); code != 70 {
		t.Fatalf("cp without DEST: %d", code)
	}
	// The controller passes its settings' version: a lockwrap that knows only older ones
	// (a node kept an older image under the tag) refuses to install itself, saying why,
	// instead of running jobs while ignoring settings (helper-107).
	newer := fmt.Sprintf("--protocol=%d", config.Protocol+1)
	for arg, want := range map[string]int{"--protocol=1": 0, fmt.Sprintf("--protocol=%d", config.Protocol): 0, newer: 70, "--protocol=x": 70, "-p=1": 70} {
		stderr.Reset()
		dest := t.TempDir()
		code := wrapper.Main([]string{"cp", dest, arg}, os.Getenv, &stderr)
		_, err := os.Stat(filepath.Join(dest, "lockwrap"))
		if code != want || (err == nil) != (want == 0) {
			t.Errorf("cp %s: exit %d (copied: %v), want %d: %s", arg, code, err == nil, want, stderr.String())
		}
		if arg == newer && !strings.Contains(stderr.String(), "older build") {
			t.Errorf("cp %s does not say why: %s", arg, stderr.String())
		}
	}
}

// TestBackoffLimitCountsAttemptsInThePod: under restartPolicy OnFailure the kubelet
// restarts a failed container in its pod, and the controller could stop that only
// between attempts, which the kubelet does not always leave (the first restart, and every
// one after an attempt longer than its back-off's memory, come at once: helper-109). The
// attempts are counted in the pod's emptyDir (--attempts-dir) by lockwrap itself: with
// --backoff-limit 1, the third start of the same holder runs nothing and exits 0, so that
// the kubelet stops, and a command the job runs with lockwrap does not count.
func TestBackoffLimitCountsAttemptsInThePod(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	// The settings come as the controller gives them, in the environment, which the
	// command inherits. Each attempt records that it ran, and runs a lockwrap of its own
	// (another key), which must not count this pod's attempts.
	env := map[string]string{config.EnvBackoffLimit: "1", config.EnvAttemptsDir: dir}
	attempt := cmdArgs(flags(s.URL(), "backoff", "pod-1/uid-1"),
		"sh", "-c", `echo x >> "$1"; "$0" --redis-url "$2" --key nested --holder nested -- true || echo "nested lockwrap failed" >&2; exit 3`, os.Args[0], ran, s.URL())
	runEnv := func(args []string) (report.Report, int) {
		cfg, cmd, err := config.Parse(args, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		environ := append(os.Environ(), asLockwrap+"=1")
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		var stderr syncBuf
		rep, code := wrapper.Run(context.Background(), cfg, cmd, wrapper.Deps{Stderr: &stderr, Environ: environ})
		t.Logf("lockwrap → %d %+v; stderr: %s", code, rep, stderr.String())
		return rep, code
	}
	for i, want := range []struct {
		code    int
		outcome report.Outcome
	}{{3, report.Failed}, {3, report.Failed}, {0, report.Error}, {0, report.Error}} {
		rep, code := runEnv(attempt)
		if code != want.code || rep.Outcome != want.outcome {
			t.Fatalf("attempt %d: exit %d %+v, want exit %d %s", i+1, code, rep, want.code, want.outcome)
		}
		if want.code == 0 && !strings.Contains(rep.Message, "backoff limit is 1") {
			t.Errorf("attempt %d does not say why it did not run: %q", i+1, rep.Message)
		}
	}
	if b, _ := os.ReadFile(ran); strings.Count(string(b), "x") != 2 {
		t.Fatalf("the command ran %d times, want 2 (the limit 1 and the first attempt)", strings.Count(string(b), "x"))
	}
	// Without a limit, or in another pod's directory, it runs.
	if rep, code := run(t, nil, cmdArgs(flags(s.URL(), "backoff", "pod-2/uid-2", "--backoff-limit", "1", "--attempts-dir", t.TempDir()), "true")...); code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("another pod: %d %+v", code, rep)
	}
	// A count it cannot read is said, and not applied (the run goes on).
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "attempts"), []byte("many"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, code := run(t, nil, cmdArgs(flags(s.URL(), "backoff", "pod-3/uid-3", "--occurrence", occAt(time.Hour), "--backoff-limit", "0", "--attempts-dir", bad), "true")...)
	if code != 0 || rep.Outcome != report.Succeeded || len(rep.Warnings) == 0 || !strings.Contains(strings.Join(rep.Warnings, " "), "not a count") {
		t.Fatalf("an unreadable count: %d %+v", code, rep)
	}
}

// A setting that fails every start (a Secret's url that does not parse) under
// restartPolicy OnFailure stops at the same backoff limit, counted from the variables the
// controller sets: its starts never reach the run that counts the others (helper-111).
func TestBackoffLimitCountsStartsWithBadSettings(t *testing.T) {
	dir, logDir := t.TempDir(), t.TempDir()
	env := map[string]string{config.EnvBackoffLimit: "1", config.EnvAttemptsDir: dir, config.EnvRedisURL: "http://not-redis", config.EnvKey: "k",
		config.EnvTerminationLog: filepath.Join(logDir, "report")}
	// A lockwrap exec'd into the pod with a typo, or --help, is not an attempt.
	for _, args := range [][]string{{"--help"}, {"--ky", "x", "--", "true"}} {
		if code := wrapper.Main(args, func(k string) string { return env[k] }, &syncBuf{}); code != 70 {
			t.Fatalf("%q: exit %d", args, code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "attempts")); err == nil {
		t.Fatal("an exec'd lockwrap with a typo counted an attempt of the pod")
	}
	for i, want := range []int{70, 70, 0} {
		var stderr syncBuf
		code := wrapper.Main([]string{"--", "true"}, func(k string) string { return env[k] }, &stderr)
		if code != want {
			t.Fatalf("start %d: exit %d, want %d: %s", i+1, code, want, stderr.String())
		}
		if want == 0 {
			b, err := os.ReadFile(env[config.EnvTerminationLog])
			if err != nil {
				t.Fatal(err)
			}
			rep, err := report.Decode(b)
			if err != nil || rep.Outcome != report.Error || !strings.Contains(rep.Message, "not run again: this is attempt 3") || !strings.Contains(rep.Message, "--redis-url") {
				t.Fatalf("start %d's report: %+v %v", i+1, rep, err)
			}
		}
	}
}
