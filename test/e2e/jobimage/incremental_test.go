package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper"
	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
)

// The test binary is lockwrap (roleEnv=1) or, with asJob first, this job program.
const (
	roleEnv = "JOBIMAGE_TEST_AS_MAIN"
	asJob   = "--as-job"
)

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "1" {
		if len(os.Args) > 1 && os.Args[1] == asJob {
			os.Args = append(os.Args[:1], os.Args[2:]...)
			os.Exit(run())
		}
		os.Exit(wrapper.Main(os.Args[1:], os.Getenv, os.Stderr))
	}
	os.Exit(m.Run())
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The worked example of docs/idempotency.md, locally: real lockwrap processes of two
// "namespaces" contend for one key over 12 occurrences; one holder (lockwrap and its job)
// is SIGKILLed mid-run. Every record is processed exactly once, and the run after the
// kill starts again from the old watermark (so the per-record key is what prevents the
// duplicates).
func TestIncrementalExactlyOnce(t *testing.T) {
	s := redistest.Start(t, redistest.WithPersistence())
	rdb := s.Client()
	defer rdb.Close()
	ctx := context.Background()
	const n, key = 40, "incremental"
	for i := 1; i <= n; i++ {
		rdb.RPush(ctx, audit.Records, strconv.Itoa(i))
	}
	dir := t.TempDir()
	out := &syncBuf{}
	start := func(holder, occ string) (*exec.Cmd, string) {
		pidFile := filepath.Join(dir, "pid-"+strings.ReplaceAll(holder, "/", "_")+"-"+strings.ReplaceAll(occ, ":", ""))
		cmd := exec.Command(os.Args[0], "--redis-url", s.URL(), "--key", key, "--holder", holder,
			"--occurrence", occ, "--ttl", "2s", "--renew-interval", "500ms", "--kill-grace", "500ms",
			"--watermark-monotonic", "--termination-log", pidFile+".json",
			"--", os.Args[0], asJob, "--incremental", "--batch", "5", "--sleep", "40ms", "--redis-url", s.URL(),
			"--termination-log", os.DevNull)
		// TMPDIR: the SIGKILLed lockwrap leaves its watermark directory in the test's.
		cmd.Env = append(os.Environ(), roleEnv+"=1", "E2E_PID_FILE="+pidFile, "TMPDIR="+dir)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, pidFile
	}
	readReport := func(pidFile string) report.Report {
		b, err := os.ReadFile(pidFile + ".json")
		if err != nil {
			t.Fatalf("report: %v\n%s", err, out)
		}
		r, err := report.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v\n%s", what, err, out)
		}
	}
	stored := func() string { return rdb.HGet(ctx, lock.LastKey(key), "watermark").Val() }

	// Of the day before, not a fixed date: lockwrap does not start an occurrence older than
	// its ledger's retention (7 days here).
	base := time.Now().UTC().Truncate(time.Hour).Add(-24 * time.Hour)
	var markBeforeKill string
	var recovered report.Report
	for i := 0; i < 12; i++ {
		occ := base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		a, pa := start(fmt.Sprintf("cluster/ns-a/job-%d", i), occ)
		b, pb := start(fmt.Sprintf("cluster/ns-b/job-%d", i), occ)
		if i == 3 {
			// Kill whichever holder runs the job once it has processed a record.
			markBeforeKill = stored()
			logLen := rdb.LLen(ctx, audit.ProcessedLog).Val()
			var victim *exec.Cmd
			var pidFile string
			poll("a job to start", func() bool {
				for _, c := range []struct {
					cmd *exec.Cmd
					pid string
				}{{a, pa}, {b, pb}} {
					if _, err := os.Stat(c.pid); err == nil {
						victim, pidFile = c.cmd, c.pid
						return true
					}
				}
				return false
			})
			poll("a record processed", func() bool { return rdb.LLen(ctx, audit.ProcessedLog).Val() > logLen })
			pidb, _ := os.ReadFile(pidFile)
			jobPid, _ := strconv.Atoi(string(pidb))
			// The pod dies: lockwrap and the job's process group, at once.
			_ = victim.Process.Kill()
			_ = syscall.Kill(-jobPid, syscall.SIGKILL)
			_ = a.Wait()
			_ = b.Wait()
			if ok, _ := lock.Succeeded(ctx, rdb, key, mustParse(occ)); ok {
				t.Fatal("the killed run's occurrence succeeded")
			}
			if stored() != markBeforeKill {
				t.Fatalf("the killed run moved the watermark: %q → %q", markBeforeKill, stored())
			}
			// The occurrence runs again once the dead holder's lock expires.
			poll("the dead holder's lock to expire", func() bool { return rdb.Exists(ctx, lock.LockKey(key)).Val() == 0 })
			c, pc := start(fmt.Sprintf("cluster/ns-b/job-%d-retry", i), occ)
			if err := c.Wait(); err != nil {
				t.Fatalf("retry: %v\n%s", err, out)
			}
			recovered = readReport(pc)
			continue
		}
		if err := a.Wait(); err != nil {
			t.Fatalf("a: %v\n%s", err, out)
		}
		if err := b.Wait(); err != nil {
			t.Fatalf("b: %v\n%s", err, out)
		}
		ra, rb := readReport(pa), readReport(pb)
		ran := 0
		for _, r := range []report.Report{ra, rb} {
			switch r.Outcome {
			case report.Succeeded:
				ran++
			case report.SkippedContention, report.SuppressedDuplicate:
			default:
				t.Fatalf("occurrence %s: %+v\n%s", occ, r, out)
			}
		}
		if ran != 1 {
			t.Fatalf("occurrence %s: %d runs (%+v, %+v)", occ, ran, ra, rb)
		}
	}
	if recovered.Outcome != report.Succeeded || !recovered.Recovered || recovered.PreviousWatermark != markBeforeKill {
		t.Fatalf("the run after the kill: %+v (mark before the kill %q)", recovered, markBeforeKill)
	}
	log := rdb.LRange(ctx, audit.ProcessedLog, 0, -1).Val()
	twice, missing, err := audit.ExactlyOnce(log, n)
	if err != nil || len(twice) > 0 || len(missing) > 0 {
		t.Fatalf("processed twice %v, missing %v (%v); log %v\n%s", twice, missing, err, log, out)
	}
	if stored() != strconv.Itoa(n) {
		t.Fatalf("final watermark %q", stored())
	}
	skipped := strings.Count(out.String(), "already processed, skipped")
	if skipped == 0 {
		t.Fatalf("no record was processed again after the kill: the test did not test the per-record key\n%s", out)
	}
	t.Logf("%d records each processed once over 12 occurrences and a killed holder; %d re-read after the kill and skipped by the per-record key; mark before the kill %s",
		n, skipped, markBeforeKill)
}

func mustParse(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
