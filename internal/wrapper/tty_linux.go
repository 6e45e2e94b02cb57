package wrapper

import (
	"os/signal"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// foregroundTerminal gives the command's group the terminal when lockwrap holds it: its
// stdin is a terminal whose foreground group is lockwrap's (a container with tty: true,
// where lockwrap is PID 1 and the session leader, or a shell's foreground job). The
// command runs in a group of its own (Setpgid, for signals and strays): in the terminal's
// background its first terminal-mode call (stty, a pager, a password prompt) stopped it
// (SIGTTOU), and lockwrap renewed the lock for ever. It says whether it did.
func foregroundTerminal(a *syscall.SysProcAttr) bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return false
	}
	a.Foreground, a.Ctty = true, 0 // Ctty: the child's fd 0, the same terminal
	return true
}

// takeTerminal makes lockwrap's group the terminal's foreground again when the command's
// exec failed after its child had taken it. A background group may do so only with
// SIGTTOU blocked or ignored: blocked here, on this thread only.
func takeTerminal() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	bits := uint(unsafe.Sizeof(set.Val[0]) * 8)
	n := uint(unix.SIGTTOU) - 1
	set.Val[n/bits] |= 1 << (n % bits)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return
	}
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
}

// ignoreTerminalStops has lockwrap ignore SIGTTOU, once its command (started with the
// default disposition) holds the terminal: a background group's write to a terminal that
// stops background writers then goes through.
func ignoreTerminalStops() { signal.Ignore(syscall.SIGTTOU) }
