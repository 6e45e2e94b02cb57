package runpod

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// A manual run (docs/manual-runs.md) is a pod like an occurrence's, through the same
// lockwrap and lock key, built from a run request (the job's run-request annotations).
const (
	// LabelRunRequest holds the request id on a manual run's pod; its presence makes the
	// pod a manual run.
	LabelRunRequest = v1alpha1.AnnotationRunRequest
	// AnnotationRequestedAt is when the controller handled the request (RFC 3339): a
	// manual run's deadlines count from it, not from the occurrence it may re-run.
	AnnotationRequestedAt = "scheduling.lockedcron.io/requested-at"

	// ManualWaitLimit is how long after the request a manual run may start its job: with
	// contention Wait, lockwrap retries for the lock until then; a pod not started by then
	// (stuck Pending, or still waiting for the lock) does not run the job (Missed).
	ManualWaitLimit = time.Hour
	// ManualRetryBackoff and ManualRetryMaxBackoff pace contention Wait's retries: a run
	// waiting behind another starts within a few seconds of its end.
	ManualRetryBackoff    = time.Second
	ManualRetryMaxBackoff = 5 * time.Second

	// manualHashLen characters of base32: "<job>-m-" + 8 fits 63 with a 52-character job name.
	manualHashLen = 8
)

// ManualRun is a run request the controller accepted.
type ManualRun struct {
	// ID is the request id (1-63 of [a-z0-9-], alphanumeric at both ends).
	ID string
	// Occurrence is the scheduled occurrence to run again; zero: none (the run has a
	// ledger entry of its own, RunID).
	Occurrence time.Time
	// RequestedAt is when the controller handled the request (whole seconds are used).
	RequestedAt time.Time
	// Contention is v1alpha1.ManualContentionWait (default) or ManualContentionFailFast.
	Contention string
}

// ManualName is the deterministic pod name of a run request:
// "<job>-m-<8 characters of base32(SHA-256(id))>", at most 63 characters for a job
// name of at most MaxJobNameLength. Creating it twice fails with AlreadyExists.
func ManualName(jobName, id string) string {
	sum := sha256.Sum256([]byte(id))
	h := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
	return jobName + "-m-" + h[:manualHashLen]
}

// ManualRunID is the lockwrap --run-id of a request that names no occurrence: the job's
// UID and the id, so that requests of jobs sharing a lock key (other namespaces,
// clusters), or of a job recreated under the same name, never share a ledger entry.
func ManualRunID(job *v1alpha1.LockedCronJob, id string) string {
	return "manual:" + string(job.UID) + ":" + id
}

// ledgerOccurrence is the occurrence lockwrap runs under: the named one, else the
// request's time.
func (m ManualRun) ledgerOccurrence() time.Time {
	if !m.Occurrence.IsZero() {
		return m.Occurrence
	}
	return m.RequestedAt.Truncate(time.Second)
}

// BuildManual returns the pod of a manual run: the occurrence's pod (Build) named
// ManualName, labelled with the request id, whose lockwrap takes the same lock key with
// the request's contention (Wait: retry until RequestedAt + ManualWaitLimit; FailFast:
// skip) and, unless the request names an occurrence, a ledger entry of its own.
func BuildManual(job *v1alpha1.LockedCronJob, m ManualRun, opts Options) (*corev1.Pod, error) {
	return build(job, m.ledgerOccurrence(), ManualName(job.Name, m.ID), opts, &m)
}

func manualEnv(job *v1alpha1.LockedCronJob, m ManualRun, windowStart time.Time) []corev1.EnvVar {
	lit := literal
	var env []corev1.EnvVar
	if m.Occurrence.IsZero() {
		env = append(env, lit(config.EnvRunID, ManualRunID(job, m.ID)))
	}
	if m.Contention == v1alpha1.ManualContentionFailFast {
		env = append(env, lit(config.EnvContention, config.ContentionSkip))
	} else {
		env = append(env,
			lit(config.EnvContention, config.ContentionRetry),
			lit(config.EnvRetryBackoff, ManualRetryBackoff.String()),
			lit(config.EnvRetryMaxBackoff, ManualRetryMaxBackoff.String()),
		)
	}
	na := m.RequestedAt.Add(ManualWaitLimit).Truncate(time.Second)
	if !windowStart.IsZero() && windowStart.Before(na) {
		na = windowStart.Truncate(time.Second)
	}
	return append(env, lit(config.EnvNotAfter, na.UTC().Format(time.RFC3339)))
}

// IsManual reports whether a pod is a manual run's.
func IsManual(pod *corev1.Pod) bool {
	_, ok := pod.Labels[LabelRunRequest]
	return ok
}

// Trigger is v1alpha1.TriggerManual for a manual run's pod, else TriggerScheduled.
func Trigger(pod *corev1.Pod) string {
	if IsManual(pod) {
		return v1alpha1.TriggerManual
	}
	return v1alpha1.TriggerScheduled
}

// RequestedAt is when a manual run's request was handled: its annotation's time, but
// never after the pod was made (false for other pods, or without either).
func RequestedAt(pod *corev1.Pod) (time.Time, bool) {
	if !IsManual(pod) {
		return time.Time{}, false
	}
	t, err := report.ParseTime(pod.Annotations[AnnotationRequestedAt])
	if created := pod.CreationTimestamp.Time; !created.IsZero() && (err != nil || t.After(created.Add(MaxClockSkew))) {
		// Its pod was made once the request was handled; the annotation, which whoever
		// may patch the pod can change, does not move that later.
		return created, true
	}
	return t, err == nil
}

// MaxClockSkew is how far a time the controller stamped on a pod (by its clock) may be
// after the pod's creation (by the API server's) and still be taken as it is.
const MaxClockSkew = time.Minute

// RequestKey is what status records of a request id: the id itself (a valid one has at
// most 63 characters), or, for a longer one (refused), its first bytes and a digest, so
// that status stays small and the request is still handled once.
func RequestKey(id string) string {
	if len(id) <= 63 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return report.TruncateRunes(id, 40) + "…" + hex.EncodeToString(sum[:8])
}

// ManualRunOf is the manual run pod was built for (BuildManual), as the pod says it: its
// id, the occurrence it runs again (zero: a run of its own, with its own ledger entry),
// when its request was handled, and its contention. The job's run-request annotations may
// have been edited since; the pod is what runs.
func ManualRunOf(pod *corev1.Pod) ManualRun {
	m := ManualRun{ID: pod.Labels[LabelRunRequest], Contention: v1alpha1.ManualContentionWait}
	m.RequestedAt, _ = RequestedAt(pod)
	var occurrence time.Time
	ownEntry := false
	for _, c := range pod.Spec.Containers {
		if c.Name != WrappedContainer(pod) {
			continue
		}
		for _, e := range c.Env {
			switch e.Name {
			case config.EnvRunID:
				ownEntry = e.Value != ""
			case config.EnvContention:
				if e.Value == config.ContentionSkip {
					m.Contention = v1alpha1.ManualContentionFailFast
				}
			case config.EnvOccurrence:
				occurrence, _ = report.ParseTime(e.Value)
			}
		}
	}
	if !ownEntry && !occurrence.IsZero() {
		m.Occurrence = occurrence.UTC()
	}
	return m
}
