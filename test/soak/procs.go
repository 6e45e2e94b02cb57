package soak

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	wrapcfg "github.com/lockedcron/lockedcron/internal/wrapper/config"
	"github.com/lockedcron/lockedcron/test/soak/checker"
)

// runOfProcess names the run of key a live job process belongs to, from the environment lockwrap
// gave it; an error when the process has exited (gone, or a zombie its lockwrap has not
// reaped) or its environment does not name its run.
func runOfProcess(pid int, key string) (checker.Kill, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return checker.Kill{}, err
	}
	// The state follows the command's closing parenthesis: "pid (comm) S …".
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return checker.Kill{}, fmt.Errorf("exited (stat %q)", stat)
	}
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return checker.Kill{}, err
	}
	run := checker.Kill{Key: key}
	for _, kv := range strings.Split(string(env), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case wrapcfg.EnvHolder:
			run.Holder = v
		case wrapcfg.EnvOccurrence:
			run.Occurrence, _ = time.Parse(time.RFC3339, v)
		}
	}
	if run.Holder == "" || run.Occurrence.IsZero() {
		return checker.Kill{}, fmt.Errorf("its environment has no %s or %s", wrapcfg.EnvHolder, wrapcfg.EnvOccurrence)
	}
	return run, nil
}

// killJobRun SIGKILLs one running job process of key, found by its command line (one of
// jobBins, with --label=key), and returns the run it hit (nil when none was hit) and a
// line for the fault log ("" when there was nothing to hit).
func killJobRun(jobBins []string, key string, logf func(string, ...any)) (*checker.Kill, string) {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && slices.Contains(jobBins, args[0]) && slices.Contains(args, "--label="+key) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, ""
	}
	pid := pids[int(time.Now().UnixNano()%int64(len(pids)))]
	// The run it hits, named as its audit records name it (lockwrap gives the job its
	// occurrence and holder): the kill can land after the job's end record and before its
	// exit, and the checker must know that run did not end as its record says.
	run, err := runOfProcess(pid, key)
	if err != nil {
		// Not killed: a kill the checker could not tie to its run might land after the
		// job's end record and show as a duplicate that is not one.
		logf("soak: job-kill-9 skipped pid %d: %v", pid, err)
		return nil, ""
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		// Not landed (the job had exited): the caller tries another run.
		logf("soak: job-kill-9: SIGKILL pid %d, %s %s: %v", pid, run.Holder, run.Occurrence.UTC().Format(time.RFC3339), err)
		return nil, ""
	}
	return &run, fmt.Sprintf("SIGKILL job pid %d, %s %s", pid, run.Holder, run.Occurrence.UTC().Format(time.RFC3339))
}
