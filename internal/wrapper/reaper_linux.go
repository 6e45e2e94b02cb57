package wrapper

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// makeNonDumpable clears the process's dumpable flag: from then on a process without
// CAP_SYS_PTRACE cannot read /proc/<lockwrap>/environ or /mem (the Redis credentials),
// even with lockwrap's uid, and lockwrap dumps no core. The command lockwrap starts gets
// the flag back at exec.
func makeNonDumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// The reaper, once started, reaps every child of this process: lockwrap's command and the
// orphans reparented to lockwrap because it is PID 1 (as in a container) or a child
// subreaper. A command started while it runs is waited for through the reaper (its exit
// status is handed over), never with a wait of its own, which would race the reaper's.
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus // pid of a command → where its status goes
	// inherited are the children the process had when it became a reaper, before it
	// started any command (`sh -c 'agent & exec lockwrap …'`): pid → starttime. They, and
	// what is below them, are not a run's.
	inherited map[int]string
}

var (
	reaperOnce    sync.Once
	activeReaper  *reaper
	errReaperInit error
)

// startReaping makes this process reap orphans: as PID 1 it already inherits them,
// otherwise it becomes a child subreaper (PR_SET_CHILD_SUBREAPER). It is for lockwrap's
// own process only: it reaps every child, whoever started it. On error nothing changed.
func startReaping() error {
	reaperOnce.Do(func() {
		if os.Getpid() != 1 {
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				errReaperInit = err
				return
			}
		}
		r := &reaper{waiting: map[int]chan syscall.WaitStatus{}, inherited: childrenOf(os.Getpid())}
		sigchld := make(chan os.Signal, 1)
		signal.Notify(sigchld, syscall.SIGCHLD)
		go func() {
			for range sigchld {
				r.reap()
			}
		}()
		r.reap() // children that exited before SIGCHLD was caught
		reaperMu.Lock()
		activeReaper = r
		reaperMu.Unlock()
	})
	return errReaperInit
}

var reaperMu sync.Mutex

// inheritedChildren are the current reaper's inherited children (none without one).
func inheritedChildren() map[int]string {
	if r := currentReaper(); r != nil {
		return r.inherited
	}
	return nil
}

func currentReaper() *reaper {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	return activeReaper
}

// reap collects every exited child: a command's status goes to its waiter, an orphan's
// is discarded. SIGCHLDs coalesce, hence the loop until no zombie is left.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children; 0: none exited
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			delete(r.waiting, pid)
			ch <- ws // buffered, never blocks
		}
	}
}

// start starts c and registers it before the reaper can see it exit: the lock is held
// from fork to registration (a failed exec's child is waited for inside c.Start, also
// under the lock).
func (r *reaper) start(c *exec.Cmd) (<-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := c.Start(); err != nil {
		return nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiting[c.Process.Pid] = ch
	return ch, nil
}

// dieWithUs has the kernel SIGKILL the command's leader when lockwrap dies (SIGKILLed, the
// OOM killer): otherwise, outside a pod (where lockwrap, PID 1, takes its namespace's
// processes with it), the command ran on with nobody renewing the lock, past its expiry and
// alongside the next holder's run. The signal is tied to the thread that started the
// child; Go ends a thread only when a goroutine locked to it returns, and lockwrap locks
// none. The leader's own children are not covered (docs/lockwrap.md).
func dieWithUs(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// osCrashSignals: crashSignals of this system's only.
var osCrashSignals = []os.Signal{syscall.SIGSTKFLT}
