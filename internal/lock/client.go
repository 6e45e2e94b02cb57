package lock

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClientConfig says how to reach Redis.
type ClientConfig struct {
	// URL is one of
	//   redis://[user:pass@]host:port[/db][?opts]                     standalone
	//   rediss://…                                                    standalone over TLS
	//   redis+sentinel://[user:pass@]h1:26379,h2:26379[/db]?master=mymaster[&opts]
	//   rediss+sentinel://…                                           Sentinel, TLS to all
	//   redis+cluster://[user:pass@]h1:7000,h2:7001[?opts]            Cluster (seed nodes)
	//   rediss+cluster://…                                            Cluster over TLS
	// User and password in the URL are for the data nodes. opts: dial_timeout,
	// read_timeout, write_timeout (Go durations or seconds), client_name, and for Sentinel
	// master (required), sentinel_username, sentinel_password.
	URL string
	// Username and Password, when set, win over the URL's.
	Username, Password string
	// CACert is a PEM bundle trusted for TLS instead of the system roots.
	CACert []byte
}

// ErrBadURL is wrapped by every URL problem NewClient and ParseURL report.
var ErrBadURL = errors.New("lock: bad redis url")

// Options for NewClient's connections when the URL does not say.
const (
	defaultDialTimeout  = 5 * time.Second
	defaultReadTimeout  = 3 * time.Second
	defaultWriteTimeout = 3 * time.Second
)

// ParseURL turns cfg into go-redis universal options without connecting.
func ParseURL(cfg ClientConfig) (*redis.UniversalOptions, error) {
	raw := strings.TrimSpace(cfg.URL)
	scheme, rest, hasScheme := strings.Cut(raw, "://")
	// Split the authority (which may list several hosts) from path and query ourselves:
	// net/url does not accept a comma-separated host list.
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	// A password with an unencoded '/', '?' or '#' ends the authority early, and the
	// '@' meant to close it lands after it. Whatever a strict reading of such a URL
	// then says would quote pieces of the password, so it is not said.
	misplacedAt := strings.LastIndex(tail, "@") >= 0
	bad := func(format string, a ...any) error {
		why := fmt.Sprintf(format, a...)
		if misplacedAt {
			why = `it has an "@" after "/", "?" or "#"; if the password holds one of these, ` +
				`percent-encode it ("/" %2F, "?" %3F, "#" %23, "@" %40)`
		}
		return fmt.Errorf("%w %s: %s", ErrBadURL, redactURL(cfg.URL), why)
	}
	if raw == "" {
		return nil, bad("empty")
	}
	if !hasScheme {
		return nil, bad("no scheme (want redis://, rediss://, redis+sentinel://, redis+cluster:// …)")
	}
	scheme = strings.ToLower(scheme)
	var useTLS, sentinel, cluster bool
	switch scheme {
	case "redis":
	case "rediss":
		useTLS = true
	case "redis+sentinel":
		sentinel = true
	case "rediss+sentinel":
		sentinel, useTLS = true, true
	case "redis+cluster":
		cluster = true
	case "rediss+cluster":
		cluster, useTLS = true, true
	default:
		return nil, bad("unknown scheme %q (want redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster)", scheme)
	}

	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i], authority[i+1:]
	}
	// Let net/url decode userinfo, path and query around a placeholder host; the user
	// info on its own first, as net/url's errors quote the bad escape they found in it.
	ph := "redis://"
	if userinfo != "" {
		ph += userinfo + "@"
		if _, err := url.Parse(ph + "placeholder"); err != nil {
			return nil, bad("%s", `the user name or password is not valid in a URL: percent-encode its special characters `+
				`(" " %20, "%" %25, "@" %40, "/" %2F, "?" %3F, "#" %23, and ":" %3A in a user name)`)
		}
	}
	u, err := url.Parse(ph + "placeholder" + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, bad("%v", err)
	}
	if u.Fragment != "" {
		return nil, bad("unexpected fragment")
	}

	o := &redis.UniversalOptions{
		DialTimeout:           defaultDialTimeout,
		ReadTimeout:           defaultReadTimeout,
		WriteTimeout:          defaultWriteTimeout,
		ContextTimeoutEnabled: true,
		// RESP2 keeps the handshake to HELLO-less AUTH and works with every server version.
		Protocol: 2,
		// No CLIENT SETINFO: an ACL user limited to the lock's commands need not allow it.
		DisableIdentity: true,
	}
	if hostlist == "" {
		return nil, bad("no host")
	}
	for _, h := range strings.Split(hostlist, ",") {
		addr, err := hostPort(h, sentinel)
		if err != nil {
			return nil, bad("%v", err)
		}
		o.Addrs = append(o.Addrs, addr)
	}
	if !sentinel && !cluster && len(o.Addrs) > 1 {
		return nil, bad("several hosts need redis+sentinel:// or redis+cluster://")
	}
	o.IsClusterMode = cluster

	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if cluster {
			return nil, bad("cluster urls take no database number")
		}
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 {
			return nil, bad("database %q is not a number", p)
		}
		o.DB = db
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		// Not quoted: the bad escape may sit in sentinel_password=.
		return nil, bad("%s", `the query is not valid: percent-encode "%" as %25 and ";" as %3B in its values`)
	}
	for name, vals := range query {
		v := vals[len(vals)-1]
		switch name {
		case "master", "master_name":
			if !sentinel {
				return nil, bad("%s= is only for redis+sentinel://", name)
			}
			o.MasterName = v
		case "sentinel_username", "sentinel_password":
			if !sentinel {
				return nil, bad("%s= is only for redis+sentinel://", name)
			}
			if name == "sentinel_username" {
				o.SentinelUsername = v
			} else {
				o.SentinelPassword = v
			}
		case "client_name":
			o.ClientName = v
		case "dial_timeout", "read_timeout", "write_timeout":
			d, err := parseSeconds(v)
			if err != nil {
				return nil, bad("%s=%q: %v", name, v, err)
			}
			switch name {
			case "dial_timeout":
				o.DialTimeout = d
			case "read_timeout":
				o.ReadTimeout = d
			default:
				o.WriteTimeout = d
			}
		default:
			return nil, bad("unknown option %q", name)
		}
	}
	if sentinel && o.MasterName == "" {
		return nil, bad("redis+sentinel:// needs ?master=<name>")
	}

	if cfg.Username != "" {
		o.Username = cfg.Username
	}
	if cfg.Password != "" {
		o.Password = cfg.Password
	}
	if len(cfg.CACert) > 0 && !useTLS {
		return nil, bad("a CA certificate was given but the scheme %q is not TLS (use rediss…)", scheme)
	}
	if useTLS {
		// ServerName stays empty: go-redis dials with tls.DialWithDialer, which verifies
		// each node (seed, sentinel, discovered master) against its own host name.
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if len(cfg.CACert) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(cfg.CACert) {
				return nil, fmt.Errorf("%w: CA certificate: no PEM certificate found", ErrBadURL)
			}
			tc.RootCAs = pool
		}
		o.TLSConfig = tc
	}
	return o, nil
}

// NewClient returns a client for cfg's URL: standalone, Sentinel or Cluster, plain or TLS.
// It does not connect; errors name what is wrong with the URL.
func NewClient(cfg ClientConfig) (redis.UniversalClient, error) {
	o, err := ParseURL(cfg)
	if err != nil {
		return nil, err
	}
	o.Dialer = noHelloDialer(o)
	return redis.NewUniversalClient(o), nil
}

func hostPort(h string, sentinel bool) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", errors.New("empty host in host list")
	}
	port := "6379"
	if sentinel {
		port = "26379"
	}
	host, p, err := net.SplitHostPort(h)
	if err != nil {
		// No port (or a bare IPv6 literal).
		host = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		p = port
		if strings.ContainsAny(host, "[]/") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[") && net.ParseIP(host) == nil) {
			return "", fmt.Errorf("bad host %q", h)
		}
	}
	if host == "" {
		return "", fmt.Errorf("bad host %q: no name", h)
	}
	if strings.ContainsAny(host, " /\\@[]") {
		return "", fmt.Errorf("bad host %q", h)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n > 65535 {
		return "", fmt.Errorf("bad port in %q", h)
	}
	return net.JoinHostPort(host, p), nil
}

func parseSeconds(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

// redactURL hides passwords in raw for messages: the user info's (up to the last
// '@' anywhere, in case a password holds an unencoded '/', '?' or '#') and
// sentinel_password='s (up to the next '&').
func redactURL(raw string) string {
	prefix, rest := "", raw
	if scheme, r, ok := strings.Cut(raw, "://"); ok {
		prefix, rest = scheme+"://", r
	}
	if q := strings.Index(rest, "sentinel_password="); q >= 0 {
		q += len("sentinel_password=")
		e := strings.Index(rest[q:], "&")
		if e < 0 {
			e = len(rest) - q
		}
		rest = rest[:q] + "xxxxx" + rest[q+e:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if c := strings.Index(rest[:at], ":"); c >= 0 {
			rest = rest[:c] + ":xxxxx" + rest[at:]
		}
	}
	out := prefix + rest
	if len(out) > 200 {
		out = out[:200] + "…"
	}
	return strconv.Quote(out)
}
