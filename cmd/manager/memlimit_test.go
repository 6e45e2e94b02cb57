package main

import (
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// The manager's soft memory limit follows its container's: 90% of it by default.
func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	for _, env := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	const container = 256 << 20

	ratio := 0.9
	got, err := setMemoryLimit(ratio, memlimit.Limit(container), logr.Discard())
	if want := int64(float64(container) * ratio); err != nil || got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("ratio 0.9 of 256Mi: %d, %v (runtime %d); want %d", got, err, debug.SetMemoryLimit(-1), want)
	}

	// No limit to follow (not in a container with one): none set, no error.
	if got, err := setMemoryLimit(0.9, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, logr.Discard()); err != nil || got != math.MaxInt64 {
		t.Errorf("no container limit: %d, %v; want none (MaxInt64)", got, err)
	}

	// 0 leaves the runtime alone.
	debug.SetMemoryLimit(123 << 20)
	if _, err := setMemoryLimit(0, memlimit.Limit(container), logr.Discard()); err != nil || debug.SetMemoryLimit(-1) != 123<<20 {
		t.Errorf("ratio 0 changed the limit to %d (%v)", debug.SetMemoryLimit(-1), err)
	}

	// GOMEMLIMIT set by the user wins.
	t.Setenv("GOMEMLIMIT", "123MiB")
	if _, err := setMemoryLimit(0.9, memlimit.Limit(container), logr.Discard()); err != nil || debug.SetMemoryLimit(-1) != 123<<20 {
		t.Errorf("with GOMEMLIMIT set: limit %d (%v), want it untouched", debug.SetMemoryLimit(-1), err)
	}
	os.Unsetenv("GOMEMLIMIT")

	// A ratio that is not a fraction: an error naming the flag and the fix.
	for _, bad := range []float64{-0.5, 1.5, math.NaN()} {
		_, err := setMemoryLimit(bad, memlimit.Limit(container), logr.Discard())
		if err == nil || !strings.Contains(err.Error(), "--memory-limit-ratio") || !strings.Contains(err.Error(), "(0, 1]") {
			t.Errorf("ratio %g: %v; want an error naming --memory-limit-ratio and (0, 1]", bad, err)
		}
	}
}
