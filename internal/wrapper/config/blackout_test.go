package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBlackoutGuard: --blackout-id and --made-at (or their variables) come together and
// reach the config; one without the other, a made-at that is no time, or an id that could
// not be part of a key's name is refused naming the flag at fault (and its variable).
func TestBlackoutGuard(t *testing.T) {
	base := []string{"--redis-url", "redis://r:6379", "--key", "k"}
	parse := func(extra []string, e map[string]string) (Config, error) {
		cfg, _, err := parseAt(append(append(append([]string{}, base...), extra...), "--", "true"), env(e), now)
		return cfg, err
	}
	cfg, err := parse(nil, nil)
	if err != nil || cfg.BlackoutID != "" || !cfg.MadeAt.IsZero() {
		t.Fatalf("unset: %q %v, err %v", cfg.BlackoutID, cfg.MadeAt, err)
	}
	made := time.Date(2026, 12, 6, 17, 0, 0, 123_000_000, time.UTC)
	cfg, err = parse(nil, map[string]string{EnvBlackoutID: "3f1c2d4e-0000-4000-8000-000000000001", EnvMadeAt: "2026-12-06T17:00:00.123Z"})
	if err != nil || cfg.BlackoutID != "3f1c2d4e-0000-4000-8000-000000000001" || !cfg.MadeAt.Equal(made) {
		t.Fatalf("env: %q %v, err %v", cfg.BlackoutID, cfg.MadeAt, err)
	}
	for _, c := range []struct {
		args []string
		flag string
		msg  string
	}{
		{[]string{"--blackout-id", "uid"}, "--made-at", "$" + EnvMadeAt},
		{[]string{"--made-at", "2026-12-06T17:00:00Z"}, "--blackout-id", "$" + EnvBlackoutID},
		{[]string{"--blackout-id", "uid", "--made-at", "yesterday"}, "--made-at", "not an RFC 3339 time"},
		{[]string{"--blackout-id", "has space", "--made-at", "2026-12-06T17:00:00Z"}, "--blackout-id", "$" + EnvBlackoutID},
		{[]string{"--blackout-id", strings.Repeat("a", 129), "--made-at", "2026-12-06T17:00:00Z"}, "--blackout-id", "$" + EnvBlackoutID},
	} {
		_, err := parse(c.args, nil)
		var ce *Error
		if !errors.As(err, &ce) || ce.Flag != c.flag || !strings.Contains(ce.Msg, c.msg) {
			t.Errorf("%.60q: %v, want an error naming %s and %q", c.args, err, c.flag, c.msg)
		}
	}
}
