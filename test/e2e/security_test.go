//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// Tenant safety (issue 10) on the real cluster, with the operator as config/local
// deploys it: the admission policy installed with it, the manager pod accepted by a
// namespace that enforces the restricted Pod Security profile, and metrics served over
// HTTPS to a token bound to metrics-reader only.
var _ = Describe("tenant safety on a real cluster", Ordered, func() {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	ns := "e2e-tenant-" + suffix
	restricted := "e2e-restricted-" + suffix
	metricsNS := "e2e-metrics-" + suffix

	AfterEach(func() { dumpOnFailure(ns) })
	AfterAll(func() {
		for _, n := range []string{ns, restricted, metricsNS} {
			_, _ = kubectl("delete", "namespace", n, "--wait=false")
		}
		_, _ = kubectl("delete", "clusterrolebinding", "e2e-metrics-"+suffix, "--ignore-not-found")
	})

	It("denies a LockedCronJob to a user who may not create pods, and accepts it from one who may", func() {
		out, err := kubectlIn(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: redis
  namespace: %[1]s
stringData:
  url: %[2]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: lcj-author
  namespace: %[1]s
rules:
- apiGroups: [scheduling.lockedcron.io]
  resources: [lockedcronjobs]
  verbs: [get, list, create, update, patch]
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [redis]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: pod-creator
  namespace: %[1]s
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: lcj-author
  namespace: %[1]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lcj-author}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: e2e-no-pods}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: e2e-author}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: pod-creator
  namespace: %[1]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-creator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: e2e-author}
`, ns, podRedis), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		// The policy type-checks against the CRD's schema (kube-controller-manager writes
		// status.typeChecking; envtest has none, so only here).
		Eventually(func(g Gomega) {
			var pol admissionregistrationv1.ValidatingAdmissionPolicy
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "lockedcron-author-permissions"}, &pol)).To(Succeed())
			g.Expect(pol.Status.TypeChecking).NotTo(BeNil())
			g.Expect(pol.Status.TypeChecking.ExpressionWarnings).To(BeEmpty())
		}, time.Minute, time.Second).Should(Succeed())

		lcj := func(name string) string {
			return fmt.Sprintf(`apiVersion: scheduling.lockedcron.io/v1alpha1
kind: LockedCronJob
metadata:
  name: %s
  namespace: %s
spec:
  schedule: "0 0 1 1 *"
  suspend: true
  lock:
    redis:
      secretRef: {name: redis}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: job
        image: k8s.local/lockedcron-e2e-job:dev
        command: ["/bin/true"]
`, name, ns)
		}
		out, err = kubectlIn(lcj("no-pods"), "--as=e2e-no-pods", "create", "-f", "-")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("missing permission: create pods"))
		out, err = kubectlIn(lcj("author"), "--as=e2e-author", "create", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("runs the manager's pod in a namespace that enforces the restricted Pod Security profile", func() {
		// The pod of config/manager's Deployment (config/local relaxes the operator's own
		// namespace for host networking), created with a server-side dry run (it passes
		// admission, Pod Security included, but does not run) in a restricted namespace.
		raw, err := os.ReadFile("../../config/manager/manager.yaml")
		Expect(err).NotTo(HaveOccurred())
		var dep *appsv1.Deployment
		rd := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
		for dep == nil {
			var d appsv1.Deployment
			Expect(rd.Decode(&d)).To(Succeed())
			if d.Kind == "Deployment" {
				dep = &d
			}
		}
		pod := corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "manager", Namespace: restricted},
			Spec:       dep.Spec.Template.Spec,
		}
		pod.Spec.ServiceAccountName = ""
		pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
		manifest, err := sigsyaml.Marshal(pod)
		Expect(err).NotTo(HaveOccurred())
		out, err := kubectlIn(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
`, restricted), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectlIn(string(manifest), "create", "--dry-run=server", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).NotTo(ContainSubstring("violate"))
		// And a pod that is not restricted is refused there (the label is enforced).
		pod.Name = "privileged"
		// (runAsNonRoot false: privileged with allowPrivilegeEscalation false would be
		// invalid before Pod Security is even asked.)
		pod.Spec.Containers[0].SecurityContext.RunAsNonRoot = func(b bool) *bool { return &b }(false)
		pod.Spec.SecurityContext = nil
		manifest, err = sigsyaml.Marshal(pod)
		Expect(err).NotTo(HaveOccurred())
		out, err = kubectlIn(string(manifest), "create", "--dry-run=server", "-f", "-")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("violates PodSecurity"))
	})

	It("serves metrics over HTTPS to a token bound to metrics-reader only", func() {
		url := envOr("LOCKEDCRON_E2E_METRICS_URL", "https://127.0.0.1:18080/metrics") // config/local
		out, err := kubectl("create", "namespace", metricsNS)
		Expect(err).NotTo(HaveOccurred(), out)
		for _, sa := range []string{"scraper", "other"} {
			out, err = kubectl("-n", metricsNS, "create", "serviceaccount", sa)
			Expect(err).NotTo(HaveOccurred(), out)
		}
		out, err = kubectl("create", "clusterrolebinding", "e2e-metrics-"+suffix,
			"--clusterrole=lockedcron-metrics-reader", "--serviceaccount="+metricsNS+":scraper")
		Expect(err).NotTo(HaveOccurred(), out)
		token := func(sa string) string {
			out, err := kubectl("-n", metricsNS, "create", "token", sa)
			Expect(err).NotTo(HaveOccurred(), out)
			return strings.TrimSpace(out)
		}
		scraper, other := token("scraper"), token("other")

		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		status := func(bearer string) func() (int, error) {
			return func() (int, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return 0, err
				}
				if bearer != "" {
					req.Header.Set("Authorization", "Bearer "+bearer)
				}
				resp, err := hc.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode == http.StatusOK && !strings.Contains(string(body), "# HELP") {
					return 0, fmt.Errorf("200 without metrics")
				}
				return resp.StatusCode, nil
			}
		}
		// The binding reaches the manager's authorizer through the API server at once,
		// but allow for its RBAC cache.
		Eventually(status(scraper), 30*time.Second, time.Second).Should(Equal(http.StatusOK))
		Expect(status("")()).To(Equal(http.StatusUnauthorized))
		Expect(status(other)()).To(Equal(http.StatusForbidden))
		// Not plain HTTP (the TLS server answers 400, or the connection fails).
		if resp, err := hc.Get(strings.Replace(url, "https://", "http://", 1)); err == nil {
			resp.Body.Close()
			Expect(resp.StatusCode).NotTo(Equal(http.StatusOK))
		}
	})
})
