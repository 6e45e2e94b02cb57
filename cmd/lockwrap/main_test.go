package main_test

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockedcron/lockedcron/internal/report"
)

// TestStaticBinary builds lockwrap with CGO_ENABLED=0, checks it has no ELF interpreter
// (fully static), copies it with its own cp subcommand and runs the copy on bad input.
func TestStaticBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "lockwrap")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("lockwrap is dynamically linked (has PT_INTERP)")
		}
	}
	f.Close()

	dest := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "cp", dest).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	copied := filepath.Join(dest, "lockwrap")
	fi, err := os.Stat(copied)
	if err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("copy: %v %v", fi, err)
	}

	rep := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(copied, "--termination-log", rep, "--key", "k", "--", "true")
	cmd.Env = []string{} // no LOCKEDCRON_* from the test's environment
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 70 || !strings.Contains(string(out), "--redis-url: required") {
		t.Fatalf("bad input: %v %s", err, out)
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := report.Decode(b); err != nil || r.Outcome != report.Error || !strings.Contains(r.Message, "--redis-url") {
		t.Fatalf("report %s: %v", b, err)
	}
}
