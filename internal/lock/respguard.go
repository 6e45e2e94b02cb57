package lock

import (
	"fmt"
	"net"
	"strconv"
)

// A Redis endpoint is whoever the Secret's url names: a tenant's own server, in the
// manager's case, whose replies are input like any other. go-redis allocates what a
// reply's header announces before it reads the reply (a bulk string's length, an
// aggregate's count) and reads a line to its end however long: a server announcing a
// 2^63-byte string panicked the reader (in the manager's health probe: every replica
// down, for every tenant), one announcing 1 GiB had it allocated, one sending an endless
// line grew the buffer for as long as the read deadline let it. guardConn reads the
// replies' framing as they arrive and fails the read before go-redis allocates more than
// these bounds for one reply, far above anything this project's commands get back (a
// lock script's short array, INFO's few kilobytes, a SCAN page of 1,000 keys; a Cluster's
// slot map reaches them only with about 10,000 separate slot ranges).
const (
	// maxReplyBytes bounds what one reply's headers announce: its strings' lengths and
	// 16 bytes (an interface value) for each element of its aggregates.
	maxReplyBytes = 4 << 20
	// maxLineBytes bounds a line: a header, a simple string, an error, a number.
	maxLineBytes = 64 << 10
	// maxHeaderBytes bounds a length or count line: its type byte, "-1" or at most 19
	// digits, CRLF. go-redis reads the whole line as a number (leading zeros and all),
	// so a longer one is not a header this guard could read the same way.
	maxHeaderBytes = 1 + 20 + 2
	// maxDepth bounds how deep aggregates nest: go-redis reads each level with a call.
	maxDepth = 64
)

// ErrReplyTooLarge is the error of a read that found a reply over these bounds (or
// aggregates nested deeper than maxDepth, or a length header padded past its digits); the
// connection is dropped (go-redis discards a connection whose read failed).
var ErrReplyTooLarge = fmt.Errorf("redis reply over lockedcron's bounds (a line of at most %d bytes, at most %d bytes announced per reply): not a Redis server this project talks to, or a hostile one", maxLineBytes, maxReplyBytes)

// guardConn checks the framing of what c reads (RESP2 and RESP3).
type guardConn struct {
	net.Conn
	respFrame
}

func (c *guardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if ferr := c.scan(b[:n]); ferr != nil {
		_ = c.Conn.Close()
		return 0, ferr
	}
	return n, err
}

// respFrame follows the replies' framing byte by byte.
type respFrame struct {
	inLine  bool   // within a line (header or simple value)
	line    []byte // the line so far (only its first bytes are kept: a header is short)
	lineLen int
	payload int64 // bytes of a bulk string (and its CRLF) still to come
	// open holds, for each aggregate being read, how many elements it still has, and
	// whether it is an attribute (which is not an element of its parent).
	open      []openAggregate
	announced int64 // by the headers of the reply being read
}

type openAggregate struct {
	left int64
	attr bool
}

func (f *respFrame) scan(b []byte) error {
	for len(b) > 0 {
		if f.payload > 0 {
			k := min(int64(len(b)), f.payload)
			f.payload -= k
			b = b[k:]
			if f.payload == 0 {
				f.done()
			}
			continue
		}
		c := b[0]
		b = b[1:]
		if !f.inLine {
			f.inLine, f.line, f.lineLen = true, f.line[:0], 0
		}
		f.lineLen++
		if f.lineLen > maxLineBytes {
			return ErrReplyTooLarge
		}
		if c != '\n' {
			if len(f.line) < 32 {
				f.line = append(f.line, c)
			}
			continue
		}
		f.inLine = false
		if err := f.header(); err != nil {
			return err
		}
	}
	return nil
}

// header acts on a line just ended (f.line: its type byte and up to 31 more bytes;
// f.lineLen: the whole line's length).
func (f *respFrame) header() error {
	if len(f.line) == 0 {
		return nil // a bare "\n": not RESP; go-redis says so
	}
	switch f.line[0] {
	case '$', '!', '=', '*', '~', '>', '%', '|':
		if f.lineLen > maxHeaderBytes {
			return ErrReplyTooLarge
		}
	}
	n, numErr := strconv.ParseInt(string(trimCR(f.line[1:])), 10, 64)
	switch f.line[0] {
	case '$', '!', '=': // bulk string, bulk error, verbatim string
		if numErr != nil || n < 0 {
			f.done() // null, or malformed: go-redis fails on it
			return nil
		}
		if err := f.announce(n); err != nil {
			return err
		}
		f.payload = n + 2
		return nil
	case '*', '~', '>', '%', '|': // array, set, push, map, attribute
		if numErr != nil || n <= 0 {
			if f.line[0] != '|' {
				f.done() // empty, null, or malformed
			}
			return nil
		}
		if f.line[0] == '%' || f.line[0] == '|' {
			if n > maxReplyBytes {
				return ErrReplyTooLarge
			}
			n *= 2
		}
		if n > maxReplyBytes {
			return ErrReplyTooLarge
		}
		if err := f.announce(16 * n); err != nil {
			return err
		}
		if len(f.open) >= maxDepth {
			return ErrReplyTooLarge
		}
		f.open = append(f.open, openAggregate{left: n, attr: f.line[0] == '|'})
		return nil
	default: // a simple value: one element, which go-redis keeps
		if err := f.announce(int64(f.lineLen)); err != nil {
			return err
		}
		f.done()
		return nil
	}
}

func (f *respFrame) announce(n int64) error {
	if n > maxReplyBytes || f.announced+n > maxReplyBytes {
		return ErrReplyTooLarge
	}
	f.announced += n
	return nil
}

// done: an element ended; so may the aggregates it ends, and the reply.
func (f *respFrame) done() {
	for len(f.open) > 0 {
		top := &f.open[len(f.open)-1]
		top.left--
		if top.left > 0 {
			return
		}
		attr := top.attr
		f.open = f.open[:len(f.open)-1]
		if attr {
			return // an attribute precedes the value it describes: not an element
		}
	}
	f.announced = 0 // a whole reply read
}

func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}
