package wrapper_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// runWrapped runs the test binary as lockwrap (TestMain) behind prefix (unshare, setpriv
// …) with env added to a LOCKEDCRON_*-free environment, and returns its exit code and
// combined output (the command's output included).
func runWrapped(t *testing.T, prefix, env []string, args ...string) (int, string) {
	t.Helper()
	argv := append(append(append([]string{}, prefix...), os.Args[0]), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(cleanEnv(), asLockwrap+"=1"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%q did not finish; output: %s", argv, out.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("%q → %d; output:\n%s", argv, code, out.String())
	return code, out.String()
}

// killAtCleanup SIGKILLs, once the test is over, the processes whose pids the files at
// paths hold (written by a command under test): should lockwrap fail to, none outlives it.
func killAtCleanup(t *testing.T, paths ...string) {
	t.Cleanup(func() {
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
}

// mustRunWrapped is runWrapped of a run that must exit 0; it returns the output.
func mustRunWrapped(t *testing.T, prefix []string, args ...string) string {
	t.Helper()
	code, out := runWrapped(t, prefix, nil, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	return out
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCKEDCRON_") && !strings.HasPrefix(kv, asLockwrap+"=") {
			env = append(env, kv)
		}
	}
	return env
}

func readReport(t *testing.T, path string) report.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Decode(b)
	if err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	return rep
}

// orphanJob leaves an orphan (a shell whose parent subshell exited), prints the orphan's
// parent as seen after the reparenting and lockwrap's pid, lets the orphan exit, then
// waits — up to 10s — for it to disappear from /proc: it exits 3 when it was reaped, 4
// when it stayed (a zombie nobody waits for).
const orphanJob = `
(sh -c 'while [ ! -e "$1/go" ]; do sleep 0.01; done' sh "$1" & echo $! > "$1/orphan")
pid=$(cat "$1/orphan")
ppid=?
while read -r k v; do [ "$k" = PPid: ] && ppid=$v; done < /proc/$pid/status
echo "orphan $pid ppid $ppid lockwrap $PPID"
touch "$1/go"
i=0
while [ -e /proc/$pid ]; do
	i=$((i+1))
	if [ $i -ge 1000 ]; then echo "orphan not reaped: $(cat /proc/$pid/stat)"; exit 4; fi
	sleep 0.01
done
echo "orphan reaped"
exit 3`

var orphanLine = regexp.MustCompile(`orphan (\d+) ppid (\S+) lockwrap (\d+)`)

// TestReapsOrphans: lockwrap as PID 1 of a PID namespace (as in a container), and as an
// ordinary process (child subreaper), inherits the command's orphan and reaps it, and
// still exits with the command's own exit code.
func TestReapsOrphans(t *testing.T) {
	s := redistest.Start(t)
	for _, tc := range []struct {
		name   string
		prefix []string
		pid1   bool
	}{
		{"pid1", []string{"unshare", "--pid", "--fork", "--mount-proc"}, true},
		{"subreaper", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rep := filepath.Join(t.TempDir(), "report.json")
			code, out := runWrapped(t, tc.prefix, nil, append(flags(s.URL(), "orphans-"+tc.name, "a", "--termination-log", rep),
				"--", "sh", "-c", orphanJob, "sh", dir)...)
			m := orphanLine.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no orphan line in the output")
			}
			if m[2] != m[3] {
				t.Errorf("the orphan's parent is %s, not lockwrap (%s)", m[2], m[3])
			}
			if tc.pid1 && m[3] != "1" {
				t.Errorf("lockwrap is pid %s in its namespace, not 1", m[3])
			}
			if !strings.Contains(out, "orphan reaped") {
				t.Errorf("the orphan was not reaped")
			}
			r := readReport(t, rep)
			if code != 3 || r.ExitCode != 3 || r.Outcome != report.Failed {
				t.Errorf("exit %d, report %+v; want the command's 3", code, r)
			}
		})
	}
}

// A process the command moved out of its group and session (setsid), and its child, are
// gone when lockwrap, an ordinary process and so a child subreaper here, has ended: found
// among its descendants by the run's mark (before the release: see
// TestNothingOfTheCommandOutlivesItsLockOutsideItsGroup, which runs the wrapper in the test).
func TestStraysAmongTheDescendantsAreKilled(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	killAtCleanup(t, filepath.Join(dir, "stray"), filepath.Join(dir, "child"))
	stray := `trap "" TERM; sleep 1000 & echo $! > "$1/child"; echo $$ > "$1/stray"; while [ -d "$1" ]; do sleep 0.02; done`
	cmd := `setsid sh -c '` + stray + `' sh "$1" & while [ ! -s "$1/stray" ] || [ ! -s "$1/child" ]; do sleep 0.01; done`
	mustRunWrapped(t, nil, append(flags(s.URL(), "strays", "a"), "--", "sh", "-c", cmd, "sh", dir)...)
	for _, f := range []string{"stray", "child"} {
		if pid := readPid(t, filepath.Join(dir, f)); processLive(pid) {
			t.Errorf("the command's %s (pid %d) outlived lockwrap", f, pid)
		}
	}
}

// TestStraysWithoutTheMarkAreKilled: a process the command moved out of its group that
// does not carry the run's mark (started with an environment of its own, `env -i`, as
// scripts do to sanitise one; or one that wrote over the memory it came in, as nginx and
// PostgreSQL do for their titles) is still among lockwrap's descendants, and every
// descendant of lockwrap is the run's (it starts nothing else). Looked for by the mark, it
// escaped: it ran on past the release (in a pod, until the container ended).
func TestStraysWithoutTheMarkAreKilled(t *testing.T) {
	s := redistest.Start(t)
	for i, env := range []string{"env -i", "env -i PATH=/usr/bin:/bin HOME=/"} {
		t.Run(env, func(t *testing.T) {
			dir := t.TempDir()
			killAtCleanup(t, filepath.Join(dir, "stray"))
			stray := `trap "" TERM; echo $$ > "$1/stray"; while [ -d "$1" ]; do sleep 0.02; done`
			cmd := env + ` /usr/bin/setsid /bin/sh -c '` + stray + `' sh "$1" </dev/null >/dev/null 2>&1 & while [ ! -s "$1/stray" ]; do sleep 0.01; done`
			mustRunWrapped(t, nil, append(flags(s.URL(), "unmarked-"+strconv.Itoa(i), "a"), "--", "sh", "-c", cmd, "sh", dir)...)
			if pid := readPid(t, filepath.Join(dir, "stray")); processLive(pid) {
				t.Errorf("the command's process without the mark (pid %d) outlived lockwrap", pid)
			}
		})
	}
}

// TestChildrenLockwrapHadBeforeAreNotTheRuns: a lockwrap exec'd by a shell that left a
// process in the background (`sh -c 'agent & exec lockwrap -- job'`, an entrypoint's
// pattern) has that process as its child from its start: it is not the run's, nor is what
// it started before the run — also once its parent has ended and lockwrap, their reaper,
// has adopted it. Taking every descendant for the run's killed them (helper-86, helper-87).
func TestChildrenLockwrapHadBeforeAreNotTheRuns(t *testing.T) {
	s := redistest.Start(t)
	for name, c := range map[string]struct{ prefix, cmd string }{
		"its child": {`sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$0"; exec "$@"`, `true`},
		// The agent's child is orphaned during the run (the command says when), and the
		// command waits until lockwrap has adopted it.
		"its child's child, adopted": {
			`( sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; while [ ! -e "$0.go" ]; do sleep 0.01; done ) &
while [ ! -s "$0" ]; do sleep 0.01; done; exec "$@"`,
			`touch "$1.go"; pid=$(cat "$1"); while [ "$(cut -d' ' -f4 /proc/$pid/stat)" != "$PPID" ]; do sleep 0.01; done`},
	} {
		t.Run(name, func(t *testing.T) {
			agent := filepath.Join(t.TempDir(), "agent")
			killAtCleanup(t, agent)
			mustRunWrapped(t, []string{"sh", "-c", c.prefix, agent}, append(flags(s.URL(), "inherited-"+strings.ReplaceAll(name, " ", "-"), "a"), "--", "sh", "-c", c.cmd, "sh", agent)...)
			if pid := readPid(t, agent); !processLive(pid) {
				t.Errorf("a process started before the run by what exec'd lockwrap (pid %d) was killed by the run's end", pid)
			}
		})
	}
}

// TestStrayThatKeepsChangingPidIsKilled: a process of the run that left its group and
// forks and exits, again and again (thousands of hops a second), is at a pid a look did not
// list when the look ends: the look found nothing, and the search ended with it alive
// (helper-87: 2 of 3 runs). Each hop leaves an orphan for lockwrap to collect; the search
// looks again while it collects them. Every hop holds a shared flock the command took
// (flock(1) hands its fd on): once lockwrap is gone, an exclusive one is free only if no
// hop is left.
func TestStrayThatKeepsChangingPidIsKilled(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	// A look misses it now and then (2 test runs of 3 beside two busy loops before the
	// fix): a few runs.
	// The command ends once the hopper has started (and hopped a while): not at a fixed
	// time, which a loaded host could reach before flock had made the file or the hopper.
	cmd := `flock -s "$1/held" setsid "$2" ` + hopperArg + ` "$1" </dev/null >/dev/null 2>&1 &
while [ ! -e "$1/started" ]; do sleep 0.01; done; sleep 0.1`
	for i := range 6 {
		run := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(run, 0o755); err != nil {
			t.Fatal(err)
		}
		out := mustRunWrapped(t, nil, append(flags(s.URL(), "hopper-"+strconv.Itoa(i), "a"), "--", "sh", "-c", cmd, "sh", run, os.Args[0])...)
		if strings.Contains(out, "may outlive") {
			t.Fatalf("run %d: the search gave up: %s", i, out)
		}
		f, err := os.Open(filepath.Join(run, "held"))
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close()
		if err != nil {
			_ = os.RemoveAll(run) // the escaped hopper stops at its next look at its directory
			t.Fatalf("run %d: a process of the run that keeps changing its pid outlived lockwrap (its flock is held: %v)", i, err)
		}
	}
}

// hopperArg makes the test binary a process that forks and exits as fast as it can,
// until DIR is gone or a minute has passed: `<test binary> hopperArg DIR`; it makes
// DIR/started before its first hop. Each child goes
// on where its parent left off, on the one thread a fork keeps, with raw system calls only
// (no allocation, no scheduling: the runtime's other threads are not there).
const hopperArg = "__hopper"

func hopperMain(dir string) {
	path, err := syscall.BytePtrFromString(dir)
	if err != nil {
		os.Exit(2)
	}
	atFDCWD := unix.AT_FDCWD // -100: a variable, for its conversion to uintptr
	if err := os.WriteFile(filepath.Join(dir, "started"), nil, 0o644); err != nil {
		os.Exit(2)
	}
	end := time.Now().Add(time.Minute).Unix()
	var now syscall.Timespec
	debug.SetGCPercent(-1)
	runtime.LockOSThread()
	for i := 0; ; i++ {
		pid, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if e == 0 && pid != 0 {
			syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
		}
		if i%64 == 0 {
			_, _, gone := syscall.RawSyscall6(syscall.SYS_FACCESSAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(path)), unix.F_OK, 0, 0, 0)
			syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, unix.CLOCK_REALTIME, uintptr(unsafe.Pointer(&now)), 0)
			if gone != 0 || now.Sec > end {
				syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
			}
		}
	}
}

// TestNoLookWithAnotherNamespacesProc: lockwrap made PID 1 of a new pid namespace without a
// /proc of its own (`unshare --pid --fork` without --mount-proc) reads the host's /proc,
// where the children of "1" are every process of the host, under pids that are not the
// ones lockwrap signals. It does not look for the run's processes there, and says so in
// its report. (It runs as a uid of its own here: a lockwrap that did look would not be let
// kill the host's processes.)
func TestNoLookWithAnotherNamespacesProc(t *testing.T) {
	s := redistest.Start(t)
	dir, err := os.MkdirTemp("", "hostproc") // not t.TempDir: its parent is root's alone
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "lockwrap")
	if err := exec.Command("cp", os.Args[0], bin).Run(); err != nil {
		t.Fatal(err)
	}
	rep := filepath.Join(dir, "report.json")
	// A uid no process of the host runs as (not nobody's: dnsmasq, NFS helpers).
	argv := []string{"unshare", "--pid", "--fork", "setpriv", "--reuid=3999999", "--regid=3999999", "--clear-groups", bin}
	cmd := exec.Command(argv[0], append(argv[1:], append(flags(s.URL(), "hostproc", "a", "--termination-log", rep), "--", "true")...)...)
	cmd.Env = append(cleanEnv(), asLockwrap+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r := readReport(t, rep)
	if warn := strings.Join(r.Warnings, "\n"); r.Outcome != report.Succeeded || !strings.Contains(warn, "/proc is not of lockwrap's pid namespace") {
		t.Errorf("outcome %s, warnings %q: want a success that says the look was not made; output: %s", r.Outcome, r.Warnings, out)
	}
}

// leaderlessArg makes the test binary a process whose leader thread ends while its other
// threads run on (as a program whose main thread calls pthread_exit does): its own
// /proc/<pid>/environ then reads as "no such process". `<test binary> leaderlessArg DIR`
// writes its pid to DIR/leaderless and lives until DIR is gone.
const leaderlessArg = "__leaderless"

func init() {
	if len(os.Args) == 3 && os.Args[1] == leaderlessArg {
		// main then runs on the leader thread (LockOSThread in an init), which it ends.
		runtime.LockOSThread()
	}
}

func leaderlessMain(dir string) {
	// No collection: one would wait for ever for the goroutine of the ended thread. And a
	// second P, as that goroutine holds the first for good.
	debug.SetGCPercent(-1)
	runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	go func() {
		for {
			if _, err := os.Stat(dir); err != nil {
				os.Exit(0)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "leaderless.tmp"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.Exit(1)
	}
	if err := os.Rename(filepath.Join(dir, "leaderless.tmp"), filepath.Join(dir, "leaderless")); err != nil {
		os.Exit(1)
	}
	if syscall.Gettid() != os.Getpid() {
		os.Exit(2) // not on the leader thread: the command waits for a Z in vain, and says so
	}
	syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0) // this thread only (os.Exit ends them all)
}

// TestStrayWhoseLeaderThreadEndedIsKilled: a process of the command that left its group
// (setsid) and whose leader thread ended, its other threads running on, is one of the
// run's strays. Its /proc/<pid>/environ reads as "no such process"; its threads' do not.
func TestStrayWhoseLeaderThreadEndedIsKilled(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	killAtCleanup(t, filepath.Join(dir, "leaderless"))
	// The command waits until the stray's leader thread has ended (its stat reads Z).
	// Each wait gives up after 10 s, exiting 3: the test fails rather than hangs.
	cmd := `setsid "$2" ` + leaderlessArg + ` "$1" >/dev/null 2>&1 & ` +
		`n=0; until [ -s "$1/leaderless" ]; do n=$((n+1)); [ $n -lt 1000 ] || exit 3; sleep 0.01; done; ` +
		`pid=$(cat "$1/leaderless"); n=0; ` +
		`until grep -q '^State:.*Z' /proc/$pid/status; do n=$((n+1)); [ $n -lt 1000 ] || exit 3; sleep 0.01; done`
	mustRunWrapped(t, nil, append(flags(s.URL(), "leaderless", "a"), "--", "sh", "-c", cmd, "sh", dir, os.Args[0])...)
	if pid := readPid(t, filepath.Join(dir, "leaderless")); processLive(pid) {
		t.Errorf("the command's process whose leader thread ended (pid %d) outlived lockwrap", pid)
	}
}

// TestSignalledCommandUnderReaper: with the reaper on, a command killed by a signal
// still yields 128+signal.
func TestSignalledCommandUnderReaper(t *testing.T) {
	s := redistest.Start(t)
	rep := filepath.Join(t.TempDir(), "report.json")
	code, _ := runWrapped(t, []string{"unshare", "--pid", "--fork", "--mount-proc"}, nil,
		append(flags(s.URL(), "reaper-signal", "a", "--termination-log", rep), "--", "sh", "-c", `kill -USR1 $$`)...)
	if want := 128 + int(syscall.SIGUSR1); code != want || readReport(t, rep).ExitCode != want {
		t.Fatalf("exit %d, want %d", code, want)
	}
}

// containerCaps is a container runtime's default capability set (Docker's, containerd's):
// no CAP_SYS_PTRACE — nor CAP_SYS_ADMIN or CAP_PERFMON, which also let a process read a
// non-dumpable process's /proc/<pid>/environ on current kernels.
const containerCaps = "-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap," +
	"+net_bind_service,+net_raw,+sys_chroot,+mknod,+audit_write,+setfcap"

// TestCommandCannotReadCredentials: lockwrap holds the Redis password in its environment;
// its command — same uid, with a container's capabilities — finds it neither in its own
// environment nor in /proc/<lockwrap>/environ.
func TestCommandCannotReadCredentials(t *testing.T) {
	const password = "s3cret-redis-pw"
	s := redistest.Start(t)
	s.Do("ACL", "SETUSER", "lockwrap", "on", ">"+password, "~*", "+@all")
	rep := filepath.Join(t.TempDir(), "report.json")
	job := `
echo "own environ entries: $(tr '\0' '\n' < /proc/$$/environ | grep -c '^LOCKEDCRON_HOLDER=')"
if e=$(tr '\0' '\n' < /proc/$PPID/environ 2>&1); then
	echo "lockwrap environ readable:"; echo "$e"
else
	echo "lockwrap environ unreadable: $e"
fi
echo "env:"; env
grep '^CapEff:' /proc/self/status`
	code, out := runWrapped(t, []string{"setpriv", "--bounding-set=" + containerCaps, "--inh-caps=-all"},
		[]string{config.EnvRedisURL + "=" + s.URL(), config.EnvRedisUsername + "=lockwrap", config.EnvRedisPassword + "=" + password},
		"--key", "secrets", "--holder", "a", "--occurrence", occurrence, "--termination-log", rep,
		"--", "sh", "-c", job)
	if code != 0 || readReport(t, rep).Outcome != report.Succeeded {
		t.Fatalf("exit %d; want the command to run and succeed", code)
	}
	// Preconditions, so that the checks below are not vacuous: reading an environ works,
	// and the command has none of the capabilities that bypass non-dumpable.
	if !strings.Contains(out, "own environ entries: 1") {
		t.Fatalf("the command could not read its own environ")
	}
	if m := regexp.MustCompile(`CapEff:\s*([0-9a-f]+)`).FindStringSubmatch(out); m == nil {
		t.Fatal("no CapEff")
	} else if caps, _ := strconv.ParseUint(m[1], 16, 64); caps&(1<<19|1<<21|1<<38) != 0 {
		t.Fatalf("the command has CAP_SYS_PTRACE, CAP_SYS_ADMIN or CAP_PERFMON (CapEff %s)", m[1])
	}
	if !strings.Contains(out, "lockwrap environ unreadable:") || !strings.Contains(out, "Permission denied") {
		t.Errorf("the command read /proc/<lockwrap>/environ")
	}
	if strings.Contains(out, password) {
		t.Errorf("the command saw the password")
	}
	envPart := out[strings.Index(out, "env:"):]
	if strings.Contains(envPart, "LOCKEDCRON_REDIS_") {
		t.Errorf("LOCKEDCRON_REDIS_* in the command's environment")
	}
}

// TestDefaultTerminationLogNeverCreated runs lockwrap without --termination-log in a
// mount namespace whose /dev is an empty tmpfs (outside Kubernetes, writable as root):
// -h, bad input and a real run create nothing there; a /dev/termination-log that exists
// (the kubelet's) gets the report.
func TestDefaultTerminationLogNeverCreated(t *testing.T) {
	s := redistest.Start(t)
	// $0 is the lockwrap to run; ls prints what is left in /dev.
	script := `mount -t tmpfs tmpfs /dev || exit 99
[ -n "$TOUCH" ] && : > /dev/termination-log
"$0" "$@"; echo "exit=$?"
echo "dev=[$(ls -A /dev | tr '\n' ' ')]"
[ -e /dev/termination-log ] && echo "log=$(cat /dev/termination-log)"
exit 0`
	ns := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script}
	run := flags(s.URL(), "devlog", "a")
	for _, tc := range []struct {
		name  string
		touch bool
		args  []string
		exit  int
	}{
		{"help", false, []string{"-h"}, 70},
		{"bad input", false, []string{"--key", "k", "--", "true"}, 70},
		{"run", false, append(append([]string{}, run...), "--", "true"), 0},
		{"kubelet made it", true, append(flags(s.URL(), "devlog", "a", "--occurrence", occAt(time.Hour)), "--", "true"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.touch {
				env = []string{"TOUCH=1"}
			}
			code, out := runWrapped(t, ns, env, tc.args...)
			if code == 99 {
				t.Fatal("could not mount a tmpfs on /dev")
			}
			if !strings.Contains(out, "exit="+strconv.Itoa(tc.exit)+"\n") {
				t.Errorf("want lockwrap to exit %d", tc.exit)
			}
			if tc.touch {
				if !strings.Contains(out, "dev=[termination-log ]") || !strings.Contains(out, `log={`) ||
					!strings.Contains(out, `"outcome":"`+string(report.Succeeded)+`"`) {
					t.Errorf("the existing /dev/termination-log did not get the report")
				}
			} else if !strings.Contains(out, "dev=[]") {
				t.Errorf("lockwrap created files in /dev")
			}
		})
	}
}

// TestEachCaughtSignalForwarded: each signal lockwrap catches (besides SIGTERM and SIGINT,
// see TestSignalsForwarded; SIGWINCH is ignored by default) reaches a command that does
// not handle it: lockwrap survives it, reports and exits 128+signal.
func TestEachCaughtSignalForwarded(t *testing.T) {
	s := redistest.Start(t)
	for i, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM} {
		t.Run(sig.String(), func(t *testing.T) {
			g := newGate(t)
			occ := occAt(2*time.Hour + time.Duration(i)*time.Minute)
			p := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "caught", "a", "--occurrence", occ), g.cmd(0)...)...)
			g.waitStarted(t)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if rep, code := p.wait(t); code != 128+int(sig) || rep.ExitCode != 128+int(sig) {
				t.Fatalf("exit %d %+v, want %d", code, rep, 128+int(sig))
			}
		})
	}
}

// TestWindowChangeForwarded: SIGWINCH, which the command ignores unless it handles it
// (Apache httpd's graceful stop), reaches a command that handles it. lockwrap caught it
// and dropped it; before the command starts it still aborts nothing.
func TestWindowChangeForwarded(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	started, got := filepath.Join(dir, "started"), filepath.Join(dir, "winch")
	p := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "winch", "a"),
		"sh", "-c", `trap 'touch "$2"; exit 0' WINCH; touch "$1"; while :; do sleep 0.02; done`, "sh", started, got)...)
	eventually(t, "the command running", func() bool { _, err := os.Stat(started); return err == nil })
	if err := p.cmd.Process.Signal(syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	rep, code := p.wait(t)
	if _, err := os.Stat(got); err != nil || code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("SIGWINCH not handled by the command (%v): exit %d %+v", err, code, rep)
	}
}

// TestSignalsThatWouldCrashItAreIgnored: the signals the Go runtime ends a program with a
// stack dump for, sent to lockwrap (its command may send them to PID 1, which it is in a
// pod), neither end it nor reach its command: the command runs on, and lockwrap reports
// its run, releases the lock and closes the ledger entry. Without catching them, lockwrap
// died (exit 2) with its lock held, its entry "running", and whatever the command had
// written in the termination log left as the report.
func TestSignalsThatWouldCrashItAreIgnored(t *testing.T) {
	s := redistest.Start(t)
	g := newGate(t)
	p := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "crash-signals", "a"), g.cmd(0)...)...)
	g.waitStarted(t)
	sent := []syscall.Signal{syscall.SIGABRT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV, syscall.Signal(16)}
	for _, sig := range sent {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "lockwrap to tell each signal it ignored", func() bool {
		return strings.Count(p.stderr.String(), "lockwrap: ignored signal") == len(sent)
	})
	g.release(t)
	rep, code := p.wait(t)
	if code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("exit %d %+v, want 0 and Succeeded", code, rep)
	}
	if n := admin(t, s).Exists(context.Background(), lock.LockKey("crash-signals")).Val(); n != 0 {
		t.Fatalf("the lock is still held after the run")
	}
}

// TestClosedStderrDoesNotEndTheRun: lockwrap's stderr is a pipe whose reader has gone (a
// crontab's `lockwrap … 2>&1 | logger` whose logger died, a journald restart). The first
// line lockwrap wrote there (here the durability warning right after the acquire: the
// test Redis persists nothing) killed it with SIGPIPE, which it neither caught nor
// ignored (the Go runtime ends a program whose write to fd 1 or 2 breaks a pipe): the
// lock held until its ttl, the ledger entry "running", no report. A line that cannot be
// written is now lost and nothing else: the run completes, records its success, releases
// the lock and writes its report; and the command gets SIGPIPE's default (an ignored
// signal would be passed on to it across exec).
func TestClosedStderrDoesNotEndTheRun(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	path, ran := filepath.Join(dir, "report.json"), filepath.Join(dir, "ran")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone
	cmd := exec.Command(os.Args[0], cmdArgs(flags(s.URL(), "sigpipe", "a", "--termination-log", path),
		"sh", "-c", `grep SigIgn /proc/self/status > "$1"`, "sh", ran)...)
	cmd.Env = append(cleanEnv(), asLockwrap+"=1", "TMPDIR="+dir)
	cmd.Stderr = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	w.Close()
	ctx := context.Background()
	state := admin(t, s).HGet(ctx, lock.RunKey("sigpipe", mustTime(occurrence)), "state").Val()
	held := admin(t, s).Exists(ctx, lock.LockKey("sigpipe")).Val()
	status, ranErr := os.ReadFile(ran)
	if err != nil || state != lock.StateSucceeded || held != 0 || ranErr != nil {
		t.Fatalf("lockwrap with a closed stderr: %v; command ran: %t, ledger state %q, lock held: %t",
			err, ranErr == nil, state, held != 0)
	}
	ignored, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(status), "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatalf("the command's %q: %v", status, err)
	}
	if ignored&(1<<(syscall.SIGPIPE-1)) != 0 {
		t.Errorf("the command runs with SIGPIPE ignored (SigIgn %x)", ignored)
	}
	if rep := readReport(t, path); rep.Outcome != report.Succeeded {
		t.Fatalf("report %+v, want Succeeded", rep)
	}
}

// TestReportPathMadeAFIFOIsRefused: outside a pod the report goes to a file the command
// can reach (--termination-log /var/log/job.json). A command that left a FIFO there hung
// lockwrap at its very last step: open(O_WRONLY) waited for a reader for ever. lockwrap
// now writes only to a file or a device, and says on stderr why it did not.
func TestReportPathMadeAFIFOIsRefused(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	p := startLockwrap(t, nil, cmdArgs(flags(s.URL(), "fifo", "a", "--termination-log", path),
		"sh", "-c", `rm -f "$1" && mkfifo "$1"`, "sh", path)...)
	var code int
	select {
	case code = <-p.done:
	case <-time.After(5 * time.Second):
		// A reader lets the hung open go on; the test fails at once either way.
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer f.Close()
		}
		t.Fatalf("lockwrap hung writing its report to a FIFO the command left at --termination-log; stderr: %s", p.stderr)
	}
	if code != 0 || !strings.Contains(p.stderr.String(), "lockwrap: report: "+path+" is a FIFO or pipe that no one reads") {
		t.Errorf("exit %d, want 0 and the report refused on stderr; stderr: %s", code, p.stderr)
	}
	if st := admin(t, s).HGet(context.Background(), lock.RunKey("fifo", mustTime(occurrence)), "state").Val(); st != lock.StateSucceeded {
		t.Errorf("ledger state %q, want %q", st, lock.StateSucceeded)
	}
}

// TestReportWithinItsShare: lockwrap writes its report within --report-max-bytes (the
// controller gives the kubelet's share of the pod's 12 KiB when it is under 2048 bytes):
// a longer one was cut by the kubelet, no longer JSON, and the run counted Error.
func TestReportWithinItsShare(t *testing.T) {
	s := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "report.json")
	code, _ := runWrapped(t, nil, []string{config.EnvReportMaxBytes + "=600"}, append([]string{"--termination-log", path},
		cmdArgs(flags(s.URL(), strings.Repeat("k", 500), strings.Repeat("h", 300)), "sh", "-c", "exit 3")...)...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, path)
	if len(b) > 600 || code != 3 || rep.Outcome != report.Failed || rep.ExitCode != 3 {
		t.Errorf("report of %d bytes (exit %d, %s %d), want at most 600 and the run's failure", len(b), code, rep.Outcome, rep.ExitCode)
	}
}
