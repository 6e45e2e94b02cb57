package lock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
)

// A process that talks to many tenants' Redis servers (the manager, the kubectl plugin)
// must not let one of them drive it: whoever a Secret's url names may be a fake Sentinel or
// Cluster seed. go-redis's Sentinel client subscribes to +switch-master and reads each
// message in a goroutine of its own, indexing its fields unchecked: a one-word message
// panicked there, out of reach of any recover, and took the manager down (and the standby
// that took over, on its first probe of the same Secret). It also takes every sentinel a
// server announces (SENTINEL SENTINELS) and asks each in a goroutine of its own. A Cluster
// seed's slot map makes a client, with its pool, of every node it names, dialled or not:
// 60,000 replicas held 256 MiB. So:
//
//   - Sentinel: NewTenantClient asks the url's sentinels for the master's address at each
//     new connection (the one that answered last alone for a second, then the others at
//     once), checks the answer, and dials the master as a plain client does: no
//     subscription, no discovery. While commands flow it asks again in the background
//     every 2 s, and a connection to a master they no longer name is closed at its next
//     command (a failover followed within a few seconds, as +switch-master did).
//   - Cluster (every client): a slot map naming more than MaxClusterNodes nodes, or more
//     ranges than the slots, is refused before go-redis acts on it, and so are maps and
//     redirects past a budget of distinct nodes per client and per process (clusterBudget).
//     The url's own seeds (at most MaxURLHosts) count against it when the client is made.
//
// lockwrap keeps go-redis's Sentinel client: it follows a failover within a run, and its
// server is its own tenant's.
// tenantConnLifetime: a Sentinel-resolved connection is made again (and the master asked
// for again) at least this often.
const tenantConnLifetime = 30 * time.Second

// ErrTopology is the error of a Sentinel answer or a Cluster slot map this project does not
// act on.
var ErrTopology = errors.New("redis topology over lockedcron's bounds")

// ErrProcessBudget: the process's Cluster clients together were named more nodes than it
// allows (one tenant's may have used them up).
var ErrProcessBudget = fmt.Errorf("%w: the Cluster nodes of all of this process's clients", ErrTopology)

// ErrNoMaster is the error of a connection none of whose sentinels named the master.
var ErrNoMaster = errors.New("no sentinel named the master")

// NewTenantClient is NewGuardedClient for a process serving many tenants: with a Sentinel
// url, a plain client whose connections go to the master the url's sentinels name (see
// above); and each server it dials must answer PING as Redis does before the url's user
// name, password or names go to it (probeRedis): a tenant's url may name any host the
// process can reach.
func NewTenantClient(cfg ClientConfig, a *AllowedHosts) (redis.UniversalClient, error) {
	o, err := guardedOptions(cfg, a, true)
	if err != nil {
		return nil, err
	}
	if o.MasterName == "" {
		return newUniversal(o)
	}
	m := &sentinelMaster{o: o, dial: o.Dialer}
	so := o.Simple()
	so.Addr = o.Addrs[0] // a label: each connection asks the sentinels
	so.Dialer = m.dialMaster
	so.ConnMaxLifetime = tenantConnLifetime
	so.DialerRetries = 2
	c := redis.NewClient(so)
	c.AddHook(m)
	return c, nil
}

// newUniversal is redis.NewUniversalClient with a Cluster's nodes bounded (clusterBudget):
// the url's seeds count as named when the client is made (go-redis makes a node of each
// it tries), and it is not made if they go past the budget; its Close gives the budget
// back.
func newUniversal(o *redis.UniversalOptions) (redis.UniversalClient, error) {
	if !o.IsClusterMode {
		return redis.NewUniversalClient(o), nil
	}
	b := newClusterBudget()
	if err := b.admit(o.Addrs, time.Now()); err != nil {
		return nil, err
	}
	co := o.Cluster()
	co.NewClient = func(opt *redis.Options) *redis.Client {
		c := redis.NewClient(opt)
		c.AddHook(b)
		return c
	}
	return &clusterClient{ClusterClient: redis.NewClusterClient(co), b: b}, nil
}

// clusterClient is a Cluster client whose addresses stop counting against the process's
// budget when it is closed: its nodes, and their pools, go with it. (They counted on for
// ClusterWindow: a Secret's client replaced, its Cluster's nodes freed, still held the
// budget other Secrets' Clusters needed.)
type clusterClient struct {
	*redis.ClusterClient
	b *clusterBudget
}

func (c *clusterClient) Close() error {
	err := c.ClusterClient.Close()
	c.b.release()
	return err
}

// asCluster is c's go-redis Cluster client, if it is one.
func asCluster(c redis.UniversalClient) (*redis.ClusterClient, bool) {
	switch c := c.(type) {
	case *clusterClient:
		return c.ClusterClient, true
	case *redis.ClusterClient:
		return c, true
	}
	return nil, false
}

const (
	// maxSentinelsAsked: the url's sentinels asked at most (at once, after the last to
	// answer alone).
	maxSentinelsAsked = 16
	// firstSentinelWait is how long the sentinel that answered last is asked alone.
	firstSentinelWait = time.Second
	// recheckMaster is how often, while commands flow, the sentinels are asked again in
	// the background: a connection to a master they no longer name is closed at its next
	// command (go-redis's Sentinel client learnt it from +switch-master).
	recheckMaster = 2 * time.Second
)

// sentinelMaster is the master of a Sentinel url as its sentinels last named it.
type sentinelMaster struct {
	o    *redis.UniversalOptions
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu       sync.Mutex
	addr     string    // the master last named ("" before)
	asked    time.Time // when the sentinels were last asked
	first    int       // the sentinel that answered last
	checking bool      // a background recheck is under way
}

// errMasterMoved ends a command on a connection to a master the sentinels no longer name;
// go-redis drops the connection and tries again on a new one (an unexpected EOF is what it
// retries).
var errMasterMoved = fmt.Errorf("the sentinels name another master: %w", io.ErrUnexpectedEOF)

// dialMaster is the client's dialer: the master the sentinels name now.
func (m *sentinelMaster) dialMaster(ctx context.Context, network, _ string) (c net.Conn, err error) {
	// go-redis may call a dialer from a goroutine of its own (a pool that keeps failing
	// retries in the background): a sentinel's answer is read here, and must not be able
	// to end the process.
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("%w: asking the sentinels failed: %v", ErrNoMaster, p)
		}
	}()
	addr, err := m.ask(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := m.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &masterConn{Conn: conn, addr: addr, m: m}, nil
}

// current is the master last named.
func (m *sentinelMaster) current() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// ask asks the sentinels for the master: the one that answered last alone for a second,
// then the others at once; the first address given wins. It records the answer.
func (m *sentinelMaster) ask(ctx context.Context) (string, error) {
	sentinels := m.o.Addrs[:min(len(m.o.Addrs), maxSentinelsAsked)]
	m.mu.Lock()
	first := m.first % len(sentinels)
	m.mu.Unlock()
	answered := func(i int, addr string) string {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.addr, m.asked, m.first = addr, time.Now(), i
		return addr
	}
	type answer struct {
		i    int
		addr string
		err  error
	}
	answers := make(chan answer, len(sentinels))
	actx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	asking := 0
	askIn := func(i int) {
		asking++
		go func() {
			a := answer{i: i}
			defer func() {
				if p := recover(); p != nil {
					a.err = fmt.Errorf("the answer failed the client: %v", p)
				}
				answers <- a
			}()
			a.addr, a.err = m.askOne(actx, sentinels[i])
		}()
	}
	// The first alone for a second (a single one, a Service in front of them all, for as
	// long as ctx allows), then the others too; its answer still counts.
	askIn(first)
	others := len(sentinels) == 1
	askOthers := func() {
		if !others {
			others = true
			for i := range sentinels {
				if i != first {
					askIn(i)
				}
			}
		}
	}
	wait := time.NewTimer(firstSentinelWait)
	defer wait.Stop()
	var errs []error
	for asking > 0 {
		select {
		case <-wait.C:
			askOthers()
		case a := <-answers:
			asking--
			if a.err == nil {
				return answered(a.i, a.addr), nil
			}
			err := fmt.Errorf("sentinel %s: %w", sentinels[a.i], a.err)
			if a.i == first {
				errs = append([]error{err}, errs...) // the one pingProblem tells of
			} else {
				errs = append(errs, err)
			}
			askOthers()
		}
	}
	return "", &NoMasterError{Master: m.o.MasterName, Errs: errs}
}

// askOne asks one sentinel, on a connection of its own (closed after).
func (m *sentinelMaster) askOne(ctx context.Context, sentinel string) (string, error) {
	o := m.o
	sc := redis.NewSentinelClient(&redis.Options{
		Addr: sentinel, Dialer: m.dial, Username: o.SentinelUsername, Password: o.SentinelPassword,
		Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1, DialerRetries: 1,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, ContextTimeoutEnabled: true,
	})
	defer sc.Close()
	reply, err := sc.GetMasterAddrByName(ctx, o.MasterName).Result()
	if err != nil {
		return "", err
	}
	return masterAddr(reply)
}

// recheck asks the sentinels again, in the background, when they were last asked over
// recheckMaster ago (one recheck at a time).
func (m *sentinelMaster) recheck() {
	m.mu.Lock()
	if m.checking || time.Since(m.asked) < recheckMaster {
		m.mu.Unlock()
		return
	}
	m.checking = true
	m.mu.Unlock()
	go func() {
		defer func() {
			_ = recover() // a failed answer is no answer: the master stays as it was
			m.mu.Lock()
			m.checking = false
			m.asked = time.Now() // failed too: not again before recheckMaster
			m.mu.Unlock()
		}()
		timeout := m.o.DialTimeout
		if timeout <= 0 { // dial_timeout=0 in the url: go-redis's default
			timeout = defaultDialTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, _ = m.ask(ctx)
	}()
}

// The hook: each command may start a recheck.
func (m *sentinelMaster) DialHook(next redis.DialHook) redis.DialHook { return next }

func (m *sentinelMaster) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		m.recheck()
		err := next(ctx, cmd)
		// go-redis tries a command 4 times; each connection to the old master it meets
		// fails at once, before sending: more of them may be pooled.
		for range maxMovedRetries {
			if !errors.Is(err, errMasterMoved) {
				break
			}
			err = next(ctx, cmd)
		}
		return err
	}
}

// maxMovedRetries bounds the extra tries of a command that met connections to an old
// master (the pool's size is 10 per CPU by default).
const maxMovedRetries = 16

func (m *sentinelMaster) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		m.recheck()
		return next(ctx, cmds)
	}
}

// masterConn is a connection to the master at addr: a command on it once the sentinels
// name another fails (errMasterMoved), and the connection is closed.
type masterConn struct {
	net.Conn
	addr string
	m    *sentinelMaster
}

func (c *masterConn) Write(b []byte) (int, error) {
	if cur := c.m.current(); cur != "" && cur != c.addr {
		_ = c.Conn.Close()
		return 0, errMasterMoved
	}
	return c.Conn.Write(b)
}

// NoMasterError: none of a Sentinel url's sentinels named the master; Errs says why, for
// each one asked.
type NoMasterError struct {
	Master string
	Errs   []error
}

func (e *NoMasterError) Error() string {
	return fmt.Sprintf("%v %q: %v", ErrNoMaster, e.Master, errors.Join(e.Errs...))
}

func (e *NoMasterError) Is(target error) bool { return target == ErrNoMaster }

// masterAddr is a SENTINEL GET-MASTER-ADDR-BY-NAME answer as an address, if it is one.
func masterAddr(reply []string) (string, error) {
	if len(reply) != 2 {
		return "", fmt.Errorf("%w: the master's address is %d words, not a host and a port", ErrTopology, len(reply))
	}
	host, port := reply[0], reply[1]
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%w: the master's port is not a port", ErrTopology)
	}
	if host == "" || len(host) > 255 || strings.IndexFunc(host, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || r == '/' }) >= 0 {
		return "", fmt.Errorf("%w: the master's host is not a host name or address", ErrTopology)
	}
	return net.JoinHostPort(host, port), nil
}

// A Cluster client makes a node (a client with its pool, about 4.4 KiB) of every address a
// slot map or a MOVED or ASK redirect names, and frees those a newer map leaves out a
// minute later. A seed handing out a new map of other nodes at each reload (a MOVED
// reloads) kept thousands. So each client has a budget of distinct addresses over
// ClusterWindow, and the process one over all its clients: a slot map or a redirect that
// would go past either fails (ErrTopology) before the client acts on it.
const (
	// MaxClusterNodes bounds the distinct nodes (masters and replicas) a client may have
	// had named in ClusterWindow: Redis Cluster is meant for up to 1,000 nodes.
	MaxClusterNodes = 1000
	// MaxProcessClusterNodes bounds them over every client of the process (about 36 MiB).
	MaxProcessClusterNodes = 8192
	// maxSlotRanges: the slots.
	maxSlotRanges = 16384
	// ClusterWindow: an address counts for this long after it was last named. It outlasts
	// an idle client (the manager closes a Secret's after 10 minutes unused), whose map
	// is not reloaded while its nodes are held.
	ClusterWindow = 15 * time.Minute
)

// clusterBudgets are the process's budgets, for its count of addresses.
var clusterBudgets = struct {
	sync.Mutex
	all map[*clusterBudget]bool
}{all: map[*clusterBudget]bool{}}

// clusterBudget is one Cluster client's: the addresses named, and when last.
type clusterBudget struct {
	seen   map[string]time.Time // under clusterBudgets' lock
	closed bool                 // its client is: nothing more counts
}

// release forgets b's addresses: its client is closed.
func (b *clusterBudget) release() {
	clusterBudgets.Lock()
	defer clusterBudgets.Unlock()
	b.closed = true
	clear(b.seen)
	delete(clusterBudgets.all, b)
}

func newClusterBudget() *clusterBudget { return &clusterBudget{seen: map[string]time.Time{}} }

// admit counts addrs as named now, or says why they go past a budget (and counts none).
func (b *clusterBudget) admit(addrs []string, now time.Time) error {
	clusterBudgets.Lock()
	defer clusterBudgets.Unlock()
	if b.closed {
		return redis.ErrClosed // a reload that was under way when the client was closed
	}
	total := 0
	for other := range clusterBudgets.all {
		for a, at := range other.seen {
			if now.Sub(at) > ClusterWindow {
				delete(other.seen, a)
			}
		}
		if len(other.seen) == 0 && other != b {
			delete(clusterBudgets.all, other)
		}
		total += len(other.seen)
	}
	fresh := 0
	for _, a := range addrs {
		if _, ok := b.seen[a]; !ok {
			fresh++
		}
	}
	switch {
	case len(b.seen)+fresh > MaxClusterNodes:
		return fmt.Errorf("%w: the Cluster named more than %d nodes in %v", ErrTopology, MaxClusterNodes, ClusterWindow)
	case total+fresh > MaxProcessClusterNodes:
		return fmt.Errorf("%w: this process's Redis Clusters named more than %d nodes in %v", ErrProcessBudget, MaxProcessClusterNodes, ClusterWindow)
	}
	for _, a := range addrs {
		b.seen[a] = now
	}
	if len(b.seen) > 0 {
		clusterBudgets.all[b] = true
	}
	return nil
}

func (b *clusterBudget) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *clusterBudget) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if rerr := b.redirect(cmd.Err()); rerr != nil {
				cmd.SetErr(rerr)
				err = rerr
			}
		}
		return err
	}
}

func (b *clusterBudget) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if sc, ok := cmd.(*redis.ClusterSlotsCmd); ok && err == nil {
			if err = checkSlotMap(sc.Val()); err == nil {
				err = b.admit(slotMapAddrs(sc.Val()), time.Now())
			}
			if err != nil {
				sc.SetErr(err)
			}
			return err
		}
		if rerr := b.redirect(err); rerr != nil {
			cmd.SetErr(rerr)
			return rerr
		}
		return err
	}
}

// redirect counts the node a MOVED or ASK error names; an error if over a budget.
func (b *clusterBudget) redirect(err error) error {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return nil
	}
	// As go-redis reads it (proto.extractAddr, internal.GetAddr): whatever follows the last
	// space, whatever the words before (a review found "MOVED 1 x addr" and a tab past a
	// three-word parse, and a node made for each).
	msg := rerr.Error()
	if !strings.HasPrefix(msg, "MOVED ") && !strings.HasPrefix(msg, "ASK ") {
		return nil
	}
	return b.admit([]string{redirectAddr(msg[strings.LastIndexByte(msg, ' ')+1:])}, time.Now())
}

// redirectAddr is a redirect's address as go-redis keys its node (internal.GetAddr).
func redirectAddr(addr string) string {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 || strings.IndexByte(addr, '.') >= 0 || strings.HasPrefix(addr, "[") {
		return addr
	}
	return net.JoinHostPort(addr[:i], addr[i+1:])
}

// slotMapAddrs are the distinct addresses of a slot map.
func slotMapAddrs(slots []redis.ClusterSlot) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range slots {
		for _, n := range s.Nodes {
			if !seen[n.Addr] {
				seen[n.Addr] = true
				out = append(out, n.Addr)
			}
		}
	}
	return out
}

// checkSlotMap says why a slot map is over the bounds, or nil.
func checkSlotMap(slots []redis.ClusterSlot) error {
	if len(slots) > maxSlotRanges {
		return fmt.Errorf("%w: the slot map has %d ranges, more than the %d slots", ErrTopology, len(slots), maxSlotRanges)
	}
	nodes := map[string]bool{}
	for _, s := range slots {
		for _, n := range s.Nodes {
			if nodes[n.Addr] {
				continue
			}
			if len(nodes) == MaxClusterNodes {
				return fmt.Errorf("%w: the slot map names more than %d nodes", ErrTopology, MaxClusterNodes)
			}
			nodes[n.Addr] = true
		}
	}
	return nil
}
