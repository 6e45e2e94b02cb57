package wrapper_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// flakyLease fails renewals with a transient error while down() says so; each renewal
// takes rtt (its round trip) to answer.
type flakyLease struct {
	mu       sync.Mutex
	down     func() bool
	rtt      time.Duration
	renewals int
	failed   int // renewals refused while down
	finished string
}

func (l *flakyLease) Renew(context.Context) error {
	time.Sleep(l.rtt)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down() {
		l.failed++
		return errors.New("dial tcp: connection refused")
	}
	l.renewals++
	return nil
}
func (l *flakyLease) Finish(_ context.Context, st string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished = st
	return nil
}
func (l *flakyLease) FinishWith(ctx context.Context, st string, _ lock.FinishOptions) (lock.FinishResult, error) {
	return lock.FinishResult{}, l.Finish(ctx, st)
}
func (l *flakyLease) Release(context.Context) error { return nil }

type fakeLocker struct {
	lease   wrapper.Lease
	acquire func(ctx context.Context) error
}

func (f fakeLocker) Acquire(ctx context.Context, _ lock.Request) (*wrapper.Grant, error) {
	if f.acquire != nil {
		if err := f.acquire(ctx); err != nil {
			return nil, err
		}
	}
	return &wrapper.Grant{Lease: f.lease, Fence: 5}, nil
}

var _ wrapper.Locker = fakeLocker{}

func fakeCfg(t *testing.T, more ...string) config.Config {
	cfg, _, err := config.Parse(append(append([]string{"--redis-url", "redis://unused", "--key", "k",
		"--ttl", "1s", "--renew-interval", "200ms", "--kill-grace", "500ms"}, more...), "--", "x"), nil) // later flags win
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestFlakyRedisShorterThanTTL(t *testing.T) {
	// Down from 50ms to 250ms after the acquisition (not after the test's start: on a
	// loaded host the set-up took longer than that, and the run saw no outage at all):
	// the renewal at 200ms fails and is retried until it works, before the point where
	// the command would be stopped (acquired at 0, ttl 1s, kill grace 300ms, margin
	// 100ms: SIGTERM at 600ms).
	var acquired time.Time // set under l.mu
	l := &flakyLease{}
	l.down = func() bool { d := time.Since(acquired); return d > 50*time.Millisecond && d < 250*time.Millisecond }
	locker := fakeLocker{lease: l, acquire: func(context.Context) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		acquired = time.Now()
		return nil
	}}
	g := newGate(t)
	done := make(chan result, 1)
	go func() {
		cfg := fakeCfg(t, "--kill-grace", "300ms")
		rep, code := wrapper.Run(context.Background(), cfg, g.cmd(0), wrapper.Deps{Locker: locker, Stderr: &syncBuf{}})
		done <- result{rep, code}
	}()
	eventually(t, "renewals after the outage", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !acquired.IsZero() && time.Since(acquired) > 1200*time.Millisecond && l.renewals >= 2
	})
	g.release(t)
	r := await(t, done)
	if r.code != 0 || r.rep.Outcome != report.Succeeded || r.rep.LockLost || l.finished != lock.StateSucceeded || r.rep.FencingToken != 5 {
		t.Fatalf("%+v finished=%q", r, l.finished)
	}
	if l.failed == 0 {
		t.Fatal("no renewal failed: the run saw no outage, and proved nothing")
	}
}

// TestHealthyRunAtTheTTLBound: ttl = renew interval + kill grace + margin is accepted (by
// lockwrap and by admission), and its SIGTERM point came exactly an interval after the
// acquire was sent: when the first renewal was sent. Its answer, however quick (2ms
// here), came after that point, and every run on a healthy Redis was stopped there,
// LockLost. Renewals are now sent early enough for their answer, and one retry, to come
// before the stop point.
func TestHealthyRunAtTheTTLBound(t *testing.T) {
	cfg := fakeCfg(t, "--ttl", "3s", "--renew-interval", "1s", "--kill-grace", "1900ms")
	l := &flakyLease{down: func() bool { return false }, rtt: 2 * time.Millisecond}
	stderr := &syncBuf{}
	rep, code := wrapper.Run(context.Background(), cfg, []string{"sleep", "2.2"}, wrapper.Deps{Locker: fakeLocker{lease: l}, Stderr: stderr})
	l.mu.Lock()
	defer l.mu.Unlock()
	if code != 0 || rep.Outcome != report.Succeeded || l.finished != lock.StateSucceeded || l.renewals < 2 {
		t.Fatalf("healthy Redis, every renewal answered in 2ms: exit %d, outcome %s (%q), %q recorded after %d renewals; stderr: %s",
			code, rep.Outcome, rep.Message, l.finished, l.renewals, stderr)
	}
}

func TestFlakyRedisPastTTL(t *testing.T) {
	for _, onLost := range []string{"terminate", "continue"} {
		t.Run(onLost, func(t *testing.T) {
			l := &flakyLease{down: func() bool { return true }}
			stderr := &syncBuf{}
			g := newGate(t)
			done := make(chan result, 1)
			go func() {
				rep, code := wrapper.Run(context.Background(), fakeCfg(t, "--on-lost", onLost), g.cmd(4),
					wrapper.Deps{Locker: fakeLocker{lease: l}, Stderr: stderr})
				done <- result{rep, code}
			}()
			if onLost == "continue" {
				eventually(t, "the loss", func() bool { return strings.Contains(stderr.String(), "lock lost") })
				g.release(t)
			}
			r := await(t, done)
			switch onLost {
			case "terminate":
				if r.code != 143 || r.rep.Outcome != report.LockLost || l.finished != lock.StateFailed {
					t.Fatalf("%+v", r)
				}
			case "continue":
				if r.code != 4 || r.rep.Outcome != report.LockLost || !r.rep.LockLost || l.finished != lock.StateFailed {
					t.Fatalf("%+v", r)
				}
			}
			if !strings.Contains(r.rep.Message, "unreachable") || !strings.Contains(r.rep.Message, "connection refused") {
				t.Fatalf("message %q", r.rep.Message)
			}
		})
	}
}

func TestKillGraceEscalatesToSIGKILL(t *testing.T) {
	l := &flakyLease{down: func() bool { return true }}
	dir := t.TempDir()
	cmd := []string{"sh", "-c", `trap '' TERM; touch "$1/started"; while [ -d "$1" ]; do sleep 0.02; done`, "sh", dir}
	cfg := fakeCfg(t, "--kill-grace", "200ms")
	rep, code := wrapper.Run(context.Background(), cfg, cmd, wrapper.Deps{Locker: fakeLocker{lease: l}, Stderr: &syncBuf{}})
	if code != 128+int(syscall.SIGKILL) || rep.Outcome != report.LockLost {
		t.Fatalf("%d %+v", code, rep)
	}
}

func TestSignalBeforeStartAborts(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	blocked := fakeLocker{acquire: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	rep, code := wrapper.Run(context.Background(), fakeCfg(t), []string{"true"}, wrapper.Deps{Locker: blocked, Signals: sigs, Stderr: &syncBuf{}})
	if code != wrapper.ExitInternal || rep.Outcome != report.Interrupted || !strings.Contains(rep.Message, "interrupted by terminated") {
		t.Fatalf("%d %+v", code, rep)
	}
}

// A fencing counter out of range is not a passing fault: every attempt would be refused
// the same way. lockwrap stops at the first one and ends Error with the lock's reason
// (which names the key and the fix); the command does not run.
func TestFenceOutOfRangeIsNotRetried(t *testing.T) {
	calls := 0
	locker := fakeLocker{acquire: func(context.Context) error {
		calls++
		return fmt.Errorf("%w: lockedcron:{k}:fence holds \"1e300\"", lock.ErrFenceOutOfRange)
	}}
	cfg := fakeCfg(t, "--contention", "retry", "--retry-attempts", "5", "--retry-backoff", "10ms", "--retry-max-backoff", "10ms")
	dir := t.TempDir()
	ran := dir + "/ran"
	rep, code := wrapper.Run(context.Background(), cfg, []string{"touch", ran}, wrapper.Deps{Locker: locker, Stderr: &syncBuf{}})
	if calls != 1 || rep.Attempts != 1 || code == 0 || rep.Outcome != report.Error ||
		!strings.Contains(rep.Message, "lockedcron:{k}:fence") {
		t.Fatalf("calls %d, attempts %d, code %d, outcome %s, message %q", calls, rep.Attempts, code, rep.Outcome, rep.Message)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran: %v", err)
	}
}
