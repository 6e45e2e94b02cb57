package lock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// A fencing counter written by someone else at or past 2^53, where the scripts' Lua
// numbers (doubles) stop counting by one: the next fence would equal the last one, and a
// storage that fences on it would take a stale writer for the current one. Such an
// acquire is refused, naming the key and the fix, and leaves everything as it found it:
// the lock, its ttl, the counter's text and the ledger.
func TestFenceCounterPastExactCountingIsRefused(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, lock.ClientConfig{URL: s.URL()})
	ctx := ctxT(t)
	l := lock.New(c)

	refused := func(t *testing.T, key string, req lock.Request, counter string) {
		t.Helper()
		_, err := l.Acquire(ctx, req)
		if !errors.Is(err, lock.ErrFenceOutOfRange) || !strings.Contains(err.Error(), lock.FenceKey(key)) ||
			!strings.Contains(err.Error(), counter) {
			t.Fatalf("acquire with the counter at %s: %v", counter, err)
		}
		if v := c.Get(ctx, lock.FenceKey(key)).Val(); v != counter {
			t.Fatalf("counter %q after the refusal, was %q", v, counter)
		}
	}

	t.Run("counts up to 2^53, then refuses", func(t *testing.T) {
		const key = "edge"
		c.Set(ctx, lock.FenceKey(key), "9007199254740991", 0) // 2^53 - 1
		a, err := l.Acquire(ctx, lock.Request{Key: key, Occurrence: occ, Holder: "a", TTL: time.Minute})
		if err != nil || a.Fence != 9007199254740992 {
			t.Fatalf("last exact fence: %v %+v", err, a)
		}
		if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
			t.Fatal(err)
		}
		next := occ.Add(time.Minute)
		refused(t, key, lock.Request{Key: key, Occurrence: next, Holder: "b", TTL: time.Minute}, "9007199254740992")
		if n := c.Exists(ctx, lock.LockKey(key), lock.RunKey(key, next)).Val(); n != 0 {
			t.Fatalf("the refused acquire left %d of lock and entry", n)
		}
	})

	t.Run("free lock", func(t *testing.T) {
		const key = "free"
		const forged = "123456789012345678901234567890"
		c.Set(ctx, lock.FenceKey(key), forged, 0)
		refused(t, key, lock.Request{Key: key, Occurrence: occ, Holder: "a", TTL: time.Minute}, forged)
		if n := c.Exists(ctx, lock.LockKey(key), lock.RunKey(key, occ)).Val(); n != 0 {
			t.Fatalf("the refused acquire left %d of lock and entry", n)
		}
	})

	// Not numbers Lua counts on: "nan" compares false with everything, so it passed a
	// ">= 2^53" test and the fence handed out was NaN (stored and returned as
	// -9223372036854775808) (helper-104).
	for _, forged := range []string{"nan", "-nan", "inf"} {
		t.Run("free lock, "+forged, func(t *testing.T) {
			key := "free-" + forged
			c.Set(ctx, lock.FenceKey(key), forged, 0)
			refused(t, key, lock.Request{Key: key, Occurrence: occ, Holder: "a", TTL: time.Minute}, forged)
			if n := c.Exists(ctx, lock.LockKey(key), lock.RunKey(key, occ)).Val(); n != 0 {
				t.Fatalf("the refused acquire left %d of lock and entry", n)
			}
		})
	}
	// A key of another type: the acquire failed with WRONGTYPE after taking the lock,
	// which stayed for its ttl with no ledger entry.
	t.Run("free lock, a hash", func(t *testing.T) {
		const key = "hash"
		c.HSet(ctx, lock.FenceKey(key), "x", "1")
		_, err := l.Acquire(ctx, lock.Request{Key: key, Occurrence: occ, Holder: "a", TTL: time.Minute})
		if !errors.Is(err, lock.ErrFenceOutOfRange) || !strings.Contains(err.Error(), "is not a string") {
			t.Fatalf("acquire with a hash for a counter: %v", err)
		}
		if n := c.Exists(ctx, lock.LockKey(key), lock.RunKey(key, occ)).Val(); n != 0 {
			t.Fatalf("the refused acquire left %d of lock and entry", n)
		}
		if typ := c.Type(ctx, lock.FenceKey(key)).Val(); typ != "hash" {
			t.Fatalf("the counter key is a %s after the refusal", typ)
		}
	})

	t.Run("takeover of a crashed predecessor", func(t *testing.T) {
		const key = "takeover"
		req := lock.Request{Key: key, Occurrence: occ, Holder: "pod-1", TTL: time.Minute}
		a, err := l.Acquire(ctx, req) // then it crashes
		if err != nil {
			t.Fatal(err)
		}
		const forged = "9007199254740993"
		c.Set(ctx, lock.FenceKey(key), forged, 0)
		c.PExpire(ctx, lock.LockKey(key), 30*time.Second)
		refused(t, key, req, forged) // the restarted container: a new token
		if v := c.Get(ctx, lock.LockKey(key)).Val(); v != a.Token+" pod-1" {
			t.Fatalf("lock %q after the refusal, was the predecessor's", v)
		}
		if p := c.PTTL(ctx, lock.LockKey(key)).Val(); p <= 0 || p > 30*time.Second {
			t.Fatalf("lock ttl %v after the refusal, was at most 30s", p)
		}
		if tok := c.HGet(ctx, lock.RunKey(key, occ), "token").Val(); tok != a.Token {
			t.Fatalf("entry token %q after the refusal, was the predecessor's", tok)
		}
	})

	t.Run("an ACL user without TIME", func(t *testing.T) {
		const key = "notime"
		s.Do("ACL", "SETUSER", "notime", "on", ">pw", "resetkeys", "~lockedcron:*", "-@all",
			"+evalsha", "+eval", "+get", "+set", "+del", "+hset", "+hget", "+pexpire")
		narrow := lock.New(client(t, lock.ClientConfig{URL: s.URL(), Username: "notime", Password: "pw"}))
		c.Set(ctx, lock.FenceKey(key), "9007199254740991", 0)
		a, err := narrow.Acquire(ctx, lock.Request{Key: key, Occurrence: occ, Holder: "a", TTL: time.Minute})
		if err != nil || a.Fence != 9007199254740992 || !strings.Contains(strings.Join(a.Warnings, " "), "+time") {
			t.Fatalf("last exact fence, counted without TIME: %v %+v", err, a)
		}
		if err := a.Finish(ctx, lock.StateSucceeded); err != nil {
			t.Fatal(err)
		}
		next := occ.Add(time.Minute)
		_, err = narrow.Acquire(ctx, lock.Request{Key: key, Occurrence: next, Holder: "b", TTL: time.Minute})
		if !errors.Is(err, lock.ErrFenceOutOfRange) {
			t.Fatalf("acquire past 2^53 without TIME: %v", err)
		}
		if v := c.Get(ctx, lock.FenceKey(key)).Val(); v != "9007199254740992" {
			t.Fatalf("counter %q after the refusal", v)
		}
		if n := c.Exists(ctx, lock.LockKey(key), lock.RunKey(key, next)).Val(); n != 0 {
			t.Fatalf("the refused acquire left %d of lock and entry", n)
		}
	})

	t.Run("our own call again after the entry vanished", func(t *testing.T) {
		const key = "resent"
		token, err := lock.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		req := lock.Request{Key: key, Occurrence: occ, Holder: "pod-1", TTL: time.Minute, Token: token}
		if _, err := l.Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		c.Del(ctx, lock.RunKey(key, occ)) // evicted
		const forged = "1e300"
		c.Set(ctx, lock.FenceKey(key), forged, 0)
		c.PExpire(ctx, lock.LockKey(key), 30*time.Second)
		refused(t, key, req, forged)
		if p := c.PTTL(ctx, lock.LockKey(key)).Val(); p <= 0 || p > 30*time.Second {
			t.Fatalf("lock ttl %v after the refusal, was at most 30s", p)
		}
		if err := c.HGet(ctx, lock.RunKey(key, occ), "state").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("the refused acquire wrote an entry: %v", err)
		}
	})
}
