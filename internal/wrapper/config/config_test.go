package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
)

var now = time.Date(2026, 11, 30, 6, 7, 8, 9, time.UTC)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseDefaultsAndEnv(t *testing.T) {
	cfg, cmd, err := parseAt([]string{"--key", "flag-key", "--", "sh", "-c", "exit 3"}, env(map[string]string{
		EnvRedisURL: "redis://r:6379", EnvKey: "env-key", EnvTTL: "30", EnvRedisPassword: "pw",
		EnvHolder: "c/ns/pod", EnvContention: "Retry", EnvRetryAttempts: "4",
	}), now)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Redis: lock.ClientConfig{URL: "redis://r:6379", Password: "pw"},
		Key:   "flag-key", TTL: 30 * time.Second, RenewInterval: 10 * time.Second,
		Occurrence: time.Date(2026, 11, 30, 6, 7, 0, 0, time.UTC), Holder: "c/ns/pod",
		Contention: ContentionRetry, RetryAttempts: 4, RetryBackoff: DefaultRetryBackoff,
		RetryMaxBackoff: DefaultRetryMaxBack, OnLost: OnLostTerminate, KillGrace: DefaultKillGrace,
		DedupeRetention: lock.DefaultRetention, TerminationLog: DefaultTerminationLog, ReportMaxBytes: report.MaxBytes,
		BackoffLimit: -1,
	}
	if d := cmp.Diff(want, cfg, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("config (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"sh", "-c", "exit 3"}, cmd); d != "" {
		t.Fatal(d)
	}
}

func TestParseAllFlags(t *testing.T) {
	args := []string{
		"--redis-url=rediss+sentinel://a:1,b:2/0?master=m", "--redis-username", "u", "--key", "k",
		"--ttl", "1m", "--renew-interval", "20s", "--occurrence", "2026-01-02T03:04:05.9+01:00",
		"--holder", "h", "--contention", "retry", "--retry-attempts", "0", "--retry-backoff", "2s",
		"--retry-max-backoff", "8s", "--retry-deadline", "2026-01-02T03:05:00Z", "--on-lost", "continue",
		"--kill-grace", "0", "--min-replicas", "2", "--dedupe-retention", "24h", "--termination-log", "-",
		"--", "cmd", "--key", "not-a-flag",
	}
	cfg, cmd, err := parseAt(args, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	occ := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600))
	if !cfg.Occurrence.Equal(occ) || cfg.Contention != "retry" || cfg.RetryDeadline.IsZero() ||
		cfg.OnLost != "continue" || cfg.KillGrace != 0 || cfg.MinReplicas != 2 || cfg.TerminationLog != "-" ||
		cfg.Redis.Username != "u" || cfg.RenewInterval != 20*time.Second {
		t.Fatalf("%+v", cfg)
	}
	if d := cmp.Diff([]string{"cmd", "--key", "not-a-flag"}, cmd); d != "" {
		t.Fatal(d)
	}
}

func TestParseErrorsNameTheFlag(t *testing.T) {
	base := []string{"--redis-url", "redis://r", "--key", "k"}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		flag string
	}{
		{[]string{"--bogus", "--", "x"}, nil, "-bogus"},
		{[]string{"--key", "k", "--", "x"}, nil, "--redis-url"},
		{[]string{"--redis-url", "redis://r", "--", "x"}, nil, "--key"},
		{[]string{"--redis-url", "redis://r", "--", "x"}, map[string]string{EnvKey: "  "}, "--key"},
		{[]string{"--redis-url", "redis://r", "--key", "#2762b91c221fc7f7", "--", "x"}, nil, "--key"}, // the tag of "}x{y}"
		{append(base, "--redis-url", "ftp://r", "--", "x"), nil, "--redis-url"},
		{append(base, "--redis-url", "redis://a,b", "--", "x"), nil, "--redis-url"},
		{append(base, "--redis-url", "redis+cluster://"+strings.Repeat("c:7000,", 64)+"c:7000", "--", "x"), nil, "--redis-url"}, // lock.MaxURLHosts
		{append(base, "--ttl", "0", "--", "x"), nil, "--ttl"},
		{append(base, "--ttl", "-5s", "--", "x"), nil, "--ttl"},
		{append(base, "--ttl", "later", "--", "x"), nil, "--ttl"},
		{append(base, "--ttl", "10s", "--renew-interval", "5001ms", "--", "x"), nil, "--renew-interval"},
		{append(base, "--renew-interval", "-1s", "--", "x"), nil, "--renew-interval"},
		{append(base, "--renew-interval", "0", "--", "x"), nil, "--renew-interval"}, // not the default, silently
		{append(base, "--", "x"), map[string]string{EnvRenewInterval: "0s"}, "--renew-interval"},
		{append(base, "--occurrence", "06:00", "--", "x"), nil, "--occurrence"},
		{append(base, "--contention", "wait", "--", "x"), nil, "--contention"},
		{append(base, "--contention", "retry", "--", "x"), nil, "--retry-attempts"},
		{append(base, "--retry-attempts", "-1", "--", "x"), nil, "--retry-attempts"},
		{append(base, "--retry-attempts", "x", "--", "x"), nil, "--retry-attempts"},
		{append(base, "--retry-backoff", "10s", "--retry-max-backoff", "1s", "--", "x"), nil, "--retry-max-backoff"},
		{append(base, "--on-lost", "panic", "--", "x"), nil, "--on-lost"},
		{append(base, "--min-replicas", "-2", "--", "x"), nil, "--min-replicas"},
		{append(base, "--report-max-bytes", "100", "--", "x"), nil, "--report-max-bytes"},
		{append(base, "--", "x"), map[string]string{EnvReportMaxBytes: "4097"}, "--report-max-bytes"},
		{append(base, "--holder", "eu-1/ns/pod/uid-1", "--holder-instance", "uid-2", "--", "x"), nil, "--holder-instance"},
		{append(base, "--holder", "eu-1/ns/pod/uid-1\nkube-system   backup", "--", "x"), nil, "--holder"}, // a forged row of kubectl get lcj -A
		{append(base, "--", "x"), map[string]string{EnvHolder: "eu-1/ns/pod\tuid-1"}, "--holder"},
		{append(base, "--holder", "eu-1/ns/pod/uid-1", "--holder-instance", "pod/uid-1", "--", "x"), nil, "--holder-instance"},
		{append(base, "--", "x"), map[string]string{EnvHolderInstance: "uid-1"}, "--holder-instance"}, // no --holder: a generated one
		{append(base, "--dedupe-retention", "0", "--", "x"), nil, "--dedupe-retention"},
		{append(base, "--redis-ca-file", "/no/such/ca.crt", "--", "x"), nil, "--redis-ca-file"},
		{append(base, "--", "x"), map[string]string{EnvTTL: "1s", EnvRenewInterval: "1s"}, "--renew-interval"},
		{append(base, "--redis-url", "rediss://r", "--", "x"), map[string]string{EnvRedisCACert: "not pem"}, "--redis-ca-file"},
		{append(base, "--", "x"), map[string]string{EnvOnLost: "explode"}, "--on-lost"},
		{append(base, "--key"), nil, "-key"},
		{append(base, "--not-before", "06:00:00.5", "--", "x"), nil, "--not-before"},
		{append(base, "--", "x"), map[string]string{EnvNotBefore: "soon"}, "--not-before"},
		{append(base, "--backoff-limit", "-2", "--attempts-dir", "/tmp", "--", "x"), nil, "--backoff-limit"},
		{append(base, "--", "x"), map[string]string{EnvBackoffLimit: "6"}, "--backoff-limit"}, // nowhere to count
		{append(base, "--", "x"), map[string]string{EnvBackoffLimit: "six", EnvAttemptsDir: "/tmp"}, "--backoff-limit"},
	} {
		_, _, err := parseAt(tc.args, env(tc.env), now)
		var e *Error
		if !errors.As(err, &e) || e.Flag != tc.flag || !strings.HasPrefix(err.Error(), tc.flag+": ") {
			t.Errorf("%q %v: %v (flag %q), want flag %s", tc.args, tc.env, err, flagOf(e), tc.flag)
		}
	}
	for _, args := range [][]string{base, append(base, "x"), append(base, "--")} {
		if _, _, err := parseAt(args, nil, now); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func flagOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Flag
}

func TestParseKeepsTerminationLogOnError(t *testing.T) {
	for _, args := range [][]string{
		{"--termination-log", "/tmp/r", "--bogus"},
		{"--termination-log=/tmp/r", "--ttl", "0"},
		{"-termination-log=/tmp/r"},
	} {
		cfg, _, err := parseAt(args, nil, now)
		if err == nil || cfg.TerminationLog != "/tmp/r" {
			t.Errorf("%q: %v %q", args, err, cfg.TerminationLog)
		}
	}
	cfg, _, _ := parseAt([]string{"--bogus"}, env(map[string]string{EnvTerminationLog: "/env/r"}), now)
	if cfg.TerminationLog != "/env/r" {
		t.Errorf("env termination log: %q", cfg.TerminationLog)
	}
}

// FuzzParse: Parse never panics; it either returns a *Error naming a flag or a config
// that satisfies every rule.
func FuzzParse(f *testing.F) {
	f.Add("--redis-url redis://r --key k -- true", "", "")
	f.Add("--redis-url redis+cluster://a:1,b:2 --key k --ttl 2s --renew-interval 1s -- sh -c x", "", "")
	f.Add("--key k -- x", "redis://u:p@h:1/2", "30")
	f.Add("--ttl 0 --renew-interval 1s -- x", "redis+sentinel://a/0?master=m", "-1")
	f.Add("--contention retry --retry-deadline 2026-01-01T00:00:00Z -- x", "rediss://h", "1m")
	f.Add("-- --", "redis://[::1]:6379", "1ns")
	f.Add("--not-before 2026-01-01T00:00:00.5Z --not-after 2026-01-01T00:00:00Z -- x", "redis://h", "")
	f.Fuzz(func(t *testing.T, line, url, ttl string) {
		args := strings.Fields(line)
		cfg, cmd, err := parseAt(args, env(map[string]string{EnvRedisURL: url, EnvKey: "k", EnvTTL: ttl}), now)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Msg == "" {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if !cfg.NotBefore.IsZero() && !cfg.NotAfter.IsZero() && cfg.NotBefore.After(cfg.NotAfter) {
			t.Fatalf("accepted --not-before after --not-after: %+v", cfg)
		}
		if len(cmd) == 0 || cfg.TTL <= 0 || cfg.RenewInterval <= 0 || cfg.RenewInterval > cfg.TTL/2 ||
			strings.TrimSpace(cfg.Key) == "" || cfg.Holder == "" || cfg.Occurrence.Nanosecond() != 0 {
			t.Fatalf("accepted a bad config %+v %q", cfg, cmd)
		}
		if _, err := lock.ParseURL(cfg.Redis); err != nil {
			t.Fatalf("accepted url: %v", err)
		}
	})
}

// TestParseNotBefore: --not-before (or its variable) keeps fractions of a second; unset it
// is zero (no wait); one after --not-after is refused, naming both flags.
func TestParseNotBefore(t *testing.T) {
	base := []string{"--redis-url", "redis://r", "--key", "k"}
	want := time.Date(2026, 11, 30, 6, 0, 0, 123456789, time.UTC)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag", []string{"--not-before", "2026-11-30T06:00:00.123456789Z"}, nil},
		{"variable", nil, map[string]string{EnvNotBefore: "2026-11-30T07:00:00.123456789+01:00"}},
		{"flag wins", []string{"--not-before=2026-11-30T06:00:00.123456789Z"}, map[string]string{EnvNotBefore: "2020-01-01T00:00:00Z"}},
		{"at --not-after", []string{"--not-before", "2026-11-30T06:00:00.123456789Z", "--not-after", "2026-11-30T06:00:00.123456789Z"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parseAt(append(append(append([]string{}, base...), tc.args...), "--", "x"), env(tc.env), now)
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.NotBefore.Equal(want) {
				t.Fatalf("NotBefore = %v, want %v", cfg.NotBefore, want)
			}
		})
	}
	cfg, _, err := parseAt(append(append([]string{}, base...), "--", "x"), nil, now)
	if err != nil || !cfg.NotBefore.IsZero() {
		t.Fatalf("unset: %v %v", cfg.NotBefore, err)
	}
	_, _, err = parseAt(append(append([]string{}, base...), "--not-before", "2026-11-30T06:00:00.5Z",
		"--not-after", "2026-11-30T06:00:00Z", "--", "x"), nil, now)
	var e *Error
	if !errors.As(err, &e) || e.Flag != "--not-before" || !strings.Contains(err.Error(), "is after --not-after 2026-11-30T06:00:00Z") ||
		!strings.Contains(err.Error(), EnvNotBefore) || !strings.Contains(err.Error(), EnvNotAfter) {
		t.Fatalf("not-before after not-after: %v", err)
	}
}

// Without --holder each run gets a holder of its own. A lock held under our own holder for
// our own occurrence is taken over as a crashed predecessor's (a restarted container keeps
// its pod's --holder), so two runs sharing a default holder would both run: "<host
// name>/<pid>" alone is shared by two containers of one image with the same host name,
// lockwrap PID 1 in each (docker --hostname, compose's hostname:, twin VMs).
func TestDefaultHolderIsUniquePerRun(t *testing.T) {
	holders := map[string]bool{}
	for range 100 {
		cfg, _, err := parseAt([]string{"--redis-url", "redis://r:6379", "--key", "k", "--", "true"}, env(nil), now)
		if err != nil {
			t.Fatal(err)
		}
		if holders[cfg.Holder] {
			t.Fatalf("default holder %q given twice", cfg.Holder)
		}
		holders[cfg.Holder] = true
	}
}

// TestReportLimitReadBeforeTheRest: the report's limit is read before the other settings,
// so that the report of a bad one fits the pod's share too, and read as the flag reads it.
func TestReportLimitReadBeforeTheRest(t *testing.T) {
	env := map[string]string{EnvReportMaxBytes: "0x400", EnvRedisURL: "redis://r:6379", EnvKey: "k"}
	cfg, _, err := Parse([]string{"--ttl", "soon", "--", "x"}, func(k string) string { return env[k] })
	if err == nil || cfg.ReportMaxBytes != 1024 {
		t.Errorf("error %v, limit %d: want the --ttl error and the limit 1024", err, cfg.ReportMaxBytes)
	}
}

// TestPasswordOnTheCommandLineIsRefused: every user of the machine reads lockwrap's
// command line (ps, /proc/<pid>/cmdline). The password is $LOCKEDCRON_REDIS_PASSWORD's
// alone for that reason, yet a --redis-url flag carrying one was taken without a word.
func TestPasswordOnTheCommandLineIsRefused(t *testing.T) {
	for _, u := range []string{"redis://:s3cret@redis.internal:6379", "redis://user:s3cret@r", "redis+sentinel://s1?master=m&sentinel_password=s3cret"} {
		_, _, err := Parse([]string{"--redis-url", u, "--key", "k", "--", "true"}, nil)
		var cerr *Error
		if !errors.As(err, &cerr) || cerr.Flag != "--redis-url" || !strings.Contains(err.Error(), EnvRedisURL) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("--redis-url with a password: %v; want refused naming --redis-url and $%s, quoting no password", err, EnvRedisURL)
		}
		env := map[string]string{EnvRedisURL: u}
		if _, _, err := Parse([]string{"--key", "k", "--", "true"}, func(k string) string { return env[k] }); err != nil {
			t.Errorf("$%s with a password: %v", EnvRedisURL, err)
		}
	}
	if _, _, err := Parse([]string{"--redis-url", "redis://user@r", "--key", "k", "--", "true"}, func(k string) string {
		return map[string]string{EnvRedisPassword: "s3cret"}[k]
	}); err != nil {
		t.Errorf("--redis-url without a password, $%s set: %v", EnvRedisPassword, err)
	}
}
