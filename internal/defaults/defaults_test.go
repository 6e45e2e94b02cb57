package defaults

import (
	"testing"
	"time"
)

func TestTTLFits(t *testing.T) {
	for _, c := range []struct {
		ttl, renew, kill time.Duration
		fits             bool
	}{
		{TTL, 0, KillGracePeriod, true},               // defaults: 30s ≥ 10s + 10s + 300ms
		{10 * time.Second, 0, KillGracePeriod, false}, // 10s < 3.33s + 10s + 100ms
		{4 * time.Second, time.Second, 2 * time.Second, true},
		{3 * time.Second, time.Second, 1900 * time.Millisecond, true}, // exactly: 1s + 1.9s + 100ms
		{3 * time.Second, time.Second, 1901 * time.Millisecond, false},
		{MinTTL, 200 * time.Millisecond, 700 * time.Millisecond, true},
		{MaxTTL, 0, MaxKillGracePeriod, true},
	} {
		if got := TTLFits(c.ttl, c.renew, c.kill); got != c.fits {
			t.Errorf("TTLFits(%v, %v, %v) = %v, want %v", c.ttl, c.renew, c.kill, got, c.fits)
		}
	}
}

func TestMargin(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		time.Second: 100 * time.Millisecond, 10 * time.Second: 100 * time.Millisecond,
		30 * time.Second: 300 * time.Millisecond, time.Hour: 36 * time.Second,
	} {
		if got := Margin(ttl); got != want {
			t.Errorf("Margin(%v) = %v, want %v", ttl, got, want)
		}
	}
}
