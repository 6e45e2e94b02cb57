//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

const (
	operatorNS  = "lockedcron-system"
	operatorDep = "lockedcron-controller-manager"
	leaseName   = "lockedcron.scheduling.lockedcron.io"
	crdName     = "lockedcronjobs.scheduling.lockedcron.io"
)

// repoRoot is the checkout (go test runs in test/e2e).
func repoRoot() string {
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(wd, "..", "..")
}

// managerPods lists the running manager pods in lockedcron-system that are not being deleted.
func managerPods(g Gomega) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8s.List(ctx, &pods, client.InNamespace(operatorNS),
		client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live = append(live, p)
		}
	}
	return live
}

// leaders returns the manager pods whose log says they acquired the Lease. Under host
// network every manager has the node's host name, so the Lease's holder identity does not
// tell them apart; the log does.
func leaders(g Gomega, pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		out, err := kubectl("-n", operatorNS, "logs", p.Name)
		g.Expect(err).NotTo(HaveOccurred(), out)
		if strings.Contains(strings.ToLower(out), "successfully acquired lease") {
			names = append(names, p.Name)
		}
	}
	return names
}

func lease(g Gomega) *coordinationv1.Lease {
	var l coordinationv1.Lease
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: leaseName}, &l)).To(Succeed())
	return &l
}

// restoreE2EOperator puts the suite's own operator (config/local) back, as
// hack/cluster/deploy-operator.sh left it, and waits until it is available.
func restoreE2EOperator() {
	out, err := kubectl("apply", "--server-side", "--force-conflicts", "-k", filepath.Join(repoRoot(), "config", "local"))
	Expect(err).NotTo(HaveOccurred(), out)
	Eventually(func() (string, error) {
		return kubectl("get", "crd", crdName, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
	}, time.Minute, 200*time.Millisecond).Should(Equal("True"))
	out, err = kubectl("-n", operatorNS, "rollout", "status", "deployment/"+operatorDep, "--timeout=180s")
	Expect(err).NotTo(HaveOccurred(), out)
}

// trackingFinalizerPods lists the pods, in all namespaces, that still hold the controller's
// finalizer.
func trackingFinalizerPods() []string {
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods)).To(Succeed())
	var held []string
	for _, p := range pods.Items {
		for _, f := range p.Finalizers {
			if f == runpod.FinalizerTracking {
				held = append(held, p.Namespace+"/"+p.Name)
			}
		}
	}
	return held
}

// deleteJobsForeground is the documented first step of an uninstall (docs/install.md):
// delete every LockedCronJob while the operator still runs, in the foreground, so that
// kubectl returns once their pods are gone (the operator released their finalizers).
func deleteJobsForeground() {
	out, err := kubectl("delete", "lockedcronjobs", "--all", "--all-namespaces", "--cascade=foreground", "--wait", "--timeout=3m")
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	ExpectWithOffset(1, trackingFinalizerPods()).To(BeEmpty(), "pods still hold %s after their jobs were deleted", runpod.FinalizerTracking)
}

var _ = Describe("install and high availability on a real cluster", Ordered, func() {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	var namespaces []string
	scenario := func(name string) string {
		ns := "e2e-" + name + "-" + suffix
		namespaces = append(namespaces, ns)
		return ns
	}
	AfterEach(func() { dumpOnFailure(namespaces...) })
	AfterAll(func() {
		for _, ns := range namespaces {
			_, _ = kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")
		}
	})

	It("fails over to a standby manager: at most 20 s without a pod when the leader is deleted", func() {
		j := job{ns: scenario("failover"), name: "ha", key: "e2e/ha-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "ha-" + suffix}

		// config/local runs one manager on the host network; a second Deployment of the same
		// manager on other ports is the standby (same ServiceAccount, same Lease).
		var live appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: operatorDep}, &live)).To(Succeed())
		standby := &appsv1.Deployment{}
		standby.Name, standby.Namespace = operatorDep+"-standby", operatorNS
		standby.Labels = map[string]string{"app.kubernetes.io/name": "lockedcron", "app.kubernetes.io/component": "manager"}
		standby.Spec = *live.Spec.DeepCopy()
		one := int32(1)
		standby.Spec.Replicas = &one
		standby.Spec.Selector.MatchLabels["lockedcron.io/e2e"] = "standby"
		standby.Spec.Template.Labels["lockedcron.io/e2e"] = "standby"
		c := &standby.Spec.Template.Spec.Containers[0]
		for i, a := range c.Args {
			a = strings.Replace(a, "--health-probe-bind-address=127.0.0.1:18081", "--health-probe-bind-address=127.0.0.1:18083", 1)
			c.Args[i] = strings.Replace(a, "--metrics-bind-address=127.0.0.1:18080", "--metrics-bind-address=127.0.0.1:18082", 1)
		}
		Expect(c.Args).To(ContainElements("--health-probe-bind-address=127.0.0.1:18083", "--metrics-bind-address=127.0.0.1:18082"),
			"config/local's manager arguments changed: update this spec")
		c.LivenessProbe.HTTPGet.Port.IntVal = 18083
		c.ReadinessProbe.HTTPGet.Port.IntVal = 18083
		Expect(k8s.Create(ctx, standby)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, standby))).To(Succeed())
			out, err := kubectl("-n", operatorNS, "rollout", "status", "deployment/"+operatorDep, "--timeout=120s")
			Expect(err).NotTo(HaveOccurred(), out)
		})
		out, err := kubectl("-n", operatorNS, "rollout", "status", "deployment/"+standby.Name, "--timeout=120s")
		Expect(err).NotTo(HaveOccurred(), out)

		apply(j)
		Eventually(func() int { return len(runs(j.label)) }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 2))

		var leader string
		Eventually(func(g Gomega) {
			pods := managerPods(g)
			g.Expect(pods).To(HaveLen(2))
			ls := leaders(g, pods)
			g.Expect(ls).To(HaveLen(1), "exactly one of %d managers leads", len(pods))
			leader = ls[0]
		}, time.Minute, time.Second).Should(Succeed())
		before := lease(Default)
		transitions := *before.Spec.LeaseTransitions

		// The occurrences that have a pod, as this test sees them (polled every 100 ms; a
		// finished pod is kept until it is counted, so none goes unseen).
		withPod := map[time.Time]*corev1.Pod{}
		observe := func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
			for i, p := range pods.Items {
				occ, err := time.Parse(time.RFC3339, p.Annotations[runpod.AnnotationScheduledTime])
				g.Expect(err).NotTo(HaveOccurred(), "pod %s", p.Name)
				if withPod[occ] == nil {
					withPod[occ] = &pods.Items[i]
				}
			}
		}
		observe(Default)

		out, err = kubectl("-n", operatorNS, "delete", "pod", leader, "--wait=false")
		Expect(err).NotTo(HaveOccurred(), out)
		deleted := time.Now()

		// Until the kubelet stops it, the deleted leader goes on leading: a graceful stop
		// hands the Lease over once its controllers have stopped, so the pods around the
		// deletion may be either manager's (on a loaded node the kubelet can take longer than
		// an occurrence's period to stop it). Wait for the Lease to change hands and for a pod
		// the standby created (creationTimestamp, whole seconds, after its acquireTime: the
		// old leader acts no more once it has handed the Lease back).
		var after *coordinationv1.Lease
		var byStandby *corev1.Pod
		Eventually(func(g Gomega) {
			observe(g)
			if l := lease(g); *l.Spec.LeaseTransitions > transitions {
				after = l
			}
			g.Expect(after).NotTo(BeNil(), "the Lease has not changed hands")
			for _, p := range withPod {
				if p.CreationTimestamp.After(after.Spec.AcquireTime.Time) && (byStandby == nil || p.CreationTimestamp.Before(&byStandby.CreationTimestamp)) {
					byStandby = p
				}
			}
			g.Expect(byStandby).NotTo(BeNil(), "no pod created since the standby took the Lease at %s", after.Spec.AcquireTime)
		}, time.Minute, 100*time.Millisecond).Should(Succeed())

		// What a user relies on: the schedule goes on. The longest stretch without a pod, from
		// the last occurrence due before the deletion to the standby's first.
		standbyOcc, err := time.Parse(time.RFC3339, byStandby.Annotations[runpod.AnnotationScheduledTime])
		Expect(err).NotTo(HaveOccurred())
		var occs []time.Time
		for occ := range withPod {
			occs = append(occs, occ)
		}
		slices.SortFunc(occs, time.Time.Compare)
		var gap time.Duration
		var gapFrom, gapTo time.Time
		for i := 1; i < len(occs) && !occs[i].After(standbyOcc); i++ {
			if !occs[i].Before(deleted) && occs[i].Sub(occs[i-1]) > gap {
				gap, gapFrom, gapTo = occs[i].Sub(occs[i-1]), occs[i-1], occs[i]
			}
		}
		report := fmt.Sprintf("leader %s deleted; Lease taken over %s after (transitions %d -> %d); "+
			"the standby's first pod %s (occurrence %s); longest stretch without a pod %s (%s to %s)",
			leader, after.Spec.AcquireTime.Sub(deleted).Round(time.Millisecond), transitions, *after.Spec.LeaseTransitions,
			byStandby.Name, standbyOcc.Format(time.RFC3339), gap, gapFrom.Format(time.RFC3339), gapTo.Format(time.RFC3339))
		AddReportEntry("failover gap", report)
		fmt.Fprintln(GinkgoWriter, "failover:", report)
		Expect(gap).To(BeNumerically(">", 0), "no occurrence with a pod after the deletion: "+report)
		Expect(gap).To(BeNumerically("<=", 20*time.Second), report)

		// The standby leads: the deleted leader's replacement waits.
		Eventually(func(g Gomega) {
			pods := managerPods(g)
			g.Expect(pods).To(HaveLen(2))
			g.Expect(leaders(g, pods)).To(HaveLen(1))
		}, 2*time.Minute, time.Second).Should(Succeed())

		suspend(j)
		settle(j)
		rs := runs(j.label)
		expectOneRunPerOccurrence(rs)
		expectExactCounters(j)
		out, err = kubectl("delete", "namespace", j.ns, "--wait", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("installs with kubectl apply -f dist/install.yaml and removes everything with kubectl delete -f", func() {
		root := repoRoot()
		// The bundle becomes THE operator: the suite's own (the same objects, from
		// config/local) is removed first, the documented way, and put back afterwards.
		deleteJobsForeground()
		out, err := kubectl("delete", "-k", filepath.Join(root, "config", "local"), "--wait", "--timeout=3m")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(restoreE2EOperator)

		// dist/install.yaml as committed, with only what this loopback cluster needs
		// (config/components/local-cluster: host network, one replica, local images).
		dir := GinkgoT().TempDir()
		raw, err := os.ReadFile(filepath.Join(root, "dist", "install.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "install.yaml"), raw, 0o644)).To(Succeed())
		rel, err := filepath.Rel(dir, filepath.Join(root, "config", "components", "local-cluster"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"),
			[]byte("resources:\n- install.yaml\ncomponents:\n- "+rel+"\n"), 0o644)).To(Succeed())
		bundle, err := kubectl("kustomize", "--load-restrictor=LoadRestrictionsNone", dir)
		Expect(err).NotTo(HaveOccurred(), bundle)
		bundlePath := filepath.Join(dir, "bundle.yaml")
		Expect(os.WriteFile(bundlePath, []byte(bundle), 0o644)).To(Succeed())

		out, err = kubectl("apply", "--server-side", "-f", bundlePath)
		Expect(err).NotTo(HaveOccurred(), out)
		fmt.Fprintf(GinkgoWriter, "$ kubectl apply --server-side -f install.yaml\n%s\n", out)
		for _, want := range []string{
			"customresourcedefinition.apiextensions.k8s.io/" + crdName,
			"deployment.apps/" + operatorDep, "poddisruptionbudget.policy/" + operatorDep,
			"clusterrole.rbac.authorization.k8s.io/lockedcron-manager-role",
			"validatingadmissionpolicy.admissionregistration.k8s.io/lockedcron-author-permissions",
		} {
			Expect(out).To(ContainSubstring(want))
		}
		Eventually(func() (string, error) {
			return kubectl("get", "crd", crdName, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		}, time.Minute, 200*time.Millisecond).Should(Equal("True"))
		out, err = kubectl("-n", operatorNS, "rollout", "status", "deployment/"+operatorDep, "--timeout=180s")
		Expect(err).NotTo(HaveOccurred(), out)

		// The bundle's operator runs a job; a run is in flight (its pod holds the finalizer)
		// when the removal starts.
		j := job{ns: scenario("bundle"), name: "bundle", key: "e2e/bundle-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "3s", label: "bundle-" + suffix}
		apply(j)
		Eventually(func() int { return len(runs(j.label)) }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 2))
		Eventually(trackingFinalizerPods, 30*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())

		deleteJobsForeground()
		out, err = kubectl("delete", "-f", bundlePath, "--wait", "--timeout=3m")
		Expect(err).NotTo(HaveOccurred(), out)
		fmt.Fprintf(GinkgoWriter, "$ kubectl delete -f install.yaml\n%s\n", out)

		Expect(trackingFinalizerPods()).To(BeEmpty())
		for _, args := range [][]string{
			{"get", "crd", crdName},
			{"get", "namespace", operatorNS},
			{"get", "clusterrole", "lockedcron-manager-role"},
			{"get", "clusterrole", "lockedcron-metrics-reader"},
			{"get", "clusterrolebinding", "lockedcron-manager-rolebinding"},
			{"get", "validatingadmissionpolicy", "lockedcron-author-permissions"},
			{"get", "validatingadmissionpolicybinding", "lockedcron-author-permissions"},
		} {
			out, err := kubectl(args...)
			Expect(err).To(HaveOccurred(), "left behind: %s", out)
			Expect(out).To(ContainSubstring("NotFound"))
		}
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns))).To(Succeed())
		Expect(pods.Items).To(BeEmpty(), "the job's pods were not removed with it")
	})

	It("installs with helm, keeps a job's counters across helm upgrade, and uninstalls", func() {
		root := repoRoot()
		helmBin, err := runScript(filepath.Join(root, "hack", "helm.sh"))
		Expect(err).NotTo(HaveOccurred(), helmBin)
		lines := strings.Split(strings.TrimSpace(helmBin), "\n")
		helmBin = lines[len(lines)-1]
		helm := func(args ...string) string {
			GinkgoHelper()
			out, err := runScript(helmBin, args...)
			Expect(err).NotTo(HaveOccurred(), out)
			fmt.Fprintf(GinkgoWriter, "$ helm %s\n%s\n", strings.Join(args, " "), out)
			return out
		}
		chart := filepath.Join(root, "dist", "chart")
		Expect(helm("lint", "--strict", chart)).To(ContainSubstring("0 chart(s) failed"))
		// Values that would install something else than they say are refused, naming the
		// fix (helper-108): a namespace list given as a string, two managers without leader
		// election (both would act).
		for set, want := range map[string]string{
			"watchNamespaces=team-a":       "watchNamespaces must be a list",
			"leaderElection.enabled=false": "replicas above 1 need leaderElection.enabled",
			"image.tag=1.10":               "is a number in the values", // as a values file's unquoted tag: 1.1
		} {
			args := []string{"template", "t", chart, "--set", set}
			if set == "image.tag=1.10" {
				args = []string{"template", "t", chart, "--set-json", "image.tag=1.10"}
			}
			out, err := runScript(helmBin, args...)
			Expect(err).To(HaveOccurred(), "%v rendered:\n%s", args, out)
			Expect(out).To(ContainSubstring(want))
		}
		// A digest pins the manager's image and the wrapper every job pod copies; free text
		// stays one argument.
		out := helm("template", "t", chart, "--set", "image.digest=sha256:0123", "--set", "clusterName=a: b", "--set", "hostNetwork=true")
		Expect(out).To(ContainSubstring(`image: "k8s.local/lockedcron@sha256:0123"`))
		Expect(out).To(ContainSubstring(`- "--wrapper-image=k8s.local/lockedcron@sha256:0123"`))
		Expect(out).To(ContainSubstring(`- "--cluster-name=a: b"`))
		Expect(out).To(ContainSubstring("dnsPolicy: ClusterFirstWithHostNet"))

		// One operator at a time: the suite's own waits at zero replicas meanwhile.
		out, err = kubectl("-n", operatorNS, "scale", "deployment/"+operatorDep, "--replicas=0")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			out, err := kubectl("-n", operatorNS, "scale", "deployment/"+operatorDep, "--replicas=1")
			Expect(err).NotTo(HaveOccurred(), out)
			out, err = kubectl("-n", operatorNS, "rollout", "status", "deployment/"+operatorDep, "--timeout=180s")
			Expect(err).NotTo(HaveOccurred(), out)
		})
		Eventually(func(g Gomega) { g.Expect(managerPods(g)).To(BeEmpty()) }, time.Minute, 500*time.Millisecond).Should(Succeed())

		// What this loopback cluster needs (as config/components/local-cluster does).
		values := filepath.Join(GinkgoT().TempDir(), "local-values.yaml")
		Expect(os.WriteFile(values, []byte(`image:
  tag: dev
  pullPolicy: Never
replicas: 1
strategy: {type: Recreate}
hostNetwork: true
env:
- {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}
- {name: KUBERNETES_SERVICE_PORT, value: "6443"}
probes: {port: 18081, bindAddress: "127.0.0.1:18081", host: 127.0.0.1}
metrics: {port: 18080, bindAddress: "127.0.0.1:18080"}
clusterName: local
`), 0o644)).To(Succeed())
		helmNS := "lockedcron-helm-" + suffix
		namespaces = append(namespaces, helmNS)
		release := "lc"
		DeferCleanup(func() { _, _ = runScript(helmBin, "uninstall", release, "-n", helmNS, "--ignore-not-found", "--wait") })
		helm("install", release, chart, "-n", helmNS, "--create-namespace", "-f", values, "--wait", "--timeout=3m")
		dep := release + "-lockedcron-controller-manager"

		j := job{ns: scenario("helm"), name: "helm", key: "e2e/helm-" + suffix,
			schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "1s", label: "helm-" + suffix}
		apply(j)
		Eventually(func() int { return len(runs(j.label)) }, 2*time.Minute, time.Second).Should(BeNumerically(">=", 2))
		Eventually(func() int64 { return get(j).Status.Counters.Succeeded }, time.Minute, time.Second).Should(BeNumerically(">=", 2))
		beforeUpgrade := get(j).Status.Counters

		var d appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: helmNS, Name: dep}, &d)).To(Succeed())
		gen := d.Generation
		// The upgrade moves the Lease to a namespace of its own (leaderElection.namespace):
		// the chart made the Role for it in the release's namespace, and the new manager
		// never led (no runs after the upgrade).
		leaseNS := "lockedcron-lease-" + suffix
		namespaces = append(namespaces, leaseNS)
		out, err = kubectl("create", "namespace", leaseNS)
		Expect(err).NotTo(HaveOccurred(), out)
		helm("upgrade", release, chart, "-n", helmNS, "-f", values, "--set", "logLevel=debug", "--set", "leaderElection.namespace="+leaseNS, "--wait", "--timeout=3m")
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: helmNS, Name: dep}, &d)).To(Succeed())
		Expect(d.Generation).To(BeNumerically(">", gen), "the upgrade did not roll the manager")

		// Counters carry on from where they were, and runs go on under the new manager.
		Eventually(func() int64 { return get(j).Status.Counters.Succeeded }, 2*time.Minute, time.Second).
			Should(BeNumerically(">=", beforeUpgrade.Succeeded+2))
		suspend(j)
		settle(j)
		after := get(j).Status.Counters
		Expect(after.Runs).To(BeNumerically(">=", beforeUpgrade.Runs))
		Expect(after.Succeeded).To(BeNumerically(">=", beforeUpgrade.Succeeded))
		rs := runs(j.label)
		expectOneRunPerOccurrence(rs)
		Expect(after.Runs).To(Equal(int64(len(rs))), "status counts %d runs, the audit %d", after.Runs, len(rs))
		expectExactCounters(j)
		fmt.Fprintf(GinkgoWriter, "counters before upgrade %+v, after %+v\n", beforeUpgrade, after)

		out, err = kubectl("delete", "lockedcronjob", j.name, "-n", j.ns, "--cascade=foreground", "--wait", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
		helm("uninstall", release, "-n", helmNS, "--wait")
		Expect(trackingFinalizerPods()).To(BeEmpty())
		// The Deployment and the ServiceAccount share the name <release>-lockedcron-controller-manager.
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}} {
			err := k8s.Get(ctx, types.NamespacedName{Namespace: helmNS, Name: dep}, obj)
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s left behind: %v", obj, dep, err)
		}
		for _, args := range [][]string{
			{"get", "clusterrole", release + "-lockedcron-manager-role"},
			{"get", "clusterrolebinding", release + "-lockedcron-manager-rolebinding"},
			{"get", "validatingadmissionpolicy", release + "-lockedcron-author-permissions"},
		} {
			out, err := kubectl(args...)
			Expect(err).To(HaveOccurred(), "left behind: %s", out)
		}
		// Helm never deletes what crds/ installed: the CRD (and so every LockedCronJob) stays.
		out, err = kubectl("get", "crd", crdName)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl("delete", "namespace", helmNS, "--wait", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
	})
})
