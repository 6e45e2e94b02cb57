package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// setTerminalModes reads and writes back the modes of the first of stdin, stdout and
// stderr that is a terminal, as `stty sane` or a password prompt would. Writing a
// terminal's modes from a process group that is not its foreground one stops the group
// (SIGTTOU): a job that lockwrap left in the background never got past this.
func setTerminalModes() error {
	for fd := 0; fd <= 2; fd++ {
		modes, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
			continue
		}
		if err != nil {
			return fmt.Errorf("terminal modes of fd %d: %w", fd, err)
		}
		if err := unix.IoctlSetTermios(fd, unix.TCSETS, modes); err != nil {
			return fmt.Errorf("setting the terminal modes of fd %d: %w", fd, err)
		}
		return nil
	}
	return errors.New("--terminal: none of stdin, stdout and stderr is a terminal (the container needs tty: true)")
}
