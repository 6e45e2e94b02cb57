package lock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

// A client that resends the acquire script after losing its reply (go-redis retries on
// network errors) gets the same grant back, not "held by myself".
func TestAcquireScriptIsIdempotentPerToken(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	defer c.Close()
	ctx := context.Background()
	occ := time.Unix(1700000000, 0)
	keys := []string{LockKey("idem"), FenceKey("idem"), RunKey("idem", occ), LastKey("idem"), FinishKey("idem", "tok")}
	args := []any{"tok h", 10000, 60000, "tok", "h", 1}
	first, err := acquireScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	again, err := acquireScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 12 || first[0] != "acquired" || first[2] != int64(0) || first[3] != int64(0) {
		t.Fatalf("first grant %v", first)
	}
	if d := cmp.Diff(first, again); d != "" {
		t.Fatalf("resent acquire (-first +again):\n%s", d)
	}
	other, err := acquireScript.Run(ctx, c, keys, "tok2 h2", 10000, 60000, "tok2", "h2", 1).Slice()
	if err != nil || cmp.Diff([]any{"held", "tok h"}, other) != "" {
		t.Fatalf("another token: %v %v", other, err)
	}
}

// The fencing token is max(counter+1, server time in µs): about now in µs on a fresh key,
// counter+1 when the stored token is ahead of the clock.
func TestFenceIsServerTimeOrCounter(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	defer c.Close()
	ctx := context.Background()
	before := time.Now().UnixMicro()
	l := New(c)
	a, err := l.Acquire(ctx, Request{Key: "f", Occurrence: time.Unix(60, 0), TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMicro()
	// Same machine, same clock: the server's TIME lies between our two readings.
	if a.Fence < before || a.Fence > after {
		t.Fatalf("fence %d not within [%d, %d]", a.Fence, before, after)
	}
	if got := c.Get(ctx, FenceKey("f")).Val(); got != strconv.FormatInt(a.Fence, 10) {
		t.Fatalf("fence key %q, want %d", got, a.Fence)
	}
	if err := a.Finish(ctx, StateSucceeded); err != nil {
		t.Fatal(err)
	}
	ahead := after + 3600*1e6
	c.Set(ctx, FenceKey("f"), ahead, 0)
	b, err := l.Acquire(ctx, Request{Key: "f", Occurrence: time.Unix(120, 0), TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence != ahead+1 {
		t.Fatalf("fence %d after a stored %d", b.Fence, ahead)
	}
	// Stored, so the next one is higher still (not the clock's, an hour behind).
	if got := c.Get(ctx, FenceKey("f")).Val(); got != strconv.FormatInt(ahead+1, 10) {
		t.Fatalf("fence key %q after handing out %d", got, ahead+1)
	}
	if err := b.Finish(ctx, StateSucceeded); err != nil {
		t.Fatal(err)
	}
	n, err := l.Acquire(ctx, Request{Key: "f", Occurrence: time.Unix(180, 0), TTL: time.Second})
	if err != nil || n.Fence != ahead+2 {
		t.Fatalf("the fence after %d: %v %+v", ahead+1, err, n)
	}
}

// The lock is ours (an attempt whose reply was lost) but the entry is not: evicted, it is
// written again with a new fence; another run's success stands and our lock is let go.
func TestAcquireRetryWithoutOurEntry(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	defer c.Close()
	ctx := context.Background()
	l := New(c)
	req := Request{Key: "e", Occurrence: time.Unix(60, 0), Holder: "h", TTL: time.Minute, Token: "t1"}
	a, err := l.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, RunKey("e", req.Occurrence))
	b, err := l.Acquire(ctx, req)
	if err != nil || b.Fence <= a.Fence || b.Recovered {
		t.Fatalf("evicted entry: %v %+v after %d", err, b, a.Fence)
	}
	if got := c.HGet(ctx, RunKey("e", req.Occurrence), "token").Val(); got != "t1" {
		t.Fatalf("entry token %q", got)
	}
	c.HSet(ctx, RunKey("e", req.Occurrence), "state", StateSucceeded, "token", "t0", "holder", "h0")
	if _, err := l.Acquire(ctx, req); !errors.Is(err, ErrSuppressed) {
		t.Fatalf("another run's success: %v", err)
	}
	if n := c.Exists(ctx, LockKey("e")).Val(); n != 0 {
		t.Fatal("lock kept after suppression")
	}
}

// A resent acquire (the caller lost the first reply and sends again with the same token)
// gives the lock a whole ttl again, counted from the resend: the caller counts its ttl from
// when it sent the attempt that answered, and stops its job before that runs out. Found:
// the resend was granted with what was left of the first attempt's ttl, so the lock could
// expire, and another holder run, while the caller's job still ran.
func TestResentAcquireRestartsTheTTL(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	defer c.Close()
	ctx := context.Background()
	l := New(c)
	for _, tc := range []struct {
		name    string
		between func(req Request) // what happened to the key between the two attempts
	}{
		{"entry ours", func(Request) {}},
		{"entry evicted", func(req Request) { c.Del(ctx, RunKey(req.Key, req.Occurrence)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{Key: "resent/" + tc.name, Occurrence: time.Unix(60, 0), Holder: "h", TTL: 10 * time.Second, Token: "t1"}
			if _, err := l.Acquire(ctx, req); err != nil {
				t.Fatal(err)
			}
			// The first attempt's reply took 9.5 s to be given up on: half a second is left.
			c.PExpire(ctx, LockKey(req.Key), 500*time.Millisecond)
			tc.between(req)
			if _, err := l.Acquire(ctx, req); err != nil {
				t.Fatal(err)
			}
			if left := c.PTTL(ctx, LockKey(req.Key)).Val(); left < 9*time.Second {
				t.Fatalf("after the resend the lock expires in %v, want its ttl (10s) again", left)
			}
		})
	}
}

// Abandon undoes an acquire whose reply the caller never saw: the lock and the running
// entry go if they hold the caller's token, and nothing else is touched.
func TestAbandonUndoesOnlyOurAttempt(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	defer c.Close()
	ctx := context.Background()
	l := New(c)
	req := Request{Key: "abandon", Occurrence: time.Unix(60, 0), Holder: "h", TTL: time.Minute, Token: "t1"}
	if _, err := l.Acquire(ctx, req); err != nil { // its reply "lost"
		t.Fatal(err)
	}
	other := req
	other.Token, other.Holder = "t2", "h2"
	if err := l.Abandon(ctx, other); err != nil {
		t.Fatal(err)
	}
	if c.Get(ctx, LockKey("abandon")).Val() != "t1 h" || c.HGet(ctx, RunKey("abandon", req.Occurrence), "token").Val() != "t1" {
		t.Fatal("another token's abandon touched our lock or entry")
	}
	if err := l.Abandon(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, LockKey("abandon"), RunKey("abandon", req.Occurrence)).Val(); n != 0 {
		t.Fatalf("%d of the lock and the entry left after abandoning", n)
	}
	// The next run starts afresh: not a crashed run's occurrence.
	next := req
	next.Token, next.Holder = "t3", "h3"
	g, err := l.Acquire(ctx, next)
	if err != nil || g.Recovered {
		t.Fatalf("next run: %+v %v, want a fresh grant", g, err)
	}
	if err := l.Abandon(ctx, req); err != nil { // nothing of ours left: nothing changes
		t.Fatal(err)
	}
	if c.Get(ctx, LockKey("abandon")).Val() != "t3 h3" {
		t.Fatal("abandon took the next run's lock")
	}
}
