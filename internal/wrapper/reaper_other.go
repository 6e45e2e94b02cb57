//go:build !linux

package wrapper

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

func makeNonDumpable() error { return errors.ErrUnsupported }

// dieWithUs: no parent-death signal here; run lockwrap under a supervisor that stops the
// whole group (docs/lockwrap.md).
func dieWithUs(*syscall.SysProcAttr) {}

type reaper struct{}

func startReaping() error { return errors.ErrUnsupported }

func currentReaper() *reaper { return nil }

func (*reaper) start(*exec.Cmd) (<-chan syscall.WaitStatus, error) {
	return nil, errors.ErrUnsupported
}

// osCrashSignals: crashSignals of this system's only.
var osCrashSignals []os.Signal

// foregroundTerminal: the command stays in lockwrap's terminal's background here.
func foregroundTerminal(*syscall.SysProcAttr) bool { return false }

func takeTerminal() {}

func ignoreTerminalStops() {}
