package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
)

// processScript is one record's effect, made idempotent the two ways docs/idempotency.md
// describes: the record id is a unique key (SADD) committed in the same atomic step as the
// effect (the log entry), and a writer whose fencing token is lower than one already seen
// is refused. Returns 1 (done now), 0 (done before: skipped) or -1 (stale holder).
var processScript = redis.NewScript(`
local f = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[2]) < f then
  return -1
end
redis.call('SET', KEYS[1], ARGV[2])
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('RPUSH', KEYS[3], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
return 1
`)

// runIncremental is the worked example of docs/idempotency.md: it processes the records
// after LOCKEDCRON_WATERMARK (a position in audit.Records; none: from the start), at most
// batch of them, each taking perRecord, and writes the position of the last one it
// processed to LOCKEDCRON_WATERMARK_FILE. lockwrap stores that mark only with the run's
// success under the lock, so a run killed midway leaves the old mark and the next run
// processes those records again — which the per-record unique key makes harmless.
func runIncremental(rdb *redis.Client, batch int, perRecord time.Duration, sigs <-chan os.Signal) int {
	if rdb == nil {
		fmt.Fprintln(os.Stderr, "jobimage: --incremental needs --redis-url")
		return 2
	}
	ctx := context.Background()
	var since int64
	if wm := os.Getenv("LOCKEDCRON_WATERMARK"); wm != "" {
		n, err := strconv.ParseInt(wm, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jobimage: watermark %q is not a position: %v\n", wm, err)
			return 2
		}
		since = n
	}
	token := os.Getenv("LOCKEDCRON_FENCING_TOKEN")
	occ := os.Getenv("LOCKEDCRON_OCCURRENCE")
	if _, err := strconv.ParseInt(token, 10, 64); err != nil {
		fmt.Fprintln(os.Stderr, "jobimage: no LOCKEDCRON_FENCING_TOKEN: run me under lockwrap")
		return 2
	}
	if p := os.Getenv("E2E_PID_FILE"); p != "" { // so a test can kill this run mid-way
		_ = os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	ids, err := rdb.LRange(ctx, audit.Records, since, since+int64(batch)-1).Result()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobimage: records:", err)
		return 70
	}
	last := since
	for _, id := range ids {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "jobimage: %v after position %d\n", s, last)
			return 128 + int(s.(syscall.Signal))
		case <-time.After(perRecord):
		}
		n, err := processScript.Run(ctx, rdb, []string{audit.StoreFence, audit.Processed, audit.ProcessedLog},
			strings.TrimSpace(id), token, occ).Int()
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "jobimage: process", id, ":", err)
			return 70
		case n < 0:
			fmt.Fprintf(os.Stderr, "jobimage: fencing token %s is stale: a later holder wrote; stopping\n", token)
			return 75
		case n == 0:
			fmt.Printf("record %s: already processed, skipped\n", id)
		default:
			fmt.Printf("record %s: processed\n", id)
		}
		last++
	}
	if last == since {
		return 0 // nothing new: the mark stays
	}
	if f := os.Getenv("LOCKEDCRON_WATERMARK_FILE"); f != "" {
		if err := os.WriteFile(f, []byte(strconv.FormatInt(last, 10)+"\n"), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "jobimage: watermark:", err)
			return 70
		}
	} else {
		fmt.Fprintln(os.Stderr, "jobimage: no LOCKEDCRON_WATERMARK_FILE (lockwrap too old?)")
		return 70
	}
	return 0
}
