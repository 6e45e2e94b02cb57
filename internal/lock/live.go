package lock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/inspect.lua
	inspectSrc string
	//go:embed scripts/unlock.lua
	unlockSrc string

	inspectScript = redis.NewScript(inspectSrc)
	unlockScript  = redis.NewScript(unlockSrc)
)

// Live is a key's lock as Redis holds it now (Inspect).
type Live struct {
	Key    string
	Token  string        // the holder's random token: what Unlock compares
	Holder string        // the holder identity written in the lock
	TTL    time.Duration // remaining time to live (PTTL); negative when the user may not ask
	Fence  int64         // the holder's fencing token
	// Occurrence is the occurrence the holder runs: the one whose running ledger entry
	// carries the lock's token; zero when no entry does (evicted, or written by hand), or
	// when the user may not SCAN (the ACL user documented for lockwrap).
	Occurrence time.Time
}

// ErrNotHeld: Unlock found no lock for the key, or one held with another token.
var ErrNotHeld = errors.New("lock: not held with that token")

// Inspect reads key's lock: nil (and no error) when it is not held. The lock, its ttl and
// the fencing token come from one read-only script; the occurrence from the ledger entry
// carrying the lock's token, found by SCAN over the key's entries (on the master serving
// the key in a Cluster): one pass over the keyspace, for an interactive look, not a hot
// path.
func Inspect(ctx context.Context, c redis.UniversalClient, key string) (*Live, error) {
	res, err := inspectScript.Run(ctx, c, []string{LockKey(key), FenceKey(key)}).Slice()
	if err != nil {
		return nil, fmt.Errorf("lock: inspect %q: %w", key, err)
	}
	if len(res) == 0 {
		return nil, nil
	}
	value := str(res, 0)
	l := &Live{Key: key, TTL: time.Duration(num(res, 1)) * time.Millisecond}
	l.Token, l.Holder, _ = strings.Cut(value, " ")
	l.Fence, _ = strconv.ParseInt(str(res, 2), 10, 64)
	occ, err := occurrenceOf(ctx, c, key, l.Token)
	if err != nil && !redis.HasErrorPrefix(err, "NOPERM") {
		return nil, err
	}
	l.Occurrence = occ
	return l, nil
}

// occurrenceOf finds the ledger entry of key written with token.
func occurrenceOf(ctx context.Context, c redis.UniversalClient, key, token string) (time.Time, error) {
	node, err := masterFor(ctx, c, LockKey(key))
	var sc interface {
		Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
		HGet(ctx context.Context, key, field string) *redis.StringCmd
	} = c
	if err == nil {
		sc = node
	}
	prefix := keyPrefix(key) + "run:"
	match := globEscape(prefix) + "*"
	var cursor uint64
	for {
		keys, next, err := sc.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return time.Time{}, fmt.Errorf("lock: inspect %q: scan: %w", key, err)
		}
		for _, k := range keys {
			secs, err := strconv.ParseInt(strings.TrimPrefix(k, prefix), 10, 64)
			if err != nil {
				continue
			}
			t, err := sc.HGet(ctx, k, "token").Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return time.Time{}, fmt.Errorf("lock: inspect %q: %w", key, err)
			}
			if t == token {
				return time.Unix(secs, 0).UTC(), nil
			}
		}
		if cursor = next; cursor == 0 {
			return time.Time{}, nil
		}
	}
}

// globEscape quotes the characters SCAN MATCH treats as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Unlock deletes key's lock if, and only if, it is held with token (compare-and-delete),
// returning the holder it removed. The ledger is left alone. ErrNotHeld (nothing changed)
// when the lock is free or held with another token.
func Unlock(ctx context.Context, c redis.UniversalClient, key, token string) (holder string, err error) {
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("lock: unlock %q: token %q is empty or has white space", key, token)
	}
	res, err := unlockScript.Run(ctx, c, []string{LockKey(key)}, token).Slice()
	if err != nil {
		return "", fmt.Errorf("lock: unlock %q: %w", key, err)
	}
	if num(res, 0) != 1 {
		if str(res, 1) == "" {
			return "", fmt.Errorf("%w: %q is not locked", ErrNotHeld, key)
		}
		return "", fmt.Errorf("%w: %q is held by %s with another token", ErrNotHeld, key, holderOf(str(res, 1)))
	}
	return holderOf(str(res, 1)), nil
}
