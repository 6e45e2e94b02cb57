package wrapper

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
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
	// leaderStart is the starttime (/proc/<pid>/stat) of the command's leader, read before
	// the reaper could collect it (0: none started). A child of lockwrap that started
	// before it is not the run's: one lockwrap had from its start (`sh -c 'agent & exec
	// lockwrap …'`), or one of theirs orphaned since.
	leaderStart atomic.Uint64
	// orphans counts the processes collected that were not a command's leader: a look for
	// the run's processes during which it moved may have missed one (a process that forks
	// and exits, again and again, is at a pid the look did not list).
	orphans atomic.Uint64
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
		r := &reaper{waiting: map[int]chan syscall.WaitStatus{}}
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

// runStart is the starttime of the command's leader (0 without a reaper, or before).
func runStart() uint64 {
	if r := currentReaper(); r != nil {
		return r.leaderStart.Load()
	}
	return 0
}

// orphansReaped is how many processes the reaper has collected that were not a command's
// leader (0 without a reaper), the exited ones among them collected now: a process that
// moves (forks, then exits) leaves a zombie at once, whose SIGCHLD the reaper's goroutine
// may not have taken yet (on a loaded host the count did not move, and a look that had
// missed the process it moved to was taken for the last).
func orphansReaped() uint64 {
	if r := currentReaper(); r != nil {
		r.reap()
		return r.orphans.Load()
	}
	return 0
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
		} else {
			r.orphans.Add(1)
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
	// Not collected yet (reap waits for the lock): its stat reads even if it has exited.
	if st, ok := statStart(statFields("/proc/" + strconv.Itoa(c.Process.Pid))); ok {
		r.leaderStart.Store(st)
	}
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
