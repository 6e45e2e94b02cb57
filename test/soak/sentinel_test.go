//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
	"github.com/lockedcron/lockedcron/test/soak/checker"
)

const sentinelKey = "soak/sentinel"

// sentinelSoak is the state of one TestSentinelSoak run.
type sentinelSoak struct {
	t      *testing.T
	cfg    config
	group  *redistest.Sentinel
	auditR *redistest.Server

	redisMu sync.Mutex // one fault on the Redis servers at a time, each healed before the next

	mu        sync.Mutex
	decisions []checker.Decision
	scheduled map[string][]time.Time // by contender
	procs     map[int]bool           // process group ids of running lockwraps
	faults    map[FaultKind]int
	faultLog  []string
	kills     []checker.Kill
	faultsEnd time.Time // a fault that needs a target waits for one until then
}

// TestSentinelSoak: the lock on Redis Sentinel (a master, two replicas, three sentinels)
// with --min-replicas 2, the setting docs/lockwrap.md gives for a lock that survives a
// failover, contended by three lockwrap loops (two that skip, one that retries), under a
// seeded plan of failovers (asked for, after the master is killed, while it is frozen),
// frozen replicas, paused lockwraps and killed jobs; then the external checker on what
// the jobs recorded on a separate Redis and what lockwrap reported. No cluster: run it
// with `make soak-sentinel` / `make soak-sentinel-short` (hack/soak-sentinel.sh builds
// the binaries).
func TestSentinelSoak(t *testing.T) {
	d, err := time.ParseDuration(envOr("SOAK_DURATION", "20m"))
	if err != nil {
		t.Fatalf("SOAK_DURATION: %v (a Go duration such as 20m)", err)
	}
	cfg := config{duration: d, seed: time.Now().UnixNano() % 1_000_000, schedule: envOr("SOAK_SCHEDULE", "*/2 * * * * *"),
		out: os.Getenv("SOAK_OUT"), lockwrap: os.Getenv("SOAK_LOCKWRAP"), job: os.Getenv("SOAK_JOB")}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		if cfg.seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED: %v (an integer)", err)
		}
	}
	if cfg.out == "" || cfg.lockwrap == "" || cfg.job == "" {
		t.Fatal("run through hack/soak-sentinel.sh (make soak-sentinel): it sets SOAK_OUT, SOAK_LOCKWRAP and SOAK_JOB")
	}
	s := &sentinelSoak{t: t, cfg: cfg, scheduled: map[string][]time.Time{}, procs: map[int]bool{}, faults: map[FaultKind]int{}}
	t.Logf("soak: Sentinel, seed %d, duration %v, schedule %q, output %s", cfg.seed, cfg.duration, cfg.schedule, cfg.out)
	s.group = redistest.StartSentinel(t, 2, 3)
	s.auditR = redistest.Start(t, redistest.WithPersistence())

	sched, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse(cfg.schedule)
	if err != nil {
		t.Fatal(err)
	}
	contenders := []struct {
		name, contention string
		extra            []string
	}{
		{"sentinel-a", "skip", nil},
		{"sentinel-b", "skip", nil},
		{"sentinel-c", "retry", []string{"--retry-attempts", "30", "--retry-backoff", "100ms", "--retry-max-backoff", "1s"}},
	}
	start := time.Now()
	stop := make(chan struct{})
	var runs sync.WaitGroup
	for _, c := range contenders {
		dir := filepath.Join(cfg.out, c.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		h := hostLockwrap{lockwrap: cfg.lockwrap, job: cfg.job, dir: dir, redisURL: s.group.URL(), auditURL: s.auditR.URL() + "/0",
			key: sentinelKey, contention: c.contention, seed: cfg.seed, ttl: ttl, renew: renew, killGrace: killGrace, sleepMax: "3s",
			extra: append([]string{"--min-replicas", "2"}, c.extra...)}
		runs.Add(1)
		go func() {
			defer runs.Done()
			s.loop(c.name, h, sched, start, stop, &runs)
		}()
	}

	plan := PlanSentinelFaults(cfg.seed, cfg.duration, ttl)
	s.faultsEnd = start.Add(cfg.duration - 30*time.Second)
	var faultWG sync.WaitGroup
	for _, f := range plan {
		faultWG.Add(1)
		go func() {
			defer faultWG.Done()
			time.Sleep(time.Until(start.Add(f.At)))
			s.inject(f)
		}()
	}
	time.Sleep(time.Until(start.Add(cfg.duration)))
	faultWG.Wait()
	close(stop)
	runs.Wait()
	t.Logf("soak: %v elapsed; checking", time.Since(start).Round(time.Second))

	h := s.history()
	res := checker.Check(h, 2*time.Minute)
	sum := summary{Seed: cfg.seed, Duration: cfg.duration.String(), Schedule: cfg.schedule, Keys: res.Keys,
		Faults: s.faults, Violations: res.Violations, FaultLog: s.faultLog}
	writeResult(t, cfg.out, sum, h, SentinelFaultKinds)
	minOcc, err := MinOccurrences()
	if err != nil {
		t.Error(err)
	}
	if missing := FaultsMissing(plan, s.faults); len(missing) > 0 {
		t.Errorf("faults that never landed: %s: the soak did not exercise them", strings.Join(missing, ", "))
	}
	for _, k := range res.Keys {
		switch {
		case k.Scheduled < minOcc:
			t.Errorf("%s: %d contended occurrences, want at least %d (SOAK_MIN_OCCURRENCES)", k.Key, k.Scheduled, minOcc)
		case k.Executed*10 < k.Scheduled:
			// Runs last 0.3–3 s, so many occurrences find the lock held by an earlier
			// one's run, and it fails closed while a replica is frozen or a master is
			// down: as in the cluster soak, a tenth shows the lock was exercised.
			t.Errorf("%s: only %d of %d occurrences ran: the soak hardly exercised the lock", k.Key, k.Executed, k.Scheduled)
		}
	}
	if len(res.Keys) != 1 {
		t.Errorf("keys in the history: %d, want 1 (%s)", len(res.Keys), sentinelKey)
	}
	if !res.OK() {
		html := filepath.Join(cfg.out, "history.html")
		if err := res.WriteVisualization(html); err != nil {
			t.Errorf("visualization: %v", err)
		}
		for _, v := range res.Violations {
			t.Errorf("violation: %v", v)
		}
		t.Errorf("%d violations (seed %d); porcupine's view of the history: %s", len(res.Violations), cfg.seed, html)
	}
}

// loop runs lockwrap as contender name for each instant of sched after start, until stop.
func (s *sentinelSoak) loop(name string, h hostLockwrap, sched cron.Schedule, start time.Time, stop <-chan struct{}, runs *sync.WaitGroup) {
	for at := sched.Next(start); ; at = sched.Next(at) {
		select {
		case <-stop:
			return
		case <-time.After(time.Until(at)):
		}
		select {
		case <-stop:
			return
		default:
		}
		s.mu.Lock()
		s.scheduled[name] = append(s.scheduled[name], at)
		s.mu.Unlock()
		runs.Add(1)
		go func() {
			defer runs.Done()
			run := h
			run.holder = name + "/" + strconv.FormatInt(at.Unix(), 10)
			rep, ok := runHostLockwrap(s.t, run, at, &s.mu, s.procs)
			if !ok {
				return // no report: the checker names the occurrence
			}
			s.mu.Lock()
			s.decisions = append(s.decisions, fromReport(name, sentinelKey, at, rep))
			s.mu.Unlock()
		}()
	}
}

// inject carries out one fault and heals it. A fault on the Redis servers waits for the
// one before it to be healed — the replicas back in sync with the master the sentinels
// name — so that no fault meets a group that has not recovered from the last (two at once
// can lose acknowledged writes, which no setting of the lock prevents).
func (s *sentinelSoak) inject(f Fault) {
	var note string
	switch f.Kind {
	case FaultJobKill9:
		note = untilHit(s.faultsEnd, func() string {
			run, note := killJobRun([]string{s.cfg.job}, sentinelKey, s.t.Logf)
			if run != nil {
				s.mu.Lock()
				s.kills = append(s.kills, *run)
				s.mu.Unlock()
			}
			return note
		})
	case FaultLockwrapStopped:
		note = untilHit(s.faultsEnd, func() string { return stopOneGroup(&s.mu, s.procs, max(f.For, ttl+time.Second)) })
	default:
		s.redisMu.Lock()
		defer s.redisMu.Unlock()
		note = s.redisFault(f)
		s.waitHealthy()
	}
	if note == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[f.Kind]++
	s.faultLog = append(s.faultLog, fmt.Sprintf("%s +%v %s: %s", time.Now().UTC().Format("15:04:05.000"), f.At, f.Kind, note))
}

func (s *sentinelSoak) redisFault(f Fault) string {
	ctx := context.Background()
	master, err := s.master(ctx)
	if err != nil {
		s.t.Logf("soak: %s not injected: %v", f.Kind, err)
		return ""
	}
	switch f.Kind {
	case FaultSentinelFailover:
		// A sentinel refuses a failover it cannot make yet (a replica still syncing,
		// within twice the failover-timeout of the last one): asked again, then given up
		// (not counted), as an operator would. What the soak checks is the lock's, not
		// how soon Sentinel obliges.
		if !s.askFailover(ctx) {
			return ""
		}
		now := s.awaitFailoverFrom(ctx, master.Addr())
		if now == master.Addr() {
			return ""
		}
		return fmt.Sprintf("failover from %s to %s", master.Addr(), now)
	case FaultMasterKilled:
		master.Stop()
		now := s.awaitFailoverFrom(ctx, master.Addr())
		time.Sleep(f.For)
		master.Start()
		if now == master.Addr() {
			return "" // no replica promoted (logged): not the fault planned
		}
		return fmt.Sprintf("master %s SIGKILLed, %s promoted, old master started again (empty) after %v", master.Addr(), now, f.For)
	case FaultMasterFrozen:
		master.Pause()
		time.Sleep(f.For)
		master.Resume()
		now, _ := s.group.CurrentMaster(ctx)
		return fmt.Sprintf("master %s SIGSTOPped for %v; the sentinels name %s", master.Addr(), f.For, now)
	case FaultReplicaFrozen:
		var replicas []*redistest.Server
		for _, r := range s.servers() {
			if r != master {
				replicas = append(replicas, r)
			}
		}
		r := replicas[int(f.At)%len(replicas)]
		r.Pause()
		time.Sleep(f.For)
		r.Resume()
		return fmt.Sprintf("replica %s SIGSTOPped for %v", r.Addr(), f.For)
	}
	return ""
}

// askFailover sends SENTINEL FAILOVER to the sentinels in turn until one accepts it, for
// up to a minute; false when none did.
func (s *sentinelSoak) askFailover(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := 0; ; i++ {
		c := s.group.Sentinels[i%len(s.group.Sentinels)].Client()
		err := c.Do(ctx, "SENTINEL", "FAILOVER", s.group.MasterName).Err()
		c.Close()
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			s.t.Logf("soak: no sentinel accepted a failover within a minute (last: %v)", err)
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *sentinelSoak) servers() []*redistest.Server {
	return append([]*redistest.Server{s.group.Master}, s.group.Replicas...)
}

// master is the server the sentinels name master.
func (s *sentinelSoak) master(ctx context.Context) (*redistest.Server, error) {
	addr, err := s.group.CurrentMaster(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range s.servers() {
		if r.Addr() == addr {
			return r, nil
		}
	}
	return nil, fmt.Errorf("the sentinels name %s, none of the group's servers", addr)
}

// awaitFailoverFrom waits (up to a minute) for the sentinels to name a master other than
// old, and returns it.
func (s *sentinelSoak) awaitFailoverFrom(ctx context.Context, old string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if now, err := s.group.CurrentMaster(ctx); err == nil && now != old {
			return now
		}
		select {
		case <-ctx.Done():
			s.t.Logf("soak: no failover from %s within a minute", old)
			return old
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitHealthy waits (up to two minutes) until the master the sentinels name says it is
// master and has both replicas online.
func (s *sentinelSoak) waitHealthy() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		if m, err := s.master(ctx); err == nil && inSync(ctx, m, len(s.group.Replicas)) {
			return
		}
		select {
		case <-ctx.Done():
			// Not a violation of the lock's promise: the checker judges what ran meanwhile,
			// and a group that stays broken fails the soak's work check.
			s.t.Logf("soak: the Sentinel group did not recover within two minutes")
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// inSync: m says it is a master with n replicas online (what WAIT counts).
func inSync(ctx context.Context, m *redistest.Server, n int) bool {
	c := m.Client()
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "role:master\r\n") && strings.Count(info, ",state=online,") == n
}

func (s *sentinelSoak) history() checker.History {
	var h checker.History
	entries, err := s.auditR.Client().LRange(context.Background(), audit.List, 0, -1).Result()
	if err != nil {
		s.t.Fatal(err)
	}
	recs, err := audit.Parse(entries)
	if err != nil {
		s.t.Fatal(err)
	}
	h.Executions = executions(s.t, recs)
	s.mu.Lock()
	defer s.mu.Unlock()
	h.Decisions = slices.Clone(s.decisions)
	for name, occs := range s.scheduled {
		h.Contenders = append(h.Contenders, checker.Contender{Name: name, Key: sentinelKey, Scheduled: slices.Clone(occs)})
	}
	h.Kills = slices.Clone(s.kills)
	return h
}
