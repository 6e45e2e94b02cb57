package lock

import (
	"strings"
	"testing"
)

// BenchmarkRespFrameScan: what following the framing costs per reply, for the replies
// lockwrap reads in a cycle (an acquire script's array, a finish script's integer) and
// for the INFO of its durability check.
// go test ./internal/lock -run '^$' -bench RespFrameScan -benchmem
func BenchmarkRespFrameScan(b *testing.B) {
	for _, tc := range []struct{ name, reply string }{
		{"acquire", "*6\r\n:1\r\n:42\r\n$0\r\n\r\n$10\r\n1764950400\r\n$5\r\n12345\r\n$25\r\ncluster/ns/pod-1/uid-0001\r\n"},
		{"finish", ":1\r\n"},
		{"info", "$4000\r\n" + strings.Repeat("x", 3998) + "\r\n\r\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var f respFrame
			reply := []byte(tc.reply)
			b.SetBytes(int64(len(reply)))
			for b.Loop() {
				if err := f.scan(reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
