// Package lock is lockedcron's Redis lock: a lock per key with a fencing counter and a
// ledger entry per scheduled occurrence, each operation one Lua script and one round trip.
//
// Keys, hash-tagged so that one key's entries share a Cluster slot:
//
//	lockedcron:{<tag>}:lock              "<token> <holder>", PX ttl
//	lockedcron:{<tag>}:fence             the last fencing token, never expires
//	lockedcron:{<tag>}:run:<unix secs>   hash: state running|succeeded|failed, holder, token,
//	                                     recovered, tookOver, fence, acquiredAt, finishedAt
//	                                     (unix ms), and once finished released, last,
//	                                     watermarkStored (what Finish did, for a call resent
//	                                     once the :fin: key expired);
//	                                     PX max(retention, ttl), renewed with the lock
//	lockedcron:{<tag>}:run:id:<run id>   the same, for a run with its own identity (Request.RunID:
//	                                     a manual run), apart from every scheduled occurrence
//	lockedcron:{<tag>}:last              hash: the key's last success — occurrence (unix secs),
//	                                     finishedAt (unix ms), fence, holder, watermark; never
//	                                     expires (like the fence, it lives as long as the key)
//	lockedcron:{<tag>}:fin:<token>       what the Finish that recorded the outcome of the run
//	                                     holding token answered, for a resent call: "<state>
//	                                     <released> <recorded> <last> <watermarkStored>
//	                                     <stored watermark>", PX max(2×ttl, 1 min)
//
// The tag is the key itself, or "#" and the first 16 hex digits of the key's SHA-256 when
// the key contains "{" or "}" (which would otherwise make Redis hash another part of the
// name, or nothing, and split the keys over Cluster slots).
//
// Guarantees, and what they rely on:
//   - Fencing tokens are max(previous + 1, Redis server time in µs): strictly increasing per
//     key, also across a loss of Redis data, as long as the server's clock does not go back
//     (in Cluster and after a failover: the clocks of the masters serving the key agree).
//   - A running ledger entry lives as long as the lock (renewals extend it); a finished one
//     (succeeded or failed) is recorded even when the entry had vanished, unless another
//     run's entry is there (ErrNotRecorded).
//   - A lock held by our own holder identity for an occurrence whose running entry carries
//     that lock's token is our crashed predecessor: Acquire takes it over. Holder must
//     therefore name one runner such that a new process with the same identity means the
//     old one is dead (a pod name, not a shared hostname of concurrent runners).
//   - The last success and its watermark move only in the call that records a success, and
//     only when the lock was ours to the end and our fencing token is the newest: a failed
//     run, a lost lock, a stale holder or a crash before Finish never moves them. Acquire
//     returns them in its one round trip (Lease.LastSuccess).
//   - Only a durable Redis keeps locks and ledger: Lease.Warnings and Durability say when
//     the server runs without an AOF or with an evicting maxmemory-policy.
package lock

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	// ErrNotEnoughReplicas: fewer replicas than asked acknowledged the acquisition (or
	// the succeeded ledger write).
	ErrNotEnoughReplicas = errors.New("lock: not enough replicas acknowledged")
	// ErrBlackout: a blackout of the run's job began after the run was made (Request.
	// BlackoutID, MadeAt). The error is a *BlackoutError.
	ErrBlackout = errors.New("lock: held back by a blackout that began after the run was made")
	// ErrNotRecorded: Finish could not record the outcome because the occurrence's ledger
	// entry belongs to another run.
	// ErrFenceOutOfRange: the key's fencing counter holds a value the scripts cannot count
	// on by one (at or past 2^53, not a number, not a string), which lockedcron never
	// writes. Nothing was taken or written.
	ErrFenceOutOfRange = errors.New("lock: fencing counter out of range")
	ErrNotRecorded     = errors.New("lock: ledger not recorded: the occurrence's entry belongs to another run")
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

// SuppressedError is returned by Acquire when the occurrence is not ours to run: it
// already succeeded, or (State StateFailed) an earlier holder of our name ran it and
// failed (Request.HolderName).
type SuppressedError struct {
	// Holder is the holder that ran it.
	Holder string
	// State is StateFailed when it failed in that holder; SuppressedEnded when the call's
	// own token's run has ended (a late copy of its acquire); "" when it succeeded.
	State string
}

// SuppressedEnded is SuppressedError.State for an acquire whose token's run has ended
// (finished, or let go unstarted): a late copy of the call, which takes nothing.
const SuppressedEnded = "ended"

func (e *SuppressedError) Error() string {
	switch {
	case e.State == SuppressedEnded:
		return "lock: this token's run has ended (finished, or let go unstarted): a late copy of its acquire takes nothing"
	case e.State == StateFailed:
		return fmt.Sprintf("lock: occurrence already run: it failed in %s, an earlier pod of this name; a pod made again under that name does not run it again", e.Holder)
	case e.Holder == "":
		return ErrSuppressed.Error()
	}
	return fmt.Sprintf("%s: by %s", ErrSuppressed, e.Holder)
}

func (e *SuppressedError) Unwrap() error { return ErrSuppressed }

// BlackoutError is returned by Acquire when the run's job is in a blackout that began
// after the run was made: the run must not start its job (see SetBlackout).
type BlackoutError struct {
	Since  time.Time // when the controller saw the blackout begin (its clock, ms)
	Reason string    // what holds the job back, as the controller wrote it
}

func (e *BlackoutError) Error() string {
	return fmt.Sprintf("%s (%s, since %s)", ErrBlackout, e.Reason, e.Since.UTC().Format(time.RFC3339Nano))
}

func (e *BlackoutError) Unwrap() error { return ErrBlackout }

// Ledger states.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

// DefaultRetention is how long a finished occurrence is remembered unless told otherwise.
const DefaultRetention = 168 * time.Hour

// LockKey is the Redis key of key's lock.
func LockKey(key string) string { return keyPrefix(key) + "lock" }

// FenceKey is the Redis key of key's fencing counter.
func FenceKey(key string) string { return keyPrefix(key) + "fence" }

// LastKey is the Redis key of key's last success and watermark.
func LastKey(key string) string { return keyPrefix(key) + "last" }

// FinishKey is the Redis key where the Finish call that recorded the outcome of the run
// holding token keeps what it answered, for a call resent after its reply was lost: by
// then the lock is gone (that call released it), and a contender may have taken it and
// written its own running entry over the occurrence's (a failed run does not suppress).
func FinishKey(key, token string) string { return keyPrefix(key) + "fin:" + token }

// FinishKeyTTL is how long FinishKey lives for a lock of ttl: past every resend of the call
// (go-redis's own after a read timeout, lockwrap's until the lock would have expired and
// for at least a ttl of at most 10 s, each within its deadline).
func FinishKeyTTL(ttl time.Duration) time.Duration { return max(2*ttl, time.Minute) }

// MaxWatermarkBytes is the largest watermark Finish stores.
const MaxWatermarkBytes = 1024

// ErrWatermarkTooLarge: FinishWith was given a watermark over MaxWatermarkBytes; nothing
// was recorded.
var ErrWatermarkTooLarge = fmt.Errorf("lock: watermark larger than %d bytes", MaxWatermarkBytes)

// Success is a key's last successful run, as recorded by Finish.
type Success struct {
	Occurrence time.Time // the occurrence it ran (whole seconds, UTC)
	FinishedAt time.Time // when it finished (the finishing lockwrap's clock, ms)
	Fence      int64     // its fencing token
	Holder     string    // who ran it
	// Watermark is the key's watermark: the last one a successful run stored (possibly an
	// earlier success than this one, when this one stored none); "" when none ever was.
	Watermark string
}

// RunKey is the Redis key of the ledger entry for key's occurrence (whole seconds).
func RunKey(key string, occurrence time.Time) string {
	return keyPrefix(key) + "run:" + strconv.FormatInt(occurrence.Unix(), 10)
}

// RunIDKey is the Redis key of the ledger entry of key's run with its own identity
// (Request.RunID), apart from every scheduled occurrence's.
func RunIDKey(key, runID string) string {
	return keyPrefix(key) + "run:id:" + runID
}

// BlackoutKey is the Redis key of the blackout marker of one job (its UID) on key: the
// controller keeps it while a blackout holds the job back (SetBlackout), and the acquire
// script refuses the job's runs made before the blackout began.
func BlackoutKey(key, jobID string) string {
	return keyPrefix(key) + "blackout:" + jobID
}

// SetBlackout writes (or refreshes) job jobID's blackout marker on key for ttl from now:
// SetBlackoutUntil with until now + ttl.
func SetBlackout(ctx context.Context, c redis.UniversalClient, key, jobID string, since time.Time, reason string, ttl time.Duration) error {
	return SetBlackoutUntil(ctx, c, key, jobID, since, time.Now().Add(ttl), reason, ttl)
}

// SetBlackoutUntil writes (or refreshes) job jobID's blackout marker on key: the job has
// been held back since since, for reason (the controller's clock). Acquire refuses the
// job's runs made before since (*BlackoutError) for as long as Redis keeps the key (ttl);
// runs made after since were made knowingly and are granted. until (the controller's
// clock: when the writer means it to end unless written again) is in the value for those
// who read it; Acquire does not compare it with the acquiring run's clock, which on a node
// ahead of the controller's read a live marker as past its end. The value is
// "<since, unix ms> <until, unix ms> <reason>".
func SetBlackoutUntil(ctx context.Context, c redis.UniversalClient, key, jobID string, since, until time.Time, reason string, ttl time.Duration) error {
	if key == "" || jobID == "" {
		return errors.New("lock: blackout marker needs a key and a job")
	}
	v := strconv.FormatInt(since.UnixMilli(), 10) + " " + strconv.FormatInt(until.UnixMilli(), 10) + " " + reason
	return c.Set(ctx, BlackoutKey(key, jobID), v, ttl).Err()
}

// ClearBlackout deletes job jobID's blackout marker on key: its blackout ended.
func ClearBlackout(ctx context.Context, c redis.UniversalClient, key, jobID string) error {
	return c.Del(ctx, BlackoutKey(key, jobID)).Err()
}

// runKey is the ledger entry a request runs under: its RunID's, else its occurrence's.
func runKey(req Request) string {
	if req.RunID != "" {
		return RunIDKey(req.Key, req.RunID)
	}
	return RunKey(req.Key, req.Occurrence)
}

// keyPrefix is "lockedcron:{<tag>}:", the tag being the key when it has no brace (the
// layout of the first release) and "#" + 16 hex digits of its SHA-256 otherwise, so that
// the tag Redis hashes is always exactly the one between our braces, and never empty.
func keyPrefix(key string) string {
	tag := key
	if strings.ContainsAny(key, "{}") {
		sum := sha256.Sum256([]byte(key))
		tag = "#" + hex.EncodeToString(sum[:8])
	}
	return "lockedcron:{" + tag + "}:"
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
	Key        string    // the lock key (required)
	Occurrence time.Time // the scheduled time (whole seconds are used)
	// RunID, when set, gives the run a ledger entry of its own (RunIDKey) instead of the
	// occurrence's: a manual run neither consumes nor is suppressed by a scheduled
	// occurrence; the same RunID once succeeded is suppressed. Occurrence still names the
	// run in the key's last success.
	RunID  string
	Holder string // who we are; written into the lock and the ledger
	// HolderName, when set, is Holder without its last "/"-part, which tells apart
	// processes made again under one name (a pod's UID). An occurrence whose failed ledger
	// entry another holder of this name wrote (an earlier pod of our name ran it to its
	// end) is suppressed (*SuppressedError): it is not ours to run again. A resent call
	// and a restarted container keep the whole Holder, so they are not affected; a running
	// entry is held (or, its lock expired, a crashed run's to recover) as without a name.
	HolderName string
	TTL        time.Duration // lock ttl (> 0)
	Retention  time.Duration // how long the ledger entry lives; DefaultRetention if 0
	// MinReplicas > 0: after acquiring, WAIT for that many replicas to acknowledge, up to
	// ReplicaTimeout (default TTL/2); if fewer do, the lock is released and Acquire
	// returns ErrNotEnoughReplicas.
	// The same WAIT follows every Renew, so that the lock's expiry a failover would leave
	// is the one its holder counts from, and Finish(StateSucceeded), so that a recorded
	// success survives a failover.
	MinReplicas    int
	ReplicaTimeout time.Duration
	// BlackoutID and MadeAt, when both set, name the run's job (its UID) and when the
	// controller made the run (its clock): the lock is not granted while the job's
	// blackout marker (SetBlackout) says a blackout began after MadeAt (*BlackoutError).
	// A run waiting for the lock when a rollout begins then does not start its job in it.
	BlackoutID string
	MadeAt     time.Time
	// Token, when set, is used instead of a new one. A caller retrying one run's acquire
	// passes the same token (from NewToken) to every attempt: an attempt whose reply was
	// lost but which took the lock is then recognised and returns the same lease.
	Token string
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
	TookOver   bool      // the lock was held by our crashed predecessor (same holder) and is now ours
	AcquiredAt time.Time // when the acquire script returned
	// Warnings say how the Redis serving the lock could lose it or the ledger (no AOF, an
	// evicting maxmemory-policy, INFO or TIME denied to the user), read in the same round
	// trip as the acquisition; empty when it looks durable.
	Warnings []string
	// LastSuccess is the key's last successful run and watermark, read in the same round
	// trip as the acquisition; nil when none was recorded.
	LastSuccess *Success
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
	token := req.Token
	if token == "" {
		var err error
		if token, err = NewToken(); err != nil {
			return nil, err
		}
	} else if strings.ContainsAny(token, " \t\r\n") {
		return nil, fmt.Errorf("lock: token %q has white space", token)
	}
	value := token + " " + req.Holder

	t, err := writer(ctx, l.c, req, req.MinReplicas > 0)
	if err != nil {
		return nil, err
	}
	defer t.Close()

	keys := []string{LockKey(req.Key), FenceKey(req.Key), runKey(req), LastKey(req.Key), FinishKey(req.Key, token)}
	args := []any{value, req.TTL.Milliseconds(), req.Retention.Milliseconds(), token, req.Holder,
		l.now().UnixMilli(), req.HolderName}
	if req.BlackoutID != "" && !req.MadeAt.IsZero() {
		keys = append(keys, BlackoutKey(req.Key, req.BlackoutID))
		args = append(args, req.MadeAt.UnixMilli())
	}
	res, err := acquireScript.Run(ctx, t, keys, args...).Slice()
	if err != nil {
		t.failed(ctx, err)
		return nil, fmt.Errorf("lock: acquire %q: %w", req.Key, err)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("lock: acquire %q: empty reply", req.Key)
	}
	switch res[0] {
	case "suppressed":
		return nil, &SuppressedError{Holder: str(res, 1), State: str(res, 2)}
	case "held":
		return nil, &HeldError{Holder: holderOf(str(res, 1))}
	case "blackout":
		return nil, &BlackoutError{Since: time.UnixMilli(num(res, 1)), Reason: str(res, 2)}
	case "fence":
		what := fmt.Sprintf("holds %q, which the lock's scripts (Lua numbers) cannot count on by one: at or past 2^53, "+
			"or not a number", str(res, 1))
		if str(res, 1) == "WRONGTYPE" {
			what = "is not a string (a hash, a list, …)"
		}
		return nil, fmt.Errorf("%w: %s %s, so fences could repeat. lockedcron never writes such a value (its fences "+
			"are the server's time in µs): find who wrote the key, then delete it; the next fence is then "+
			"the server's time again, above every fence lockedcron handed out unless that clock went back",
			ErrFenceOutOfRange, FenceKey(req.Key), what)
	case "acquired":
	default:
		return nil, fmt.Errorf("lock: acquire %q: unexpected reply %v", req.Key, res)
	}
	lease := &Lease{
		c: l.c, now: l.now, req: req, value: value, Token: token,
		Fence: num(res, 1), Recovered: num(res, 2) == 1, TookOver: num(res, 3) == 1,
		AcquiredAt:  l.now(),
		Warnings:    durabilityWarnings("", str(res, 4), str(res, 5), str(res, 6)),
		LastSuccess: lastSuccess(res[min(7, len(res)):]),
	}
	if t.replicated() {
		if err := waitReplicas(ctx, t.conn, req); err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = lease.Release(rctx)
			return nil, err
		}
	}
	return lease, nil
}

// Abandon undoes what an acquire of req may have done unbeknown to its caller: an attempt
// whose reply was lost (a timeout, a cut connection) may have taken the lock and written
// the occurrence's running entry, and a caller that then gives up (its retries spent, or
// interrupted) would leave them for a ttl — others skipping a lock nobody holds — and the
// next run would take the entry for a crashed run's (recovered). The lock is deleted if it
// holds req.Token, the entry forgotten if it is req.Token's (a Release); anything else is
// left alone. req.Token must be the token every attempt was sent with.
func (l *Locker) Abandon(ctx context.Context, req Request) error {
	if req.Token == "" {
		return errors.New("lock: abandon needs the token the acquire was sent with")
	}
	lease := &Lease{c: l.c, now: l.now, req: req, value: req.Token + " " + req.Holder, Token: req.Token}
	if err := lease.Release(ctx); err != nil && !errors.Is(err, ErrLost) {
		return err
	}
	return nil
}

// lastSuccess reads acquire.lua's last-success fields: occurrence (unix s), finishedAt
// (unix ms), fence, holder, watermark; nil when no success was recorded.
func lastSuccess(f []any) *Success {
	occ, err := strconv.ParseInt(str(f, 0), 10, 64)
	if err != nil {
		return nil
	}
	s := &Success{Occurrence: time.Unix(occ, 0).UTC(), Holder: str(f, 3), Watermark: str(f, 4)}
	if ms, err := strconv.ParseInt(str(f, 1), 10, 64); err == nil {
		s.FinishedAt = time.UnixMilli(ms).UTC()
	}
	s.Fence, _ = strconv.ParseInt(str(f, 2), 10, 64)
	return s
}

// nodeFailed has a Cluster client reload its slot map after a call to a node it named
// (writer) failed: the map is otherwise reloaded every 60 s only, and after a failover it
// sends our calls to the demoted master meanwhile (MOVED, READONLY, refused). Reloads are
// in the background and coalesced.
func nodeFailed(ctx context.Context, c redis.UniversalClient, err error) {
	if cc, ok := asCluster(c); ok && err != nil && !errors.Is(err, redis.Nil) {
		cc.ReloadState(ctx)
	}
}

// writer returns where to run a script of req's key: the client itself, or, when its
// writes must reach req.MinReplicas replicas (replicated), one connection to the key's
// master, on which waitReplicas then sends WAIT: WAIT counts acknowledgements of the
// writes made on the connection it is sent on. The caller closes it.
func writer(ctx context.Context, c redis.UniversalClient, req Request, replicated bool) (*target, error) {
	if !replicated {
		return &target{Scripter: c, c: c}, nil
	}
	node, err := masterFor(ctx, c, LockKey(req.Key))
	if err != nil {
		return nil, err
	}
	conn := node.Conn()
	return &target{Scripter: conn, c: c, conn: conn}, nil
}

// target is where writer sends a key's scripts: the client, or (conn not nil) one
// connection to the key's master.
type target struct {
	redis.Scripter
	c    redis.UniversalClient
	conn *redis.Conn
}

// replicated reports whether the scripts run on one connection to the key's master,
// and their writes are to be waited for (waitReplicas).
func (t *target) replicated() bool { return t.conn != nil }

// failed tells a Cluster client that the node writer chose failed (nodeFailed); nothing
// when the script went through the client, which finds its node itself.
func (t *target) failed(ctx context.Context, err error) {
	if t.conn != nil {
		nodeFailed(ctx, t.c, err)
	}
}

// Close gives back the connection to the key's master, if writer took one.
func (t *target) Close() {
	if t.conn != nil {
		_ = t.conn.Close()
	}
}

// waitReplicas sends WAIT on conn (the connection that made the writes), for at most
// req.ReplicaTimeout (default ttl/2) and never up to ctx's deadline: a WAIT cut by the
// deadline would report an i/o timeout instead of how many replicas acknowledged.
func waitReplicas(ctx context.Context, conn *redis.Conn, req Request) error {
	timeout := req.ReplicaTimeout
	if timeout <= 0 {
		timeout = req.TTL / 2
	}
	if dl, ok := ctx.Deadline(); ok {
		// Redis answers a timed-out WAIT on its next event-loop tick (up to 1/hz, 100 ms,
		// late), later on a loaded host; WAIT 0 blocks for ever: a millisecond at least.
		left := time.Until(dl)
		timeout = max(min(timeout, left-min(500*time.Millisecond, left/2)), time.Millisecond)
	}
	n, err := conn.Wait(ctx, req.MinReplicas, timeout).Result()
	if err != nil {
		return fmt.Errorf("%w: wait: %w", ErrNotEnoughReplicas, err)
	}
	if n < int64(req.MinReplicas) {
		return fmt.Errorf("%w: %d of %d within %v", ErrNotEnoughReplicas, n, req.MinReplicas, timeout)
	}
	return nil
}

// masterFor returns a client to the master serving key: the client itself for
// standalone and Sentinel, the slot's master for Cluster.
func masterFor(ctx context.Context, c redis.UniversalClient, key string) (*redis.Client, error) {
	if cc, ok := asCluster(c); ok {
		c = cc
	}
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
// It also keeps our running ledger entry alive for max(retention, ttl) from now, writing
// it again if it vanished.
//
// With MinReplicas > 0 the renewal is followed by the same WAIT as the acquisition, and
// fewer acknowledgements return an error wrapping ErrNotEnoughReplicas (the lock is still
// ours on the master): a renewal that only the master holds is lost with it in a failover,
// and the lock on the promoted replica expires a ttl after the last renewal it received.
// A caller counting its lock from this renewal would count past that expiry.
func (l *Lease) Renew(ctx context.Context) error {
	t, err := writer(ctx, l.c, l.req, l.req.MinReplicas > 0)
	if err != nil {
		return fmt.Errorf("lock: renew %q: %w", l.req.Key, err)
	}
	defer t.Close()
	keys := []string{LockKey(l.req.Key), runKey(l.req)}
	n, err := renewScript.Run(ctx, t, keys, l.value, l.req.TTL.Milliseconds(), l.Token,
		l.req.Retention.Milliseconds(), l.req.Holder, l.Fence, l.AcquiredAt.UnixMilli()).Int64()
	if err != nil {
		t.failed(ctx, err)
		return fmt.Errorf("lock: renew %q: %w", l.req.Key, err)
	}
	if n != 1 {
		return ErrLost
	}
	if t.replicated() {
		if err := waitReplicas(ctx, t.conn, l.req); err != nil {
			return fmt.Errorf("lock: renew %q: %w", l.req.Key, err)
		}
	}
	return nil
}

// Finish records state (StateSucceeded or StateFailed) in the ledger, kept for the
// retention, and releases the lock, in one round trip (plus a WAIT with MinReplicas > 0
// after StateSucceeded). It returns
//   - nil: the lock was ours to the end and the outcome is recorded;
//   - ErrLost: the lock was no longer ours. The outcome is recorded anyway when the entry
//     is ours or gone, so that a finished occurrence does not run again, but the run could
//     not prove it held the lock to the end: the wrapper reports it as LockLost, never a
//     clean success;
//   - ErrNotRecorded: the occurrence's entry belongs to another run (left alone);
//   - errors.Join(ErrLost, ErrNotRecorded): both (test with errors.Is);
//   - an error wrapping ErrNotEnoughReplicas (possibly joined with the above): fewer than
//     MinReplicas replicas acknowledged the succeeded record within ReplicaTimeout.
//
// Neither the lock nor the entry is touched when it belongs to another run.
func (l *Lease) Finish(ctx context.Context, state string) error {
	_, err := l.FinishWith(ctx, state, FinishOptions{})
	return err
}

// FinishOptions are Finish's optional parts.
type FinishOptions struct {
	// Watermark, when not empty, becomes the key's watermark — in the same call that
	// records StateSucceeded, and only if the lock was ours to the end and our fencing
	// token is still the newest. At most MaxWatermarkBytes; opaque text.
	Watermark string
	// Monotonic refuses a Watermark smaller than the stored one: numerically when both
	// are decimal integers (any length), otherwise byte-wise. The success is recorded
	// all the same; FinishResult says the watermark was refused.
	Monotonic bool
}

// WatermarkOutcome says what FinishWith did with FinishOptions.Watermark.
type WatermarkOutcome int

const (
	// WatermarkNotStored: no watermark given, or the run's success did not become the
	// key's last one (see FinishResult.LastSuccess).
	WatermarkNotStored WatermarkOutcome = iota
	// WatermarkStored: the key's watermark is now the one given.
	WatermarkStored
	// WatermarkRefused: Monotonic, and the one given is smaller than the stored one
	// (FinishResult.Stored), which stays.
	WatermarkRefused
)

// LastSuccessOutcome says whether a finished run became the key's last success.
type LastSuccessOutcome int

const (
	// LastSuccessUnchanged: the run did not succeed, or its success was not recorded.
	LastSuccessUnchanged LastSuccessOutcome = iota
	// LastSuccessRecorded: the key's last success is now this run.
	LastSuccessRecorded
	// LastSuccessNotOurs: the success was recorded in the ledger, but the lock was no
	// longer ours or a later holder had been given a fencing token, so neither the last
	// success nor the watermark moved.
	LastSuccessNotOurs
)

// FinishResult says what FinishWith did beyond the ledger.
type FinishResult struct {
	LastSuccess LastSuccessOutcome
	Watermark   WatermarkOutcome
	// Stored is the key's watermark that a refused one was smaller than.
	Stored string
}

// FinishWith is Finish with options: with StateSucceeded it also records the run as the
// key's last success and stores opts.Watermark, in the same script call, when the lock was
// ours to the end and no later fencing token was handed out. It returns the same errors as
// Finish, and ErrWatermarkTooLarge (recording nothing) for a watermark over
// MaxWatermarkBytes.
func (l *Lease) FinishWith(ctx context.Context, state string, opts FinishOptions) (FinishResult, error) {
	if state != StateSucceeded && state != StateFailed {
		return FinishResult{}, fmt.Errorf("lock: finish: state %q", state)
	}
	if len(opts.Watermark) > MaxWatermarkBytes {
		return FinishResult{}, fmt.Errorf("%w: %d bytes", ErrWatermarkTooLarge, len(opts.Watermark))
	}
	return l.finish(ctx, state, opts)
}

// Release deletes the lock if it is still ours (compare-and-delete) and forgets our
// running ledger entry, as if we had never run. ErrLost if the lock was not ours.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.finish(ctx, "", FinishOptions{})
	return err
}

func (l *Lease) finish(ctx context.Context, state string, opts FinishOptions) (FinishResult, error) {
	t, err := writer(ctx, l.c, l.req, state == StateSucceeded && l.req.MinReplicas > 0)
	if err != nil {
		return FinishResult{}, err
	}
	defer t.Close()
	monotonic := "0"
	if opts.Monotonic {
		monotonic = "1"
	}
	keys := []string{LockKey(l.req.Key), runKey(l.req), FenceKey(l.req.Key), LastKey(l.req.Key), FinishKey(l.req.Key, l.Token)}
	res, err := finishScript.Run(ctx, t, keys, l.value, l.Token, state,
		l.req.Retention.Milliseconds(), l.now().UnixMilli(), l.req.Holder, l.Fence,
		l.req.Occurrence.Unix(), opts.Watermark, monotonic, FinishKeyTTL(l.req.TTL).Milliseconds()).Slice()
	if err != nil {
		t.failed(ctx, err)
		return FinishResult{}, fmt.Errorf("lock: finish %q: %w", l.req.Key, err)
	}
	if len(res) != 5 {
		return FinishResult{}, fmt.Errorf("lock: finish %q: unexpected reply %v", l.req.Key, res)
	}
	fr := FinishResult{
		LastSuccess: LastSuccessOutcome(num(res, 2)),
		Watermark:   WatermarkOutcome(num(res, 3)),
		Stored:      str(res, 4),
	}
	var errs []error
	if num(res, 0) != 1 {
		errs = append(errs, ErrLost)
	}
	if num(res, 1) != 1 && state != "" { // a release leaves another run's entry alone, silently
		errs = append(errs, ErrNotRecorded)
	}
	if t.replicated() && num(res, 1) == 1 {
		if err := waitReplicas(ctx, t.conn, l.req); err != nil {
			errs = append(errs, err)
		}
	}
	switch len(errs) {
	case 0:
		return fr, nil
	case 1:
		return fr, errs[0]
	}
	return fr, errors.Join(errs...)
}

// Durability reads INFO from the Redis behind c (every master of a Cluster) in one round
// trip per server and returns the ways it could lose locks or ledger entries, as human
// readable warnings (empty when none): no AOF (a restart or crash loses everything since
// the last snapshot, if any) and any maxmemory-policy other than noeviction (the lock and
// ledger keys have TTLs, so even volatile-* policies may evict them). In a Cluster each
// warning names the node.
func Durability(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	cc, ok := asCluster(c)
	if !ok {
		info, err := c.Info(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("lock: durability: %w", err)
		}
		return durabilityWarnings("", infoField(info, "aof_enabled"), infoField(info, "maxmemory_policy"), ""), nil
	}
	var mu sync.Mutex
	var warnings []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		info, err := n.Info(ctx).Result()
		if err != nil {
			return fmt.Errorf("lock: durability of %s: %w", n.Options().Addr, err)
		}
		w := durabilityWarnings(n.Options().Addr, infoField(info, "aof_enabled"), infoField(info, "maxmemory_policy"), "")
		mu.Lock()
		warnings = append(warnings, w...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(warnings)
	return warnings, nil
}

// infoField returns the value of "name:value" in an INFO reply ("" if absent).
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// durabilityWarnings turns INFO facts into warnings. node, when set, names the server;
// problems is acquire.lua's list of what the script could not run ("info", "time").
func durabilityWarnings(node, aof, policy, problems string) []string {
	redisName := "Redis"
	if node != "" {
		redisName = "Redis " + node
	}
	var w []string
	for _, p := range strings.Split(problems, ",") {
		switch p {
		case "info":
			w = append(w, redisName+" refused INFO to this user: durability unknown (allow +info)")
		case "time":
			w = append(w, redisName+" refused TIME to this user: fencing tokens fall back to the counter and "+
				"go back if Redis loses data (allow +time)")
		}
	}
	if aof == "0" {
		w = append(w, redisName+" has appendonly no: a restart loses the lock and the ledger (set appendonly yes)")
	}
	if policy != "" && policy != "noeviction" {
		w = append(w, redisName+" maxmemory-policy "+policy+" can evict the lock or the ledger (set noeviction)")
	}
	return w
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
