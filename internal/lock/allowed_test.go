package lock

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

func TestParseAllowedHosts(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		" , ":                                "",
		"Redis.Infra.svc., *.redis.internal": "redis.infra.svc,*.redis.internal",
		"10.0.0.0/8,10.1.2.3,fd00::/8,[::1]": "10.0.0.0/8,10.1.2.3/32,fd00::/8,::1/128",
	} {
		a, err := ParseAllowedHosts(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := a.String(); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "a b", "host:6379", "user@h", "[a-"} {
		if _, err := ParseAllowedHosts(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestAllowedHostsCheckHost(t *testing.T) {
	list := "redis.infra.svc,*.redis.internal,10.0.0.0/8,169.254.10.0/24"
	a, err := ParseAllowedHosts(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		list, host string
		ok         bool
	}{
		{list, "redis.infra.svc", true},
		{list, "REDIS.infra.svc.", true},
		{list, "a.redis.internal", true},
		{list, "a.b.redis.internal", true},
		{list, "redis.internal", false}, // the glob needs something before the dot
		{list, "redis.infra.svc.evil.com", false},
		{list, "10.2.3.4", true},
		{list, "11.0.0.1", false},
		{list, "169.254.169.254", false}, // metadata, not in the allowed /24
		{list, "169.254.10.7", true},     // explicitly allowed
		{list, "[fe80::1]", false},
		{list, "fe80::1%eth0", false},
		{list, "localhost", false},
		// No list: everything but link-local.
		{"", "anything.example", true},
		{"", "192.168.1.1", true},
		{"", "169.254.169.254", false},
		{"", "fe80::abcd", false},
		{"", "[fe80::abcd]", false},
		// A glob does not allow a link-local IP literal; only a CIDR does.
		{"*", "169.254.169.254", false},
		{"*", "some.host", true},
		{"169.254.0.0/16", "169.254.169.254", true},
		// Clouds' metadata services outside the link-local ranges (review, session 45).
		{"", "fd00:ec2::254", false},
		{"", "[fd00:ec2::254]", false},
		{"", "100.100.100.200", false},
		{"*", "100.100.100.200", false},
		{"", "fd00:ec2::253", true},
		{"", "100.100.100.201", true},
		{"100.100.100.0/24", "100.100.100.200", true},
	} {
		aa := a
		if tc.list != list {
			if aa, err = ParseAllowedHosts(tc.list); err != nil {
				t.Fatal(err)
			}
		}
		err := aa.CheckHost(tc.host)
		if (err == nil) != tc.ok {
			t.Errorf("allowed %q, host %q: err %v, want ok=%t", tc.list, tc.host, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%q: %v does not wrap ErrNotAllowed", tc.host, err)
		}
	}
}

// A name resolving to a link-local address is refused.
func TestAllowedHostsResolveLinkLocal(t *testing.T) {
	dns := map[string][]net.IPAddr{
		"meta.example": {{IP: net.ParseIP("10.1.1.2")}, {IP: net.ParseIP("169.254.169.254")}},
		"ok.example":   {{IP: net.ParseIP("10.1.1.1")}},
	}
	r := func(_ context.Context, host string) ([]net.IPAddr, error) {
		if ips, ok := dns[host]; ok {
			return ips, nil
		}
		return nil, &net.DNSError{Name: host, Err: "not found", IsNotFound: true}
	}
	for _, tc := range []struct {
		list, addr, want string
	}{
		{"", "meta.example:6379", "link-local"},
		{"*.example", "meta.example:6379", "link-local"},
		{"*.example,169.254.169.254", "meta.example:6379", "10.1.1.2:6379,169.254.169.254:6379"},
		{"", "ok.example:6379", "10.1.1.1:6379"},
		{"10.0.0.0/8", "ok.example:6379", "not in the allowed hosts"}, // names are not matched against CIDRs
		{"", "10.9.9.9:1", "10.9.9.9:1"},
	} {
		a, err := ParseAllowedHosts(tc.list)
		if err != nil {
			t.Fatal(err)
		}
		addrs, err := a.Resolve(context.Background(), r, tc.addr)
		got := strings.Join(addrs, ",")
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q %s: got %q, want %q", tc.list, tc.addr, got, tc.want)
		}
	}
}

// Real: a refused endpoint is never dialled; an allowed one works.
func TestNewGuardedClientRefusesBeforeConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, _ := ParseAllowedHosts("redis.internal,10.0.0.0/8")
	if _, err := NewGuardedClient(ClientConfig{URL: "redis://" + ln.Addr().String()}, a); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("got %v, want ErrNotAllowed", err)
	}
	// A connection made, even one no goroutine had taken yet, waits in the listen queue.
	if c, ok := acceptWithin(t, ln, 200*time.Millisecond); ok {
		c.Close()
		t.Fatal("a connection reached the refused endpoint")
	}

	// Allowed, by CIDR for the IP literal and by name for localhost (resolved in the
	// dialer, which then dials the address it checked).
	srv := redistest.Start(t)
	_, port, _ := net.SplitHostPort(srv.Addr())
	for list, url := range map[string]string{
		"127.0.0.0/8": "redis://" + srv.Addr(),
		"localhost":   "redis://localhost:" + port,
	} {
		a, _ = ParseAllowedHosts(list)
		c, err := NewGuardedClient(ClientConfig{URL: url}, a)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("%s via %s: %v", url, list, err)
		}
		cancel()
		c.Close()
	}
	a, _ = ParseAllowedHosts("127.0.0.1")
	if _, err := NewGuardedClient(ClientConfig{URL: "redis://localhost:" + port}, a); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("localhost with only 127.0.0.1 allowed: %v, want ErrNotAllowed (names are not matched against IPs)", err)
	}
}

// acceptWithin accepts a connection made to ln, if one is made within d (or was made
// before: it waits in the listen queue).
func acceptWithin(t *testing.T, ln net.Listener, d time.Duration) (net.Conn, bool) {
	t.Helper()
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	return c, err == nil
}
