package wrapper

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
)

// wallClock is a fake clock whose wall time can be stepped apart from its timers: timers
// follow the fake's own time (as Go's timers follow the monotonic clock), Now adds an
// offset (as NTP or an operator stepping the wall clock would).
type wallClock struct {
	*clocktesting.FakeClock
	mu     sync.Mutex
	offset time.Duration
}

func (c *wallClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.FakeClock.Now().Add(c.offset)
}

func (c *wallClock) stepWall(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// startWait runs waitUntil in the background and returns its result channel.
func startWait(ctx context.Context, clk *wallClock, until time.Time, slice time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- waitUntil(ctx, clk, until, slice) }()
	return done
}

// awaitTimer waits until the waiter has set its next timer (it is waiting, not done).
func awaitTimer(t *testing.T, clk *wallClock, done <-chan error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) {
			select {
			case err := <-done:
				t.Fatalf("waitUntil returned (%v) before the instant: wall %v", err, clk.Now())
			default:
			}
			return clk.HasWaiters(), nil
		})
	if err != nil {
		t.Fatal("waitUntil set no timer")
	}
}

func awaitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("waitUntil did not return")
	}
	return nil
}

var start = time.Date(2026, 11, 30, 5, 59, 0, 0, time.UTC)

// TestWaitUntilWallClockSteppedBack: the wall clock stepped back during the wait makes the
// timer end before the instant on the wall clock; lockwrap waits again, never starts early.
func TestWaitUntilWallClockSteppedBack(t *testing.T) {
	clk := &wallClock{FakeClock: clocktesting.NewFakeClock(start)}
	until := start.Add(10 * time.Second)
	done := startWait(context.Background(), clk, until, time.Hour)
	awaitTimer(t, clk, done)
	clk.stepWall(-3 * time.Second) // wall clock stepped back 3s
	clk.Step(10 * time.Second)     // the 10s timer ends; the wall clock says 7s have passed
	awaitTimer(t, clk, done)       // so it waits again
	clk.Step(3 * time.Second)
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if clk.Now().Before(until) {
		t.Fatalf("returned at %v, before %v", clk.Now(), until)
	}
}

// TestWaitUntilWallClockSteppedForward: a wall clock stepped forward past the instant is
// noticed at the end of the current slice, not at the end of the whole wait.
func TestWaitUntilWallClockSteppedForward(t *testing.T) {
	clk := &wallClock{FakeClock: clocktesting.NewFakeClock(start)}
	done := startWait(context.Background(), clk, start.Add(time.Minute), time.Second)
	awaitTimer(t, clk, done)
	clk.stepWall(time.Minute)
	clk.Step(time.Second)
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestWaitUntilSlices: a long wait is a chain of slices that ends exactly at the instant.
func TestWaitUntilSlices(t *testing.T) {
	clk := &wallClock{FakeClock: clocktesting.NewFakeClock(start)}
	until := start.Add(2500 * time.Millisecond)
	done := startWait(context.Background(), clk, until, time.Second)
	for _, step := range []time.Duration{time.Second, time.Second, 499 * time.Millisecond} {
		awaitTimer(t, clk, done)
		clk.Step(step)
	}
	awaitTimer(t, clk, done) // 1ms before the instant it is still waiting
	clk.Step(time.Millisecond)
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
	// An instant already passed: at once, without a timer.
	if err := waitUntil(context.Background(), clk, until.Add(-time.Hour), time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestWaitUntilCancelled: the wait ends with the context's cause (a signal).
func TestWaitUntilCancelled(t *testing.T) {
	clk := &wallClock{FakeClock: clocktesting.NewFakeClock(start)}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := startWait(ctx, clk, start.Add(time.Hour), time.Second)
	awaitTimer(t, clk, done)
	cause := errors.New("signalled")
	cancel(cause)
	if err := awaitDone(t, done); !errors.Is(err, cause) {
		t.Fatalf("err %v, want %v", err, cause)
	}
}
