package plugin

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// redisFor reads the job's Redis Secret with the user's rights and returns a client
// that answered PING (ExitSecret, ExitRedis otherwise). The caller closes it.
func (o *Options) redisFor(ctx context.Context, c client.Client, job *v1alpha1.LockedCronJob) (redis.UniversalClient, error) {
	name := job.Spec.Lock.Redis.SecretRef.Name
	ref := job.Namespace + "/" + name
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, &s); err != nil {
		switch {
		case apierrors.IsForbidden(err):
			return nil, exitf(ExitSecret, "cannot read Secret %s: forbidden; the live lock is read with your own rights: "+
				"you need get on secrets/%s in namespace %s (check: kubectl auth can-i get secret/%s -n %s)",
				ref, name, job.Namespace, name, job.Namespace)
		case apierrors.IsNotFound(err):
			return nil, exitf(ExitSecret, "cannot read Secret %s: not found (spec.lock.redis.secretRef of lockedcronjob %s/%s)",
				ref, job.Namespace, job.Name)
		}
		return nil, exitf(ExitSecret, "cannot read Secret %s: %w", ref, err)
	}
	if len(s.Data[runpod.SecretKeyURL]) == 0 {
		return nil, exitf(ExitSecret, "Secret %s has no key %q (the Redis URL)", ref, runpod.SecretKeyURL)
	}
	cfg := lock.ClientConfig{
		URL:      string(s.Data[runpod.SecretKeyURL]),
		Username: string(s.Data[runpod.SecretKeyUsername]),
		Password: string(s.Data[runpod.SecretKeyPassword]),
		CACert:   s.Data[runpod.SecretKeyCACert],
	}
	allowed, err := lock.ParseAllowedHosts(o.RedisAllowedHosts)
	if err != nil {
		return nil, exitf(ExitGeneric, "--redis-allowed-hosts (or LOCKEDCRON_REDIS_ALLOWED_HOSTS): %v", err)
	}
	opts, err := lock.ParseURL(cfg)
	if err != nil {
		return nil, exitf(ExitSecret, "Secret %s: %v", ref, err)
	}
	// The Secret is the job's owner's to write: the endpoint is checked before any dial.
	rc, err := lock.NewTenantClient(cfg, allowed)
	if err != nil {
		return nil, exitf(ExitSecret, "Secret %s: %v%s", ref, err, notAllowedHint(err))
	}
	pctx, cancel := context.WithTimeout(ctx, o.RedisTimeout)
	defer cancel()
	if err := rc.Ping(pctx).Err(); err != nil {
		_ = rc.Close()
		if errors.Is(err, lock.ErrNotAllowed) { // a name that resolved to a link-local address, a Sentinel's master
			return nil, exitf(ExitSecret, "Secret %s: %v%s", ref, err, notAllowedHint(err))
		}
		return nil, redisError(err, strings.Join(opts.Addrs, ","), ref)
	}
	return rc, nil
}

// redisError is ExitRedis for a Redis that failed, naming where it was and the Secret.
func redisError(err error, addrs, ref string) error {
	why := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		why = "timed out (--redis-timeout)"
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// A server reply (authentication, ACL): shown, the user may read the Secret anyway.
		why = "answered " + rerr.Error()
	}
	return exitf(ExitRedis, "cannot reach Redis at %s (Secret %s): %s; the plugin dials Redis from this machine, "+
		"so an address only reachable inside the cluster needs a port-forward", addrs, ref, why)
}

// notAllowedHint says, for an endpoint refused by the allowed hosts, where the list comes
// from.
func notAllowedHint(err error) string {
	if !errors.Is(err, lock.ErrNotAllowed) {
		return ""
	}
	return "; the plugin dials only the endpoints --redis-allowed-hosts (or LOCKEDCRON_REDIS_ALLOWED_HOSTS) allows, never a link-local one unless a CIDR there allows it"
}
