package controller

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// cachedJob is what the manager's cache holds of a LockedCronJob (slimJob makes it): its
// metadata as decoded, and its spec and status as one compressed JSON document (body).
// A job's status is most of what a cached job held (issue 13: 4.3 KB of 6.2 KB for a job
// that has run a while, status.recent's ten records 2.9 KB of it), and its spec is a
// 1.6 KB struct, an inline pod template mostly empty; compressed together they are about
// a kilobyte. A pass reads and rewrites the whole status, so none of it can be dropped.
//
// It reads as the job it stands for, as cachedPod reads as its pod: the cache's readers
// (Get, List) hand out DeepCopyObject of the object held, which decodes the body into a
// *v1alpha1.LockedCronJob of the reader's own. What is handed the held object itself (the
// job watch's predicates and handler, the rollout index) reads its metadata as a
// client.Object, or the rollout index's keys slimJob kept (rolloutRefKeys). The same limits
// as cachedPod's hold: no cache option may skip the readers' copy, and client-go's cache
// mutation detector must stay off.
// Decoding costs a pass about as much as the watch's own decoding of the job (CPU figures in
// docs/performance.md).
type cachedJob struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	body        []byte   // {"spec":…,"status":…}, flate-compressed (packJob)
	rolloutKeys []string // the rollout index's keys (rolloutRefKeys), read on every update
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
	return job
}

// jobBody is what a cachedJob's body holds.
type jobBody struct {
	Spec   *v1alpha1.LockedCronJobSpec   `json:"spec"`
	Status *v1alpha1.LockedCronJobStatus `json:"status"`
}

// Pools of flate writers and readers (a writer allocates about 1 MB, a reader 40 KB), and
// of the buffers a body is inflated into.
var (
	flateWriters = sync.Pool{New: func() any {
		w, err := flate.NewWriter(io.Discard, flate.BestSpeed)
		if err != nil {
			panic(err) // a valid, constant level
		}
		return w
	}}
	flateReaders = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
	inflated     = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// packJob encodes a job's spec and status into a cachedJob's body.
func packJob(job *v1alpha1.LockedCronJob) ([]byte, error) {
	raw, err := json.Marshal(jobBody{Spec: &job.Spec, Status: &job.Status})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil // no spare capacity held
}

// unpackJob decodes a cachedJob's body into job's spec and status.
func unpackJob(body []byte, job *v1alpha1.LockedCronJob) error {
	raw := inflated.Get().(*bytes.Buffer)
	defer inflated.Put(raw)
	raw.Reset()
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(body), nil); err != nil {
		return err
	}
	if _, err := raw.ReadFrom(r); err != nil {
		return err
	}
	// encoding/json copies what it keeps: the buffer goes back to the pool.
	return json.Unmarshal(raw.Bytes(), &jobBody{Spec: &job.Spec, Status: &job.Status})
}
