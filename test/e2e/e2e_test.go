//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
)

// job is one LockedCronJob of a scenario, with its namespace and Secret.
type job struct {
	ns, name, key, schedule, ttl, sleep, label string
	// kill is lock.killGracePeriod ("" leaves the default, 10s): admission requires
	// ttl >= renewInterval (ttl/3) + killGracePeriod + max(100ms, 1% of ttl).
	kill string
	// restricted labels the namespace to enforce the restricted Pod Security profile (the
	// job's container is made to comply; lockwrap's init container must comply by itself).
	restricted bool
	// root runs the pod as root (pod-level runAsUser 0): lockwrap's init container must
	// still run as its own non-root user.
	root bool
	// args are more arguments for the job image (e.g. --incremental).
	args []string
	// settings, when set, is a ConfigMap of the namespace that the job's container takes
	// its environment from (envFrom).
	settings map[string]string
	// tty runs the job's container with tty: true (and the job sets its terminal's modes).
	tty bool
	// sidecar adds a regular container "proxy" that runs on after the job (an hour).
	sidecar bool
	// backoffLimit, when set, runs the pod with restartPolicy OnFailure under this
	// spec.backoffLimit.
	backoffLimit string
}

func (j job) ref() types.NamespacedName { return types.NamespacedName{Namespace: j.ns, Name: j.name} }

func (j job) manifest() string {
	kill := ""
	if j.kill != "" {
		kill = "\n    killGracePeriod: " + j.kill
	}
	nsLabels, containerSec, podSec := "", "", ""
	if j.restricted {
		nsLabels = "\n  labels:\n    pod-security.kubernetes.io/enforce: restricted"
		containerSec = `
        securityContext:
          runAsNonRoot: true
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
          seccompProfile: {type: RuntimeDefault}`
	}
	extra := ""
	for _, a := range j.args {
		extra += fmt.Sprintf(", %q", a)
	}
	if j.root {
		podSec = "\n      securityContext:\n        runAsUser: 0\n        runAsGroup: 0"
	}
	configMap, envFrom := "", ""
	if len(j.settings) > 0 {
		configMap = fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %s\ndata:\n", j.ns)
		for k, v := range j.settings {
			configMap += fmt.Sprintf("  %s: %q\n", k, v)
		}
		envFrom = "\n        envFrom:\n        - configMapRef: {name: settings}"
	}
	tty, sidecar := "", ""
	if j.tty {
		tty = "\n        tty: true"
		extra += `, "--terminal"`
	}
	if j.sidecar {
		sidecar = `
      - name: proxy
        image: k8s.local/lockedcron-e2e-job:dev
        imagePullPolicy: Never
        command: ["/usr/local/bin/e2e-job", "--sleep=1h", "--termination-log=/dev/null"]`
	}
	restart, backoff := "Never", ""
	if j.backoffLimit != "" {
		restart, backoff = "OnFailure", "\n  backoffLimit: "+j.backoffLimit
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s%[10]s
---
apiVersion: v1
kind: Secret
metadata:
  name: redis
  namespace: %[1]s
stringData:
  url: %[8]s
---
apiVersion: scheduling.lockedcron.io/v1alpha1
kind: LockedCronJob
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  schedule: %[4]q
  lock:
    key: %[3]s
    ttl: %[5]s%[9]s
    redis:
      secretRef:
        name: redis
  successfulRunsHistoryLimit: 100
  failedRunsHistoryLimit: 100%[18]s
  template:
    spec:
      restartPolicy: %[19]s
      terminationGracePeriodSeconds: 5%[12]s
      containers:
      - name: job
        image: k8s.local/lockedcron-e2e-job:dev
        imagePullPolicy: Never
        command: ["/usr/local/bin/e2e-job", "--sleep=%[6]s", "--label=%[7]s", "--termination-log=/dev/null"%[13]s]%[11]s%[15]s%[16]s
        env:
        - name: E2E_REDIS_URL
          valueFrom:
            secretKeyRef: {name: redis, key: url}
        - name: POD_NAME
          valueFrom:
            fieldRef: {fieldPath: metadata.name}
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef: {fieldPath: metadata.namespace}%[17]s
%[14]s`, j.ns, j.name, j.key, j.schedule, j.ttl, j.sleep, j.label, podRedis, kill, nsLabels, containerSec, podSec, extra, configMap, envFrom, tty, sidecar, backoff, restart)
}

// deployAPI makes the namespace and a Deployment "api" in it, and waits for its rollout:
// one replica that becomes available only 25 s after it runs, so that a rollout restart
// spans several occurrences.
func deployAPI(ns string) {
	deployment := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: %[1]s
spec:
  replicas: 1
  minReadySeconds: 25
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: api
        image: k8s.local/pause:dev
        imagePullPolicy: Never
`, ns)
	out, err := kubectlIn(deployment, "apply", "-f", "-")
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	out, err = kubectl("-n", ns, "rollout", "status", "deployment/api", "--timeout=120s")
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
}

// guardedBy is j's manifest with a blackout (policy Skip) while Deployment deployment
// rolls out.
func guardedBy(j job, deployment string) string {
	return strings.Replace(j.manifest(), "  successfulRunsHistoryLimit: 100",
		"  blackout:\n    policy: Skip\n    rollouts:\n    - kind: Deployment\n      name: "+deployment+"\n  successfulRunsHistoryLimit: 100", 1)
}

func apply(j job) {
	out, err := kubectlIn(j.manifest(), "apply", "-f", "-")
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
}

func get(j job) *v1alpha1.LockedCronJob {
	var lcj v1alpha1.LockedCronJob
	ExpectWithOffset(1, k8s.Get(ctx, j.ref(), &lcj)).To(Succeed())
	return &lcj
}

func suspend(jobs ...job) {
	for _, j := range jobs {
		out, err := kubectl("-n", j.ns, "patch", "lcj", j.name, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	}
}

// settle waits until the suspended jobs have no running pod and every finished pod is counted.
func settle(jobs ...job) {
	EventuallyWithOffset(1, func(g Gomega) {
		for _, j := range jobs {
			lcj := get(j)
			g.Expect(lcj.Status.ActiveCount).To(BeZero(), "%s active", j.ns)
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
			var marked []string
			for _, p := range pods.Items {
				g.Expect(p.Labels).To(HaveKeyWithValue(runpod.LabelCounted, "true"), "pod %s/%s not counted yet", p.Namespace, p.Name)
				marked = append(marked, p.Name)
			}
			// A marked pod's name stays in countedPods until the job's next status write.
			g.Expect(marked).To(ContainElements(lcj.Status.CountedPods), "%s counted but unmarked", j.ns)
		}
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// runs reads the audit list: what actually ran, for one scenario's label.
func runs(label string) []audit.Run {
	entries, err := rdb.LRange(ctx, audit.List, 0, -1).Result()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	records, err := audit.Parse(entries)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var mine []audit.Record
	for _, r := range records {
		if r.Label == label {
			mine = append(mine, r)
		}
	}
	return audit.Runs(mine)
}

// expectOneRunPerOccurrence checks the audit: at most one run of each occurrence, no two
// runs overlapping in time, fencing tokens increasing with the occurrence.
func expectOneRunPerOccurrence(rs []audit.Run) {
	for occ, same := range audit.ByOccurrence(rs) {
		ExpectWithOffset(1, same).To(HaveLen(1), "occurrence %s ran %d times", occ, len(same))
	}
	ExpectWithOffset(1, audit.Overlaps(rs, time.Now())).To(BeEmpty(), "runs overlapped")
	sorted := slices.Clone(rs)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Occurrence < sorted[b].Occurrence })
	for i := 1; i < len(sorted); i++ {
		ExpectWithOffset(1, sorted[i].FencingToken).To(BeNumerically(">", sorted[i-1].FencingToken),
			"fencing token of %s not above %s's", sorted[i].Occurrence, sorted[i-1].Occurrence)
	}
}

// eventNotes lists the notes of a job's Events with the given reason.
func eventNotes(j job, reason string) []string {
	var list eventsv1.EventList
	ExpectWithOffset(2, k8s.List(ctx, &list, client.InNamespace(j.ns))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == j.name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// newestPodOccurrence is the newest occurrence the job created a pod for.
func newestPodOccurrence(j job) time.Time {
	var pods corev1.PodList
	ExpectWithOffset(1, k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
	var newest time.Time
	for _, p := range pods.Items {
		t, err := time.Parse(time.RFC3339, p.Annotations[runpod.AnnotationScheduledTime])
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		if t.After(newest) {
			newest = t
		}
	}
	return newest
}

// expectExactCounters: every pod the job created is counted exactly once. The e2e jobs
// keep all their pods (history limits of 100), so the pods themselves are the truth. Each
// finished pod adds one to exactly one of succeeded, failed (job failed, lock lost, or no
// valid report), skippedContention, duplicatesSuppressed and interrupted (deleted while
// waiting for the lock); the controller's own ledger
// check adds to duplicatesSuppressed without a pod (its Event says "no pod created").
func expectExactCounters(j job) {
	var pods corev1.PodList
	ExpectWithOffset(1, k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
	occurrences := map[string]string{}
	for _, p := range pods.Items {
		occ := p.Annotations[runpod.AnnotationScheduledTime]
		ExpectWithOffset(1, occurrences).NotTo(HaveKey(occ), "two pods for occurrence %s: %s and %s", occ, occurrences[occ], p.Name)
		occurrences[occ] = p.Name
	}
	noPod := 0
	for _, n := range eventNotes(j, "SuppressedDuplicate") {
		if strings.Contains(n, "no pod created") {
			noPod++
		}
	}
	c := get(j).Status.Counters
	ExpectWithOffset(1, c.Succeeded+c.Failed+c.SkippedContention+c.DuplicatesSuppressed+c.Interrupted-int64(noPod)).
		To(Equal(int64(len(pods.Items))), "counters %+v vs %d pods", c, len(pods.Items))
}

// runUntilTwoSucceedOrOneFails applies the job, waits until two runs succeeded or one
// failed (why says what it means when neither comes), then suspends it and lets it settle;
// it returns the counters.
func runUntilTwoSucceedOrOneFails(j job, why string) v1alpha1.Counters {
	apply(j)
	EventuallyWithOffset(1, func() v1alpha1.Counters { return get(j).Status.Counters }, 2*time.Minute, time.Second).
		Should(SatisfyAny(
			HaveField("Succeeded", BeNumerically(">=", 2)),
			HaveField("Failed", BeNumerically(">=", 1))), why)
	suspend(j)
	settle(j)
	return get(j).Status.Counters
}

// table parses `kubectl get` output by the header's column offsets (values may hold spaces).
func table(out string) []map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	type col struct {
		name  string
		start int
	}
	var cols []col
	for i := 0; i < len(header); {
		for i < len(header) && header[i] == ' ' {
			i++
		}
		start := i
		// A column name may hold one space ("LAST HOLDER"); columns are 3+ spaces apart.
		for i < len(header) && !(header[i] == ' ' && (i+1 >= len(header) || header[i+1] == ' ')) {
			i++
		}
		if start < len(header) {
			cols = append(cols, col{header[start:i], start})
		}
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for k, c := range cols {
			end := len(l)
			if k+1 < len(cols) && cols[k+1].start < len(l) {
				end = cols[k+1].start
			}
			if c.start < len(l) {
				row[c.name] = strings.TrimSpace(l[c.start:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}

var _ = Describe("lockedcron on a real cluster", Ordered, func() {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	var namespaces []string
	scenario := func(name string) string {
		ns := "e2e-" + name + "-" + suffix
		namespaces = append(namespaces, ns)
		return ns
	}

	BeforeAll(func() {
		Expect(rdb.Del(ctx, audit.List).Err()).To(Succeed())
	})
	AfterEach(func() { dumpOnFailure(namespaces...) })
	AfterAll(func() {
		for _, ns := range namespaces {
			_, _ = kubectl("delete", "namespace", ns, "--wait=false")
		}
	})

	It("runs each occurrence once when three namespaces share one lock key", func() {
		var jobs []job
		for _, t := range []string{"a", "b", "c"} {
			j := job{ns: scenario("shared-" + t), name: "report", key: "e2e/shared-" + suffix,
				schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "2s", label: "shared-" + suffix}
			apply(j)
			jobs = append(jobs, j)
		}
		Eventually(func() int { return len(audit.ByOccurrence(runs("shared-" + suffix))) }, 4*time.Minute, time.Second).
			Should(BeNumerically(">=", 10))
		suspend(jobs...)
		settle(jobs...)

		rs := runs("shared-" + suffix)
		expectOneRunPerOccurrence(rs)
		for _, r := range rs {
			Expect(r.Finished).To(BeTrue(), "run of %s never ended", r.Occurrence)
			Expect(r.ExitCode).To(BeZero())
		}
		var total v1alpha1.Counters
		for _, j := range jobs {
			expectExactCounters(j)
			c := get(j).Status.Counters
			total.Runs += c.Runs
			total.Failed += c.Failed
			total.SkippedContention += c.SkippedContention
			total.DuplicatesSuppressed += c.DuplicatesSuppressed
			total.Missed += c.Missed
		}
		Expect(total.Runs).To(Equal(int64(len(rs))), "status counts %d runs, the audit %d", total.Runs, len(rs))
		Expect(total.Failed).To(BeZero())
		occurrences := len(audit.ByOccurrence(rs))
		// An occurrence whose pod could not start in time (the previous one still starting
		// on a loaded node) is missed rather than skipped.
		Expect(total.SkippedContention+total.DuplicatesSuppressed+total.Missed).To(BeNumerically(">=", 2*(occurrences-2)),
			"the other two namespaces reported skipping (or missing) nearly every occurrence")

		// What a person sees: kubectl get lcj -A -o wide agrees with the audit. Each job's
		// LAST HOLDER is who ran the newest occurrence it started a pod for (the jobs were
		// suspended one after another, so that need not be the same occurrence for all).
		ranBy := map[string]string{}
		for _, r := range rs {
			ranBy[r.Occurrence] = r.Holder
		}
		lastHolder := map[string]string{}
		for _, j := range jobs {
			st := get(j).Status
			Expect(st.LastHolder).NotTo(BeNil())
			Expect(st.LastHolder.Occurrence.Time).To(BeTemporally("==", newestPodOccurrence(j)), "%s: last holder is of the newest occurrence it made a pod for", j.ns)
			occ := st.LastHolder.Occurrence.UTC().Format(time.RFC3339)
			Expect(ranBy).To(HaveKey(occ), "%s: the audit has no run of %s", j.ns, occ)
			lastHolder[j.ns] = ranBy[occ]
		}
		out, err := kubectl("get", "lcj", "-A", "-o", "wide")
		Expect(err).NotTo(HaveOccurred(), out)
		fmt.Fprintf(GinkgoWriter, "$ kubectl get lcj -A -o wide\n%s\n", out)
		var seen, runsCol, skipCols int
		for _, row := range table(out) {
			if !strings.HasPrefix(row["NAMESPACE"], "e2e-shared-") || !strings.HasSuffix(row["NAMESPACE"], suffix) {
				continue
			}
			seen++
			Expect(row["LAST HOLDER"]).To(Equal(lastHolder[row["NAMESPACE"]]), "row %v", row)
			Expect(row["KEY"]).To(Equal("e2e/shared-" + suffix))
			n, _ := strconv.Atoi(row["RUNS"])
			s, _ := strconv.Atoi(row["SKIPPED"])
			d, _ := strconv.Atoi(row["SUPPRESSED"])
			runsCol += n
			skipCols += s + d
		}
		Expect(seen).To(Equal(3))
		Expect(runsCol).To(Equal(len(rs)))
		Expect(skipCols).To(Equal(int(total.SkippedContention + total.DuplicatesSuppressed)))
	})

	It("runs a job in a namespace enforcing the restricted Pod Security profile, and a job running as root", func() {
		// lockwrap's init container must fit any pod: restricted-compliant by itself, and
		// non-root (its own uid) even when the pod runs as root.
		restricted := job{ns: scenario("strict-job"), name: "strict", key: "e2e/restricted-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "restricted-" + suffix, restricted: true}
		root := job{ns: scenario("root-job"), name: "root", key: "e2e/root-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "root-" + suffix, root: true}
		apply(restricted)
		apply(root)
		for _, j := range []job{restricted, root} {
			Eventually(func() int64 { return get(j).Status.Counters.Succeeded }, 2*time.Minute, time.Second).
				Should(BeNumerically(">=", 2), "%s: no successful run", j.ns)
		}
		suspend(restricted, root)
		settle(restricted, root)
		for _, j := range []job{restricted, root} {
			rs := runs(j.label)
			Expect(rs).NotTo(BeEmpty())
			expectOneRunPerOccurrence(rs)
			expectExactCounters(j)
			Expect(get(j).Status.Counters.Failed).To(BeZero(), "%s", j.ns)
		}
	})

	It("takes lockwrap's Redis credentials from the Secret only, not from the template's envFrom", func() {
		// The Secret has a url and no username, password or CA certificate; the template's
		// envFrom ConfigMap has all three. The kubelet leaves a variable that an optional
		// secretKeyRef does not find as envFrom set it: lockwrap authenticated with the
		// ConfigMap's user and password (and trusted its CA), and every run failed.
		j := job{ns: scenario("envfrom"), name: "envfrom", key: "e2e/envfrom-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "envfrom-" + suffix,
			settings: map[string]string{
				"LOCKEDCRON_REDIS_USERNAME": "not-the-user",
				"LOCKEDCRON_REDIS_PASSWORD": "not-the-password",
				"LOCKEDCRON_REDIS_CA_CERT":  "not a certificate",
				"GREETING":                  "hi",
			}}
		c := runUntilTwoSucceedOrOneFails(j, "no run ended")
		Expect(c.Failed).To(BeZero(), "runs failed: lockwrap took its Redis settings from envFrom (%+v)", c)
		Expect(c.Succeeded).To(BeNumerically(">=", 2))
		rs := runs(j.label)
		Expect(rs).NotTo(BeEmpty())
		expectOneRunPerOccurrence(rs)
		expectExactCounters(j)
	})

	It("keeps one lock for a key written like a variable reference, in every namespace", func() {
		// The kubelet expands $(NAME) in an environment variable's literal value from the
		// variables before it: "$(POD_NAMESPACE)" in the key, the template's own variable,
		// made one lock a namespace, and both namespaces ran every occurrence.
		key := "e2e/ref-$(POD_NAMESPACE)-" + suffix
		var jobs []job
		for _, t := range []string{"a", "b"} {
			j := job{ns: scenario("ref-" + t), name: "report", key: key,
				schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "ref-" + suffix}
			apply(j)
			jobs = append(jobs, j)
		}
		Eventually(func() int { return len(audit.ByOccurrence(runs("ref-" + suffix))) }, 3*time.Minute, time.Second).
			Should(BeNumerically(">=", 4))
		suspend(jobs...)
		settle(jobs...)
		rs := runs("ref-" + suffix)
		expectOneRunPerOccurrence(rs)
		for _, j := range jobs {
			Expect(get(j).Status.LockKey).To(Equal(key))
			expectExactCounters(j)
		}
		occ, err := time.Parse(time.RFC3339, rs[0].Occurrence)
		Expect(err).NotTo(HaveOccurred())
		done, err := lock.Succeeded(ctx, rdb, key, occ)
		Expect(err).NotTo(HaveOccurred())
		Expect(done).To(BeTrue(), "the ledger has no success of %s under the key as written", rs[0].Occurrence)
	})

	It("runs a job on a terminal (tty: true) to its end, each occurrence once", func() {
		// The job sets its terminal's modes first, as stty does. lockwrap runs the command in
		// a process group of its own; in the terminal's background that call stopped the job
		// (SIGTTOU) while lockwrap renewed the lock for ever. It exits 3 without a terminal.
		j := job{ns: scenario("tty"), name: "tty", key: "e2e/tty-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "tty-" + suffix, tty: true}
		c := runUntilTwoSucceedOrOneFails(j, "no run ended: the job stopped on its terminal")
		Expect(c.Failed).To(BeZero(), "runs failed (exit 3: the container had no terminal): %+v", c)
		rs := runs(j.label)
		Expect(rs).NotTo(BeEmpty())
		for _, r := range rs {
			Expect(r.Finished).To(BeTrue(), "run of %s never ended", r.Occurrence)
		}
		expectOneRunPerOccurrence(rs)
		expectExactCounters(j)
		Expect(c.Runs).To(Equal(int64(len(rs))))
	})

	It("counts a run whose pod has a sidecar container that runs on, and deletes the pod", func() {
		// A second regular container (a proxy, a log shipper) keeps the pod Running after the
		// job ended: the pod was never counted, its occurrence Active for ever. It is counted
		// by lockwrap's report a minute after the job ended (tracking.EndGrace), then deleted.
		j := job{ns: scenario("sidecar"), name: "sidecar", key: "e2e/sidecar-" + suffix,
			schedule: "*/15 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "sidecar-" + suffix, sidecar: true}
		apply(j)
		Eventually(func() int64 { return get(j).Status.Counters.Succeeded }, 3*time.Minute, time.Second).
			Should(BeNumerically(">=", 2), "no run counted while the sidecar runs on")
		suspend(j)
		settle(j)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty(), "counted pods whose sidecar runs on are deleted")
		}, time.Minute, time.Second).Should(Succeed())
		rs := runs(j.label)
		expectOneRunPerOccurrence(rs)
		for _, r := range rs {
			Expect(r.Finished).To(BeTrue(), "run of %s never ended", r.Occurrence)
		}
		c := get(j).Status.Counters
		Expect(c.Runs).To(Equal(int64(len(rs))), "status counts %d runs, the audit %d", c.Runs, len(rs))
		Expect(c.Succeeded).To(Equal(int64(len(rs))), "%+v", c)
		Expect(c.Failed+c.Interrupted+c.SkippedContention+c.DuplicatesSuppressed).To(BeZero(), "%+v", c)
		Expect(get(j).Status.LastSuccess).NotTo(BeNil())
	})

	It("stops an OnFailure job after spec.backoffLimit restarts: counted Failed once, no further attempt", func() {
		// One occurrence, 20 s from now (a yearly schedule with seconds). The job exits 3
		// every time; the kubelet restarts it in its pod (the first time at once, then
		// after its back-off); lockwrap counts the attempts in the pod's emptyDir, and the
		// third start (backoffLimit 1) runs nothing and exits 0, which ends the pod. It
		// used to be restarted until its deadline (days).
		at := time.Now().UTC().Add(20 * time.Second)
		j := job{ns: scenario("backoff"), name: "backoff", key: "e2e/backoff-" + suffix,
			schedule: fmt.Sprintf("%d %d %d %d %d *", at.Second(), at.Minute(), at.Hour(), at.Day(), int(at.Month())),
			ttl:      "10s", kill: "2s", sleep: "1s", label: "backoff-" + suffix, args: []string{"--exit=3"}, backoffLimit: "1"}
		apply(j)
		Eventually(func() v1alpha1.Counters { return get(j).Status.Counters }, 3*time.Minute, time.Second).
			Should(Equal(v1alpha1.Counters{Runs: 1, Failed: 1}))
		rec := get(j).Status.Recent[0]
		Expect(rec.Outcome).To(Equal(string(report.Failed)))
		Expect(rec.Message).To(ContainSubstring("after 3 attempts (restartPolicy OnFailure)"))
		Expect(rec.Message).To(ContainSubstring("not run again: this is attempt 3 in this pod, after 2 that failed, and the backoff limit is 1"))
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		pod := pods.Items[0]
		Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), "the last attempt exits 0: the pod ends, kept as history")
		// Every attempt the pod made is in the audit: two, of one occurrence, one after
		// the other, each ended.
		rs := runs(j.label)
		Expect(rs).To(HaveLen(2), "attempts: %+v", rs)
		Expect(rs[0].Occurrence).To(Equal(rs[1].Occurrence))
		Expect(audit.Overlaps(rs, time.Now())).To(BeEmpty())
		for _, r := range rs {
			Expect(r.Finished).To(BeTrue(), "attempt of %s never ended", r.Occurrence)
		}
	})

	It("lets a job longer than its TTL finish under renewal, with no second run", func() {
		j := job{ns: scenario("long"), name: "long", key: "e2e/long-" + suffix,
			schedule: "*/6 * * * * *", ttl: "3s", kill: "1s", sleep: "9s", label: "long-" + suffix}
		apply(j)
		Eventually(func() []audit.Run {
			var done []audit.Run
			for _, r := range runs(j.label) {
				if r.Finished {
					done = append(done, r)
				}
			}
			return done
		}, 2*time.Minute, time.Second).ShouldNot(BeEmpty())
		// The occurrence 6 s later found the lock renewed and still held.
		Eventually(func() int64 { return get(j).Status.Counters.SkippedContention }, time.Minute, time.Second).Should(BeNumerically(">=", 1))
		suspend(j)
		settle(j)
		rs := runs(j.label)
		expectOneRunPerOccurrence(rs)
		for _, r := range rs {
			Expect(r.Finished).To(BeTrue())
			Expect(r.Signal).To(BeEmpty(), "a run was stopped: %+v", r)
			Expect(r.End.Sub(r.Start)).To(BeNumerically(">=", 9*time.Second), "ran the full 9 s, three times its 3 s TTL")
		}
		c := get(j).Status.Counters
		Expect(c.LockLost).To(BeZero())
		Expect(c.Runs).To(Equal(int64(len(rs))))
		expectExactCounters(j)
	})

	It("runs a later occurrence after the holder pod is deleted mid-run, without overlap", func() {
		j := job{ns: scenario("kill"), name: "kill", key: "e2e/kill-" + suffix,
			schedule: "*/5 * * * * *", ttl: "4s", kill: "1s", sleep: "12s", label: "kill-" + suffix}
		apply(j)
		var victim audit.Run
		Eventually(func() bool {
			for _, r := range runs(j.label) {
				if !r.Finished {
					victim = r
					return true
				}
			}
			return false
		}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue())
		out, err := kubectl("-n", j.ns, "delete", "pod", victim.Pod, "--wait=false")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() bool {
			for _, r := range runs(j.label) {
				if r.Occurrence > victim.Occurrence && r.Finished {
					return true
				}
			}
			return false
		}, 2*time.Minute, time.Second).Should(BeTrue(), "no later occurrence ran after the holder was deleted")
		suspend(j)
		settle(j)
		rs := runs(j.label)
		expectOneRunPerOccurrence(rs)
		for _, r := range rs {
			if r.Pod == victim.Pod {
				Expect(!r.Finished || r.Signal != "").To(BeTrue(), "the deleted pod's job was stopped: %+v", r)
			}
		}
	})

	It("hands over to a new operator pod without a duplicate pod, counters exact", func() {
		j := job{ns: scenario("operator"), name: "op", key: "e2e/op-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "op-" + suffix}
		apply(j)
		Eventually(func() int { return len(runs(j.label)) }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 2))
		out, err := kubectl("-n", "lockedcron-system", "delete", "pod", "-l", "app.kubernetes.io/component=manager", "--wait=false")
		Expect(err).NotTo(HaveOccurred(), out)
		deleted := time.Now().UTC().Format(time.RFC3339)
		Eventually(func() int {
			n := 0
			for _, r := range runs(j.label) {
				if r.Occurrence > deleted {
					n++
				}
			}
			return n
		}, 3*time.Minute, time.Second).Should(BeNumerically(">=", 3), "occurrences after the operator pod was deleted did not run")
		suspend(j)
		settle(j)
		rs := runs(j.label)
		expectOneRunPerOccurrence(rs)
		c := get(j).Status.Counters
		Expect(c.Runs).To(Equal(int64(len(rs))), "status counts %d runs, the audit %d", c.Runs, len(rs))
		Expect(c.Succeeded).To(Equal(c.Runs))
		expectExactCounters(j)
	})

	It("reports LockBackendReady False while Redis is down and True again, with no duplicate run", func() {
		j := job{ns: scenario("redis"), name: "redis", key: "e2e/redis-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "redis-" + suffix}
		apply(j)
		// The condition, or an empty one before the first pass set it (not a nil to panic on).
		backend := func() metav1.Condition {
			if c := meta.FindStatusCondition(get(j).Status.Conditions, "LockBackendReady"); c != nil {
				return *c
			}
			return metav1.Condition{}
		}
		Eventually(func() int { return len(runs(j.label)) }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 1))
		Eventually(func() metav1.ConditionStatus { return backend().Status }, time.Minute, 500*time.Millisecond).Should(Equal(metav1.ConditionTrue))

		// Stop Redis between runs: the audit list lives in this Redis too, so a job still
		// running at the stop could not write its end record (lockwrap would stop it before
		// its lock expires, but the audit could not show when), and the overlap check would
		// have no end to go by. Killing a holder mid-run is the holder-deleted spec's subject.
		var before []audit.Run // it persists (AOF)
		Eventually(func() bool {
			before = runs(j.label) // read in the moment found: a run begun after it would be unfinished here
			for _, r := range before {
				if !r.Finished {
					return false
				}
			}
			var pods corev1.PodList
			Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					return false
				}
			}
			return true
		}, time.Minute, 100*time.Millisecond).Should(BeTrue(), "a moment with no run in progress")
		out, err := redisCtl("stop")
		Expect(err).NotTo(HaveOccurred(), out)
		restarted := false
		defer func() {
			if !restarted {
				_, _ = redisCtl("start")
			}
		}()
		Eventually(func() string {
			if c := backend(); c.Status == metav1.ConditionFalse {
				return c.Reason
			}
			return ""
		}, time.Minute, 500*time.Millisecond).Should(Equal("RedisUnreachable"))
		out, err = redisCtl("start")
		Expect(err).NotTo(HaveOccurred(), out)
		restarted = true
		Eventually(func() metav1.ConditionStatus { return backend().Status }, time.Minute, 500*time.Millisecond).Should(Equal(metav1.ConditionTrue))
		Eventually(func() int { return len(runs(j.label)) }, 2*time.Minute, time.Second).Should(BeNumerically(">", len(before)))
		suspend(j)
		settle(j)
		rs := runs(j.label)
		// Every run from before the stop is still there: the check of one run per
		// occurrence below needs them (a count alone passed with a wiped list and a few
		// new runs).
		Expect(rs).To(ContainElements(before), "the audit survived the restart")
		expectOneRunPerOccurrence(rs)
		expectExactCounters(j)
	})

	It("skips the occurrences inside a real Deployment rollout, and runs again after it", func() {
		ns := scenario("rollout")
		j := job{ns: ns, name: "guarded", key: "e2e/rollout-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "rollout-" + suffix}
		deployAPI(ns)
		out, err := kubectlIn(guardedBy(j, "api"), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() int { return len(runs(j.label)) }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 1), "runs before the rollout")

		started := time.Now()
		out, err = kubectl("-n", ns, "rollout", "restart", "deployment/api")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() string {
			c := meta.FindStatusCondition(get(j).Status.Conditions, "Blackout")
			if c == nil || c.Status != metav1.ConditionTrue {
				return ""
			}
			return c.Reason + ": " + c.Message
		}, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("Deployment/api"))
		out, err = kubectl("-n", ns, "rollout", "status", "deployment/api", "--timeout=180s")
		Expect(err).NotTo(HaveOccurred(), out)
		finished := time.Now()
		Expect(finished.Sub(started)).To(BeNumerically(">", 15*time.Second), "the rollout spanned several occurrences")

		// Runs resume after it.
		Eventually(func() bool {
			for _, r := range runs(j.label) {
				if occ, _ := time.Parse(time.RFC3339, r.Occurrence); occ.After(finished) && r.Finished {
					return true
				}
			}
			return false
		}, 2*time.Minute, time.Second).Should(BeTrue(), "no run after the rollout")

		describe, err := kubectl("-n", ns, "describe", "lcj", j.name)
		Expect(err).NotTo(HaveOccurred(), describe)
		fmt.Fprintf(GinkgoWriter, "$ kubectl describe lcj %s\n%s\n", j.name, describe)
		Expect(describe).To(ContainSubstring("SkippedBlackout"))
		wide, err := kubectl("-n", ns, "get", "lcj", "-o", "wide")
		Expect(err).NotTo(HaveOccurred(), wide)
		fmt.Fprintf(GinkgoWriter, "$ kubectl get lcj -o wide\n%s\n", wide)
		suspend(j)
		settle(j)

		// Nothing ran during the rollout, by the job's own audit (a second of slack at
		// each end for the watch to deliver the Deployment's change).
		for _, r := range runs(j.label) {
			occ, err := time.Parse(time.RFC3339, r.Occurrence)
			Expect(err).NotTo(HaveOccurred())
			inside := occ.After(started.Add(time.Second)) && occ.Before(finished.Add(-time.Second))
			Expect(inside).To(BeFalse(), "occurrence %s ran during the rollout (%s .. %s)", r.Occurrence, started.Format(time.RFC3339), finished.Format(time.RFC3339))
		}
		expectOneRunPerOccurrence(runs(j.label))
		c := get(j).Status.Counters
		Expect(c.SkippedBlackout).To(BeNumerically(">=", 2), "occurrences inside the rollout were counted")
		rows := table(wide)
		Expect(rows).To(HaveLen(1))
		Expect(rows[0]["SKIPPED BLACKOUT"]).To(Equal(strconv.FormatInt(c.SkippedBlackout, 10)))
	})

	// The gap the blackout markers close: a manual run (contention Wait) whose lockwrap
	// already waits behind the scheduled run when a rollout begins is running, so it is not
	// withdrawn; when the scheduled run lets the lock go, in the rollout, the manual run
	// must not start its job. It used to.
	It("holds back a manual run already waiting for the lock when a rollout begins: Missed, nothing run", func() {
		ns := scenario("waiting")
		deployAPI(ns) // first: its rollout takes 25 s and more
		at := time.Now().Add(30 * time.Second).Truncate(time.Second).UTC()
		j := job{ns: ns, name: "guarded", key: "e2e/waiting-" + suffix,
			schedule: fmt.Sprintf("%d %d %d * * *", at.Second(), at.Minute(), at.Hour()), ttl: "10s", kill: "2s", sleep: "50s", label: "waiting-" + suffix}
		out, err := kubectlIn(guardedBy(j, "api"), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		scheduled := runpod.Name(j.name, at)
		Eventually(func() []string {
			var pods []string
			for _, r := range runs(j.label) {
				pods = append(pods, r.Pod)
			}
			return pods
		}, 3*time.Minute, 200*time.Millisecond).Should(ContainElement(scheduled), "the scheduled run holds the lock")

		out, err = kubectl("-n", ns, "annotate", "lcj", j.name, v1alpha1.AnnotationRunRequest+"=during-the-run")
		Expect(err).NotTo(HaveOccurred(), out)
		manual := runpod.ManualName(j.name, "during-the-run")
		Eventually(func() bool {
			var pod corev1.Pod
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: manual}, &pod); err != nil {
				return false
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == "job" && cs.State.Running != nil {
					return true
				}
			}
			return false
		}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "the manual run's lockwrap waits for the lock")
		Expect(runs(j.label)).To(HaveLen(1), "only the scheduled run has started")

		// A rollout that does not end while the spec runs: its new pod's image is not there.
		out, err = kubectl("-n", ns, "set", "image", "deployment/api", "api=k8s.local/not-there:dev")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() metav1.ConditionStatus {
			if c := meta.FindStatusCondition(get(j).Status.Conditions, "Blackout"); c != nil {
				return c.Status
			}
			return ""
		}, 30*time.Second, 200*time.Millisecond).Should(Equal(metav1.ConditionTrue))

		// The scheduled run ends (a blackout never stops a running job); the manual run is
		// then refused the lock, and counted.
		Eventually(func() []v1alpha1.RunRecord { return get(j).Status.Recent }, 3*time.Minute, time.Second).Should(And(
			ContainElement(And(HaveField("Pod", scheduled), HaveField("Outcome", "Succeeded"))),
			ContainElement(And(HaveField("Pod", manual), HaveField("Outcome", "Missed"), HaveField("Message", ContainSubstring("held back by a blackout of the job")))),
		))
		for _, r := range runs(j.label) {
			Expect(r.Pod).NotTo(Equal(manual), "the manual run started its job in the rollout")
		}
		Expect(runs(j.label)).To(HaveLen(1))
		c := get(j).Status.Counters
		Expect([]int64{c.Runs, c.Succeeded, c.Missed}).To(Equal([]int64{1, 1, 1}))
	})

	// Prepare-ahead with a real kubelet: the pod is made ahead of its instant and lockwrap
	// waits in it; a suspend before the instant withdraws it. The kubelet stops lockwrap,
	// whose report (interrupted while waiting, the command did not run) releases the pod
	// uncounted: nothing ran, nothing is counted, no pod is left.
	It("withdraws a prepared pod on a suspend before its instant: its lockwrap stops, nothing runs or counts", func() {
		ns := scenario("prepared")
		at := time.Now().Add(120 * time.Second).UTC() // room for the pod to start and its withdrawal through the kubelet, on a loaded machine
		j := job{ns: ns, name: "ahead", key: "e2e/prepared-" + suffix,
			schedule: fmt.Sprintf("%d %d %d * * *", at.Second(), at.Minute(), at.Hour()), ttl: "10s", kill: "2s", sleep: "1s", label: "prepared-" + suffix}
		pod := applyPrepared(j)
		Expect(time.Now()).To(BeTemporally("<", at.Add(-30*time.Second)), "prepared well before its instant")

		suspend(j)
		Eventually(func() bool {
			var p corev1.Pod
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(&pod), &p))
		}, 45*time.Second, 250*time.Millisecond).Should(BeTrue(), "withdrawn: stopped by its kubelet, then released")
		Expect(time.Now()).To(BeTemporally("<", at), "before its instant")
		st := get(j).Status
		Expect(st.Counters).To(Equal(v1alpha1.Counters{}), "a pod that did not run its occurrence is not counted")
		Expect(st.Recent).To(BeEmpty())
		// Released, it was named in countedPods until marked (so that no pass decides it
		// twice); the name goes with the pass its deletion starts, which may come after
		// the pod is gone.
		Eventually(func() []string { return get(j).Status.CountedPods }, 30*time.Second, 250*time.Millisecond).Should(BeEmpty())
		// Through the instant and a little past it: nothing runs, no pod comes back, and
		// the occurrence (in a suspended job) is counted by nobody — not missed either.
		Consistently(func(g Gomega) {
			st := get(j).Status
			g.Expect(st.Counters).To(Equal(v1alpha1.Counters{}))
			g.Expect(st.Recent).To(BeEmpty())
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			g.Expect(runs(j.label)).To(BeEmpty(), "the job never ran")
		}, time.Until(at.Add(5*time.Second)), time.Second).Should(Succeed())
	})

	// A job deleted with --cascade=orphan: the garbage collector keeps its pods, but a
	// prepared pod's occurrence has not come, and the job that wanted it is gone. Left
	// alone, its lockwrap would run the job at the instant for a job nobody has any more.
	// The manager deletes it before its instant (envtest covers the other pods, and a
	// manager that was down meanwhile).
	It("deletes a prepared pod when its job is deleted with --cascade=orphan: nothing runs at its instant", func() {
		ns := scenario("orphan")
		at := time.Now().Add(100 * time.Second).UTC()
		j := job{ns: ns, name: "orphaned", key: "e2e/orphan-" + suffix,
			schedule: fmt.Sprintf("%d %d %d * * *", at.Second(), at.Minute(), at.Hour()), ttl: "10s", kill: "2s", sleep: "1s", label: "orphan-" + suffix}
		pod := applyPrepared(j)
		Expect(time.Now()).To(BeTemporally("<", at.Add(-20*time.Second)), "prepared well before its instant")

		out, err := kubectl("delete", "lockedcronjob", j.name, "-n", ns, "--cascade=orphan", "--wait", "--timeout=30s")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() bool {
			var p corev1.Pod
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(&pod), &p))
		}, 45*time.Second, 250*time.Millisecond).Should(BeTrue(), "the prepared pod of a deleted job is deleted")
		Expect(time.Now()).To(BeTemporally("<", at), "before its instant")
		// Through the instant and a little past it: nothing runs, and no pod of the
		// job's name is left.
		Consistently(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			g.Expect(runs(j.label)).To(BeEmpty(), "the deleted job's prepared pod ran it")
		}, time.Until(at.Add(5*time.Second)), time.Second).Should(Succeed())
	})

	DescribeTable("kubectl apply rejects an invalid manifest with a clear message",
		func(patch func(string) string, message string) {
			ns := "default"
			j := job{ns: ns, name: "invalid", key: "k", schedule: "@hourly", ttl: "30s", sleep: "1s", label: "x"}
			m := j.manifest()
			m = m[strings.Index(m, "apiVersion: scheduling"):]
			out, err := kubectlIn(patch(m), "apply", "-f", "-")
			Expect(err).To(HaveOccurred(), "accepted:\n%s", out)
			Expect(out).To(ContainSubstring(message))
			var lcj v1alpha1.LockedCronJob
			Expect(apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invalid"}, &lcj))).To(BeTrue())
		},
		Entry("ttl 0", func(m string) string { return strings.Replace(m, "ttl: 30s", "ttl: 0s", 1) }, "lock.ttl must be greater than 0"),
		Entry("renewInterval over half the ttl", func(m string) string {
			return strings.Replace(m, "ttl: 30s", "ttl: 30s\n    renewInterval: 20s", 1)
		}, "at most half of lock.ttl"),
		Entry("Retry without retry", func(m string) string {
			return strings.Replace(m, "  successfulRunsHistoryLimit: 100", "  contention:\n    policy: Retry\n  successfulRunsHistoryLimit: 100", 1)
		}, "contention.retry (with attempts) is required"),
		Entry("restartPolicy Always", func(m string) string {
			return strings.Replace(m, "restartPolicy: Never", "restartPolicy: Always", 1)
		}, "restartPolicy must be Never or OnFailure"),
		Entry("no command", func(m string) string {
			i := strings.Index(m, "        command:")
			e := strings.Index(m[i:], "\n") + i
			return m[:i] + m[e+1:]
		}, "containers[0].command is required"),
		Entry("unknown onLost", func(m string) string {
			return strings.Replace(m, "ttl: 30s", "ttl: 30s\n    onLost: Ignore", 1)
		}, `Unsupported value: "Ignore"`),
	)
})

// applyPrepared applies j (a schedule due once within the next 150 s) with timeZone UTC
// and prepareAheadSeconds 150, and returns its one pod once lockwrap waits in it for the
// instant.
func applyPrepared(j job) corev1.Pod {
	GinkgoHelper()
	m := strings.Replace(j.manifest(), "  successfulRunsHistoryLimit: 100", "  timeZone: UTC\n  prepareAheadSeconds: 150\n  successfulRunsHistoryLimit: 100", 1)
	out, err := kubectlIn(m, "apply", "-f", "-")
	Expect(err).NotTo(HaveOccurred(), out)
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
		g.Expect(pod.Status.ContainerStatuses).To(ContainElement(And(HaveField("Name", "job"), HaveField("State.Running", Not(BeNil())))), "lockwrap waits in it")
	}, 60*time.Second, 500*time.Millisecond).Should(Succeed())
	return pod
}

// redisCtl drives the local cluster's host Redis (hack/cluster/redis.sh).
func redisCtl(action string) (string, error) {
	return runScript("../../hack/cluster/redis.sh", action)
}
