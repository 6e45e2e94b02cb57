// Package defaults is the one source of lockedcron's defaults and limits. The API types
// (whose CRD markers must spell the same values: TestCRDMarkersMatch pins them), lockwrap's
// flag parser and the lock engine all read them from here. It imports only the standard
// library, so lockwrap stays small and quick to start.
package defaults

import "time"

// Defaults.
const (
	TTL             = 30 * time.Second // lock.ttl
	KillGracePeriod = 10 * time.Second // lock.killGracePeriod
	RetryBackoff    = time.Second      // contention.retry.backoff
	RetryMaxBackoff = 30 * time.Second // contention.retry.maxBackoff
	DedupeRetention = 168 * time.Hour  // dedupe.retention
	RenewDivisor    = 3                // lock.renewInterval defaults to ttl/RenewDivisor
	PendingTimeout  = time.Hour        // a pod not started by then is missed, without startingDeadlineSeconds
	TerminationLog  = "/dev/termination-log"
)

// Limits: every duration has a floor and a ceiling, so that nothing a user writes
// overflows (time.Duration is ±292 years) or makes the lock meaningless.
const (
	MinTTL             = time.Second
	MaxTTL             = 24 * time.Hour
	MinRenewInterval   = 100 * time.Millisecond
	MaxKillGracePeriod = time.Hour
	MinRetention       = time.Minute
	MaxRetention       = 8784 * time.Hour // 366 days
	MinRetryBackoff    = 10 * time.Millisecond
	MaxRetryBackoff    = 24 * time.Hour
	// MaxStartingDeadlineSeconds is one year: an occurrence later than that is no longer
	// the same occurrence, and occurrence + deadline stays far from overflow.
	MaxStartingDeadlineSeconds = 366 * 24 * 3600
	MaxRetryAttempts           = 1000
	MaxKeyLength               = 512
)

// Margin is the safety margin of the kill-before-expiry rule for a ttl: it covers the
// rate drift between lockwrap's clock and Redis's, max(100ms, 1% of the ttl).
func Margin(ttl time.Duration) time.Duration {
	return max(100*time.Millisecond, ttl/100)
}

// RenewInterval is the renewal interval in effect: renew, or ttl/RenewDivisor when zero.
func RenewInterval(ttl, renew time.Duration) time.Duration {
	if renew == 0 {
		return ttl / RenewDivisor
	}
	return renew
}

// TTLFits reports whether the ttl lets a holder that stops hearing from Redis right
// after a renewal still stop its job before the lock expires: one renewal interval (the
// renewal that did not happen), the kill grace, and the margin.
// ttl ≥ renewInterval + killGracePeriod + Margin(ttl).
func TTLFits(ttl, renew, killGrace time.Duration) bool {
	return ttl >= RenewInterval(ttl, renew)+killGrace+Margin(ttl)
}
