//go:build !linux

package wrapper

import (
	"errors"
	"os/exec"
	"syscall"
)

func makeNonDumpable() error { return errors.ErrUnsupported }

type reaper struct{}

func startReaping() error { return errors.ErrUnsupported }

func currentReaper() *reaper { return nil }

func (*reaper) start(*exec.Cmd) (<-chan syscall.WaitStatus, error) {
	return nil, errors.ErrUnsupported
}
