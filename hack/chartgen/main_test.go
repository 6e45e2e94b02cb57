package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestChartInSync fails when dist/chart's CRD, RBAC or admission policy differ from what
// config/ generates: run `make build-installer` and commit.
func TestChartInSync(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := render(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run `make build-installer`)", name, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from what config/ generates: run `make build-installer` and commit", name)
		}
	}
}
