package lock_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// wmRig is one key on a real Redis, with helpers to run occurrences of it.
type wmRig struct {
	t   *testing.T
	ctx context.Context
	c   redis.UniversalClient
	l   *lock.Locker
	key string
}

func newWMRig(t *testing.T, key string) *wmRig {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	return &wmRig{t: t, ctx: ctxT(t), c: c, l: lock.New(c), key: key}
}

func (r *wmRig) req(n int, holder string) lock.Request {
	return lock.Request{Key: r.key, Occurrence: occ.Add(time.Duration(n) * time.Minute), Holder: holder,
		TTL: 5 * time.Second, Retention: time.Hour}
}

func (r *wmRig) acquire(n int, holder string) *lock.Lease {
	r.t.Helper()
	a, err := r.l.Acquire(r.ctx, r.req(n, holder))
	if err != nil {
		r.t.Fatalf("acquire %d by %s: %v", n, holder, err)
	}
	return a
}

// last is the key's last success as the next acquisition sees it (taken on a scratch
// occurrence and released, leaving the ledger as it was).
func (r *wmRig) last() *lock.Success {
	r.t.Helper()
	a := r.acquire(100000, "peek")
	if err := a.Release(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	return a.LastSuccess
}

func (r *wmRig) watermark() string {
	r.t.Helper()
	if s := r.last(); s != nil {
		return s.Watermark
	}
	return ""
}

func (r *wmRig) finish(a *lock.Lease, state, wm string, monotonic bool) (lock.FinishResult, error) {
	return a.FinishWith(r.ctx, state, lock.FinishOptions{Watermark: wm, Monotonic: monotonic})
}

func TestWatermarkAdvancesOnlyOnSuccessWithTheLock(t *testing.T) {
	r := newWMRig(t, "wm/basic")
	a := r.acquire(0, "a")
	if a.LastSuccess != nil {
		t.Fatalf("fresh key has a last success: %+v", a.LastSuccess)
	}
	before := time.Now()
	fr, err := r.finish(a, lock.StateSucceeded, "2026-11-30T06:00:00Z#17", false)
	if err != nil || fr.LastSuccess != lock.LastSuccessRecorded || fr.Watermark != lock.WatermarkStored {
		t.Fatalf("first success: %+v %v", fr, err)
	}

	// The next run gets it, in the acquisition's own reply.
	b := r.acquire(1, "b")
	ls := b.LastSuccess
	if ls == nil || !ls.Occurrence.Equal(occ) || ls.Fence != a.Fence || ls.Holder != "a" ||
		ls.Watermark != "2026-11-30T06:00:00Z#17" || ls.FinishedAt.Before(before.Add(-time.Second)) ||
		ls.FinishedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("last success seen by the next run: %+v (first fence %d)", ls, a.Fence)
	}
	// A failed run never moves it, whatever it wrote.
	fr, err = r.finish(b, lock.StateFailed, "zzz", false)
	if err != nil || fr.LastSuccess != lock.LastSuccessUnchanged || fr.Watermark != lock.WatermarkNotStored {
		t.Fatalf("failed run: %+v %v", fr, err)
	}
	if got := r.last(); got == nil || got.Watermark != "2026-11-30T06:00:00Z#17" || got.Fence != a.Fence {
		t.Fatalf("after a failed run: %+v", got)
	}

	// A success that stores no watermark is the last success; the mark stays.
	c := r.acquire(2, "c")
	if fr, err = r.finish(c, lock.StateSucceeded, "", false); err != nil || fr.LastSuccess != lock.LastSuccessRecorded ||
		fr.Watermark != lock.WatermarkNotStored {
		t.Fatalf("success without a watermark: %+v %v", fr, err)
	}
	got := r.last()
	if got == nil || got.Fence != c.Fence || got.Holder != "c" || !got.Occurrence.Equal(occ.Add(2*time.Minute)) ||
		got.Watermark != "2026-11-30T06:00:00Z#17" {
		t.Fatalf("after a success without a watermark: %+v", got)
	}
	// The last-success record never expires; the ledger entries do.
	if ttl, err := r.c.PTTL(r.ctx, lock.LastKey(r.key)).Result(); err != nil || ttl != -1 {
		t.Fatalf("last key ttl %v %v", ttl, err)
	}
	// Without options Finish still works (and stores no watermark).
	d := r.acquire(3, "d")
	if err := d.Finish(r.ctx, lock.StateSucceeded); err != nil {
		t.Fatal(err)
	}
	if got := r.last(); got.Fence != d.Fence || got.Watermark != "2026-11-30T06:00:00Z#17" {
		t.Fatalf("after Finish: %+v", got)
	}
}

// A run whose lock expired (and was taken by the next holder, or by nobody) records its
// success in the ledger, so the occurrence is not run again, but the watermark and the
// last success stay: it cannot prove that nobody ran meanwhile.
func TestWatermarkNotMovedByALostLock(t *testing.T) {
	for _, taken := range []bool{false, true} {
		name := "expired"
		if taken {
			name = "taken"
		}
		t.Run(name, func(t *testing.T) {
			r := newWMRig(t, "wm/lost-"+name)
			first := r.acquire(0, "a")
			if _, err := r.finish(first, lock.StateSucceeded, "10", false); err != nil {
				t.Fatal(err)
			}
			a := r.acquire(1, "a")
			r.c.Del(r.ctx, lock.LockKey(r.key)) // expired
			if taken {
				b := r.acquire(2, "b") // the next occurrence's holder, with a higher fence
				if b.LastSuccess == nil || b.LastSuccess.Watermark != "10" {
					t.Fatalf("b sees %+v", b.LastSuccess)
				}
				// b is still running when a finishes.
				defer func() { _ = b.Release(r.ctx) }()
			}
			fr, err := r.finish(a, lock.StateSucceeded, "20", false)
			if !errors.Is(err, lock.ErrLost) || fr.LastSuccess != lock.LastSuccessNotOurs || fr.Watermark != lock.WatermarkNotStored {
				t.Fatalf("finish after loss: %+v %v", fr, err)
			}
			if ok, _ := lock.Succeeded(r.ctx, r.c, r.key, occ.Add(time.Minute)); !ok {
				t.Fatal("the lost run's success is not in the ledger")
			}
			if wm := r.c.HGet(r.ctx, lock.LastKey(r.key), "watermark").Val(); wm != "10" {
				t.Fatalf("watermark %q after a lost run", wm)
			}
			if f := r.c.HGet(r.ctx, lock.LastKey(r.key), "fence").Val(); f != itoa(first.Fence) {
				t.Fatalf("last success fence %s, want %d", f, first.Fence)
			}
		})
	}
}

// A run whose fencing token is no longer the newest (a later holder was given one) never
// moves the watermark, even if the lock's value still looks like its own.
func TestWatermarkNotMovedByAStaleFence(t *testing.T) {
	r := newWMRig(t, "wm/stale")
	first := r.acquire(0, "a")
	if _, err := r.finish(first, lock.StateSucceeded, "10", false); err != nil {
		t.Fatal(err)
	}
	a := r.acquire(1, "a")
	// A later holder's token, as after this lock's value was restored from an old
	// snapshot or replica while another holder had meanwhile been fenced.
	r.c.Set(r.ctx, lock.FenceKey(r.key), itoa(a.Fence+1000), 0)
	fr, err := r.finish(a, lock.StateSucceeded, "20", false)
	if err != nil || fr.LastSuccess != lock.LastSuccessNotOurs || fr.Watermark != lock.WatermarkNotStored {
		t.Fatalf("stale fence: %+v %v", fr, err)
	}
	if got := r.last(); got == nil || got.Watermark != "10" || got.Fence != first.Fence {
		t.Fatalf("after a stale run: %+v", got)
	}
}

// A holder that dies between its job's exit and the ledger write (here: acquires, never
// finishes) leaves the occurrence unsucceeded and the watermark where it was: the next
// run of that occurrence recovers it and sees the old mark.
func TestCrashBeforeFinishLeavesTheWatermark(t *testing.T) {
	r := newWMRig(t, "wm/crash")
	first := r.acquire(0, "a")
	if _, err := r.finish(first, lock.StateSucceeded, "10", false); err != nil {
		t.Fatal(err)
	}
	req := r.req(1, "a")
	req.TTL = 300 * time.Millisecond
	crashed, err := r.l.Acquire(r.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	_ = crashed // the job ran, wrote "20" to its file, exited 0 … and lockwrap was killed.
	if ok, _ := lock.Succeeded(r.ctx, r.c, r.key, req.Occurrence); ok {
		t.Fatal("succeeded without a finish")
	}
	waitUntil(t, func() bool { return r.c.Exists(r.ctx, lock.LockKey(r.key)).Val() == 0 }) // the lock expires
	next, err := r.l.Acquire(r.ctx, r.req(1, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if !next.Recovered || next.Fence <= crashed.Fence || next.LastSuccess == nil ||
		next.LastSuccess.Watermark != "10" || next.LastSuccess.Fence != first.Fence ||
		!next.LastSuccess.Occurrence.Equal(occ) {
		t.Fatalf("the run after the crash: recovered %v fence %d (crashed %d) last %+v",
			next.Recovered, next.Fence, crashed.Fence, next.LastSuccess)
	}
	// A late finish of the crashed holder (it was only paused) moves nothing either.
	if fr, err := crashed.FinishWith(r.ctx, lock.StateSucceeded, lock.FinishOptions{Watermark: "20"}); !errors.Is(err, lock.ErrLost) ||
		fr.LastSuccess == lock.LastSuccessRecorded {
		t.Fatalf("late finish: %+v %v", fr, err)
	}
	if fr, err := r.finish(next, lock.StateSucceeded, "20", false); err != nil || fr.Watermark != lock.WatermarkStored {
		t.Fatalf("recovering run: %+v %v", fr, err)
	}
	if wm := r.watermark(); wm != "20" {
		t.Fatalf("watermark %q", wm)
	}
}

func TestWatermarkMonotonic(t *testing.T) {
	r := newWMRig(t, "wm/mono")
	n := 0
	run := func(wm string, monotonic bool) lock.FinishResult {
		t.Helper()
		a := r.acquire(n, "h")
		n++
		fr, err := r.finish(a, lock.StateSucceeded, wm, monotonic)
		if err != nil || fr.LastSuccess != lock.LastSuccessRecorded {
			t.Fatalf("finish %q: %+v %v", wm, fr, err)
		}
		return fr
	}
	for _, c := range []struct {
		wm      string
		mono    bool
		stored  bool
		current string
	}{
		{"10", true, true, "10"},                                     // nothing stored yet
		{"9", true, false, "10"},                                     // numerically smaller (lexically larger)
		{"10", true, true, "10"},                                     // equal is fine
		{"11", true, true, "11"},                                     // larger
		{"99999999999999999999", true, true, "99999999999999999999"}, // beyond float precision
		{"99999999999999999998", true, false, "99999999999999999999"},
		{"100000000000000000000", true, true, "100000000000000000000"},
		{"-5", true, false, "100000000000000000000"},
		{"5", false, true, "5"}, // not monotonic: goes back when told
		{"-7", true, false, "5"},
		{"0005", true, true, "0005"},
		{"abc", true, true, "abc"}, // not both integers: byte-wise, "a" > "0"
		{"abb", true, false, "abc"},
		{"abc\x00", true, true, "abc\x00"},
		{"B", true, false, "abc\x00"}, // byte-wise: "B" (0x42) < "a" (0x61), whatever the locale
	} {
		fr := run(c.wm, c.mono)
		want := lock.WatermarkStored
		if !c.stored {
			want = lock.WatermarkRefused
		}
		if fr.Watermark != want {
			t.Fatalf("%q (monotonic %v): %+v, want %v", c.wm, c.mono, fr, want)
		}
		if !c.stored && fr.Stored != c.current {
			t.Fatalf("%q refused against %q, want %q", c.wm, fr.Stored, c.current)
		}
		if got := r.watermark(); got != c.current {
			t.Fatalf("after %q: watermark %q, want %q", c.wm, got, c.current)
		}
	}
}

func TestWatermarkTooLarge(t *testing.T) {
	r := newWMRig(t, "wm/large")
	a := r.acquire(0, "a")
	max := strings.Repeat("x", lock.MaxWatermarkBytes)
	if _, err := r.finish(a, lock.StateSucceeded, max+"y", false); !errors.Is(err, lock.ErrWatermarkTooLarge) {
		t.Fatalf("over the cap: %v", err)
	}
	if ok, _ := lock.Succeeded(r.ctx, r.c, r.key, occ); ok {
		t.Fatal("recorded despite the error")
	}
	if fr, err := r.finish(a, lock.StateSucceeded, max, false); err != nil || fr.Watermark != lock.WatermarkStored {
		t.Fatalf("at the cap: %+v %v", fr, err)
	}
	if wm := r.watermark(); wm != max {
		t.Fatalf("watermark of %d bytes", len(wm))
	}
}

// The last key shares the lock's hash tag (one Cluster slot), also for keys with braces.
func TestLastKeyLayout(t *testing.T) {
	for _, k := range []string{"ns/job", "}x{y}"} {
		lk, last := lock.LockKey(k), lock.LastKey(k)
		if strings.TrimSuffix(lk, "lock") != strings.TrimSuffix(last, "last") {
			t.Fatalf("%q: %q vs %q", k, lk, last)
		}
	}
	if got := lock.LastKey("ns/job"); got != "lockedcron:{ns/job}:last" {
		t.Fatal(got)
	}
}

// Redis memory per lock key for the last-success record, by watermark size (MEMORY USAGE,
// redis-server 7, jemalloc); documented in docs/idempotency.md.
func TestWatermarkMemoryUsage(t *testing.T) {
	r := newWMRig(t, "ns/nightly-report")
	for i, size := range []int{0, 32, 256, 1024} {
		a := r.acquire(i, "cluster-a/team-ns/nightly-report-1796018400")
		if _, err := r.finish(a, lock.StateSucceeded, strings.Repeat("7", size), false); err != nil {
			t.Fatal(err)
		}
		// A numeric watermark of up to 19 digits would be stored as an integer; use text.
		if size > 0 {
			r.c.HSet(r.ctx, lock.LastKey(r.key), "watermark", strings.Repeat("w", size))
		}
		last := r.c.MemoryUsage(r.ctx, lock.LastKey(r.key)).Val()
		fence := r.c.MemoryUsage(r.ctx, lock.FenceKey(r.key)).Val()
		run := r.c.MemoryUsage(r.ctx, lock.RunKey(r.key, r.req(i, "").Occurrence)).Val()
		enc := r.c.ObjectEncoding(r.ctx, lock.LastKey(r.key)).Val()
		t.Logf("watermark %4d bytes: last %5d bytes (%s), fence %d bytes, one ledger entry %d bytes", size, last, enc, fence, run)
		// Up to 64-byte values the hash is a listpack; beyond, a hashtable (~550 bytes more).
		if last <= int64(size) || last > int64(size)+1024 {
			t.Fatalf("last key of %d bytes for a %d-byte watermark", last, size)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A finish whose reply was lost and that is sent again (go-redis resends on a network
// error, lockwrap retries) returns the first call's result: not a lost lock, not an
// unstored watermark, and nothing moves twice.
func TestFinishResentAfterLostReply(t *testing.T) {
	r := newWMRig(t, "wm/resent")
	h := &loseReplyHook{}
	r.c.AddHook(h)
	for _, state := range []string{lock.StateSucceeded, lock.StateFailed} {
		a := r.acquire(map[string]int{lock.StateSucceeded: 0, lock.StateFailed: 1}[state], "a")
		h.armed.Store(true)
		if _, err := r.finish(a, state, "10", false); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s, first call: %v", state, err)
		}
		fr, err := r.finish(a, state, "10", false)
		want := lock.FinishResult{}
		if state == lock.StateSucceeded {
			want = lock.FinishResult{LastSuccess: lock.LastSuccessRecorded, Watermark: lock.WatermarkStored}
		}
		if err != nil || fr != want {
			t.Fatalf("%s, resent: %+v %v, want %+v", state, fr, err, want)
		}
	}
	if got := r.last(); got == nil || got.Watermark != "10" || !got.Occurrence.Equal(occ) {
		t.Fatalf("last %+v", got)
	}
	// A lost lock stays lost when resent.
	b := r.acquire(2, "b")
	r.c.Del(r.ctx, lock.LockKey(r.key))
	h.armed.Store(true)
	if _, err := r.finish(b, lock.StateSucceeded, "20", false); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("lost, first call: %v", err)
	}
	if fr, err := r.finish(b, lock.StateSucceeded, "20", false); !errors.Is(err, lock.ErrLost) || fr.LastSuccess != lock.LastSuccessNotOurs {
		t.Fatalf("lost, resent: %+v %v", fr, err)
	}
	if wm := r.watermark(); wm != "10" {
		t.Fatalf("watermark %q", wm)
	}
}

// TestFinishResentAfterAContenderTookOver: a finish(failed) lands (the lock released,
// failed recorded) but its reply is lost; a contender takes the free lock (a failed run does
// not suppress) and writes its own running entry over the occurrence's before the resend
// (go-redis's own after a read timeout, or lockwrap's next attempt) lands. The resend
// answered from the lock and the entry as they then were, ErrLost and ErrNotRecorded, and
// lockwrap reported LockLost and "failed not recorded" for a run that held its lock to the
// end. It answers what the first call did (FinishKey), leaving the contender's lock and
// entry alone; so does a resent success whose watermark was refused, with the stored one.
func TestFinishResentAfterAContenderTookOver(t *testing.T) {
	r := newWMRig(t, "wm/resent-contender")
	h := &loseReplyHook{}
	r.c.AddHook(h)
	a := r.acquire(0, "a")
	h.armed.Store(true)
	if _, err := r.finish(a, lock.StateFailed, "", false); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("first call: %v", err)
	}
	b := r.acquire(0, "b") // runs the failed occurrence again
	fr, err := r.finish(a, lock.StateFailed, "", false)
	if err != nil || fr != (lock.FinishResult{}) {
		t.Fatalf("resent finish of a run that held its lock to the end and recorded failed: %+v %v (lost=%v notRecorded=%v)",
			fr, err, errors.Is(err, lock.ErrLost), errors.Is(err, lock.ErrNotRecorded))
	}
	if v := r.c.Get(r.ctx, lock.LockKey(r.key)).Val(); !strings.HasPrefix(v, b.Token+" ") {
		t.Fatalf("the contender's lock is %q", v)
	}
	if tok := r.c.HGet(r.ctx, lock.RunKey(r.key, occ), "token").Val(); tok != b.Token {
		t.Fatalf("the occurrence's entry has token %q, not the contender's", tok)
	}
	if ttl := r.c.PTTL(r.ctx, lock.FinishKey(r.key, a.Token)).Val(); ttl <= 0 || ttl > lock.FinishKeyTTL(5*time.Second) {
		t.Fatalf("the finish key's ttl %v, want at most %v", ttl, lock.FinishKeyTTL(5*time.Second))
	}
	if err := b.Finish(r.ctx, lock.StateSucceeded); err != nil {
		t.Fatalf("the contender's finish: %v", err)
	}

	if _, err := r.finish(r.acquire(1, "c"), lock.StateSucceeded, "20", false); err != nil {
		t.Fatal(err)
	}
	d := r.acquire(2, "d")
	h.armed.Store(true)
	if _, err := r.finish(d, lock.StateSucceeded, "10", true); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("refused, first call: %v", err)
	}
	want := lock.FinishResult{LastSuccess: lock.LastSuccessRecorded, Watermark: lock.WatermarkRefused, Stored: "20"}
	if fr, err := r.finish(d, lock.StateSucceeded, "10", true); err != nil || fr != want {
		t.Fatalf("refused, resent: %+v %v, want %+v", fr, err, want)
	}
}

// TestFinishResentAfterItsFinishKeyIsGone: the key that keeps a finish's answer (FinishKey)
// lives a while only, and a Redis that restarted from a snapshot taken before it was written
// has lost it; the occurrence's entry, final and marked with what the first call did, then
// answers a resent call: the first call's result, nothing changed.
func TestFinishResentAfterItsFinishKeyIsGone(t *testing.T) {
	r := newWMRig(t, "wm/resent-no-fin")
	h := &loseReplyHook{}
	r.c.AddHook(h)
	for _, c := range []struct {
		n         int
		state, wm string
		want      lock.FinishResult
	}{
		{0, lock.StateFailed, "", lock.FinishResult{}},
		{1, lock.StateSucceeded, "30", lock.FinishResult{LastSuccess: lock.LastSuccessRecorded, Watermark: lock.WatermarkStored}},
	} {
		a := r.acquire(c.n, "a")
		h.armed.Store(true)
		if _, err := r.finish(a, c.state, c.wm, true); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s, first call: %v", c.state, err)
		}
		if n := r.c.Del(r.ctx, lock.FinishKey(r.key, a.Token)).Val(); n != 1 {
			t.Fatalf("%s: the first call left no finish key to lose", c.state)
		}
		entry := r.c.HGetAll(r.ctx, lock.RunKey(r.key, occ.Add(time.Duration(c.n)*time.Minute))).Val()
		fr, err := r.finish(a, c.state, c.wm, true)
		if err != nil || fr != c.want {
			t.Errorf("%s resent, its finish key gone: %+v %v, want %+v (lost=%v notRecorded=%v)", c.state, fr, err, c.want,
				errors.Is(err, lock.ErrLost), errors.Is(err, lock.ErrNotRecorded))
		}
		if after := r.c.HGetAll(r.ctx, lock.RunKey(r.key, occ.Add(time.Duration(c.n)*time.Minute))).Val(); !maps.Equal(after, entry) {
			t.Errorf("%s: the resent call changed the entry: %v, was %v", c.state, after, entry)
		}
	}
	if got := r.last(); got == nil || got.Watermark != "30" {
		t.Errorf("the last success after the resent success: %+v", got)
	}
}
