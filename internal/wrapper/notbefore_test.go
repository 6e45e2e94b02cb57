package wrapper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// stampArg makes the test binary a child command that writes its clock (RFC 3339 with
// nanoseconds) to a file and exits: `<test binary> stampArg FILE`.
const stampArg = "__stamp_time"

func stampMain(path string) int {
	now := time.Now()
	if err := os.WriteFile(path, []byte(now.UTC().Format(time.RFC3339Nano)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func stampCmd(path string) []string { return []string{os.Args[0], stampArg, path} }

func readStamp(tb testing.TB, path string) time.Time {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("the command did not run: %v", err)
	}
	at, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		tb.Fatal(err)
	}
	return at
}

// readUnixStamp reads `date +%s.%N` output.
func readUnixStamp(tb testing.TB, path string) time.Time {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("the command did not run: %v", err)
	}
	var sec, nsec int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d.%d", &sec, &nsec); err != nil {
		tb.Fatalf("%q: %v", b, err)
	}
	return time.Unix(sec, nsec)
}

// observer watches a Redis server over one connection of its own, so that any other
// connection counts as lockwrap's.
type observer struct {
	c     *redis.Client
	conns int64 // total_connections_received once our own connection was made
}

func newObserver(tb testing.TB, s *redistest.Server) *observer {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1, MaxIdleConns: 1})
	tb.Cleanup(func() { c.Close() })
	o := &observer{c: c}
	o.conns = o.connections(tb)
	return o
}

func (o *observer) connections(tb testing.TB) int64 {
	tb.Helper()
	info, err := o.c.Info(context.Background(), "stats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	if _, rest, ok := strings.Cut(info, "total_connections_received:"); ok {
		fmt.Sscanf(rest, "%d", &n)
	}
	return n
}

// untouched reports whether nobody but the observer has connected and no key exists.
func (o *observer) untouched(tb testing.TB) (bool, string) {
	tb.Helper()
	keys, err := o.c.DBSize(context.Background()).Result()
	if err != nil {
		tb.Fatal(err)
	}
	conns := o.connections(tb)
	return keys == 0 && conns == o.conns, fmt.Sprintf("%d keys, %d connections besides ours", keys, conns-o.conns)
}

func notBeforeFlags(s *redistest.Server, key string, notBefore time.Time, more ...string) []string {
	return flags(s.URL(), key, "a", append([]string{"--not-before", notBefore.UTC().Format(time.RFC3339Nano)}, more...)...)
}

// notBeforeLead is how far ahead the tests' --not-before is: lockwrap, a process of its
// own, must start, connect and say it waits before then (1.5 s was tight on a loaded
// 2-core host); the tests wait for the instant, and no longer.
const notBeforeLead = 4 * time.Second

// awaitWaiting waits until lockwrap says it waits for its instant; it fails at once if
// lockwrap exited without waiting (it started after its --not-before: too slow a machine
// for the test's lead).
func awaitWaiting(t *testing.T, p *lockwrapProc) {
	t.Helper()
	waiting := func() bool { return strings.Contains(p.stderr.String(), "waiting") }
	eventually(t, "lockwrap to say it waits", func() bool { return waiting() || len(p.done) > 0 })
	if !waiting() {
		t.Fatalf("lockwrap did not wait (started after its --not-before?); stderr: %s", p.stderr)
	}
}

// TestNotBeforeWaitsForTheInstant: a pod created ahead of its occurrence neither touches
// Redis nor starts its command before --not-before; then it runs, and the report says when
// the command started.
func TestNotBeforeWaitsForTheInstant(t *testing.T) {
	s := redistest.Start(t)
	obs := newObserver(t, s)
	stamp := filepath.Join(t.TempDir(), "started")
	notBefore := time.Now().Add(notBeforeLead)
	p := startLockwrap(t, nil, cmdArgs(notBeforeFlags(s, "ahead", notBefore), stampCmd(stamp)...)...)
	awaitWaiting(t, p)

	// Every look at Redis whose reply came back before the instant must find it untouched.
	seen := 0
	eventually(t, "the command to run", func() bool {
		ok, what := obs.untouched(t)
		if time.Now().Before(notBefore) {
			seen++
			if !ok {
				t.Fatalf("before --not-before (%s to go): %s", time.Until(notBefore), what)
			}
		}
		_, err := os.Stat(stamp)
		return err == nil
	})
	if seen == 0 {
		t.Fatal("no look at Redis before the instant: the test proved nothing")
	}
	rep, code := p.wait(t)
	if code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("%d %+v", code, rep)
	}
	childAt := readStamp(t, stamp)
	startedAt, err := time.Parse(time.RFC3339Nano, rep.StartedAt)
	if err != nil {
		t.Fatalf("startedAt %q: %v", rep.StartedAt, err)
	}
	if childAt.Before(notBefore) || startedAt.Before(notBefore) {
		t.Fatalf("started before --not-before %s: command's clock %s, startedAt %s",
			notBefore.UTC().Format(time.RFC3339Nano), childAt.Format(time.RFC3339Nano), rep.StartedAt)
	}
	t.Logf("%d looks at Redis before the instant; command started %v after it (startedAt +%v)",
		seen, childAt.Sub(notBefore), startedAt.Sub(notBefore))
	if ok, _ := obs.untouched(t); ok {
		t.Fatal("the run left nothing in Redis")
	}
}

// TestSignalWhileWaitingIsInterrupted: the controller deletes a waiting pod (suspend,
// blackout, schedule change, deletion): SIGTERM or SIGINT before the instant ends the run
// as Interrupted, exit 70, without a connection to Redis or the command.
func TestSignalWhileWaitingIsInterrupted(t *testing.T) {
	s := redistest.Start(t)
	obs := newObserver(t, s)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			stamp := filepath.Join(t.TempDir(), "started")
			p := startLockwrap(t, nil, cmdArgs(notBeforeFlags(s, "ahead", time.Now().Add(10*time.Minute)), stampCmd(stamp)...)...)
			awaitWaiting(t, p)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			rep, code := p.wait(t)
			if code != wrapper.ExitInternal || rep.Outcome != report.Interrupted ||
				!strings.Contains(rep.Message, sig.String()) || !strings.Contains(rep.Message, "--not-before") ||
				rep.StartedAt != "" {
				t.Fatalf("%d %+v", code, rep)
			}
			if _, err := os.Stat(stamp); err == nil {
				t.Fatal("the command ran")
			}
			if ok, what := obs.untouched(t); !ok {
				t.Fatalf("Redis touched: %s", what)
			}
		})
	}
}

// TestNotBeforePassedRunsAtOnce: an instant already passed (the pod started late, or was
// created at the instant) does not wait; --not-after still applies.
func TestNotBeforePassedRunsAtOnce(t *testing.T) {
	s := redistest.Start(t)
	stamp := filepath.Join(t.TempDir(), "started")
	notBefore := time.Now().Add(-time.Second)
	p := startLockwrap(t, nil, cmdArgs(notBeforeFlags(s, "late", notBefore), stampCmd(stamp)...)...)
	rep, code := p.wait(t)
	if code != 0 || rep.Outcome != report.Succeeded || rep.StartedAt == "" || strings.Contains(p.stderr.String(), "waiting") {
		t.Fatalf("%d %+v; stderr %s", code, rep, p.stderr)
	}
	readStamp(t, stamp)

	// Past both --not-before and --not-after: Missed, as without --not-before.
	p = startLockwrap(t, nil, cmdArgs(notBeforeFlags(s, "late", time.Now().Add(-time.Minute),
		"--not-after", time.Now().Add(-time.Second).UTC().Format(time.RFC3339)), "true")...)
	if rep, code := p.wait(t); code != 0 || rep.Outcome != report.Missed {
		t.Fatalf("%d %+v", code, rep)
	}
}

// TestNotBeforeFromEnvironment: the controller passes the instant as
// $LOCKEDCRON_NOT_BEFORE; a --not-before after --not-after is refused before any wait.
func TestNotBeforeFromEnvironment(t *testing.T) {
	s := redistest.Start(t)
	stamp := filepath.Join(t.TempDir(), "started")
	notBefore := time.Now().Add(notBeforeLead)
	p := startLockwrap(t, []string{config.EnvNotBefore + "=" + notBefore.UTC().Format(time.RFC3339Nano)},
		cmdArgs(flags(s.URL(), "env", "a"), stampCmd(stamp)...)...)
	awaitWaiting(t, p)
	rep, code := p.wait(t)
	if code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("%d %+v", code, rep)
	}
	if at := readStamp(t, stamp); at.Before(notBefore) {
		t.Fatalf("command started at %s, before %s", at.Format(time.RFC3339Nano), notBefore.UTC().Format(time.RFC3339Nano))
	}

	s2 := redistest.Start(t)
	obs := newObserver(t, s2)
	p = startLockwrap(t, nil, cmdArgs(notBeforeFlags(s2, "bad", time.Now().Add(time.Hour),
		"--not-after", time.Now().Add(time.Minute).UTC().Format(time.RFC3339)), "true")...)
	rep, code = p.wait(t)
	if code != wrapper.ExitInternal || rep.Outcome != report.Error ||
		!strings.Contains(rep.Message, "--not-before") || !strings.Contains(rep.Message, "--not-after") {
		t.Fatalf("%d %+v", code, rep)
	}
	if ok, what := obs.untouched(t); !ok {
		t.Fatalf("bad input touched Redis: %s", what)
	}
}

// BenchmarkNotBeforeAccuracy prints how late after --not-before the command starts, over
// b.N real lockwrap processes each started 300ms ahead of its instant on a real Redis:
// the command's own clock (`date +%s.%N` exec'd by sh: what a job's first instruction
// sees), the report's startedAt (right after the process was created) and acquiredAt
// (the lock taken; ms precision, so up to 1ms early), p50 and max.
//
//	go test ./internal/wrapper/ -run '^$' -bench NotBeforeAccuracy -benchtime 20x
func BenchmarkNotBeforeAccuracy(b *testing.B) {
	s := redistest.Start(b)
	dir := b.TempDir()
	var child, started, acquired []time.Duration
	for i := 0; b.Loop(); i++ {
		stamp := filepath.Join(dir, fmt.Sprint(i))
		notBefore := time.Now().Add(300 * time.Millisecond)
		occ := occAt(time.Duration(i) * time.Minute)
		p := startLockwrap(b, nil, cmdArgs(notBeforeFlags(s, "bench", notBefore, "--occurrence", occ),
			"sh", "-c", `exec date +%s.%N >"$1"`, "sh", stamp)...)
		rep, code := p.wait(b)
		if code != 0 || rep.Outcome != report.Succeeded {
			b.Fatalf("%d %+v", code, rep)
		}
		at, err := time.Parse(time.RFC3339Nano, rep.StartedAt)
		if err != nil {
			b.Fatal(err)
		}
		acq, err := time.Parse(time.RFC3339Nano, rep.AcquiredAt)
		if err != nil {
			b.Fatal(err)
		}
		child = append(child, readUnixStamp(b, stamp).Sub(notBefore))
		acquired = append(acquired, acq.Sub(notBefore))
		started = append(started, at.Sub(notBefore))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, m := range []struct {
		name  string
		v     []time.Duration
		slack time.Duration // acquiredAt is in whole milliseconds
	}{{"acquiredAt", acquired, time.Millisecond}, {"startedAt", started, 0}, {"command", child, 0}} {
		slices.Sort(m.v)
		b.ReportMetric(ms(m.v[len(m.v)/2]), m.name+"-p50-ms")
		b.ReportMetric(ms(m.v[len(m.v)-1]), m.name+"-max-ms")
		if m.v[0] < -m.slack {
			b.Fatalf("%s started %v before --not-before", m.name, -m.v[0])
		}
	}
	b.ReportMetric(0, "ns/op")
}
