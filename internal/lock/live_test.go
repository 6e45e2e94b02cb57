package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// Inspect shows the lease Acquire took (holder, token, fence, occurrence, ttl), also for a
// key with glob characters among other keys' entries; Unlock deletes it only with its
// token and leaves the ledger alone.
func TestInspectAndUnlock(t *testing.T) {
	s := redistest.Start(t)
	for _, key := range []string{"team-a/report", "odd*key?[x]"} {
		t.Run(key, func(t *testing.T) {
			ctx := ctxT(t)
			c := client(t, lock.ClientConfig{URL: s.URL()})
			if l, err := lock.Inspect(ctx, c, key); err != nil || l != nil {
				t.Fatalf("free lock: %+v, %v", l, err)
			}
			lk := lock.New(c)
			// Another occurrence's finished entry and another key's running one.
			other, err := lk.Acquire(ctx, lock.Request{Key: key, Occurrence: occ.Add(-time.Hour), Holder: "old", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Finish(ctx, lock.StateSucceeded); err != nil {
				t.Fatal(err)
			}
			if _, err := lk.Acquire(ctx, lock.Request{Key: key + "-other", Occurrence: occ, Holder: "x", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			lease, err := lk.Acquire(ctx, lock.Request{Key: key, Occurrence: occ, Holder: "c1/ns/pod-1", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			live, err := lock.Inspect(ctx, c, key)
			if err != nil {
				t.Fatal(err)
			}
			if live == nil || live.Holder != "c1/ns/pod-1" || live.Token != lease.Token || live.Fence != lease.Fence ||
				!live.Occurrence.Equal(occ) || live.TTL <= 50*time.Second || live.TTL > time.Minute {
				t.Fatalf("live %+v, lease token %s fence %d", live, lease.Token, lease.Fence)
			}

			if _, err := lock.Unlock(ctx, c, key, "0123456789abcdef0123456789abcdef"); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("unlock with a wrong token: %v", err)
			}
			if l, _ := lock.Inspect(ctx, c, key); l == nil {
				t.Fatal("a wrong token deleted the lock")
			}
			holder, err := lock.Unlock(ctx, c, key, lease.Token)
			if err != nil || holder != "c1/ns/pod-1" {
				t.Fatalf("unlock: %q, %v", holder, err)
			}
			if l, err := lock.Inspect(ctx, c, key); err != nil || l != nil {
				t.Fatalf("after unlock: %+v, %v", l, err)
			}
			if st := s.Do("HGET", lock.RunKey(key, occ), "state"); st != lock.StateRunning {
				t.Fatalf("ledger entry after unlock: %v", st)
			}
			if _, err := lock.Unlock(ctx, c, key, lease.Token); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("unlock of a free lock: %v", err)
			}
			// The holder that was unlocked finds its lock lost.
			if err := lease.Renew(ctx); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("renew after unlock: %v", err)
			}
		})
	}
}

// Inspect with the user docs/lockwrap.md documents (no PTTL, no SCAN): the holder, token
// and fence; the ttl unknown (negative), and no occurrence. It failed with NOPERM (kubectl lockedcron status exited 93 for
// every job whose lock was held).
func TestInspectAsTheDocumentedACLUser(t *testing.T) {
	s := redistest.Start(t)
	s.Do("ACL", "SETUSER", "lockwrap", "on", ">s3cret", "resetkeys", "~lockedcron:*", "-@all",
		"+evalsha", "+eval", "+wait", "+hget", "+ping",
		"+get", "+set", "+del", "+hset", "+pexpire", "+time", "+info")
	ctx := ctxT(t)
	acl := client(t, lock.ClientConfig{URL: s.URL(), Username: "lockwrap", Password: "s3cret"})
	lease, err := lock.New(acl).Acquire(ctx, lock.Request{Key: "team-a/report", Occurrence: occ, Holder: "c1/ns/pod-1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	live, err := lock.Inspect(ctx, acl, "team-a/report")
	if err != nil {
		t.Fatal(err)
	}
	if live == nil || live.Holder != "c1/ns/pod-1" || live.Token != lease.Token || live.Fence != lease.Fence || !live.Occurrence.IsZero() || live.TTL >= 0 {
		t.Fatalf("live %+v", live)
	}
}
