package controller

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/report"
)

// cachedJob is what the manager's cache holds of a LockedCronJob (slimJob makes it): its
// metadata as decoded, and its spec and status as one compressed JSON document (body).
// A job's status is most of what a cached job held (issue 13: 4.3 KB of 6.2 KB for a job
// that has run a while, status.recent's ten records 2.9 KB of it), and its spec is a
// 1.6 KB struct, an inline pod template mostly empty; compressed together (with packDict)
// they are about half a kilobyte. A pass reads and rewrites the whole status, so none of
// it can be dropped. The managed fields slimJob keeps (a few entries, each a struct of
// about 150 bytes with its time and field set apart) are in the body too.
//
// It reads as the job it stands for, as cachedPod reads as its pod: the cache's readers
// (Get, List) hand out DeepCopyObject of the object held, which decodes the body into a
// *v1alpha1.LockedCronJob of the reader's own. What is handed the held object itself (the
// job watch's predicates and handler, the rollout index) reads its metadata as a
// client.Object, less the managed fields, which none of them reads; or the rollout
// index's keys slimJob kept (rolloutRefKeys). The same limits
// as cachedPod's hold: no cache option may skip the readers' copy, and client-go's cache
// mutation detector must stay off.
// Decoding costs a pass about as much as the watch's own decoding of the job (CPU figures in
// docs/performance.md).
type cachedJob struct {
	metav1.TypeMeta
	metav1.ObjectMeta          // without its managed fields: they are in body
	body              []byte   // {"spec":…,"status":…,"managedFields":…}, flate-compressed (packJob)
	rolloutKeys       []string // the rollout index's keys (rolloutRefKeys), read on every update
	templateNotHeld   bool     // body holds the job without its template (maxHeldJobBody)
}

// DeepCopyObject returns a copy of the job it stands for (see cachedJob).
func (c *cachedJob) DeepCopyObject() runtime.Object {
	job := &v1alpha1.LockedCronJob{TypeMeta: c.TypeMeta}
	c.ObjectMeta.DeepCopyInto(&job.ObjectMeta)
	if err := unpackJob(c.body, job); err != nil {
		// slimJob holds only a body that decodes: this is memory corrupted, not input.
		// Handing out a job without its status would let a pass write an empty one over
		// the stored status.
		panic(fmt.Sprintf("lockedcron: the cached job %s/%s does not decode: %v", c.Namespace, c.Name, err))
	}
	if c.templateNotHeld {
		metav1.SetMetaDataAnnotation(&job.ObjectMeta, annotationTemplateNotHeld, "true")
	}
	return job
}

// jobBody is what a cachedJob's body holds.
type jobBody struct {
	Spec          *v1alpha1.LockedCronJobSpec   `json:"spec"`
	Status        *v1alpha1.LockedCronJobStatus `json:"status"`
	ManagedFields *[]metav1.ManagedFieldsEntry  `json:"managedFields"`
}

// packDict primes the compressor of every body (flate's preset dictionary) with what a
// job's body repeats whatever the job: the JSON keys of its spec and status, and the words
// the API server's defaults and the controller write (condition types and reasons,
// outcomes, triggers, policies), here from a made-up job. A body then holds its own values
// and back-references to these: the README's job with ten recent runs packs to 308 B
// instead of 1,001 (BenchmarkJobHeld). flate's fastest level ignores a dictionary, so
// bodies are packed at level 2. The dictionary only has to be the same for packing and
// unpacking in one process: bodies are never stored.
var packDict = func() []byte {
	t := &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	cond := func(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, ObservedGeneration: 1, LastTransitionTime: *t, Reason: reason, Message: msg}
	}
	const pod, holder = "job-1767225600", "job-1767225600/1/0123456789abcdef"
	rec := func(o report.Outcome) v1alpha1.RunRecord {
		return v1alpha1.RunRecord{Occurrence: *t, Outcome: string(o), Pod: pod, Holder: holder, FencingToken: 1, Duration: d(time.Second), Trigger: v1alpha1.TriggerScheduled}
	}
	managed := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: v1alpha1.GroupVersion.String(), Time: t,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:schedule":{},"f:suspend":{},"f:timeZone":{}}}`)}},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: v1alpha1.GroupVersion.String(), Time: t,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + v1alpha1.AnnotationRunRequest + `":{}}}}`)}},
	}
	body, err := json.Marshal(jobBody{
		ManagedFields: &managed,
		Spec: &v1alpha1.LockedCronJobSpec{Schedule: "0 * * * *", TimeZone: "UTC", Suspend: ptr.To(false),
			Lock: v1alpha1.LockSpec{Key: "job", TTL: d(30 * time.Second), RenewInterval: d(10 * time.Second),
				Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}, OnLost: v1alpha1.OnLostTerminate, KillGracePeriod: d(10 * time.Second)},
			Contention: v1alpha1.ContentionSpec{Policy: v1alpha1.ContentionSkip, Retry: &v1alpha1.RetrySpec{Attempts: 3, Backoff: d(time.Second), MaxBackoff: d(30 * time.Second)}},
			Dedupe:     v1alpha1.DedupeSpec{Retention: d(168 * time.Hour)}, SuccessfulRunsHistoryLimit: ptr.To[int32](3), FailedRunsHistoryLimit: ptr.To[int32](1),
			PrepareAheadSeconds: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "image",
				Command: []string{"/bin/sh", "-c"}, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}},
		Status: &v1alpha1.LockedCronJobStatus{ObservedGeneration: 1,
			Conditions: []metav1.Condition{cond(ConditionReady, metav1.ConditionTrue, ReasonScheduled, "next occurrence 2026-01-01T00:00:00Z"),
				cond(ConditionLockBackendReady, metav1.ConditionTrue, ReasonRedisReachable, "Secret read and Redis answered"),
				cond(ConditionBlackout, metav1.ConditionFalse, blackout.ReasonNoBlackout, "no window open, no rollout")},
			LastScheduleTime: t, LastSuccessfulTime: t, NextScheduleTime: t, ActiveCount: 1, LockKey: "ns/job",
			Active:      []corev1.ObjectReference{{Kind: "Pod", Namespace: "ns", Name: pod, UID: "00000000-0000-0000-0000-000000000000", APIVersion: "v1"}},
			LastHolder:  &v1alpha1.Holder{Identity: holder, FencingToken: 1, Occurrence: t, AcquiredAt: t},
			LastSuccess: &v1alpha1.LastSuccess{Occurrence: t, FinishedAt: t, FencingToken: 1, Holder: holder},
			Counters:    v1alpha1.Counters{Runs: 1, Succeeded: 1},
			Recent:      []v1alpha1.RunRecord{rec(report.Failed), rec(report.SkippedContention), rec(report.Missed), rec(report.Succeeded), rec(report.Succeeded)},
			Upcoming:    []v1alpha1.UpcomingOccurrence{{Time: *t}, {Time: *t}}},
	})
	if err != nil {
		panic(err) // a constant, valid job
	}
	return body
}()

// packLevel is the flate level of packed bodies: the fastest that uses packDict.
const packLevel = 2

// packer is packJob's flate writer, one: a writer allocates about 1 MB, and a sync.Pool of
// them held two to four (one per P, and what the last collection left), 2.3–3.2 MB of a
// 57–63 MB live heap at 5,000 jobs. packJob's one caller is the cache's transform, which
// runs on the job informer's goroutine (one per namespace with --watch-namespaces), so the
// lock is seldom contended.
var packer struct {
	sync.Mutex
	w *flate.Writer
}

// Pools of flate readers (40 KB each) and of the buffers a body is inflated into.
var (
	flateReaders = sync.Pool{New: func() any { return flate.NewReaderDict(bytes.NewReader(nil), packDict) }}
	inflated     = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// packJob encodes a job's spec, status and managed fields into a cachedJob's body.
func packJob(job *v1alpha1.LockedCronJob) ([]byte, error) {
	raw, err := json.Marshal(jobBody{Spec: &job.Spec, Status: &job.Status, ManagedFields: &job.ManagedFields})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	packer.Lock()
	defer packer.Unlock()
	if packer.w == nil {
		if packer.w, err = flate.NewWriterDict(&buf, packLevel, packDict); err != nil {
			return nil, err
		}
	} else {
		packer.w.Reset(&buf)
	}
	if _, err := packer.w.Write(raw); err != nil {
		return nil, err
	}
	if err := packer.w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil // no spare capacity held
}

// unpackJob decodes a cachedJob's body into job's spec, status and managed fields.
func unpackJob(body []byte, job *v1alpha1.LockedCronJob) error {
	raw := inflated.Get().(*bytes.Buffer)
	defer inflated.Put(raw)
	raw.Reset()
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(body), packDict); err != nil {
		return err
	}
	if _, err := raw.ReadFrom(r); err != nil {
		return err
	}
	// encoding/json copies what it keeps: the buffer goes back to the pool.
	return json.Unmarshal(raw.Bytes(), &jobBody{Spec: &job.Spec, Status: &job.Status, ManagedFields: &job.ManagedFields})
}
