package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
)

// The acquire and finish scripts before issue 13's trim (commit 757b081), to compare them
// with the current ones on the same server, in the same rounds (-scripts).
var (
	//go:embed before/acquire.lua
	beforeAcquire string
	//go:embed before/finish.lua
	beforeFinish string
)

// scriptImpls runs the scripts of before and of the checkout (read from
// internal/lock/scripts; the benchmark runs from test/bench/lock) directly, with the
// arguments internal/lock passes: acquire, then finish as a release. Their client-side
// work is the same, so the difference is the scripts'.
func scriptImpls(c *redis.Client) ([]impl, error) {
	dir := filepath.Join("..", "..", "..", "internal", "lock", "scripts")
	acq, err := os.ReadFile(filepath.Join(dir, "acquire.lua"))
	if err != nil {
		return nil, fmt.Errorf("-scripts needs the checkout's scripts (run from test/bench/lock): %w", err)
	}
	fin, err := os.ReadFile(filepath.Join(dir, "finish.lua"))
	if err != nil {
		return nil, fmt.Errorf("-scripts: %w", err)
	}
	noInfo, err := withoutInfo(string(acq))
	if err != nil {
		return nil, err
	}
	return []impl{
		scriptImpl(c, "scripts-757b081", beforeAcquire, beforeFinish),
		scriptImpl(c, "scripts-now", string(acq), string(fin)),
		// What the durability check costs: the same scripts with INFO's replies made up.
		scriptImpl(c, "scripts-now-no-INFO", noInfo, string(fin)),
		// The least a cycle with a ledger and a fencing token can write (floorAcquire).
		scriptImpl(c, "scripts-floor", floorAcquire, floorRelease),
	}, nil
}

// floorAcquire and floorRelease are a measurement only, not a lock: the writes a cycle
// with a fencing token and an occurrence ledger cannot do without — the lock (SET NX PX),
// the fence (TIME + SET … GET), the ledger entry (HSET + PEXPIRE); then the release (GET,
// DEL, HSET of the entry's state) — and nothing else: no durability check, no last success,
// no resent-call or crashed-predecessor checks, none of the replies' facts. Arguments as
// acquire.lua's and finish.lua's, reply shapes as far as scriptImpl reads them.
const (
	floorAcquire = `
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'held'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fence = math.max((tonumber(redis.call('SET', KEYS[2], string.format('%d', now), 'GET')) or 0) + 1, now)
redis.call('HSET', KEYS[3], 'state', 'running', 'holder', ARGV[5], 'token', ARGV[4], 'fence', string.format('%d', fence))
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return {'acquired', fence}
`
	floorRelease = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, '', '', '', ''}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'state', 'released')
return {1, '', '', '', ''}
`
)

// withoutInfo replaces acquire.lua's two INFO calls by constant replies (a measurement
// only: the lock must report what the server says).
func withoutInfo(src string) (string, error) {
	p, m := "redis.pcall('INFO', 'persistence')", "redis.pcall('INFO', 'memory')"
	if !strings.Contains(src, p) || !strings.Contains(src, m) {
		return "", fmt.Errorf("-scripts: acquire.lua no longer has %s and %s; update withoutInfo", p, m)
	}
	src = strings.Replace(src, p, "'aof_enabled:1'", 1)
	return strings.Replace(src, m, "'maxmemory_policy:noeviction'", 1), nil
}

func scriptImpl(c *redis.Client, name, acquireSrc, finishSrc string) impl {
	acquire, finish := redis.NewScript(acquireSrc), redis.NewScript(finishSrc)
	occ := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return impl{
		name: name,
		cycle: func(key string) func(context.Context) error {
			return func(ctx context.Context) error {
				token, err := lock.NewToken()
				if err != nil {
					return err
				}
				// As lock.Acquire passes them (older scripts read the first four).
				keysA := []string{lock.LockKey(key), lock.FenceKey(key), lock.RunKey(key, occ), lock.LastKey(key),
					lock.FinishKey(key, token)}
				keysF := []string{lock.LockKey(key), lock.RunKey(key, occ), lock.FenceKey(key), lock.LastKey(key), lock.FinishKey(key, token)}
				value := token + " bench"
				res, err := acquire.Run(ctx, c, keysA, value, ttl.Milliseconds(), lock.DefaultRetention.Milliseconds(),
					token, "bench", time.Now().UnixMilli(), "").Slice()
				if err != nil {
					return err
				}
				if len(res) == 0 || res[0] != "acquired" {
					return fmt.Errorf("%s: acquire: %v", name, res)
				}
				fence, _ := res[1].(int64)
				out, err := finish.Run(ctx, c, keysF, value, token, "", lock.DefaultRetention.Milliseconds(),
					time.Now().UnixMilli(), "bench", fence, occ.Unix(), "", "0", lock.FinishKeyTTL(ttl).Milliseconds()).Slice()
				if err != nil {
					return err
				}
				if len(out) != 5 || out[0] != int64(1) {
					return fmt.Errorf("%s: release: %v", name, out)
				}
				return nil
			}
		},
	}
}
