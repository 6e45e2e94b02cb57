//go:build !linux

package wrapper

import "syscall"

// killStrays is Linux's only (it reads /proc): elsewhere the command is its process group.
func killStrays(string) string { return "" }

// escapees: see strays_linux.go; elsewhere the command is its process group.
type escapees struct{}

func newEscapees(string, int) *escapees { return nil }
func (*escapees) signal(syscall.Signal) {}
func (*escapees) close()                {}
