package wrapper

import (
	"os"
	"path/filepath"
	"testing"
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
