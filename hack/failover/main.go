// Command failover measures the manager's failover gap on a real kube-apiserver + etcd
// (envtest's, from hack/k8s-binaries.sh) with two real manager processes, no kubelet:
// a LockedCronJob runs every 5 s; the leading manager is stopped (SIGTERM: a graceful
// stop, which hands the Lease back; SIGKILL: a crash, which leaves it to expire) and the
// time from the stop to the first pod of a later occurrence is printed. No kubelet runs
// the pods: each is deleted once seen, as if it had run.
//
//	KUBEBUILDER_ASSETS="$(hack/k8s-binaries.sh)" go run ./hack/failover -rounds 3
//
// The e2e suite measures the same on the local cluster (test/e2e/install_test.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

func main() {
	rounds := flag.Int("rounds", 3, "failovers of each kind (graceful, crash)")
	flag.Parse()
	logf.SetLogger(logr.Discard())
	if err := run(*rounds); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// manager is one manager process; leading is set when its log says it took the Lease.
type manager struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	leading bool
	done    chan struct{}
}

func (m *manager) isLeading() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.leading }

func startManager(bin, kubeconfig string) (*manager, error) {
	m := &manager{done: make(chan struct{})}
	m.cmd = exec.Command(bin, "--leader-elect", "--leader-election-namespace=default",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--cluster-name=bench")
	m.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := m.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		logf, _ := os.Create(filepath.Join(os.TempDir(), fmt.Sprintf("lockedcron-failover-manager-%d.log", m.cmd.Process.Pid)))
		defer logf.Close()
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if strings.Contains(strings.ToLower(sc.Text()), "successfully acquired lease") {
				m.mu.Lock()
				m.leading = true
				m.mu.Unlock()
			}
		}
		_ = m.cmd.Wait()
		close(m.done)
	}()
	return m, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func run(rounds int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "lockedcron-failover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the manager (run from the repository root): %w", err)
	}

	port, err := freePort()
	if err != nil {
		return err
	}
	redis := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := redis.Start(); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	defer func() { _ = redis.Process.Kill(); _ = redis.Wait() }()

	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("envtest (set KUBEBUILDER_ASSETS=\"$(hack/k8s-binaries.sh)\"): %w", err)
	}
	defer func() { _ = env.Stop() }()
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "bench", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ns := "bench"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "redis", Namespace: ns},
		StringData: map[string]string{"url": fmt.Sprintf("redis://127.0.0.1:%d/0", port)}}); err != nil {
		return err
	}
	job := &v1alpha1.LockedCronJob{}
	manifest := `{"apiVersion":"scheduling.lockedcron.io/v1alpha1","kind":"LockedCronJob",
"metadata":{"name":"every5s","namespace":"bench"},
"spec":{"schedule":"*/5 * * * * *","lock":{"key":"bench/every5s","ttl":"10s","killGracePeriod":"2s","redis":{"secretRef":{"name":"redis"}}},
"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"job","image":"busybox","command":["true"]}]}}}}`
	if err := jsonDecode(manifest, job); err != nil {
		return err
	}
	if err := k8s.Create(ctx, job); err != nil {
		return err
	}

	var managers []*manager
	defer func() {
		for _, m := range managers {
			_ = m.cmd.Process.Kill()
		}
	}()
	for i := 0; i < 2; i++ {
		m, err := startManager(bin, kubeconfig)
		if err != nil {
			return err
		}
		managers = append(managers, m)
	}

	newPodAfter := func(t time.Time, deadline time.Duration) (string, time.Duration, error) {
		stop := time.Now().Add(deadline)
		for time.Now().Before(stop) {
			var pods corev1.PodList
			if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{runpod.LabelJob: job.Name}); err != nil {
				return "", 0, err
			}
			for _, p := range pods.Items {
				occ, err := time.Parse(time.RFC3339, p.Annotations[runpod.AnnotationScheduledTime])
				if err == nil && occ.After(t) {
					return p.Name, time.Since(t), nil
				}
				// No kubelet here: a pod never starts, and the controller lets at most one
				// pod per job wait to start. Deleting it (counted as missed) frees the way.
				if p.DeletionTimestamp == nil {
					if err := k8s.Delete(ctx, &p); client.IgnoreNotFound(err) != nil {
						return "", 0, err
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return "", 0, fmt.Errorf("no pod for an occurrence after %s within %s", t.Format(time.RFC3339Nano), deadline)
	}
	if _, _, err := newPodAfter(time.Now(), time.Minute); err != nil {
		return fmt.Errorf("first pod: %w", err)
	}

	fmt.Printf("%-9s %-5s %-28s %s\n", "stop", "round", "first pod after the stop", "gap")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		for r := 1; r <= rounds; r++ {
			var leader *manager
			for deadline := time.Now().Add(30 * time.Second); leader == nil && time.Now().Before(deadline); {
				for _, m := range managers {
					if m.isLeading() {
						leader = m
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			if leader == nil {
				return fmt.Errorf("no manager leads")
			}
			if err := leader.cmd.Process.Signal(sig); err != nil {
				return err
			}
			stopped := time.Now()
			pod, gap, err := newPodAfter(stopped, time.Minute)
			if err != nil {
				return err
			}
			fmt.Printf("%-9s %-5d %-28s %s\n", map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[sig], r, pod, gap.Round(time.Millisecond))
			<-leader.done
			// Replace it, so that there are two managers again.
			for i, m := range managers {
				if m == leader {
					nm, err := startManager(bin, kubeconfig)
					if err != nil {
						return err
					}
					managers[i] = nm
				}
			}
		}
	}
	return nil
}

func jsonDecode(s string, into any) error {
	return json.Unmarshal([]byte(s), into)
}
