package controller

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
)

// CacheOptions makes the manager's cache hold only the pods this operator creates
// (labelled with runpod.LabelJob), not every pod of the cluster, and of each only what
// the controller reads (slimPod); of LockedCronJobs' managed fields and annotations too,
// only what it reads (slimJob).
func CacheOptions() cache.Options {
	ours, err := labels.NewRequirement(runpod.LabelJob, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:             {Label: labels.NewSelector().Add(*ours), Transform: slimPod},
		&v1alpha1.LockedCronJob{}: {Transform: slimJob},
	}}
}

// slimPod keeps of a pod what the controller reads (issue 13: memory at thousands of
// jobs): its metadata without managed fields and without labels and annotations other
// than the controller's own (ownKeys), spec.nodeName and spec.restartPolicy, and of its status what a
// pass reads (heldStatus). The rest of the spec (containers, the init container,
// volumes, security contexts) and the managed fields are most of a pod's size, and no
// pass reads them; the controller writes pods only by patches computed between two copies
// of the cached object (markCounted, withdrawPod, releasePods), which carry none of it.
// Of a finished pod already counted, history, the status keeps only the phase
// (isHistory). It returns a cachedPod, which reads as that pod. Anything else (a
// tombstone) passes unchanged.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	if name := runpod.WrappedContainer(pod); name != "" && name != pod.Annotations[runpod.AnnotationWrappedContainer] {
		// Its containers are not held: the annotation a pass reads names the one they say.
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[runpod.AnnotationWrappedContainer] = name
	}
	history := isHistory(pod)
	labels, annotations := ownPairs(pod.Labels), ownPairs(pod.Annotations)
	pod.Labels, pod.Annotations = nil, nil
	sharePodStrings(pod)
	c := &cachedPod{podMeta: slimMeta(&pod.ObjectMeta, labels, annotations), nodeName: pod.Spec.NodeName, phase: pod.Status.Phase,
		restartPolicy: sharedRestartPolicy(pod.Spec.RestartPolicy)}
	if !history {
		c.status = holdStatus(&pod.Status)
	}
	return c, nil
}

// cachedPod is what the manager's cache holds of one of the controller's pods (slimPod
// makes it). A corev1.Pod holds its PodSpec (592 B) and PodStatus (384 B) inline however
// little of them is set, and most cached pods are history, whose status is the phase
// alone; a metav1.ObjectMeta is 232 B, much of it fields a pod leaves empty; and a Go
// map takes about 300 B however few entries it has, where a pod keeps two to four labels
// and annotations (ownKeys). A cachedPod holds the metadata as a podMeta (its owner
// reference one copy per job, its labels and annotations as pairs), the node name, the
// phase, and the status slimPod keeps (heldStatus) only when it is more than the phase.
//
// It reads as the pod it stands for. The cache's readers (Get, List) hand out a
// DeepCopyObject of the object held, and a cachedPod's is that *corev1.Pod, so every
// pass reads pods as the API serves them, less what slimPod drops. What is handed the
// held object itself (the pod informer's event handlers and predicates, the field
// indexer, a List's label selector) reads it as a client.Object, whose GetLabels and
// GetAnnotations build the maps, or through podOf. No cache option may skip the readers'
// copy (UnsafeDisableDeepCopy): the copy is what hands out the pod. client-go's cache
// mutation detector (KUBE_CACHE_MUTATION_DETECTOR=true, a debugging aid) would take the
// pod for a changed copy and must stay off, as it is by default; its watch-list
// consistency detector compares two transforms of one pod, which are equal (pairsOf sorts,
// and one owner reference has one handle).
//
// Its kind is not held: a pod decoded from the API server's list or watch has none
// either (the decoder clears it), and the cache's Get sets it on the reader's object.
type cachedPod struct {
	podMeta
	nodeName      string
	restartPolicy corev1.RestartPolicy // whether an ended job container runs again (tracking.Decide)
	phase         corev1.PodPhase
	status        *heldStatus // nil for history: the phase alone
}

// sharedRestartPolicy is p, held once for all pods when it is one of the policies.
func sharedRestartPolicy(p corev1.RestartPolicy) corev1.RestartPolicy {
	for _, known := range []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways} {
		if p == known {
			return known
		}
	}
	return p
}

// GetObjectKind: a cachedPod holds no kind (see cachedPod).
func (c *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a copy of the pod it stands for (see cachedPod).
func (c *cachedPod) DeepCopyObject() runtime.Object { return c.pod(true) }

// view returns the pod it stands for, sharing the cached status and finalizers: to be
// read, never changed.
func (c *cachedPod) view() *corev1.Pod { return c.pod(false) }

// pod builds the pod it stands for: the caller's own when deep, else sharing what it can.
func (c *cachedPod) pod(deep bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: c.meta(deep)}
	p.Spec.NodeName, p.Spec.RestartPolicy = c.nodeName, c.restartPolicy
	if c.status != nil {
		p.Status = c.status.status(c.phase, deep)
	} else {
		p.Status.Phase = c.phase
	}
	return p
}

// pairs is a small string map held as its keys and values in turn, each string shared
// where the vocabulary has it (word); nil for a nil map, empty for an empty one.
type pairs []string

func pairsOf(m map[string]string) pairs {
	if m == nil {
		return nil
	}
	return sortedPairs(m, slices.Collect(maps.Keys(m)))
}

// maxOwnValue bounds a kept label's or annotation's value: the controller writes short
// ones (a name, a time, a reason cut to as much); whoever may patch a pod can write up to
// 256 KiB.
const maxOwnValue = runpod.MaxNoteBytes

// ownPairs is pairsOf of the keys the controller writes (ReservedPrefix, and known to it:
// vocabulary), each value cut to maxOwnValue bytes. Another key under the prefix, which
// whoever may patch the pod can add, is not held.
func ownPairs(m map[string]string) pairs {
	if m == nil {
		return nil
	}
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, runpod.ReservedPrefix) && vocabulary[k] != "" {
			keys = append(keys, k)
		}
	}
	p := sortedPairs(m, keys)
	for i := 1; i < len(p); i += 2 {
		if len(p[i]) > maxOwnValue {
			p[i] = strings.Clone(strings.ToValidUTF8(p[i][:maxOwnValue], "")) // cut at a character, not holding the rest
		}
	}
	return p
}

// sortedPairs holds the keys of m and their values, sorted by key: one pod, one cachedPod.
func sortedPairs(m map[string]string, keys []string) pairs {
	slices.Sort(keys)
	out := make(pairs, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, word(k), word(m[k]))
	}
	return out
}

func (p pairs) toMap() map[string]string {
	if p == nil {
		return nil
	}
	m := make(map[string]string, len(p)/2)
	for i := 0; i+1 < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}

// podOf reads an object the pod informer hands its handlers: the cache's cachedPod, or a
// *corev1.Pod (a cache without slimPod, a test's). The pod is to be read, never changed.
func podOf(obj any) (*corev1.Pod, bool) {
	switch p := obj.(type) {
	case *corev1.Pod:
		return p, true
	case *cachedPod:
		return p.view(), true
	}
	return nil, false
}

// isHistory reports whether a pod is history: finished, labelled counted (its report was
// folded into status by an earlier pass, which no pass reads again: track settles it), and
// not withdrawn ahead of its instant (settle asks whether such a pod's job ran). Of history
// a pass reads only the metadata and the phase (settle, runstatus.Prune); most jobs' pods
// are history (the history limits keep three succeeded and one failed by default), and a
// kubelet's container statuses with the report were a quarter of what each one held.
func isHistory(pod *corev1.Pod) bool {
	_, ahead := pod.Annotations[runpod.AnnotationWithdrawnAhead]
	return pod.Labels[runpod.LabelCounted] == "true" && runstatus.Finished(pod) && !ahead
}

// heldStatus is what a cachedPod holds of a kubelet's pod status, when it is more than
// the phase (slimPod): what a pass reads (package tracking, runstatus.ResultOf, newsAt and
// stuck, stateOf): the reason and message; the PodScheduled condition (why a pod is not
// scheduled); and of each container's and init container's status its name, state, last
// termination state (the reports, exit codes and waiting reasons) and restart count. The
// other conditions, the IPs, QoS class, images, image and container IDs, resources, volume
// mounts and user a kubelet writes are read by no pass; a history of finished pods (three
// per job by default) kept them all. A pass that comes to read another field must keep it
// here (TestSlimPodStatus asks every reader). It holds them in its own compact types (issue
// 13): a corev1.PodStatus is a 384-byte struct and a ContainerStatus 208, most of it what
// no pass reads, and the pods not yet history are one or two per job.
type heldStatus struct {
	reason, message string
	scheduled       *corev1.PodCondition // the PodScheduled condition's type, status, reason and message; nil when none
	init, main      []heldContainer      // of InitContainerStatuses and ContainerStatuses; nil when none
}

// heldContainer is what a heldStatus keeps of a container's status.
type heldContainer struct {
	name        string
	state, last corev1.ContainerState // a terminated state without its container ID
	restarts    int32
}

func holdStatus(st *corev1.PodStatus) *heldStatus {
	h := &heldStatus{reason: st.Reason, message: st.Message, init: holdContainers(st.InitContainerStatuses), main: holdContainers(st.ContainerStatuses)}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodScheduled {
			h.scheduled = &corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}
	return h
}

func holdContainers(in []corev1.ContainerStatus) []heldContainer {
	if len(in) == 0 {
		return nil
	}
	out := make([]heldContainer, len(in))
	for i, cs := range in {
		out[i] = heldContainer{name: cs.Name, state: holdState(cs.State), last: holdState(cs.LastTerminationState), restarts: cs.RestartCount}
	}
	return out
}

// holdState returns s less a terminated container's ID (a runtime's ID of 77 characters,
// read by no pass).
func holdState(s corev1.ContainerState) corev1.ContainerState {
	if t := s.Terminated; t != nil && t.ContainerID != "" {
		kept := *t
		kept.ContainerID = ""
		s.Terminated = &kept
	}
	return s
}

// status returns the pod status it holds, with phase: its memory shared with the held
// status (to be read, never changed) unless deep.
func (h *heldStatus) status(phase corev1.PodPhase, deep bool) corev1.PodStatus {
	st := corev1.PodStatus{Phase: phase, Reason: h.reason, Message: h.message,
		InitContainerStatuses: containerStatuses(h.init, deep), ContainerStatuses: containerStatuses(h.main, deep)}
	if h.scheduled != nil {
		st.Conditions = []corev1.PodCondition{*h.scheduled} // strings only: a copy is a deep copy
	}
	return st
}

func containerStatuses(in []heldContainer, deep bool) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, c := range in {
		out[i] = corev1.ContainerStatus{Name: c.name, State: c.state, LastTerminationState: c.last, RestartCount: c.restarts}
		if deep {
			c.state.DeepCopyInto(&out[i].State)
			c.last.DeepCopyInto(&out[i].LastTerminationState)
		}
	}
	return out
}

// errNotReadBack: a job's packed body decodes to another job.
var errNotReadBack = errors.New("the packed job does not read back as the job")

// slimJob keeps of a LockedCronJob's labels and annotations only the controller's own
// (ownKeys; no pass reads a job's labels, and its pods' labels come from its template), and
// of its managed fields what the controller reads (issue 13: memory at thousands of jobs;
// they were a quarter of a cached job): which manager last set spec.schedule,
// spec.timeZone or spec.suspend, and when (specChangedAt), and which set the run-request
// annotation (requestedBy). Entries of subresources and entries owning none of those go;
// the others keep their manager, operation and time, and of their field set only those
// fields. The controller writes a LockedCronJob only through its status subresource,
// whose updates take the metadata (managed fields, annotations) from the stored object,
// never from the request, so the stored ones stay whole. It returns a cachedJob, which
// holds the spec, status and managed fields compressed and reads as the job. Anything else passes
// unchanged.
func slimJob(obj any) (any, error) {
	job, ok := obj.(*v1alpha1.LockedCronJob)
	if !ok {
		return obj, nil
	}
	job.ManagedFields = slimManagedFields(job.ManagedFields)
	job.Labels, job.Annotations = ownKeys(job.Labels), ownKeys(job.Annotations)
	shareMeta(&job.ObjectMeta)
	body, err := packJob(job)
	if err == nil {
		// What the API server accepts does not always read back from JSON as Go writes it:
		// metav1.Time writes whole seconds in UTC, so a blackout window's end at
		// 10:00:00.5 would read back as 10:00:00 and let the occurrence at 10:00:00 run
		// inside the window, and a time past the year 9999 in UTC does not parse at all
		// (every reader would fail on it). A body that does not read back as the job is
		// not held.
		back := &v1alpha1.LockedCronJob{}
		if err = unpackJob(body, back); err == nil && !(equality.Semantic.DeepEqual(&back.Spec, &job.Spec) &&
			equality.Semantic.DeepEqual(&back.Status, &job.Status) && equality.Semantic.DeepEqual(back.ManagedFields, job.ManagedFields)) {
			err = errNotReadBack
		}
	}
	if err != nil {
		// Held as decoded: every reader reads a *v1alpha1.LockedCronJob too. It costs the
		// cache about 6 KB more a job (BenchmarkJobHeld), which a type that stops reading
		// back would spend on every job: said at V(1) for each new version of the job.
		logf.Log.WithName("cache").V(1).Info("job held unpacked: its spec, status or managed fields do not read back from JSON",
			"namespace", job.Namespace, "name", job.Name, "resourceVersion", job.ResourceVersion, "reason", err.Error())
		if jsonSize(&job.Spec.Template) > maxHeldJobBody {
			// Held as decoded, its template is not bounded by the compressed size: a
			// template past it uncompressed is not held either (see below).
			job.Spec.Template = corev1.PodTemplateSpec{}
			metav1.SetMetaDataAnnotation(&job.ObjectMeta, annotationTemplateNotHeld, "true")
		}
		return job, nil
	}
	meta := job.ObjectMeta
	meta.ManagedFields = nil // in the body
	held := &cachedJob{
		TypeMeta:    job.TypeMeta,
		ObjectMeta:  meta,
		body:        body,
		rolloutKeys: blackout.IndexKeys(job.Spec.Blackout),
	}
	if len(body) > maxHeldJobBody {
		// A template bounded only by what etcd stores (a large value in it, which does not
		// compress), held for every such job in every replica: a tenant's jobs could
		// exhaust the manager's memory. Held without it, marked (annotationTemplateNotHeld):
		// a pass reads the job whole from the API server (Reconcile).
		slim := *job
		slim.Spec.Template = corev1.PodTemplateSpec{}
		if small, err := packJob(&slim); err == nil {
			held.body, held.templateNotHeld = small, true
		}
	}
	return held, nil
}

// maxHeldJobBody bounds what the cache holds of a job's spec and status, compressed: a
// job over it is held without its template (slimJob). An ordinary job takes about half a
// kilobyte; one whose template takes this much holds tens of kilobytes of text in it.
const maxHeldJobBody = 16 << 10

// annotationTemplateNotHeld marks a job the cache hands out without its template
// (slimJob): not a key of the API's, only of the cache's copies.
const annotationTemplateNotHeld = runpod.ReservedPrefix + "template-not-held"

// ownKeys returns of a label or annotation map only the controller's own keys
// (runpod.ReservedPrefix), m itself when it holds no others. The controller reads no
// other (the run request's annotations on a job; its own labels and annotations on a
// pod), and writes neither from the cache: a pod's patches, computed between two cached
// copies, name only the keys they change, and a job's status update takes its metadata
// from the stored object. The others can be large and are held once per object: a pod
// template's labels and annotations are copied to every pod of its job, and kubectl
// apply's last-applied-configuration annotation is a second copy of the whole job.
func ownKeys(m map[string]string) map[string]string {
	own := 0
	for k := range m {
		if strings.HasPrefix(k, runpod.ReservedPrefix) {
			own++
		}
	}
	if own == len(m) {
		return m
	}
	out := make(map[string]string, own)
	for k, v := range m {
		if strings.HasPrefix(k, runpod.ReservedPrefix) {
			out[k] = v
		}
	}
	return out
}

// fieldSet is what the controller reads of a managed-fields entry's field set: the
// annotations and the top-level spec fields it owns.
type fieldSet struct {
	Metadata struct {
		Annotations map[string]json.RawMessage `json:"f:annotations"`
	} `json:"f:metadata"`
	Spec map[string]json.RawMessage `json:"f:spec"`
}

// ownedFields reads the field set of a main-resource entry; false for a subresource's
// entry, one without a field set, or one that does not parse.
func ownedFields(mf metav1.ManagedFieldsEntry) (fieldSet, bool) {
	var set fieldSet
	if mf.Subresource != "" || mf.FieldsV1 == nil || json.Unmarshal(mf.FieldsV1.Raw, &set) != nil {
		return set, false
	}
	return set, true
}

// readSpecFields are the spec fields whose last change specChangedAt looks for.
var readSpecFields = []string{"f:schedule", "f:timeZone", "f:suspend"}

func slimManagedFields(in []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, mf := range in {
		if mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		set, ok := ownedFields(mf)
		if !ok {
			out = append(out, mf) // not a field set we can read: kept as it is
			continue
		}
		kept := map[string]any{}
		spec := map[string]struct{}{}
		for _, f := range readSpecFields {
			if _, ok := set.Spec[f]; ok {
				spec[f] = struct{}{}
			}
		}
		if len(spec) > 0 {
			kept["f:spec"] = spec
		}
		if _, ok := set.Metadata.Annotations["f:"+v1alpha1.AnnotationRunRequest]; ok {
			kept["f:metadata"] = map[string]any{"f:annotations": map[string]struct{}{"f:" + v1alpha1.AnnotationRunRequest: {}}}
			if len(spec) == 0 && len(set.Spec) > 0 {
				// Whether the request's owner wrote the spec too (createdWithRequest): one
				// of its fields says so.
				spec[slices.Min(slices.Collect(maps.Keys(set.Spec)))] = struct{}{}
				kept["f:spec"] = spec
			}
		}
		if len(kept) == 0 {
			continue
		}
		raw, err := json.Marshal(kept)
		if err != nil {
			out = append(out, mf)
			continue
		}
		mf.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		out = append(out, mf)
	}
	return out
}
