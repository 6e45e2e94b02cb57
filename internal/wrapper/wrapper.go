// Package wrapper is lockwrap's core: take the occurrence's lock, run the command under
// it, keep the lock renewed, record the result and write the report.
package wrapper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/lockedcron/lockedcron/internal/defaults"
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
	// FinishWith records lock.StateSucceeded / lock.StateFailed (with a success, also the
	// watermark) and releases the lock (lock.Lease.FinishWith).
	FinishWith(ctx context.Context, state string, opts lock.FinishOptions) (lock.FinishResult, error)
	// Release releases the lock and forgets the run (it never started).
	Release(ctx context.Context) error
}

// Grant is what Acquire returns.
type Grant struct {
	Lease     Lease
	Fence     int64
	Recovered bool
	// Warnings say how the Redis serving the lock could lose it (no persistence, eviction).
	Warnings []string
	// LastSuccess is the key's last successful run and watermark (nil: none recorded).
	LastSuccess *lock.Success
}

// RedisLocker is the Locker over internal/lock.
type RedisLocker struct{ L *lock.Locker }

// Abandon implements abandoner.
func (r RedisLocker) Abandon(ctx context.Context, req lock.Request) error {
	return r.L.Abandon(ctx, req)
}

// abandoner is a Locker that can undo what attempts whose replies were lost may have done
// (lock.Locker.Abandon).
type abandoner interface {
	Abandon(ctx context.Context, req lock.Request) error
}

// abandon undoes, when l can, what the acquire's attempts may have done unbeknown to us
// (a reply lost, then we gave up): best effort, for a few seconds at most.
func abandon(ctx context.Context, cfg config.Config, token string, l Locker, stderr io.Writer) {
	a, ok := l.(abandoner)
	if !ok {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := a.Abandon(actx, request(cfg, token)); err != nil {
		fmt.Fprintf(stderr, "lockwrap: could not undo a lost acquire attempt (the lock, if it took it, expires in %s): %v\n", cfg.TTL, err)
	}
}

// Acquire implements Locker.
func (r RedisLocker) Acquire(ctx context.Context, req lock.Request) (*Grant, error) {
	l, err := r.L.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return &Grant{Lease: l, Fence: l.Fence, Recovered: l.Recovered, Warnings: l.Warnings, LastSuccess: l.LastSuccess}, nil
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
	Clock   clock.Clock      // waits for --not-before and stamps startedAt; default: the real clock
	// Exited, when set, is called once, as soon as the command's exit is known (its first
	// process reaped), before its strays are sought and its result recorded, with the
	// report a run ended from then on (a kubelet's SIGKILL at the end of its grace) must
	// leave: Provisional's. Main writes it to --termination-log; the final report
	// overwrites it.
	Exited func(report.Report)
}

// Run runs one occurrence of cmd under cfg's lock and returns the report and the exit
// code. It never writes the report itself (Main does).
//
// The rule that keeps two holders from overlapping: the command is dead before the lock
// can expire. Every successful renewal (or the acquisition) was sent at some instant S;
// Redis cannot expire the lock before S + ttl. If no later renewal succeeds, the command
// gets SIGTERM at S + ttl − killGrace − margin and SIGKILL at S + ttl − margin, margin
// covering the drift between our clock and Redis's (defaults.Margin).
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
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
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
	interrupted := func(cause error) (report.Report, int) {
		rep.Outcome = report.Interrupted
		rep.Message = cause.Error() + "; the command did not run"
		fmt.Fprintf(d.Stderr, "lockwrap: %s\n", rep.Message)
		return rep, ExitInternal
	}
	// The ledger says whether the occurrence already ran only while its entry lives:
	// --dedupe-retention from when it was written, at or after the occurrence. A run that
	// starts later (a controller frozen or down past the retention, a starting deadline
	// longer than it) could run an occurrence a second time whose success the ledger has
	// forgotten: it is missed instead. The ttl is a margin for the clocks of the holders.
	deadline := "the occurrence's deadline (--not-after)"
	if end := cfg.Occurrence.Add(cfg.DedupeRetention - cfg.TTL); cfg.NotAfter.IsZero() || end.Before(cfg.NotAfter) {
		cfg.NotAfter = end
		deadline = fmt.Sprintf("the end of what the ledger remembers of the occurrence (--occurrence + --dedupe-retention %v − --ttl %v)", cfg.DedupeRetention, cfg.TTL)
	}
	missed := func(at time.Time) (report.Report, int) {
		rep.Outcome = report.Missed
		rep.Message = fmt.Sprintf("too late to start at %s: %s was %s; the command did not run",
			stamp(at), deadline, cfg.NotAfter.UTC().Format(time.RFC3339))
		fmt.Fprintf(d.Stderr, "lockwrap: %s\n", rep.Message)
		return rep, 0
	}

	// A container restarted in its pod (restartPolicy OnFailure) past --backoff-limit runs
	// nothing more, and exits 0 so that the kubelet stops restarting it: the attempt
	// before is what the controller counts (the kubelet keeps its report).
	if cfg.BackoffLimit >= 0 {
		switch n, err := countAttempt(cfg.AttemptsDir); {
		case err != nil:
			warn(&rep, d.Stderr, fmt.Sprintf("--attempts-dir: %v: this attempt is not counted, and --backoff-limit not applied to it", err))
		case n > cfg.BackoffLimit+1:
			rep.Message = notRunAgain(n, cfg.BackoffLimit)
			fmt.Fprintf(d.Stderr, "lockwrap: %s\n", rep.Message)
			return rep, 0
		}
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
				if !interrupts(sig) {
					continue
				}
				stop(&interruptError{sig})
				return
			case <-preDone:
				return
			}
		}
	}()
	endPre := sync.OnceFunc(func() { close(preDone); <-preExited })
	defer endPre()

	// 0: a pod created ahead of its occurrence waits for the instant (--not-before) before
	// anything else: no Redis connection, no command. A signal meanwhile (the controller
	// deleted the pod: suspend, blackout, schedule change) ends the run as Interrupted.
	if !cfg.NotBefore.IsZero() {
		if left := cfg.NotBefore.Sub(d.Clock.Now().Round(0)); left > 0 {
			fmt.Fprintf(d.Stderr, "lockwrap: waiting %v for the occurrence's instant (--not-before %s)\n",
				left.Round(time.Millisecond), cfg.NotBefore.UTC().Format(time.RFC3339Nano))
		}
		if err := waitUntil(actx, d.Clock, cfg.NotBefore, maxWaitSlice); err != nil {
			var intr *interruptError
			if errors.As(err, &intr) {
				rep.Outcome = report.Interrupted
				rep.Message = fmt.Sprintf("interrupted by %v while waiting for the occurrence's instant (--not-before %s); the command did not run",
					intr.sig, cfg.NotBefore.UTC().Format(time.RFC3339Nano))
				fmt.Fprintf(d.Stderr, "lockwrap: %s\n", rep.Message)
				return rep, ExitInternal
			}
			return fail(err)
		}
	}

	// A run that starts after its deadline (a pod stuck Pending for hours, a blackout that
	// began) does not run the command, whatever the contention policy.
	if now := time.Now(); !cfg.NotAfter.IsZero() && now.After(cfg.NotAfter) {
		return missed(now)
	}

	if d.Locker == nil {
		c, err := lock.NewGuardedClient(cfg.Redis, cfg.RedisAllowed)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		d.Locker = RedisLocker{lock.New(c)}
	}

	// 1–2: acquire, with the contention policy. One token for every attempt of this run,
	// so an attempt whose reply was lost is recognised by the next one.
	token, err := lock.NewToken()
	if err != nil {
		return fail(err)
	}
	g, sentAt, err := acquire(actx, cfg, token, d.Locker, &rep)
	if err != nil {
		var held *lock.HeldError
		var sup *lock.SuppressedError
		var bo *lock.BlackoutError
		var intr *interruptError
		switch {
		case errors.As(context.Cause(actx), &intr):
			abandon(ctx, cfg, token, d.Locker, d.Stderr)
			return interrupted(intr)
		case errors.As(err, &bo):
			// Our job's blackout began after our pod was made (we waited for the lock
			// when a rollout began): the job does not start in it. Counted missed, as a
			// pod the controller withdraws in a blackout before its job started. An
			// earlier attempt whose reply was lost may have taken the lock: let it go.
			abandon(ctx, cfg, token, d.Locker, d.Stderr)
			rep.Outcome = report.Missed
			rep.Message = fmt.Sprintf("held back by a blackout of the job (%s) that began at %s, after this run was made at %s; the command did not run",
				bo.Reason, stamp(bo.Since), stamp(cfg.MadeAt))
			fmt.Fprintf(d.Stderr, "lockwrap: %s\n", rep.Message)
			return rep, 0
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
		default:
			abandon(ctx, cfg, token, d.Locker, d.Stderr)
			return fail(err)
		}
	}
	rep.FencingToken = g.Fence
	rep.Recovered = g.Recovered
	rep.AcquiredAt = stamp(time.Now())
	rep.Warnings = append(rep.Warnings, g.Warnings...)
	for _, w := range g.Warnings {
		fmt.Fprintf(d.Stderr, "lockwrap: warning: %s\n", w)
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = g.Lease.Release(rctx)
		cancel()
		rep.ReleasedAt = stamp(time.Now())
	}

	endPre()
	var intr *interruptError
	if errors.As(context.Cause(actx), &intr) {
		release()
		return interrupted(intr)
	}
	stop(nil) // from here on signals are forwarded, not acted on
	if !cfg.NotAfter.IsZero() && sentAt.After(cfg.NotAfter) {
		release()
		return missed(sentAt)
	}
	// The command starts only before its kill point (supervise): a grant that came late
	// (a reply slower than the ttl, a stalled process) leaves a lock that may have expired
	// and be another holder's already; started, the command ran alongside theirs.
	if killPoint := sentAt.Add(cfg.TTL - cfg.KillGrace - defaults.Margin(cfg.TTL)); !time.Now().Before(killPoint) {
		release()
		return fail(fmt.Errorf("the lock was granted at %s, after the point at which a holder that cannot renew stops its command (sent %s + --ttl %v − --kill-grace %v − a margin): the command did not run",
			stamp(time.Now()), stamp(sentAt), cfg.TTL, cfg.KillGrace))
	}

	// 3: start the child, with the key's last success and a file for its next watermark.
	if g.LastSuccess != nil {
		rep.PreviousWatermark = report.ShortWatermark(g.LastSuccess.Watermark)
	}
	wmFile, cleanup, err := watermarkFile()
	if err != nil {
		warn(&rep, d.Stderr, fmt.Sprintf("no %s for the command: %v", config.EnvWatermarkFile, err))
	}
	defer cleanup()
	env := childEnv(d.Environ, cfg, g.Fence, g.LastSuccess, wmFile)
	proc, err := d.Runner.Start(cmd, env)
	if err == nil {
		rep.StartedAt = d.Clock.Now().UTC().Format(time.RFC3339Nano)
	}
	if err != nil {
		finishRun(ctx, cfg, g.Lease, lock.StateFailed, "", sentAt.Add(cfg.TTL), nil, d.Signals, &rep, d.Stderr)
		return fail(fmt.Errorf("start %q: %w", cmd[0], err))
	}
	x := &supervision{}
	if d.Exited != nil {
		x.exited = func(code int, stopped bool) { d.Exited(Provisional(rep, code, stopped, time.Now())) }
	}
	code, stopped, validUntil := supervise(ctx, cfg, g.Lease, proc, sentAt, d.Signals, &rep, d.Stderr, x)
	if s, ok := proc.(interface{ StraysLeft() string }); ok && s.StraysLeft() != "" {
		warn(&rep, d.Stderr, "processes of the command may outlive the lock's release: "+s.StraysLeft())
	}

	// 4: record the end and release.
	rep.ExitCode = code
	state := lock.StateFailed
	if code == 0 && !stopped {
		// The command completed: record it, lock lost or not, so that nobody runs the
		// occurrence again (unless another run owns the entry by now).
		state = lock.StateSucceeded
	}
	var wm string
	if state == lock.StateSucceeded && wmFile != "" {
		wm = readWatermark(wmFile, &rep, d.Stderr)
	}
	finishRun(ctx, cfg, g.Lease, state, wm, validUntil, x.stopSig, d.Signals, &rep, d.Stderr)
	switch {
	case rep.LockLost:
		rep.Outcome = report.LockLost
	case code == 0:
		rep.Outcome = report.Succeeded
	default:
		rep.Outcome = report.Failed
	}
	return rep, code
}

// Provisional is the report of a run whose command exited with code (stopped: lockwrap
// stopped it for the lock's sake) before lockwrap has recorded the result and released the
// lock: what is left when lockwrap is ended from then on, before its final report (a pod's
// kubelet SIGKILLs it at the end of its grace: the soak of seed 951265272 found a pod
// counted "exited 137 without a valid report" for a run whose job had ended 143). Nothing
// may have recorded the result: the entry stays "running", the lock expires by itself,
// and another holder may run the occurrence again. So a command that exited 0 is LockLost
// (lockLost: true), never a clean Succeeded (the rule of finishRun, which reports the same
// run so when its record is interrupted); one that exited otherwise is Failed (a failed
// occurrence may run again anyway), or LockLost when the lock was lost already.
func Provisional(rep report.Report, code int, stopped bool, at time.Time) report.Report {
	p := rep
	p.Warnings = append([]string(nil), rep.Warnings...)
	p.ExitCode = code
	p.ReleasedAt = ""
	state := lock.StateFailed
	if code == 0 && !stopped {
		state = lock.StateSucceeded
	}
	switch {
	case p.LockLost:
		p.Outcome = report.LockLost
	case state == lock.StateSucceeded:
		p.Outcome, p.LockLost = report.LockLost, true
	default:
		p.Outcome = report.Failed
	}
	p.Message = joinMsg(p.Message, fmt.Sprintf("lockwrap was ended before its final report: this one was written when the command exited %d (at %s), "+
		"before %s was recorded in the ledger and the lock released; if nothing recorded it, the lock expires by itself and another holder may run this occurrence again",
		code, stamp(at), state))
	return p
}

// maxWaitSlice is the longest single timer of a --not-before wait: the wall clock is read
// again at least this often, so a clock stepped forward meanwhile delays the start by at
// most this much.
const maxWaitSlice = time.Second

// waitUntil returns when clk's wall time is at or after t, or ctx's cause when ctx ends
// first. Timers run on the monotonic clock and each is at most slice long; after every
// one the wall clock is read again, and while it is still before t (the clock was stepped
// back meanwhile, or a timer woke a little early) it waits again: never returns early.
func waitUntil(ctx context.Context, clk clock.Clock, t time.Time, slice time.Duration) error {
	for {
		// Round(0) drops the monotonic reading: the comparison is on the wall clock.
		left := t.Sub(clk.Now().Round(0))
		if left <= 0 {
			return nil
		}
		timer := clk.NewTimer(min(left, slice))
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-timer.C():
		}
	}
}

// interruptError is a signal that arrived before the command started.
type interruptError struct{ sig os.Signal }

func (e *interruptError) Error() string {
	return fmt.Sprintf("interrupted by %v before the command started", e.sig)
}

// forwardable reports whether a signal means something to the command: not SIGCHLD or
// SIGURG (Go's preemption).
func forwardable(sig os.Signal) bool {
	s, ok := sig.(syscall.Signal)
	return !ok || (s != syscall.SIGCHLD && s != syscall.SIGURG)
}

// interrupts reports whether a signal that comes before the command starts aborts the
// run: a forwardable one, but SIGWINCH (a terminal resized: nothing to stop for).
func interrupts(sig os.Signal) bool {
	return forwardable(sig) && sig != syscall.SIGWINCH
}

// exitGrace is how long a stop step waits for an exit that may already have happened
// (see supervise): a small part of the margin before the kill point (≥ 100ms).
const exitGrace = 20 * time.Millisecond

// supervise waits for the command, forwarding signals and renewing the lock, and stops
// the command before the lock can expire when renewals do not get through. It returns
// the exit code and whether lockwrap stopped the command for the lock's sake.
//
// validUntil is when the lock expires unless renewed again: the last renewal that got
// through (or the acquire) plus the ttl.
func supervise(ctx context.Context, cfg config.Config, l Lease, proc Process, sentAt time.Time,
	signals <-chan os.Signal, rep *report.Report, stderr io.Writer, x *supervision) (code int, stopped bool, validUntil time.Time) {
	if x == nil {
		x = &supervision{}
	}
	exited := make(chan int, 1)
	go func() { exited <- proc.Wait() }()

	rctx, stopRenew := context.WithCancel(ctx)
	renewals := make(chan renewal)
	renewerDone := make(chan struct{})
	go func() { defer close(renewerDone); renewLoop(rctx, cfg, l, sentAt, renewals, stderr) }()
	defer func() { stopRenew(); <-renewerDone }()

	margin := defaults.Margin(cfg.TTL)
	terminate := cfg.OnLost == config.OnLostTerminate
	lastSent := sentAt
	// Terminate: SIGTERM at termAt, SIGKILL at killAt. Continue: the loss is noted at expiry.
	termAt := func() time.Time { return lastSent.Add(cfg.TTL - cfg.KillGrace - margin) }
	killAt := func() time.Time { return lastSent.Add(cfg.TTL - margin) }
	expiry := func() time.Time { return lastSent.Add(cfg.TTL) }
	first := expiry
	if terminate {
		first = termAt
	}
	deadline := time.NewTimer(time.Until(first()))
	defer deadline.Stop()
	var killC <-chan time.Time
	var lastFail error // why the current streak of renewals fails
	unreachable := func() string {
		switch {
		case lastFail == nil:
			return "Redis unreachable: no renewal got through"
		case errors.Is(lastFail, lock.ErrNotEnoughReplicas):
			return fmt.Sprintf("no renewal reached --min-replicas %d replicas (%v)", cfg.MinReplicas, lastFail)
		}
		return fmt.Sprintf("Redis unreachable (%v)", lastFail)
	}
	lost := func(why string) { markLockLost(rep, stderr, why) }
	// stopEscaped: the stop points' signals also go to the command's processes that left
	// its group (setsid), without waiting for its first process to end.
	stopEscaped := func(syscall.Signal) {}
	if p, ok := proc.(interface{ StopEscaped(syscall.Signal) }); ok {
		stopEscaped = p.StopEscaped
	}
	stop := func(killBy time.Time) {
		if stopped {
			return
		}
		stopped = true
		fmt.Fprintf(stderr, "lockwrap: terminating the command (SIGTERM now, SIGKILL at %s)\n", stamp(killBy))
		_ = proc.Signal(syscall.SIGTERM)
		stopEscaped(syscall.SIGTERM)
		killC = time.After(time.Until(killBy))
	}
	// ended: the first process's exit, as soon as it is reaped. proc.Wait returns only
	// after it has killed the rest of the group and looked for strays (up to
	// strayDeadline): a stop point falling due meanwhile found no exit, and a command that
	// had ended in time, exit 0, was recorded as stopped (failed) and ran again.
	var ended <-chan int
	if p, ok := proc.(interface{ LeaderExited() <-chan int }); ok {
		ended = p.LeaderExited()
	}
	// told: x.exited was called (once, at the first sign of the exit); leaderDone: the
	// loop took the first process's exit from ended (then proc.Wait's return follows).
	told, leaderDone := false, false
	tell := func(c int) {
		if !told {
			told = true
			if x.exited != nil {
				x.exited(c, stopped)
			}
		}
	}
	// hasExited: the command's exit, if it is ready (the first process's: then it waits
	// for the rest of proc.Wait). A wake-up (after SIGSTOP, a slow node) can find the exit
	// and a deadline ready together, and select picks either: the exit wins, or a command
	// that finished in time would be recorded as stopped.
	// The goroutine that reports the exit may not have run yet at that wake-up, so the
	// stop steps (SIGTERM) give it exitGrace first; the kill point waits for nothing.
	hasExited := func(grace time.Duration) (int, bool) {
		if leaderDone {
			return <-exited, true
		}
		if grace <= 0 {
			select {
			case c := <-exited:
				tell(c)
				return c, true
			case c := <-ended:
				tell(c)
				return <-exited, true
			default:
				return 0, false
			}
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case c := <-exited:
			tell(c)
			return c, true
		case c := <-ended:
			tell(c)
			return <-exited, true
		case <-t.C:
			return 0, false
		}
	}
	for {
		select {
		case code = <-exited:
			tell(code)
			return code, stopped, expiry()
		case c := <-ended:
			// The first process has ended; proc.Wait still kills the rest of the group
			// and seeks strays (up to strayDeadline) before it returns. Said at once:
			// lockwrap ended from here on (a kubelet's SIGKILL) leaves a report.
			ended, leaderDone = nil, true
			tell(c)
		case sig := <-signals:
			if s, ok := sig.(syscall.Signal); ok && forwardable(sig) {
				_ = proc.Signal(s)
				if stopsFinish(s) {
					x.stopSig = &stopSignal{s}
				}
			}
		case r := <-renewals:
			if r.failed != nil {
				lastFail = r.failed
				continue
			}
			if r.err == nil {
				lastFail = nil
				if !stopped && !rep.LockLost {
					lastSent = r.sentAt
					deadline.Reset(time.Until(first()))
				}
				continue
			}
			if c, ok := hasExited(exitGrace); ok {
				return c, stopped, expiry()
			}
			lost(r.err.Error())
			if terminate {
				// Someone else may hold it already: stop at once, kill within the grace
				// and never later than the kill point of our last renewal.
				stop(earliest(killAt(), time.Now().Add(cfg.KillGrace)))
			}
		case <-deadline.C:
			if c, ok := hasExited(exitGrace); ok {
				return c, stopped, expiry()
			}
			if terminate {
				lost(fmt.Sprintf("lock lost: %s since %s; stopping the command before the lock can expire (at %s)",
					unreachable(), stamp(lastSent), stamp(expiry())))
				stop(killAt())
			} else {
				lost(fmt.Sprintf("lock lost: %s since %s; the lock may have expired at %s (on-lost continue: the command goes on)",
					unreachable(), stamp(lastSent), stamp(expiry())))
			}
		case <-killC:
			// First, whatever the first process did: those that left the group die at the
			// kill point even when it has exited and Wait is still seeking strays (which
			// hasExited then waits for, past the lock's expiry).
			stopEscaped(syscall.SIGKILL)
			if c, ok := hasExited(0); ok {
				return c, stopped, expiry()
			}
			killC = nil
			fmt.Fprintf(stderr, "lockwrap: killing the command (SIGKILL)\n")
			_ = proc.Signal(syscall.SIGKILL)
		}
	}
}

// supervision is what supervise tells Run besides the exit: exited (if set) is called once,
// as soon as the command's exit is known; stopSig is the last stop signal (stopsFinish)
// forwarded to the command, nil if none.
type supervision struct {
	exited  func(code int, stopped bool)
	stopSig *stopSignal
}

// stopsFinish reports whether sig, sent to lockwrap, means it is being stopped (a pod being
// deleted, a terminal's ^C or ^\): the retries of a result's record end (finishWithRetry).
func stopsFinish(sig syscall.Signal) bool {
	return sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT
}

// renewal is one renewal's result: when the successful one was sent, why the lock is
// lost (err), or the first error of a streak of failed attempts (failed).
type renewal struct {
	sentAt time.Time
	err    error
	failed error
}

// renewLoop renews renewEvery after the acquisition was sent (sentAt) and after each
// renewal that got through was, retrying a failed renewal quickly until it gets through,
// and reports each success and the loss (then stops) on out. The first renewal is timed
// from the acquisition, not from the command's start: a slow grant (a WAIT for replicas,
// a retried reply) leaves the command less than an interval before its kill point, which
// ttl ≥ renew interval + kill grace + margin only keeps clear when renewals come at most
// an interval after the last one sent.
func renewLoop(ctx context.Context, cfg config.Config, l Lease, sentAt time.Time, out chan<- renewal, stderr io.Writer) {
	send := func(r renewal) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	every := renewEvery(cfg)
	next := time.NewTimer(time.Until(sentAt.Add(every)))
	defer next.Stop()
	retry := renewRetry(cfg)
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		var lastErr, lostErr error
		var at time.Time
		err := wait.PollUntilContextCancel(ctx, retry, true, func(context.Context) (bool, error) {
			at = time.Now()
			// One attempt at a time, none longer than an interval.
			actx, cancel := context.WithTimeout(ctx, cfg.RenewInterval)
			err := l.Renew(actx)
			cancel()
			switch {
			case err == nil:
				return true, nil
			case errors.Is(err, lock.ErrLost):
				lostErr = err
				return false, err
			default:
				if lastErr == nil {
					fmt.Fprintf(stderr, "lockwrap: renewal failed, retrying: %v\n", err)
					send(renewal{failed: err})
				}
				lastErr = err
				return false, nil
			}
		})
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if !send(renewal{sentAt: at}) {
				return
			}
			next.Reset(time.Until(at.Add(every)))
		case lostErr != nil:
			send(renewal{err: errors.New("lock lost: renewal found it expired or taken by another holder")})
			return
		}
	}
}

// renewRetry is how soon a failed renewal attempt is tried again.
func renewRetry(cfg config.Config) time.Duration {
	return min(cfg.RenewInterval/4, 250*time.Millisecond)
}

// renewEvery is how long after the last renewal that got through (or the acquisition) was
// sent the next one is: the renewal interval, or less, so that the renewal's answer, after
// one retry of a failed attempt, can come before the SIGTERM point (supervise): it is sent
// at the latest renewRetry + margin before that point. At the bound admission allows
// (ttl = interval + kill grace + margin) the SIGTERM point was the instant the renewal was
// sent, an interval after the last: its answer, however quick, came after it, and a
// healthy Redis lost every run at its first renewal. Never less than half the interval,
// so that a ttl with little slack does not make renewals spin.
func renewEvery(cfg config.Config) time.Duration {
	margin := defaults.Margin(cfg.TTL)
	beforeStop := cfg.TTL - cfg.KillGrace - margin - (renewRetry(cfg) + margin)
	return max(cfg.RenewInterval/2, min(cfg.RenewInterval, beforeStop))
}

// acquire runs the acquire script once (Skip) or with full-jitter backoff (Retry), until
// the earlier of the retry deadline and --not-after. It returns when the ttl clock
// started: the time the successful attempt was sent.
func acquire(ctx context.Context, cfg config.Config, token string, l Locker, rep *report.Report) (*Grant, time.Time, error) {
	req := request(cfg, token)
	deadline := earliest(cfg.RetryDeadline, cfg.NotAfter)
	start := time.Now()
	defer func() { rep.WaitedMs = time.Since(start).Milliseconds() }()
	// wait.Backoff grows the cap (backoff, 2×, … up to max); the sleep is uniform in
	// [0, cap) — full jitter. Backoff and max are at most 24h, so nothing overflows.
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
		if errors.Is(err, lock.ErrSuppressed) || errors.Is(err, lock.ErrNotEnoughReplicas) || errors.Is(err, lock.ErrBlackout) ||
			errors.Is(err, lock.ErrFenceOutOfRange) || cfg.Contention != config.ContentionRetry || ctx.Err() != nil {
			return nil, time.Time{}, err
		}
		if cfg.RetryAttempts > 0 && attempt >= cfg.RetryAttempts {
			return nil, time.Time{}, err
		}
		sleep := time.Duration(rand.Int64N(int64(caps.Step()) + 1))
		if !deadline.IsZero() && time.Now().Add(sleep).After(deadline) {
			return nil, time.Time{}, fmt.Errorf("%w (deadline %s)", err, deadline.UTC().Format(time.RFC3339))
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

// request is what every acquire attempt of this run sends.
func request(cfg config.Config, token string) lock.Request {
	req := lock.Request{
		Key: cfg.Key, Occurrence: cfg.Occurrence, RunID: cfg.RunID, Holder: cfg.Holder, TTL: cfg.TTL, Token: token,
		Retention: cfg.DedupeRetention, MinReplicas: cfg.MinReplicas,
		BlackoutID: cfg.BlackoutID, MadeAt: cfg.MadeAt,
	}
	if cfg.HolderInstance != "" {
		req.HolderName = strings.TrimSuffix(cfg.Holder, "/"+cfg.HolderInstance)
	}
	return req
}

// markLockLost records, once, that the run cannot prove it held the lock to the end.
func markLockLost(rep *report.Report, stderr io.Writer, why string) {
	if rep.LockLost {
		return
	}
	rep.LockLost = true
	rep.Message = joinMsg(rep.Message, why)
	fmt.Fprintf(stderr, "lockwrap: %s\n", why)
}

// warn adds a warning to the report and says it on stderr.
func warn(rep *report.Report, stderr io.Writer, msg string) {
	rep.Warnings = append(rep.Warnings, msg)
	fmt.Fprintf(stderr, "lockwrap: warning: %s\n", msg)
}

// watermarkFile makes a fresh directory (0700) for the command's next watermark and
// returns the file's path in it (not created: the command writes it, or not) and what
// removes the directory.
func watermarkFile() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "lockwrap-watermark-")
	if err != nil {
		return "", func() {}, err
	}
	return filepath.Join(dir, "watermark"), func() { _ = os.RemoveAll(dir) }, nil
}

// maxWatermarkFile is how much of a watermark file is read at most; anything over
// lock.MaxWatermarkBytes (after the trailing newlines are cut) is refused anyway.
const maxWatermarkFile = 64 << 10

// readWatermark reads the watermark the command wrote to path: opaque text, trailing
// newlines (\n, \r\n) cut; "" when the command wrote none (no file, or an empty one).
// One over lock.MaxWatermarkBytes is not stored: a warning says so.
func readWatermark(path string, rep *report.Report, stderr io.Writer) string {
	// A regular file only, checked before it is opened (opening a FIFO waits for a writer;
	// a device may act on an open) and again on what was opened (O_NONBLOCK: a FIFO put
	// there in between must not wait either). The lock's renewals have stopped; the
	// result is still to be recorded.
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	notAFile := func() string {
		warn(rep, stderr, fmt.Sprintf("watermark not stored: $%s is not a regular file", config.EnvWatermarkFile))
		return ""
	}
	if err == nil && !fi.Mode().IsRegular() {
		return notAFile()
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		warn(rep, stderr, fmt.Sprintf("watermark not stored: %v", err))
		return ""
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil {
		warn(rep, stderr, fmt.Sprintf("watermark not stored: %v", err))
		return ""
	} else if !opened.Mode().IsRegular() || (fi != nil && !os.SameFile(fi, opened)) {
		return notAFile()
	}
	b, err := io.ReadAll(io.LimitReader(f, maxWatermarkFile+1))
	if err != nil {
		warn(rep, stderr, fmt.Sprintf("watermark not stored: %v", err))
		return ""
	}
	wm := strings.TrimRight(string(b), "\r\n")
	if strings.ContainsRune(wm, 0) {
		warn(rep, stderr, fmt.Sprintf("watermark not stored: $%s holds a NUL byte (a watermark is text)", config.EnvWatermarkFile))
		return ""
	}
	if len(b) > maxWatermarkFile || len(wm) > lock.MaxWatermarkBytes {
		size := strconv.Itoa(len(wm)) + " bytes"
		if len(b) > maxWatermarkFile {
			size = "over " + strconv.Itoa(maxWatermarkFile) + " bytes"
		}
		warn(rep, stderr, fmt.Sprintf("watermark not stored: the command wrote %s to $%s, more than %d",
			size, config.EnvWatermarkFile, lock.MaxWatermarkBytes))
		return ""
	}
	return wm
}

// finishRun records the result (and, with a success, the watermark wm if not empty) and
// releases the lock, and says in the report what could not be done: a lock no longer ours,
// or a later holder's fencing token, makes the run LockLost (rep.LockLost); a ledger entry
// of another run, a Redis that did not answer or a watermark not stored is a warning.
//
// validUntil is when the lock expired unless the finish renewed or released it: a finish
// Redis never answered until then leaves the run LockLost too — the lock is gone, nothing
// recorded the result, and another holder may run the occurrence again.
//
// A SIGTERM, SIGINT or SIGQUIT while the result is recorded ends the retries (the pod is
// being deleted: its grace is short of a long lock's ttl); the attempt under way gets
// stopGrace to be answered. If it is not, the run is LockLost too:
// nothing recorded the result, and once the lock expires another holder may run it again.
func finishRun(ctx context.Context, cfg config.Config, l Lease, state, wm string, validUntil time.Time, earlier *stopSignal, signals <-chan os.Signal, rep *report.Report, stderr io.Writer) {
	fr, err := finishWithRetry(ctx, cfg, l, state, lock.FinishOptions{Watermark: wm, Monotonic: cfg.WatermarkMonotonic}, validUntil, earlier, signals)
	rep.ReleasedAt = stamp(time.Now())
	if err == nil || errors.Is(err, lock.ErrLost) {
		switch {
		case fr.Watermark == lock.WatermarkStored:
			rep.Watermark = report.ShortWatermark(wm)
		case fr.Watermark == lock.WatermarkRefused:
			warn(rep, stderr, fmt.Sprintf("watermark %q not stored: smaller than the stored %q (--watermark-monotonic)",
				report.Shorten(wm, 64), report.Shorten(fr.Stored, 64)))
		case fr.LastSuccess == lock.LastSuccessNotOurs && wm != "":
			warn(rep, stderr, fmt.Sprintf("watermark %q not stored: the lock was not ours to the end", report.Shorten(wm, 64)))
		}
	}
	if err == nil && fr.LastSuccess == lock.LastSuccessNotOurs {
		// The lock looked ours, but a later holder had been given a fencing token.
		markLockLost(rep, stderr, "lock lost: a later holder was given a fencing token while the command ran")
	}
	if err == nil {
		return
	}
	warn := func(msg string) { warn(rep, stderr, msg) }
	if errors.Is(err, lock.ErrLost) {
		markLockLost(rep, stderr, "lock lost: when the command ended the lock was no longer ours, so it may have run without it at the end")
	}
	switch {
	case errors.Is(err, lock.ErrNotRecorded):
		warn(fmt.Sprintf("%s not recorded: the occurrence's ledger entry belongs to another run", state))
	case errors.Is(err, lock.ErrNotEnoughReplicas):
		warn(fmt.Sprintf("%s recorded, but not acknowledged by %d replicas: %v", state, cfg.MinReplicas, err))
	case !errors.Is(err, lock.ErrLost):
		warn(fmt.Sprintf("could not record %s in Redis: %v", state, err))
		var sig *stopSignal
		switch {
		case errors.As(err, &sig):
			markLockLost(rep, stderr, fmt.Sprintf("lock lost: %v before Redis answered, so %s was not recorded; the lock expires at %s and another holder may run this occurrence again", sig, state, stamp(validUntil)))
		case !time.Now().Before(validUntil):
			markLockLost(rep, stderr, fmt.Sprintf("lock lost: Redis did not answer before the lock expired at %s, so %s was not recorded and another holder may run this occurrence again", stamp(validUntil), state))
		}
	}
}

// finishWithRetry records the result, retrying transient errors until the lock expires
// (validUntil), and for at least a ttl (at least 2s, at most 10s). While the lock is ours
// nobody else can run the occurrence, and a result recorded then is the one a later holder
// finds; given up earlier (it was 10s at most, under a default ttl of 30s), a success
// Redis could still have recorded was lost, and the occurrence ran again.
//
// earlier is a stop signal that came before, while the command ran (forwarded to it, it
// is often why the command ended): the retries last stopGrace at most. The kubelet's grace
// runs from its SIGTERM, and is short of a long lock's ttl: retried until the lock
// expired, a finish Redis did not answer outlived it, and lockwrap, SIGKILLed, left no
// report (the soak of seed 951265272: Redis stalled as the pod's job ended 143).
func finishWithRetry(ctx context.Context, cfg config.Config, l Lease, state string, opts lock.FinishOptions, validUntil time.Time, earlier *stopSignal, signals <-chan os.Signal) (lock.FinishResult, error) {
	deadline := time.Now().Add(min(max(cfg.TTL, 2*time.Second), 10*time.Second))
	if validUntil.After(deadline) {
		deadline = validUntil
	}
	if earlier != nil {
		deadline = earliest(deadline, time.Now().Add(stopGrace))
	}
	fctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	var stopped atomic.Pointer[stopSignal]
	go func() {
		for {
			select {
			case sig := <-signals:
				if s, ok := sig.(syscall.Signal); ok && stopsFinish(s) {
					// No attempt follows; the one under way, which a Redis that answers
					// completes in a round trip, gets stopGrace (cancelled at once, a
					// success Redis was about to record was lost, and the occurrence ran
					// again once the lock expired).
					stopped.Store(&stopSignal{s})
					time.AfterFunc(stopGrace, cancel)
					return
				}
			case <-fctx.Done():
				return
			}
		}
	}()
	var last error
	var fr lock.FinishResult
	attempted := false
	_ = wait.PollUntilContextCancel(fctx, 100*time.Millisecond, true, func(pctx context.Context) (bool, error) {
		if attempted && stopped.Load() != nil {
			return true, nil // no attempt after the signal
		}
		attempted = true
		fr, last = l.FinishWith(pctx, state, opts)
		return last == nil || stopped.Load() != nil || errors.Is(last, lock.ErrLost) || errors.Is(last, lock.ErrNotRecorded) ||
			errors.Is(last, lock.ErrNotEnoughReplicas), nil
	})
	sig := stopped.Load()
	if sig == nil {
		sig = earlier
	}
	if sig != nil && last != nil && !errors.Is(last, lock.ErrLost) && !errors.Is(last, lock.ErrNotRecorded) &&
		!errors.Is(last, lock.ErrNotEnoughReplicas) {
		return fr, fmt.Errorf("%w: %w", sig, last)
	}
	return fr, last // the last attempt's: nil, a lock sentinel, or why Redis did not answer
}

// stopGrace is how long the attempt under way to record a result may still take once a
// stop signal has come (finishWithRetry).
const stopGrace = time.Second

// stopSignal is a signal that ended the retries of a result's record.
type stopSignal struct{ sig syscall.Signal }

func (s *stopSignal) Error() string { return "interrupted by " + s.sig.String() }

// earliest is the earlier of two instants, a zero one meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// ErrHolderRuns: another lockwrap of the same holder runs in this network namespace
// (claimHolder).
var ErrHolderRuns = errors.New("another lockwrap of this holder runs")

// childEnv is base plus the occurrence's variables, the key's last success (when there is
// one) and the watermark file (when there is one). Nothing of lockwrap's Redis connection
// (LOCKEDCRON_REDIS_*: URL, user, password, CA) reaches the command.
func childEnv(base []string, cfg config.Config, fence int64, last *lock.Success, wmFile string) []string {
	env := make([]string, 0, len(base)+8)
	// A lockwrap the command runs must not count this pod's attempts (--backoff-limit).
	drop := map[string]bool{config.EnvFencingToken: true, config.EnvOccurrence: true, config.EnvHolder: true, config.EnvRunID: true,
		config.EnvBackoffLimit: true, config.EnvAttemptsDir: true,
		config.EnvLastSuccessOccurrence: true, config.EnvLastSuccessAt: true, config.EnvLastSuccessFence: true,
		config.EnvWatermark: true, config.EnvWatermarkFile: true}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] && !strings.HasPrefix(k, "LOCKEDCRON_REDIS_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		config.EnvRunMark+"_"+newRunMark()+"=1", // after base's: a runner's mark is kept
		config.EnvFencingToken+"="+strconv.FormatInt(fence, 10),
		config.EnvOccurrence+"="+cfg.Occurrence.UTC().Format(time.RFC3339),
		config.EnvHolder+"="+cfg.Holder,
	)
	if cfg.RunID != "" {
		// A run of its own: its occurrence is when it was asked for, which can be a
		// scheduled occurrence's second; the run id is unique.
		env = append(env, config.EnvRunID+"="+cfg.RunID)
	}
	if last != nil {
		env = append(env,
			config.EnvLastSuccessOccurrence+"="+last.Occurrence.UTC().Format(time.RFC3339),
			config.EnvLastSuccessFence+"="+strconv.FormatInt(last.Fence, 10))
		if !last.FinishedAt.IsZero() {
			env = append(env, config.EnvLastSuccessAt+"="+stamp(last.FinishedAt))
		}
		// An environment value cannot hold NUL (readWatermark refuses it; this is defence).
		if last.Watermark != "" && !strings.ContainsRune(last.Watermark, 0) {
			env = append(env, config.EnvWatermark+"="+last.Watermark)
		}
	}
	if wmFile != "" {
		env = append(env, config.EnvWatermarkFile+"="+wmFile)
	}
	return env
}

// notRunAgain is the report's message of a start past the backoff limit.
func notRunAgain(n, limit int) string {
	return fmt.Sprintf("not run again: this is attempt %d in this pod, after %d that failed, and the backoff limit is %d (spec.backoffLimit); the command did not run",
		n, n-1, limit)
}

// pastLimitFromEnv counts a start whose settings did not parse (so Run, which counts the
// others, is not reached) from the backoff variables the controller sets, when they are
// usable, and reports whether it is past the limit (with the count and the limit): a bad
// setting that fails every start (a Secret's url that does not parse) is restarted under
// restartPolicy OnFailure as any other failure is, and stops at the same limit. Only a
// start in the controller's form counts (its settings all in the environment: args begin
// with "--"): a lockwrap exec'd into the pod with a typo or --help is not an attempt. The
// limit is read as the flag reads it (any base, no spaces).
func pastLimitFromEnv(args []string, getenv func(string) string, stderr io.Writer) (n, limit int, past bool) {
	l, err := strconv.ParseInt(getenv(config.EnvBackoffLimit), 0, 0)
	dir := getenv(config.EnvAttemptsDir)
	if err != nil || l < 0 || dir == "" || len(args) == 0 || args[0] != "--" {
		return 0, 0, false
	}
	n, err = countAttempt(dir)
	if err != nil {
		fmt.Fprintf(stderr, "lockwrap: warning: $%s: %v: this start is not counted, and the backoff limit not applied to it\n", config.EnvAttemptsDir, err)
		return 0, 0, false
	}
	return n, int(l), n > int(l)+1
}

// countAttempt counts one more start in dir's file "attempts" and returns the count: the
// directory outlives the container (an emptyDir of the pod), so a container restarted in
// its pod counts on from its last attempt. The count is written whole (a new file renamed
// over the old) before anything runs.
func countAttempt(dir string) (int, error) {
	path := filepath.Join(dir, "attempts")
	n := 0
	switch b, err := os.ReadFile(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	default:
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || n < 0 {
			return 0, fmt.Errorf("%s holds %q, not a count", path, report.TruncateRunes(string(b), 32))
		}
	}
	n++
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return 0, err
	}
	return n, os.Rename(tmp, path)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
