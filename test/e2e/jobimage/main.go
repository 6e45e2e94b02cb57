// Command jobimage is the program of the end-to-end job image
// (k8s.local/lockedcron-e2e-job:dev). It records each run on the Redis list
// lockedcron-e2e:audit so that tests check what actually ran:
//
//   - at start it RPUSHes {"event":"start", occurrence, holder, fencingToken, start, pod, ...}
//   - at the end it RPUSHes {"event":"end", ..., start, end, exitCode}; if it receives
//     SIGTERM/SIGINT while sleeping it pushes the end record with "signal" set and exits 143/130.
//
// Two runs overlapped if one's [start,end] intersects another's; a start without an end is
// a run that was killed without a chance to say so (SIGKILL).
//
// Inputs: env LOCKEDCRON_OCCURRENCE, LOCKEDCRON_HOLDER, LOCKEDCRON_FENCING_TOKEN (set by
// lockwrap), E2E_REDIS_URL (redis://host:port/db; unset = only print the records),
// --sleep / E2E_SLEEP (how long the job works, default 2s), --exit / E2E_EXIT_CODE
// (exit code to finish with, default 0), --incremental / E2E_INCREMENTAL=true with --batch /
// E2E_BATCH (the worked example of docs/idempotency.md: process the records of
// lockedcron-e2e:records after LOCKEDCRON_WATERMARK, each exactly once, each taking --sleep;
// see incremental.go), --sleep-max / E2E_SLEEP_MAX and --fail-percent / E2E_FAIL_PERCENT (the
// soak's random jobs: a duration drawn in [sleep, sleep-max] and exit 1 for that share of the
// runs, both a function of E2E_SEED, the occurrence and the holder, so a seed replays). It writes its end record to --termination-log
// (default /dev/termination-log, best effort) and prints every record on stdout. With
// --terminal it first sets its terminal's modes as stty does (a job in the terminal's
// background is stopped there by SIGTTOU) and exits 3 when it has no terminal.
//
// `jobimage cp DEST` copies this binary to DEST (for an init container sharing an emptyDir).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
)

// AuditList is the Redis list every run appends to.
const AuditList = audit.List

// Record is one entry of the audit list.
type Record = audit.Record

func main() {
	if len(os.Args) == 3 && os.Args[1] == "cp" {
		if err := copySelf(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "jobimage cp:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run())
}

func envDefault(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run() int {
	sleepDef, err := time.ParseDuration(envDefault("E2E_SLEEP", "2s"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobimage: bad E2E_SLEEP:", err)
		return 2
	}
	exitDef, _ := strconv.Atoi(envDefault("E2E_EXIT_CODE", "0"))
	sleep := flag.Duration("sleep", sleepDef, "how long the job works (env E2E_SLEEP)")
	exitCode := flag.Int("exit", exitDef, "exit code to finish with (env E2E_EXIT_CODE)")
	redisURL := flag.String("redis-url", os.Getenv("E2E_REDIS_URL"), "Redis URL for the audit list (env E2E_REDIS_URL)")
	termLog := flag.String("termination-log", "/dev/termination-log", "file that receives the end record")
	label := flag.String("label", os.Getenv("E2E_LABEL"), "free text copied into the records (env E2E_LABEL)")
	incremental := flag.Bool("incremental", os.Getenv("E2E_INCREMENTAL") == "true",
		"process the records after LOCKEDCRON_WATERMARK instead of sleeping (env E2E_INCREMENTAL=true; see incremental.go)")
	batchDef, _ := strconv.Atoi(envDefault("E2E_BATCH", "5"))
	batch := flag.Int("batch", batchDef, "records per run in --incremental mode (env E2E_BATCH)")
	sleepMaxDef, err := time.ParseDuration(envDefault("E2E_SLEEP_MAX", "0s"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobimage: bad E2E_SLEEP_MAX:", err)
		return 2
	}
	sleepMax := flag.Duration("sleep-max", sleepMaxDef, "draw the duration in [sleep, sleep-max] (env E2E_SLEEP_MAX; 0: always sleep)")
	failDef, _ := strconv.Atoi(envDefault("E2E_FAIL_PERCENT", "0"))
	failPercent := flag.Int("fail-percent", failDef, "exit 1 in this share of the runs (env E2E_FAIL_PERCENT)")
	terminal := flag.Bool("terminal", false, "set the terminal's modes first, as stty does, and exit 3 when there is no terminal (a container with tty: true)")
	flag.Parse()
	if *terminal {
		if err := setTerminalModes(); err != nil {
			fmt.Fprintln(os.Stderr, "jobimage:", err)
			return 3
		}
	}
	if *sleepMax > *sleep || *failPercent > 0 {
		d, fail := draw(os.Getenv("E2E_SEED"), os.Getenv("LOCKEDCRON_OCCURRENCE"), os.Getenv("LOCKEDCRON_HOLDER"), *sleep, *sleepMax, *failPercent)
		*sleep = d
		if fail {
			*exitCode = 1
		}
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	token, _ := strconv.ParseInt(os.Getenv("LOCKEDCRON_FENCING_TOKEN"), 10, 64)
	rec := Record{
		Event:        "start",
		Occurrence:   os.Getenv("LOCKEDCRON_OCCURRENCE"),
		Holder:       os.Getenv("LOCKEDCRON_HOLDER"),
		FencingToken: token,
		Start:        time.Now().UTC(),
		Pod:          envDefault("POD_NAME", os.Getenv("HOSTNAME")),
		Namespace:    os.Getenv("POD_NAMESPACE"),
		Label:        *label,
	}

	var rdb *redis.Client
	if *redisURL != "" {
		opt, err := redis.ParseURL(*redisURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobimage: bad redis url:", err)
			return 70
		}
		opt.DialTimeout = 3 * time.Second
		rdb = redis.NewClient(opt)
		defer rdb.Close()
	}
	if err := push(rdb, rec); err != nil {
		fmt.Fprintln(os.Stderr, "jobimage: audit start:", err)
		return 70
	}

	code := *exitCode
	if *incremental {
		// --sleep is the time each record takes.
		code = runIncremental(rdb, *batch, *sleep, sigs)
	} else {
		select {
		case <-time.After(*sleep):
		case s := <-sigs:
			rec.Signal = s.String()
			code = 128 + int(s.(syscall.Signal))
		}
	}
	rec.Event = "end"
	rec.End = time.Now().UTC()
	rec.ExitCode = code
	if err := push(rdb, rec); err != nil {
		fmt.Fprintln(os.Stderr, "jobimage: audit end:", err)
		if code == 0 {
			code = 70
		}
	}
	if b, err := json.Marshal(rec); err == nil {
		_ = os.WriteFile(*termLog, b, 0o644)
	}
	return code
}

// draw picks a run's duration in [lo, hi] and whether it fails (failPercent of runs), as a
// function of the seed, the occurrence and the holder.
func draw(seed, occurrence, holder string, lo, hi time.Duration, failPercent int) (time.Duration, bool) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed + "|" + occurrence + "|" + holder))
	r := rand.New(rand.NewPCG(h.Sum64(), 0x50a4))
	d := lo
	if hi > lo {
		d += time.Duration(r.Int64N(int64(hi - lo)))
	}
	return d, r.IntN(100) < failPercent
}

func push(rdb *redis.Client, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	if rdb == nil {
		return nil
	}
	var last error
	for i := 0; i < 5; i++ { // a Redis restart in the middle of a run must not lose the record
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		last = rdb.RPush(ctx, AuditList, b).Err()
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(time.Duration(200*(i+1)) * time.Millisecond)
	}
	return last
}

func copySelf(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dest + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}
