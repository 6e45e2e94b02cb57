package wrapper

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// TestWriteReportFileCreatesOnlyWhenAllowed: the default termination log is opened
// without O_CREATE (a missing one is no error and stays missing); explicit paths are
// created; both truncate what was there.
func TestWriteReportFileCreatesOnlyWhenAllowed(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "termination-log")
	if err := writeReportFile(missing, []byte("{}"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("created the default termination log: %v", err)
	}
	for _, mayCreate := range []bool{false, true} {
		existing := filepath.Join(dir, "existing")
		if err := os.WriteFile(existing, []byte("a much longer previous content"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeReportFile(existing, []byte(`{"x":1}`), mayCreate); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(existing); string(b) != `{"x":1}` {
			t.Fatalf("mayCreate %v: %q", mayCreate, b)
		}
	}
	explicit := filepath.Join(dir, "report.json")
	if err := writeReportFile(explicit, []byte("{}"), true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(explicit); err != nil || string(b) != "{}" {
		t.Fatalf("explicit path: %q %v", b, err)
	}
	// Other errors than a missing file are reported.
	if err := writeReportFile(filepath.Join(dir, "no", "such", "dir"), []byte("{}"), true); err == nil {
		t.Fatal("no error for a path in a missing directory")
	}
}

// TestReportFileNeverWaits: a device (/dev/null here; /dev/termination-log, a terminal's
// /dev/stderr) gets the report; so does a FIFO (or a pipe, through /dev/stderr) that is
// read. One no one reads, or whose reader does not read, is refused at once: opened
// blocking, a FIFO the command left at --termination-log waited for a reader for ever
// (TestReportPathMadeAFIFOIsRefused).
func TestReportFileNeverWaits(t *testing.T) {
	if err := writeReportFile(os.DevNull, []byte("{}"), false); err != nil {
		t.Errorf("%s: %v", os.DevNull, err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(what string) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- writeReportFile(fifo, []byte("{}"), true) }()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			// A reader lets the hung open go on.
			if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				<-done
				r.Close()
			}
			t.Fatalf("%s: waited", what)
			return nil
		}
	}
	if err := write("a FIFO no one reads"); err == nil || !strings.Contains(err.Error(), "no one reads") {
		t.Errorf("a FIFO no one reads: %v, want it refused", err)
	}

	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := write("a FIFO with a reader"); err != nil {
		t.Errorf("a FIFO with a reader: %v, want the report written", err)
	}
	buf := make([]byte, 16)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "{}" {
		t.Errorf("its reader read %q, %v", buf[:n], err)
	}

	// Its reader reads no more, and the pipe is full.
	w, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(w)
	for {
		if _, err := syscall.Write(w, make([]byte, 4096)); err != nil {
			break // EAGAIN: full
		}
	}
	if err := write("a full FIFO"); err == nil || !strings.Contains(err.Error(), "does not read") {
		t.Errorf("a FIFO whose reader does not read: %v, want it refused", err)
	}
}

// Each run's processes carry a mark of its own, named for the run; a lockwrap run by the
// command keeps its runner's beside its own (its runner then finds the inner run's
// processes too), and its process stops by its own.
func TestRunMarkNamesTheRun(t *testing.T) {
	cfg := config.Config{Holder: "h", Occurrence: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)}
	outer := childEnv([]string{"PATH=/bin"}, cfg, 1, nil, "")
	inner := childEnv(outer, cfg, 2, nil, "")
	marks := func(env []string) (out []string) {
		for _, kv := range env {
			if name, v, _ := strings.Cut(kv, "="); strings.HasPrefix(name, config.EnvRunMark+"_") {
				if v != "1" || len(name) != len(config.EnvRunMark)+1+32 {
					t.Errorf("mark %q", kv)
				}
				out = append(out, name)
			}
		}
		return out
	}
	o, i := marks(outer), marks(inner)
	if len(o) != 1 || len(i) != 2 || i[0] != o[0] || i[1] == o[0] {
		t.Fatalf("outer's marks %v, inner's %v: want one, then the outer's and a new one", o, i)
	}
	if got := runMark(inner); got != i[1] {
		t.Fatalf("the inner run's process stops by %q, want its own %q", got, i[1])
	}
}
