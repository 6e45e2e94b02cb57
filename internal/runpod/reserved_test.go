package runpod

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// lockwrapConfig is what the wrapped container's lockwrap reads: its command's flags and
// its environment as the kubelet gives it (a later entry of a name wins over an earlier
// one and over envFrom's), envFrom holding from a ConfigMap or Secret.
func lockwrapConfig(t *testing.T, pod *corev1.Pod, envFrom map[string]string) config.Config {
	t.Helper()
	c := pod.Spec.Containers[0]
	// The Secret holds a url and none of the optional keys.
	secret := map[string]string{SecretKeyURL: "redis://redis:6379"}
	// As the kubelet makes the environment: envFrom first, then env in order, a later
	// entry replacing an earlier one; an optional secretKeyRef to a key the Secret lacks
	// sets nothing (what was there stays).
	env := map[string]string{}
	for k, v := range envFrom {
		env[k] = v
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = kubeletExpand(e.Value, env)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid":
			env[e.Name] = "u1"
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secret[ref.Key]
			if !ok && (ref.Optional == nil || !*ref.Optional) {
				t.Fatalf("%s: the Secret has no key %q, which is not optional: the pod does not start", e.Name, ref.Key)
			}
			if ok {
				env[e.Name] = v
			}
		default:
			env[e.Name] = ""
		}
	}
	cfg, _, err := config.Parse(c.Command[1:], func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// kubeletExpand is a literal value of the environment as the kubelet gives it: $(NAME)
// is the value of a variable set before it (envFrom's or an earlier entry's), or stays
// as written when there is none; $$ is $ (k8s.io/kubernetes third_party expansion).
func kubeletExpand(in string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		if in[i] != '$' || i+1 == len(in) {
			b.WriteByte(in[i])
			continue
		}
		switch in[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(in[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := in[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// TestSpecValuesReachLockwrapVerbatim: the kubelet expands $(NAME) in a literal value of
// the environment from the variables before it, the Redis credentials among them. A
// lock key "nightly-$(POD_NAMESPACE)" became one key a namespace (and a pod of every
// namespace ran each occurrence); "k-$(LOCKEDCRON_REDIS_PASSWORD)" put the password in
// the key, the report and the pod's status. lockwrap gets spec's key, and the template's
// termination message path, as written.
func TestSpecValuesReachLockwrapVerbatim(t *testing.T) {
	job := nightly()
	job.Spec.Lock.Key = "nightly-$(MODE)-$(LOCKEDCRON_REDIS_URL)-$$(MODE)-$(NOPE)-$(-$"
	job.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/tmp/$(MODE)/report"
	pod, err := Build(job, time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := lockwrapConfig(t, pod, map[string]string{"NOPE": "envFrom"})
	if cfg.Key != job.Spec.Lock.Key {
		t.Errorf("lockwrap's key is %q, want spec.lock.key %q", cfg.Key, job.Spec.Lock.Key)
	}
	if want := "/tmp/$(MODE)/report"; cfg.TerminationLog != want {
		t.Errorf("lockwrap writes its report to %q, the kubelet reads %q", cfg.TerminationLog, want)
	}
	if want := "eu-1/billing/" + pod.Name + "/u1"; cfg.Holder != want || cfg.HolderInstance != "u1" {
		t.Errorf("holder %q instance %q, want %q and u1", cfg.Holder, cfg.HolderInstance, want)
	}
}

// TestTemplateCannotSetLockwrapsVariables: lockwrap reads its settings from LOCKEDCRON_*
// variables, and the controller sets those of the job's spec; the others reached lockwrap
// from the template. A LOCKEDCRON_RUN_ID copied from a crontab made every scheduled run
// share one ledger entry: after the first success, every occurrence was suppressed as
// done until the retention ended. A template's own variable is refused, naming it; one
// from envFrom (which nobody can see before the pod starts) is overridden, empty.
func TestTemplateCannotSetLockwrapsVariables(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	job := nightly()
	job.Spec.Template.Spec.Containers[0].Env = append(job.Spec.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: "GREETING", Value: "hi"}, corev1.EnvVar{Name: config.EnvRunID, Value: "debug-1"})
	_, err := Build(job, occ, opts)
	if err == nil || !strings.Contains(err.Error(), "spec.template.spec.containers[0].env[2]") || !strings.Contains(err.Error(), config.EnvRunID) {
		t.Fatalf("Build = %v, want an error naming env[2] and %s", err, config.EnvRunID)
	}

	// The one setting without a spec field, which docs/idempotency.md says to set there.
	monotonic := nightly()
	monotonic.Spec.Template.Spec.Containers[0].Env = append(monotonic.Spec.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: config.EnvWatermarkMonotonic, Value: "true"})
	mp, err := Build(monotonic, occ, opts)
	if err != nil {
		t.Fatalf("%s in the template: %v", config.EnvWatermarkMonotonic, err)
	}
	if cfg := lockwrapConfig(t, mp, nil); !cfg.WatermarkMonotonic {
		t.Errorf("%s=true in the template does not reach lockwrap", config.EnvWatermarkMonotonic)
	}

	pod, err := Build(nightly(), occ, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Every setting lockwrap reads, from envFrom: none changes what it runs with.
	envFrom := map[string]string{}
	for _, v := range config.Variables() {
		envFrom[v] = "forged"
	}
	for v, val := range map[string]string{config.EnvRunID: "debug-1", config.EnvNotBefore: "2030-01-01T00:00:00Z",
		config.EnvRetryDeadline: "2030-01-01T00:00:00Z", config.EnvWatermarkMonotonic: "true", config.EnvRetryAttempts: "7",
		config.EnvNotAfter: "2030-01-01T00:00:00Z", config.EnvMinReplicas: "3"} {
		envFrom[v] = val
	}
	if got, want := lockwrapConfig(t, pod, envFrom), lockwrapConfig(t, pod, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("lockwrap took settings from envFrom:\n got %+v\nwant %+v", got, want)
	}
	for _, v := range config.Variables() {
		if !slices.ContainsFunc(pod.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == v }) {
			t.Errorf("%s is not set on the pod: envFrom's would reach lockwrap", v)
		}
	}
}

// TestTemplateCannotTakeLockwrapsNamesOrPlace: the init container's name, the wrapped
// container's mounts at lockwrap's directory, and a $(LOCKEDCRON_REDIS_…) reference in its
// command, args or a mount's subPathExpr (the kubelet expands it from the environment that
// holds the Redis credentials: the job got them on its command line, or as a directory's
// name, and the kubelet's error for a bad path put them in status) are refused naming the field: a container
// of the init container's name, or a second mount at /lockedcron, made a pod the API
// server refused at every occurrence; a mount at /lockedcron/lockwrap put the template's
// file in lockwrap's place, and the job ran without the lock.
func TestTemplateCannotTakeLockwrapsNamesOrPlace(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		edit func(*corev1.PodSpec)
		want string
	}{
		"a container named as the init container": {func(s *corev1.PodSpec) {
			s.Containers = append(s.Containers, corev1.Container{Name: InitContainerName, Image: "x", Command: []string{"x"}})
		}, "spec.template.spec.containers[1]"},
		"a mount at lockwrap's directory": {func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: WrapperDir}}
		}, "spec.template.spec.containers[0].volumeMounts[0]"},
		"the Redis password in args": {func(s *corev1.PodSpec) {
			s.Containers[0].Args = []string{"--all", "--redis-pass=$(LOCKEDCRON_REDIS_PASSWORD)"}
		}, "spec.template.spec.containers[0].args[1]"},
		"the Redis URL in command": {func(s *corev1.PodSpec) {
			s.Containers[0].Command = []string{"/bin/reconcile", "$(LOCKEDCRON_REDIS_URL)"}
		}, "spec.template.spec.containers[0].command[1]"},
		"the Redis password in a subPathExpr": {func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/all"}, {Name: "data", MountPath: "/d", SubPathExpr: "runs/$$$(LOCKEDCRON_REDIS_PASSWORD)"}}
		}, "spec.template.spec.containers[0].volumeMounts[1].subPathExpr"},
		"the termination message in lockwrap's directory": {func(s *corev1.PodSpec) {
			s.Containers[0].TerminationMessagePath = "lockedcron/../lockedcron/lockwrap"
		}, "spec.template.spec.containers[0].terminationMessagePath"},
		"a relative mount on lockwrap": {func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "lockedcron/lockwrap", SubPath: "lockwrap"}}
		}, "spec.template.spec.containers[0].volumeMounts[0]"},
		"a device at lockwrap's directory": {func(s *corev1.PodSpec) {
			s.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk", DevicePath: "/lockedcron/lockwrap"}}
		}, "spec.template.spec.containers[0].volumeDevices[0]"},
		"lockwrap's volume mounted by a sidecar": {func(s *corev1.PodSpec) {
			s.Containers = append(s.Containers, corev1.Container{Name: "side", Image: "x", VolumeMounts: []corev1.VolumeMount{{Name: VolumeName, MountPath: "/x"}}})
		}, "spec.template.spec.containers[1].volumeMounts[0]"},
		"lockwrap's volume mounted by an init container": {func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "setup", Image: "x", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d"}, {Name: VolumeName, MountPath: "/x"}}}}
		}, "spec.template.spec.initContainers[0].volumeMounts[1]"},
		"a mount on lockwrap": {func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: WrapperPath + "/", SubPath: "lockwrap"}}
		}, "spec.template.spec.containers[0].volumeMounts[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			job := nightly()
			c.edit(&job.Spec.Template.Spec)
			if _, err := Build(job, occ, opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Build = %v, want an error naming %s", err, c.want)
			}
		})
	}
}

// TestRelativeTerminationMessagePath: the kubelet reads a relative terminationMessagePath
// from the container's root (it mounts the file at "/" + path); lockwrap wrote its report
// relative to the job's workingDir, and every run was counted Error, its report lost.
func TestRelativeTerminationMessagePath(t *testing.T) {
	job := nightly()
	c := &job.Spec.Template.Spec.Containers[0]
	c.TerminationMessagePath, c.WorkingDir = "logs/./termination-log", "/app"
	pod, err := Build(job, time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := lockwrapConfig(t, pod, nil).TerminationLog; got != "/logs/termination-log" {
		t.Errorf("lockwrap writes its report to %q, the kubelet reads /logs/termination-log", got)
	}
}

// TestReportWithinTheKubeletsShare: the kubelet keeps of a termination message the
// container's share of 12 KiB, 12288 / (containers + init containers); lockwrap's report
// (2048 bytes at most) was cut in a pod of more than six, no longer JSON, and counted Error.
// lockwrap gets the pod's share when it is smaller.
func TestReportWithinTheKubeletsShare(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	for _, c := range []struct{ containers, inits, want int }{{1, 0, 2048}, {3, 2, 2048}, {5, 2, 1536}, {10, 3, 877}} {
		job := nightly()
		spec := &job.Spec.Template.Spec
		for i := 1; i < c.containers; i++ {
			spec.Containers = append(spec.Containers, corev1.Container{Name: fmt.Sprintf("side-%d", i), Image: "x"})
		}
		for i := 0; i < c.inits; i++ {
			spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: fmt.Sprintf("init-%d", i), Image: "x"})
		}
		pod, err := Build(job, occ, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := lockwrapConfig(t, pod, nil).ReportMaxBytes; got != c.want {
			t.Errorf("%d containers and %d init containers (and lockwrap's): report within %d bytes, want %d", c.containers, c.inits, got, c.want)
		}
	}
}

// TestTemplateMayNameTheOccurrence: the job's command may take lockwrap's variables for
// its own (the occurrence, the holder) through $(VAR), and $$(…) is a literal: only a
// reference to the Redis credentials is refused.
func TestTemplateMayNameTheOccurrence(t *testing.T) {
	job := nightly()
	job.Spec.Template.Spec.Containers[0].Args = []string{"--as-of", "$(LOCKEDCRON_OCCURRENCE)", "--literal=$$(LOCKEDCRON_REDIS_PASSWORD)"}
	job.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPathExpr: "runs/$(LOCKEDCRON_OCCURRENCE)/$$(LOCKEDCRON_REDIS_URL)"}}
	if _, err := Build(job, time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), opts); err != nil {
		t.Errorf("Build = %v", err)
	}
}
