package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestManagerRoleCreatesPodsWhereOwnerReferencesAreEnforced: on an API server with the
// OwnerReferencesPermissionEnforcement admission plugin (OpenShift runs it), a pod whose
// owner reference sets blockOwnerDeletion, as the controller's pods do, may be created
// only by who may update its owner's finalizers. The generated manager role
// (config/rbac/role.yaml) creates the controller's pod there; without the
// lockedcronjobs/finalizers rule, the same pod is refused.
// KUBEBUILDER_ASSETS="$(hack/k8s-binaries.sh)" go test ./cmd/manager/ -run TestManagerRole
func TestManagerRoleCreatesPodsWhereOwnerReferencesAreEnforced(t *testing.T) {
	needAssets(t)
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	env.ControlPlane.GetAPIServer().Configure().Set("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	samples := docs(t, "config", "samples", "team-a.yaml")
	var ns corev1.Namespace
	var job v1alpha1.LockedCronJob
	if err := yaml.Unmarshal(samples[0], &ns); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(samples[2], &job); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&ns, &job} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	var role rbacv1.ClusterRole
	for _, d := range docs(t, "config", "rbac", "role.yaml") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal(d, &r); err == nil && r.Kind == "ClusterRole" {
			role = r
		}
	}
	if role.Name == "" {
		t.Fatal("no ClusterRole in config/rbac/role.yaml")
	}
	withoutFinalizers := role.DeepCopy()
	withoutFinalizers.Name += "-without-finalizers"
	withoutFinalizers.Rules = slices.DeleteFunc(withoutFinalizers.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "lockedcronjobs/finalizers")
	})
	if len(withoutFinalizers.Rules) == len(role.Rules) {
		t.Fatal("the generated role has no lockedcronjobs/finalizers rule")
	}

	// createAs creates the controller's pod for the job as a ServiceAccount bound to r.
	createAs := func(r *rbacv1.ClusterRole) error {
		t.Helper()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: r.Name}}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: sa.Name}},
		}
		for _, o := range []client.Object{r.DeepCopy(), sa, binding} {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns.Name + ":" + sa.Name}
		cs := kubernetes.NewForConfigOrDie(as)
		pod, err := runpod.Build(&job, time.Now().Truncate(time.Second), runpod.Options{ClusterName: "c", WrapperImage: "w"})
		if err != nil {
			t.Fatal(err)
		}
		pod.Name += "-" + r.Name
		// The API server's RBAC reads bindings from an informer: wait until this one
		// allows what it grants (a pod list).
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
			return err == nil, nil
		}); err != nil {
			t.Fatalf("the binding of %s never took effect: %v", r.Name, err)
		}
		_, err = cs.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}

	if err := createAs(&role); err != nil {
		t.Errorf("the generated manager role could not create the controller's pod: %v", err)
	}
	if err := createAs(withoutFinalizers); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("without lockedcronjobs/finalizers update: %v, want refused (the test does not see the plugin's check)", err)
	}
}

// needAssets fails t when KUBEBUILDER_ASSETS (kube-apiserver and etcd for envtest) is not set.
func needAssets(t *testing.T) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run through `make test`, which builds kube-apiserver and etcd and sets it")
	}
}
