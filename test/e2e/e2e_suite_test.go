//go:build e2e

// Package e2e proves lockedcron on a real single-node cluster (hack/cluster): real
// kube-apiserver, scheduler, controller-manager, kubelet, containerd and runc, the operator
// deployed with config/local, and the job image recording every run on a Redis audit
// list, so the tests check what actually ran, not what the operator says ran.
// Run it with `make test-e2e` (or `make test`), which brings the cluster up.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

var (
	ctx       = context.Background()
	k8s       client.Client
	rdb       *redis.Client
	podRedis  string // the Redis URL as pods see it
	hostRedis string // the Redis URL as this test sees it
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "lockedcron end-to-end suite")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// rarely is a schedule that does not fire while the suite runs, for specs that run a job
// by hand: yearly, on the 1st of the month five or six months from the run ("0 0 1 1 *"
// fired in a suite that ran across New Year's midnight).
var rarely = fmt.Sprintf("0 0 1 %d *", (int(time.Now().UTC().Month())+5)%12+1)

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBECONFIG")).NotTo(BeEmpty(), "run through `make test-e2e`, which brings up the local cluster and sets KUBECONFIG")
	hostRedis = envOr("LOCKEDCRON_E2E_REDIS_HOST_URL", "redis://127.0.0.1:6379/0")
	podRedis = envOr("LOCKEDCRON_E2E_REDIS_POD_URL", "redis://10.244.0.1:6379/0")

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	cfg, err := ctrl.GetConfig()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	opt, err := redis.ParseURL(hostRedis)
	Expect(err).NotTo(HaveOccurred())
	rdb = redis.NewClient(opt)
	Expect(rdb.Ping(ctx).Err()).To(Succeed())

	out, err := kubectl("-n", "lockedcron-system", "rollout", "status", "deployment/lockedcron-controller-manager", "--timeout=120s")
	Expect(err).NotTo(HaveOccurred(), out)
})

// kubectl runs kubectl against the cluster in KUBECONFIG and returns stdout+stderr.
func kubectl(args ...string) (string, error) {
	return kubectlIn("", args...)
}

func kubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, envOr("KUBECTL", "kubectl"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	// kubectl 1.32 warns about skew against a 1.37 server; that is not output.
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(l, "WARNING: version difference") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n"), err
}

// dumpOnFailure prints what a person would look at first: controller logs, events and
// descriptions.
func dumpOnFailure(namespaces ...string) {
	if !CurrentSpecReport().Failed() {
		return
	}
	for _, args := range [][]string{
		{"-n", "lockedcron-system", "logs", "deployment/lockedcron-controller-manager", "--tail=200"},
		{"get", "lcj", "-A", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
	} {
		out, _ := kubectl(args...)
		fmt.Fprintf(GinkgoWriter, "\n$ kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
	for _, ns := range namespaces {
		for _, args := range [][]string{
			{"-n", ns, "describe", "lcj"},
			{"-n", ns, "get", "events", "--sort-by=.metadata.creationTimestamp"},
		} {
			out, _ := kubectl(args...)
			fmt.Fprintf(GinkgoWriter, "\n$ kubectl %s\n%s\n", strings.Join(args, " "), out)
		}
	}
}

func runScript(path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
