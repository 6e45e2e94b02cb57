package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// The decoder gives every cached object its own copy of every string, and most of a
// cached pod's strings are the same in every pod: the controller's label, annotation and
// finalizer names, its owner's API version and kind, the phase, the reasons a kubelet
// writes, the namespace, the node. sharePodStrings and shareMeta (a job's metadata; the
// cache holds its spec and status packed, cachedJob) make the cached copies of those point
// at one string each (issue 13: memory at thousands of jobs), what
// the field does not change. Only strings from a fixed vocabulary, and namespaces and
// node names (a bounded set, shared), are shared: a unique string (a name, a UID, a
// message) would only grow the table.

// vocabulary holds the strings the cached objects repeat, each once.
var vocabulary = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		runpod.LabelJob, runpod.LabelCounted, runpod.LabelRunRequest, "true",
		runpod.AnnotationScheduledTime, runpod.AnnotationWrappedContainer, runpod.AnnotationWithdrawn,
		runpod.AnnotationWithdrawnAhead, runpod.AnnotationPreparedAhead, runpod.AnnotationRequestedAt, runpod.FinalizerTracking,
		runpod.InitContainerName, "job", v1alpha1.GroupVersion.String(), "LockedCronJob", "v1", "Pod",
		string(corev1.PodPending), string(corev1.PodRunning), string(corev1.PodSucceeded), string(corev1.PodFailed), string(corev1.PodUnknown),
		string(corev1.PodScheduled), string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown),
		"Completed", "Error", "OOMKilled", "ContainerCreating", "PodInitializing", "ErrImagePull", "ImagePullBackOff",
		"CrashLoopBackOff", "CreateContainerConfigError", "Unschedulable", "Evicted", "ContainerStatusUnknown",
	} {
		m[s] = s
	}
	return m
}()

// word returns vocabulary's copy of s, or s.
func word(s string) string {
	if w, ok := vocabulary[s]; ok {
		return w
	}
	return s
}

// places shares namespace and node names. Both sets are bounded by the cluster, but a
// cluster that makes namespaces or nodes without end would grow it: past placesLimit it
// shares only what it has.
var places = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

const placesLimit = 10000

func place(s string) string {
	if s == "" {
		return s
	}
	places.Lock()
	defer places.Unlock()
	if p, ok := places.m[s]; ok {
		return p
	}
	if len(places.m) < placesLimit {
		places.m[s] = s
	}
	return s
}

// shareMap returns m with its keys and values shared where vocabulary has them: a new map
// (a map's keys cannot be replaced in place), or m when it is empty.
func shareMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[word(k)] = word(v)
	}
	return out
}

func shareMeta(m *metav1.ObjectMeta) {
	m.Namespace = place(m.Namespace)
	m.Labels, m.Annotations = shareMap(m.Labels), shareMap(m.Annotations)
	for i := range m.Finalizers {
		m.Finalizers[i] = word(m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.APIVersion, o.Kind = word(o.APIVersion), word(o.Kind)
	}
}

// sharePodStrings shares the repeated strings of a pod slimPod keeps.
func sharePodStrings(pod *corev1.Pod) {
	shareMeta(&pod.ObjectMeta)
	pod.Spec.NodeName = place(pod.Spec.NodeName)
	st := &pod.Status
	st.Phase, st.Reason = corev1.PodPhase(word(string(st.Phase))), word(st.Reason)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Status, c.Reason = corev1.PodConditionType(word(string(c.Type))), corev1.ConditionStatus(word(string(c.Status))), word(c.Reason)
	}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			cs.Name = word(cs.Name)
			shareState(&cs.State)
			shareState(&cs.LastTerminationState)
		}
	}
}

func shareState(s *corev1.ContainerState) {
	if s.Waiting != nil {
		s.Waiting.Reason = word(s.Waiting.Reason)
	}
	if s.Terminated != nil {
		s.Terminated.Reason = word(s.Terminated.Reason)
	}
}
