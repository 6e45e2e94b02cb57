package lock

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func TestParseURLForms(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want redis.UniversalOptions // only the fields compared below
		tls  bool
	}{
		{"redis://h", redis.UniversalOptions{Addrs: []string{"h:6379"}}, false},
		{"redis://u:p%40ss@h:7/3", redis.UniversalOptions{Addrs: []string{"h:7"}, Username: "u", Password: "p@ss", DB: 3}, false},
		{"redis://:secret@[::1]:6380", redis.UniversalOptions{Addrs: []string{"[::1]:6380"}, Password: "secret"}, false},
		// A zone is "%25" in a URL (RFC 6874), "%" to the dialler; a bare "%" is taken too.
		{"redis://[fe80::1%25eth0]:6380", redis.UniversalOptions{Addrs: []string{"[fe80::1%eth0]:6380"}}, false},
		{"redis+sentinel://[fe80::1%25br-lan],[fe80::2%eth1]:1?master=m", redis.UniversalOptions{
			Addrs: []string{"[fe80::1%br-lan]:26379", "[fe80::2%eth1]:1"}, MasterName: "m"}, false},
		{"rediss://h:6380?dial_timeout=2&read_timeout=500ms", redis.UniversalOptions{Addrs: []string{"h:6380"}}, true},
		{"redis+sentinel://s1,s2:26380/1?master=mymaster", redis.UniversalOptions{
			Addrs: []string{"s1:26379", "s2:26380"}, MasterName: "mymaster", DB: 1}, false},
		{"rediss+sentinel://u:p@s1:1?master_name=m&sentinel_password=sp&sentinel_username=su", redis.UniversalOptions{
			Addrs: []string{"s1:1"}, MasterName: "m", Username: "u", Password: "p", SentinelUsername: "su", SentinelPassword: "sp"}, true},
		{"redis+cluster://c1:7000,c2:7001,c3", redis.UniversalOptions{
			Addrs: []string{"c1:7000", "c2:7001", "c3:6379"}, IsClusterMode: true}, false},
		{"REDISS+CLUSTER://u:p@c1:7000", redis.UniversalOptions{Addrs: []string{"c1:7000"}, IsClusterMode: true, Username: "u", Password: "p"}, true},
		// An '@' in a query value is valid URL syntax, not a misplaced password.
		{"redis+sentinel://s1?master=m&sentinel_username=ops@corp", redis.UniversalOptions{
			Addrs: []string{"s1:26379"}, MasterName: "m", SentinelUsername: "ops@corp"}, false},
	} {
		o, err := ParseURL(ClientConfig{URL: tc.url})
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		got := redis.UniversalOptions{Addrs: o.Addrs, Username: o.Username, Password: o.Password, DB: o.DB,
			MasterName: o.MasterName, IsClusterMode: o.IsClusterMode, SentinelUsername: o.SentinelUsername,
			SentinelPassword: o.SentinelPassword}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.url, d)
		}
		if (o.TLSConfig != nil) != tc.tls {
			t.Errorf("%s: tls %v", tc.url, o.TLSConfig != nil)
		}
	}
	o, _ := ParseURL(ClientConfig{URL: "rediss://h?dial_timeout=2&read_timeout=500ms"})
	if o.DialTimeout != 2*time.Second || o.ReadTimeout != 500*time.Millisecond {
		t.Errorf("timeouts %v %v", o.DialTimeout, o.ReadTimeout)
	}
	o, _ = ParseURL(ClientConfig{URL: "redis://u:p@h", Username: "cu", Password: "cp"})
	if o.Username != "cu" || o.Password != "cp" {
		t.Errorf("config credentials do not win: %q %q", o.Username, o.Password)
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "empty"},
		{"localhost:6379", "no scheme"},
		{"http://h", "unknown scheme"},
		{"redis://", "no host"},
		{"redis://a,b", "several hosts"},
		{"redis://h:0", "bad port"},
		{"redis://h:http", "bad port"},
		{"redis://h/x", "database"},
		{"redis://h?master=m", "only for redis+sentinel"},
		{"redis+sentinel://s", "needs ?master"},
		{"redis+cluster://c/1", "no database"},
		{"redis://h?pool=9", `unknown option "pool"`},
		{"redis://h?dial_timeout=soon", "dial_timeout"},
		{"redis://u:topsecret@h:1/x", "database"},
		{"redis://h:1,,h2", "empty host"},
		{"redis://[fe80::1%25]:1", "a zone is for an IPv6 address"},
		{"redis://[fe80::1%25%zz]:1", "IPv6 zone that is not valid"},
		{"redis://[fe80::1%25eth%2F0]:1", "a zone is for an IPv6 address, an interface's name"},
		{"redis://[fe80::1%25%0A]:1", "a zone is for an IPv6 address, an interface's name"},
		{"redis://10.1.2.3%25eth0:1", "a zone is for an IPv6 address"},
		{"redis://h#frag", "fragment"},
		// A password holding an unencoded '/', '?' or '#' ends the authority early for
		// a URL parser; the message must neither echo it nor its pieces.
		{"redis://u:alpha#bravo@h", "percent-encode"},
		{"redis://:alpha/bravo@h:1/0", "percent-encode"},
		{"redis://u:alpha?bravo@h", "percent-encode"},
		{"redis+sentinel://u:alpha#bravo@s1,s2?master=m", "percent-encode"},
		{"redis://u:alpha%zzbravo@h", "percent-encode"},
		{"redis://u:alpha bravo@h", "percent-encode"},
		{"u:alphabravo@h:6379", "no scheme"},
		{"redis+sentinel://s?master=m&sentinel_password=alpha%zzbravo", "query is not valid"},
		{"redis+sentinel://s?master=m&sentinel_password=alpha@bravo&pool=1", "percent-encode"},
		{"redis+sentinel://s?master=m&sentinel_password=alpha#bravo", "fragment"},
		// An '@' after the hosts: what follows it is no host, and may be a password's end.
		{"redis://h:6379?password=alpha@bravo", "percent-encode"},
		{"redis://h/0#alpha@bravo", "percent-encode"},
		{"redis://h/alpha@bravo:6379", "percent-encode"},
		// Such an '@' may also be a valid one in a value: the reason is said as well as
		// the hint, what it would quote from the URL hidden ("bravo" may be a password's
		// first part, the user name "alpha" read as a host).
		{"redis+sentinel://s?master=m&sentinel_password=alpha@bravo&pool=1", "unknown option"},
		{"redis+sentinel://s/x?master=m&sentinel_password=alpha@bravo", "not a database number"},
		{"redis+sentinel://s/x?master=m&sentinel_password=alpha@bravo", "percent-encode"},
		{"redis://alpha:6379?bravo=charlie@h", "unknown option"},
		{"redis://alpha:6379?bravo=charlie@h", "percent-encode"},
		{"redis://alpha:6379?dial_timeout=bravo@h", "dial_timeout"},
		{"redis://alpha:6379?dial_timeout=bravo@h", "percent-encode"},
		{"redis://h?dial_timeout=1;read_timeout=2", "query is not valid"},
		// Passwords where this project's URLs have none, in forms other clients take:
		// StackExchange.Redis' connection string (Azure's portal gives it), a password
		// option (ioredis, redis-py), a misspelt or encoded sentinel_password.
		{"myredis.redis.cache.windows.net:6380,password=alphabravo,ssl=True,abortConnect=False", "no scheme"},
		{"myredis.redis.cache.windows.net:6380,password=alphabravo,ssl=True", "StackExchange"},
		{"rediss://myredis.redis.cache.windows.net:6380,password=alphabravo,ssl=True", `host 2 of 3: bad host: it holds "="`},
		{"redis+sentinel://s1,password=alphabravo?master=m", "host 2 of 2"},
		{"redis://h:6379?password=alphabravo", `unknown option "password"`},
		{"redis://h:6379?password=alphabravo", "redis://:PASSWORD@host"},
		{"redis://h:6379?db=0&password=alphabravo", `unknown option "`},
		{"redis+sentinel://s?master=m&Sentinel_Password=alphabravo", `unknown option "Sentinel_Password"`},
		// With a sentinel_password in the query, any other piece of it may be the rest of
		// the password (an unencoded "&" splits it): the reason is said, nothing quoted.
		{"redis+sentinel://s?master=m&sentinel%5Fpassword=alphabravo&pool=1", "unknown option"},
		{"redis+sentinel://s?master=m&sentinel_password=alphabravo&sentinel_password=charlie&pool=1", "unknown option"},
		{"redis+sentinel://s?master=m&sentinel_password=Tr0ub4dor&alphabravo=charlie", "unknown option"},
		{"redis+sentinel://s?master=m&sentinel_password=Tr0ub4dor&alphabravo=charlie", `"&" %26`},
		{"redis+sentinel://s?master=m&sentinel_password=Tr0ub4dor&dial_timeout=alphabravo", "dial_timeout"},
		{"redis+sentinel://s?master=m&sentinel_password=Tr0ub4dor&dial_timeout=alphabravo", `"&" %26`},
		{"redis+sentinel://s?sentinel_password=Tr0ub4dor&master=alphabravo&client_name=x&pool=1", "unknown option"},
		{"redis://alphabravo@h/x", "database"},
		{"redis://h/0?alphabravo", "unknown option"},
		// No "@": user:password reads as host:port; a scheme that is not one.
		{"redis://default:alphabravo", "bad port"},
		{"redis://:alphabravo", "no name"},
		{"REDIS_PASSWORD=alphabravo\nREDIS_URL=redis://h", "unknown scheme"},
		{"h:6380,password=alpha://bravo", "unknown scheme"},
		{"redis://h/alphabravo", "database number"},
		{"redis://h/alpha%zzbravo", "not valid in a URL"},
		// A CR or LF in what is sent as it is: lines of their own to a line-based service
		// (memcached, SMTP) the URL may name (review, session 45).
		{"redis://u:alpha%0D%0Abravo@h", "the password holds a control character"},
		{"redis://ops%0Ateam:charlie@h", "the user name holds a control character"},
		{"redis://h?client_name=ops%0Ateam", "client_name holds a control character"},
		{"redis+sentinel://s?master=ops%0D%0Ateam", "master holds a control character"},
		{"redis+sentinel://s?master=m&sentinel_password=alpha%0Abravo", "sentinel_password holds a control character"},
		{"redis+sentinel://s?master=m&sentinel_username=ops%09team", "sentinel_username holds a control character"},
	} {
		_, err := ParseURL(ClientConfig{URL: tc.url})
		if err == nil || !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.url, err, tc.want)
		}
		// The Reason (status, Events) says what is wrong without any of the URL.
		var uerr *URLError
		if !errors.As(err, &uerr) || uerr.Reason == "" {
			t.Errorf("%q: %v is no URLError with a reason", tc.url, err)
			continue
		}
		for _, secret := range []string{"topsecret", "alpha", "bravo", "%zz", "charlie"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: password piece %q in error %v", tc.url, secret, err)
			}
		}
		for _, piece := range []string{"topsecret", "alpha", "bravo", "%zz", "charlie", "pool", "soon", "myredis", "windows", "team", "http"} {
			if strings.Contains(uerr.Reason, piece) {
				t.Errorf("%q: %q in the reason %q", tc.url, piece, uerr.Reason)
			}
		}
	}
	if _, err := ParseURL(ClientConfig{URL: "redis://h", CACert: []byte("x")}); err == nil || !strings.Contains(err.Error(), "not TLS") {
		t.Errorf("CA with redis://: %v", err)
	}
	if _, err := ParseURL(ClientConfig{URL: "rediss://h", CACert: []byte("x")}); err == nil || !strings.Contains(err.Error(), "PEM") {
		t.Errorf("bad CA: %v", err)
	}
}

// TestParseURLRefusesTooManyHosts: a Secret's redis+cluster:// url of 60,000 seeds (a
// Secret holds up to 1 MiB) was taken whole; go-redis made a node of each seed it tried at
// the first ping (~4.4 KiB each, +265 MiB), past the manager's memory limit, and the leader
// then the standby died on it. The url is refused before anything is made of its hosts,
// saying where it came from, the bound and the fix, and quoting neither the password nor
// the thousands of hosts.
func TestParseURLRefusesTooManyHosts(t *testing.T) {
	hosts := func(n int) string {
		h := make([]string, n)
		for i := range h {
			h[i] = fmt.Sprintf("10.1.%d.%d:7000", i/256, i%256)
		}
		return strings.Join(h, ",")
	}
	for _, url := range []string{
		"redis+cluster://u:alphabravo@" + hosts(60000),
		"rediss+cluster://" + hosts(MaxURLHosts+1),
		"redis+sentinel://:alphabravo@" + hosts(MaxURLHosts+1) + "?master=m",
	} {
		_, err := ParseURL(ClientConfig{URL: url})
		if err == nil || !errors.Is(err, ErrBadURL) {
			t.Fatalf("%s…: %v, want refused", url[:40], err)
		}
		for _, want := range []string{"more than 64", "the Secret's url key", "a few seeds"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s…: %v, want %q", url[:40], err, want)
			}
		}
		if strings.Contains(err.Error(), "alphabravo") || len(err.Error()) > 1024 {
			t.Errorf("%s…: the error (%d bytes) quotes the password or the hosts: %.300s", url[:40], len(err.Error()), err)
		}
	}
	for _, url := range []string{"redis+cluster://" + hosts(MaxURLHosts), "redis+sentinel://" + hosts(MaxURLHosts) + "?master=m"} {
		if o, err := ParseURL(ClientConfig{URL: url}); err != nil || len(o.Addrs) != MaxURLHosts {
			t.Errorf("%s…: %v, want %d hosts taken", url[:40], err, MaxURLHosts)
		}
	}
}

// FuzzParseURL: never panics; an accepted URL has usable host:port addresses and a
// shape go-redis turns into the intended client; a rejected one wraps ErrBadURL and
// does not echo the URL's password.
func FuzzParseURL(f *testing.F) {
	for _, u := range []string{
		"redis://h", "rediss://u:p@h:1/2?dial_timeout=1s", "redis+sentinel://a,b:2/0?master=m",
		"redis+cluster://a:1,b:2,c:3", "redis://[::1]:1", "redis://u:p@h:99999", "redis://%zz@h",
		"redis://h?master=m", "redis://h/1/2", "redis:/h", "redis://@", "redis+cluster://,",
		"h:6380,password=secret1,ssl=True", "redis://h?password=secret1", "redis://h,password=secret1",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		o, err := ParseURL(ClientConfig{URL: raw})
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("%q: error %v does not wrap ErrBadURL", raw, err)
			}
			// The password as a URL parser reads it, and as a user who did not
			// percent-encode it meant it: up to the last '@' anywhere.
			if _, rest, ok := strings.Cut(raw, "://"); ok {
				if at := strings.LastIndex(rest, "@"); at >= 0 {
					if _, pw, ok := strings.Cut(rest[:at], ":"); ok && len(pw) >= 6 &&
						strings.Contains(err.Error(), pw) && !strings.Contains(strings.Replace(raw, pw, "", 1), pw) {
						t.Fatalf("%q: password in error %v", raw, err)
					}
				}
			}
			// Any option's value: only those of master, client_name, the user names and
			// the timeouts are shown.
			leaked := func(name, v string) {
				if len(v) >= 6 && !strings.Contains(name, "timeout") && !strings.Contains(name, "master") &&
					!strings.Contains(name, "name") && strings.Contains(err.Error(), v) && !strings.Contains(strings.Replace(raw, v, "", 1), v) {
					// Not when the message says it of itself (a hint's "ssl=True"): the
					// same input with another value in its place.
					_, other := ParseURL(ClientConfig{URL: strings.Replace(raw, v, strings.Repeat("\x7f", len(v)), 1)})
					if other == nil || !strings.Contains(other.Error(), v) {
						t.Fatalf("%q: the value of %s in error %v", raw, name, err)
					}
				}
			}
			// The authority: from "://" to the first '/', '?' or '#' after it.
			authFrom, authTo := -1, len(raw)
			if i := strings.Index(raw, "://"); i >= 0 {
				authFrom = i + 3
				if j := strings.IndexAny(raw[authFrom:], "/?#"); j >= 0 {
					authTo = authFrom + j
				}
			}
			for off := 0; off < len(raw); {
				n := strings.IndexAny(raw[off:], "?&;,#")
				if n < 0 {
					n = len(raw) - off
				}
				part := raw[off : off+n]
				eq := strings.Index(part, "=")
				if eq >= 0 {
					name, v := strings.ToLower(part[:eq]), part[eq+1:]
					if at := off + eq; authFrom >= 0 && at >= authFrom && at < authTo {
						// An '=' in the user info or the hosts: an '@' or '/' after it ends
						// what it could be a value of; the hosts after the user info's '@'
						// and a database number are shown on purpose ("A://=@00000",
						// "A://=/00000").
						if end := strings.IndexAny(v, "@/"); end >= 0 {
							v = v[:end]
						}
						leaked(name, v)
					} else {
						// An option's value, whole, and what follows each '@' in it: an
						// '@' after the hosts must not make its end read as a host.
						leaked(name, v)
						for rest := v; strings.Contains(rest, "@"); {
							_, rest, _ = strings.Cut(rest, "@")
							leaked(name, rest)
						}
					}
				}
				off += n + 1
			}
			return
		}
		if len(o.Addrs) == 0 {
			t.Fatalf("%q: no addresses", raw)
		}
		for _, a := range o.Addrs {
			if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" {
				t.Fatalf("%q: address %q", raw, a)
			}
		}
		if o.MasterName == "" && !o.IsClusterMode && len(o.Addrs) != 1 {
			t.Fatalf("%q: standalone with %d addresses", raw, len(o.Addrs))
		}
		if o.MasterName != "" && o.IsClusterMode {
			t.Fatalf("%q: both sentinel and cluster", raw)
		}
	})
}

// TestCredentialsWithLineBreaksAreRefused: a Secret's password or user name holding a CR
// or LF is refused before anything is sent, and the message quotes none of it: sent as it
// is in AUTH, its lines reached a line-based service (memcached's flush_all) that the
// tenant's URL named, from the manager's network, every probe.
func TestCredentialsWithLineBreaksAreRefused(t *testing.T) {
	for _, cfg := range []ClientConfig{
		{URL: "redis://h:1", Password: "alpha\r\nflush_all\r\n"},
		{URL: "redis://h:1", Username: "alpha\nbravo", Password: "charlie"},
	} {
		_, err := ParseURL(cfg)
		if err == nil || !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "holds a control character") {
			t.Errorf("%+v: %v, want refused", cfg, err)
			continue
		}
		for _, secret := range []string{"alpha", "bravo", "charlie", "flush_all"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%v shows %q", err, secret)
			}
		}
	}
	if _, err := ParseURL(ClientConfig{URL: "redis://h:1", Password: "pass word:with#all@kinds/of?signs"}); err != nil {
		t.Errorf("a password of printable characters: %v", err)
	}
}
