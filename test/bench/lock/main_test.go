package main

import "testing"

// TestEveryImplementationRunsItsCycle runs the benchmark once, small: every implementation
// and scenario, the -scripts ones included, must complete its cycles on a real Redis. The
// scripts are run directly with the keys and arguments lock.Acquire passes, so a change to
// acquire.lua's keys that the benchmark did not follow fails here, not in the next
// measurement (it did once: KEYS[5], the finish key, made every direct acquire fail).
func TestEveryImplementationRunsItsCycle(t *testing.T) {
	if err := run(1, 20, 2, true, true); err != nil {
		t.Fatal(err)
	}
}
