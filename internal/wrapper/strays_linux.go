package wrapper

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// strayRounds bounds killStrays's looks: a look finds the run's processes and kills them,
// the next those they forked meanwhile (a killed one is a zombie, which has no children and
// is not counted). strayDeadline bounds it in time: a look reads every process's
// /proc/<pid>/stat (a host of thousands takes a while), and, by the mark (no subreaper),
// each one's environment, which waits for its memory map, which one stuck in the kernel
// (a hung NFS or FUSE mount) can hold for ever.
const (
	strayRounds   = 200
	strayPause    = 5 * time.Millisecond
	strayDeadline = 5 * time.Second
)

// killStrays kills (SIGKILL) the processes of the run named mark (an EnvRunMark variable's
// name) that are left once its command's leader has ended and its group was killed: those
// that moved to a group or session of their own (setsid, a daemon's double fork), and all
// they started. lockwrap is PID 1 or a child subreaper, so all of them are its descendants,
// and every live descendant is the run's (lockwrap starts nothing else), whatever its
// environment or its owner, but its children older than the run and what is below them
// (descendants). Without the reaper (it could not become a subreaper) every process
// carrying the mark in its environment is killed, wherever it is. It looks again until
// none is left and no orphan was collected during the look (killRun), for at most
// strayRounds looks and strayDeadline, and when it gives up says so on stderr and returns
// why (the report warns: a process of the run may outlive the lock's release).
func killStrays(mark string) string {
	if !procIsOurs() {
		return "/proc is not of lockwrap's pid namespace (a new one without its own /proc: unshare --mount-proc, bwrap --proc): processes that left the command's group were not looked for"
	}
	reaping := currentReaper() != nil
	done := make(chan error, 1)
	go func() { done <- killRunFn(mark, reaping) }()
	var left string
	select {
	case err := <-done:
		if err != nil {
			left = err.Error()
		}
	case <-time.After(strayDeadline):
		why := "a host of very many processes?"
		if !reaping {
			why = "one whose memory cannot be read?"
		}
		left = fmt.Sprintf("still looking for the command's processes after %s (%s)", strayDeadline, why)
	}
	return left
}

// killRunFn is killRun; a test makes it give up.
var killRunFn = killRun

// killFn is syscall.Kill; a test makes it refuse (EPERM), which root's never does.
var killFn = syscall.Kill

// lookRunFn is lookRun; a test makes it slow.
var lookRunFn = lookRun

// orphansReapedFn is orphansReaped; a test moves it.
var orphansReapedFn = orphansReaped

func killRun(mark string, reaping bool) error {
	quiet, err := lookUntilQuiet(orphansReapedFn, func() (int, error) {
		found := 0
		var refused []string // the run's, not ours to signal (running as another user)
		err := lookRunFn(mark, reaping, func(pid int) {
			switch err := killFn(pid, syscall.SIGKILL); {
			case err == nil:
				found++
			case errors.Is(err, syscall.EPERM) && !exited(pid):
				// (An exited one of another user, not yet collected by the reaper, refuses
				// the signal and its environment alike: it is not left.)
				refused = append(refused, strconv.Itoa(pid))
			}
		})
		if err == nil && found == 0 && len(refused) > 0 {
			err = fmt.Errorf("processes of the command could not be killed (operation not permitted: running as another user, through sudo or su?): pid %s", strings.Join(refused, ", "))
		}
		return found, err
	})
	if err == nil && !quiet {
		err = fmt.Errorf("processes of the command still alive (or moving: orphans collected during the looks) after %d rounds of SIGKILL", strayRounds)
	}
	return err
}

// lookUntilQuiet calls look (which acts on what it finds and says how many) again and
// again until a look finds none and no orphan was collected while it ran (orphans: how
// many the reaper has collected): something killed may have forked meanwhile, and a
// process of the run that moved during the look (one that forks and exits, again and
// again, leaves an orphan at each move) is at a pid the look did not list. It stops at
// look's first error, and after strayRounds looks (quiet false).
func lookUntilQuiet(orphans func() uint64, look func() (found int, err error)) (quiet bool, err error) {
	for range strayRounds {
		reaped := orphans()
		found, err := look()
		if err != nil {
			return false, err
		}
		if found == 0 && orphans() == reaped {
			return true, nil
		}
		time.Sleep(strayPause) // for the killed to die
	}
	return false, nil
}

// lookRun looks once for the live processes of the run named mark and calls each with
// every one it finds. With reaping (lockwrap reaps the command's orphans, and
// starts nothing else) that is every live descendant of lockwrap, whatever its
// environment (one that replaced its environment, env -i, or wrote over the memory it came
// in, setproctitle, no longer carries the mark, and escaped a look by it), but its
// children older than the run and what is below them (descendants). Without, it is every
// process whose environment carries the mark.
func lookRun(mark string, reaping bool, each func(pid int)) error {
	pids, err := processes(os.Getpid(), reaping)
	if err != nil {
		return fmt.Errorf("looking for the command's processes: %w", err)
	}
	needle := markNeedle(mark)
	for _, pid := range pids {
		if reaping || isMarked(pid, needle) {
			each(pid)
		}
	}
	return nil
}

// markNeedle is what an environment holding the run's mark holds: "\x00<mark>=" (a
// look builds it once, not once per process).
func markNeedle(mark string) []byte { return []byte("\x00" + mark + "=") }

// isMarked reports whether process pid's environment holds the mark whose markNeedle is
// needle. The first variable has no NUL before it: it is matched as a prefix, not by
// copying the environment behind one.
func isMarked(pid int, needle []byte) bool {
	env, err := environ(pid)
	return err == nil && (bytes.HasPrefix(env, needle[1:]) || bytes.Contains(env, needle))
}

// isRuns reports whether pid is (still) a process of the run named mark, as lookRun
// finds them: with reaping a live descendant of lockwrap not below one of its
// children older than the run; without, one whose environment holds the mark.
func isRuns(pid int, mark string, reaping bool) bool {
	if reaping {
		// Below lockwrap, and not below one of its children older than the run (the one
		// it is below as the walk read it: read again later, it may have ended).
		_, topStart, ok := descendantOf(pid, os.Getpid(), statOfPid)
		return ok && !exited(pid) && !startedBefore(topStart, runStart())
	}
	return isMarked(pid, markNeedle(mark))
}

// procIsOurs reports whether /proc is of lockwrap's pid namespace. A process made PID 1 of
// a new namespace without a /proc of its own (unshare --pid --fork without --mount-proc)
// reads the parent namespace's: its pids are not the ones lockwrap signals, and the
// children of "1" there are every process of the host.
func procIsOurs() bool {
	self, err := os.Readlink("/proc/self")
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// statOfPid reads process pid's parent and starttime from its /proc/<pid>/stat (which,
// unlike its environ, does not wait for its memory map); false if either is unreadable.
func statOfPid(pid int) (ppid int, start uint64, ok bool) {
	f := statFields("/proc/" + strconv.Itoa(pid))
	ppid, pok := statParent(f)
	start, sok := statStart(f)
	return ppid, start, pok && sok
}

// parentOfPid is a process's parent, from its /proc/<pid>/stat (its starttime not needed).
func parentOfPid(pid int) (int, bool) {
	return statParent(statFields("/proc/" + strconv.Itoa(pid)))
}

// descendantOf reports whether pid is below self, by its parents (stat: from their
// /proc/<pid>/stat), and which of self's children it is below (or is), with that child's
// starttime. An ancestor that ends during the walk has given its children to their
// reaper: the process is asked for its parent again, once.
func descendantOf(pid, self int, stat func(int) (int, uint64, bool)) (top int, topStart uint64, ok bool) {
	retried := false
	for range 1 << 16 { // more than any chain of processes
		ppid, start, ok := stat(pid)
		switch {
		case !ok || ppid <= 0:
			return 0, 0, false
		case ppid == self:
			return pid, start, true
		}
		if _, _, ok := stat(ppid); !ok && !retried {
			retried = true
			continue
		}
		pid = ppid
	}
	return 0, 0, false
}

// startedBefore reports whether the starttime start is before runStart (either 0,
// unknown: no — a process not known to be older than the run is the run's).
func startedBefore(start, runStart uint64) bool {
	return runStart != 0 && start != 0 && start < runStart
}

// escapees are the processes of a run outside its group, signalled at its stop points: a
// process that left the group (setsid) gets neither the group's SIGTERM nor its SIGKILL,
// and killStrays, which runs once the leader has been reaped, came after the kill point:
// it worked on past the lock's expiry, alongside the next holder. Each one found is held
// by a pidfd, so that a later SIGKILL reaches it and not a process given its pid since.
type escapees struct {
	mark   string
	pgid   int // the command's group, which the group's signals reach
	mu     sync.Mutex
	killed bool        // the kill point has come: what is found gets SIGKILL
	closed bool        // Wait is over
	fds    map[int]int // pid → pidfd
	// looking counts the looks under way in the background (a test waits for them).
	looking sync.WaitGroup
}

func newEscapees(mark string, pgid int) *escapees {
	return &escapees{mark: mark, pgid: pgid, fds: map[int]int{}}
}

// signal sends sig (SIGTERM at the stop point, SIGKILL at the kill point) to the run's
// processes, without waiting for its leader: SIGKILL at once to those found before; a new
// look (reading environments may take a while) runs in the background, and what it finds
// gets the latest stop point's signal. At the kill point it looks again, as killStrays
// does, until a look finds none and no orphan was collected meanwhile (a process that forks
// and exits, again and again, escaped a single look and ran past the lock's expiry until
// the leader had been reaped), for at most strayRounds looks, or until Wait is over.
func (e *escapees) signal(sig syscall.Signal) {
	if e == nil {
		return
	}
	e.mu.Lock()
	if sig == syscall.SIGKILL {
		e.killed = true
		for _, fd := range e.fds {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
	}
	e.mu.Unlock()
	if !procIsOurs() {
		return // killStrays says so
	}
	look, reapedFn, reaping := lookRunFn, orphansReapedFn, currentReaper() != nil
	e.looking.Add(1)
	if sig != syscall.SIGKILL {
		go func() { defer e.looking.Done(); _ = look(e.mark, reaping, e.found) }()
		return
	}
	go func() {
		defer e.looking.Done()
		_, _ = lookUntilQuiet(reapedFn, func() (int, error) {
			n := 0
			err := look(e.mark, reaping, func(pid int) { n++; e.found(pid) })
			if err == nil && e.isClosed() {
				err = errWaitOver
			}
			return n, err
		})
	}()
}

// errWaitOver ends the kill point's looks: Wait is over, killStrays has done the rest.
var errWaitOver = errors.New("wait is over")

func (e *escapees) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

func (e *escapees) found(pid int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	sig := syscall.SIGTERM
	if e.killed {
		sig = syscall.SIGKILL
	}
	if _, ok := e.fds[pid]; ok {
		return // signalled already
	}
	if g, err := syscall.Getpgid(pid); err == nil && g == e.pgid {
		return // in the group: its signal is the group's (not a second one)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if !errors.Is(err, syscall.ESRCH) {
			_ = killFn(pid, sig) // no pidfds (Linux before 5.3): by its pid, this once
		}
		return
	}
	// Held now: the process is the one looked at only if it still is the run's (it may
	// have ended, and its pid been given to another, since the look).
	if !isRuns(pid, e.mark, currentReaper() != nil) {
		_ = unix.Close(fd)
		return
	}
	_ = unix.PidfdSendSignal(fd, sig, nil, 0)
	e.fds[pid] = fd
}

// close lets the pidfds go once Wait is over (killStrays has done the rest).
func (e *escapees) close() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, fd := range e.fds {
		_ = unix.Close(fd)
	}
	e.fds = nil
}

// environ reads pid's environment. A process whose leader thread has ended while its
// other threads run on (pthread_exit in main) has its own environ read as "no such
// process" (Linux 6.14 and later) or as empty (before): it is read through one of those
// threads.
func environ(pid int) ([]byte, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	env, err := os.ReadFile(dir + "/environ")
	if (err == nil && len(env) > 0) || errors.Is(err, fs.ErrPermission) {
		return env, err
	}
	tasks, _ := os.ReadDir(dir + "/task")
	for _, task := range tasks {
		if tenv, terr := os.ReadFile(dir + "/task/" + task.Name() + "/environ"); terr == nil || errors.Is(terr, fs.ErrPermission) {
			return tenv, terr
		}
	}
	return env, err
}

// processes lists the pids but self's: with reaping, self's live descendants only
// (descendants says which).
func processes(self int, reaping bool) ([]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	var all []int
	var entries []procEntry
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == self {
			continue
		}
		all = append(all, pid)
		if reaping {
			f := statFields(d)
			start, sok := statStart(f)
			if ppid, pok := statParent(f); sok && pok {
				entries = append(entries, procEntry{pid: pid, ppid: ppid, start: start, ended: hasEnded(d, f[0])})
			}
		}
	}
	if !reaping {
		return all, nil
	}
	return descendants(self, entries, runStart(), parentOfPid), nil
}

// statStartTime is the index of starttime in statFields: with the pid, who a process is.
const statStartTime = 19

// statParent is the parent's pid in a process's statFields.
func statParent(f [][]byte) (int, bool) {
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// statStart is the starttime (clock ticks since boot) in a process's statFields.
func statStart(f [][]byte) (uint64, bool) {
	if len(f) <= statStartTime {
		return 0, false
	}
	st, err := strconv.ParseUint(string(f[statStartTime]), 10, 64)
	return st, err == nil
}

// procEntry is a process as its /proc/<pid>/stat read.
type procEntry struct {
	pid, ppid int
	start     uint64 // starttime, in clock ticks since boot
	ended     bool   // hasEnded: a zombie, one killed in an earlier look and not yet collected
}

// descendants are the live processes below self among entries, but self's children that
// started before the run (runStart, the command leader's starttime; 0: unknown) and what
// is below them: the children lockwrap had from its start (`sh -c 'agent & exec lockwrap
// …'`), and processes of theirs orphaned since, which their reaper, self, adopted. (One
// such a child starts after the run's start and leaves orphaned is taken for the run's.)
// A process whose parent is not among entries (it ended while /proc was read, and its
// children went to their reaper, self: read before it, they were not reached from self) is
// asked for its parent again (parent).
func descendants(self int, entries []procEntry, runStart uint64, parent func(int) (int, bool)) []int {
	listed := make(map[int]bool, len(entries))
	for _, e := range entries {
		listed[e.pid] = true
	}
	children := map[int][]procEntry{}
	for _, e := range entries {
		if e.ppid != self && e.ppid > 0 && !listed[e.ppid] {
			if ppid, ok := parent(e.pid); ok {
				e.ppid = ppid
			}
		}
		children[e.ppid] = append(children[e.ppid], e)
	}
	var out []int
	for todo := children[self]; len(todo) > 0; {
		e := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if e.ppid == self && e.start < runStart {
			continue
		}
		todo = append(todo, children[e.pid]...)
		if !e.ended {
			out = append(out, e.pid)
		}
	}
	return out
}

// exited reports whether pid has ended (gone, or a zombie its parent has not collected
// yet): nothing of it runs, whatever its environment or its owner.
func exited(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid)
	f := statFields(dir)
	return len(f) == 0 || hasEnded(dir, f[0])
}

// hasEnded reports whether the process at dir, whose /proc/<pid>/stat reads state, has
// ended: a zombie (Z) or dead (X) with no other thread running on. A process whose leader
// thread has ended reads Z too while its other threads run (pthread_exit in main).
func hasEnded(dir string, state []byte) bool {
	if string(state) != "Z" && string(state) != "X" {
		return false
	}
	tasks, _ := os.ReadDir(dir + "/task")
	leader := filepath.Base(dir)
	for _, task := range tasks {
		if task.Name() != leader {
			return false
		}
	}
	return true
}

// statFields is /proc/<pid>/stat after the command name: state, ppid, … (nil if it
// cannot be read).
func statFields(dir string) [][]byte {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return nil
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(b[i+1:])
}
