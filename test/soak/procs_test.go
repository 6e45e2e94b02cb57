//go:build linux

package soak

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	wrapcfg "github.com/lockedcron/lockedcron/internal/wrapper/config"
	"github.com/lockedcron/lockedcron/test/soak/checker"
)

// sleeper starts a process that waits, with env added to this one's (without lockwrap's
// variables).
func sleeper(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCKEDCRON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append(env, "SOAK_TEST_EXECED=1")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Start can return before /proc/<pid>/environ shows the new environment: read at once,
	// it was empty in 347 of 1,500 starts under load (never another process's). The exec is
	// past its point of no return then, and the kernel sets the new environment's place a
	// moment later. Wait for the marker.
	execed := func(context.Context) (bool, error) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "environ"))
		return err == nil && strings.Contains(string(b), "\x00SOAK_TEST_EXECED=1\x00"), nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, execed); err != nil {
		t.Fatalf("pid %d never showed its environment: %v", cmd.Process.Pid, err)
	}
	return cmd
}

// job-kill-9 names the run it hits from the environment lockwrap gave the job, as the job's
// audit records name it, and hits no process that has exited (a zombie its lockwrap has not
// reaped yet: the kill would change nothing, and the checker would take the run for one
// that died of it) or that names no run.
func TestRunOfProcess(t *testing.T) {
	const holder, occ = "local/soak-a/soak-1796338744/f4d64f65", "2026-12-03T22:59:04Z"
	cmd := sleeper(t, wrapcfg.EnvHolder+"="+holder, wrapcfg.EnvOccurrence+"="+occ)
	pid := cmd.Process.Pid
	run, err := runOfProcess(pid, "soak/main")
	want := checker.Kill{Key: "soak/main", Holder: holder, Occurrence: time.Date(2026, 12, 3, 22, 59, 4, 0, time.UTC)}
	if err != nil || run.Key != want.Key || run.Holder != want.Holder || !run.Occurrence.Equal(want.Occurrence) {
		t.Fatalf("runOfProcess = %+v, %v; want %+v", run, err, want)
	}

	// Exited and not reaped: a zombie.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	zombie := func(context.Context) (bool, error) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		return err == nil && strings.Contains(string(b), ") Z "), nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, zombie); err != nil {
		t.Fatalf("pid %d never became a zombie: %v", pid, err)
	}
	if run, err := runOfProcess(pid, "soak/main"); err == nil {
		t.Errorf("a zombie was named as run %+v", run)
	}
	_ = cmd.Wait()
	if run, err := runOfProcess(pid, "soak/main"); err == nil {
		t.Errorf("a reaped process was named as run %+v", run)
	}

	// A process lockwrap did not start names no run.
	other := sleeper(t)
	if run, err := runOfProcess(other.Process.Pid, "soak/main"); err == nil || !strings.Contains(err.Error(), wrapcfg.EnvHolder) {
		t.Errorf("a process without a run: %+v, %v; want an error naming %s", run, err, wrapcfg.EnvHolder)
	}
}
