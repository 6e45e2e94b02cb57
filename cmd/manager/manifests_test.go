package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/yaml"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// docs splits a YAML file of config/ into its documents.
func docs(t *testing.T, path ...string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	rd := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, doc)
	}
}

// The manager's Deployment passes the restricted Pod Security profile, evaluated by
// the API server's own checks (k8s.io/pod-security-admission, latest version).
func TestManagerDeploymentIsRestricted(t *testing.T) {
	var dep *appsv1.Deployment
	var ns *corev1.Namespace
	for _, doc := range docs(t, "config", "manager", "manager.yaml") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "Deployment":
			dep = &appsv1.Deployment{}
			if err := yaml.Unmarshal(doc, dep); err != nil {
				t.Fatal(err)
			}
		case "Namespace":
			ns = &corev1.Namespace{}
			if err := yaml.Unmarshal(doc, ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil || ns == nil {
		t.Fatal("config/manager/manager.yaml: no Deployment or Namespace")
	}
	if got := ns.Labels[psapi.EnforceLevelLabel]; got != string(psapi.LevelRestricted) {
		t.Errorf("namespace %s enforces %q, want restricted", ns.Name, got)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := policy.AggregateCheckResults(eval.EvaluatePod(
		psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()},
		&dep.Spec.Template.ObjectMeta, &dep.Spec.Template.Spec))
	if !res.Allowed {
		t.Errorf("the manager pod violates restricted: %s", res.ForbiddenDetail())
	}
	// Beyond the profile: nothing written to the root filesystem.
	for _, c := range dep.Spec.Template.Spec.Containers {
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem not true", c.Name)
		}
		if !slices.Contains(c.Args, "--metrics-secure=true") {
			t.Errorf("container %s: args %q, want --metrics-secure=true", c.Name, c.Args)
		}
	}
}

// The metrics-reader ClusterRole lets a scraper get /metrics and nothing else; the
// generated manager role may create TokenReviews and SubjectAccessReviews.
func TestMetricsRBAC(t *testing.T) {
	var reader rbacv1.ClusterRole
	if err := yaml.Unmarshal(docs(t, "config", "rbac", "metrics_reader_role.yaml")[0], &reader); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if reader.Name != "metrics-reader" || len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, want[0].NonResourceURLs) ||
		!slices.Equal(reader.Rules[0].Verbs, want[0].Verbs) || len(reader.Rules[0].Resources) != 0 {
		t.Errorf("metrics-reader = %+v, want %+v", reader.Rules, want)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(docs(t, "config", "rbac", "role.yaml")[0], &role); err != nil {
		t.Fatal(err)
	}
	for _, need := range []string{"authentication.k8s.io/tokenreviews", "authorization.k8s.io/subjectaccessreviews"} {
		group, res, _ := strings.Cut(need, "/")
		found := false
		for _, r := range role.Rules {
			found = found || slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, "create")
		}
		if !found {
			t.Errorf("manager-role cannot create %s (run make manifests)", need)
		}
	}
}

// ruleSet expands rules to group/resource/name/verb tuples.
func ruleSet(rules []rbacv1.PolicyRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"*"}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						out[g+"/"+res+"/"+n+"/"+v] = true
					}
				}
			}
		}
	}
	return out
}

// config/namespaced: the cut-down ClusterRole plus each namespace's Role grant exactly
// what the generated ClusterRole does, so `make manifests` changes cannot be missed there.
func TestNamespacedOverlayRBAC(t *testing.T) {
	var generated, cut rbacv1.ClusterRole
	if err := yaml.Unmarshal(docs(t, "config", "rbac", "role.yaml")[0], &generated); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(docs(t, "config", "namespaced", "cluster_role.yaml")[0], &cut); err != nil {
		t.Fatal(err)
	}
	want := ruleSet(generated.Rules)
	roles := 0
	for _, doc := range docs(t, "config", "namespaced", "roles.yaml") {
		var role rbacv1.Role
		if err := yaml.Unmarshal(doc, &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "Role" {
			continue
		}
		roles++
		got := ruleSet(append(append([]rbacv1.PolicyRule(nil), cut.Rules...), role.Rules...))
		for k := range want {
			if !got[k] {
				t.Errorf("Role %s/%s + cut ClusterRole miss %s", role.Namespace, role.Name, k)
			}
		}
		for k := range got {
			if !want[k] {
				t.Errorf("Role %s/%s + cut ClusterRole grant %s, which the generated role does not", role.Namespace, role.Name, k)
			}
		}
		// Namespaced rights only in the Role, cluster-scoped only in the ClusterRole.
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "namespaces") || slices.Contains(r.Resources, "tokenreviews") || slices.Contains(r.Resources, "subjectaccessreviews") {
				t.Errorf("Role %s/%s has a cluster-scoped rule %+v", role.Namespace, role.Name, r)
			}
		}
	}
	if roles < 1 {
		t.Error("config/namespaced/roles.yaml: no Role")
	}
}

// config/network-policy lets in the manager's metrics port and nothing else: its policy
// selects the manager's pods (in their namespace), names a port the manager's container
// serves metrics on (the one the metrics Service targets), and only that one.
func TestNetworkPolicySelectsTheMetricsPort(t *testing.T) {
	dep := managerDeployment(t)
	var svc corev1.Service
	if err := yaml.Unmarshal(docs(t, "config", "manager", "metrics_service.yaml")[0], &svc); err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	if err := yaml.Unmarshal(docs(t, "config", "network-policy", "allow-metrics-traffic.yaml")[0], &np); err != nil {
		t.Fatal(err)
	}
	if np.Namespace != dep.Namespace {
		t.Errorf("the policy is in namespace %q, the manager in %q", np.Namespace, dep.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the policy's podSelector %v does not select the manager's pods %v (%v)", np.Spec.PodSelector, dep.Spec.Template.Labels, err)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 1 {
		t.Fatalf("want one ingress rule and Ingress only: %+v", np.Spec)
	}
	var metrics *corev1.ContainerPort
	for _, c := range dep.Spec.Template.Spec.Containers {
		for i, p := range c.Ports {
			if p.Name == svc.Spec.Ports[0].TargetPort.String() {
				metrics = &c.Ports[i]
			}
		}
	}
	if metrics == nil || !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--metrics-bind-address=:"+strconv.Itoa(int(metrics.ContainerPort))) {
		t.Fatalf("the metrics Service targets %s, which is not the manager's metrics port", svc.Spec.Ports[0].TargetPort.String())
	}
	rule := np.Spec.Ingress[0]
	if len(rule.Ports) != 1 || rule.Ports[0].Port == nil ||
		(rule.Ports[0].Port.String() != metrics.Name && rule.Ports[0].Port.IntValue() != int(metrics.ContainerPort)) {
		t.Errorf("the policy lets in %v, want the metrics port (%s, %d) only", rule.Ports, metrics.Name, metrics.ContainerPort)
	}
	if len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || rule.From[0].PodSelector != nil ||
		!maps.Equal(rule.From[0].NamespaceSelector.MatchLabels, map[string]string{"metrics": "enabled"}) || len(rule.From[0].NamespaceSelector.MatchExpressions) > 0 {
		t.Errorf("the policy lets in %v, want namespaces labelled metrics: enabled (as the docs say) only", rule.From)
	}
	// kubectl apply -k config/network-policy applies it.
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(docs(t, "config", "network-policy", "kustomization.yaml")[0], &k); err != nil || !slices.Equal(k.Resources, []string{"allow-metrics-traffic.yaml"}) {
		t.Errorf("config/network-policy's kustomization lists %v (%v), want the policy", k.Resources, err)
	}
}

// managerDeployment is config/manager/manager.yaml's Deployment.
func managerDeployment(t *testing.T) appsv1.Deployment {
	t.Helper()
	var dep appsv1.Deployment
	for _, doc := range docs(t, "config", "manager", "manager.yaml") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		if tm.Kind == "Deployment" {
			if err := yaml.Unmarshal(doc, &dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dep
}
