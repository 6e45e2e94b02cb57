// Package lock is lockedcron's Redis lock: a lock per key with a fencing counter and a
// ledger entry per scheduled occurrence, each operation one Lua script and one round trip.
//
// Keys, hash-tagged so that one key's entries share a Cluster slot:
//
//	lockedcron:{<key>}:lock              "<token> <holder>", PX ttl
//	lockedcron:{<key>}:fence             INCR counter, never expires
//	lockedcron:{<key>}:run:<unix secs>   hash: state running|succeeded|failed, holder, token, recovered,
//	                                     fence, acquiredAt, finishedAt (unix ms); PX retention
package lock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors.
var (
	// ErrNotObtained: another holder has the lock. The error is a *HeldError naming it.
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrSuppressed: the occurrence already succeeded (the ledger says so).
	ErrSuppressed = errors.New("lock: occurrence already succeeded")
	// ErrLost: the lock is gone or held by someone else.
	ErrLost = errors.New("lock: lost")
	// ErrNotEnoughReplicas: fewer replicas than asked acknowledged the acquisition.
	ErrNotEnoughReplicas = errors.New("lock: not enough replicas acknowledged")
)

// HeldError is returned by Acquire when another holder has the lock.
type HeldError struct {
	// Holder is the holder written in the lock's value ("" if it could not be read).
	Holder string
}

func (e *HeldError) Error() string {
	if e.Holder == "" {
		return ErrNotObtained.Error()
	}
	return fmt.Sprintf("%s: held by %s", ErrNotObtained, e.Holder)
}

func (e *HeldError) Unwrap() error { return ErrNotObtained }

// SuppressedError is returned by Acquire when the occurrence already succeeded.
type SuppressedError struct {
	// Holder is the holder that ran it.
	Holder string
}

func (e *SuppressedError) Error() string {
	if e.Holder == "" {
		return ErrSuppressed.Error()
	}
	return fmt.Sprintf("%s: by %s", ErrSuppressed, e.Holder)
}

func (e *SuppressedError) Unwrap() error { return ErrSuppressed }

// Ledger states.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

// DefaultRetention is how long a finished occurrence is remembered unless told otherwise.
const DefaultRetention = 168 * time.Hour

// LockKey is the Redis key of key's lock.
func LockKey(key string) string { return "lockedcron:{" + key + "}:lock" }

// FenceKey is the Redis key of key's fencing counter.
func FenceKey(key string) string { return "lockedcron:{" + key + "}:fence" }

// RunKey is the Redis key of the ledger entry for key's occurrence (whole seconds).
func RunKey(key string, occurrence time.Time) string {
	return "lockedcron:{" + key + "}:run:" + strconv.FormatInt(occurrence.Unix(), 10)
}

var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/finish.lua
	finishSrc string

	acquireScript = redis.NewScript(acquireSrc)
	renewScript   = redis.NewScript(renewSrc)
	finishScript  = redis.NewScript(finishSrc)
)

// Succeeded reports whether the ledger says key's occurrence succeeded.
func Succeeded(ctx context.Context, c redis.UniversalClient, key string, occurrence time.Time) (bool, error) {
	st, err := c.HGet(ctx, RunKey(key, occurrence), "state").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st == StateSucceeded, nil
}

// Locker takes locks through one client.
type Locker struct {
	c   redis.UniversalClient
	now func() time.Time
}

// New returns a Locker over c.
func New(c redis.UniversalClient) *Locker { return &Locker{c: c, now: time.Now} }

// Request says what to lock.
type Request struct {
	Key        string        // the lock key (required)
	Occurrence time.Time     // the scheduled time (whole seconds are used)
	Holder     string        // who we are; written into the lock and the ledger
	TTL        time.Duration // lock ttl (> 0)
	Retention  time.Duration // how long the ledger entry lives; DefaultRetention if 0
	// MinReplicas > 0: after acquiring, WAIT for that many replicas to acknowledge, up to
	// ReplicaTimeout (default TTL/2); if fewer do, the lock is released and Acquire
	// returns ErrNotEnoughReplicas.
	MinReplicas    int
	ReplicaTimeout time.Duration
}

// Lease is a held lock.
type Lease struct {
	c          redis.UniversalClient
	now        func() time.Time
	req        Request
	value      string
	Token      string    // the random token (hex, 128 bits)
	Fence      int64     // the fencing token: higher than every earlier holder's
	Recovered  bool      // a previous run of this occurrence crashed while running
	AcquiredAt time.Time // when the acquire script returned
}

// Key is the lease's lock key.
func (l *Lease) Key() string { return l.req.Key }

// NewToken returns 128 random bits from crypto/rand, hex-encoded.
func NewToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lock: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Acquire runs the acquire script once: it fails with a *SuppressedError (ErrSuppressed)
// when the occurrence already succeeded, a *HeldError (ErrNotObtained) when the lock is
// held, or returns the Lease.
func (l *Locker) Acquire(ctx context.Context, req Request) (*Lease, error) {
	if req.Key == "" {
		return nil, errors.New("lock: empty key")
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("lock: ttl %v must be positive", req.TTL)
	}
	if req.Retention <= 0 {
		req.Retention = DefaultRetention
	}
	token, err := NewToken()
	if err != nil {
		return nil, err
	}
	value := token + " " + req.Holder

	// With MinReplicas the script and WAIT must share one connection: WAIT counts
	// acknowledgements of the writes made on the connection it is sent on.
	var sc redis.Scripter = l.c
	var conn *redis.Conn
	if req.MinReplicas > 0 {
		node, err := masterFor(ctx, l.c, LockKey(req.Key))
		if err != nil {
			return nil, err
		}
		conn = node.Conn()
		defer conn.Close()
		sc = conn
	}

	keys := []string{LockKey(req.Key), FenceKey(req.Key), RunKey(req.Key, req.Occurrence)}
	res, err := acquireScript.Run(ctx, sc, keys,
		value, req.TTL.Milliseconds(), req.Retention.Milliseconds(), token, req.Holder,
		l.now().UnixMilli()).Slice()
	if err != nil {
		return nil, fmt.Errorf("lock: acquire %q: %w", req.Key, err)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("lock: acquire %q: empty reply", req.Key)
	}
	switch res[0] {
	case "suppressed":
		return nil, &SuppressedError{Holder: str(res, 1)}
	case "held":
		return nil, &HeldError{Holder: holderOf(str(res, 1))}
	case "acquired":
	default:
		return nil, fmt.Errorf("lock: acquire %q: unexpected reply %v", req.Key, res)
	}
	lease := &Lease{
		c: l.c, now: l.now, req: req, value: value, Token: token,
		Fence: num(res, 1), Recovered: num(res, 2) == 1, AcquiredAt: l.now(),
	}
	if req.MinReplicas > 0 {
		timeout := req.ReplicaTimeout
		if timeout <= 0 {
			timeout = req.TTL / 2
		}
		n, err := conn.Wait(ctx, req.MinReplicas, timeout).Result()
		if err == nil && n < int64(req.MinReplicas) {
			err = fmt.Errorf("%w: %d of %d within %v", ErrNotEnoughReplicas, n, req.MinReplicas, timeout)
		}
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = lease.Release(rctx)
			return nil, err
		}
	}
	return lease, nil
}

// masterFor returns a client to the master serving key: the client itself for
// standalone and Sentinel, the slot's master for Cluster.
func masterFor(ctx context.Context, c redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("lock: master for %q: %w", key, err)
		}
		return n, nil
	default:
		return nil, fmt.Errorf("lock: min replicas: unsupported client %T", c)
	}
}

// Renew resets the lock's ttl if it is still ours (compare-and-pexpire); ErrLost if not.
func (l *Lease) Renew(ctx context.Context) error {
	n, err := renewScript.Run(ctx, l.c, []string{LockKey(l.req.Key)}, l.value, l.req.TTL.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("lock: renew %q: %w", l.req.Key, err)
	}
	if n != 1 {
		return ErrLost
	}
	return nil
}

// Finish records state (StateSucceeded or StateFailed) in the ledger, kept for the
// retention, and releases the lock, in one round trip. Neither is touched if it belongs
// to another run. ErrLost is returned when the lock was no longer ours (the ledger may
// still have been recorded).
func (l *Lease) Finish(ctx context.Context, state string) error {
	if state != StateSucceeded && state != StateFailed {
		return fmt.Errorf("lock: finish: state %q", state)
	}
	return l.finish(ctx, state)
}

// Release deletes the lock if it is still ours (compare-and-delete) and forgets our
// running ledger entry, as if we had never run. ErrLost if the lock was not ours.
func (l *Lease) Release(ctx context.Context) error { return l.finish(ctx, "") }

func (l *Lease) finish(ctx context.Context, state string) error {
	keys := []string{LockKey(l.req.Key), RunKey(l.req.Key, l.req.Occurrence)}
	res, err := finishScript.Run(ctx, l.c, keys, l.value, l.Token, state,
		l.req.Retention.Milliseconds(), l.now().UnixMilli()).Int64Slice()
	if err != nil {
		return fmt.Errorf("lock: release %q: %w", l.req.Key, err)
	}
	if len(res) < 1 || res[0] != 1 {
		return ErrLost
	}
	return nil
}

// holderOf extracts the holder from a lock value "<token> <holder>".
func holderOf(v string) string {
	if _, h, ok := strings.Cut(v, " "); ok {
		return h
	}
	return v
}

func str(res []any, i int) string {
	if i < len(res) {
		if s, ok := res[i].(string); ok {
			return s
		}
	}
	return ""
}

func num(res []any, i int) int64 {
	if i < len(res) {
		if n, ok := res[i].(int64); ok {
			return n
		}
	}
	return 0
}
