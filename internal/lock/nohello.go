package lock

import (
	"bytes"
	"context"
	"crypto/tls"
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
	if tc != nil {
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tlsConn := tls.Client(c, cfg)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, err
		}
		c = tlsConn
	}
	return &noHelloConn{Conn: &guardConn{Conn: c}}, nil
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
