//go:build !linux

package wrapper

// killStrays is Linux's only (it reads /proc): elsewhere the command is its process group.
func killStrays(string) string { return "" }
