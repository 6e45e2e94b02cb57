package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// Plain tests (no apiserver) of what a LockedCronJob's author can learn from the
// LockBackendReady condition and its Events: fixed sentences, the Secret's name and at
// most the Redis host:port — never a Secret value nor bytes a server sent.
// go test ./internal/controller/ -run 'TestBackendMessage|TestPingProblem|TestBackendNotAllowed'

const secretMark = "s3cr3t-Pa55"

// checkSecret runs one backends.check against a Secret with the given data.
func checkSecret(t *testing.T, allowed string, data map[string]string) *backendError {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	b := newBackends(fake.NewClientBuilder().WithObjects(s).Build())
	a, err := lock.ParseAllowedHosts(allowed)
	if err != nil {
		t.Fatal(err)
	}
	b.allowed = a
	defer b.close()
	_, _, berr := b.check(context.Background(), "ns", "redis")
	if berr == nil {
		t.Fatalf("%v: no error", data)
	}
	return berr
}

func assertClean(t *testing.T, msg string, forbidden ...string) {
	t.Helper()
	for _, f := range append(forbidden, secretMark) {
		if strings.Contains(msg, f) {
			t.Errorf("message %q contains %q", msg, f)
		}
	}
}

func TestBackendMessageGarbageURL(t *testing.T) {
	for _, url := range []string{
		"garbage " + secretMark,
		"http://user:" + secretMark + "@host:6379",
		"redis://:" + secretMark + "@",
		"redis://" + secretMark + "@h:1/" + secretMark,
		"redis://h:1/0?client_name=x&" + secretMark + "=1",
		"redis://h:1/0?dial_timeout=" + secretMark,
		"redis+sentinel://:" + secretMark + "@h:1",
		strings.Repeat(secretMark, 100),
	} {
		berr := checkSecret(t, "", map[string]string{"url": url, "password": secretMark, "username": secretMark})
		if berr.reason != ReasonSecretInvalid {
			t.Errorf("%q: reason %s", url, berr.reason)
		}
		assertClean(t, berr.Error())
		if !strings.Contains(berr.Error(), "Secret ns/redis: url is refused: ") {
			t.Errorf("%q: message %q", url, berr.Error())
		}
	}
	berr := checkSecret(t, "", map[string]string{"url": "rediss://h:1", "ca.crt": "-----BEGIN " + secretMark})
	assertClean(t, berr.Error())
	if !strings.Contains(berr.Error(), "ca.crt holds no PEM certificate") {
		t.Errorf("bad CA: %q", berr.Error())
	}
	// A password with the newline a file or echo leaves names its key (review, session
	// 45: it read "url is not a valid Redis URL"), and shows none of it.
	for _, key := range []string{"password", "username"} {
		berr := checkSecret(t, "", map[string]string{"url": "redis://h:1", key: secretMark + "\n"})
		assertClean(t, berr.Error())
		if berr.reason != ReasonSecretInvalid || !strings.Contains(berr.Error(), `key "`+key+`" holds a control character`) {
			t.Errorf("%s with a newline: %s %q", key, berr.reason, berr.Error())
		}
	}
}

// TestBackendMessageSaysWhatToFix: every url lock refused read "url is not a valid Redis
// URL (redis://, …)", even a valid redis:// url with a ca.crt key (the fix: rediss://, or
// no ca.crt), a Sentinel url without ?master= or a Cluster url with a database number: the
// job never ran (SecretInvalid) and its author was told the wrong fix. The message says
// lock's reason, and still nothing of the Secret.
func TestBackendMessageSaysWhatToFix(t *testing.T) {
	ca := string(redistest.CAPEM(t))
	for _, c := range []struct {
		data map[string]string
		want string
	}{
		{map[string]string{"url": "redis://redis.infra:6379", "ca.crt": ca}, `a CA certificate was given (the Secret's ca.crt key, lockwrap's --redis-ca-file) but the scheme "redis" is not TLS: use rediss`},
		{map[string]string{"url": "redis+sentinel://:" + secretMark + "@s1:26379,s2:26379"}, "redis+sentinel:// needs ?master=<name>"},
		{map[string]string{"url": "redis+cluster://c1:7000/0"}, "cluster urls take no database number"},
		{map[string]string{"url": "redis+cluster://" + strings.Repeat("c1:7000,", 64) + "c1:7000"}, "65 hosts, more than 64"},
		{map[string]string{"url": "redis://h:1?" + secretMark + "=1"}, "unknown option … (the options: dial_timeout"},
		{map[string]string{"url": "redis://h:1?read_timeout=" + secretMark}, `read_timeout="…": want a Go duration`},
		{map[string]string{"url": secretMark + "://h:1"}, "unknown scheme … (want redis, rediss"},
	} {
		c.data["password"] = secretMark
		berr := checkSecret(t, "", c.data)
		assertClean(t, berr.Error())
		if berr.reason != ReasonSecretInvalid || !strings.Contains(berr.Error(), "Secret ns/redis: url is refused: "+c.want) {
			t.Errorf("%.60s: %s %q, want %q", c.data["url"], berr.reason, berr.Error(), c.want)
		}
	}
}

// An HTTP server (a real one, on loopback) answers PING with its own bytes.
func TestBackendMessageHTTPServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!DOCTYPE HTML> server-bytes-"+secretMark)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	berr := checkSecret(t, "", map[string]string{"url": "redis://:" + secretMark + "@" + addr})
	if berr.reason != ReasonRedisUnreachable {
		t.Errorf("reason %s", berr.reason)
	}
	// The server's address is in the message, and its port can hold "400": it is not what is looked for.
	withoutAddr := func(msg string) string { return strings.ReplaceAll(msg, addr, "ADDR") }
	assertClean(t, withoutAddr(berr.Error()), "DOCTYPE", "HTTP", "server-bytes", "400")
	if want := "Redis at " + addr + " (Secret ns/redis): "; !strings.HasPrefix(berr.Error(), want) {
		t.Errorf("message %q, want it to begin %q", berr.Error(), want)
	}

	// TLS to the plain HTTP server: its answer to the ClientHello is not shown.
	berr = checkSecret(t, "", map[string]string{"url": "rediss://" + addr})
	assertClean(t, withoutAddr(berr.Error()), "DOCTYPE", "HTTP", "server-bytes", "400", "record")
	if !strings.HasSuffix(berr.Error(), ": TLS handshake failed") {
		t.Errorf("TLS to a plain HTTP server: %q", berr.Error())
	}

	// And over TLS to a TLS server that speaks HTTP.
	tsrv := httptest.NewTLSServer(srv.Config.Handler)
	defer tsrv.Close()
	berr = checkSecret(t, "", map[string]string{"url": "rediss://" + tsrv.Listener.Addr().String()})
	assertClean(t, berr.Error(), "DOCTYPE", "HTTP", "server-bytes", "x509", "certificate signed")
	if !strings.HasSuffix(berr.Error(), "TLS handshake failed") {
		t.Errorf("TLS to an unknown CA: %q", berr.Error())
	}
}

func TestBackendMessageRealFailures(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	berr := checkSecret(t, "", map[string]string{"url": "redis://" + closedAddr})
	if want := "Redis at " + closedAddr + " (Secret ns/redis): connection refused"; berr.Error() != want {
		t.Errorf("closed port: %q, want %q", berr.Error(), want)
	}

	pw := redistest.Start(t)
	pw.Do("ACL", "SETUSER", "locker", "on", ">right", "~*", "+@all")
	berr = checkSecret(t, "", map[string]string{"url": pw.URL(), "username": "locker", "password": secretMark})
	if !strings.HasSuffix(berr.Error(), ": authentication failed") {
		t.Errorf("wrong password: %q", berr.Error())
	}
	assertClean(t, berr.Error(), "WRONGPASS", "invalid username-password")
}

func TestBackendNotAllowed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct{ allowed, url string }{
		{"redis.internal,10.0.0.0/8", "redis://" + ln.Addr().String()},
		{"", "redis://169.254.169.254:6379"},
		{"", "redis://[fe80::1]:6379"},
		{"*", "redis+cluster://10.0.0.1:7000,169.254.169.254:80"},
	} {
		berr := checkSecret(t, tc.allowed, map[string]string{"url": tc.url})
		if berr.reason != ReasonRedisNotAllowed || !strings.Contains(berr.Error(), "is not allowed by the operator") {
			t.Errorf("%s with %q: %s %q", tc.url, tc.allowed, berr.reason, berr.Error())
		}
		if !berr.blocking() {
			t.Errorf("%s: not blocking", tc.url)
		}
	}
	// A connection made, even one no goroutine had taken yet, waits in the listen queue.
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("a refused endpoint was dialled")
	}
}

// Each class of error gets its fixed sentence; unknown ones a generic one.
func TestPingProblem(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Err: &net.DNSError{Name: "x", Err: "no such host"}}, "host name not found"},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "connection refused"},
		{context.DeadlineExceeded, "timed out"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "TLS handshake failed"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "TLS handshake failed"},
		{redis.ErrClosed, "not a Redis server, or it failed (the error is not shown: it may quote the server)"},
		{io.EOF, "connection closed by the server (not a Redis server, or one that expects TLS?)"},
		{fmt.Errorf("redis: can't parse %q", "HTTP/1.1 400 "+secretMark), "not a Redis server, or it failed (the error is not shown: it may quote the server)"},
		{errors.New("redis: all sentinels specified in configuration are unreachable"), "no Sentinel answered with the master"},
		{fmt.Errorf("%w %q: %w", lock.ErrNoMaster, "m", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), "no Sentinel answered with the master"},
		// Why the first sentinel asked did not answer (a review found every sentinel
		// failure read alike, a wrong sentinel_password too).
		{&lock.NoMasterError{Master: "m", Errs: []error{fmt.Errorf("sentinel s:26379: %w", serverError("WRONGPASS invalid username-password pair"))}},
			"no Sentinel answered with the master (authentication failed)"},
		{&lock.NoMasterError{Master: "m", Errs: []error{fmt.Errorf("sentinel s:26379: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), errors.New("x")}},
			"no Sentinel answered with the master (connection refused)"},
		{fmt.Errorf("%w: 9000 nodes", lock.ErrProcessBudget), "refused: this manager's Redis Clusters together were named over 8192 nodes in 15 minutes (another Secret's Cluster may have used them up; see the manager's memory)"},
		{fmt.Errorf("dial: %w: the master's host is not a host name or address", lock.ErrTopology), "answered with a topology over lockedcron's bounds (a Sentinel's master that is no address, a Cluster of over 1000 nodes: not a Redis server, or a hostile one)"},
		{fmt.Errorf("%w: 169.254.169.254", lock.ErrNotAllowed), "not allowed by the operator (--redis-allowed-hosts; link-local addresses only when a CIDR allows them); nothing was dialled"},
	} {
		if got := pingProblem(tc.err); got != tc.want {
			t.Errorf("pingProblem(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Durability warnings quote the server; only the fixed vocabulary gets through.
func TestFixedWarning(t *testing.T) {
	for in, want := range map[string]string{
		"Redis has appendonly no: a restart loses the lock and the ledger (set appendonly yes)":            "Redis has appendonly no: a restart loses the lock and the ledger (set appendonly yes)",
		"Redis maxmemory-policy allkeys-lru can evict the lock or the ledger (set noeviction)":             "Redis maxmemory-policy allkeys-lru can evict the lock or the ledger (set noeviction)",
		"Redis maxmemory-policy " + secretMark + " can evict the lock or the ledger (set noeviction)":      "Redis maxmemory-policy (not noeviction) can evict the lock or the ledger (set noeviction)",
		"Redis 10.0.0.7:7000 has appendonly no: a restart loses the lock and the ledger":                   "Redis 10.0.0.7:7000 has appendonly no: a restart loses the lock and the ledger (set appendonly yes)",
		"Redis " + secretMark + ".example:7000 has appendonly no: …":                                       "A Redis Cluster node has appendonly no: a restart loses the lock and the ledger (set appendonly yes)",
		"Redis " + secretMark + " x:1 has appendonly no":                                                   "Redis reported a durability problem (not shown: it may quote the server)",
		"Redis refused INFO to this user: durability unknown (allow +info)":                                "Redis refused INFO to this user: durability unknown (allow +info)",
		"something else " + secretMark:                                                                     "Redis reported a durability problem (not shown: it may quote the server)",
		"Redis [::1]:7000 maxmemory-policy volatile-ttl can evict the lock or the ledger (set noeviction)": "Redis [::1]:7000 maxmemory-policy volatile-ttl can evict the lock or the ledger (set noeviction)",
	} {
		if got := fixedWarning(in); got != want {
			t.Errorf("fixedWarning(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

// serverError is an error reply of a Redis server, as go-redis types them.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}
