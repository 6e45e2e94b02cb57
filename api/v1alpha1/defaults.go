package v1alpha1

import (
	"time"

	"github.com/lockedcron/lockedcron/internal/defaults"
)

// Defaults, the same as the CRD's default markers (TestCRDMarkersMatch pins them to
// internal/defaults, their one source). The API server fills them in at admission; these
// accessors give the same answer for an object built in Go.
const (
	DefaultTTL             = defaults.TTL
	DefaultKillGracePeriod = defaults.KillGracePeriod
	DefaultRetryBackoff    = defaults.RetryBackoff
	DefaultRetryMaxBackoff = defaults.RetryMaxBackoff
	DefaultDedupeRetention = defaults.DedupeRetention
)

// TTLDuration is spec.lock.ttl, or its default.
func (l *LockSpec) TTLDuration() time.Duration {
	if l.TTL == nil {
		return DefaultTTL
	}
	return l.TTL.Duration
}

// RenewIntervalDuration is spec.lock.renewInterval, or ttl/3.
func (l *LockSpec) RenewIntervalDuration() time.Duration {
	if l.RenewInterval == nil {
		return defaults.RenewInterval(l.TTLDuration(), 0)
	}
	return l.RenewInterval.Duration
}

// KillGracePeriodDuration is spec.lock.killGracePeriod, or its default.
func (l *LockSpec) KillGracePeriodDuration() time.Duration {
	if l.KillGracePeriod == nil {
		return DefaultKillGracePeriod
	}
	return l.KillGracePeriod.Duration
}

// BackoffDuration is spec.contention.retry.backoff, or its default.
func (r *RetrySpec) BackoffDuration() time.Duration {
	if r.Backoff == nil {
		return DefaultRetryBackoff
	}
	return r.Backoff.Duration
}

// MaxBackoffDuration is spec.contention.retry.maxBackoff, or its default.
func (r *RetrySpec) MaxBackoffDuration() time.Duration {
	if r.MaxBackoff == nil {
		return DefaultRetryMaxBackoff
	}
	return r.MaxBackoff.Duration
}

// RetentionDuration is spec.dedupe.retention, or its default.
func (d *DedupeSpec) RetentionDuration() time.Duration {
	if d.Retention == nil {
		return DefaultDedupeRetention
	}
	return d.Retention.Duration
}

// Suspended is spec.suspend, false when unset.
func (s *LockedCronJobSpec) Suspended() bool { return s.Suspend != nil && *s.Suspend }

// DefaultBackoffLimit is spec.backoffLimit when unset (the CRD defaults it to this; an
// object built without the API server may lack it), as a Job's.
const DefaultBackoffLimit int32 = 6

// BackoffLimitOrDefault is spec.backoffLimit, or DefaultBackoffLimit when unset.
func (s *LockedCronJobSpec) BackoffLimitOrDefault() int32 {
	if s.BackoffLimit == nil {
		return DefaultBackoffLimit
	}
	return *s.BackoffLimit
}
