package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
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
//   - Sentinel: NewTenantClient asks the url's sentinels, in turn, for the master's address
//     at each new connection, checks the answer, and dials the master as a plain client
//     does: no subscription, no discovery. A failover is followed as connections are made
//     again (tenantConnLifetime, or a connection that failed).
//   - Cluster (NewGuardedClient too): a slot map naming more than maxClusterNodes nodes, or
//     more ranges than the slots, is refused before go-redis acts on it.
//
// lockwrap keeps go-redis's Sentinel client: it follows a failover within a run, and its
// server is its own tenant's.
const (
	// maxClusterNodes bounds the distinct nodes (masters and replicas) of a slot map:
	// Redis Cluster is meant for up to 1,000 nodes.
	maxClusterNodes = 1000
	// maxSlotRanges: the slots.
	maxSlotRanges = 16384
	// tenantConnLifetime: a Sentinel-resolved connection is made again (and the master
	// asked for again) at least this often.
	tenantConnLifetime = 30 * time.Second
)

// ErrTopology is the error of a Sentinel answer or a Cluster slot map this project does not
// act on.
var ErrTopology = errors.New("redis topology over lockedcron's bounds")

// ErrNoMaster is the error of a connection none of whose sentinels named the master.
var ErrNoMaster = errors.New("no sentinel named the master")

// NewTenantClient is NewGuardedClient for a process serving many tenants: with a Sentinel
// url, a plain client whose connections go to the master the url's sentinels name (see
// above).
func NewTenantClient(cfg ClientConfig, a *AllowedHosts) (redis.UniversalClient, error) {
	o, err := ParseURL(cfg)
	if err != nil {
		return nil, err
	}
	if err := a.CheckAddrs(o.Addrs); err != nil {
		return nil, err
	}
	o.Dialer = guardedDialer(o, a)
	if o.MasterName == "" {
		return newUniversal(o), nil
	}
	so := o.Simple()
	so.Addr = o.Addrs[0] // a label: each connection asks the sentinels
	so.Dialer = sentinelDialer(o, a)
	so.ConnMaxLifetime = tenantConnLifetime
	return redis.NewClient(so), nil
}

// newUniversal is redis.NewUniversalClient with a Cluster's slot maps bounded.
func newUniversal(o *redis.UniversalOptions) redis.UniversalClient {
	if !o.IsClusterMode {
		return redis.NewUniversalClient(o)
	}
	co := o.Cluster()
	co.NewClient = func(opt *redis.Options) *redis.Client {
		c := redis.NewClient(opt)
		c.AddHook(slotMapBound{})
		return c
	}
	return redis.NewClusterClient(co)
}

// sentinelDialer dials the master that the first of o's sentinels to answer names, each
// sentinel asked on a connection of its own (closed after), through the guarded dialer.
func sentinelDialer(o *redis.UniversalOptions, a *AllowedHosts) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := guardedDialer(o, a)
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		master, err := askSentinels(ctx, o, dial)
		if err != nil {
			return nil, err
		}
		return dial(ctx, network, master)
	}
}

// askSentinels returns the master's address as the first of o's sentinels to answer says
// it, or why none did.
func askSentinels(ctx context.Context, o *redis.UniversalOptions, dial func(context.Context, string, string) (net.Conn, error)) (string, error) {
	var errs []error
	for _, s := range o.Addrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: s, Dialer: dial, Username: o.SentinelUsername, Password: o.SentinelPassword,
			Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, ContextTimeoutEnabled: true,
		})
		reply, err := sc.GetMasterAddrByName(ctx, o.MasterName).Result()
		_ = sc.Close()
		if err == nil {
			var addr string
			if addr, err = masterAddr(reply); err == nil {
				return addr, nil
			}
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", s, err))
		if ctx.Err() != nil {
			break
		}
	}
	return "", fmt.Errorf("%w %q: %w", ErrNoMaster, o.MasterName, errors.Join(errs...))
}

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

// slotMapBound fails a CLUSTER SLOTS answer over the bounds before the Cluster client
// makes a node of each address in it.
type slotMapBound struct{}

func (slotMapBound) DialHook(next redis.DialHook) redis.DialHook { return next }

func (slotMapBound) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (slotMapBound) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if sc, ok := cmd.(*redis.ClusterSlotsCmd); ok && err == nil {
			if err = checkSlotMap(sc.Val()); err != nil {
				sc.SetErr(err)
			}
		}
		return err
	}
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
			if len(nodes) == maxClusterNodes {
				return fmt.Errorf("%w: the slot map names more than %d nodes", ErrTopology, maxClusterNodes)
			}
			nodes[n.Addr] = true
		}
	}
	return nil
}
