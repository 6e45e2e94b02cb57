// Package runpod builds the Pod that runs one occurrence of a LockedCronJob: the job's
// pod template with lockwrap copied in by an init container and put in front of the
// wrapped container's command. Everything here is a pure function of its inputs.
package runpod

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

const (
	// ReservedPrefix is the prefix of every label and annotation the controller owns.
	ReservedPrefix = "scheduling.lockedcron.io/"
	// AnnotationScheduledTime holds the occurrence (RFC 3339) a pod runs.
	AnnotationScheduledTime = "scheduling.lockedcron.io/scheduled-time"
	// AnnotationWrappedContainer names the container lockwrap wraps (whose termination
	// message is the report).
	AnnotationWrappedContainer = "scheduling.lockedcron.io/wrapped-container"
	// AnnotationWithdrawn holds why the controller deleted a pod whose job had not
	// started as far as its status said (a blackout began, its deadline passed): the
	// reason it is counted missed for if its kubelet confirms the job never started.
	AnnotationWithdrawn = "scheduling.lockedcron.io/withdrawn"
	// AnnotationWithdrawnAhead holds why the controller deleted a pod prepared ahead of
	// its occurrence's instant (prepareAheadSeconds) that the job no longer wanted. Its
	// kubelet may act on the deletion only after the instant, when lockwrap has started
	// the job: the pod is counted if its job ran, and otherwise released uncounted, its
	// occurrence decided by the schedule as if the pod had never been.
	AnnotationWithdrawnAhead = "scheduling.lockedcron.io/withdrawn-ahead"
	// AnnotationPreparedAhead marks a pod created ahead of its occurrence's instant
	// (prepareAheadSeconds): until the instant the job may still withdraw it. A pod
	// without it was created at or after its instant, by a pass that decided the
	// occurrence, whatever a later pass's clock says.
	AnnotationPreparedAhead = "scheduling.lockedcron.io/prepared-ahead"
	// LabelJob holds the name of the owning LockedCronJob (used to select its pods).
	LabelJob = "scheduling.lockedcron.io/job"
	// LabelCounted marks a finished pod whose report is already in the owner's status.
	LabelCounted = "scheduling.lockedcron.io/counted"
	// FinalizerTracking keeps a pod until the controller has counted it (as the Job
	// controller's batch.kubernetes.io/job-tracking does): a pod deleted before its report
	// was folded is still counted. The controller removes it in the pass that counts the pod.
	FinalizerTracking = "scheduling.lockedcron.io/run-tracking"

	// InitContainerName is the init container that copies lockwrap into the pod.
	InitContainerName = "lockedcron-install"
	// VolumeName is the emptyDir that carries lockwrap from the init container.
	VolumeName = "lockedcron-bin"
	// WrapperDir is where that volume is mounted.
	WrapperDir = "/lockedcron"
	// WrapperPath is lockwrap inside the wrapped container.
	WrapperPath = WrapperDir + "/lockwrap"
	// ImageWrapperPath is lockwrap inside the operator's image.
	ImageWrapperPath = "/lockwrap"
	// AttemptsVolumeName is the emptyDir, mounted writable at AttemptsDir in the wrapped
	// container of a pod under restartPolicy OnFailure, where lockwrap counts the
	// container's attempts (spec.backoffLimit, config.EnvBackoffLimit): it outlives a
	// container restarted in its pod.
	AttemptsVolumeName = "lockedcron-attempts"
	AttemptsDir        = "/lockedcron-attempts"

	// kubeletMessageBytes is what the kubelet keeps of a pod's termination messages, shared
	// among its containers (MaxPodTerminationMessageLogLength).
	kubeletMessageBytes = 12 * 1024

	// DefaultTerminationMessagePath is Kubernetes' default, where lockwrap writes its report.
	DefaultTerminationMessagePath = "/dev/termination-log"

	// Secret keys read from spec.lock.redis.secretRef.
	SecretKeyURL      = "url"
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
	SecretKeyCACert   = "ca.crt"

	// InitContainerUID is the user and group the init container runs as (the distroless
	// "nonroot" user of the operator's image).
	InitContainerUID int64 = 65532
	// The init container's resources: it copies one file.
	InitCPURequest    = "10m"
	InitCPULimit      = "100m"
	InitMemoryRequest = "16Mi"
	InitMemoryLimit   = "64Mi"

	// MaxJobNameLength keeps "<name>-<unix seconds>" within a label value's 63 characters.
	MaxJobNameLength = 52
)

// Options are the controller-wide settings a pod is built with.
type Options struct {
	// ClusterName is the first part of every holder identity.
	ClusterName string
	// WrapperImage is the operator's image, which holds /lockwrap.
	WrapperImage string
	// WrapperImagePullPolicy for the init container.
	WrapperImagePullPolicy corev1.PullPolicy
	// NotAfter, per pod: an instant before which the job must start, in addition to
	// occurrence + startingDeadlineSeconds (the controller sets the next known blackout
	// window start). lockwrap gets the earlier of the two; zero: only the deadline. For a
	// pod created ahead of its occurrence (spec.prepareAheadSeconds) it must not be before
	// the occurrence (the first window start at or after it): Build refuses that.
	NotAfter time.Time
	// MadeAt, per pod: when the controller made it (its clock). With it, lockwrap gets the
	// job's UID and this time ($LOCKEDCRON_BLACKOUT_ID, $LOCKEDCRON_MADE_AT), and the lock
	// is not granted to the pod in a blackout of the job that began after it was made
	// (lock.SetBlackout): a pod waiting for the lock when a rollout begins does not start
	// its job in it. Zero: neither is set.
	MadeAt time.Time
	// RedisAllowedHosts, when set, is passed to lockwrap
	// ($LOCKEDCRON_REDIS_ALLOWED_HOSTS): it refuses other Redis endpoints, as the
	// controller does (--redis-allowed-hosts).
	RedisAllowedHosts *lock.AllowedHosts
}

// Name is the pod's deterministic name for an occurrence: creating it twice fails with
// AlreadyExists, which makes the API server the lock against double creation.
func Name(jobName string, occurrence time.Time) string {
	return jobName + "-" + strconv.FormatInt(occurrence.Unix(), 10)
}

// LockKey is the lock key in effect: spec.lock.key or "<namespace>/<name>".
func LockKey(job *v1alpha1.LockedCronJob) string {
	if job.Spec.Lock.Key != "" {
		return job.Spec.Lock.Key
	}
	return job.Namespace + "/" + job.Name
}

// Holder is the identity a pod takes the lock as: "<cluster>/<namespace>/<pod>/<pod uid>".
// The pod's UID is known only once the pod is created: the holder refers to EnvPodUID,
// which the kubelet expands ($(VAR)). A restarted container keeps its pod's UID, so it
// takes over its crashed predecessor's lock; a pod of the same name in another cluster
// given the same --cluster-name, or made again while the old one still runs on a node
// out of reach, does not share it (each took the other's live lock over as its own).
//
// It is the variable's value as written in the pod: its own text escaped (Escape), the
// reference not.
func Holder(cluster, namespace, pod string) string {
	return Escape(cluster+"/"+namespace+"/"+pod+"/") + "$(" + EnvPodUID + ")"
}

// Escape is text the kubelet gives a container as written, as a literal value of an
// environment variable: it expands $(NAME) there from the variables set before it (the
// Redis credentials among them) and reads $$ as $.
func Escape(text string) string { return strings.ReplaceAll(text, "$", "$$") }

// literal is the variable name with the value value, as the kubelet gives it.
func literal(name, value string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, Value: Escape(value)}
}

// EnvPodUID is the pod's UID in the wrapped container (the downward API), for Holder.
const EnvPodUID = EnvPrefix + "POD_UID"

// EnvPrefix begins the name of every variable lockwrap reads or the controller sets for
// it; the template's wrapped container may not set one (reserved).
const EnvPrefix = "LOCKEDCRON_"

// WrappedContainer names the container lockwrap wraps in a pod Build made: the one whose
// command is lockwrap's. A pod's containers do not change, its annotations do (whoever may
// patch the pod can remove AnnotationWrappedContainer or point it at another container,
// and the run's report would be read as missing, or as another container's message): the
// annotation is read only when no container is lockwrap's: a pod as the controller's
// cache holds it, without containers (the cache sets the annotation from them).
func WrappedContainer(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if len(c.Command) > 1 && c.Command[0] == WrapperPath && c.Command[1] == "--" {
			return c.Name
		}
	}
	return pod.Annotations[AnnotationWrappedContainer]
}

// WrapIndex finds the container lockwrap wraps: wrapContainer, or the first.
func WrapIndex(job *v1alpha1.LockedCronJob) (int, error) {
	cs := job.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return -1, fmt.Errorf("spec.template.spec.containers: at least one container is required")
	}
	i := 0
	if name := job.Spec.WrapContainer; name != "" {
		i = -1
		for j := range cs {
			if cs[j].Name == name {
				i = j
				break
			}
		}
		if i < 0 {
			return -1, fmt.Errorf("spec.wrapContainer: no container named %q in spec.template.spec.containers", name)
		}
	}
	if len(cs[i].Command) == 0 {
		return -1, fmt.Errorf("spec.template.spec.containers[%d] (%s): command is required, since lockwrap runs in front of it; set command to what the image runs", i, cs[i].Name)
	}
	return i, nil
}

// containerRestarts refuses what would restart the pod's containers past the pod's
// restartPolicy (a container's own restartPolicy and restartPolicyRules, which the
// kubelet applies first): lockwrap started again after its report ran under the ledger
// (SuppressedDuplicate, again and again: the pod never ended and its occurrence was never
// counted), and its last report replaced the run's. A regular container restarting Always
// keeps the pod from ever ending. A native sidecar (an init container restarting Always)
// is fine: the pod ends with its regular containers.
func containerRestarts(spec corev1.PodSpec, wi int) error {
	for i, c := range spec.Containers {
		field := fmt.Sprintf("spec.template.spec.containers[%d]", i)
		switch {
		case i == wi && (c.RestartPolicy != nil || len(c.RestartPolicyRules) > 0):
			return fmt.Errorf("%s.restartPolicy: the wrapped container (%s) may not have a restart policy or rules of its own: a restart after lockwrap's report would run it again; set spec.template.spec.restartPolicy (Never or OnFailure) instead", field, c.Name)
		case c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways:
			return fmt.Errorf("%s.restartPolicy: Always: container %s would keep the pod running after the job ends, and its occurrence would never be counted; make it a native sidecar (an init container with restartPolicy: Always) or remove the policy", field, c.Name)
		}
	}
	// In a fixed order, so that the field named is the same on every pass.
	for _, list := range []struct {
		kind string
		cs   []corev1.Container
	}{{"containers", spec.Containers}, {"initContainers", spec.InitContainers}} {
		kind, cs := list.kind, list.cs
		for i, c := range cs {
			for j, r := range c.RestartPolicyRules {
				if r.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
					return fmt.Errorf("spec.template.spec.%s[%d].restartPolicyRules[%d]: action %s would start the job's container again after its run; remove the rule", kind, i, j, r.Action)
				}
			}
		}
	}
	return nil
}

// reserved refuses, naming the field, what of the template would take lockwrap's names or
// place (or could not run it: a pod for another OS): a container named as its init container, a variable of lockwrap's settings
// (config.Variables, and the others it gives its command: LOCKEDCRON_*) in the wrapped
// container, which the controller sets from spec, and a mount there at lockwrap's
// directory or below, which would hide lockwrap or replace it with another file.
func reserved(spec corev1.PodSpec, wi int) error {
	// lockwrap's init container and lockwrap are Linux binaries: the API server would
	// refuse the pod for fields of an init container the template does not have.
	if spec.OS != nil && spec.OS.Name != corev1.Linux {
		return fmt.Errorf("spec.template.spec.os.name: %q: every job pod runs lockwrap, a Linux program, in front of its command; remove os.name or set it to linux", spec.OS.Name)
	}
	for i, c := range spec.Containers {
		if c.Name == InitContainerName {
			return fmt.Errorf("spec.template.spec.containers[%d]: the name %q is reserved for lockwrap's init container; rename the container", i, InitContainerName)
		}
	}
	// lockwrap's volume is the controller's: a container of the template mounting it (read
	// and write) could put another file in lockwrap's place.
	for kind, cs := range map[string][]corev1.Container{"containers": spec.Containers, "initContainers": spec.InitContainers} {
		for i, c := range cs {
			for j, m := range c.VolumeMounts {
				if m.Name == VolumeName || m.Name == AttemptsVolumeName {
					return fmt.Errorf("spec.template.spec.%s[%d].volumeMounts[%d]: volume %q is lockwrap's; mount another volume", kind, i, j, m.Name)
				}
			}
		}
	}
	c := spec.Containers[wi]
	for j, e := range c.Env {
		if strings.HasPrefix(e.Name, EnvPrefix) && !TemplateSettable[e.Name] {
			return fmt.Errorf("spec.template.spec.containers[%d].env[%d]: %s: variables %s* are lockwrap's settings, which the controller sets from spec (spec.lock, spec.contention, spec.dedupe); remove it (of them the template may set only %s)", wi, j, e.Name, EnvPrefix, config.EnvWatermarkMonotonic)
		}
	}
	// The kubelet expands $(VAR) in command, args and a mount's subPathExpr from the
	// container's environment, which holds the Redis credentials for lockwrap: a
	// reference would hand them to the job's command line, or name a directory the job
	// reads after them (and the kubelet's error for a path it refuses quotes it, in the
	// pod's status). ($$(…) is a literal.)
	refersToRedis := func(s string) bool {
		return strings.Contains(strings.ReplaceAll(s, "$$", ""), "$("+redisEnvPrefix)
	}
	const refused = "refers to a %s* variable, lockwrap's Redis credentials, which the job must not be given; remove the reference"
	for field, list := range map[string][]string{"command": c.Command, "args": c.Args} {
		for j, a := range list {
			if refersToRedis(a) {
				return fmt.Errorf("spec.template.spec.containers[%d].%s[%d]: "+refused, wi, field, j, redisEnvPrefix)
			}
		}
	}
	for j, m := range c.VolumeMounts {
		if refersToRedis(m.SubPathExpr) {
			return fmt.Errorf("spec.template.spec.containers[%d].volumeMounts[%d].subPathExpr: "+refused, wi, j, redisEnvPrefix)
		}
	}
	// A relative path is the container root's (the kubelet makes it absolute).
	under := func(p string) bool {
		p = path.Clean("/" + p)
		return p == WrapperDir || strings.HasPrefix(p, WrapperDir+"/") || p == AttemptsDir || strings.HasPrefix(p, AttemptsDir+"/")
	}
	if under(c.TerminationMessagePath) {
		return fmt.Errorf("spec.template.spec.containers[%d].terminationMessagePath: %s is in lockwrap's place (%s, %s), where the kubelet would mount the file over it; use another path", wi, c.TerminationMessagePath, WrapperDir, AttemptsDir)
	}
	for j, m := range c.VolumeMounts {
		if under(m.MountPath) {
			return fmt.Errorf("spec.template.spec.containers[%d].volumeMounts[%d]: mountPath %s is lockwrap's place (%s, %s); mount the volume elsewhere", wi, j, m.MountPath, WrapperDir, AttemptsDir)
		}
	}
	for j, d := range c.VolumeDevices {
		if under(d.DevicePath) {
			return fmt.Errorf("spec.template.spec.containers[%d].volumeDevices[%d]: devicePath %s is lockwrap's place (%s, %s); use another path", wi, j, d.DevicePath, WrapperDir, AttemptsDir)
		}
	}
	return nil
}

// TemplateSettable are the lockwrap settings without a spec field, which the template's
// wrapped container may set in its env (docs/idempotency.md).
var TemplateSettable = map[string]bool{config.EnvWatermarkMonotonic: true}

// redisEnvPrefix begins the variables that hold the Redis URL and credentials.
const redisEnvPrefix = EnvPrefix + "REDIS_"

// MaxNoteBytes is the most a value the controller writes on a pod takes (the longest: why
// it was withdrawn, which may quote a kubelet's or the scheduler's message). The
// manager's cache holds no more of any.
const MaxNoteBytes = 1024

// MaxTemplateAnnotationBytes is the most the template's annotations take (keys and
// values, as the API server counts them): the rest of the API server's limit is room for
// the controller's own. Past it, a pod the controller must withdraw could not take the
// note of why, and would not be withdrawn.
const MaxTemplateAnnotationBytes = apivalidation.TotalAnnotationSizeLimitB - 16<<10

// annotationBytes is the size of annotations as the API server counts it.
func annotationBytes(annotations map[string]string) int {
	n := 0
	for k, v := range annotations {
		n += len(k) + len(v)
	}
	return n
}

// Build returns the pod for one occurrence. It fails, naming the field, for a template
// lockwrap cannot be put into.
func Build(job *v1alpha1.LockedCronJob, occurrence time.Time, opts Options) (*corev1.Pod, error) {
	return build(job, occurrence, Name(job.Name, occurrence), opts, nil)
}

func build(job *v1alpha1.LockedCronJob, occurrence time.Time, name string, opts Options, m *ManualRun) (*corev1.Pod, error) {
	if len(job.Name) > MaxJobNameLength {
		return nil, fmt.Errorf("metadata.name: %d characters; at most %d fit in pod names and labels", len(job.Name), MaxJobNameLength)
	}
	wi, err := WrapIndex(job)
	if err != nil {
		return nil, err
	}
	tmpl := job.Spec.Template.DeepCopy()
	spec := tmpl.Spec
	for _, v := range spec.Volumes {
		if v.Name == VolumeName || v.Name == AttemptsVolumeName {
			return nil, fmt.Errorf("spec.template.spec.volumes: the name %q is reserved for lockwrap", v.Name)
		}
	}
	for _, c := range spec.InitContainers {
		if c.Name == InitContainerName {
			return nil, fmt.Errorf("spec.template.spec.initContainers: the name %q is reserved for lockwrap", InitContainerName)
		}
	}
	if err := reserved(spec, wi); err != nil {
		return nil, err
	}
	switch spec.RestartPolicy {
	case "":
		spec.RestartPolicy = corev1.RestartPolicyNever
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		return nil, fmt.Errorf("spec.template.spec.restartPolicy: %q; must be Never or OnFailure", spec.RestartPolicy)
	}
	if err := containerRestarts(spec, wi); err != nil {
		return nil, err
	}

	if na := NotAfter(job, occurrence, opts.NotAfter); m == nil && prepared(job) && !na.IsZero() && na.Before(occurrence) {
		return nil, fmt.Errorf("occurrence %s: the blackout window start %s given as its deadline is before the occurrence, so the pod could never run; give the first window start at or after the occurrence (or skip an occurrence inside a window)",
			occurrence.UTC().Format(time.RFC3339), na.UTC().Format(time.RFC3339))
	}

	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name:         VolumeName,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
	})
	spec.InitContainers = append([]corev1.Container{installContainer(opts)}, spec.InitContainers...)

	c := &spec.Containers[wi]
	c.Command = append([]string{WrapperPath, "--"}, c.Command...)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeName, MountPath: WrapperDir, ReadOnly: true})
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = DefaultTerminationMessagePath
	}
	// File, not FallbackToLogsOnError: a log tail is not a report.
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	// The kubelet mounts the file at the path from the container's root, whatever the
	// workingDir: lockwrap gets it so.
	reportPath := path.Clean("/" + c.TerminationMessagePath)
	c.Env = append(c.Env, wrapperEnv(job, occurrence, Holder(opts.ClusterName, job.Namespace, name), reportPath, opts, m)...)
	if spec.RestartPolicy == corev1.RestartPolicyOnFailure {
		// The kubelet restarts a failed attempt in the pod, at once the first time (and
		// after any attempt longer than its back-off remembers): lockwrap counts them
		// where a restart finds the count, and runs nothing past spec.backoffLimit.
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         AttemptsVolumeName,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Mi"))}},
		})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: AttemptsVolumeName, MountPath: AttemptsDir})
		c.Env = append(c.Env, literal(config.EnvBackoffLimit, strconv.Itoa(int(job.Spec.BackoffLimitOrDefault()))), literal(config.EnvAttemptsDir, AttemptsDir))
	}
	// The kubelet keeps of each container's termination message its share of 12 KiB
	// (12288 / the pod's containers and init containers), cutting the rest: a cut report is
	// no JSON, and its run is counted Error.
	n := len(spec.Containers) + len(spec.InitContainers)
	if kubeletMessageBytes/n < report.MinBytes {
		return nil, fmt.Errorf("spec.template.spec: %d containers and init containers, and lockwrap's: the kubelet keeps %d bytes of each one's termination message, too few for lockwrap's report (%d); at most %d in all", n-1, kubeletMessageBytes/n, report.MinBytes, kubeletMessageBytes/report.MinBytes-1)
	}
	if share := kubeletMessageBytes / n; share < report.MaxBytes {
		c.Env = append(c.Env, literal(config.EnvReportMaxBytes, strconv.Itoa(max(share, report.MinBytes))))
	}
	if allowed := opts.RedisAllowedHosts.String(); allowed != "" {
		c.Env = append(c.Env, literal(config.EnvRedisAllowedHosts, allowed))
	}
	// lockwrap's other settings are its defaults, whatever the container's envFrom (a
	// ConfigMap or Secret, read only when the pod starts) holds: an empty variable is
	// unset to lockwrap, and env wins over envFrom.
	for _, v := range config.Variables() {
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == v }) {
			c.Env = append(c.Env, corev1.EnvVar{Name: v})
		}
	}

	// The template's own labels and annotations are copied; the controller's keys
	// (ReservedPrefix, also refused at admission) are never taken from the template.
	labels := map[string]string{}
	for k, v := range tmpl.Labels {
		if !strings.HasPrefix(k, ReservedPrefix) {
			labels[k] = v
		}
	}
	labels[LabelJob] = job.Name
	annotations := map[string]string{}
	for k, v := range tmpl.Annotations {
		if !strings.HasPrefix(k, ReservedPrefix) {
			annotations[k] = v
		}
	}
	if n := annotationBytes(annotations); n > MaxTemplateAnnotationBytes {
		return nil, fmt.Errorf("spec.template.metadata.annotations: %d bytes; at most %d fit, leaving room for the annotations the controller adds to each pod (the API server takes %d in all): move large values to a ConfigMap", n, MaxTemplateAnnotationBytes, apivalidation.TotalAnnotationSizeLimitB)
	}
	annotations[AnnotationScheduledTime] = occurrence.UTC().Format(time.RFC3339)
	annotations[AnnotationWrappedContainer] = c.Name
	if m != nil {
		labels[LabelRunRequest] = m.ID
		annotations[AnnotationRequestedAt] = m.RequestedAt.UTC().Format(time.RFC3339)
	}

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   job.Namespace,
			Labels:      labels,
			Annotations: annotations,
			Finalizers:  []string{FinalizerTracking},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1alpha1.GroupVersion.String(),
				Kind:               "LockedCronJob",
				Name:               job.Name,
				UID:                job.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: spec,
	}, nil
}

func installContainer(opts Options) corev1.Container {
	return corev1.Container{
		Name:                     InitContainerName,
		Image:                    opts.WrapperImage,
		ImagePullPolicy:          opts.WrapperImagePullPolicy,
		Command:                  []string{ImageWrapperPath, "cp", WrapperPath, fmt.Sprintf("--protocol=%d", config.Protocol)},
		VolumeMounts:             []corev1.VolumeMount{{Name: VolumeName, MountPath: WrapperDir}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// Explicit user and group, so that a pod-level securityContext (runAsUser: 0 for
		// a job that runs as root) does not clash with runAsNonRoot; the rest makes the
		// container fit the restricted Pod Security profile.
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                ptr.To(InitContainerUID),
			RunAsGroup:               ptr.To(InitContainerUID),
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		// Requests and limits of its own, so that a namespace with a ResourceQuota on
		// cpu/memory and no LimitRange accepts the pod (copying one file needs little).
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(InitCPURequest),
				corev1.ResourceMemory: resource.MustParse(InitMemoryRequest),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(InitCPULimit),
				corev1.ResourceMemory: resource.MustParse(InitMemoryLimit),
			},
		},
	}
}

// deadline is occurrence + seconds, saturating: a seconds count whose Duration would
// overflow is capped at the largest Duration (292 years) instead of wrapping negative.
// Admission caps startingDeadlineSeconds at 366 days; this holds for any input.
func deadline(occurrence time.Time, seconds int64) time.Time {
	const maxSeconds = int64(math.MaxInt64 / int64(time.Second))
	var d time.Duration
	switch {
	case seconds <= 0:
		d = 0
	case seconds > maxSeconds:
		d = time.Duration(math.MaxInt64)
	default:
		d = time.Duration(seconds) * time.Second
	}
	return occurrence.Add(d)
}

// credentialsOptional are lockwrap's variables from optional keys of the Redis Secret.
var credentialsOptional = []string{config.EnvRedisUsername, config.EnvRedisPassword, config.EnvRedisCACert}

// IsOwnWarning says whether an API server warning on a pod's creation is the one every
// pod Build makes draws on purpose: the optional Secret reference of a Redis credential
// after its empty entry ("… hides previous definition of "LOCKEDCRON_REDIS_PASSWORD" …").
func IsOwnWarning(message string) bool {
	return slices.ContainsFunc(credentialsOptional, func(v string) bool {
		return strings.Contains(message, `hides previous definition of "`+v+`"`)
	})
}

func wrapperEnv(job *v1alpha1.LockedCronJob, occurrence time.Time, holder, terminationLog string, opts Options, m *ManualRun) []corev1.EnvVar {
	notAfter := opts.NotAfter
	secret := job.Spec.Lock.Redis.SecretRef.Name
	fromSecret := func(env, key string) corev1.EnvVar {
		ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}}
	}
	// An optional key the Secret lacks sets nothing, and the kubelet leaves the variable
	// as envFrom (a ConfigMap or Secret of the template) or an earlier entry set it: the
	// empty entry before the reference is what stays then, so that lockwrap's Redis
	// credentials come from the Secret or from nowhere. (The API server warns that the
	// reference "hides previous definition"; the manager does not log that warning,
	// IsOwnWarning.)
	fromSecretOptional := func(env, key string) []corev1.EnvVar {
		ref := fromSecret(env, key)
		ref.ValueFrom.SecretKeyRef.Optional = ptr.To(true)
		return []corev1.EnvVar{{Name: env}, ref}
	}
	lit := literal
	lock := job.Spec.Lock

	env := []corev1.EnvVar{fromSecret(config.EnvRedisURL, SecretKeyURL)}
	keys := map[string]string{config.EnvRedisUsername: SecretKeyUsername, config.EnvRedisPassword: SecretKeyPassword, config.EnvRedisCACert: SecretKeyCACert}
	for _, v := range credentialsOptional {
		env = append(env, fromSecretOptional(v, keys[v])...)
	}
	env = append(env,
		lit(config.EnvKey, LockKey(job)),
		lit(config.EnvTTL, lock.TTLDuration().String()),
		lit(config.EnvRenewInterval, lock.RenewIntervalDuration().String()),
		lit(config.EnvOccurrence, occurrence.UTC().Format(time.RFC3339)),
		corev1.EnvVar{Name: EnvPodUID, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
		corev1.EnvVar{Name: config.EnvHolder, Value: holder}, // after EnvPodUID, which it refers to
		lit(config.EnvOnLost, strings.ToLower(string(orDefault(lock.OnLost, v1alpha1.OnLostTerminate)))),
		lit(config.EnvKillGrace, lock.KillGracePeriodDuration().String()),
		lit(config.EnvMinReplicas, strconv.Itoa(int(lock.MinReplicas))),
		lit(config.EnvDedupeRetention, job.Spec.Dedupe.RetentionDuration().String()),
		lit(config.EnvTerminationLog, terminationLog),
	)
	if !opts.MadeAt.IsZero() && job.UID != "" {
		env = append(env, lit(config.EnvBlackoutID, string(job.UID)),
			lit(config.EnvMadeAt, opts.MadeAt.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)))
	}
	if m != nil {
		return append(env, manualEnv(job, *m, notAfter)...)
	}
	// A scheduled occurrence has one pod name: a pod made again under it (a controller
	// that resumed after another ran the occurrence and pruned its pod) does not run a
	// failed occurrence again (config.EnvHolderInstance). A manual run's name comes from
	// its id, which a user may request again once its pod is gone: it runs again.
	env = append(env, corev1.EnvVar{Name: config.EnvHolderInstance, Value: "$(" + EnvPodUID + ")"})
	contention := job.Spec.Contention
	env = append(env, lit(config.EnvContention, strings.ToLower(string(orDefault(contention.Policy, v1alpha1.ContentionSkip)))))
	if contention.Policy == v1alpha1.ContentionRetry && contention.Retry != nil {
		r := contention.Retry
		env = append(env,
			lit(config.EnvRetryAttempts, strconv.Itoa(int(r.Attempts))),
			lit(config.EnvRetryBackoff, r.BackoffDuration().String()),
			lit(config.EnvRetryMaxBackoff, r.MaxBackoffDuration().String()),
		)
		if d := job.Spec.StartingDeadlineSeconds; d != nil {
			env = append(env, lit(config.EnvRetryDeadline, deadline(occurrence, *d).UTC().Format(time.RFC3339)))
		}
	}
	// Every policy: a pod that has not started its job by the deadline (stuck Pending,
	// scheduled late) or by the next blackout window does not start it; lockwrap
	// reports Missed.
	na := NotAfter(job, occurrence, notAfter)
	if !na.IsZero() {
		env = append(env, lit(config.EnvNotAfter, na.UTC().Format(time.RFC3339)))
	}
	// No lock and no job before the instant on the node's clock: a pod created ahead of
	// its occurrence (prepareAheadSeconds) waits for it, and so does one created at the
	// manager's instant on a node whose clock is behind the manager's. Not when the
	// deadline is already before the occurrence (a window that began first): lockwrap
	// refuses a --not-before after --not-after, and such a pod is to end Missed at once.
	if na.IsZero() || !na.Before(occurrence) {
		env = append(env, lit(config.EnvNotBefore, occurrence.UTC().Format(time.RFC3339Nano)))
	}
	return env
}

// prepared reports whether the job's pods are created ahead of their occurrences
// (spec.prepareAheadSeconds > 0).
func prepared(job *v1alpha1.LockedCronJob) bool {
	p := job.Spec.PrepareAheadSeconds
	return p != nil && *p > 0
}

// NotAfter is the instant after which a pod of the occurrence must not start its job:
// the earlier of occurrence + startingDeadlineSeconds and windowStart (zero: none). Zero
// when neither is set.
func NotAfter(job *v1alpha1.LockedCronJob, occurrence, windowStart time.Time) time.Time {
	var na time.Time
	if d := job.Spec.StartingDeadlineSeconds; d != nil {
		na = deadline(occurrence, *d)
	}
	if !windowStart.IsZero() && (na.IsZero() || windowStart.Before(na)) {
		// lockwrap reads whole seconds (RFC 3339): round down, never past the window.
		na = windowStart.Truncate(time.Second)
	}
	return na
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}
