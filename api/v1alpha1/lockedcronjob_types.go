package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContentionPolicy says what a pod does when another holder has the lock.
// +kubebuilder:validation:Enum=Skip;Retry
type ContentionPolicy string

const (
	ContentionSkip  ContentionPolicy = "Skip"
	ContentionRetry ContentionPolicy = "Retry"
)

// OnLostPolicy says what happens to a running job whose lock was lost.
// +kubebuilder:validation:Enum=Terminate;Continue
type OnLostPolicy string

const (
	OnLostTerminate OnLostPolicy = "Terminate"
	OnLostContinue  OnLostPolicy = "Continue"
)

// BlackoutPolicy says what happens to an occurrence that falls in a blackout.
// +kubebuilder:validation:Enum=Skip;Defer
type BlackoutPolicy string

const (
	BlackoutSkip  BlackoutPolicy = "Skip"
	BlackoutDefer BlackoutPolicy = "Defer"
)

// WorkloadKind is a kind of workload whose rollout pauses a job.
// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
type WorkloadKind string

const (
	KindDeployment  WorkloadKind = "Deployment"
	KindStatefulSet WorkloadKind = "StatefulSet"
	KindDaemonSet   WorkloadKind = "DaemonSet"
)

// The rules on the spec and its template read as few fields as they can, each once: the
// API server evaluates them all on every write of a job, its status writes included, and
// each field a rule reads costs it a copy of the schema of the object it is read from (40
// properties for a pod spec; kubernetes/kubernetes#106438). So the template's own rules
// sit on the template, an optional read (self.?spec.restartPolicy.orValue(...)) stands for
// has() and the read, and [[x, y]].all(d, ...) reads x and y once for a whole expression.
// go test ./api/v1alpha1/ -bench StatusWriteCEL measures it; TestCELRules pins what they say.

// LockedCronJobSpec is the desired schedule, lock and pod of a singleton scheduled job.
// +kubebuilder:validation:XValidation:rule="has(self.wrapContainer) || [self.template.?spec.containers.orValue([])].all(cs, cs.size() == 0 || cs[0].?command.orValue([]).size() > 0)",message="template.spec.containers[0].command is required: lockwrap runs in front of the container's command (the controller cannot know an image's entrypoint); set command, or name a container that has one in wrapContainer",fieldPath=".template"
// +kubebuilder:validation:XValidation:rule="!has(self.wrapContainer) || !has(self.template.spec) || [self.wrapContainer].all(w, self.template.spec.containers.exists(c, c.name == w && c.?command.orValue([]).size() > 0))",message="wrapContainer must name a container of template.spec.containers that has a command",fieldPath=".wrapContainer"
// +kubebuilder:validation:XValidation:rule="!has(self.dedupe) || !has(self.dedupe.retention) || !has(self.lock.ttl) || [[duration(self.lock.ttl), duration(self.dedupe.retention)]].all(d, d[0] > duration('24h') || d[1] > duration('8784h') || d[1] >= d[0] + d[0])",message="dedupe.retention must be at least twice lock.ttl: raise dedupe.retention (or lower lock.ttl)",fieldPath=".dedupe.retention"
type LockedCronJobSpec struct {
	// Schedule in cron format: 5 fields, 6 fields with leading seconds ("*/10 * * * * *"),
	// Quartz "?" ("0 0 2 * * ?") or a descriptor ("@hourly", "@every 90s").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.trim().startsWith('TZ=') && !self.trim().startsWith('CRON_TZ=')",message="schedule must not begin with TZ= or CRON_TZ=: set spec.timeZone instead"
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in.
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// Suspend stops new occurrences from starting; running pods are left alone.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// StartingDeadlineSeconds: an occurrence that cannot start within this many seconds of
	// its scheduled time is counted as missed and never started late.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31622400
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// BackoffLimit, with template.spec.restartPolicy OnFailure, is how many times a failed
	// attempt of an occurrence is restarted in its pod, as a Job's backoffLimit: lockwrap
	// counts the attempts in the pod, and the start after backoffLimit+1 failed ones runs
	// nothing and ends the pod, which is counted with the last failed attempt's report.
	// 0 runs each occurrence once. Not used with restartPolicy Never (one attempt per pod).
	// +kubebuilder:default=6
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// Lock is the Redis lock every run takes before the job starts.
	Lock LockSpec `json:"lock"`

	// Contention says what a pod does when another holder has the lock.
	// +kubebuilder:default={}
	// +optional
	Contention ContentionSpec `json:"contention,omitempty"`

	// Blackout pauses the job during windows and rollouts.
	// +optional
	Blackout *BlackoutSpec `json:"blackout,omitempty"`

	// Dedupe says how long a finished occurrence is remembered in Redis.
	// +kubebuilder:default={}
	// +optional
	Dedupe DedupeSpec `json:"dedupe,omitempty"`

	// SuccessfulRunsHistoryLimit is how many finished pods that succeeded (or skipped) are kept.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	SuccessfulRunsHistoryLimit *int32 `json:"successfulRunsHistoryLimit,omitempty"`

	// FailedRunsHistoryLimit is how many finished pods that failed are kept.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	FailedRunsHistoryLimit *int32 `json:"failedRunsHistoryLimit,omitempty"`

	// PrepareAheadSeconds creates an occurrence's pod this many seconds before its scheduled
	// time, so that image pull and container start are done by then; lockwrap waits for the
	// scheduled instant on the node's clock before it takes the lock, never earlier. A
	// suspend, blackout, schedule change or deletion before the instant deletes the waiting
	// pod. 0 (the default) creates the pod at the instant. See docs/performance.md.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	PrepareAheadSeconds *int32 `json:"prepareAheadSeconds,omitempty"`

	// WrapContainer names the container lockwrap runs in front of; default the first.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	WrapContainer string `json:"wrapContainer,omitempty"`

	// Template is the pod created for each occurrence. restartPolicy must be Never or
	// OnFailure (Never when unset).
	// +kubebuilder:validation:XValidation:rule="self.?spec.containers.orValue([]).size() > 0",message="template.spec.containers must have at least one container"
	// +kubebuilder:validation:XValidation:rule="self.?spec.restartPolicy.orValue('Never') in ['Never', 'OnFailure']",message="template.spec.restartPolicy must be Never or OnFailure (a scheduled run must end)"
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.labels) || self.metadata.labels.all(k, !k.startsWith('scheduling.lockedcron.io/'))",message="template.metadata.labels: keys under scheduling.lockedcron.io/ are reserved for the controller (it sets them on every pod and relies on them to count runs); use another prefix",fieldPath=".metadata.labels"
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.annotations) || self.metadata.annotations.all(k, !k.startsWith('scheduling.lockedcron.io/'))",message="template.metadata.annotations: keys under scheduling.lockedcron.io/ are reserved for the controller (it sets them on every pod and relies on them to count runs); use another prefix",fieldPath=".metadata.annotations"
	Template corev1.PodTemplateSpec `json:"template"`
}

// The lock's last rule is lockwrap's defaults.TTLFits, in nanoseconds (int(duration)) and
// with its integer divisions, and the key's are lockwrap's (bytes, strings.TrimSpace): a job
// admitted with a lock its pods refuse would fail every run. TestAdmittedJobsStart keeps the
// two equal.

// LockSpec is the Redis lock.
// +kubebuilder:validation:XValidation:rule="!has(self.key) || size(bytes(self.key)) <= 512",message="lock.key must be at most 512 bytes (a character outside ASCII takes 2 to 4)",fieldPath=".key"
// +kubebuilder:validation:XValidation:rule="!has(self.key) || self.key.trim() == self.key",message="lock.key must not begin or end with whitespace (Unicode spaces included)",fieldPath=".key"
// +kubebuilder:validation:XValidation:rule="!has(self.key) || !self.key.matches('^#[0-9a-f]{16}$')",message="lock.key must not be '#' and 16 hex digits: that is the tag a key holding '{' or '}' is stored under, and the two would share one lock",fieldPath=".key"
// +kubebuilder:validation:XValidation:rule="!has(self.ttl) || duration(self.ttl) > duration('0s')",message="lock.ttl must be greater than 0",fieldPath=".ttl"
// +kubebuilder:validation:XValidation:rule="!has(self.ttl) || [duration(self.ttl)].all(t, t <= duration('0s') || (t >= duration('1s') && t <= duration('24h')))",message="lock.ttl must be between 1s and 24h: a shorter lock expires before a renewal can reach Redis",fieldPath=".ttl"
// +kubebuilder:validation:XValidation:rule="!has(self.renewInterval) || (duration(self.renewInterval) > duration('0s') && (!has(self.ttl) || duration(self.renewInterval) + duration(self.renewInterval) <= duration(self.ttl)))",message="lock.renewInterval must be greater than 0 and at most half of lock.ttl, so that one missed renewal does not lose the lock",fieldPath=".renewInterval"
// +kubebuilder:validation:XValidation:rule="!has(self.renewInterval) || duration(self.renewInterval) >= duration('100ms')",message="lock.renewInterval must be at least 100ms",fieldPath=".renewInterval"
// +kubebuilder:validation:XValidation:rule="!has(self.killGracePeriod) || [duration(self.killGracePeriod)].all(k, k >= duration('0s') && k <= duration('1h'))",message="lock.killGracePeriod must be between 0s and 1h",fieldPath=".killGracePeriod"
// +kubebuilder:validation:XValidation:rule="!has(self.ttl) || !has(self.killGracePeriod) || [[duration(self.ttl), duration(self.killGracePeriod)]].all(d, d[0] < duration('1s') || d[0] > duration('24h') || d[1] < duration('0s') || d[1] > duration('1h') || (has(self.renewInterval) && (duration(self.renewInterval) <= duration('0s') || duration(self.renewInterval) > d[0])) || int(d[0]) >= (has(self.renewInterval) ? int(duration(self.renewInterval)) : int(d[0]) / 3) + int(d[1]) + (int(d[0]) / 100 > 100000000 ? int(d[0]) / 100 : 100000000))",message="lock.ttl must be at least lock.renewInterval + lock.killGracePeriod + a margin (max(100ms, 1% of ttl)), so that a holder that cannot renew has stopped its job before the lock expires: raise lock.ttl or lower lock.killGracePeriod (or lock.renewInterval)",fieldPath=".ttl"
type LockSpec struct {
	// Key names the lock. The same key in several namespaces or clusters means one run for
	// all of them. At most 512 bytes, no whitespace at either end. Default: "<namespace>/<name>".
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S(.*\S)?$`
	// +optional
	Key string `json:"key,omitempty"`

	// TTL is how long the lock lives without renewal.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// RenewInterval is how often the holder renews the lock; default ttl/3, at most ttl/2.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	RenewInterval *metav1.Duration `json:"renewInterval,omitempty"`

	// Redis says where the lock lives.
	Redis RedisSpec `json:"redis"`

	// MinReplicas: after acquiring, wait until this many replicas acknowledge the lock,
	// else release it and report an error. Each renewal waits for them too, and counts
	// only once they acknowledge it: a job whose renewals no replica holds is stopped
	// before a failover could have let the lock expire.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// OnLost says what happens to a running job whose lock was lost.
	// +kubebuilder:default=Terminate
	// +optional
	OnLost OnLostPolicy `json:"onLost,omitempty"`

	// KillGracePeriod is the time between SIGTERM and SIGKILL when a holder must stop its
	// job because it cannot renew the lock. The job is sent SIGTERM at
	// lastRenewSent + ttl - killGracePeriod - margin and SIGKILL at lastRenewSent + ttl -
	// margin (margin = max(100ms, 1% of ttl)), so it is dead before the lock can expire and
	// another holder can take it. ttl must be at least renewInterval + killGracePeriod + margin.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	KillGracePeriod *metav1.Duration `json:"killGracePeriod,omitempty"`
}

// RedisSpec points at the Redis that holds the lock.
// +kubebuilder:validation:XValidation:rule="size(self.secretRef.name) <= 253 && self.secretRef.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="lock.redis.secretRef.name must name a Secret in the job's namespace: a DNS subdomain of lower case letters, digits, '-' and '.' (at most 253)",fieldPath=".secretRef.name"
type RedisSpec struct {
	// SecretRef names a Secret in the same namespace with key "url" (redis://, rediss://,
	// Sentinel or Cluster form) and optional "username", "password" and "ca.crt".
	SecretRef corev1.LocalObjectReference `json:"secretRef"`
}

// ContentionSpec says what a pod does when another holder has the lock.
// +kubebuilder:validation:XValidation:rule="!has(self.policy) || self.policy != 'Retry' || has(self.retry)",message="contention.retry (with attempts) is required when contention.policy is Retry",fieldPath=".retry"
// +kubebuilder:validation:XValidation:rule="!has(self.retry) || (has(self.policy) && self.policy == 'Retry')",message="contention.retry applies only to contention.policy Retry (the policy is Skip, its default): set contention.policy: Retry, or remove contention.retry",fieldPath=".retry"
type ContentionSpec struct {
	// Policy: Skip ends the run at once; Retry tries again with jittered backoff.
	// +kubebuilder:default=Skip
	// +optional
	Policy ContentionPolicy `json:"policy,omitempty"`

	// Retry bounds the retries of policy Retry (and by startingDeadlineSeconds when set).
	// +optional
	Retry *RetrySpec `json:"retry,omitempty"`
}

// RetrySpec bounds retries with full-jitter exponential backoff.
// +kubebuilder:validation:XValidation:rule="!has(self.backoff) || (duration(self.backoff) >= duration('10ms') && duration(self.backoff) <= duration('24h'))",message="contention.retry.backoff must be between 10ms and 24h",fieldPath=".backoff"
// +kubebuilder:validation:XValidation:rule="!has(self.maxBackoff) || (duration(self.maxBackoff) >= duration('10ms') && duration(self.maxBackoff) <= duration('24h'))",message="contention.retry.maxBackoff must be between 10ms and 24h",fieldPath=".maxBackoff"
// +kubebuilder:validation:XValidation:rule="!has(self.backoff) || !has(self.maxBackoff) || duration(self.backoff) <= duration(self.maxBackoff)",message="contention.retry.backoff must not exceed contention.retry.maxBackoff",fieldPath=".backoff"
type RetrySpec struct {
	// Attempts is how many times to try in all.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Attempts int32 `json:"attempts"`

	// Backoff is the first backoff; it doubles up to maxBackoff, each wait drawn at random below it.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Backoff *metav1.Duration `json:"backoff,omitempty"`

	// MaxBackoff caps the backoff.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`
}

// BlackoutSpec pauses the job during windows and rollouts.
type BlackoutSpec struct {
	// Policy: Skip counts an occurrence in a blackout as skippedBlackout; Defer starts it
	// when the blackout ends, if still within startingDeadlineSeconds.
	// +kubebuilder:default=Skip
	// +optional
	Policy BlackoutPolicy `json:"policy,omitempty"`

	// Windows are recurring or one-off periods in which no occurrence starts.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Windows []BlackoutWindow `json:"windows,omitempty"`

	// Rollouts are workloads in this namespace whose rollouts pause the job.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Rollouts []RolloutRef `json:"rollouts,omitempty"`
}

// BlackoutWindow is recurring (schedule + duration, in the job's time zone) or one-off (start + end).
// +kubebuilder:validation:XValidation:rule="(has(self.schedule) && has(self.duration) && !has(self.start) && !has(self.end)) || (!has(self.schedule) && !has(self.duration) && has(self.start) && has(self.end))",message="a blackout window is either recurring (schedule and duration) or one-off (start and end)"
// +kubebuilder:validation:XValidation:rule="!has(self.duration) || [duration(self.duration)].all(d, d > duration('0s') && d <= duration('8784h'))",message="blackout window duration must be greater than 0 and at most 8784h (366 days)",fieldPath=".duration"
// +kubebuilder:validation:XValidation:rule="!has(self.start) || !has(self.end) || timestamp(self.start) < timestamp(self.end)",message="blackout window end must be after start",fieldPath=".end"
type BlackoutWindow struct {
	// Name shows in conditions and events.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Name string `json:"name,omitempty"`

	// Schedule is when a recurring window opens (cron, like spec.schedule; not @every,
	// which has no fixed start).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.trim().startsWith('TZ=') && !self.trim().startsWith('CRON_TZ=')",message="blackout window schedule must not begin with TZ= or CRON_TZ=: windows follow spec.timeZone"
	// +kubebuilder:validation:XValidation:rule="!self.trim().startsWith('@every')",message="blackout window schedule must not be @every (it has no fixed start): use a cron schedule"
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// Duration is how long a recurring window stays open.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`

	// Start of a one-off window (inclusive).
	// +optional
	Start *metav1.Time `json:"start,omitempty"`

	// End of a one-off window (exclusive).
	// +optional
	End *metav1.Time `json:"end,omitempty"`
}

// RolloutRef names workloads whose rollouts pause the job, by name or by label selector.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="a rollout reference needs exactly one of name or selector"
// +kubebuilder:validation:XValidation:rule="!has(self.settle) || duration(self.settle) <= duration('8784h')",message="blackout.rollouts[].settle must be at most 8784h (366 days)",fieldPath=".settle"
type RolloutRef struct {
	// Kind of the workload.
	Kind WorkloadKind `json:"kind"`

	// Name of one workload in this namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`

	// Selector picks workloads of Kind in this namespace by label.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Settle keeps the blackout this long after the rollout completes.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Settle *metav1.Duration `json:"settle,omitempty"`
}

// DedupeSpec says how long finished occurrences are remembered.
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || (duration(self.retention) >= duration('1m') && duration(self.retention) <= duration('8784h'))",message="dedupe.retention must be between 1m and 8784h (366 days): a finished occurrence must be remembered longer than any holder can still be running it",fieldPath=".retention"
type DedupeSpec struct {
	// Retention is how long Redis remembers a finished occurrence, so that no other
	// holder runs it again. The default is written as a Go client writes it back
	// ("168h0m0s", metav1.Duration), so that a typed client's full update of an
	// unchanged job does not change its spec (and metadata.generation).
	// +kubebuilder:default="168h0m0s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`
}

// Holder is who held the lock for an occurrence.
type Holder struct {
	// Identity is "<cluster>/<namespace>/<pod>/<pod uid>".
	Identity string `json:"identity"`
	// FencingToken increases with every acquisition of the key.
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`
	// +optional
	Occurrence *metav1.Time `json:"occurrence,omitempty"`
	// +optional
	AcquiredAt *metav1.Time `json:"acquiredAt,omitempty"`
	// +optional
	ReleasedAt *metav1.Time `json:"releasedAt,omitempty"`
	// RequestedAt is when a manual run's request was handled: it, not the occurrence
	// (which a re-run names from the past), orders the holder, as in status.recent.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
}

// LastSuccess is the lock key's last successful run seen by this resource's pods, with the
// key's watermark after it (the value a job stored through LOCKEDCRON_WATERMARK_FILE; see
// docs/idempotency.md).
type LastSuccess struct {
	// Occurrence is the scheduled time the run was for.
	// +optional
	Occurrence *metav1.Time `json:"occurrence,omitempty"`
	// FinishedAt is when the run released the lock.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// FencingToken is the run's fencing token; a later success has a higher one.
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`
	// Holder is "<cluster>/<namespace>/<pod>/<pod uid>" of the run.
	// +optional
	Holder string `json:"holder,omitempty"`
	// Watermark is the key's watermark after the run, its first 256 bytes (then ending
	// in "…"); Redis keeps the whole (up to 1 KiB) for the next run.
	// +optional
	Watermark string `json:"watermark,omitempty"`
}

// Counters count occurrences by what became of them. Each finished pod is counted once,
// also across controller restarts.
type Counters struct {
	// Runs: occurrences whose job started here (succeeded, failed or lost the lock).
	Runs int64 `json:"runs"`
	// Succeeded: runs whose job exited 0.
	Succeeded int64 `json:"succeeded"`
	// Failed: runs whose job failed, runs that lost their lock (LockLost, whatever their
	// job's exit code), and pods that ended with an error before the job started.
	Failed int64 `json:"failed"`
	// SkippedContention: pods that found the lock held elsewhere.
	SkippedContention int64 `json:"skippedContention"`
	// SkippedBlackout: occurrences not started because of a blackout.
	SkippedBlackout int64 `json:"skippedBlackout"`
	// Missed: occurrences that could not start in time (controller down, deadline passed).
	Missed int64 `json:"missed"`
	// DuplicatesSuppressed: occurrences a pod did not run because they had already run:
	// succeeded elsewhere, or failed in an earlier pod of the same name.
	DuplicatesSuppressed int64 `json:"duplicatesSuppressed"`
	// LockLost: runs that lost their lock while the job ran.
	LockLost int64 `json:"lockLost"`
	// Interrupted: pods whose lockwrap was signalled (deleted, evicted) before the job
	// started; the job did not run.
	Interrupted int64 `json:"interrupted"`
}

// RunRecord is one finished occurrence.
type RunRecord struct {
	Occurrence metav1.Time `json:"occurrence"`
	// Outcome: Succeeded, Failed, SkippedContention, SuppressedDuplicate, LockLost,
	// Interrupted, Error, SkippedBlackout or Missed.
	Outcome string `json:"outcome"`
	// +optional
	Pod string `json:"pod,omitempty"`
	// Holder who ran it, or who held the lock when this pod skipped.
	// +optional
	Holder string `json:"holder,omitempty"`
	// +optional
	FencingToken int64 `json:"fencingToken,omitempty"`
	// Duration the lock was held.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Trigger is Scheduled or Manual (a run requested with the run-request annotation).
	// +optional
	Trigger string `json:"trigger,omitempty"`
	// RequestedAt is when a manual run's request was handled: it, not the occurrence
	// (which a re-run names from the past), places the record in status.recent.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
}

// Triggers of a run (RunRecord.Trigger).
const (
	TriggerScheduled = "Scheduled"
	TriggerManual    = "Manual"
)

// Manual runs are requested with annotations on the LockedCronJob (the pattern of Flux's
// reconcile.fluxcd.io/requestedAt): setting AnnotationRunRequest to a new id asks for one
// run; status.lastRunRequest records the id handled, so one id never makes two pods, also
// across manager restarts. The other two annotations are read with it.
const (
	// AnnotationRunRequest is the request id: 1-63 characters [a-z0-9-], starting and
	// ending alphanumeric.
	AnnotationRunRequest = "scheduling.lockedcron.io/run-request"
	// AnnotationRunOccurrence (optional) is a scheduled occurrence (RFC 3339) to run again;
	// refused when the ledger says it succeeded.
	AnnotationRunOccurrence = "scheduling.lockedcron.io/run-request-occurrence"
	// AnnotationRunContention (optional) is Wait (the default: wait for the lock, bounded)
	// or FailFast (skip if the lock is held).
	AnnotationRunContention = "scheduling.lockedcron.io/run-request-contention"
)

// Contention of a manual run (AnnotationRunContention).
const (
	ManualContentionWait     = "Wait"
	ManualContentionFailFast = "FailFast"
)

// RunRequest is the last manual run request the controller handled.
type RunRequest struct {
	// ID is the request id (the run-request annotation).
	ID string `json:"id"`
	// RequestedBy is the field manager that set the annotation (from managedFields).
	// +optional
	RequestedBy string `json:"requestedBy,omitempty"`
	// Occurrence is the scheduled occurrence run again, if the request named one.
	// +optional
	Occurrence *metav1.Time `json:"occurrence,omitempty"`
	// Contention is Wait or FailFast.
	// +optional
	Contention string `json:"contention,omitempty"`
	// HandledAt is when the controller handled it.
	HandledAt metav1.Time `json:"handledAt"`
	// Pod is the pod created for it; empty when the request was refused.
	// +optional
	Pod string `json:"pod,omitempty"`
	// Refused says why no pod was created (invalid request, occurrence already succeeded).
	// +optional
	Refused string `json:"refused,omitempty"`
}

// UpcomingOccurrence previews an occurrence and the blackout expected to suppress it.
type UpcomingOccurrence struct {
	Time metav1.Time `json:"time"`
	// BlockedBy names the window or workload expected to suppress it; empty if it should run.
	// +optional
	BlockedBy string `json:"blockedBy,omitempty"`
}

// ObservedRollout is a referenced workload seen rolling out.
type ObservedRollout struct {
	Kind WorkloadKind `json:"kind"`
	Name string       `json:"name"`
	// Since is when the controller first saw the rollout in progress.
	Since metav1.Time `json:"since"`
	// CompletedAt is when the rollout completed: for a Deployment the lastUpdateTime of its
	// Progressing condition (reason NewReplicaSetAvailable), otherwise when the controller
	// first saw it complete. Unset while in progress.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// LockedCronJobStatus is what the controller observed.
type LockedCronJobStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, LockBackendReady, Blackout.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// ActiveCount is len(active), for kubectl get.
	// +optional
	ActiveCount int32 `json:"activeCount,omitempty"`

	// LockKey is the lock key in effect (spec.lock.key or its default).
	// +optional
	LockKey string `json:"lockKey,omitempty"`

	// Active are the pods of occurrences still running.
	// +listType=atomic
	// +optional
	Active []corev1.ObjectReference `json:"active,omitempty"`

	// LastHolder is who last ran the job, here or elsewhere.
	// +optional
	LastHolder *Holder `json:"lastHolder,omitempty"`

	// LastSuccess is the key's last successful run seen here, and its watermark.
	// +optional
	LastSuccess *LastSuccess `json:"lastSuccess,omitempty"`

	// +optional
	Counters Counters `json:"counters"`

	// Recent are the last 10 finished occurrences, newest first.
	// +listType=atomic
	// +optional
	Recent []RunRecord `json:"recent,omitempty"`

	// Upcoming previews the next occurrences and what is expected to suppress them.
	// +listType=atomic
	// +optional
	Upcoming []UpcomingOccurrence `json:"upcoming,omitempty"`

	// Deferred is the occurrence waiting for a blackout to end (blackout.policy Defer).
	// +optional
	Deferred *metav1.Time `json:"deferred,omitempty"`

	// Rollouts are the referenced workloads the controller saw rolling out, kept until
	// their settle time has passed; they carry the completion time across restarts.
	// +listType=atomic
	// +optional
	Rollouts []ObservedRollout `json:"rollouts,omitempty"`

	// ObservedSchedule is the schedule, zone and suspension the controller last saw
	// ("|refused" appended while it refused the schedule: not in force);
	// ScheduleSince is when they took effect: the job's creation, or the last change of
	// spec.schedule, spec.timeZone or spec.suspend as the job's managed fields record it
	// (whole seconds; when the controller first saw it if they do not say). A changed
	// schedule never runs an occurrence from before ScheduleSince.
	// +optional
	ObservedSchedule string `json:"observedSchedule,omitempty"`
	// +optional
	ScheduleSince *metav1.Time `json:"scheduleSince,omitempty"`

	// LastRunRequest is the last manual run request handled.
	// +optional
	LastRunRequest *RunRequest `json:"lastRunRequest,omitempty"`

	// CountedPods is bookkeeping for exact counters: pods already counted, to be marked
	// as counted if a restart came first. A marked pod's name stays until the job's next
	// status write.
	// +listType=atomic
	// +optional
	CountedPods []string `json:"countedPods,omitempty"`

	// DueBeforeChange is bookkeeping for exact counters: pods prepared ahead and
	// withdrawn whose occurrence came before a change of spec.schedule, spec.timeZone or
	// spec.suspend, and which had not said then whether their job ran. The change counted
	// the other occurrences of the old schedule that had not started, and left each of
	// these to its pod: its report if its job ran, missed if not. A name goes once its
	// pod has said.
	// +listType=atomic
	// +optional
	DueBeforeChange []string `json:"dueBeforeChange,omitempty"`
}

// LockedCronJob runs a job once per scheduled occurrence, however many clusters,
// namespaces or replicas declare it, by taking a Redis lock in front of the job.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be at most 52 characters, so that pod names (<name>-<unix seconds>) fit in a label value"
// +kubebuilder:resource:shortName=lcj,categories=all
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeCount`
// +kubebuilder:printcolumn:name="Last Holder",type=string,JSONPath=`.status.lastHolder.identity`
// +kubebuilder:printcolumn:name="Last Schedule",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.counters.skippedContention`
// +kubebuilder:printcolumn:name="Suppressed",type=integer,JSONPath=`.status.counters.duplicatesSuppressed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.lockKey`,priority=1
// +kubebuilder:printcolumn:name="TTL",type=string,JSONPath=`.spec.lock.ttl`,priority=1
// +kubebuilder:printcolumn:name="Contention",type=string,JSONPath=`.spec.contention.policy`,priority=1
// +kubebuilder:printcolumn:name="Runs",type=integer,JSONPath=`.status.counters.runs`,priority=1
// +kubebuilder:printcolumn:name="Blackout",type=string,JSONPath=`.status.conditions[?(@.type=="Blackout")].reason`,priority=1
// +kubebuilder:printcolumn:name="Skipped Blackout",type=integer,JSONPath=`.status.counters.skippedBlackout`,priority=1
type LockedCronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LockedCronJobSpec   `json:"spec,omitempty"`
	Status LockedCronJobStatus `json:"status,omitempty"`
}

// LockedCronJobList is a list of LockedCronJobs.
// +kubebuilder:object:root=true
type LockedCronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LockedCronJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LockedCronJob{}, &LockedCronJobList{})
}
