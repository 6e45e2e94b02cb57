//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/lockedcron/lockedcron/internal/plugin"
)

// kubectl lockedcron, found by kubectl on PATH as any plugin, against the real cluster.
var _ = Describe("kubectl lockedcron", Ordered, func() {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	var namespaces []string
	var binDir string

	// lockedcron runs `kubectl lockedcron args…` and returns stdout, stderr and the exit code.
	lockedcron := func(args ...string) (string, string, int) {
		cmd := exec.CommandContext(ctx, envOr("KUBECTL", "kubectl"), append([]string{"lockedcron"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		return out.String(), errOut.String(), code
	}

	BeforeAll(func() {
		binDir = GinkgoT().TempDir()
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(binDir, "kubectl-lockedcron"),
			"github.com/lockedcron/lockedcron/cmd/kubectl-lockedcron")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
	})
	AfterEach(func() { dumpOnFailure(namespaces...) })
	AfterAll(func() {
		for _, ns := range namespaces {
			_, _ = kubectl("delete", "namespace", ns, "--wait=false")
		}
	})

	It("shows the live holder of the lock while a job runs", func() {
		j := job{ns: "e2e-plugin-status-" + suffix, name: "slow", key: "e2e/plugin-status-" + suffix,
			schedule: "*/20 * * * * *", ttl: "10s", kill: "2s", sleep: "12s", label: "plugin-status-" + suffix}
		namespaces = append(namespaces, j.ns)
		apply(j)
		var st plugin.JobStatus
		Eventually(func(g Gomega) {
			out, errOut, code := lockedcron("status", j.name, "-n", j.ns, "-o", "json")
			g.Expect(code).To(BeZero(), errOut)
			st = plugin.JobStatus{}
			g.Expect(json.Unmarshal([]byte(out), &st)).To(Succeed())
			g.Expect(st.Lock).NotTo(BeNil())
		}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
		// The holder is a pod of this job that is running now, for the occurrence it holds:
		// <cluster>/<namespace>/<pod>/<pod uid>, the UID expanded by the kubelet.
		parts := strings.Split(st.Lock.Holder, "/")
		Expect(parts).To(HaveLen(4), st.Lock.Holder)
		Expect(parts[1]).To(Equal(j.ns))
		pod := parts[2]
		Expect(st.Lock.Occurrence).NotTo(BeNil())
		Expect(pod).To(Equal(j.name + "-" + strconv.FormatInt(st.Lock.Occurrence.Unix(), 10)))
		Expect(st.Lock.TTLMillis).To(BeNumerically(">", 0))
		Expect(st.Lock.FencingToken).To(BeNumerically(">", 0))
		out, err := kubectl("-n", j.ns, "get", "pod", pod, "-o", "jsonpath={.status.phase} {.metadata.uid}")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("Running " + parts[3]))

		table, errOut, code := lockedcron("status", j.name, "-n", j.ns)
		Expect(code).To(BeZero(), errOut)
		Expect(table).To(ContainSubstring("HOLDER"))
		suspend(j)
	})

	It("run --wait returns the job's exit code and prints its report", func() {
		j := job{ns: "e2e-plugin-run-" + suffix, name: "fails", key: "e2e/plugin-run-" + suffix,
			schedule: rarely, ttl: "10s", kill: "2s", sleep: "1s", label: "plugin-run-" + suffix, args: []string{"--exit=3"}}
		namespaces = append(namespaces, j.ns)
		apply(j)
		out, errOut, code := lockedcron("run", j.name, "-n", j.ns, "--wait", "--timeout", "3m", "--id", "e2e-"+suffix)
		Expect(code).To(Equal(3), "stdout:\n%s\nstderr:\n%s", out, errOut)
		Expect(out).To(MatchRegexp(`Outcome:\s+Failed`))
		Expect(out).To(MatchRegexp(`Exit code:\s+3`))
		Expect(runs(j.label)).To(HaveLen(1))

		// The same id again asks for nothing new: it follows the same run.
		out, errOut, code = lockedcron("run", j.name, "-n", j.ns, "--wait", "--timeout", "1m", "--id", "e2e-"+suffix, "-o", "json")
		Expect(code).To(Equal(3), "stdout:\n%s\nstderr:\n%s", out, errOut)
		Expect(runs(j.label)).To(HaveLen(1))

		// The job exiting 0 makes the plugin exit 0.
		out, err := kubectl("-n", j.ns, "patch", "lcj", j.name, "--type=json", "-p",
			`[{"op":"replace","path":"/spec/template/spec/containers/0/command/4","value":"--exit=0"}]`)
		Expect(err).NotTo(HaveOccurred(), out)
		out, errOut, code = lockedcron("run", j.name, "-n", j.ns, "--wait", "--timeout", "3m")
		Expect(code).To(BeZero(), "stdout:\n%s\nstderr:\n%s", out, errOut)
		Expect(out).To(MatchRegexp(`Outcome:\s+Succeeded`))
	})
})
