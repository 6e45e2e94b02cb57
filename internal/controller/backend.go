package controller

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// Reasons of the LockBackendReady condition.
const (
	ReasonSecretNotFound   = "SecretNotFound"
	ReasonSecretInvalid    = "SecretInvalid"
	ReasonRedisUnreachable = "RedisUnreachable"
	// ReasonRedisNotAllowed: the Secret names an endpoint the operator may not dial
	// (--redis-allowed-hosts, or a link-local address); nothing was dialled.
	ReasonRedisNotAllowed = "RedisNotAllowed"
	ReasonRedisReachable  = "RedisReachable"
	// ReasonNotDurable: Redis answers, but can lose the lock or the ledger (no AOF, an
	// evicting maxmemory-policy). The condition stays True: pods are still created.
	ReasonNotDurable = "NotDurable"
)

// durabilityTTL is how long a durability answer is reused for a client: INFO costs a
// round trip, and a Redis's configuration rarely changes.
const durabilityTTL = 3 * time.Minute

// maxWarningLen bounds each durability warning in a condition message or Event (a
// warning may quote a setting read from the server).
const maxWarningLen = 256

// backendError says why the lock backend is not usable, with the condition reason.
// msg is what users see (condition message, Events): a fixed sentence naming the
// Secret and at most the Redis host:port, never a Secret value or bytes read from the
// network — a LockedCronJob's author need not be able to read the Secret, and must not
// read what a server in the operator's network sends. Which kind of failure it was
// (refused, timed out, not Redis) is said: --redis-allowed-hosts keeps tenants from
// probing that network at all (README, Security). err keeps the cause for the
// operator's own logs.
type backendError struct {
	reason string
	msg    string
	err    error
}

func (e *backendError) Error() string { return e.msg }
func (e *backendError) Unwrap() error { return e.err }

// blocking reports whether the problem stops pod creation: a pod without a usable Secret
// cannot even start, whereas Redis unreachable from the controller may still be
// reachable from pods, and lockwrap is the authority.
func (e *backendError) blocking() bool { return e.reason != ReasonRedisUnreachable }

// backends reads a job's Redis Secret (uncached: the manager never lists or caches
// Secrets) and keeps one Redis client per Secret content.
type backends struct {
	reader  client.Reader
	timeout time.Duration
	now     func() time.Time
	// allowed: the endpoints that may be dialled (nil: all but link-local ones).
	allowed *lock.AllowedHosts

	mu      sync.Mutex
	clients map[types.NamespacedName]cachedClient
}

type cachedClient struct {
	sum    [32]byte
	client redis.UniversalClient
	addrs  string // the URL's host:port list, for messages
	// made: when; a Cluster client is made again after clusterClientMaxAge (go-redis
	// keeps every node address it was ever named, the budget's window aside).
	made    time.Time
	cluster bool
	// durability: the warnings of the last check, and when it ran (zero: never).
	durableAt time.Time
	warnings  []string
}

func newBackends(reader client.Reader) *backends {
	return &backends{reader: reader, timeout: 2 * time.Second, now: time.Now, clients: map[types.NamespacedName]cachedClient{}}
}

// client returns a Redis client for the Secret and the URL's host:port list, or a
// backendError.
func (b *backends) client(ctx context.Context, namespace, secretName string) (redis.UniversalClient, string, *backendError) {
	var s corev1.Secret
	key := types.NamespacedName{Namespace: namespace, Name: secretName}
	if err := b.reader.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			b.forget(key) // a deleted Secret's client, its connections and, for Sentinel, its goroutines
			return nil, "", &backendError{ReasonSecretNotFound, fmt.Sprintf("spec.lock.redis.secretRef: Secret %s not found; create it with key %q", key, runpod.SecretKeyURL), err}
		}
		// An API error (forbidden, timeout): it carries no Secret data.
		why := string(apierrors.ReasonForError(err))
		if why == "" {
			why = "no answer from the API server"
		}
		return nil, "", &backendError{ReasonSecretInvalid, fmt.Sprintf("spec.lock.redis.secretRef: reading Secret %s: %s", key, why), err}
	}
	if len(s.Data[runpod.SecretKeyURL]) == 0 {
		b.forget(key)
		return nil, "", &backendError{ReasonSecretInvalid, fmt.Sprintf("spec.lock.redis.secretRef: Secret %s has no key %q (the Redis URL)", key, runpod.SecretKeyURL), nil}
	}
	cfg := lock.ClientConfig{
		URL:      string(s.Data[runpod.SecretKeyURL]),
		Username: string(s.Data[runpod.SecretKeyUsername]),
		Password: string(s.Data[runpod.SecretKeyPassword]),
		CACert:   s.Data[runpod.SecretKeyCACert],
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(cfg.URL), []byte(cfg.Username), []byte(cfg.Password), cfg.CACert} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))

	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.clients[key]; ok {
		switch {
		case c.sum != sum:
			closeAside(c.client) // not under b.mu, which every Secret's read takes
		case c.cluster && b.now().Sub(c.made) >= clusterClientMaxAge:
			// Those that hold it (the health view until its next read of the Secret, a
			// marker's write) go on with it a little.
			old := c.client
			time.AfterFunc(oldClientGrace, func() { _ = old.Close() })
		default:
			return c.client, c.addrs, nil
		}
		delete(b.clients, key)
	}
	o, err := lock.ParseURL(cfg)
	if err != nil {
		return nil, "", secretProblem(key, cfg, err)
	}
	addrs := strings.Join(o.Addrs, ",")
	c, err := lock.NewTenantClient(cfg, b.allowed)
	if err != nil {
		if errors.Is(err, lock.ErrNotAllowed) {
			return nil, "", &backendError{ReasonRedisNotAllowed, notAllowedMessage(key, addrs), err}
		}
		if errors.Is(err, lock.ErrTopology) { // a Cluster url's seeds past the process's node budget
			return nil, "", &backendError{ReasonRedisUnreachable, fmt.Sprintf("Redis at %s (Secret %s): %s", addrs, key, pingProblem(err)), err}
		}
		return nil, "", secretProblem(key, cfg, err)
	}
	b.clients[key] = cachedClient{sum: sum, client: c, addrs: addrs, made: b.now(), cluster: o.IsClusterMode}
	return c, addrs, nil
}

// clusterClientMaxAge: a Cluster client is made again this often. go-redis remembers every
// address a slot map or redirect ever named, and walks them all when no node answers: a
// seed naming 1,000 new ones each 15 minutes (the node budget's window) would add up over
// days.
const clusterClientMaxAge = time.Hour

// oldClientGrace: a Cluster client made again is closed this long after, past the health
// view's next read of the Secret (SecretTTL, a minute).
const oldClientGrace = 3 * time.Minute

// secretProblem is the fixed message for Secret contents lock cannot use. lock's own
// errors quote the URL (password redacted), but the rest of a URL can be a secret too: the
// message says a lock.URLError's Reason, lock's own words without any of it.
func secretProblem(key types.NamespacedName, cfg lock.ClientConfig, err error) *backendError {
	msg := fmt.Sprintf("spec.lock.redis.secretRef: Secret %s: %s is not a valid Redis URL (redis://, rediss://, redis+sentinel://, redis+cluster://)", key, runpod.SecretKeyURL)
	var uerr *lock.URLError
	if errors.As(err, &uerr) {
		msg = fmt.Sprintf("spec.lock.redis.secretRef: Secret %s: %s is refused: %s", key, runpod.SecretKeyURL, uerr.Reason)
	}
	if len(cfg.CACert) > 0 && !x509.NewCertPool().AppendCertsFromPEM(cfg.CACert) {
		msg = fmt.Sprintf("spec.lock.redis.secretRef: Secret %s: %s holds no PEM certificate", key, runpod.SecretKeyCACert)
	}
	for _, k := range []struct{ name, v string }{{runpod.SecretKeyPassword, cfg.Password}, {runpod.SecretKeyUsername, cfg.Username}} {
		if strings.IndexFunc(k.v, unicode.IsControl) >= 0 {
			// Most often the newline a file or echo leaves at the end.
			msg = fmt.Sprintf("spec.lock.redis.secretRef: Secret %s: key %q holds a control character (a newline at its end, as a file or echo leaves?), which no Redis credential has: write it without (kubectl create secret generic --from-literal, or echo -n)", key, k.name)
		}
	}
	return &backendError{ReasonSecretInvalid, msg, err}
}

func notAllowedMessage(key types.NamespacedName, addrs string) string {
	return fmt.Sprintf("spec.lock.redis.secretRef: Secret %s: Redis at %s is not allowed by the operator (--redis-allowed-hosts; link-local addresses only when a CIDR allows them); nothing was dialled", key, addrs)
}

// pingProblem says, in a fixed sentence, why a Redis did not answer PING. The error
// itself is never shown: it can quote what the server sent.
func pingProblem(err error) string {
	var (
		dnsErr    *net.DNSError
		netErr    net.Error
		recHdr    tls.RecordHeaderError
		alert     tls.AlertError
		verifyErr *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		redisErr  redis.Error
	)
	switch {
	case errors.Is(err, lock.ErrDenied):
		return lock.ErrDenied.Error()
	case errors.Is(err, lock.ErrNotRedis):
		return "did not answer PING as Redis does (not a Redis server?); nothing the Secret holds was sent to it"
	case errors.Is(err, lock.ErrReplyTooLarge):
		return "answered with a reply over lockedcron's bounds (not a Redis server, or a hostile one)"
	case errors.Is(err, lock.ErrNotAllowed):
		return "not allowed by the operator (--redis-allowed-hosts; link-local addresses only when a CIDR allows them); nothing was dialled"
	case errors.Is(err, lock.ErrProcessBudget):
		return fmt.Sprintf("refused: this manager's Redis Clusters together were named over %d nodes in %d minutes (another Secret's Cluster may have used them up; see the manager's memory)",
			lock.MaxProcessClusterNodes, int(lock.ClusterWindow.Minutes()))
	case errors.Is(err, lock.ErrTopology):
		return fmt.Sprintf("answered with a topology over lockedcron's bounds (a Sentinel's master that is no address, a Cluster of over %d nodes: not a Redis server, or a hostile one)", lock.MaxClusterNodes)
	case errors.Is(err, lock.ErrNoMaster):
		var nm *lock.NoMasterError
		if errors.As(err, &nm) && len(nm.Errs) > 0 {
			// The first sentinel asked is the one that answered last (or the url's first).
			first := nm.Errs[0]
			if inner := errors.Unwrap(first); inner != nil {
				first = inner // not the sentinel's address: it is the url's
			}
			return "no Sentinel answered with the master (" + pingProblem(first) + ")"
		}
		return "no Sentinel answered with the master"
	case errors.As(err, &dnsErr):
		return "host name not found"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.As(err, &recHdr), errors.As(err, &alert), errors.As(err, &verifyErr),
		errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid):
		return "TLS handshake failed"
	case errors.As(err, &redisErr):
		code, _, _ := strings.Cut(redisErr.Error(), " ")
		switch code {
		case "WRONGPASS", "NOAUTH":
			return "authentication failed"
		case "NOPERM":
			return "the Secret's user lacks a permission (NOPERM)"
		case "LOADING":
			return "still loading its data"
		case "ERR":
			if strings.Contains(strings.ToLower(redisErr.Error()), "auth") || strings.Contains(strings.ToLower(redisErr.Error()), "password") {
				return "authentication failed"
			}
		}
		return "answered with an error (not shown: it may quote the server)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return "connection closed by the server (not a Redis server, or one that expects TLS?)"
	case strings.Contains(err.Error(), "sentinels"):
		return "no Sentinel answered with the master"
	}
	return "not a Redis server, or it failed (the error is not shown: it may quote the server)"
}

// check reads the Secret, pings Redis and, once Redis answered, asks how durable it is:
// the warnings (empty when none) say how it could lose the lock or the ledger. It waits
// for Redis: passes use health.state instead, which never does.
func (b *backends) check(ctx context.Context, namespace, secretName string) (redis.UniversalClient, []string, *backendError) {
	c, addrs, berr := b.client(ctx, namespace, secretName)
	if berr != nil {
		return nil, nil, berr
	}
	warnings, berr := b.probe(ctx, types.NamespacedName{Namespace: namespace, Name: secretName}, c, addrs)
	return c, warnings, berr
}

// probe pings the Secret's Redis (c, at addrs) and, if it answered, reads its durability.
func (b *backends) probe(ctx context.Context, key types.NamespacedName, c redis.UniversalClient, addrs string) ([]string, *backendError) {
	pctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		reason := ReasonRedisUnreachable
		if errors.Is(err, lock.ErrNotAllowed) { // a Sentinel's master, a Cluster node
			reason = ReasonRedisNotAllowed
		}
		return nil, &backendError{reason, fmt.Sprintf("Redis at %s (Secret %s): %s", addrs, key, pingProblem(err)), err}
	}
	return b.durability(ctx, key, c), nil
}

// durability returns lock.Durability's warnings for the client of the Secret key, from
// a cache of durabilityTTL per client (a changed Secret is a new client, checked anew).
// It never fails: a Redis that does not answer INFO yields a fixed warning. Warnings
// carry no Secret contents and no server text beyond lock.Durability's fixed sentences.
func (b *backends) durability(ctx context.Context, key types.NamespacedName, c redis.UniversalClient) []string {
	now := b.now()
	b.mu.Lock()
	if e, ok := b.clients[key]; ok && e.client == c && !e.durableAt.IsZero() && now.Sub(e.durableAt) < durabilityTTL && now.Sub(e.durableAt) >= 0 {
		w := e.warnings
		b.mu.Unlock()
		return w
	}
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	raw, err := lock.Durability(ctx, c)
	var warnings []string
	if err != nil {
		// Not the error itself: it may quote the server (or, for a Cluster, addresses).
		warnings = []string{"Redis did not answer INFO, so whether it can lose the lock is unknown (the Secret's user needs +info)"}
	} else {
		for _, w := range raw {
			if w = cleanWarning(fixedWarning(w)); w != "" {
				warnings = append(warnings, w)
			}
		}
	}

	b.mu.Lock()
	if e, ok := b.clients[key]; ok && e.client == c {
		e.durableAt, e.warnings = now, warnings
		b.clients[key] = e
	}
	b.mu.Unlock()
	return warnings
}

// evictionPolicies are the maxmemory-policy values other than noeviction.
var evictionPolicies = map[string]bool{
	"allkeys-lru": true, "allkeys-lfu": true, "allkeys-random": true,
	"volatile-lru": true, "volatile-lfu": true, "volatile-random": true, "volatile-ttl": true,
}

// fixedWarning rewrites one of lock.Durability's warnings into the fixed vocabulary:
// they quote what the server said (its maxmemory-policy, a Cluster node's announced
// address), and a LockedCronJob's author must not read arbitrary server bytes through
// the operator. Kept: an IP:port node, a known policy name; anything else is replaced.
func fixedWarning(w string) string {
	f := strings.Fields(w)
	if len(f) < 2 || f[0] != "Redis" {
		return "Redis reported a durability problem (not shown: it may quote the server)"
	}
	name, i := "Redis", 1
	if host, _, err := net.SplitHostPort(f[1]); err == nil {
		if net.ParseIP(host) != nil {
			name = "Redis " + f[1]
		} else {
			name = "A Redis Cluster node"
		}
		i = 2
	}
	rest := strings.Join(f[i:], " ")
	switch {
	case strings.HasPrefix(rest, "has appendonly no"):
		return name + " has appendonly no: a restart loses the lock and the ledger (set appendonly yes)"
	case strings.HasPrefix(rest, "refused INFO"):
		return name + " refused INFO to this user: durability unknown (allow +info)"
	case strings.HasPrefix(rest, "refused TIME"):
		return name + " refused TIME to this user: fencing tokens fall back to the counter and go back if Redis loses data (allow +time)"
	case strings.HasPrefix(rest, "maxmemory-policy ") && len(f) > i+1:
		policy := f[i+1]
		if !evictionPolicies[policy] {
			policy = "(not noeviction)"
		}
		return name + " maxmemory-policy " + policy + " can evict the lock or the ledger (set noeviction)"
	}
	return name + " reported a durability problem (not shown: it may quote the server)"
}

// cleanWarning keeps a warning printable, on one line and short.
func cleanWarning(w string) string {
	w = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, w)
	return report.Shorten(strings.TrimSpace(w), maxWarningLen)
}

// durabilityMessage is the LockBackendReady message (and the Event's) for a Redis that
// can lose locks: its warnings, each a sentence that says what to set.
func durabilityMessage(warnings []string) string {
	// Each Cluster node may have its own: past a few, the rest are counted (a condition's
	// message is at most 32 KiB, and status with one over it is refused).
	if len(warnings) > maxWarningsShown {
		return fmt.Sprintf("%s; and %d more like these", strings.Join(warnings[:maxWarningsShown], "; "), len(warnings)-maxWarningsShown)
	}
	return strings.Join(warnings, "; ")
}

// maxWarningsShown bounds the warnings a message lists.
const maxWarningsShown = 8

// notDurableEvent reports whether a pass that finds these warnings emits a NotDurable
// Event: when the condition enters NotDurable, or its warnings change. prev is the
// LockBackendReady condition before the pass (nil when none).
func notDurableEvent(prev *metav1.Condition, warnings []string) bool {
	if len(warnings) == 0 {
		return false
	}
	return prev == nil || prev.Reason != ReasonNotDurable || prev.Message != durabilityMessage(warnings)
}

// succeeded asks the ledger whether the occurrence already succeeded (anywhere).
func (b *backends) succeeded(ctx context.Context, c redis.UniversalClient, key string, occurrence time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return lock.Succeeded(ctx, c, key, occurrence)
}

// forget closes and drops the Secret's client, if there is one.
func (b *backends) forget(key types.NamespacedName) {
	if c := b.take(key); c != nil {
		closeAside(c)
	}
}

// closeAside closes a tenant's client on a goroutine of its own: closing a TLS connection
// whose peer does not read waits up to 5 s, which no lock, reconcile worker or other
// tenant's probe may wait for (a tenant's server that stops reading would hold them all).
func closeAside(c redis.UniversalClient) { go func() { _ = c.Close() }() }

// take drops the Secret's client and returns it (nil if none), for the caller to close
// outside the locks (closeAside).
func (b *backends) take(key types.NamespacedName) redis.UniversalClient {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.clients[key]
	if !ok {
		return nil
	}
	delete(b.clients, key)
	return c.client
}

// close drops every client.
func (b *backends) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, c := range b.clients {
		_ = c.client.Close()
		delete(b.clients, k)
	}
}
