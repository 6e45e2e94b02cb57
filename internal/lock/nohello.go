package lock

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis v9 sends HELLO first on every new connection, whatever the options say — a
// round trip before lockwrap's first script, on a path (one short-lived process per run)
// that opens exactly one connection. noHelloDialer answers that HELLO locally with an
// error reply, which go-redis takes as "a server without HELLO": it stays on RESP2 (our
// Protocol anyway) and sends AUTH only when there are credentials. Every other byte goes
// to the server untouched.
func noHelloDialer(o *redis.UniversalOptions) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 5 * time.Minute}
	tc := o.TLSConfig
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrapConn(ctx, c, tc, addr)
	}
}

// wrapConn finishes a dialled connection: TLS when tc is set (each node verified against
// its own host name, as go-redis's own dialer does), the replies' bounds (guardConn),
// then the HELLO answering.
func wrapConn(ctx context.Context, c net.Conn, tc *tls.Config, addr string) (net.Conn, error) {
	c, err := startTLS(ctx, c, tc, addr)
	if err != nil {
		return nil, err
	}
	return &noHelloConn{Conn: &guardConn{Conn: c}}, nil
}

// startTLS returns c over TLS when tc is set (the host name verified as addr names it),
// else c; c is closed when the handshake fails.
func startTLS(ctx context.Context, c net.Conn, tc *tls.Config, addr string) (net.Conn, error) {
	if tc == nil {
		return c, nil
	}
	cfg := tc.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tlsConn := tls.Client(c, cfg)
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tlsConn, nil
}

// ErrNotRedis: a server did not answer PING as Redis does, so nothing a tenant chose was
// sent to it (probeRedis).
var ErrNotRedis = errors.New("the server did not answer PING as Redis does")

// ErrDenied: Redis refused the connection (-DENIED): it runs in protected mode, which
// answers only clients on its own host until it has a password or is told otherwise.
var ErrDenied = errors.New("Redis refused the connection (-DENIED: protected mode, which admits only clients on its own host): give it a password (requirepass, or an ACL user) or set protected-mode no, and bind it to an address the pods reach")

// pingCmd is PING as RESP: three lines no other service acts on.
var pingCmd = []byte("*1\r\n$4\r\nPING\r\n")

// wrapProbedConn is wrapConn for a server a tenant named: once TLS (if any) is up, the
// server must answer PING as Redis does (probeRedis) before go-redis sends anything.
func wrapProbedConn(ctx context.Context, c net.Conn, tc *tls.Config, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := startTLS(ctx, c, tc, addr)
	if err != nil {
		return nil, err
	}
	if err := probeRedis(ctx, c, timeout); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return &noHelloConn{Conn: &guardConn{Conn: c}}, nil
}

// probeRedis sends PING and reads one line back: +PONG, or an error reply (-NOAUTH when
// the server wants credentials first, -NOPERM, -LOADING …: an upper-case code). go-redis
// sends AUTH as RESP, one line per argument, so a tenant's url naming a line-based service
// (memcached, SMTP, POP3, a debug port) the manager can reach would otherwise have the
// manager send that service the user name and password as commands of their own. The
// greeting such a service sends first, or its answer to three lines it does not know, is
// not one of these, and nothing else is sent.
func probeRedis(ctx context.Context, c net.Conn, timeout time.Duration) error {
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && (timeout <= 0 || d.Before(dl)) {
		dl = d
	}
	if err := c.SetDeadline(dl); err != nil {
		return err
	}
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write(pingCmd); err != nil {
		return err
	}
	// One byte at a time up to CRLF, so that nothing after the line is read away from
	// go-redis. A Redis reply to PING is short, but for the protected mode's refusal
	// (-DENIED, a kilobyte of advice).
	var line []byte
	b := make([]byte, 1)
	for len(line) < 4096 {
		if _, err := c.Read(b); err != nil {
			return err
		}
		line = append(line, b[0])
		if bytes.HasSuffix(line, []byte("\r\n")) {
			l := line[:len(line)-2]
			switch {
			case bytes.HasPrefix(l, []byte("-DENIED ")):
				return ErrDenied
			case isPingReply(l):
				return nil
			}
			break
		}
	}
	shown := line
	if len(shown) > 16 {
		shown = shown[:16]
	}
	return fmt.Errorf("%w (its answer began %q)", ErrNotRedis, shown)
}

// isPingReply: +PONG, or an error reply whose code is upper-case letters.
func isPingReply(l []byte) bool {
	if string(l) == "+PONG" {
		return true
	}
	if len(l) < 2 || l[0] != '-' {
		return false
	}
	code, _, _ := bytes.Cut(l[1:], []byte(" "))
	for _, r := range code {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return len(code) > 0
}

// noHelloConn swallows a HELLO sent as the connection's first command and replies to it
// with an error. go-redis uses a connection from one goroutine at a time.
type noHelloConn struct {
	net.Conn
	wrote   bool
	pending []byte
}

var helloCmd = []byte("\r\n$5\r\nhello\r\n")

func (c *noHelloConn) Write(b []byte) (int, error) {
	if !c.wrote {
		c.wrote = true
		if i := bytes.IndexByte(b, '\r'); len(b) > 0 && b[0] == '*' && i > 0 &&
			len(b) >= i+len(helloCmd) && bytes.EqualFold(b[i:i+len(helloCmd)], helloCmd) {
			c.pending = []byte("-NOHELLO handshake skipped by lockedcron\r\n")
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

func (c *noHelloConn) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
