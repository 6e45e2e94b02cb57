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
	"unicode"

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

// URLError is the error of a URL (or a CA) ParseURL refuses. Its Error() quotes the URL,
// password redacted; Reason is what is wrong and how to fix it in this package's own words
// and numbers, quoting nothing of the URL or the Secret (no host, no option's value or
// unknown name), for messages a tenant's credentials must never reach (status, Events).
type URLError struct {
	URL    string // redacted (redactURL); "" when the URL is not the problem
	Reason string
	why    string // Reason with the pieces of the URL that are safe to quote
}

func (e *URLError) Error() string {
	if e.URL == "" {
		return fmt.Sprintf("%v: %s", ErrBadURL, e.why)
	}
	return fmt.Sprintf("%v %s: %s", ErrBadURL, e.URL, e.why)
}

func (e *URLError) Unwrap() error { return ErrBadURL }

// Options for NewClient's connections when the URL does not say.
const (
	defaultDialTimeout  = 5 * time.Second
	defaultReadTimeout  = 3 * time.Second
	defaultWriteTimeout = 3 * time.Second
)

// MaxURLHosts bounds the hosts of a URL: go-redis makes a node (a client with its pool,
// about 4.4 KiB) of each Cluster seed it tries, and tries them all until one answers; a
// Secret of 60,000 seeds took the manager past its memory limit on the first ping. A
// Cluster needs one node that answers (it names the others), a Sentinel deployment has 3
// or 5 sentinels (the manager asks 16 at most): 64 leaves room for seeds across zones and
// failure domains, and is at most ~280 KiB of nodes per client.
const MaxURLHosts = 64

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
	// '@' meant to close it lands after it. Any piece of such a URL may then be a piece
	// of the password: the reason is said without what it would quote (but its
	// safeText), and the hint with it.
	misplacedAt := strings.LastIndex(tail, "@") >= 0
	// So may any piece of the query once it holds a sentinel_password: an unencoded "&"
	// in it starts what reads as another option.
	secretQuery := false
	// bad's format is this package's text; of its arguments, the Reason keeps the numbers
	// and safeText only.
	bad := func(format string, a ...any) error {
		fixed := make([]any, len(a))
		for i, x := range a {
			fixed[i] = x
			switch x.(type) {
			case int, safeText:
			default:
				fixed[i] = "…"
				if misplacedAt || secretQuery {
					if _, ok := x.(urlPiece); !ok {
						a[i] = "xxxxx"
					}
				}
			}
		}
		why, reason := fmt.Sprintf(format, a...), fmt.Sprintf(format, fixed...)
		hint := ""
		if misplacedAt {
			hint += `; it has an "@" after "/", "?" or "#": if the password holds one of these, ` +
				`percent-encode it ("/" %2F, "?" %3F, "#" %23, "@" %40)`
		}
		if secretQuery {
			hint += `; if the sentinel password holds "&", "+", "#" or "%", percent-encode it ("&" %26, "+" %2B, "#" %23, "%" %25)`
		}
		return &URLError{URL: redactURL(cfg.URL), Reason: reason + hint, why: why + hint}
	}
	if raw == "" {
		return nil, bad("empty")
	}
	if !hasScheme {
		if strings.Contains(strings.ToLower(raw), "password=") {
			return nil, bad("no scheme: this looks like a StackExchange.Redis connection string (host:port,password=…,ssl=True); " +
				"write it as rediss://:PASSWORD@host:port (redis:// without TLS), the password percent-encoded, or put the password in the Secret's password key")
		}
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
		return nil, bad("unknown scheme %s (want redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster)", urlPiece(shownScheme(scheme)))
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
			return nil, bad("%s", safeText(`the user name or password is not valid in a URL: percent-encode its special characters `+
				`(" " %20, "%" %25, "@" %40, "/" %2F, "?" %3F, "#" %23, and ":" %3A in a user name)`))
		}
	}
	u, err := url.Parse(ph + "placeholder" + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		// Not quoted: net/url's errors quote the bad escape they found.
		return nil, bad("%s", safeText(`the path or the query is not valid in a URL: percent-encode "%" as %25 and spaces as %20`))
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
	// Counted before anything is made of them: each host becomes a node, or a sentinel to
	// ask, with its own allocations.
	if n := strings.Count(hostlist, ",") + 1; n > MaxURLHosts {
		return nil, bad("%d hosts, more than %d: list at most %d in the url (the Secret's url key, lockwrap's --redis-url); "+
			"a Cluster needs a few seeds (any node that answers names the rest), a Sentinel url its sentinels", n, MaxURLHosts, MaxURLHosts)
	}
	hosts := strings.Split(hostlist, ",")
	for i, h := range hosts {
		addr, why := hostPort(h, sentinel)
		if why != "" {
			return nil, bad("host %d of %d: %s", i+1, len(hosts), why)
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
			return nil, bad("the path is not a database number (redis://host:6379/0)")
		}
		o.DB = db
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		// Not quoted: the bad escape may sit in sentinel_password=.
		return nil, bad("%s", safeText(`the query is not valid: percent-encode "%" as %25 and ";" as %3B in its values`))
	}
	_, secretQuery = query["sentinel_password"]
	for name, vals := range query {
		v := vals[len(vals)-1]
		switch name {
		case "master", "master_name":
			if !sentinel {
				return nil, bad("%s= is only for redis+sentinel://", safeText(name))
			}
			o.MasterName = v
		case "sentinel_username", "sentinel_password":
			if !sentinel {
				return nil, bad("%s= is only for redis+sentinel://", safeText(name))
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
				return nil, bad("%s=%q: %s", safeText(name), v, safeText("want a Go duration (500ms, 2s) or a number of seconds"))
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
			shownName := "(its name not shown: a bare word, or not an option's name)"
			if v != "" && optionName(name) {
				shownName = strconv.Quote(name)
			}
			if strings.Contains(strings.ToLower(name), "password") {
				return nil, bad("unknown option %s: put the password in the user info (redis://:PASSWORD@host, percent-encoded) "+
					"or in the Secret's password key", shownName)
			}
			return nil, bad("unknown option %s (the options: dial_timeout, read_timeout, write_timeout, client_name; "+
				"for redis+sentinel:// master, sentinel_username, sentinel_password)", shownName)
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
	// Credentials and names go to the server as they are, and a server is whoever the URL
	// names: a CR or LF in them would be lines of their own to a line-based service
	// (memcached, SMTP) a tenant's URL points the manager at. No Redis needs them. The
	// value is not quoted: it may be the password.
	for _, f := range []struct {
		name safeText
		v    string
	}{{"the user name", o.Username}, {"the password", o.Password}, {"sentinel_username", o.SentinelUsername},
		{"sentinel_password", o.SentinelPassword}, {"client_name", o.ClientName}, {"master", o.MasterName}} {
		if strings.IndexFunc(f.v, unicode.IsControl) >= 0 {
			return nil, bad("%s holds a control character (CR, LF, tab …), which no Redis credential or name has: fix it in the URL or the Secret", f.name)
		}
	}
	if len(cfg.CACert) > 0 && !useTLS {
		return nil, bad("a CA certificate was given (the Secret's ca.crt key, lockwrap's --redis-ca-file) but the scheme %q is not TLS: "+
			"use rediss… or give no CA", safeText(scheme))
	}
	if useTLS {
		// ServerName stays empty: go-redis dials with tls.DialWithDialer, which verifies
		// each node (seed, sentinel, discovered master) against its own host name.
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if len(cfg.CACert) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(cfg.CACert) {
				const why = "CA certificate: no PEM certificate found"
				return nil, &URLError{Reason: why, why: why}
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
	return newUniversal(o)
}

// hostPort is h as an address to dial, the default port added, or why it is not one
// (bad). bad is safeText, never a piece of h: a host list may hold a password put where a
// host goes (StackExchange.Redis' "host:port,password=…").
func hostPort(h string, sentinel bool) (addr string, bad safeText) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", "empty host in host list"
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
			return "", "bad host: want host, host:port or [IPv6]:port"
		}
	}
	if host == "" {
		return "", "bad host: no name"
	}
	if addr, zone, ok := strings.Cut(host, "%"); ok && net.ParseIP(addr) != nil {
		// An IPv6 zone is "%25<zone>" in a URL (RFC 6874, as net/url reads it), "%<zone>"
		// to the dialler; a bare "%<zone>" is taken as it is.
		if z, encoded := strings.CutPrefix(zone, "25"); encoded {
			var err error
			if zone, err = url.PathUnescape(z); err != nil {
				return "", `bad host: an IPv6 zone that is not valid percent-encoding ([fe80::1%25eth0])`
			}
		}
		if zone == "" || !strings.Contains(addr, ":") || strings.Trim(zone, alnum+"-._") != "" {
			return "", "bad host: a zone is for an IPv6 address, an interface's name or number ([fe80::1%25eth0])"
		}
		host = addr + "%" + zone
	}
	if strings.Contains(host, "=") {
		return "", `bad host: it holds "=" (options go after "?"; a password in the user info, redis://:PASSWORD@host, or the Secret's password key)`
	}
	if !hostName(host) {
		return "", "bad host: want a DNS name (letters, digits, '-', '.', '_') or an IP address"
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n > 65535 {
		return "", "bad port: want 1 to 65535"
	}
	return net.JoinHostPort(host, p), ""
}

// hostName: host is an IP address (an IPv6 one with a zone too) or made of what DNS names
// and /etc/hosts names are made of.
func hostName(host string) bool {
	if addr, zone, _ := strings.Cut(host, "%"); net.ParseIP(addr) != nil {
		return !strings.ContainsAny(zone, " /\\@[]=")
	}
	return strings.Trim(host, alnum+"-._") == ""
}

func parseSeconds(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

// redactURL is raw as messages show it: only what is not a password. The scheme, a user
// name, the hosts that are host names, a database number, the query's option names, and
// the values of the options that hold none (master, client_name, sentinel_username, the
// timeouts); each other piece is xxxxx. A string without "://", or with something before
// it that is not a scheme, is not shown at all: it may be a connection string of another
// form (StackExchange.Redis': "host:port,password=…").
func redactURL(raw string) string {
	raw = strings.TrimSpace(raw)
	scheme, rest, ok := strings.Cut(raw, "://")
	if raw == "" || !ok || shownScheme(scheme) != scheme {
		return fmt.Sprintf("(%d characters, not shown)", len(raw))
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	// The user info ends at the last '@' anywhere, in case a password holds an
	// unencoded '/', '?' or '#'.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if end := strings.IndexAny(rest, "/?#"); end >= 0 && end < at {
			// That '@' stands after the hosts: what follows it is not a host for sure,
			// and may be the end of a password (?password=alpha@bravo), so none of it
			// is shown (the message says to percent-encode).
			return strconv.Quote(scheme + "://xxxxx")
		}
		if user, _, ok := strings.Cut(rest[:at], ":"); ok {
			b.WriteString(shown(user, alnum+"-._%") + ":")
		}
		b.WriteString("xxxxx@")
		rest = rest[at+1:]
	}
	rest, fragment, hasFragment := strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	hostlist, path, hasPath := strings.Cut(rest, "/")
	for i, h := range strings.Split(hostlist, ",") {
		if i > 0 {
			b.WriteString(",")
		}
		// Only a host as a host: without its "@", "user:password" reads as host:port.
		if _, why := hostPort(h, false); why != "" {
			h = "xxxxx"
		}
		b.WriteString(h)
	}
	if hasPath {
		b.WriteString("/" + shown(path, "0123456789")) // a database number
	}
	if hasQuery {
		b.WriteString("?")
		secret := false // a sentinel_password came: what follows may be the rest of it
		for i, part := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteString("&")
			}
			if secret {
				b.WriteString("xxxxx")
				continue
			}
			name, v, hasValue := strings.Cut(part, "=")
			if !hasValue {
				b.WriteString("xxxxx") // a bare word: not an option of ours
				continue
			}
			dn, err := url.QueryUnescape(name)
			if err != nil || !optionName(dn) {
				b.WriteString("xxxxx=xxxxx")
				continue
			}
			switch dn {
			case "master", "master_name", "client_name", "sentinel_username", "dial_timeout", "read_timeout", "write_timeout":
				b.WriteString(name + "=" + shown(v, alnum+"-._%+"))
			default:
				b.WriteString(name + "=xxxxx")
				secret = secret || dn == "sentinel_password"
			}
		}
	}
	if hasFragment && fragment != "" {
		b.WriteString("#xxxxx")
	}
	out := b.String()
	if len(out) > 200 {
		out = out[:200] + "…"
	}
	return strconv.Quote(out)
}

// shownScheme is a URL's scheme as messages show it: what came before "://" is only
// shown when it looks like a scheme (a .env line, a JSON blob or a StackExchange.Redis
// string holding "://" in its password do not).
func shownScheme(scheme string) string {
	if len(scheme) == 0 || len(scheme) > 20 || !unicode.IsLetter(rune(scheme[0])) {
		return "xxxxx"
	}
	return shown(scheme, alnum+"+.-")
}

// alnum: the ASCII letters and digits, of which hosts, schemes, user and option names
// are made (with a few more characters each).
const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// safeText is text that bad shows even when any piece of the URL may be a password's, and
// in the Reason: this package's own, or a piece of the URL checked to be one of a few
// known names.
type safeText string

// urlPiece is a piece of the URL that bad shows in the error even when any piece of the
// URL may be a password's (it was checked to be harmless there: shownScheme), never in
// the Reason.
type urlPiece string

// shown is s if it is made of allowed's characters only, else xxxxx.
func shown(s, allowed string) string {
	if strings.Trim(s, allowed) != "" {
		return "xxxxx"
	}
	return s
}

// optionName: name looks like an option's name (as go-redis' and other clients' are),
// not like a password put where an option goes.
func optionName(name string) bool {
	return name != "" && len(name) <= 40 && strings.Trim(name, alnum+"_-.") == ""
}
