package lock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

// lineService is a line-based service that is not Redis (memcached, POP3, SMTP, an HTTP
// port): it may greet first, answers each line with answer, and keeps what it was sent.
type lineService struct {
	mu   sync.Mutex
	got  strings.Builder
	addr string
}

func startLineService(t *testing.T, greeting, answer string) *lineService {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s := &lineService{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if greeting != "" {
					_, _ = c.Write([]byte(greeting))
				}
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					s.mu.Lock()
					s.got.WriteString(line)
					s.mu.Unlock()
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(answer)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *lineService) received() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

// TestTenantClientSendsNothingOfTheURLToAServiceThatIsNotRedis (helper-108): go-redis
// sends AUTH as RESP, one line per argument, so a tenant's url naming a line-based
// service the manager can reach had the manager send it the url's user name and
// password as lines of their own: `flush_all` to a memcached. The manager's client now
// sends PING first, and nothing more unless the answer is Redis's.
func TestTenantClientSendsNothingOfTheURLToAServiceThatIsNotRedis(t *testing.T) {
	for _, svc := range []struct{ name, greeting, answer string }{
		{"memcached", "", "ERROR\r\n"},
		{"POP3 (greets +OK, answers -ERR)", "+OK POP3 server ready\r\n", "-ERR unknown command\r\n"},
		{"SMTP", "220 mail.example ESMTP\r\n", "500 5.5.2 Error: bad syntax\r\n"},
		{"HTTP", "", "HTTP/1.1 400 Bad Request\r\n\r\n"},
		{"silent after a greeting line", "* OK IMAP4rev1\r\n", ""},
	} {
		t.Run(svc.name, func(t *testing.T) {
			s := startLineService(t, svc.greeting, svc.answer)
			url := "redis://flush_all:delete%20sessions@" + s.addr + "/?client_name=shutdown&dial_timeout=1s&read_timeout=1s"
			c, err := NewTenantClient(ClientConfig{URL: url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = c.Ping(ctx).Err()
			if !errors.Is(err, ErrNotRedis) {
				t.Errorf("ping: %v, want ErrNotRedis", err)
			}
			got := s.received()
			for _, secret := range []string{"flush_all", "delete sessions", "shutdown", "auth", "AUTH"} {
				if strings.Contains(got, secret) {
					t.Errorf("the service was sent %q: %q", secret, got)
				}
			}
			if !strings.Contains(got, "PING") {
				t.Errorf("the service was not asked PING: %q", got)
			}
		})
	}

	// Redis in protected mode refuses with a kilobyte of advice: said as such, not as a
	// server that is not Redis (helper-109).
	denied := startLineService(t, "", "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. "+strings.Repeat("In this mode connections are only accepted from the loopback interface. ", 14)+"\r\n")
	dc, err := NewTenantClient(ClientConfig{URL: "redis://u:p@" + denied.addr + "/?dial_timeout=1s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if err := dc.Ping(context.Background()).Err(); !errors.Is(err, ErrDenied) {
		t.Errorf("protected mode: %v, want ErrDenied", err)
	}
	if strings.Contains(denied.received(), "auth") {
		t.Errorf("a server that refused was sent AUTH: %q", denied.received())
	}

	// Redis answers PING with +PONG, -NOAUTH when it wants credentials first, -NOPERM
	// when its default user may not PING: then the client authenticates and works as
	// before.
	plain := redistest.Start(t)
	limited := redistest.Start(t)
	ctx := context.Background()
	for _, acl := range [][]any{{"ACL", "SETUSER", "locker", "on", ">pw", "~*", "+eval"}, {"ACL", "SETUSER", "default", "-ping"}} {
		if err := limited.Client().Do(ctx, acl...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := limited.Client().Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("the default user's PING: %v, want NOPERM", err)
	}
	if err := plain.Client().ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	for name, url := range map[string]string{
		"NOAUTH (requirepass)": "redis://:s3cret@" + plain.Addr(),
		"NOPERM":               "redis://locker:pw@" + limited.Addr(),
	} {
		c, err := NewTenantClient(ClientConfig{URL: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.Eval(ctx, "return 1", nil).Err(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		cancel()
		c.Close()
	}
}
