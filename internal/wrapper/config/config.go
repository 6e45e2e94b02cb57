package config

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/lockedcron/lockedcron/internal/defaults"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
)

// Contention policies.
const (
	ContentionSkip  = "skip"
	ContentionRetry = "retry"
)

// OnLost policies.
const (
	OnLostTerminate = "terminate"
	OnLostContinue  = "continue"
)

// Defaults (from internal/defaults, their one source).
const (
	DefaultTTL            = defaults.TTL
	DefaultRetryBackoff   = defaults.RetryBackoff
	DefaultRetryMaxBack   = defaults.RetryMaxBackoff
	DefaultKillGrace      = defaults.KillGracePeriod
	DefaultTerminationLog = defaults.TerminationLog
)

// Config is one lockwrap invocation's parsed input.
type Config struct {
	Redis         lock.ClientConfig  // URL, username, password (env only), CA PEM
	RedisAllowed  *lock.AllowedHosts // endpoints the URL may name (nil: any but link-local ones)
	Key           string
	TTL           time.Duration
	RenewInterval time.Duration // default TTL/3
	Occurrence    time.Time     // whole seconds; default: now, truncated to the minute
	OccurrenceSet bool          // --occurrence (or its variable) was given
	RunID         string        // a ledger entry of its own, not the occurrence's (lock.Request.RunID); "": none
	// BlackoutID and MadeAt (both or neither): the run's job (its UID) and when the
	// controller made the run; the lock is not granted in a blackout of the job that
	// began after MadeAt (lock.Request.BlackoutID).
	BlackoutID      string
	MadeAt          time.Time
	Holder          string        // default: "<host name>/<pid>" (unique per process: see validate)
	HolderInstance  string        // the last "/"-part of Holder naming this process among those of its name (EnvHolderInstance)
	Contention      string        // ContentionSkip | ContentionRetry
	RetryAttempts   int           // total acquisition attempts with retry (0: until the deadline)
	RetryBackoff    time.Duration // first backoff cap
	RetryMaxBackoff time.Duration // largest backoff cap
	RetryDeadline   time.Time     // zero: none
	NotAfter        time.Time     // zero: none; a job not started by then is not started (Missed)
	// NotBefore: zero: none. Nothing (no Redis connection, no command) happens before this
	// instant on this host's wall clock: a pod created ahead of its occurrence waits for it.
	NotBefore       time.Time
	OnLost          string // OnLostTerminate | OnLostContinue
	KillGrace       time.Duration
	MinReplicas     int
	DedupeRetention time.Duration
	TerminationLog  string // "" disables, "-" is stderr
	ReportMaxBytes  int    // the most the report takes (report.MinBytes to report.MaxBytes)
	// WatermarkMonotonic refuses a watermark smaller than the stored one (numerically
	// when both are integers, else byte-wise); the run still succeeds, with a warning.
	WatermarkMonotonic bool
	// BackoffLimit (-1: none) is how many times a failed attempt may be started again in
	// the same place (a container restarted in its pod: restartPolicy OnFailure); the
	// attempts are counted in a file in AttemptsDir, which outlives the container.
	BackoffLimit int
	AttemptsDir  string
}

// Error is a bad input: it names the flag (and the variable) at fault.
type Error struct {
	Flag string // "--ttl", or "" for the command line as a whole
	Msg  string
}

func (e *Error) Error() string {
	if e.Flag == "" {
		return e.Msg
	}
	return e.Flag + ": " + e.Msg
}

// Protocol is the version of the settings the controller gives lockwrap (its flags and
// variables). Raise it with every setting an older lockwrap would ignore to the job's
// harm: the controller passes its own to the init container (lockwrap cp DEST
// --protocol=N), and a lockwrap that knows an older version refuses to install itself.
// 2: --backoff-limit and --attempts-dir.
const Protocol = 2

// flagEnv pairs every flag with its variable.
var flagEnv = []struct{ flag, env string }{
	{"redis-url", EnvRedisURL},
	{"redis-username", EnvRedisUsername},
	{"redis-ca-file", EnvRedisCAFile},
	{"redis-allowed-hosts", EnvRedisAllowedHosts},
	{"key", EnvKey},
	{"ttl", EnvTTL},
	{"renew-interval", EnvRenewInterval},
	{"occurrence", EnvOccurrence},
	{"holder", EnvHolder},
	{"holder-instance", EnvHolderInstance},
	{"run-id", EnvRunID},
	{"blackout-id", EnvBlackoutID},
	{"made-at", EnvMadeAt},
	{"contention", EnvContention},
	{"retry-attempts", EnvRetryAttempts},
	{"retry-backoff", EnvRetryBackoff},
	{"retry-max-backoff", EnvRetryMaxBackoff},
	{"retry-deadline", EnvRetryDeadline},
	{"not-after", EnvNotAfter},
	{"not-before", EnvNotBefore},
	{"on-lost", EnvOnLost},
	{"kill-grace", EnvKillGrace},
	{"min-replicas", EnvMinReplicas},
	{"dedupe-retention", EnvDedupeRetention},
	{"termination-log", EnvTerminationLog},
	{"report-max-bytes", EnvReportMaxBytes},
	{"watermark-monotonic", EnvWatermarkMonotonic},
	{"backoff-limit", EnvBackoffLimit},
	{"attempts-dir", EnvAttemptsDir},
}

// Usage lists the command lines, the flags and their variables.
func Usage() string {
	var b strings.Builder
	b.WriteString("usage: lockwrap [flags] -- COMMAND [ARGS...]\n       lockwrap cp DEST [--protocol=N]\nflags (each also read from its variable; the flag wins):\n")
	for _, fe := range flagEnv {
		fmt.Fprintf(&b, "  --%-20s $%s\n", fe.flag, fe.env)
	}
	fmt.Fprintf(&b, "  %-22s $%s (environment only)\n", "(password)", EnvRedisPassword)
	fmt.Fprintf(&b, "  %-22s $%s (PEM text)\n", "(CA certificate)", EnvRedisCACert)
	return b.String()
}

// reservedKey is the form of the tag lock gives a key holding a brace ("#" and 16 hex
// digits of its SHA-256): a key of that form would share its lock and ledger.
var reservedKey = regexp.MustCompile(`^#[0-9a-f]{16}$`)

// blackoutID is what --blackout-id may be: a job's UID, part of a Redis key's name.
var blackoutID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// Variables lists every variable lockwrap reads its settings from.
func Variables() []string {
	out := make([]string, 0, len(flagEnv)+2)
	for _, fe := range flagEnv {
		out = append(out, fe.env)
	}
	return append(out, EnvRedisPassword, EnvRedisCACert)
}

// EnvFor returns the variable read for a flag name (without dashes), or "".
func EnvFor(flagName string) string {
	for _, fe := range flagEnv {
		if fe.flag == flagName {
			return fe.env
		}
	}
	return ""
}

// duration accepts Go durations ("90s", "1m30s") and bare integers as seconds.
type duration struct{ d *time.Duration }

func (v duration) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v duration) Set(s string) error {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > int64(1<<62/time.Second) || n < -int64(1<<62/time.Second) {
			return fmt.Errorf("%q is out of range", s)
		}
		*v.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (like 30s, 2m, or seconds)", s)
	}
	*v.d = d
	return nil
}

type instant struct {
	t   *time.Time
	set *bool
}

func (v instant) String() string {
	if v.t == nil || v.t.IsZero() {
		return ""
	}
	return v.t.Format(time.RFC3339)
}

func (v instant) Set(s string) error {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time (like 2026-01-02T03:04:00Z)", s)
	}
	*v.t = t
	if v.set != nil {
		*v.set = true
	}
	return nil
}

type choice struct {
	s    *string
	opts []string
}

func (v choice) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

func (v choice) Set(s string) error {
	l := strings.ToLower(strings.TrimSpace(s))
	for _, o := range v.opts {
		if l == o {
			*v.s = o
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", s, strings.Join(v.opts, ", "))
}

// Parse reads lockwrap's flags from args (without the program name), falling back to the
// LOCKEDCRON_* variables through getenv for every flag not given, and returns the
// command after "--". On error the returned Config still holds what could be parsed
// (TerminationLog in particular, so the caller can write a report), and the error is an
// *Error naming the flag. now is used for the default occurrence.
func Parse(args []string, getenv func(string) string) (Config, []string, error) {
	return parseAt(args, getenv, time.Now())
}

func parseAt(args []string, getenv func(string) string, now time.Time) (Config, []string, error) {
	cfg := Config{
		TTL:             DefaultTTL,
		Contention:      ContentionSkip,
		RetryBackoff:    DefaultRetryBackoff,
		RetryMaxBackoff: DefaultRetryMaxBack,
		OnLost:          OnLostTerminate,
		KillGrace:       DefaultKillGrace,
		DedupeRetention: lock.DefaultRetention,
		TerminationLog:  DefaultTerminationLog,
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var caFile string
	fs := flag.NewFlagSet("lockwrap", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Redis.URL, "redis-url", "", "")
	fs.StringVar(&cfg.Redis.Username, "redis-username", "", "")
	fs.StringVar(&caFile, "redis-ca-file", "", "")
	fs.Func("redis-allowed-hosts", "", func(v string) (err error) {
		cfg.RedisAllowed, err = lock.ParseAllowedHosts(v)
		return err
	})
	fs.StringVar(&cfg.Key, "key", "", "")
	fs.Var(duration{&cfg.TTL}, "ttl", "")
	fs.Var(duration{&cfg.RenewInterval}, "renew-interval", "")
	fs.Var(instant{&cfg.Occurrence, &cfg.OccurrenceSet}, "occurrence", "")
	fs.StringVar(&cfg.Holder, "holder", "", "")
	fs.StringVar(&cfg.HolderInstance, "holder-instance", "", "")
	fs.StringVar(&cfg.RunID, "run-id", "", "")
	fs.StringVar(&cfg.BlackoutID, "blackout-id", "", "")
	fs.Var(instant{t: &cfg.MadeAt}, "made-at", "")
	fs.Var(choice{&cfg.Contention, []string{ContentionSkip, ContentionRetry}}, "contention", "")
	fs.IntVar(&cfg.RetryAttempts, "retry-attempts", 0, "")
	fs.Var(duration{&cfg.RetryBackoff}, "retry-backoff", "")
	fs.Var(duration{&cfg.RetryMaxBackoff}, "retry-max-backoff", "")
	fs.Var(instant{t: &cfg.RetryDeadline}, "retry-deadline", "")
	fs.Var(instant{t: &cfg.NotAfter}, "not-after", "")
	fs.Var(instant{t: &cfg.NotBefore}, "not-before", "")
	fs.Var(choice{&cfg.OnLost, []string{OnLostTerminate, OnLostContinue}}, "on-lost", "")
	fs.Var(duration{&cfg.KillGrace}, "kill-grace", "")
	fs.IntVar(&cfg.MinReplicas, "min-replicas", 0, "")
	fs.Var(duration{&cfg.DedupeRetention}, "dedupe-retention", "")
	fs.StringVar(&cfg.TerminationLog, "termination-log", DefaultTerminationLog, "")
	fs.IntVar(&cfg.ReportMaxBytes, "report-max-bytes", report.MaxBytes, "")
	fs.BoolVar(&cfg.WatermarkMonotonic, "watermark-monotonic", false, "")
	fs.IntVar(&cfg.BackoffLimit, "backoff-limit", -1, "")
	fs.StringVar(&cfg.AttemptsDir, "attempts-dir", "", "")

	// The termination log first, from whatever is there, so a report can be written even
	// when the rest does not parse (within the variable's limit, if it is one).
	if v := getenv(EnvTerminationLog); v != "" {
		cfg.TerminationLog = v
	}
	if n, err := strconv.ParseInt(getenv(EnvReportMaxBytes), 0, 0); err == nil && n >= report.MinBytes && n <= report.MaxBytes {
		cfg.ReportMaxBytes = int(n) // read as the flag reads it (flag.IntVar: any base)
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), "termination-log="); ok && strings.HasPrefix(a, "-") {
			cfg.TerminationLog = v
		} else if (a == "--termination-log" || a == "-termination-log") && i+1 < len(args) {
			cfg.TerminationLog = args[i+1]
		}
	}

	if err := fs.Parse(args); err != nil {
		return cfg, nil, flagError(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["redis-url"] {
		// Every user of the machine reads a command line (ps, /proc/<pid>/cmdline, which
		// PR_SET_DUMPABLE does not guard): the password is $LOCKEDCRON_REDIS_PASSWORD's,
		// never a flag's, for that reason, and a url carrying one is the environment's.
		if o, err := lock.ParseURL(lock.ClientConfig{URL: cfg.Redis.URL}); err == nil && (o.Password != "" || o.SentinelPassword != "") {
			return cfg, nil, &Error{Flag: "--redis-url", Msg: "holds a password, which every user of this machine can read in lockwrap's command line (ps): give the url in $" +
				EnvRedisURL + " instead, or the password alone in $" + EnvRedisPassword}
		}
	}
	for _, fe := range flagEnv {
		if set[fe.flag] {
			continue
		}
		if v := getenv(fe.env); v != "" {
			if err := fs.Set(fe.flag, v); err != nil {
				return cfg, nil, &Error{Flag: "--" + fe.flag, Msg: fmt.Sprintf("from $%s: %v", fe.env, err)}
			}
		}
	}
	if cfg.RenewInterval == 0 && (set["renew-interval"] || getenv(EnvRenewInterval) != "") {
		// Left out, it is a third of the ttl; given as 0, it was that too, silently.
		return cfg, nil, &Error{Flag: "--renew-interval", Msg: "0: want a duration above 0, or leave --renew-interval (and $" + EnvRenewInterval + ") out for the default, a third of the ttl"}
	}
	cmd := fs.Args()
	// flag stops at the first non-flag; we want flags, then "--", then the command.
	if len(cmd) == 0 {
		return cfg, nil, &Error{Msg: "no command: usage: lockwrap [flags] -- COMMAND [ARGS...]"}
	}
	if !dashDashBefore(args, len(cmd)) {
		return cfg, nil, &Error{Msg: fmt.Sprintf("unexpected argument %q before \"--\": usage: lockwrap [flags] -- COMMAND [ARGS...]", cmd[0])}
	}

	cfg.Redis.Password = getenv(EnvRedisPassword)
	if pem := getenv(EnvRedisCACert); pem != "" {
		cfg.Redis.CACert = []byte(pem)
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return cfg, nil, &Error{Flag: "--redis-ca-file", Msg: err.Error()}
		}
		cfg.Redis.CACert = b
	}
	if err := cfg.validate(now); err != nil {
		return cfg, nil, err
	}
	if cfg.Contention == ContentionSkip {
		// Retries asked for under skip would silently not be made.
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, name := range []string{"retry-attempts", "retry-backoff", "retry-max-backoff", "retry-deadline"} {
			if given[name] {
				return cfg, nil, &Error{Flag: "--" + name, Msg: fmt.Sprintf("applies only with --contention retry (the contention is skip, its default): add --contention retry, or drop --%s ($%s)", name, EnvFor(name))}
			}
		}
	}
	return cfg, cmd, nil
}

// dashDashBefore reports whether the last n args are preceded by "--".
func dashDashBefore(args []string, n int) bool {
	i := len(args) - n - 1
	return i >= 0 && args[i] == "--"
}

func flagError(err error) error {
	msg := err.Error()
	// flag's messages: "flag provided but not defined: -x", "invalid value "y" for flag -ttl: …"
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return &Error{Flag: "-" + strings.TrimLeft(name, "-"), Msg: "unknown flag"}
	}
	if strings.HasPrefix(msg, "invalid value ") || strings.HasPrefix(msg, "invalid boolean value ") {
		if i := strings.Index(msg, " for flag -"); i >= 0 {
			rest := msg[i+len(" for flag -"):]
			name, why, _ := strings.Cut(rest, ": ")
			return &Error{Flag: "--" + name, Msg: why}
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return &Error{Flag: "-" + strings.TrimLeft(name, "-"), Msg: "needs a value"}
	}
	if errors.Is(err, flag.ErrHelp) {
		return &Error{Flag: "--help", Msg: "help requested (see docs/lockwrap.md)"}
	}
	return &Error{Msg: msg}
}

func (cfg *Config) validate(now time.Time) error {
	bad := func(name, format string, a ...any) error {
		return &Error{Flag: "--" + name, Msg: fmt.Sprintf(format, a...) + " ($" + EnvFor(name) + ")"}
	}
	between := func(name string, v, lo, hi time.Duration) error {
		if v < lo || v > hi {
			return bad(name, "%v must be between %v and %v", v, lo, hi)
		}
		return nil
	}
	if cfg.Redis.URL == "" {
		return bad("redis-url", "required")
	}
	if len(cfg.Redis.CACert) > 0 && !x509.NewCertPool().AppendCertsFromPEM(cfg.Redis.CACert) {
		return &Error{Flag: "--redis-ca-file", Msg: "no PEM certificate in the CA (--redis-ca-file or $" + EnvRedisCACert + ")"}
	}
	o, err := lock.ParseURL(cfg.Redis)
	if err != nil {
		return bad("redis-url", "%v", err)
	}
	// Refused before any connection: hosts outside --redis-allowed-hosts, and link-local
	// addresses (cloud metadata) unless a CIDR there allows them.
	if err := cfg.RedisAllowed.CheckAddrs(o.Addrs); err != nil {
		return bad("redis-url", "%v", err)
	}
	switch {
	case cfg.Key == "":
		return bad("key", "required")
	case strings.TrimSpace(cfg.Key) == "":
		return bad("key", "%q is blank", cfg.Key)
	case strings.TrimSpace(cfg.Key) != cfg.Key:
		return bad("key", "%q has leading or trailing whitespace", cfg.Key)
	case len(cfg.Key) > defaults.MaxKeyLength:
		return bad("key", "%d bytes, at most %d", len(cfg.Key), defaults.MaxKeyLength)
	case reservedKey.MatchString(cfg.Key):
		return bad("key", "%q is reserved: \"#\" and 16 hex digits is the tag a key holding '{' or '}' is stored under, and the two would share one lock; choose another key", cfg.Key)
	}
	if err := between("ttl", cfg.TTL, defaults.MinTTL, defaults.MaxTTL); err != nil {
		return err
	}
	cfg.RenewInterval = defaults.RenewInterval(cfg.TTL, cfg.RenewInterval)
	if cfg.RenewInterval < defaults.MinRenewInterval {
		return bad("renew-interval", "%v must be at least %v", cfg.RenewInterval, defaults.MinRenewInterval)
	}
	if cfg.RenewInterval > cfg.TTL/2 {
		return bad("renew-interval", "%v is more than half the ttl %v", cfg.RenewInterval, cfg.TTL)
	}
	if err := between("kill-grace", cfg.KillGrace, 0, defaults.MaxKillGracePeriod); err != nil {
		return err
	}
	if !defaults.TTLFits(cfg.TTL, cfg.RenewInterval, cfg.KillGrace) {
		return bad("ttl", "%v is less than --renew-interval %v + --kill-grace %v + a margin of %v: a holder that cannot renew must have stopped its command before the lock expires; raise --ttl or lower --kill-grace",
			cfg.TTL, cfg.RenewInterval, cfg.KillGrace, defaults.Margin(cfg.TTL))
	}
	if !cfg.OccurrenceSet {
		cfg.Occurrence = now.Truncate(time.Minute)
	}
	cfg.Occurrence = cfg.Occurrence.Truncate(time.Second)
	if err := checkRunID(cfg.RunID); err != nil {
		return bad("run-id", "%v", err)
	}
	if cfg.Holder == "" {
		// Unique per run: a lock held under our own holder name for our own occurrence is
		// taken over as a crashed predecessor's (a restarted container keeps its pod's
		// --holder), so two runs must never share a default one. The host name and pid
		// alone are shared by two containers of one image with one host name (lockwrap
		// PID 1 in each): random bits make it ours.
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "unknown"
		}
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		cfg.Holder = h + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
	}
	if strings.IndexFunc(cfg.Holder, unicode.IsControl) >= 0 {
		// The holder is shown on one line: status.lastHolder is a column of `kubectl get
		// lcj -A`, and a newline in it read as a row of another job.
		return bad("holder", "%q holds a control character (a newline, a tab …): a holder is one line", cfg.Holder)
	}
	switch {
	case cfg.BlackoutID != "" && !blackoutID.MatchString(cfg.BlackoutID):
		return bad("blackout-id", "%q must be 1 to 128 letters, digits, '.', '_' or '-' (the controller gives its job's UID)", cfg.BlackoutID)
	case cfg.BlackoutID != "" && cfg.MadeAt.IsZero():
		return bad("made-at", "required with --blackout-id: when the run was made, so that only a blackout that began after it holds the run back")
	case cfg.BlackoutID == "" && !cfg.MadeAt.IsZero():
		return bad("blackout-id", "required with --made-at: the job whose blackouts hold the run back")
	}
	if cfg.HolderInstance != "" && (strings.Contains(cfg.HolderInstance, "/") || !strings.HasSuffix(cfg.Holder, "/"+cfg.HolderInstance)) {
		return bad("holder-instance", "%q must be the last part of --holder %q (after its last \"/\")", cfg.HolderInstance, cfg.Holder)
	}
	if cfg.RetryAttempts < 0 || cfg.RetryAttempts > defaults.MaxRetryAttempts {
		return bad("retry-attempts", "%d must be between 0 and %d", cfg.RetryAttempts, defaults.MaxRetryAttempts)
	}
	if cfg.Contention == ContentionRetry && cfg.RetryAttempts == 0 && cfg.RetryDeadline.IsZero() && cfg.NotAfter.IsZero() {
		return bad("retry-attempts", "contention retry needs --retry-attempts, --retry-deadline or --not-after")
	}
	if err := between("retry-backoff", cfg.RetryBackoff, defaults.MinRetryBackoff, defaults.MaxRetryBackoff); err != nil {
		return err
	}
	if err := between("retry-max-backoff", cfg.RetryMaxBackoff, defaults.MinRetryBackoff, defaults.MaxRetryBackoff); err != nil {
		return err
	}
	if cfg.RetryMaxBackoff < cfg.RetryBackoff {
		return bad("retry-max-backoff", "%v is less than --retry-backoff %v", cfg.RetryMaxBackoff, cfg.RetryBackoff)
	}
	if cfg.BackoffLimit < -1 {
		return &Error{Flag: "--backoff-limit", Msg: fmt.Sprintf("%d: give 0 or more ($%s), or leave it out for no limit", cfg.BackoffLimit, EnvBackoffLimit)}
	}
	if cfg.BackoffLimit >= 0 && cfg.AttemptsDir == "" {
		return &Error{Flag: "--backoff-limit", Msg: fmt.Sprintf("needs --attempts-dir ($%s), a directory that outlives the container (an emptyDir of the pod), to count the attempts in", EnvAttemptsDir)}
	}
	if !cfg.NotBefore.IsZero() && !cfg.NotAfter.IsZero() && cfg.NotBefore.After(cfg.NotAfter) {
		return &Error{Flag: "--not-before", Msg: fmt.Sprintf("%s is after --not-after %s: the command could never start; give a --not-before at or before --not-after ($%s, $%s)",
			cfg.NotBefore.UTC().Format(time.RFC3339Nano), cfg.NotAfter.UTC().Format(time.RFC3339Nano), EnvNotBefore, EnvNotAfter)}
	}
	if cfg.ReportMaxBytes < report.MinBytes || cfg.ReportMaxBytes > report.MaxBytes {
		return bad("report-max-bytes", "%d is not between %d and %d", cfg.ReportMaxBytes, report.MinBytes, report.MaxBytes)
	}
	if cfg.MinReplicas < 0 {
		return bad("min-replicas", "%d is negative", cfg.MinReplicas)
	}
	if err := between("dedupe-retention", cfg.DedupeRetention, defaults.MinRetention, defaults.MaxRetention); err != nil {
		return err
	}
	if cfg.DedupeRetention < 2*cfg.TTL {
		return bad("dedupe-retention", "%v must be at least twice the ttl %v: raise --dedupe-retention", cfg.DedupeRetention, cfg.TTL)
	}
	return nil
}

// MaxRunIDLength bounds --run-id (it becomes part of a Redis key).
const MaxRunIDLength = 253

// checkRunID accepts "" (none) or 1..MaxRunIDLength characters of [A-Za-z0-9._:/-].
func checkRunID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) > MaxRunIDLength {
		return fmt.Errorf("%d characters, at most %d", len(id), MaxRunIDLength)
	}
	for i, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:/-", r)
		if !ok {
			return fmt.Errorf("%q: character %q at %d is not one of A-Z a-z 0-9 . _ : / -", id, r, i)
		}
	}
	return nil
}
