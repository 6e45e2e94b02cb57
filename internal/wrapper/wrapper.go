// Package wrapper is lockwrap's core: take the occurrence's lock, run the command under
// it, keep the lock renewed, record the result and write the report.
package wrapper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// ExitInternal is the exit code for failures before the command starts (bad input, Redis
// unreachable, not enough replicas).
const ExitInternal = 70

// Locker takes a lock for one occurrence.
type Locker interface {
	Acquire(ctx context.Context, req lock.Request) (*Grant, error)
}

// Lease is a held lock.
type Lease interface {
	// Renew resets the ttl if the lock is still ours; lock.ErrLost if not.
	Renew(ctx context.Context) error
	// Finish records lock.StateSucceeded / lock.StateFailed and releases the lock.
	Finish(ctx context.Context, state string) error
	// Release releases the lock and forgets the run (it never started).
	Release(ctx context.Context) error
}

// Grant is what Acquire returns.
type Grant struct {
	Lease     Lease
	Fence     int64
	Recovered bool
}

// RedisLocker is the Locker over internal/lock.
type RedisLocker struct{ L *lock.Locker }

// Acquire implements Locker.
func (r RedisLocker) Acquire(ctx context.Context, req lock.Request) (*Grant, error) {
	l, err := r.L.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return &Grant{Lease: l, Fence: l.Fence, Recovered: l.Recovered}, nil
}

var (
	_ Locker = RedisLocker{}
	_ Lease  = (*lock.Lease)(nil)
)

// Deps are Run's collaborators; zero fields get the real ones.
type Deps struct {
	Locker  Locker           // default: RedisLocker over a client for cfg.Redis
	Runner  Runner           // default: ProcessRunner (real processes)
	Signals <-chan os.Signal // signals for the child; default: none
	Stderr  io.Writer        // default: os.Stderr
	Environ []string         // the child's base environment; default: os.Environ()
}

// Run runs one occurrence of cmd under cfg's lock and returns the report and the exit
// code. It never writes the report itself (Main does).
func Run(ctx context.Context, cfg config.Config, cmd []string, d Deps) (rep report.Report, code int) {
	if d.Runner == nil {
		d.Runner = ProcessRunner{}
	}
	if d.Stderr == nil {
		d.Stderr = os.Stderr
	}
	if d.Environ == nil {
		d.Environ = os.Environ()
	}
	rep = report.Report{
		Outcome:    report.Error,
		Occurrence: cfg.Occurrence.UTC().Format(time.RFC3339),
		Key:        cfg.Key,
		Holder:     cfg.Holder,
	}
	fail := func(err error) (report.Report, int) {
		rep.Outcome = report.Error
		rep.Message = err.Error()
		fmt.Fprintf(d.Stderr, "lockwrap: %v\n", err)
		return rep, ExitInternal
	}

	// Signals before the command starts cancel the acquisition.
	actx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	preDone, preExited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(preExited)
		for {
			select {
			case sig := <-d.Signals:
				if s, ok := sig.(syscall.Signal); ok && (s == syscall.SIGCHLD || s == syscall.SIGURG || s == syscall.SIGWINCH) {
					continue
				}
				stop(fmt.Errorf("interrupted by %v before the command started", sig))
				return
			case <-preDone:
				return
			}
		}
	}()
	endPre := sync.OnceFunc(func() { close(preDone); <-preExited })
	defer endPre()

	if d.Locker == nil {
		c, err := lock.NewClient(cfg.Redis)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		d.Locker = RedisLocker{lock.New(c)}
	}

	// 1–2: acquire, with the contention policy.
	g, sentAt, err := acquire(actx, cfg, d.Locker, &rep)
	if err != nil {
		var held *lock.HeldError
		var sup *lock.SuppressedError
		switch {
		case errors.As(err, &sup):
			rep.Outcome = report.SuppressedDuplicate
			rep.HeldBy = sup.Holder // who ran it
			rep.Message = err.Error()
			return rep, 0
		case errors.As(err, &held):
			rep.Outcome = report.SkippedContention
			rep.HeldBy = held.Holder
			if cfg.Contention == config.ContentionRetry {
				rep.Message = fmt.Sprintf("%v; gave up after %d attempts", err, rep.Attempts)
			} else {
				rep.Message = err.Error()
			}
			return rep, 0
		case context.Cause(actx) != nil:
			return fail(context.Cause(actx))
		default:
			return fail(err)
		}
	}
	rep.FencingToken = g.Fence
	rep.Recovered = g.Recovered
	rep.AcquiredAt = stamp(time.Now())

	finish := func(state string) {
		err := finishWithRetry(ctx, cfg, g.Lease, state)
		rep.ReleasedAt = stamp(time.Now())
		if err != nil && !errors.Is(err, lock.ErrLost) {
			msg := fmt.Sprintf("could not record %s in Redis: %v", state, err)
			fmt.Fprintf(d.Stderr, "lockwrap: %s\n", msg)
			rep.Message = joinMsg(rep.Message, msg)
		}
	}
	endPre()
	if cause := context.Cause(actx); cause != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = g.Lease.Release(rctx)
		cancel()
		return fail(cause)
	}
	stop(nil) // from here on signals are forwarded, not acted on

	// 3: start the child.
	env := childEnv(d.Environ, cfg, g.Fence)
	proc, err := d.Runner.Start(cmd, env)
	if err != nil {
		finish(lock.StateFailed)
		return fail(fmt.Errorf("start %q: %w", cmd[0], err))
	}
	exited := make(chan int, 1)
	go func() { exited <- proc.Wait() }()

	// Renew until the child exits.
	rctx, stopRenew := context.WithCancel(ctx)
	defer stopRenew()
	lost := make(chan error, 1)
	go func() { lost <- renew(rctx, cfg, g.Lease, sentAt, d.Stderr) }()

	var killTimer <-chan time.Time
	terminated := false
	for {
		select {
		case code = <-exited:
			stopRenew()
			rep.ExitCode = code
			switch {
			case terminated:
				rep.Outcome = report.LockLost
				finish(lock.StateFailed)
			case code == 0:
				rep.Outcome = report.Succeeded
				finish(lock.StateSucceeded)
			default:
				rep.Outcome = report.Failed
				finish(lock.StateFailed)
			}
			return rep, code
		case sig := <-d.Signals:
			if s, ok := sig.(syscall.Signal); ok && s != syscall.SIGCHLD && s != syscall.SIGURG {
				_ = proc.Signal(s)
			}
		case err := <-lost:
			if err == nil { // renewal stopped without loss (context done)
				lost = nil
				continue
			}
			lost = nil
			rep.LockLost = true
			rep.Message = joinMsg(rep.Message, err.Error())
			fmt.Fprintf(d.Stderr, "lockwrap: %v\n", err)
			if cfg.OnLost == config.OnLostTerminate {
				terminated = true
				fmt.Fprintf(d.Stderr, "lockwrap: terminating the command (SIGTERM, SIGKILL after %v)\n", cfg.KillGrace)
				_ = proc.Signal(syscall.SIGTERM)
				killTimer = time.After(cfg.KillGrace)
			}
		case <-killTimer:
			killTimer = nil
			_ = proc.Signal(syscall.SIGKILL)
		}
	}
}

// acquire runs the acquire script once (Skip) or with full-jitter backoff (Retry). It
// returns when the ttl clock started: the time the successful attempt was sent.
func acquire(ctx context.Context, cfg config.Config, l Locker, rep *report.Report) (*Grant, time.Time, error) {
	req := lock.Request{
		Key: cfg.Key, Occurrence: cfg.Occurrence, Holder: cfg.Holder, TTL: cfg.TTL,
		Retention: cfg.DedupeRetention, MinReplicas: cfg.MinReplicas,
	}
	start := time.Now()
	defer func() { rep.WaitedMs = time.Since(start).Milliseconds() }()
	// wait.Backoff grows the cap (backoff, 2×, … up to max); the sleep is uniform in
	// [0, cap) — full jitter.
	caps := wait.Backoff{Duration: cfg.RetryBackoff, Factor: 2, Cap: cfg.RetryMaxBackoff, Steps: 64}
	for attempt := 1; ; attempt++ {
		rep.Attempts = attempt
		sentAt := time.Now()
		// One attempt may not hang longer than a ttl (or 10s): a later attempt or the
		// report is better than a stuck pod.
		actx, cancel := context.WithTimeout(ctx, max(cfg.TTL, 10*time.Second))
		g, err := l.Acquire(actx, req)
		cancel()
		if err == nil {
			return g, sentAt, nil
		}
		if errors.Is(err, lock.ErrSuppressed) || errors.Is(err, lock.ErrNotEnoughReplicas) ||
			cfg.Contention != config.ContentionRetry || ctx.Err() != nil {
			return nil, time.Time{}, err
		}
		if cfg.RetryAttempts > 0 && attempt >= cfg.RetryAttempts {
			return nil, time.Time{}, err
		}
		sleep := time.Duration(rand.Int64N(int64(caps.Step()) + 1))
		if !cfg.RetryDeadline.IsZero() && time.Now().Add(sleep).After(cfg.RetryDeadline) {
			return nil, time.Time{}, fmt.Errorf("%w (retry deadline %s)", err, cfg.RetryDeadline.Format(time.RFC3339))
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, time.Time{}, err
		case <-t.C:
		}
	}
}

// renew renews every RenewInterval. A failed renewal is retried until the lock would
// have expired (its last successful renewal's send time + ttl). It returns nil when ctx
// ends, else why the lock is lost.
func renew(ctx context.Context, cfg config.Config, l Lease, sentAt time.Time, stderr io.Writer) error {
	expiry := sentAt.Add(cfg.TTL)
	tick := time.NewTicker(cfg.RenewInterval)
	defer tick.Stop()
	retry := min(cfg.RenewInterval/4, 250*time.Millisecond)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		deadline := expiry
		if now := time.Now(); !now.Before(deadline) {
			// Past the expiry already (we were not scheduled, or frozen): one more
			// renewal tells whether the lock is still ours.
			deadline = now.Add(min(cfg.RenewInterval, time.Second))
		}
		ectx, cancel := context.WithDeadline(ctx, deadline)
		var lastErr, lostErr error
		var at time.Time
		err := wait.PollUntilContextCancel(ectx, retry, true, func(pctx context.Context) (bool, error) {
			at = time.Now()
			err := l.Renew(pctx)
			switch {
			case err == nil:
				return true, nil
			case errors.Is(err, lock.ErrLost):
				lostErr = err
				return false, err
			default:
				if lastErr == nil {
					fmt.Fprintf(stderr, "lockwrap: renewal failed, retrying until the lock expires: %v\n", err)
				}
				lastErr = err
				return false, nil
			}
		})
		cancel()
		switch {
		case err == nil:
			expiry = at.Add(cfg.TTL)
		case ctx.Err() != nil:
			return nil
		case lostErr != nil:
			return errors.New("lock lost: renewal found it expired or taken by another holder")
		default:
			if lastErr == nil {
				lastErr = err
			}
			return fmt.Errorf("lock lost: Redis unreachable until the lock expired: %v", lastErr)
		}
	}
}

// finishWithRetry records the result, retrying transient errors for up to a ttl (at
// least 2s, at most 10s).
func finishWithRetry(ctx context.Context, cfg config.Config, l Lease, state string) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(max(cfg.TTL, 2*time.Second), 10*time.Second))
	defer cancel()
	var last error
	_ = wait.PollUntilContextCancel(fctx, 100*time.Millisecond, true, func(pctx context.Context) (bool, error) {
		last = l.Finish(pctx, state)
		return last == nil || errors.Is(last, lock.ErrLost), nil
	})
	return last // the last attempt's error: nil, lock.ErrLost, or why Redis did not answer
}

// childEnv is base plus the occurrence's variables; lockwrap's Redis password is not
// passed on.
func childEnv(base []string, cfg config.Config, fence int64) []string {
	env := make([]string, 0, len(base)+3)
	drop := map[string]bool{
		config.EnvRedisPassword: true, config.EnvFencingToken: true,
		config.EnvOccurrence: true, config.EnvHolder: true,
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return append(env,
		config.EnvFencingToken+"="+strconv.FormatInt(fence, 10),
		config.EnvOccurrence+"="+cfg.Occurrence.UTC().Format(time.RFC3339),
		config.EnvHolder+"="+cfg.Holder,
	)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
