package controller

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// Reasons of the LockBackendReady condition.
const (
	ReasonSecretNotFound   = "SecretNotFound"
	ReasonSecretInvalid    = "SecretInvalid"
	ReasonRedisUnreachable = "RedisUnreachable"
	ReasonRedisReachable   = "RedisReachable"
)

// backendError says why the lock backend is not usable, with the condition reason.
type backendError struct {
	reason string
	err    error
}

func (e *backendError) Error() string { return e.err.Error() }
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

	mu      sync.Mutex
	clients map[types.NamespacedName]cachedClient
}

type cachedClient struct {
	sum    [32]byte
	client redis.UniversalClient
}

func newBackends(reader client.Reader) *backends {
	return &backends{reader: reader, timeout: 2 * time.Second, clients: map[types.NamespacedName]cachedClient{}}
}

// client returns a Redis client for the Secret, or a backendError.
func (b *backends) client(ctx context.Context, namespace, secretName string) (redis.UniversalClient, *backendError) {
	var s corev1.Secret
	key := types.NamespacedName{Namespace: namespace, Name: secretName}
	if err := b.reader.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &backendError{ReasonSecretNotFound, fmt.Errorf("spec.lock.redis.secretRef: Secret %s not found; create it with key %q", key, runpod.SecretKeyURL)}
		}
		return nil, &backendError{ReasonSecretInvalid, fmt.Errorf("spec.lock.redis.secretRef: reading Secret %s: %w", key, err)}
	}
	if len(s.Data[runpod.SecretKeyURL]) == 0 {
		return nil, &backendError{ReasonSecretInvalid, fmt.Errorf("spec.lock.redis.secretRef: Secret %s has no key %q (the Redis URL)", key, runpod.SecretKeyURL)}
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
		if c.sum == sum {
			return c.client, nil
		}
		_ = c.client.Close()
		delete(b.clients, key)
	}
	c, err := lock.NewClient(cfg)
	if err != nil {
		// lock's errors redact the URL's password.
		return nil, &backendError{ReasonSecretInvalid, fmt.Errorf("spec.lock.redis.secretRef: Secret %s: %w", key, err)}
	}
	b.clients[key] = cachedClient{sum: sum, client: c}
	return c, nil
}

// check reads the Secret and pings Redis.
func (b *backends) check(ctx context.Context, namespace, secretName string) (redis.UniversalClient, *backendError) {
	c, berr := b.client(ctx, namespace, secretName)
	if berr != nil {
		return nil, berr
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return c, &backendError{ReasonRedisUnreachable, fmt.Errorf("redis from Secret %s/%s: %w", namespace, secretName, err)}
	}
	return c, nil
}

// succeeded asks the ledger whether the occurrence already succeeded (anywhere).
func (b *backends) succeeded(ctx context.Context, c redis.UniversalClient, key string, occurrence time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return lock.Succeeded(ctx, c, key, occurrence)
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
