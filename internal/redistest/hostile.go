package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// ping is a PING as RESP.
const ping = "*1\r\n$4\r\nPING\r\n"

// StartHostile listens on a loopback port until the test ends, as a server that is not
// Redis, or a hostile one, would: it answers each line a client sends with reply, whatever
// the command. With endless, it then repeats reply's last byte without end (an endless
// line). It returns host:port.
func StartHostile(t testing.TB, reply string, endless bool) string {
	t.Helper()
	return startHostile(t, reply, endless, false)
}

// StartHostileRedis is StartHostile for a hostile server that passes for Redis first: it
// answers a connection's first PING +PONG (the manager's and the plugin's clients ask it
// before anything else: lock.probeRedis), then every line with reply.
func StartHostileRedis(t testing.TB, reply string, endless bool) string {
	t.Helper()
	return startHostile(t, reply, endless, true)
}

func startHostile(t testing.TB, reply string, endless, pong bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go answer(c, reply, endless, pong)
		}
	}()
	return l.Addr().String()
}

func answer(c net.Conn, reply string, endless, pong bool) {
	defer c.Close()
	r := bufio.NewReader(c)
	if head, err := r.Peek(len(ping)); pong && err == nil && string(head) == ping {
		_, _ = r.Discard(len(ping))
		if _, err := c.Write([]byte("+PONG\r\n")); err != nil {
			return
		}
	}
	for {
		if _, err := r.ReadString('\n'); err != nil { // a piece of the command is enough
			return
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
		for endless {
			if _, err := c.Write([]byte(strings.Repeat(reply[len(reply)-1:], 64<<10))); err != nil {
				return
			}
		}
	}
}

// Scripted is a server that reads each RESP command (an array of bulk strings) and
// answers what its script says: a hostile Sentinel or Cluster seed, in tests. It
// records the commands it got.
type Scripted struct {
	Addr string
	mu   sync.Mutex
	got  [][]string
}

// Commands are the commands received so far, lower-cased names first.
func (s *Scripted) Commands() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.got...)
}

// Received reports whether a command whose words start with prefix (lower case) came.
func (s *Scripted) Received(prefix ...string) bool {
	for _, c := range s.Commands() {
		if len(c) >= len(prefix) && slices.Equal(c[:len(prefix)], prefix) {
			return true
		}
	}
	return false
}

// StartScripted listens on a loopback port until the test ends and answers each command
// with script(its words, the name and subcommand lower-cased); "" answers an error.
func StartScripted(t testing.TB, script func(cmd []string) string) *Scripted {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	s := &Scripted{Addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(c, script)
		}
	}()
	return s
}

func (s *Scripted) serve(c net.Conn, script func([]string) string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		for i := 0; i < len(cmd) && i < 2; i++ {
			cmd[i] = strings.ToLower(cmd[i])
		}
		s.mu.Lock()
		s.got = append(s.got, cmd)
		s.mu.Unlock()
		reply := script(cmd)
		if reply == "" {
			reply = "-ERR unknown command\r\n"
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not a RESP command: %q", line)
	}
	cmd := make([]string, 0, n)
	for range n {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(h, "$")))
		if err != nil {
			return nil, fmt.Errorf("not a bulk string: %q", h)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		cmd = append(cmd, string(b[:size]))
	}
	return cmd, nil
}

// Bulk is a RESP array of bulk strings.
func Bulk(words ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(words))
	for _, w := range words {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(w), w)
	}
	return b.String()
}

// StartHostileSentinel is a Sentinel that names master() as the master of any name, and
// does what a hostile one would with the rest: it announces 30,000 sentinels, and answers
// a SUBSCRIBE with a +switch-master message of one word (a real one has five; go-redis's
// Sentinel client indexed the fifth in a goroutine of its own, and the process died).
func StartHostileSentinel(t testing.TB, master func() string) *Scripted {
	t.Helper()
	var many strings.Builder
	fmt.Fprintf(&many, "*%d\r\n", 30000)
	for i := range 30000 {
		many.WriteString(Bulk("ip", fmt.Sprintf("10.%d.%d.1", i/250, i%250), "port", "26379"))
	}
	return StartScripted(t, func(cmd []string) string {
		switch {
		case len(cmd) >= 2 && cmd[0] == "sentinel" && cmd[1] == "get-master-addr-by-name":
			host, port, _ := net.SplitHostPort(master())
			return Bulk(host, port)
		case len(cmd) >= 2 && cmd[0] == "sentinel" && cmd[1] == "sentinels":
			return many.String()
		case len(cmd) >= 1 && cmd[0] == "subscribe":
			var b strings.Builder
			for i, ch := range cmd[1:] {
				fmt.Fprintf(&b, "*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:%d\r\n", len(ch), ch, i+1)
			}
			return b.String() + Bulk("message", "+switch-master", "m")
		case len(cmd) >= 1 && cmd[0] == "ping":
			return "+PONG\r\n"
		}
		return ""
	})
}

// StartSilent listens on a loopback port until the test ends, accepting connections and
// never answering: a hung server.
func StartSilent(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return l.Addr().String()
}
