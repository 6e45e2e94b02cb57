package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

// TestTenantClientDrivesNoSentinelMachinery: the manager's and the plugin's client for a
// Sentinel url reaches the master the sentinel names, and never subscribes nor asks for
// other sentinels: a hostile Sentinel's short +switch-master message killed the process
// (every manager replica, in turn, on its first probe of that Secret), and its 30,000
// announced sentinels were each asked in a goroutine of their own.
func TestTenantClientDrivesNoSentinelMachinery(t *testing.T) {
	srv := redistest.Start(t)
	sentinel := redistest.StartHostileSentinel(t, srv.Addr)
	c, err := NewTenantClient(ClientConfig{URL: "redis+sentinel://" + sentinel.Addr + "?master=m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	before := runtime.NumGoroutine()
	if err := c.Set(ctx, "reached", "the master", 0).Err(); err != nil {
		t.Fatal(err)
	}
	admin := srv.Client()
	defer admin.Close()
	if v := admin.Get(ctx, "reached").Val(); v != "the master" {
		t.Fatalf("the master has %q", v)
	}
	if n := runtime.NumGoroutine(); n > before+20 {
		t.Errorf("%d goroutines after one command, %d before", n, before)
	}
	for _, cmd := range [][]string{{"subscribe"}, {"sentinel", "sentinels"}, {"psubscribe"}} {
		if sentinel.Received(cmd...) {
			t.Errorf("the client sent %v to the sentinel", cmd)
		}
	}
}

// TestTenantClientFollowsAFailover: without a subscription, a failover is followed as
// connections are made again: once the old master is gone, the next command goes to the
// one the sentinel names now.
func TestTenantClientFollowsAFailover(t *testing.T) {
	first, second, c, promote := tenantClientOverTwoMasters(t)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	first.Stop()
	promote()
	admin := second.Client()
	defer admin.Close()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Set(ctx, "after", "failover", 0).Err() == nil && admin.Get(ctx, "after").Val() == "failover", nil
	}); err != nil {
		t.Fatalf("the new master never got the write: %v", err)
	}
}

// tenantClientOverTwoMasters starts two servers and a sentinel that names the first as
// master until promote is called, then the second; c is a tenant client through it.
func tenantClientOverTwoMasters(t *testing.T) (first, second *redistest.Server, c redis.UniversalClient, promote func()) {
	t.Helper()
	first, second = redistest.Start(t), redistest.Start(t)
	var mu sync.Mutex
	master := first.Addr()
	sentinel := redistest.StartHostileSentinel(t, func() string { mu.Lock(); defer mu.Unlock(); return master })
	c, err := NewTenantClient(ClientConfig{URL: "redis+sentinel://" + sentinel.Addr + "?master=m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return first, second, c, func() { mu.Lock(); defer mu.Unlock(); master = second.Addr() }
}

// TestSentinelAnswerThatIsNoAddressIsRefused: what a sentinel names is checked before it
// is dialled.
func TestSentinelAnswerThatIsNoAddressIsRefused(t *testing.T) {
	for name, reply := range map[string][]string{
		"one word":           {"10.0.0.1"},
		"three words":        {"10.0.0.1", "6379", "x"},
		"no port":            {"10.0.0.1", "redis"},
		"port out of range":  {"10.0.0.1", "70000"},
		"a line in the host": {"10.0.0.1\n{\"level\":\"error\"}", "6379"},
		"empty host":         {"", "6379"},
	} {
		if _, err := masterAddr(reply); err == nil || !strings.Contains(err.Error(), "over lockedcron's bounds") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if a, err := masterAddr([]string{"fd00::1", "6380"}); err != nil || a != "[fd00::1]:6380" {
		t.Errorf("an IPv6 master: %q %v", a, err)
	}
}

// TestClusterSlotMapOverTheBoundIsRefused: a Cluster seed whose slot map names 60,000
// nodes made the client a node, with its pool, of each (256 MiB held after a collection,
// past the manager's memory limit); the map is refused before go-redis acts on it.
func TestClusterSlotMapOverTheBoundIsRefused(t *testing.T) {
	var m strings.Builder
	var seedHost, seedPort string
	seed := redistest.StartScripted(t, func(cmd []string) string {
		switch {
		case len(cmd) >= 2 && cmd[0] == "cluster" && cmd[1] == "slots":
			return m.String()
		case len(cmd) >= 1 && cmd[0] == "ping":
			return "+PONG\r\n"
		}
		return ""
	})
	seedHost, seedPort, _ = net.SplitHostPort(seed.Addr)
	const replicas = 60000
	fmt.Fprintf(&m, "*1\r\n*%d\r\n:0\r\n:16383\r\n", 2+1+replicas)
	fmt.Fprintf(&m, "*2\r\n$%d\r\n%s\r\n:%s\r\n", len(seedHost), seedHost, seedPort)
	for i := range replicas {
		h := fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
		fmt.Fprintf(&m, "*2\r\n$%d\r\n%s\r\n:7000\r\n", len(h), h)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	for name, newClient := range map[string]func(ClientConfig, *AllowedHosts) (redis.UniversalClient, error){
		"tenant": NewTenantClient, "guarded": NewGuardedClient,
	} {
		c, err := newClient(ClientConfig{URL: "redis+cluster://" + seed.Addr}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil || !strings.Contains(err.Error(), "names more than 1000 nodes") {
			t.Errorf("%s: ping: %v, want the slot map refused", name, err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if grew := int64(ms.HeapInuse) - int64(before); grew > 64<<20 {
			t.Errorf("%s: the heap grew by %d MiB while the client is kept", name, grew>>20)
		}
		_ = c.Close()
	}
}

// TestLoggerKeepsAServersTextOnOneLine: go-redis's log lines quote servers (a Sentinel's
// master address, with %s): one holding "\n{…}" forged a JSON record in the manager's log,
// and an OSC sequence reached the terminal of whoever read it. Through Logger each is one
// line, escaped and cut.
func TestLoggerKeepsAServersTextOnOneLine(t *testing.T) {
	var got []string
	l := Logger{Print: func(line string) { got = append(got, line) }}
	l.Printf(context.Background(), "sentinel: selected addr=%s masterAddr=%s", "127.0.0.1:1",
		"10.0.0.1\n{\"level\":\"error\",\"msg\":\"FORGED\"}\n\x1b]0;pwned\a:6379")
	l.Printf(context.Background(), "getting command info: %s", strings.Repeat("x", 1<<20))
	if len(got) != 2 {
		t.Fatalf("%d lines: %q", len(got), got)
	}
	if strings.ContainsAny(got[0], "\n\r\x1b\a") || !strings.Contains(got[0], `\u000a{"level"`) {
		t.Errorf("forged line kept raw: %q", got[0])
	}
	if len(got[1]) > 512 {
		t.Errorf("a %d-byte line", len(got[1]))
	}
}

// TestTenantClientAsksTheOtherSentinels: the url's first sentinel hangs; the others are
// asked, and the master is reached within a probe's 2 s (the sentinels were asked one
// after another, each within the whole dial budget: the first hung one cut the manager
// off from a healthy Sentinel deployment).
func TestTenantClientAsksTheOtherSentinels(t *testing.T) {
	srv := redistest.Start(t)
	hung := redistest.StartSilent(t)
	good := redistest.StartHostileSentinel(t, srv.Addr)
	c, err := NewTenantClient(ClientConfig{URL: "redis+sentinel://" + hung + "," + good.Addr + "?master=m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping through the second sentinel: %v", err)
	}
}

// TestTenantClientLeavesADemotedMaster: once the sentinels name another master (a failover;
// the old one still answering, as it does until Sentinel reconfigures it, or for good
// across a partition), writes reach the new one within seconds, not at the connection's
// lifetime (30 s): go-redis's Sentinel client learnt it from +switch-master at once.
func TestTenantClientLeavesADemotedMaster(t *testing.T) {
	_, second, c, promote := tenantClientOverTwoMasters(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	promote()
	switched := time.Now()
	admin := second.Client()
	defer admin.Close()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_ = c.Set(ctx, "k", "after", 0).Err()
		return admin.Get(ctx, "k").Val() == "after", nil
	}); err != nil {
		t.Fatalf("the new master never got a write: %v", err)
	}
	if took := time.Since(switched); took > 6*time.Second {
		t.Errorf("writes reached the new master %v after the sentinels named it", took)
	}
}

// TestClusterBudgetSpansSlotMaps: a seed that hands out a new map of other nodes at each
// reload (and a MOVED at each command, which reloads) made the client a node of each: a
// review measured ~200 MiB in 18 s. Past the client's budget of distinct nodes, maps and
// redirects fail before the client acts on them; a map it already has passes.
func TestClusterBudgetSpansSlotMaps(t *testing.T) {
	resetClusterBudgets(t)
	ctx := context.Background()
	b := newClusterBudget()
	slotsOf := func(n int) []redis.ClusterSlot {
		nodes := []redis.ClusterNode{{Addr: "10.0.0.1:7000"}}
		for i := range 900 {
			nodes = append(nodes, redis.ClusterNode{Addr: fmt.Sprintf("10.%d.%d.%d:7000", n, i/250, i%250+1)})
		}
		return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: nodes}}
	}
	load := func(n int) error {
		cmd := redis.NewClusterSlotsCmd(ctx)
		return b.ProcessHook(func(context.Context, redis.Cmder) error {
			cmd.SetVal(slotsOf(n))
			return nil
		})(ctx, cmd)
	}
	redirect := func(to string) error {
		cmd := redis.NewStatusCmd(ctx, "set", "k", "v")
		return b.ProcessHook(func(context.Context, redis.Cmder) error {
			err := serverError("MOVED 866 " + to)
			cmd.SetErr(err)
			return err
		})(ctx, cmd)
	}
	if err := load(1); err != nil {
		t.Fatalf("the first map: %v", err)
	}
	if err := load(1); err != nil {
		t.Fatalf("the same map again: %v", err)
	}
	if err := redirect("10.1.0.5:7000"); err == nil || strings.Contains(err.Error(), "over lockedcron's bounds") {
		t.Fatalf("a redirect to a node of the map: %v, want the MOVED itself", err)
	}
	if err := load(2); err == nil || !strings.Contains(err.Error(), "named more than 1000 nodes") {
		t.Fatalf("a second map of 900 other nodes: %v, want refused", err)
	}
	for i := range 200 {
		to := fmt.Sprintf("10.200.%d.%d:7000", i/250, i%250+1)
		if i%2 == 1 {
			to = "x\t" + to // go-redis takes what follows the last space, words before and all
		}
		err := redirect(to)
		if i < MaxClusterNodes-901 {
			if err == nil || strings.Contains(err.Error(), "over lockedcron's bounds") {
				t.Fatalf("redirect %d within the budget: %v", i, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "named more than 1000 nodes") {
			t.Fatalf("redirect %d past the budget: %v, want refused", i, err)
		}
	}
}

// TestClusterBudgetOfTheProcess: clients of many Secrets, each map within a client's
// budget, together past the process's: refused too (58 Secrets of 999-node maps held the
// manager's memory limit).
func TestClusterBudgetOfTheProcess(t *testing.T) {
	resetClusterBudgets(t)
	now := time.Now()
	var last error
	for i := range MaxProcessClusterNodes/900 + 1 {
		b := newClusterBudget()
		addrs := make([]string, 900)
		for j := range addrs {
			addrs[j] = fmt.Sprintf("10.%d.%d.%d:7000", i, j/250, j%250)
		}
		last = b.admit(addrs, now)
		if last != nil && i < MaxProcessClusterNodes/900 {
			t.Fatalf("client %d refused: %v", i, last)
		}
	}
	if last == nil || !strings.Contains(last.Error(), "this process's Redis Clusters named more than") {
		t.Fatalf("the last client: %v, want refused", last)
	}
	// Addresses not named for the window no longer count.
	if err := newClusterBudget().admit([]string{"10.255.0.1:7000"}, now.Add(ClusterWindow+time.Second)); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// TestClusterSeedsCountAgainstTheBudget: the node budget counted the nodes slot maps and
// redirects name, not the url's own seeds, of each of which go-redis makes a node when it
// tries them (every one, one after another, until one answers). The seeds count when the
// client is made, and a client whose seeds would go past the process's budget is not made.
func TestClusterSeedsCountAgainstTheBudget(t *testing.T) {
	resetClusterBudgets(t)
	counted := func() int {
		clusterBudgets.Lock()
		defer clusterBudgets.Unlock()
		n := 0
		for b := range clusterBudgets.all {
			n += len(b.seen)
		}
		return n
	}
	url := "redis+cluster://10.9.0.1:7000,10.9.0.2:7000,10.9.0.3:7000"
	c, err := NewTenantClient(ClientConfig{URL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := counted(); n != 3 {
		t.Fatalf("%d nodes counted after a client of 3 seeds, want 3", n)
	}
	_ = c.Close()
	// Other Secrets' Clusters have used the process's budget up but for 2 nodes (the
	// closed client's 3 count no more).
	fillProcessBudget(t, 2)
	for name, newClient := range map[string]func(ClientConfig, *AllowedHosts) (redis.UniversalClient, error){
		"tenant": NewTenantClient, "guarded": NewGuardedClient,
	} {
		c, err := newClient(ClientConfig{URL: "redis+cluster://10.8.0.1:7000,10.8.0.2:7000,10.8.0.3:7000"}, nil)
		if err == nil {
			_ = c.Close()
		}
		if !errors.Is(err, ErrProcessBudget) {
			t.Errorf("%s: a client of 3 seeds with 2 nodes left in the process's budget: %v, want ErrProcessBudget", name, err)
		}
	}
}

// TestClusterBudgetComesBackWhenTheClientIsClosed: a closed Cluster client's nodes are
// gone, and so is their count against the process's budget. A Secret's client, replaced
// (its Secret changed) or closed unused, held what it had been named for ClusterWindow
// (15 minutes), and other Secrets' Clusters were refused meanwhile.
func TestClusterBudgetComesBackWhenTheClientIsClosed(t *testing.T) {
	resetClusterBudgets(t)
	// Other Secrets' Clusters have used the process's budget up but for 3 nodes.
	fillProcessBudget(t, 3)
	a, err := NewTenantClient(ClientConfig{URL: "redis+cluster://10.8.0.1:7000,10.8.0.2:7000,10.8.0.3:7000"}, nil)
	if err != nil {
		t.Fatalf("a client of the last 3 nodes of the budget: %v", err)
	}
	b := ClientConfig{URL: "redis+cluster://10.7.0.1:7000,10.7.0.2:7000,10.7.0.3:7000"}
	if c, err := NewTenantClient(b, nil); !errors.Is(err, ErrProcessBudget) {
		if err == nil {
			_ = c.Close()
		}
		t.Fatalf("a second client past the budget: %v, want ErrProcessBudget", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := NewTenantClient(b, nil)
	if err != nil {
		t.Fatalf("the first client closed, a client of 3 nodes: %v, want it made", err)
	}
	_ = c.Close()
}

// fillProcessBudget has other clients (other Secrets' Clusters) use the process's node
// budget up but for left nodes.
func fillProcessBudget(t *testing.T, left int) {
	t.Helper()
	for left := MaxProcessClusterNodes - left; left > 0; left -= MaxClusterNodes {
		filler := make([]string, min(left, MaxClusterNodes))
		for i := range filler {
			filler[i] = fmt.Sprintf("10.%d.%d.%d:7000", 100+left/MaxClusterNodes, i/256, i%256)
		}
		if err := newClusterBudget().admit(filler, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// resetClusterBudgets forgets the process's budgets for a test, and after it.
func resetClusterBudgets(t *testing.T) {
	reset := func() {
		clusterBudgets.Lock()
		clusterBudgets.all = map[*clusterBudget]bool{}
		clusterBudgets.Unlock()
	}
	reset()
	t.Cleanup(reset)
}

// serverError is an error reply of a Redis server, as go-redis types them.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// TestTenantClientThroughARealFailover: redis-server and redis-sentinel, SENTINEL FAILOVER:
// the manager's writes reach the new master within seconds of it (the first version kept
// writing to the demoted one for 10 s, a review measured; go-redis's Sentinel client 0.1 s).
func TestTenantClientThroughARealFailover(t *testing.T) {
	g := redistest.StartSentinel(t, 1, 1)
	c, err := NewTenantClient(ClientConfig{URL: g.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for range 3 {
		if err := c.Set(ctx, "k", "0", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	now := g.Failover()
	promoted := time.Now()
	nc := redis.NewClient(&redis.Options{Addr: now})
	defer nc.Close()
	for i := 1; ; i++ {
		v := fmt.Sprint(i)
		_ = c.Set(ctx, "k", v, 0).Err()
		if nc.Get(ctx, "k").Val() == v {
			break
		}
		if time.Since(promoted) > 20*time.Second {
			t.Fatal("no write reached the new master in 20 s")
		}
		time.Sleep(100 * time.Millisecond) // the pace of a manager's writes
	}
	if took := time.Since(promoted); took > 5*time.Second {
		t.Errorf("writes reached the new master %v after the failover", took)
	}
}

// TestTenantClientWaitsForASlowOnlySentinel: a url of one sentinel (a Service in front of
// them all) that takes over a second to answer: its answer is waited for, within the dial's
// time (it was cut at a second, with no one else to ask, and every connection failed).
func TestTenantClientWaitsForASlowOnlySentinel(t *testing.T) {
	srv := redistest.Start(t)
	slow := redistest.StartScripted(t, func(cmd []string) string {
		if len(cmd) >= 2 && cmd[0] == "sentinel" && cmd[1] == "get-master-addr-by-name" {
			time.Sleep(1300 * time.Millisecond) // a sentinel slow to answer: the case under test
			host, port, _ := net.SplitHostPort(srv.Addr())
			return redistest.Bulk(host, port)
		}
		return ""
	})
	c, err := NewTenantClient(ClientConfig{URL: "redis+sentinel://" + slow.Addr + "?master=m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping through the slow sentinel: %v", err)
	}
}
