package config

import (
	"errors"
	"strings"
	"testing"
)

// TestRunID: --run-id (or $LOCKEDCRON_RUN_ID) gives the run its own ledger entry; unset
// keeps the occurrence's (the behaviour before the flag); a bad one is refused naming the
// flag and the characters allowed.
func TestRunID(t *testing.T) {
	base := []string{"--redis-url", "redis://r:6379", "--key", "k"}
	parse := func(extra []string, e map[string]string) (Config, error) {
		cfg, _, err := parseAt(append(append(append([]string{}, base...), extra...), "--", "true"), env(e), now)
		return cfg, err
	}
	cfg, err := parse(nil, nil)
	if err != nil || cfg.RunID != "" {
		t.Fatalf("unset: run id %q, err %v", cfg.RunID, err)
	}
	cfg, err = parse([]string{"--run-id", "manual:0f3c/fix-1"}, nil)
	if err != nil || cfg.RunID != "manual:0f3c/fix-1" {
		t.Fatalf("flag: run id %q, err %v", cfg.RunID, err)
	}
	cfg, err = parse(nil, map[string]string{EnvRunID: "manual:from-env"})
	if err != nil || cfg.RunID != "manual:from-env" {
		t.Fatalf("env: run id %q, err %v", cfg.RunID, err)
	}
	for _, bad := range []string{"has space", "brace{", strings.Repeat("a", MaxRunIDLength+1)} {
		_, err := parse([]string{"--run-id", bad}, nil)
		var ce *Error
		if !errors.As(err, &ce) || ce.Flag != "--run-id" || !strings.Contains(ce.Msg, "$"+EnvRunID) {
			t.Errorf("--run-id %.20q: %v, want an error naming --run-id and $%s", bad, err, EnvRunID)
		}
	}
}
