//go:build linux

package wrapper

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

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
	killMarkedFn = func(string, bool) error {
		return errors.New("processes of the command still alive after 200 rounds of SIGKILL")
	}
	t.Cleanup(func() { killMarkedFn = killMarked })
	s := redistest.Start(t)
	cfg, cmd, err := config.Parse([]string{"--redis-url", s.URL(), "--key", "strays-left", "--holder", "a",
		"--occurrence", "2026-11-30T06:00:00Z", "--termination-log", t.TempDir() + "/report", "--", "true"}, nil)
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

	err := killMarked(mark, true)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) || !strings.Contains(err.Error(), "not permitted") {
		t.Errorf("killMarked = %v, want it to name pid %d, not permitted", err, cmd.Process.Pid)
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
}
