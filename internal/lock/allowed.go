package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// AllowedHosts says which Redis endpoints may be dialled. It is shared by the
// controller (--redis-allowed-hosts) and lockwrap (LOCKEDCRON_REDIS_ALLOWED_HOSTS), so
// both refuse the same endpoints before any connection.
//
// Patterns, comma-separated:
//   - a host name (redis.infra.svc): matches that name as written in the URL, case-insensitive;
//   - a glob (*.redis.internal): '*' matches any characters, dots included, in the name as written;
//   - an IP (10.0.0.7) or CIDR (10.0.0.0/8, fd00::/8): matches IP literals in the URL, and
//     is the only way to allow a link-local address.
//
// Names are not resolved to check CIDRs: a name is allowed by name or glob. But every
// name is resolved once, before dialling, and one that resolves to a link-local
// address (169.254.0.0/16 — cloud metadata — or fe80::/10) is refused unless a CIDR
// allows that address; the connection then goes to the address checked, so a second
// lookup cannot swap it. Link-local endpoints are refused even with no list at all.
type AllowedHosts struct {
	names []string // lower case, no trailing dot; globs contain '*'
	nets  []*net.IPNet
}

// ErrNotAllowed is wrapped by every refusal of an endpoint.
var ErrNotAllowed = errors.New("lock: redis endpoint not allowed")

// ParseAllowedHosts parses a comma-separated list; an empty list (nil result) allows
// every endpoint but link-local ones.
func ParseAllowedHosts(list string) (*AllowedHosts, error) {
	var a AllowedHosts
	for _, p := range strings.Split(list, ",") {
		p = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(p), "."))
		switch {
		case p == "":
			continue
		case strings.Contains(p, "/"):
			_, n, err := net.ParseCIDR(p)
			if err != nil {
				return nil, fmt.Errorf("allowed hosts: %q is not a CIDR", p)
			}
			a.nets = append(a.nets, n)
		case net.ParseIP(strings.Trim(p, "[]")) != nil:
			ip := net.ParseIP(strings.Trim(p, "[]"))
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			a.nets = append(a.nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
		default:
			if _, err := path.Match(p, ""); err != nil || strings.ContainsAny(p, " :@\\") {
				return nil, fmt.Errorf("allowed hosts: %q is not a host name, glob, IP or CIDR", p)
			}
			a.names = append(a.names, p)
		}
	}
	if len(a.names) == 0 && len(a.nets) == 0 {
		return nil, nil
	}
	return &a, nil
}

// String lists the patterns (for logs and the pod's environment).
func (a *AllowedHosts) String() string {
	if a == nil {
		return ""
	}
	out := append([]string(nil), a.names...)
	for _, n := range a.nets {
		out = append(out, n.String())
	}
	return strings.Join(out, ",")
}

func (a *AllowedHosts) netAllows(ip net.IP) bool {
	if a == nil {
		return false
	}
	for _, n := range a.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// metadataAddrs are the clouds' instance metadata services outside the link-local ranges:
// AWS's over IPv6 and Alibaba Cloud's.
var metadataAddrs = []net.IP{net.ParseIP("fd00:ec2::254"), net.ParseIP("100.100.100.200")}

// linkLocal: 169.254.0.0/16 and fe80::/10 (cloud metadata lives there), and the metadata
// addresses elsewhere.
func linkLocal(ip net.IP) bool {
	if ip.IsLinkLocalUnicast() {
		return true
	}
	for _, m := range metadataAddrs {
		if m.Equal(ip) {
			return true
		}
	}
	return false
}

// CheckHost says whether host (a name or IP literal, without port) may be dialled,
// without resolving it.
func (a *AllowedHosts) CheckHost(host string) error {
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if i := strings.IndexByte(h, '%'); i >= 0 { // fe80::1%eth0
		h = h[:i]
	}
	if ip := net.ParseIP(h); ip != nil {
		if a.netAllows(ip) {
			return nil
		}
		if linkLocal(ip) {
			return fmt.Errorf("%w: %s is link-local or a cloud's metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200); allow it explicitly with a CIDR", ErrNotAllowed, host)
		}
		if a == nil {
			return nil
		}
		return fmt.Errorf("%w: %s is not in the allowed hosts", ErrNotAllowed, host)
	}
	if a == nil {
		return nil
	}
	for _, p := range a.names {
		if ok, _ := path.Match(p, h); ok {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not in the allowed hosts", ErrNotAllowed, host)
}

// CheckAddrs checks host:port addresses (as ParseURL returns them) without resolving.
func (a *AllowedHosts) CheckAddrs(addrs []string) error {
	for _, addr := range addrs {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		if err := a.CheckHost(host); err != nil {
			return err
		}
	}
	return nil
}

// Resolve checks addr (host:port) and, for a name, resolves it once: it returns the
// ip:port addresses to dial, in the resolver's order, refusing a name whose addresses include a link-local one that no
// CIDR allows.
// lookup is net.DefaultResolver.LookupIPAddr when nil.
func (a *AllowedHosts) Resolve(ctx context.Context, lookup func(context.Context, string) ([]net.IPAddr, error), addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := a.CheckHost(host); err != nil {
		return nil, err
	}
	if net.ParseIP(strings.Trim(host, "[]")) != nil {
		return []string{addr}, nil
	}
	if lookup == nil {
		lookup = net.DefaultResolver.LookupIPAddr
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip.IP.String(), port))
		if linkLocal(ip.IP) && !a.netAllows(ip.IP) {
			return nil, fmt.Errorf("%w: %s resolves to a link-local or cloud metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200); allow it explicitly with a CIDR", ErrNotAllowed, host)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return out, nil
}

// NewGuardedClient is NewClient that refuses endpoints a does not allow (a nil a:
// only link-local ones): the URL's hosts before the client is made, and every address
// go-redis dials later — Sentinel-reported masters and Cluster nodes included — in
// its dialer, which dials the address it checked.
func NewGuardedClient(cfg ClientConfig, a *AllowedHosts) (redis.UniversalClient, error) {
	o, err := guardedOptions(cfg, a, false)
	if err != nil {
		return nil, err
	}
	return newUniversal(o)
}

// guardedOptions parses cfg, refuses the URL's hosts a does not allow, and sets the
// dialer that checks every later address (and, with probe, that each server it dials
// answers PING as Redis does before anything of cfg's is sent to it: probeRedis).
func guardedOptions(cfg ClientConfig, a *AllowedHosts, probe bool) (*redis.UniversalOptions, error) {
	o, err := ParseURL(cfg)
	if err != nil {
		return nil, err
	}
	if err := a.CheckAddrs(o.Addrs); err != nil {
		return nil, err
	}
	o.Dialer = guardedDialer(o, a, probe)
	return o, nil
}

// guardedDialer is noHelloDialer with the check: TLS still verifies the host name as
// written, while TCP goes to the address that was checked.
func guardedDialer(o *redis.UniversalOptions, a *AllowedHosts, probe bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 5 * time.Minute}
	tc := o.TLSConfig
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		targets, err := a.Resolve(ctx, nil, addr)
		if err != nil {
			return nil, err
		}
		var c net.Conn
		for _, target := range targets {
			if c, err = d.DialContext(ctx, network, target); err == nil {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		if probe {
			return wrapProbedConn(ctx, c, tc, addr, o.DialTimeout)
		}
		return wrapConn(ctx, c, tc, addr)
	}
}
