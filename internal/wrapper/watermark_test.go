package wrapper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
)

// wmJob is a command that saves the watermark variables it got to $1/env-<occurrence>,
// writes $2 to its watermark file (unless $2 is "-") and exits $3.
var wmJob = []string{"sh", "-c", `
out="$1/env-$(echo "$LOCKEDCRON_OCCURRENCE" | tr -d :)"
{
  echo "occ=${LOCKEDCRON_LAST_SUCCESS_OCCURRENCE-unset}"
  echo "at=${LOCKEDCRON_LAST_SUCCESS_AT-unset}"
  echo "fence=${LOCKEDCRON_LAST_SUCCESS_FENCING_TOKEN-unset}"
  echo "wm=${LOCKEDCRON_WATERMARK-unset}"
  echo "file=${LOCKEDCRON_WATERMARK_FILE-unset}"
} > "$out"
[ "$2" = - ] || printf '%s\n' "$2" > "$LOCKEDCRON_WATERMARK_FILE"
exit $3`, "sh"}

func wmRun(t *testing.T, url, key, occ, dir, wm string, code int, more ...string) report.Report {
	t.Helper()
	args := append(flags(url, key, "h-"+occ, append([]string{"--occurrence", occ}, more...)...), "--")
	args = append(append(args, wmJob...), dir, wm, fmt.Sprint(code))
	rep, got := run(t, nil, args...)
	if got != code {
		t.Fatalf("exit %d, want %d: %+v", got, code, rep)
	}
	return rep
}

// seen is what the job of occurrence occ found in its environment.
func seen(t *testing.T, dir, occ string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "env-"+strings.ReplaceAll(occ, ":", "")))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	return m
}

// wmWarnings are rep's warnings about the watermark (not Redis's durability).
func wmWarnings(rep report.Report) []string {
	var w []string
	for _, s := range rep.Warnings {
		if strings.Contains(s, "watermark") {
			w = append(w, s)
		}
	}
	return w
}

func storedWatermark(t *testing.T, s *redistest.Server, key string) string {
	return admin(t, s).HGet(context.Background(), lock.LastKey(key), "watermark").Val()
}

func TestWatermarkThroughLockwrap(t *testing.T) {
	s := redistest.Start(t)
	dir := t.TempDir()
	const key = "wm"
	occ := func(n int) string {
		return mustTime(occurrence).Add(time.Duration(n) * time.Minute).Format(time.RFC3339)
	}

	// First run: nothing before it; it stores "10".
	r1 := wmRun(t, s.URL(), key, occ(0), dir, "10", 0)
	env := seen(t, dir, occ(0))
	if env["occ"] != "unset" || env["wm"] != "unset" || env["at"] != "unset" || env["file"] == "unset" {
		t.Fatalf("first run's environment %v", env)
	}
	if r1.Outcome != report.Succeeded || r1.Watermark != "10" || r1.PreviousWatermark != "" {
		t.Fatalf("first run %+v", r1)
	}
	if _, err := os.Stat(filepath.Dir(env["file"])); !os.IsNotExist(err) {
		t.Fatalf("the watermark directory outlived the run: %v", err)
	}

	// A failed run gets the previous success and cannot move the mark.
	r2 := wmRun(t, s.URL(), key, occ(1), dir, "20", 3)
	env = seen(t, dir, occ(1))
	if env["occ"] != occ(0) || env["wm"] != "10" || env["fence"] != fmt.Sprint(r1.FencingToken) || env["at"] == "unset" {
		t.Fatalf("second run's environment %v (first %+v)", env, r1)
	}
	if at, err := time.Parse(time.RFC3339Nano, env["at"]); err != nil || time.Since(at) > time.Minute {
		t.Fatalf("LOCKEDCRON_LAST_SUCCESS_AT %q: %v", env["at"], err)
	}
	if r2.Outcome != report.Failed || r2.Watermark != "" || r2.PreviousWatermark != "10" || storedWatermark(t, s, key) != "10" {
		t.Fatalf("failed run %+v, stored %q", r2, storedWatermark(t, s, key))
	}

	// A success that writes nothing keeps the mark; the next one still gets "10".
	r3 := wmRun(t, s.URL(), key, occ(2), dir, "-", 0)
	if r3.Outcome != report.Succeeded || r3.Watermark != "" || storedWatermark(t, s, key) != "10" {
		t.Fatalf("success without a watermark %+v", r3)
	}
	r4 := wmRun(t, s.URL(), key, occ(3), dir, "30", 0)
	if env = seen(t, dir, occ(3)); env["occ"] != occ(2) || env["wm"] != "10" {
		t.Fatalf("fourth run's environment %v", env)
	}
	if r4.Watermark != "30" || r4.PreviousWatermark != "10" || storedWatermark(t, s, key) != "30" {
		t.Fatalf("fourth run %+v", r4)
	}

	// Monotonic: a smaller one is refused with a warning; the run succeeds.
	r5 := wmRun(t, s.URL(), key, occ(4), dir, "4", 0, "--watermark-monotonic")
	if r5.Outcome != report.Succeeded || r5.Watermark != "" || storedWatermark(t, s, key) != "30" ||
		len(wmWarnings(r5)) != 1 || !strings.Contains(wmWarnings(r5)[0], `"4" not stored: smaller than the stored "30"`) {
		t.Fatalf("monotonic refusal %+v", r5)
	}
	if r6 := wmRun(t, s.URL(), key, occ(5), dir, "4", 0); r6.Watermark != "4" || storedWatermark(t, s, key) != "4" {
		t.Fatalf("without --watermark-monotonic %+v", r6)
	}

	// Over 1 KiB: not stored, a warning; exactly 1 KiB (plus its newline) is stored.
	big := strings.Repeat("x", lock.MaxWatermarkBytes)
	r7 := wmRun(t, s.URL(), key, occ(6), dir, big+"y", 0)
	if r7.Outcome != report.Succeeded || r7.Watermark != "" || storedWatermark(t, s, key) != "4" ||
		len(wmWarnings(r7)) != 1 || !strings.Contains(wmWarnings(r7)[0], "1025 bytes") {
		t.Fatalf("too large %+v", r7)
	}
	r8 := wmRun(t, s.URL(), key, occ(7), dir, big, 0)
	if storedWatermark(t, s, key) != big || r8.Watermark != big[:report.MaxWatermarkBytes]+"…" {
		t.Fatalf("1 KiB watermark: report has %d bytes", len(r8.Watermark))
	}
	if env = seen(t, dir, occ(8-1)); env["wm"] != "4" {
		t.Fatalf("eighth run's environment %v", env)
	}
	if b, err := report.Encode(r8); err != nil || len(b) > report.MaxBytes {
		t.Fatalf("report of %d bytes: %v", len(b), err)
	}
}

// wmGate is a command that writes $2 to its watermark file, touches $1/started, waits for
// $1/release, touches $1/exited and exits 0.
func wmGate(dir, wm string) []string {
	return []string{"sh", "-c", `printf '%s\n' "$2" > "$LOCKEDCRON_WATERMARK_FILE"; echo $$ > "$1/pid"; touch "$1/started"
while [ ! -e "$1/release" ] && [ -d "$1" ]; do sleep 0.02; done; touch "$1/exited"; exit 0`, "sh", dir, wm}
}

// A lockwrap that dies after its job exited 0 but before it recorded the result (here:
// stopped while the job ran, the job then exits, lockwrap is killed) leaves the
// occurrence unsucceeded and the watermark where it was; the next run of the occurrence
// recovers it and is given the old mark. A holder that was only frozen and resumes after
// another took over reports LockLost and does not move the mark either.
func TestWatermarkSurvivesAHolderDyingBeforeFinish(t *testing.T) {
	for _, end := range []string{"killed", "resumed"} {
		t.Run(end, func(t *testing.T) {
			s := redistest.Start(t)
			rdb := admin(t, s)
			ctx := context.Background()
			dir := t.TempDir()
			const key = "wm-crash"
			before := mustTime(occurrence).Add(-time.Minute).Format(time.RFC3339)
			if r := wmRun(t, s.URL(), key, before, dir, "10", 0); r.Watermark != "10" {
				t.Fatalf("first run %+v", r)
			}

			g := newGate(t)
			a := startLockwrap(t, nil, cmdArgs(flags(s.URL(), key, "a", "--ttl", "1s", "--renew-interval", "200ms",
				"--kill-grace", "500ms"), wmGate(g.dir, "20")...)...)
			g.waitStarted(t)
			if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			g.release(t)
			eventually(t, "the job to exit", func() bool { _, err := os.Stat(filepath.Join(g.dir, "exited")); return err == nil })
			pid, err := os.ReadFile(filepath.Join(g.dir, "pid"))
			if err != nil {
				t.Fatal(err)
			}
			// The shell has exited (a zombie: its stopped parent cannot reap it), not only
			// touched its last file.
			eventually(t, "the job's process to end", func() bool {
				stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat")
				if err != nil {
					return true
				}
				_, rest, _ := strings.Cut(string(stat), ") ")
				return strings.HasPrefix(rest, "Z")
			})
			if end == "killed" {
				if err := a.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-a.done
			}
			if ok, _ := lock.Succeeded(ctx, rdb, key, mustTime(occurrence)); ok {
				t.Fatal("the occurrence succeeded without lockwrap recording it")
			}
			if wm := storedWatermark(t, s, key); wm != "10" {
				t.Fatalf("watermark %q before the next run", wm)
			}
			eventually(t, "a's lock to expire", func() bool { return rdb.Exists(ctx, lock.LockKey(key)).Val() == 0 })

			// The next holder of the same occurrence.
			b := runAsync(t, nil, cmdArgs(flags(s.URL(), key, "b", "--ttl", "5s", "--kill-grace", "1s"), append(wmJob[:len(wmJob):len(wmJob)],
				dir, "30", "0")...)...)
			rb := await(t, b)
			env := seen(t, dir, occurrence)
			if rb.rep.Outcome != report.Succeeded || !rb.rep.Recovered || env["wm"] != "10" || env["occ"] != before ||
				rb.rep.PreviousWatermark != "10" || rb.rep.Watermark != "30" {
				t.Fatalf("b: %+v, its environment %v", rb, env)
			}
			if end == "resumed" {
				if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				ra, code := a.wait(t)
				if code != 0 || ra.Outcome != report.LockLost || ra.Watermark != "" {
					t.Fatalf("a: %d %+v", code, ra)
				}
			}
			if wm := storedWatermark(t, s, key); wm != "30" {
				t.Fatalf("watermark %q after b (and a)", wm)
			}
		})
	}
}

// A command that leaves something other than a file at $LOCKEDCRON_WATERMARK_FILE (a FIFO
// no one writes to, a device): the watermark is not stored, with a warning, and the run is
// recorded. lockwrap used to open a FIFO there and wait for a writer for ever, its lock
// renewals stopped: the pod hung and the result was never recorded.
func TestWatermarkNotAFile(t *testing.T) {
	s := redistest.Start(t)
	for name, leave := range map[string]string{
		"a FIFO":              `mkfifo "$LOCKEDCRON_WATERMARK_FILE"`,
		"a link to /dev/zero": `ln -s /dev/zero "$LOCKEDCRON_WATERMARK_FILE"`,
	} {
		t.Run(name, func(t *testing.T) {
			key := "wm-not-a-file/" + name
			ch := runAsync(t, nil, cmdArgs(flags(s.URL(), key, "a", "--ttl", "5s", "--kill-grace", "1s"), "sh", "-c", leave)...)
			r := await(t, ch)
			if r.rep.Outcome != report.Succeeded || len(wmWarnings(r.rep)) != 1 || !strings.Contains(wmWarnings(r.rep)[0], "not a regular file") {
				t.Fatalf("%d %+v, want Succeeded with a warning that the watermark is not a regular file", r.code, r.rep)
			}
			if storedWatermark(t, s, key) != "" {
				t.Fatal("a watermark was stored")
			}
		})
	}
}
