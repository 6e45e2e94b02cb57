package lock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
)

// A Redis endpoint is a tenant's to choose (the Secret's url), so its replies are input:
// a reply announcing more than the bounds (a 2^63-byte string panicked go-redis's reader:
// the manager's health probe down on every replica; 1 GiB was allocated; an endless line
// grew) is refused with ErrReplyTooLarge, without the allocation, and the process goes on.
func TestHostileRepliesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		endless     bool
	}{
		{"string of 2^63-1 bytes", "$9223372036854775807\r\n", false},
		{"string of 1 GiB", "$1073741824\r\n", false},
		{"verbatim string of 1 GiB", "=1073741824\r\n", false},
		{"array of 2^63-1", "*9223372036854775807\r\n", false},
		{"array of 100 million", "*100000000\r\n", false},
		{"map of 2^62", "%4611686018427387904\r\n", false},
		{"arrays of arrays", "*3\r\n*200000\r\n" + strings.Repeat(":1\r\n", 200000) + "*200000\r\n", false},
		{"strings adding up", "*8\r\n" + strings.Repeat("$1000000\r\n"+strings.Repeat("x", 1000000)+"\r\n", 8), false},
		{"string of 2^63-1 bytes, zero-padded", "$" + strings.Repeat("0", 31) + "9223372036854775807\r\n", false},
		{"array of 100 million, zero-padded", "*" + strings.Repeat("0", 31) + "100000000\r\n", false},
		{"simple strings adding up", "*100\r\n" + strings.Repeat("+"+strings.Repeat("a", 60000)+"\r\n", 100), false},
		{"aggregates nested 100,000 deep", strings.Repeat("*1\r\n", 100000) + ":1\r\n", false},
		{"endless simple string", "+a", true},
		{"endless error", "-a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := lock.NewClient(lock.ClientConfig{URL: "redis://" + redistest.StartHostile(t, tc.reply, tc.endless) + "?read_timeout=5s"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err = func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return c.Do(ctx, "PING").Err() // a reply of any type, read whole
			}()
			runtime.ReadMemStats(&after)
			if !errors.Is(err, lock.ErrReplyTooLarge) {
				t.Fatalf("PING answered %q: %v, want ErrReplyTooLarge", tc.reply[:min(len(tc.reply), 40)], err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
				t.Fatalf("%d MiB allocated for a refused reply", grew>>20)
			}
		})
	}
}
