// Package redistest starts real redis-server and redis-sentinel processes for tests: on
// 127.0.0.1, random free ports, a temporary directory each, killed when the test ends
// (also when it fails). It needs redis-server, redis-sentinel and redis-cli on PATH.
//
//	s := redistest.Start(t)                       // standalone
//	s := redistest.Start(t, redistest.WithTLS())  // TLS only; s.CACert() is the CA's PEM
//	g := redistest.StartSentinel(t, 1, 3)         // master, 1 replica, 3 sentinels; g.URL()
//	c := redistest.StartCluster(t, 3)             // 3 masters, slots assigned; c.URL()
package redistest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"
)

// StartTimeout bounds how long a process may take to answer PING.
const StartTimeout = 15 * time.Second

// Server is one redis-server (or redis-sentinel) process.
type Server struct {
	t        testing.TB
	Port     int    // the (TLS) port it listens on
	Dir      string // its working directory (config, logs, AOF)
	sentinel bool
	args     []string
	tls      *tlsFiles

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

type options struct {
	args    []string
	tls     bool
	persist bool
}

// Option configures Start.
type Option func(*options)

// WithArgs adds redis-server command-line options ("--maxmemory", "10mb", …).
func WithArgs(args ...string) Option { return func(o *options) { o.args = append(o.args, args...) } }

// WithTLS serves TLS only, with a certificate for 127.0.0.1 and localhost signed by a CA
// made for this server (Server.CACert). Clients need no certificate.
func WithTLS() Option { return func(o *options) { o.tls = true } }

// WithPersistence turns on the AOF with fsync on every write, so that Restart (or a kill
// and Start) keeps the data, key expiry times included.
func WithPersistence() Option { return func(o *options) { o.persist = true } }

// Start starts a standalone redis-server and waits until it answers.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	s := &Server{t: t, Dir: t.TempDir()}
	if o.tls {
		s.tls = makeTLS(t, s.Dir)
	}
	if o.persist {
		s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always")
	}
	s.args = append(s.args, o.args...)
	s.startFresh()
	return s
}

func (s *Server) startFresh() {
	s.t.Helper()
	var err error
	for try := 0; try < 5; try++ {
		s.Port = freePort(s.t, s.needsBusPort())
		if err = s.launch(); err == nil {
			return
		}
	}
	s.t.Fatalf("redistest: %v", err)
}

func (s *Server) needsBusPort() bool {
	for _, a := range s.args {
		if a == "--cluster-enabled" {
			return true
		}
	}
	return false
}

// launch starts the process on s.Port and waits for PING; the caller retries on error.
func (s *Server) launch() error {
	bin := "redis-server"
	var args []string
	if s.sentinel {
		bin = "redis-sentinel"
		args = []string{filepath.Join(s.Dir, "sentinel.conf")}
		if err := s.writeSentinelPort(); err != nil {
			return err
		}
	} else {
		args = []string{"--bind", "127.0.0.1", "--dir", s.Dir, "--save", "", "--daemonize", "no",
			"--logfile", "redis.log", "--protected-mode", "no"}
		if s.tls != nil {
			args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.Port),
				"--tls-cert-file", s.tls.cert, "--tls-key-file", s.tls.key,
				"--tls-ca-cert-file", s.tls.ca, "--tls-auth-clients", "no",
				"--tls-replication", "yes", "--tls-cluster", "yes")
		} else {
			args = append(args, "--port", strconv.Itoa(s.Port))
		}
		args = append(args, s.args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.Dir
	out, err := os.OpenFile(filepath.Join(s.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	// Die with the test binary even if it is killed before its cleanups run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	s.t.Cleanup(s.Stop)

	c := s.Client()
	defer c.Close()
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, StartTimeout, true,
		func(ctx context.Context) (bool, error) {
			select {
			case <-done:
				return false, fmt.Errorf("%s on port %d exited: %s", bin, s.Port, s.logTail())
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			// Our process, not someone else's server that took the port first.
			info, err := c.Info(pctx, "server").Result()
			if err != nil {
				return false, nil
			}
			if !strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
				return false, fmt.Errorf("port %d answered by another process", s.Port)
			}
			return true, nil
		})
	if err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Addr is "127.0.0.1:<port>".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL is redis://127.0.0.1:<port> (rediss:// with TLS).
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// CACert is the PEM of the CA that signed a WithTLS server's certificate (nil otherwise).
func (s *Server) CACert() []byte {
	if s.tls == nil {
		return nil
	}
	return s.tls.caPEM
}

// TLSConfig is a client TLS configuration trusting CACert (nil without TLS).
func (s *Server) TLSConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.tls.caPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// Client is an administrative client (default user) to this process; close it after use.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: s.Addr(), TLSConfig: s.TLSConfig(), Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second,
	})
}

// Do runs one command as the default user and returns its reply, failing the test on error.
func (s *Server) Do(args ...any) any {
	s.t.Helper()
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.t.Fatalf("redistest: %v on %s: %v", args, s.Addr(), err)
	}
	return v
}

// Stop kills the process (SIGKILL) and waits for it. Safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // in case it is paused
	_ = cmd.Process.Kill()
	<-done
	if s.t.Failed() {
		s.t.Logf("redistest: %s log tail:\n%s", s.Addr(), s.logTail())
	}
}

// Restart kills the process and starts it again on the same port and directory. Without
// WithPersistence it comes back empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// Start starts a stopped server again on its port (see Restart).
func (s *Server) Start() {
	s.t.Helper()
	var err error
	for try := 0; try < 50; try++ { // the port may linger briefly
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart: %v", err)
}

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Pause freezes the process (SIGSTOP); Resume thaws it.
func (s *Server) Pause()  { s.signal(syscall.SIGSTOP) }
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

func (s *Server) logTail() string {
	var all []byte
	for _, f := range []string{"redis.log", "stdout.log"} {
		b, _ := os.ReadFile(filepath.Join(s.Dir, f))
		all = append(all, b...)
	}
	if len(all) > 4000 {
		all = all[len(all)-4000:]
	}
	return string(bytes.TrimSpace(all))
}

// freePort returns a loopback port nobody listens on (and port+10000 too when bus is set,
// for a cluster node's bus port).
func freePort(t testing.TB, bus bool) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("redistest: free port: %v", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !bus {
			return p
		}
		if p+10000 > 65535 {
			continue
		}
		if l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000))); err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatalf("redistest: no free port pair")
	return 0
}

// StartReplicaOf starts a replica of master and waits until it is in sync. Pause it to
// make WAIT count one acknowledgement fewer.
func StartReplicaOf(t testing.TB, master *Server) *Server {
	t.Helper()
	r := Start(t, WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(master.Port)))
	waitFor(t, "replica "+r.Addr()+" in sync", func(ctx context.Context) bool {
		return strings.Contains(infoOf(ctx, r, "replication"), "master_link_status:up")
	})
	return r
}

// Sentinel is a master with replicas watched by sentinels.
type Sentinel struct {
	t          testing.TB
	MasterName string
	Master     *Server   // the master at start (after a failover, see CurrentMaster)
	Replicas   []*Server // its replicas at start
	Sentinels  []*Server // the sentinels
}

// StartSentinel starts a master, replicas and sentinels (quorum: a majority) monitoring
// it as "mymaster" with a 1s down-after, and waits until every sentinel sees every replica.
func StartSentinel(t testing.TB, replicas, sentinels int) *Sentinel {
	t.Helper()
	g := &Sentinel{t: t, MasterName: "mymaster"}
	g.Master = Start(t)
	for i := 0; i < replicas; i++ {
		g.Replicas = append(g.Replicas, StartReplicaOf(t, g.Master))
	}
	for i := 0; i < sentinels; i++ {
		s := &Server{t: t, Dir: t.TempDir(), sentinel: true}
		s.args = []string{strconv.Itoa(g.Master.Port), strconv.Itoa(sentinels/2 + 1)}
		s.startFresh()
		g.Sentinels = append(g.Sentinels, s)
	}
	for _, s := range g.Sentinels {
		waitFor(t, "sentinel "+s.Addr()+" sees replicas and sentinels", func(ctx context.Context) bool {
			c := s.Client()
			defer c.Close()
			m, err := c.Do(ctx, "SENTINEL", "MASTER", g.MasterName).Result()
			if err != nil {
				return false
			}
			f := fields(m)
			return f["num-slaves"] == strconv.Itoa(replicas) && f["num-other-sentinels"] == strconv.Itoa(sentinels-1)
		})
	}
	return g
}

func (s *Server) writeSentinelPort() error {
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %s
logfile "redis.log"
sentinel monitor mymaster 127.0.0.1 %s %s
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 10000
sentinel parallel-syncs mymaster 1
`, s.Port, s.Dir, s.args[0], s.args[1])
	return os.WriteFile(filepath.Join(s.Dir, "sentinel.conf"), []byte(conf), 0o600)
}

// URL is redis+sentinel://<sentinels>/0?master=mymaster.
func (g *Sentinel) URL() string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr()
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/0?master=" + g.MasterName
}

// CurrentMaster is the address the sentinels give for the master.
func (g *Sentinel) CurrentMaster(ctx context.Context) (string, error) {
	c := g.Sentinels[0].Client()
	defer c.Close()
	v, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.MasterName).StringSlice()
	if err != nil {
		return "", err
	}
	if len(v) != 2 {
		return "", fmt.Errorf("redistest: master addr %v", v)
	}
	return net.JoinHostPort(v[0], v[1]), nil
}

// Failover forces a failover and waits until the sentinels name a new master that says
// it is a master. It returns the new master's address.
func (g *Sentinel) Failover() string {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old, err := g.CurrentMaster(ctx)
	if err != nil {
		g.t.Fatalf("redistest: current master: %v", err)
	}
	// A sentinel that has not yet learnt of an in-sync replica refuses (NOGOODSLAVE): ask
	// again until it takes the failover.
	sc := g.Sentinels[0].Client()
	defer sc.Close()
	waitFor(g.t, "a sentinel taking the failover", func(ctx context.Context) bool {
		err := sc.Do(ctx, "SENTINEL", "FAILOVER", g.MasterName).Err()
		if err != nil && !strings.Contains(err.Error(), "NOGOODSLAVE") {
			g.t.Fatalf("redistest: SENTINEL FAILOVER on %s: %v", g.Sentinels[0].Addr(), err)
		}
		return err == nil
	})
	var now string
	waitFor(g.t, "failover away from "+old, func(ctx context.Context) bool {
		now, err = g.CurrentMaster(ctx)
		if err != nil || now == old {
			return false
		}
		for _, s := range append([]*Server{g.Master}, g.Replicas...) {
			if s.Addr() == now {
				return strings.Contains(infoOf(ctx, s, "replication"), "role:master")
			}
		}
		return false
	})
	return now
}

// Cluster is a Redis Cluster.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n (≥3) cluster-enabled servers, joins them with redis-cli --cluster
// create (no replicas) and waits until every node reports cluster_state:ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return startCluster(t, n, 0)
}

// StartReplicatedCluster starts a Redis Cluster of masters (≥3) with one replica each and
// waits until every node reports cluster_state:ok and every replica is in sync.
func StartReplicatedCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	c := startCluster(t, 2*masters, 1)
	for _, s := range c.Nodes {
		waitFor(t, "replica "+s.Addr()+" in sync", func(ctx context.Context) bool {
			info := infoOf(ctx, s, "replication")
			return strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")
		})
	}
	return c
}

func startCluster(t testing.TB, n, replicas int) *Cluster {
	t.Helper()
	c := &Cluster{}
	args := []string{"create"}
	for i := 0; i < n; i++ {
		s := Start(t, WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--appendonly", "no"))
		c.Nodes = append(c.Nodes, s)
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cmd := exec.Command("redis-cli", append([]string{"--cluster"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range c.Nodes {
		waitFor(t, "cluster_state:ok on "+s.Addr(), func(ctx context.Context) bool {
			cl := s.Client()
			defer cl.Close()
			info, err := cl.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n))
		})
	}
	return c
}

// URL is redis+cluster://<all nodes>.
func (c *Cluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

func infoOf(ctx context.Context, s *Server, section string) string {
	c := s.Client()
	defer c.Close()
	v, _ := c.Info(ctx, section).Result()
	return v
}

func fields(v any) map[string]string {
	out := map[string]string{}
	switch m := v.(type) {
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			out[fmt.Sprint(m[i])] = fmt.Sprint(m[i+1])
		}
	case map[any]any:
		for k, val := range m {
			out[fmt.Sprint(k)] = fmt.Sprint(val)
		}
	}
	return out
}

func waitFor(t testing.TB, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return cond(cctx), nil
		})
	if err != nil {
		t.Fatalf("redistest: waiting for %s: %v", what, err)
	}
}
