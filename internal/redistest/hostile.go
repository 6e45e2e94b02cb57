package redistest

import (
	"bufio"
	"net"
	"strings"
	"testing"
)

// StartHostile listens on a loopback port until the test ends, as a server that is not
// Redis, or a hostile one, would: it answers each line a client sends with reply, whatever
// the command. With endless, it then repeats reply's last byte without end (an endless
// line). It returns host:port.
func StartHostile(t testing.TB, reply string, endless bool) string {
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
			go answer(c, reply, endless)
		}
	}()
	return l.Addr().String()
}

func answer(c net.Conn, reply string, endless bool) {
	defer c.Close()
	r := bufio.NewReader(c)
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
