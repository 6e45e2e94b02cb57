package lock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// callsSince resets the server's command statistics on admin's (already open) connection
// and returns a function that reads them: calls per command, counted by the server. Redis
// counts the commands scripts run too (get, set, …); connection-level ones are what this
// test is about.
func callsSince(t *testing.T, admin *redis.Client) func() map[string]string {
	t.Helper()
	ctx := context.Background()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	return func() map[string]string {
		info := admin.Info(ctx, "commandstats").Val()
		out := map[string]string{}
		for _, line := range strings.Split(info, "\r\n") {
			if name, rest, ok := strings.Cut(line, ":calls="); ok {
				calls, _, _ := strings.Cut(rest, ",")
				out[strings.TrimPrefix(name, "cmdstat_")] = calls
			}
		}
		return out
	}
}

// TestNoHandshakeRoundTrip: a lock taken and released through NewClient costs its two
// scripts and nothing else on the wire — no HELLO, no PING — and AUTH only with a password.
func TestNoHandshakeRoundTrip(t *testing.T) {
	ctx := context.Background()
	take := func(t *testing.T, cfg lock.ClientConfig, key string) error {
		c, err := lock.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := lock.New(c).Acquire(ctx, lock.Request{Key: key, Holder: "a", TTL: 5 * time.Second,
			Occurrence: time.Unix(1796000000, 0)})
		if err != nil {
			return err
		}
		return l.Finish(ctx, lock.StateFailed)
	}
	for _, pw := range []string{"", "pw"} {
		t.Run("password="+pw, func(t *testing.T) {
			s := redistest.Start(t)
			admin := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true})
			defer admin.Close()
			if pw != "" {
				if err := admin.ConfigSet(ctx, "requirepass", pw).Err(); err != nil {
					t.Fatal(err)
				}
				if err := admin.Do(ctx, "AUTH", pw).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// Warm the script cache (a fresh server answers the first EVALSHA with NOSCRIPT).
			if err := take(t, lock.ClientConfig{URL: s.URL(), Password: pw}, "warm"); err != nil {
				t.Fatal(err)
			}
			calls := callsSince(t, admin)
			if err := take(t, lock.ClientConfig{URL: s.URL(), Password: pw}, "hs"); err != nil {
				t.Fatal(err)
			}
			got := calls()
			for _, cmd := range []string{"hello", "ping", "eval", "client|setinfo", "select"} {
				if got[cmd] != "" {
					t.Errorf("%s sent: %v", cmd, got)
				}
			}
			if got["evalsha"] != "2" {
				t.Errorf("evalsha %q, want 2: %v", got["evalsha"], got)
			}
			wantAuth := map[bool]string{true: "1", false: ""}[pw != ""]
			if got["auth"] != wantAuth {
				t.Errorf("auth %q, want %q: %v", got["auth"], wantAuth, got)
			}
			if pw != "" {
				err := take(t, lock.ClientConfig{URL: s.URL(), Password: "wrong"}, "hs2")
				if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
					t.Fatalf("wrong password: %v", err)
				}
			}
		})
	}
}
