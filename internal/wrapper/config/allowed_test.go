package config

import (
	"strings"
	"testing"
)

// --redis-allowed-hosts / $LOCKEDCRON_REDIS_ALLOWED_HOSTS: the URL's hosts are checked
// before anything is dialled; link-local addresses are refused without the list too.
func TestRedisAllowedHosts(t *testing.T) {
	for _, tc := range []struct {
		url, allowed, flag, want string // want "": accepted
	}{
		{"redis://redis.infra.svc:6379", "", "", ""},
		{"redis://redis.infra.svc:6379", "*.infra.svc", "", ""},
		{"redis://10.1.2.3:6379", "10.0.0.0/8", "", ""},
		{"redis+sentinel://a.redis.internal:1,b.redis.internal:2?master=m", "*.redis.internal", "", ""},
		{"redis://evil.example:6379", "*.infra.svc", "", "evil.example is not in the allowed hosts"},
		{"redis+sentinel://a.redis.internal:1,evil:2?master=m", "*.redis.internal", "", "evil is not in the allowed hosts"},
		{"redis://169.254.169.254:80", "", "", "link-local"},
		{"redis://[fe80::1]:6379", "", "", "link-local"},
		{"redis://169.254.169.254:80", "", "169.254.169.254/32", ""},
		{"redis://redis.infra.svc:6379", "", "other.svc", "not in the allowed hosts"}, // the flag wins
		{"redis://x:1", "10.0.0.0/99", "", "--redis-allowed-hosts"},
	} {
		env := map[string]string{EnvRedisURL: tc.url, EnvKey: "k", EnvRedisAllowedHosts: tc.allowed}
		args := []string{"--", "true"}
		if tc.flag != "" {
			args = append([]string{"--redis-allowed-hosts", tc.flag}, args...)
		}
		_, _, err := Parse(args, func(k string) string { return env[k] })
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s (allowed %q %q): %v", tc.url, tc.allowed, tc.flag, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s (allowed %q %q): %v, want %q", tc.url, tc.allowed, tc.flag, err, tc.want)
		}
	}
}
