package runpod

import (
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// The controller's --redis-allowed-hosts reaches lockwrap; without it, no variable.
func TestBuildPassesRedisAllowedHosts(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	if v, ok := envOf(t, nightly(), occ)[config.EnvRedisAllowedHosts]; ok {
		t.Errorf("no list: %s=%q", config.EnvRedisAllowedHosts, v)
	}
	a, err := lock.ParseAllowedHosts("*.redis.internal, 10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	o := opts
	o.RedisAllowedHosts = a
	pod, err := Build(nightly(), occ, o)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == config.EnvRedisAllowedHosts {
			got = e.Value
		}
	}
	if want := "*.redis.internal,10.0.0.0/8"; got != want {
		t.Errorf("%s = %q, want %q", config.EnvRedisAllowedHosts, got, want)
	}
}
