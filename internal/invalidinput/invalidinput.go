// Package invalidinput is the one table of inputs that neither admission nor lockwrap may
// accept. Each case says the same bad input twice: as a change to a LockedCronJob spec
// (the CRD must reject it at `kubectl apply`, with CRDMessage in the error) and as
// lockwrap flags on top of a valid command line (lockwrap's parser must reject them,
// naming the flag, with FlagMessage in the error). Two tests walk it: the envtest suite
// in internal/controller and the parser tests in internal/wrapper/config.
package invalidinput

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// Case is one invalid input.
type Case struct {
	Name string
	// Spec changes a valid spec into the invalid one.
	Spec func(*v1alpha1.LockedCronJobSpec)
	// CRDMessage is a substring of the API server's rejection.
	CRDMessage string
	// Flags are added to a valid lockwrap command line (before "--").
	Flags []string
	// Flag is the flag lockwrap's error must name; FlagMessage a substring of its message.
	Flag, FlagMessage string
}

func d(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }

const maxDuration = time.Duration(1<<63 - 1) // 2562047h47m16.854775807s

func retry(s *v1alpha1.LockedCronJobSpec) *v1alpha1.RetrySpec {
	s.Contention.Policy = v1alpha1.ContentionRetry
	if s.Contention.Retry == nil {
		s.Contention.Retry = &v1alpha1.RetrySpec{Attempts: 3}
	}
	return s.Contention.Retry
}

// Cases is the table.
var Cases = []Case{
	{
		Name:       "ttl 0",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Lock.TTL = d(0) },
		CRDMessage: "lock.ttl must be greater than 0",
		Flags:      []string{"--ttl", "0s"}, Flag: "--ttl", FlagMessage: "must be between 1s and 24h",
	},
	{
		Name:       "ttl 500µs",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Lock.TTL = d(500 * time.Microsecond) },
		CRDMessage: "lock.ttl must be between 1s and 24h",
		Flags:      []string{"--ttl", "500us"}, Flag: "--ttl", FlagMessage: "must be between 1s and 24h",
	},
	{
		// With two namespaces sharing a key, a 1ms lock let both acquire every occurrence.
		Name:       "ttl 1ms",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Lock.TTL = d(time.Millisecond) },
		CRDMessage: "lock.ttl must be between 1s and 24h",
		Flags:      []string{"--ttl", "1ms"}, Flag: "--ttl", FlagMessage: "must be between 1s and 24h",
	},
	{
		Name:       "ttl a year",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Lock.TTL = d(8760 * time.Hour) },
		CRDMessage: "lock.ttl must be between 1s and 24h",
		Flags:      []string{"--ttl", "8760h"}, Flag: "--ttl", FlagMessage: "must be between 1s and 24h",
	},
	{
		Name: "renewInterval over half the ttl",
		Spec: func(s *v1alpha1.LockedCronJobSpec) {
			s.Lock.TTL = d(30 * time.Second)
			s.Lock.RenewInterval = d(20 * time.Second)
		},
		CRDMessage: "at most half of lock.ttl",
		Flags:      []string{"--ttl", "30s", "--renew-interval", "20s"}, Flag: "--renew-interval", FlagMessage: "more than half the ttl",
	},
	{
		Name: "killGracePeriod does not fit in the ttl",
		Spec: func(s *v1alpha1.LockedCronJobSpec) {
			s.Lock.TTL = d(10 * time.Second)
			s.Lock.KillGracePeriod = d(10 * time.Second)
		},
		CRDMessage: "raise lock.ttl or lower lock.killGracePeriod",
		Flags:      []string{"--ttl", "10s", "--kill-grace", "10s"}, Flag: "--ttl", FlagMessage: "raise --ttl or lower --kill-grace",
	},
	{
		Name: "killGracePeriod over an hour",
		Spec: func(s *v1alpha1.LockedCronJobSpec) {
			s.Lock.TTL = d(3 * time.Hour)
			s.Lock.KillGracePeriod = d(2 * time.Hour)
		},
		CRDMessage: "lock.killGracePeriod must be between 0s and 1h",
		Flags:      []string{"--ttl", "3h", "--kill-grace", "2h"}, Flag: "--kill-grace", FlagMessage: "must be between 0s and 1h",
	},
	{
		Name:       "dedupe.retention 0",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Dedupe.Retention = d(0) },
		CRDMessage: "dedupe.retention must be between 1m and 8784h",
		Flags:      []string{"--dedupe-retention", "0s"}, Flag: "--dedupe-retention", FlagMessage: "must be between 1m0s and 8784h",
	},
	{
		Name:       "dedupe.retention 2s",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Dedupe.Retention = d(2 * time.Second) },
		CRDMessage: "dedupe.retention must be between 1m and 8784h",
		Flags:      []string{"--dedupe-retention", "2s"}, Flag: "--dedupe-retention", FlagMessage: "must be between 1m0s and 8784h",
	},
	{
		Name: "dedupe.retention under twice the ttl",
		Spec: func(s *v1alpha1.LockedCronJobSpec) {
			s.Lock.TTL = d(time.Hour)
			s.Dedupe.Retention = d(90 * time.Minute)
		},
		CRDMessage: "dedupe.retention must be at least twice lock.ttl",
		Flags:      []string{"--ttl", "1h", "--dedupe-retention", "90m"}, Flag: "--dedupe-retention", FlagMessage: "at least twice the ttl",
	},
	{
		Name:       "retry.backoff 0",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { retry(s).Backoff = d(0) },
		CRDMessage: "contention.retry.backoff must be between 10ms and 24h",
		Flags:      []string{"--contention", "retry", "--retry-attempts", "3", "--retry-backoff", "0s"}, Flag: "--retry-backoff", FlagMessage: "must be between 10ms and 24h",
	},
	{
		// backoff = maxBackoff = the largest Duration overflowed the backoff arithmetic.
		Name: "retry backoff at the largest duration",
		Spec: func(s *v1alpha1.LockedCronJobSpec) {
			r := retry(s)
			r.Backoff, r.MaxBackoff = d(maxDuration), d(maxDuration)
		},
		CRDMessage: "contention.retry.backoff must be between 10ms and 24h",
		Flags: []string{"--contention", "retry", "--retry-attempts", "3",
			"--retry-backoff", maxDuration.String(), "--retry-max-backoff", maxDuration.String()},
		Flag: "--retry-backoff", FlagMessage: "must be between 10ms and 24h",
	},
	{
		Name:       "retry attempts 0",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { retry(s).Attempts = 0 },
		CRDMessage: "spec.contention.retry.attempts",
		Flags:      []string{"--contention", "retry", "--retry-attempts", "0"}, Flag: "--retry-attempts", FlagMessage: "contention retry needs",
	},
	{
		// Retries asked for under the default policy were silently not made.
		Name: "retry under policy Skip",
		Spec: func(s *v1alpha1.LockedCronJobSpec) {
			s.Contention.Policy = v1alpha1.ContentionSkip
			s.Contention.Retry = &v1alpha1.RetrySpec{Attempts: 3}
		},
		CRDMessage: "contention.retry applies only to contention.policy Retry",
		Flags:      []string{"--contention", "skip", "--retry-attempts", "3"}, Flag: "--retry-attempts", FlagMessage: "only with --contention retry",
	},
	{
		Name:       "blank key",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Lock.Key = "   " },
		CRDMessage: "spec.lock.key",
		Flags:      []string{"--key", "   "}, Flag: "--key", FlagMessage: "blank",
	},
	{
		Name:       "key with surrounding spaces",
		Spec:       func(s *v1alpha1.LockedCronJobSpec) { s.Lock.Key = " nightly " },
		CRDMessage: "spec.lock.key",
		Flags:      []string{"--key", " nightly "}, Flag: "--key", FlagMessage: "leading or trailing",
	},
}
