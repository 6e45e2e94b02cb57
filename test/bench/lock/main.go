// Command benchlock compares lockedcron's lock (internal/lock: ledger, fencing token,
// durability check, last success, all in one script call) with github.com/bsm/redislock
// and github.com/go-redsync/redsync/v4 on one real redis-server it starts on a free
// loopback port. Rounds are interleaved (ours, redislock, redsync, ours, …) and every
// implementation uses the same go-redis client. It prints, per scenario, the median time
// per operation over the rounds, the ratios, and from INFO commandstats and INFO cpu the
// Redis commands, command time and server CPU per cycle.
//
//	make bench-lock                       # or: cd test/bench/lock && go run . -h
//
// Exits 0 whatever the figures (a benchmark, not a test).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
)

const ttl = 10 * time.Second

// impl is one lock implementation's three operations, each on its own key.
type impl struct {
	name string
	// cycle returns a function running one acquire+release on key.
	cycle func(key string) func(ctx context.Context) error
	// renewer takes the lock on key and returns a function renewing it once.
	renewer func(ctx context.Context, key string) (func(ctx context.Context) error, error)
}

func impls(c *redis.Client) []impl {
	ours := lock.New(c)
	rl := redislock.New(c)
	rs := redsync.New(rsgoredis.NewPool(c))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []impl{
		{
			name: "lockedcron",
			cycle: func(key string) func(context.Context) error {
				req := lock.Request{Key: key, Occurrence: base, Holder: "bench", TTL: ttl}
				return func(ctx context.Context) error {
					l, err := ours.Acquire(ctx, req)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}
			},
			renewer: func(ctx context.Context, key string) (func(context.Context) error, error) {
				l, err := ours.Acquire(ctx, lock.Request{Key: key, Occurrence: base, Holder: "bench", TTL: ttl})
				if err != nil {
					return nil, err
				}
				return l.Renew, nil
			},
		},
		{
			// What lockwrap does per occurrence: acquire a new occurrence (with the blackout
			// guard every pod the controller makes gives: one GET of the job's marker),
			// record it succeeded (ledger, last success) and release, in Finish's one call.
			name: "lockedcron-finish",
			cycle: func(key string) func(context.Context) error {
				occ := base
				return func(ctx context.Context) error {
					occ = occ.Add(time.Second)
					l, err := ours.Acquire(ctx, lock.Request{Key: key, Occurrence: occ, Holder: "bench", TTL: ttl, Retention: time.Minute,
						BlackoutID: "bench-job", MadeAt: base})
					if err != nil {
						return err
					}
					return l.Finish(ctx, lock.StateSucceeded)
				}
			},
		},
		{
			name: "redislock",
			cycle: func(key string) func(context.Context) error {
				return func(ctx context.Context) error {
					l, err := rl.Obtain(ctx, key, ttl, nil)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}
			},
			renewer: func(ctx context.Context, key string) (func(context.Context) error, error) {
				l, err := rl.Obtain(ctx, key, ttl, nil)
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context) error { return l.Refresh(ctx, ttl, nil) }, nil
			},
		},
		{
			name: "redsync",
			cycle: func(key string) func(context.Context) error {
				m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
				return func(ctx context.Context) error {
					if err := m.LockContext(ctx); err != nil {
						return err
					}
					ok, err := m.UnlockContext(ctx)
					if err == nil && !ok {
						err = errors.New("redsync: unlock refused")
					}
					return err
				}
			},
			renewer: func(ctx context.Context, key string) (func(context.Context) error, error) {
				m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
				if err := m.LockContext(ctx); err != nil {
					return nil, err
				}
				return func(ctx context.Context) error {
					ok, err := m.ExtendContext(ctx)
					if err == nil && !ok {
						err = errors.New("redsync: extend refused")
					}
					return err
				}, nil
			},
		},
	}
}

// serverStats is what one run cost the server.
type serverStats struct {
	calls map[string]float64 // command → calls
	usec  float64            // command time, scripts' inner commands excluded (counted in EVALSHA)
	each  map[string]float64 // command → usec, inner commands included
	cpu   float64            // used_cpu_sys + used_cpu_user, seconds
}

func main() {
	rounds := flag.Int("rounds", 7, "interleaved rounds")
	n := flag.Int("n", 2000, "operations per implementation, scenario and round")
	par := flag.Int("par", 16, "goroutines of the parallel scenario (each on its own key)")
	aof := flag.Bool("aof", true, "run Redis with appendonly yes, appendfsync everysec (the recommended setup)")
	scripts := flag.Bool("scripts", false, "also run the acquire and release scripts of commit 757b081 (before the trim) and of this checkout directly")
	flag.Parse()
	if err := run(*rounds, *n, *par, *aof, *scripts); err != nil {
		fmt.Fprintln(os.Stderr, "benchlock:", err)
		os.Exit(1)
	}
}

func run(rounds, n, par int, aof, scripts bool) error {
	addr, stop, err := startRedis(aof)
	if err != nil {
		return err
	}
	defer stop()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2 * par})
	defer c.Close()
	ctx := context.Background()
	version, _ := c.Info(ctx, "server").Result()
	all := impls(c)
	if scripts {
		si, err := scriptImpls(c)
		if err != nil {
			return err
		}
		all = append(all, si...)
	}

	type scenario struct {
		name string
		par  int
		skip func(impl) bool
		prep func(ctx context.Context, im impl, key string) (func(context.Context) error, error)
	}
	scenarios := []scenario{
		{name: "acquire+release", par: 1, prep: func(_ context.Context, im impl, key string) (func(context.Context) error, error) {
			return im.cycle(key), nil
		}},
		{name: fmt.Sprintf("acquire+release ×%d", par), par: par, prep: func(_ context.Context, im impl, key string) (func(context.Context) error, error) {
			return im.cycle(key), nil
		}},
		{name: "renew", par: 1, skip: func(im impl) bool { return im.renewer == nil }, prep: func(ctx context.Context, im impl, key string) (func(context.Context) error, error) {
			return im.renewer(ctx, key)
		}},
	}

	// Warm up: load every script, open the connections.
	for _, sc := range scenarios {
		for _, im := range all {
			if sc.skip != nil && sc.skip(im) {
				continue
			}
			if _, _, err := measure(ctx, c, sc.prep, im, "warm:"+sc.name, 50, sc.par); err != nil {
				return fmt.Errorf("%s %s: %w", im.name, sc.name, err)
			}
		}
	}

	perOp := map[string][]float64{}   // scenario/impl → µs per op, one per round
	srv := map[string][]serverStats{} // scenario/impl → per round
	for r := 0; r < rounds; r++ {
		for _, sc := range scenarios {
			for _, im := range all {
				if sc.skip != nil && sc.skip(im) {
					continue
				}
				key := fmt.Sprintf("bench:%s:%d", sc.name, r)
				d, st, err := measure(ctx, c, sc.prep, im, key, n, sc.par)
				if err != nil {
					return fmt.Errorf("%s %s round %d: %w", im.name, sc.name, r, err)
				}
				k := sc.name + "/" + im.name
				perOp[k] = append(perOp[k], float64(d.Microseconds())/float64(n))
				srv[k] = append(srv[k], st)
			}
		}
	}

	up, _ := exec.Command("uptime").Output()
	fmt.Printf("benchlock: %s, go-redis client, GOMAXPROCS %d, %d rounds × %d ops, appendonly %v\n",
		strings.TrimSpace(infoField(version, "redis_version")), runtime.GOMAXPROCS(0), rounds, n, aof)
	fmt.Printf("uptime: %s\n\n", strings.TrimSpace(string(up)))
	fmt.Println("| scenario | implementation | median µs/op | best round µs/op | lockedcron speed ratio (their µs / ours) | Redis commands/op | Redis command µs/op (best round) | Redis CPU µs/op (best round) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, sc := range scenarios {
		ourMed := median(perOp[sc.name+"/lockedcron"])
		for _, im := range all {
			k := sc.name + "/" + im.name
			if len(perOp[k]) == 0 {
				continue
			}
			m := median(perOp[k])
			ratio := "—"
			switch {
			case im.name == "lockedcron":
			case strings.HasPrefix(im.name, "lockedcron") || strings.HasPrefix(im.name, "scripts-"):
				ratio = fmt.Sprintf("(lockedcron's µs / these: %.2f×)", ourMed/m)
			default:
				ratio = fmt.Sprintf("%.2f×", m/ourMed)
			}
			cmds, usec, cpu, bestUsec, bestCPU := perCycle(srv[k], n)
			fmt.Printf("| %s | %s | %.1f | %.1f | %s | %s | %.1f (%.1f) | %.1f (%.1f) |\n", sc.name, im.name, m, slices.Min(perOp[k]),
				ratio, cmds, usec, bestUsec, cpu, bestCPU)
		}
	}
	fmt.Println()
	fmt.Println("µs/op: wall time of one operation (×N: of N concurrent ones, total time / ops), median over rounds.")
	fmt.Println("Ratio > 1: lockedcron is faster. Commands: calls per op from INFO commandstats, a script's")
	fmt.Println("inner commands included; command µs: their usec (EVALSHA's includes its inner ones, counted once);")
	fmt.Println("CPU: redis-server's used_cpu_sys+used_cpu_user per op (network I/O included); medians over rounds,")
	fmt.Println("and in brackets the best round (least disturbed by other processes).")
	fmt.Println()
	fmt.Printf("Redis command time per op by command (µs, inner commands of scripts included, best round), %s:\n", scenarios[0].name)
	for _, im := range all {
		k := scenarios[0].name + "/" + im.name
		best := map[string]float64{}
		for _, st := range srv[k] {
			for c, u := range st.each {
				if v, ok := best[c]; !ok || u < v {
					best[c] = u
				}
			}
		}
		names := make([]string, 0, len(best))
		for c := range best {
			names = append(names, c)
		}
		sort.Slice(names, func(i, j int) bool { return best[names[i]] > best[names[j]] })
		parts := make([]string, 0, len(names))
		for _, c := range names {
			parts = append(parts, fmt.Sprintf("%s %.2f", c, best[c]/float64(n)))
		}
		fmt.Printf("  %-18s %s\n", im.name, strings.Join(parts, ", "))
	}
	return nil
}

// measure runs n ops of im (prepared by prep) split over par goroutines, each on its own
// key, and returns the wall time and what the server spent.
func measure(ctx context.Context, c *redis.Client, prep func(context.Context, impl, string) (func(context.Context) error, error), im impl, key string, n, par int) (time.Duration, serverStats, error) {
	ops := make([]func(context.Context) error, par)
	for g := range ops {
		op, err := prep(ctx, im, fmt.Sprintf("%s:%s:%d", key, im.name, g))
		if err != nil {
			return 0, serverStats{}, err
		}
		ops[g] = op
	}
	cpu0, err := cpuSeconds(ctx, c)
	if err != nil {
		return 0, serverStats{}, err
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		return 0, serverStats{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, par)
	start := time.Now()
	for g := range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += par {
				if err := ops[g](ctx); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, serverStats{}, err
	}
	cs, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, serverStats{}, err
	}
	cpu1, err := cpuSeconds(ctx, c)
	if err != nil {
		return 0, serverStats{}, err
	}
	st := serverStats{calls: map[string]float64{}, each: map[string]float64{}, cpu: cpu1 - cpu0}
	for _, line := range strings.Split(cs, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if strings.HasPrefix(name, "config") { // our RESETSTAT
			continue
		}
		f := map[string]float64{}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f[k], _ = strconv.ParseFloat(v, 64)
		}
		st.calls[name] += f["calls"]
		st.each[name] += f["usec"]
		if !inScript(name, im) {
			st.usec += f["usec"]
		}
	}
	return d, st, nil
}

// inScript says whether a command's time is already counted in the script call that ran
// it: lockedcron's and redislock's commands all run inside EVALSHA, redsync sends its SET
// NX on its own and runs its compare-and-delete/pexpire as scripts.
func inScript(name string, im impl) bool {
	switch name {
	case "evalsha", "eval":
		return false
	case "set":
		return im.name != "redsync"
	}
	return true
}

func cpuSeconds(ctx context.Context, c *redis.Client) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	s, _ := strconv.ParseFloat(infoField(info, "used_cpu_sys"), 64)
	u, _ := strconv.ParseFloat(infoField(info, "used_cpu_user"), 64)
	return s + u, nil
}

// perCycle summarises the rounds' server figures per op: commands ("3: evalsha 1, get 1, …"),
// command µs, CPU µs — medians over the rounds —, and the best round's command µs and CPU µs.
func perCycle(sts []serverStats, n int) (string, float64, float64, float64, float64) {
	var total, usec, cpu []float64
	names := map[string][]float64{}
	for _, st := range sts {
		t := 0.0
		for k, v := range st.calls {
			t += v
			names[k] = append(names[k], v/float64(n))
		}
		total = append(total, t/float64(n))
		usec = append(usec, st.usec/float64(n))
		cpu = append(cpu, st.cpu*1e6/float64(n))
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := median(names[keys[i]]), median(names[keys[j]])
		if a != b {
			return a > b
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, trim(median(names[k]))))
	}
	return trim(median(total)) + " (" + strings.Join(parts, ", ") + ")", median(usec), median(cpu), slices.Min(usec), slices.Min(cpu)
}

// trim formats f with at most two decimals, without trailing zeros.
func trim(f float64) string {
	s := strconv.FormatFloat(f, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// startRedis starts redis-server on a free loopback port in a temporary directory.
func startRedis(aof bool) (string, func(), error) {
	dir, err := os.MkdirTemp("", "benchlock-")
	if err != nil {
		return "", nil, err
	}
	var cmd *exec.Cmd
	var addr string
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
			"--maxmemory-policy", "noeviction", "--logfile", "redis.log"}
		if aof {
			args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
		} else {
			args = append(args, "--appendonly", "no")
		}
		cmd = exec.Command("redis-server", args...)
		if err := cmd.Start(); err != nil {
			return "", nil, fmt.Errorf("redis-server: %w (hack/install-deps.sh installs it)", err)
		}
		if waitPing(addr) {
			break
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if attempt == 4 {
			log, _ := os.ReadFile(dir + "/redis.log")
			return "", nil, fmt.Errorf("redis-server did not answer on %s: %s", addr, log)
		}
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
	}
	return addr, func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}, nil
}

// waitPing says whether addr answers PING within 10 s (raw RESP, so that go-redis logs no
// refused dials while the server starts).
func waitPing(addr string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 7)
			_, err = c.Write([]byte("PING\r\n"))
			if err == nil {
				_, err = io.ReadFull(c, buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
