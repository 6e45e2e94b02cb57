package wrapper_test

import (
	"bytes"
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

	"golang.org/x/sys/unix"

	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
)

// openPTY opens a pseudo-terminal: its controlling side and the terminal a process gets.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptm, pts
}

// onTerminal runs argv as the session leader of a new pseudo-terminal, its stdin, stdout
// and stderr (as a container with tty: true runs its PID 1); it returns what the terminal
// shows so far, the terminal's controlling side, and the end of the process.
func onTerminal(t *testing.T, env []string, argv ...string) (shown func() string, ptm *os.File, done <-chan error) {
	t.Helper()
	ptm, pts := openPTY(t)
	var mu sync.Mutex
	var screen bytes.Buffer
	read := make(chan struct{}) // closed once the terminal said all it will
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Only the processes hold the terminal now: once the last has closed it, the reader
	// gets EIO, having read everything they wrote (done said so before the reader had read
	// the last line: a loaded machine failed the checks of the screen).
	_ = pts.Close()
	ch := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		select {
		case <-read:
		case <-time.After(5 * time.Second): // a process left holding the terminal
		}
		ch <- err
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }, ptm, ch
}

// TestJobOnATerminal: with tty: true the container runtime makes lockwrap (PID 1) the
// session leader owning the terminal, its stdin. The job ran in a group of its own in the
// terminal's background: its first terminal-mode call (stty, a pager, a password prompt)
// stopped it with SIGTTOU, and lockwrap renewed the lock for ever, every later occurrence
// of the key skipped. The job's group is the terminal's foreground while it runs.
func TestJobOnATerminal(t *testing.T) {
	s := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "report.json")
	shown, ptm, done := onTerminal(t, []string{asLockwrap + "=1", "TMPDIR=" + filepath.Dir(path)},
		append([]string{os.Args[0], "--termination-log", path}, cmdArgs(flags(s.URL(), "tty", "a"),
			"sh", "-c", `stty -echo && stty echo && printf 'answer? ' && read -r a && echo "got $a"`)...)...)

	eventually(t, "the job's question on the terminal", func() bool { return strings.Contains(shown(), "answer? ") })
	if _, err := ptm.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("lockwrap did not finish: the job stopped on the terminal? screen: %q", shown())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	rep := readReport(t, path)
	if rep.Outcome != report.Succeeded || !strings.Contains(shown(), "got yes") {
		t.Errorf("outcome %s (%v), screen %q, want Succeeded and the job's answer", rep.Outcome, err, shown())
	}
}

// TestTerminalBackAfterTheJob: lockwrap run as a shell's foreground job (lockwrap by
// hand, job control on, the terminal stopping background writers: stty tostop). Once its
// job ended, lockwrap's own warning on the terminal, written from the background (the
// job's group held the terminal), stopped it.
func TestTerminalBackAfterTheJob(t *testing.T) {
	s := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "report.json")
	script := `set -m; stty tostop; "$@"; echo "lockwrap exit $?"`
	// A watermark over the limit: a warning written after the job.
	job := `head -c 70000 /dev/zero | tr '\0' x > "$LOCKEDCRON_WATERMARK_FILE"`
	shown, _, done := onTerminal(t, []string{"TMPDIR=" + filepath.Dir(path)},
		append([]string{"bash", "-c", script, "bash", "env", asLockwrap + "=1", os.Args[0], "--termination-log", path},
			cmdArgs(flags(s.URL(), "tty-back", "a"), "sh", "-c", job)...)...)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the shell did not finish; screen: %q", shown())
	}
	if !strings.Contains(shown(), "lockwrap exit 0") || !strings.Contains(shown(), "watermark not stored") {
		t.Errorf("screen %q, want lockwrap's warning and its exit 0", shown())
	}
}

// TestLockwrapWarnsFromTheBackground: while its job holds the terminal, lockwrap is in the
// terminal's background. With job control and stty tostop (lockwrap run by hand), its own
// line "renewal failed, retrying" stopped it: nobody renewed the lock or stopped the job,
// which ran on past the lock's expiry. lockwrap's writes never stop it.
func TestLockwrapWarnsFromTheBackground(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	started, late := filepath.Join(dir, "started"), filepath.Join(dir, "ran-past-the-lock")
	script := `set -m; stty tostop; "$@"; echo "lockwrap exit $?"`
	job := `touch "$1"; sleep 10; touch "$2"`
	shown, _, done := onTerminal(t, []string{"TMPDIR=" + dir},
		append([]string{"bash", "-c", script, "bash", "env", asLockwrap + "=1", os.Args[0], "--termination-log", filepath.Join(dir, "report.json")},
			cmdArgs(flags(s.URL(), "tty-warn", "a", "--ttl", "4s", "--renew-interval", "1s", "--kill-grace", "1s"), "sh", "-c", job, "sh", started, late)...)...)
	eventually(t, "the job running", func() bool { _, err := os.Stat(started); return err == nil })
	s.Stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the shell did not finish; screen: %q", shown())
	}
	if _, err := os.Stat(late); err == nil || !strings.Contains(shown(), "terminating the command") || strings.Contains(shown(), "Stopped") {
		t.Errorf("lockwrap did not stop its job when the lock was lost (ran past it: %v); screen %q", err == nil, shown())
	}
}

// TestCommandNotStartedGivesTheTerminalBack: the command's group took the terminal in the
// child, before the exec that failed: lockwrap, in the background of a terminal held by
// no one, stopped at its own error line, the report unwritten.
func TestCommandNotStartedGivesTheTerminalBack(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	script := `set -m; stty tostop; "$@"; echo "lockwrap exit $?"`
	shown, _, done := onTerminal(t, []string{"TMPDIR=" + dir},
		append([]string{"bash", "-c", script, "bash", "env", asLockwrap + "=1", os.Args[0], "--termination-log", path},
			cmdArgs(flags(s.URL(), "tty-exec", "a"), filepath.Join(dir, "no-such-command"))...)...)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the shell did not finish; screen: %q", shown())
	}
	if strings.Contains(shown(), "Stopped") || !strings.Contains(shown(), "lockwrap exit") {
		t.Fatalf("screen %q, want lockwrap's exit", shown())
	}
	if rep := readReport(t, path); rep.Outcome != report.Error {
		t.Errorf("report %+v, want Error", rep)
	}
}
