package runpod

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

func nightly() *v1alpha1.LockedCronJob {
	return &v1alpha1.LockedCronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "billing", UID: "uid-1"},
		Spec: v1alpha1.LockedCronJobSpec{
			Schedule:                "0 2 * * *",
			StartingDeadlineSeconds: ptr.To[int64](120),
			Lock: v1alpha1.LockSpec{
				Key:   "reconcile-ledger",
				TTL:   &metav1.Duration{Duration: 30 * time.Second},
				Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}},
			},
			Contention: v1alpha1.ContentionSpec{
				Policy: v1alpha1.ContentionRetry,
				Retry: &v1alpha1.RetrySpec{Attempts: 5,
					Backoff:    &metav1.Duration{Duration: time.Second},
					MaxBackoff: &metav1.Duration{Duration: 30 * time.Second}},
			},
			Dedupe: v1alpha1.DedupeSpec{Retention: &metav1.Duration{Duration: 168 * time.Hour}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ledger"}, Annotations: map[string]string{"team": "billing"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:    "job",
						Image:   "example/ledger:1",
						Command: []string{"/bin/reconcile"},
						Args:    []string{"--all"},
						Env:     []corev1.EnvVar{{Name: "MODE", Value: "full"}},
					}},
				},
			},
		},
	}
}

var opts = Options{ClusterName: "eu-1", WrapperImage: "k8s.local/lockedcron:dev", WrapperImagePullPolicy: corev1.PullIfNotPresent,
	MadeAt: time.Date(2026, 11, 30, 1, 59, 50, 250_000_000, time.UTC)}

func TestBuildLiteralPod(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	got, err := Build(nightly(), occ, opts)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(env, key string, optional bool) corev1.EnvVar {
		s := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: key}
		if optional {
			s.Optional = ptr.To(true)
		}
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: s}}
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "nightly-1796004000",
			Namespace:   "billing",
			Labels:      map[string]string{"app": "ledger", "scheduling.lockedcron.io/job": "nightly"},
			Annotations: map[string]string{"team": "billing", "scheduling.lockedcron.io/scheduled-time": "2026-11-30T02:00:00Z", "scheduling.lockedcron.io/wrapped-container": "job"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "scheduling.lockedcron.io/v1alpha1", Kind: "LockedCronJob", Name: "nightly", UID: "uid-1",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			Finalizers: []string{"scheduling.lockedcron.io/run-tracking"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes:       []corev1.Volume{{Name: "lockedcron-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers: []corev1.Container{{
				Name:                     "lockedcron-install",
				Image:                    "k8s.local/lockedcron:dev",
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Command:                  []string{"/lockwrap", "cp", "/lockedcron/lockwrap", fmt.Sprintf("--protocol=%d", config.Protocol)},
				VolumeMounts:             []corev1.VolumeMount{{Name: "lockedcron-bin", MountPath: "/lockedcron"}},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
			Containers: []corev1.Container{{
				Name:    "job",
				Image:   "example/ledger:1",
				Command: []string{"/lockedcron/lockwrap", "--", "/bin/reconcile"},
				Args:    []string{"--all"},
				Env: []corev1.EnvVar{
					{Name: "MODE", Value: "full"},
					secret("LOCKEDCRON_REDIS_URL", "url", false),
					{Name: "LOCKEDCRON_REDIS_USERNAME"}, // what the Secret lacks is empty, not envFrom's
					secret("LOCKEDCRON_REDIS_USERNAME", "username", true),
					{Name: "LOCKEDCRON_REDIS_PASSWORD"},
					secret("LOCKEDCRON_REDIS_PASSWORD", "password", true),
					{Name: "LOCKEDCRON_REDIS_CA_CERT"},
					secret("LOCKEDCRON_REDIS_CA_CERT", "ca.crt", true),
					{Name: "LOCKEDCRON_LOCK_KEY", Value: "reconcile-ledger"},
					{Name: "LOCKEDCRON_LOCK_TTL", Value: "30s"},
					{Name: "LOCKEDCRON_RENEW_INTERVAL", Value: "10s"},
					{Name: "LOCKEDCRON_OCCURRENCE", Value: "2026-11-30T02:00:00Z"},
					{Name: "LOCKEDCRON_POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
					{Name: "LOCKEDCRON_HOLDER", Value: "eu-1/billing/nightly-1796004000/$(LOCKEDCRON_POD_UID)"}, // expanded by the kubelet
					{Name: "LOCKEDCRON_ON_LOST", Value: "terminate"},
					{Name: "LOCKEDCRON_KILL_GRACE", Value: "10s"},
					{Name: "LOCKEDCRON_MIN_REPLICAS", Value: "0"},
					{Name: "LOCKEDCRON_DEDUPE_RETENTION", Value: "168h0m0s"},
					{Name: "LOCKEDCRON_TERMINATION_LOG", Value: "/dev/termination-log"},
					{Name: "LOCKEDCRON_BLACKOUT_ID", Value: "uid-1"},
					{Name: "LOCKEDCRON_MADE_AT", Value: "2026-11-30T01:59:50.25Z"},
					{Name: "LOCKEDCRON_HOLDER_INSTANCE", Value: "$(LOCKEDCRON_POD_UID)"},
					{Name: "LOCKEDCRON_CONTENTION", Value: "retry"},
					{Name: "LOCKEDCRON_RETRY_ATTEMPTS", Value: "5"},
					{Name: "LOCKEDCRON_RETRY_BACKOFF", Value: "1s"},
					{Name: "LOCKEDCRON_RETRY_MAX_BACKOFF", Value: "30s"},
					{Name: "LOCKEDCRON_RETRY_DEADLINE", Value: "2026-11-30T02:02:00Z"},
					{Name: "LOCKEDCRON_NOT_AFTER", Value: "2026-11-30T02:02:00Z"},
					{Name: "LOCKEDCRON_NOT_BEFORE", Value: "2026-11-30T02:00:00Z"},
					// lockwrap's other settings, empty (its defaults) whatever envFrom holds
					{Name: "LOCKEDCRON_REDIS_CA_FILE"},
					{Name: "LOCKEDCRON_REDIS_ALLOWED_HOSTS"},
					{Name: "LOCKEDCRON_RUN_ID"},
					{Name: "LOCKEDCRON_REPORT_MAX_BYTES"},
					{Name: "LOCKEDCRON_WATERMARK_MONOTONIC"},
					{Name: "LOCKEDCRON_BACKOFF_LIMIT"},
					{Name: "LOCKEDCRON_ATTEMPTS_DIR"},
				},
				VolumeMounts:             []corev1.VolumeMount{{Name: "lockedcron-bin", MountPath: "/lockedcron", ReadOnly: true}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Build() mismatch (-want +got):\n%s", d)
	}
}

func TestBuildDoesNotTouchTheJob(t *testing.T) {
	job := nightly()
	before := job.DeepCopy()
	if _, err := Build(job, time.Unix(1764468000, 0), opts); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, job); d != "" {
		t.Errorf("Build changed its input:\n%s", d)
	}
}

func TestBuildWrapsNamedContainerAndDefaults(t *testing.T) {
	job := nightly()
	job.Spec.Lock.Key = ""
	job.Spec.Contention = v1alpha1.ContentionSpec{}
	job.Spec.WrapContainer = "main"
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	job.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "sidecar", Image: "proxy", Args: []string{"serve"}},
		{Name: "main", Image: "job", Command: []string{"run"}, TerminationMessagePath: "/tmp/report"},
	}
	pod, err := Build(job, time.Unix(60, 0), opts)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].Command != nil || len(pod.Spec.Containers[0].Env) != 0 {
		t.Errorf("sidecar was wrapped: %+v", pod.Spec.Containers[0])
	}
	main := pod.Spec.Containers[1]
	if d := cmp.Diff([]string{"/lockedcron/lockwrap", "--", "run"}, main.Command); d != "" {
		t.Errorf("command (-want +got):\n%s", d)
	}
	if main.Args != nil {
		t.Errorf("args: got %q, want nil kept as nil", main.Args)
	}
	env := map[string]string{}
	for _, e := range main.Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{
		"LOCKEDCRON_LOCK_KEY":         "billing/nightly",
		"LOCKEDCRON_CONTENTION":       "skip",
		"LOCKEDCRON_TERMINATION_LOG":  "/tmp/report",
		"LOCKEDCRON_RENEW_INTERVAL":   "10s",
		"LOCKEDCRON_RETRY_ATTEMPTS":   "",
		"LOCKEDCRON_RETRY_DEADLINE":   "",
		"LOCKEDCRON_OCCURRENCE":       "1970-01-01T00:01:00Z",
		"LOCKEDCRON_HOLDER":           "eu-1/billing/nightly-60/$(LOCKEDCRON_POD_UID)",
		"LOCKEDCRON_REDIS_PASSWORD":   "", // only through secretKeyRef, never a literal
		"LOCKEDCRON_REDIS_URL":        "",
		"LOCKEDCRON_DEDUPE_RETENTION": "168h0m0s",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("restartPolicy = %s", pod.Spec.RestartPolicy)
	}
}

// TestBuildBackoffLimit: under restartPolicy OnFailure the wrapped container gets a
// writable emptyDir of its own where lockwrap counts its attempts, and spec.backoffLimit
// (6 when unset, as a Job's); under Never neither (one attempt per pod).
func TestBuildBackoffLimit(t *testing.T) {
	for name, c := range map[string]struct {
		policy corev1.RestartPolicy
		limit  *int32
		want   string // LOCKEDCRON_BACKOFF_LIMIT, "" when not set
	}{
		"OnFailure, the default": {corev1.RestartPolicyOnFailure, nil, "6"},
		"OnFailure, 0":           {corev1.RestartPolicyOnFailure, ptr.To[int32](0), "0"},
		"Never":                  {corev1.RestartPolicyNever, ptr.To[int32](3), ""},
	} {
		t.Run(name, func(t *testing.T) {
			job := nightly()
			job.Spec.Template.Spec.RestartPolicy, job.Spec.BackoffLimit = c.policy, c.limit
			pod, err := Build(job, time.Unix(60, 0), opts)
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			for _, e := range pod.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			mounted := slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == AttemptsVolumeName && m.MountPath == AttemptsDir && !m.ReadOnly
			})
			volume := slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == AttemptsVolumeName && v.EmptyDir != nil })
			if env[config.EnvBackoffLimit] != c.want || mounted != (c.want != "") || volume != (c.want != "") ||
				(c.want != "" && env[config.EnvAttemptsDir] != AttemptsDir) {
				t.Errorf("limit %q (want %q), attempts dir %q, mounted %v, volume %v", env[config.EnvBackoffLimit], c.want, env[config.EnvAttemptsDir], mounted, volume)
			}
		})
	}
}

// TestBuildKeepsNativeSidecars: an init container restarting Always (a native sidecar,
// which the pod's end stops) and another container's own restart on failure are accepted.
func TestBuildKeepsNativeSidecars(t *testing.T) {
	job := nightly()
	spec := &job.Spec.Template.Spec
	spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	spec.Containers = append(spec.Containers, corev1.Container{Name: "upload", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyOnFailure),
		RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}})
	if _, err := Build(job, time.Unix(60, 0), opts); err != nil {
		t.Errorf("Build = %v", err)
	}
}

func TestBuildRejectsWhatCannotBeWrapped(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*v1alpha1.LockedCronJob)
		field  string
	}{
		"no command":        {func(j *v1alpha1.LockedCronJob) { j.Spec.Template.Spec.Containers[0].Command = nil }, "containers[0] (job): command is required"},
		"unknown container": {func(j *v1alpha1.LockedCronJob) { j.Spec.WrapContainer = "nope" }, "spec.wrapContainer"},
		"no containers":     {func(j *v1alpha1.LockedCronJob) { j.Spec.Template.Spec.Containers = nil }, "spec.template.spec.containers"},
		"restart Always":    {func(j *v1alpha1.LockedCronJob) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }, "restartPolicy"},
		"reserved volume": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: VolumeName}}
		}, "spec.template.spec.volumes"},
		"long name": {func(j *v1alpha1.LockedCronJob) { j.Name = strings.Repeat("a", 53) }, "metadata.name"},
		"the attempts volume's name": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: AttemptsVolumeName}}
		}, "spec.template.spec.volumes"},
		"a mount at the attempts' place": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: AttemptsDir + "/x"}}
		}, "spec.template.spec.containers[0].volumeMounts[0]"},
		"a Windows pod": {func(j *v1alpha1.LockedCronJob) { j.Spec.Template.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }, "spec.template.spec.os.name"},
		// Within the API server's 256 KiB, but the pod could not take the note the
		// controller adds when it withdraws it: the patch refused, at every pass, the pod
		// never withdrawn (helper-114).
		"annotations that leave no room for the controller's": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Annotations = map[string]string{"a": strings.Repeat("x", 250<<10)}
		}, "spec.template.metadata.annotations"},
		// The kubelet would keep under 256 bytes of each termination message: no report fits.
		"too many containers": {func(j *v1alpha1.LockedCronJob) {
			for i := 0; i < 48; i++ {
				j.Spec.Template.Spec.InitContainers = append(j.Spec.Template.Spec.InitContainers, corev1.Container{Name: fmt.Sprintf("init-%d", i), Image: "x"})
			}
		}, "spec.template.spec"},
		// A container's own restart policy comes before the pod's: lockwrap restarted after
		// its report (SuppressedDuplicate each time, the pod never ending, its occurrence
		// never counted), or a run folded as a suppressed duplicate of itself.
		"the wrapped container restarting Always": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}, "spec.template.spec.containers[0].restartPolicy"},
		"the wrapped container with its own restart policy": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
		}, "spec.template.spec.containers[0].restartPolicy"},
		"the wrapped container restarting on exit 0": {func(j *v1alpha1.LockedCronJob) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			c.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{0}}}}
		}, "spec.template.spec.containers[0].restartPolicy"},
		"another container that never ends": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers,
				corev1.Container{Name: "proxy", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
		}, "spec.template.spec.containers[1].restartPolicy"},
		"a sidecar restarting every container": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "agent", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{3}}}}}}
		}, "spec.template.spec.initContainers[0].restartPolicyRules[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			job := nightly()
			tc.mutate(job)
			_, err := Build(job, time.Unix(60, 0), opts)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want one naming %q", err, tc.field)
			}
		})
	}
}

func TestNameIsDeterministicPerOccurrence(t *testing.T) {
	a := Name("nightly", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := Name("nightly", time.Date(2026, 1, 1, 1, 0, 0, 0, time.FixedZone("CET", 3600)))
	if a != b {
		t.Errorf("same instant in two zones named %q and %q", a, b)
	}
	if c := Name("nightly", time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)); c == a {
		t.Errorf("occurrences a second apart share the name %q", a)
	}
}

func envOf(t *testing.T, job *v1alpha1.LockedCronJob, occ time.Time) map[string]string {
	t.Helper()
	pod, err := Build(job, occ, opts)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s set twice", e.Name)
		}
		if e.Value != "" || e.ValueFrom != nil {
			env[e.Name] = e.Value // an empty one is unset to lockwrap
		}
	}
	return env
}

// unsetEnv is the empty variables Build adds for lockwrap's settings a pod does not set.
func unsetEnv(names ...string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, len(names))
	for i, n := range names {
		out[i] = corev1.EnvVar{Name: n}
	}
	return out
}

// The not-after instant goes to every contention policy; the retry deadline only to Retry.
func TestBuildDeadlines(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	unset := "<unset>"
	for name, tc := range map[string]struct {
		mutate                  func(*v1alpha1.LockedCronJob)
		notAfter, retryDeadline string
	}{
		"retry with deadline": {func(j *v1alpha1.LockedCronJob) {}, "2026-11-30T02:02:00Z", "2026-11-30T02:02:00Z"},
		"skip with deadline": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Contention = v1alpha1.ContentionSpec{Policy: v1alpha1.ContentionSkip}
		}, "2026-11-30T02:02:00Z", unset},
		"default policy with deadline": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.Contention = v1alpha1.ContentionSpec{}
		}, "2026-11-30T02:02:00Z", unset},
		"retry without deadline": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.StartingDeadlineSeconds = nil
		}, unset, unset},
		"skip without deadline": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.StartingDeadlineSeconds = nil
			j.Spec.Contention = v1alpha1.ContentionSpec{Policy: v1alpha1.ContentionSkip}
		}, unset, unset},
		"admission's cap, 366 days": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.StartingDeadlineSeconds = ptr.To[int64](31622400)
		}, "2027-12-01T02:00:00Z", "2027-12-01T02:00:00Z"},
		// 10000000000 s overflowed time.Duration into a negative deadline; now it saturates.
		"10^10 seconds saturates": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.StartingDeadlineSeconds = ptr.To[int64](10000000000)
		}, "2319-03-12T01:47:16Z", "2319-03-12T01:47:16Z"},
		"max int64 saturates": {func(j *v1alpha1.LockedCronJob) {
			j.Spec.StartingDeadlineSeconds = ptr.To[int64](math.MaxInt64)
		}, "2319-03-12T01:47:16Z", "2319-03-12T01:47:16Z"},
	} {
		t.Run(name, func(t *testing.T) {
			job := nightly()
			tc.mutate(job)
			env := envOf(t, job, occ)
			get := func(k string) string {
				if v, ok := env[k]; ok {
					return v
				}
				return unset
			}
			if got := get("LOCKEDCRON_NOT_AFTER"); got != tc.notAfter {
				t.Errorf("LOCKEDCRON_NOT_AFTER = %s, want %s", got, tc.notAfter)
			}
			if got := get("LOCKEDCRON_RETRY_DEADLINE"); got != tc.retryDeadline {
				t.Errorf("LOCKEDCRON_RETRY_DEADLINE = %s, want %s", got, tc.retryDeadline)
			}
			if na, err := time.Parse(time.RFC3339, get("LOCKEDCRON_NOT_AFTER")); err == nil && na.Before(occ) {
				t.Errorf("not-after %s is before the occurrence %s", na, occ)
			}
		})
	}
}

func TestBuildKillGrace(t *testing.T) {
	occ := time.Unix(60, 0)
	job := nightly()
	if got := envOf(t, job, occ)["LOCKEDCRON_KILL_GRACE"]; got != "10s" {
		t.Errorf("default LOCKEDCRON_KILL_GRACE = %q, want 10s", got)
	}
	job.Spec.Lock.KillGracePeriod = &metav1.Duration{Duration: 1500 * time.Millisecond}
	if got := envOf(t, job, occ)["LOCKEDCRON_KILL_GRACE"]; got != "1.5s" {
		t.Errorf("LOCKEDCRON_KILL_GRACE = %q, want 1.5s", got)
	}
	job.Spec.Lock.KillGracePeriod = &metav1.Duration{}
	if got := envOf(t, job, occ)["LOCKEDCRON_KILL_GRACE"]; got != "0s" {
		t.Errorf("LOCKEDCRON_KILL_GRACE = %q, want 0s", got)
	}
}

// A job that runs as root (pod-level runAsUser 0) keeps its own settings; the init
// container's explicit user wins for the init container only.
func TestBuildInitContainerFitsARootPod(t *testing.T) {
	job := nightly()
	job.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false)}
	pod, err := Build(job, time.Unix(60, 0), opts)
	if err != nil {
		t.Fatal(err)
	}
	ic := pod.Spec.InitContainers[0]
	if sc := ic.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.RunAsGroup == nil || *sc.RunAsGroup != 65532 {
		t.Errorf("init container securityContext = %+v, want runAsUser/runAsGroup 65532", ic.SecurityContext)
	}
	if d := cmp.Diff(job.Spec.Template.Spec.SecurityContext, pod.Spec.SecurityContext); d != "" {
		t.Errorf("pod securityContext changed:\n%s", d)
	}
	if pod.Spec.Containers[0].SecurityContext != nil {
		t.Errorf("wrapped container got a securityContext: %+v", pod.Spec.Containers[0].SecurityContext)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := ic.Resources.Requests[r], ic.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("init container %s: request %s, limit %s; want both set, request <= limit", r, req.String(), lim.String())
		}
	}
}

// TestHolderIsPerPod: a pod's holder identity names its pod's UID, which the kubelet
// expands from a variable defined before it (the downward API), so that two pods of one
// name — in two clusters given the same --cluster-name, or made again while the old one
// still runs on a node out of reach — never share one: lockwrap takes a lock held under its
// own holder for its own occurrence over as its crashed predecessor's, and with the name
// alone each took the other's live lock over.
func TestHolderIsPerPod(t *testing.T) {
	job := nightly()
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	expanded := func(uid string) string {
		pod, err := Build(job, occ, opts)
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{}
		var holder string
		for _, e := range pod.Spec.Containers[0].Env {
			switch {
			case e.Name == EnvPodUID && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid":
				vars[e.Name] = uid
			case e.Name == config.EnvHolder:
				holder = e.Value
				for name, v := range vars { // only those defined before it, as the kubelet expands
					holder = strings.ReplaceAll(holder, "$("+name+")", v)
				}
			}
		}
		return holder
	}
	a, b := expanded("0c3b0c4e-5b3a-4c43-9a43-7c1f2d9e5a11"), expanded("9e1d2c3b-1111-4c43-9a43-7c1f2d9e5a11")
	if want := "eu-1/billing/" + Name(job.Name, occ) + "/0c3b0c4e-5b3a-4c43-9a43-7c1f2d9e5a11"; a != want {
		t.Errorf("holder %q, want %q", a, want)
	}
	if a == b {
		t.Errorf("two pods of one name share holder %q", a)
	}
}
