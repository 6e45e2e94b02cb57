package wrapper

import (
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/defaults"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// TestRenewalsComeBeforeTheStopPoint: a renewal is sent early enough that its answer, after
// one retry, can come before the SIGTERM point of the renewal before it; at the ttl bound
// that point was the very instant it was sent (TestHealthyRunAtTheTTLBound). However little
// slack the ttl leaves, renewals come at most twice as often as --renew-interval says.
func TestRenewalsComeBeforeTheStopPoint(t *testing.T) {
	for _, tc := range []struct {
		ttl, renew, grace string
		want              time.Duration
	}{
		{"30s", "10s", "10s", 10 * time.Second},         // room to spare: the interval
		{"3s", "1s", "1900ms", 650 * time.Millisecond},  // the bound: 3s − 1.9s − 100ms − (250ms + 100ms)
		{"1s", "100ms", "800ms", 50 * time.Millisecond}, // the bound, the shortest interval: half of it
		{"24h", "12h", "1h", 12 * time.Hour},            // the longest
		{"1s", "500ms", "0s", 500 * time.Millisecond},   // no kill grace: 1s − 100ms − (125ms + 100ms) = 675ms ≥ 500ms
	} {
		cfg, _, err := config.Parse([]string{"--redis-url", "redis://unused", "--key", "k", "--ttl", tc.ttl,
			"--renew-interval", tc.renew, "--kill-grace", tc.grace, "--", "x"}, nil)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		got := renewEvery(cfg)
		if got != tc.want {
			t.Errorf("ttl %s, renew %s, kill grace %s: a renewal %v after the last, want %v", tc.ttl, tc.renew, tc.grace, got, tc.want)
		}
		margin := defaults.Margin(cfg.TTL)
		if got > cfg.RenewInterval/2 && got+renewRetry(cfg)+margin > cfg.TTL-cfg.KillGrace-margin {
			t.Errorf("ttl %s, renew %s, kill grace %s: a renewal %v after the last leaves less than a retry and a margin before the SIGTERM point",
				tc.ttl, tc.renew, tc.grace, got)
		}
	}
}
