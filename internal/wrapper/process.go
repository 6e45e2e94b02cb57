package wrapper

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// Runner starts the command.
type Runner interface {
	Start(cmd []string, env []string) (Process, error)
}

// Process is a started command.
type Process interface {
	// Signal sends sig to the command's whole process group.
	Signal(sig syscall.Signal) error
	// Wait waits for the command and returns its exit code, 128+signal when signalled.
	Wait() int
}

// ProcessRunner starts real processes, each in its own process group, with lockwrap's
// stdin, stdout and stderr. Once Main has made the process a reaper (PID 1 or child
// subreaper), a process's exit status comes from the reaper, which also reaps orphans.
type ProcessRunner struct{}

var (
	_ Runner  = ProcessRunner{}
	_ Process = (*process)(nil)
)

// Start implements Runner.
func (ProcessRunner) Start(cmd []string, env []string) (Process, error) {
	if len(cmd) == 0 {
		return nil, errors.New("no command")
	}
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithUs(c.SysProcAttr)
	tty := foregroundTerminal(c.SysProcAttr)
	var exit <-chan syscall.WaitStatus
	var err error
	if r := currentReaper(); r != nil {
		exit, err = r.start(c)
	} else {
		err = c.Start()
	}
	if tty {
		// The child took the terminal before its exec: give it back if that failed; if
		// not, lockwrap's own lines, written from the terminal's background while the
		// command runs, must never stop it (stty tostop), nor its renewals with it.
		if err != nil {
			takeTerminal()
		} else {
			ignoreTerminalStops()
		}
	}
	if err != nil {
		return nil, err
	}
	p := &process{c: c, pgid: c.Process.Pid, exit: exit, ended: make(chan int, 1), mark: runMark(env)}
	if p.mark != "" {
		p.esc = newEscapees(p.mark, p.pgid)
	}
	return p, nil
}

type process struct {
	c     *exec.Cmd
	pgid  int                       // the child leads its group (Setpgid): its pid, kept (Release sets c.Process.Pid to -1)
	exit  <-chan syscall.WaitStatus // from the reaper; nil: c.Wait
	ended chan int                  // the leader's exit code, once reaped (LeaderExited)
	mark  string                    // the name of its EnvRunMark variable ("" if none)
	esc   *escapees                 // its processes outside the group, at stop points (nil: no mark)
	left  string                    // why killStrays gave up ("": it did not)
}

// LeaderExited delivers, once Wait has reaped the group's leader, its exit code: before
// Wait has killed the rest of the group and looked for strays, which can take seconds
// (strayDeadline). A stop point that falls due meanwhile is after the command's end.
func (p *process) LeaderExited() <-chan int { return p.ended }

// StraysLeft says why, once Wait has returned, processes of the run may be left (the
// search for them gave up), or "".
func (p *process) StraysLeft() string { return p.left }

// StopEscaped sends a stop point's signal (SIGTERM, SIGKILL) to the run's processes that
// left the group, without waiting for its leader (escapees).
func (p *process) StopEscaped(sig syscall.Signal) { p.esc.signal(sig) }

func (p *process) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		// The group is gone; the leader may still be a zombie.
		return p.c.Process.Signal(sig)
	}
	return err
}

// Wait waits for the group's leader; what is left of its group then is killed (SIGKILL):
// the command is its process group, as a container is its processes. A pod's lockwrap is
// PID 1, and its end kills the rest of the container, but only after the lock is released;
// outside a pod nothing did: a member that ignored the SIGTERM of a lost lock's stop, or
// one left in the background, ran on past the kill point and the release, alongside the
// next holder's run. So does every process of the run that left the group (setsid:
// killStrays says which).
func (p *process) Wait() int {
	code := p.wait()
	p.ended <- code
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL) // ESRCH: nothing left
	if p.mark != "" {
		p.left = killStrays(p.mark)
	}
	p.esc.close()
	return code
}

// runMark is the name of the last EnvRunMark variable in env (the run's own: a runner's
// comes before it), or "".
func runMark(env []string) string {
	mark := ""
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, config.EnvRunMark+"_") {
			mark = name
		}
	}
	return mark
}

func (p *process) wait() int {
	if p.exit != nil {
		ws := <-p.exit
		_ = p.c.Process.Release() // reaped already; drops the pidfd
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
	err := p.c.Wait()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return ExitInternal
}

// newRunMark is the random part of a run's EnvRunMark variable: 128 bits.
func newRunMark() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
