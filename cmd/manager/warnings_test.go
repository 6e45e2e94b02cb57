package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// TestPodCreationLogsNoWarningOfItsOwn: every pod the controller builds gives each
// optional Redis credential an empty entry before its Secret reference (so that a
// template's envFrom cannot supply it), and the API server warns of every such pair
// ("hides previous definition"). The manager's client does not log those warnings, three
// a pod (at 5,000 jobs a minute, 15,000 log lines of nothing to act on); it logs the
// others, such as the same warning for a template's own variables.
// KUBEBUILDER_ASSETS="$(hack/k8s-binaries.sh)" go test ./cmd/manager/ -run TestPodCreationLogs
func TestPodCreationLogsNoWarningOfItsOwn(t *testing.T) {
	needAssets(t)
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	base, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var logged []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = crlog.IntoContext(ctx, funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{}))
	warnings := func() (out []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range logged {
			if strings.Contains(l, "hides previous definition") {
				out = append(out, l)
			}
		}
		logged = nil
		return out
	}

	job := v1alpha1.LockedCronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nightly", UID: "uid-1"},
		Spec: v1alpha1.LockedCronJobSpec{
			Schedule: "0 2 * * *",
			Lock:     v1alpha1.LockSpec{Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "job", Image: "example/job:1", Command: []string{"/job"}}},
			}},
		},
	}
	occ := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	build := func(suffix string, env ...corev1.EnvVar) *corev1.Pod {
		t.Helper()
		j := job.DeepCopy()
		j.Spec.Template.Spec.Containers[0].Env = env
		pod, err := runpod.Build(j, occ, runpod.Options{ClusterName: "c", WrapperImage: "w"})
		if err != nil {
			t.Fatal(err)
		}
		pod.Name += suffix
		pod.OwnerReferences = nil // no job object: nothing here reconciles
		return pod
	}
	create := func(cfg *rest.Config, pod *corev1.Pod) {
		t.Helper()
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}

	// controller-runtime's own client logs every warning: the API server warns of the pairs.
	create(base, build("-plain"))
	if w := warnings(); len(w) != 3 {
		t.Fatalf("a plain client logged %d warnings of hidden definitions, want 3 (one a credential): %q", len(w), w)
	}

	cfg, _, err := clientConfigs(base, 100, 200)
	if err != nil {
		t.Fatal(err)
	}
	create(cfg, build("-manager"))
	if w := warnings(); len(w) != 0 {
		t.Errorf("the manager's client logged the warnings of its own pods: %q", w)
	}
	create(cfg, build("-template", corev1.EnvVar{Name: "MODE", Value: "a"}, corev1.EnvVar{Name: "MODE", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}))
	if w := warnings(); len(w) != 1 || !strings.Contains(w[0], "MODE") {
		t.Errorf("the manager's client logged %q, want the one warning of the template's MODE", w)
	}
}
