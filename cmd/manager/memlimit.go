package main

import (
	"fmt"
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// setMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to ratio × the
// limit provider reports — in a pod, its container's cgroup memory limit. The garbage
// collector then works harder as the heap nears the container's limit, instead of
// letting it grow to twice the live heap and the kernel kill the manager (issue 13: at
// 5,000 jobs the manager peaked at ~270 MiB, over the 256Mi of config/manager). Ratio 0
// leaves the runtime alone; GOMEMLIMIT or AUTOMEMLIMIT in the environment win.
//
// It returns the limit in effect (math.MaxInt64: none). A ratio outside [0, 1] is an
// error; a limit that cannot be read is logged and the manager goes on without one.
func setMemoryLimit(ratio float64, provider memlimit.Provider, log logr.Logger) (int64, error) {
	if ratio == 0 {
		return 0, nil
	}
	if !(ratio > 0 && ratio <= 1) {
		return 0, fmt.Errorf("--memory-limit-ratio %g: want a fraction in (0, 1] of the container's memory limit (0.9 leaves room for what is not heap), or 0 to leave the Go runtime's memory limit alone", ratio)
	}
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(provider),
		memlimit.WithLogger(slog.New(logr.ToSlogHandler(log))))
	if err != nil {
		log.Info("no soft memory limit: the container's memory limit could not be read", "error", err.Error())
	}
	return limit, nil
}
