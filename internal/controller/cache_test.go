package controller

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/schedule"
	"github.com/lockedcron/lockedcron/internal/tracking"
)

// go test ./internal/controller/ -run TestSlimPod

func TestSlimPod(t *testing.T) {
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "j-1", Namespace: "ns", Labels: map[string]string{runpod.LabelJob: "j"},
			Annotations:   map[string]string{runpod.AnnotationScheduledTime: "2026-06-06T10:00:00Z"},
			Finalizers:    []string{runpod.FinalizerTracking},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			RestartPolicy:  corev1.RestartPolicyOnFailure,
			InitContainers: []corev1.Container{{Name: "lockwrap-install", Image: "k8s.local/lockedcron:dev"}},
			Containers:     []corev1.Container{{Name: "job", Image: "busybox", Command: []string{"/lockwrap/lockwrap", "--", "date"}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	slim := cached(t, full.DeepCopy())
	// restartPolicy: whether an ended job container runs again (tracking.Decide).
	if slim.Spec.NodeName != "node-1" || slim.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || len(slim.Spec.Containers) != 0 || len(slim.Spec.InitContainers) != 0 || slim.ManagedFields != nil {
		t.Errorf("slim pod keeps spec %+v, managed fields %v; want only spec.nodeName and spec.restartPolicy", slim.Spec, slim.ManagedFields)
	}
	if slim.Status.Phase != corev1.PodRunning || len(slim.Status.ContainerStatuses) != 1 || slim.Labels[runpod.LabelJob] != "j" ||
		slim.Annotations[runpod.AnnotationScheduledTime] == "" || len(slim.Finalizers) != 1 {
		t.Errorf("slim pod lost what a pass reads: %+v", slim)
	}

	// markCounted's patch, computed between two slim copies, touches labels and
	// finalizers only: never the spec it no longer holds.
	marked := slim.DeepCopy()
	marked.Labels[runpod.LabelCounted] = "true"
	controllerutil.RemoveFinalizer(marked, runpod.FinalizerTracking)
	data, err := client.StrategicMergeFrom(slim).Data(marked)
	if err != nil {
		t.Fatal(err)
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	if _, ok := patch["spec"]; ok || len(patch) != 1 {
		t.Errorf("patch %s: want metadata only", data)
	}

	// A tombstone passes unchanged.
	if got, _ := slimPod("tombstone"); got != "tombstone" {
		t.Errorf("slimPod changed a non-pod: %v", got)
	}
}

// TestSlimPodNamesTheWrappedContainerFromItsSpec: the cached pod holds no containers, so
// a pass reads which container lockwrap wraps (whose status is the report: ResultOf,
// tracking.Started) from its annotation, which whoever may patch the pod can remove or
// point elsewhere (the run was counted missed). The cache holds the name the spec says.
func TestSlimPodNamesTheWrappedContainerFromItsSpec(t *testing.T) {
	for name, annotations := range map[string]map[string]string{
		"as built":           {runpod.AnnotationWrappedContainer: "job"},
		"annotation removed": {},
		"annotation forged":  {runpod.AnnotationWrappedContainer: "sidecar"},
	} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "j-1", Namespace: "ns", Labels: map[string]string{runpod.LabelJob: "j"}, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "sidecar", Image: "envoy", Command: []string{"envoy"}},
				{Name: "job", Image: "busybox", Command: []string{runpod.WrapperPath, "--", "date"}},
			}},
		}
		if got := cached(t, pod).Annotations[runpod.AnnotationWrappedContainer]; got != "job" {
			t.Errorf("%s: the cached pod names %q the wrapped container, want %q (its spec's)", name, got, "job")
		}
	}
}

// TestSlimJob: the cached job keeps of its managed fields what specChangedAt and
// requestedBy read, and they answer on it as on the whole object.
func TestSlimJob(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	entry := func(manager string, when *metav1.Time, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "scheduling.lockedcron.io/v1alpha1",
			Time: when, Subresource: sub, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	full := plainJob("@hourly")
	full.ManagedFields = []metav1.ManagedFieldsEntry{
		// kubectl apply: the whole spec, the schedule among it.
		entry("kubectl-client-side-apply", at(-time.Hour), "", `{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},`+
			`"f:spec":{".":{},"f:lock":{".":{},"f:redis":{".":{},"f:secretRef":{".":{},"f:name":{}}}},"f:schedule":{},"f:timeZone":{},`+
			`"f:jobTemplate":{".":{},"f:spec":{".":{},"f:containers":{},"f:restartPolicy":{}}}}}`),
		// kubectl patch of suspend, later.
		entry("kubectl-patch", at(0), "", `{"f:spec":{"f:suspend":{}}}`),
		// A label only: nothing the controller reads.
		entry("kubectl-label", at(30*time.Minute), "", `{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}`),
		// The manual trigger's annotation.
		entry("kubectl-lockedcron", at(40*time.Minute), "", `{"f:metadata":{"f:annotations":{"f:scheduling.lockedcron.io/run-request":{},"f:scheduling.lockedcron.io/run-request-contention":{}}}}`),
		// The controller's own status writes.
		entry("manager", at(50*time.Minute), "status", `{"f:status":{".":{},"f:observedSchedule":{},"f:schedule":{}}}`),
		// Not JSON: kept as it is (the functions skip what they cannot read).
		entry("odd", at(-2*time.Hour), "", `not json`),
	}
	now := t0.Add(2 * time.Hour)
	obj, err := slimJob(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := heldJob(t, obj)

	if got, want := specChangedAt(slim, now), specChangedAt(full, now); !got.Equal(want) || !want.Equal(t0) {
		t.Errorf("specChangedAt: slim %s, whole %s; want %s (suspend patched)", got, want, t0)
	}
	if got, want := requestedBy(requestOwners(slim)), requestedBy(requestOwners(full)); got != want || want != "kubectl-lockedcron" {
		t.Errorf("requestedBy: slim %q, whole %q; want kubectl-lockedcron", got, want)
	}
	var managers []string
	size := 0
	for _, mf := range slim.ManagedFields {
		managers = append(managers, mf.Manager)
		size += len(mf.FieldsV1.Raw)
	}
	if want := []string{"kubectl-client-side-apply", "kubectl-patch", "kubectl-lockedcron", "odd"}; !slices.Equal(managers, want) {
		t.Errorf("entries kept: %q, want %q (no status, no label-only entry)", managers, want)
	}
	if got := string(slim.ManagedFields[0].FieldsV1.Raw); got != `{"f:spec":{"f:schedule":{},"f:timeZone":{}}}` {
		t.Errorf("apply entry slimmed to %s", got)
	}
	if got := string(slim.ManagedFields[2].FieldsV1.Raw); got != `{"f:metadata":{"f:annotations":{"f:scheduling.lockedcron.io/run-request":{}}}}` {
		t.Errorf("trigger entry slimmed to %s", got)
	}
	if first := slim.ManagedFields[0]; first.Time == nil || !first.Time.Equal(at(-time.Hour)) || first.Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("apply entry lost its time or operation: %+v", first)
	}

	// The spec edited after the trigger: the slim job says so too.
	full.ManagedFields = append(full.ManagedFields, entry("kubectl-edit", at(time.Hour), "", `{"f:spec":{"f:schedule":{}}}`))
	obj, _ = slimJob(full.DeepCopy())
	if got := specChangedAt(heldJob(t, obj), now); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("specChangedAt after the edit: %s, want %s", got, t0.Add(time.Hour))
	}

	if got, _ := slimJob("tombstone"); got != "tombstone" {
		t.Errorf("slimJob changed a non-job: %v", got)
	}
}

// kubeletStatus adds to a pod status what a kubelet writes besides what tracking reads:
// every condition, the IPs, QoS class, and per container its image, IDs, readiness,
// resources, volume mounts and user (the fields of a v1.37 kubelet's pod status).
func kubeletStatus(st corev1.PodStatus, at time.Time) corev1.PodStatus {
	t := metav1.NewTime(at)
	st.HostIP, st.PodIP, st.QOSClass, st.StartTime = "10.0.0.7", "10.244.0.31", corev1.PodQOSBurstable, &t
	st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: "10.0.0.7"}}, []corev1.PodIP{{IP: "10.244.0.31"}}
	st.ObservedGeneration = 1
	scheduled := false
	for _, c := range st.Conditions {
		scheduled = scheduled || c.Type == corev1.PodScheduled
	}
	if !scheduled {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t, ObservedGeneration: 1})
	}
	for _, typ := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: t, ObservedGeneration: 1})
	}
	uid, gid := int64(65532), int64(65532)
	noise := func(list []corev1.ContainerStatus) {
		for i := range list {
			cs := &list[i]
			cs.Image, cs.ImageID = "docker.io/library/busybox:1.36", "docker.io/library/busybox@sha256:768e5c6f5cb6db0794eec98dc7a967f40631746c32232b78a3105fb946f3ab83"
			cs.ContainerID = "containerd://4f1c8a2e9b7d6c5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a"
			for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if term != nil {
					term.ContainerID = cs.ContainerID
				}
			}
			cs.Ready, cs.Started = false, ptr.To(false)
			cs.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}
			cs.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
			cs.VolumeMounts = []corev1.VolumeMountStatus{{Name: "lockwrap", MountPath: "/lockwrap"}, {Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyDisabled)}}
			cs.User = &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: uid, GID: gid, SupplementalGroups: []int64{gid}}}
		}
	}
	noise(st.InitContainerStatuses)
	noise(st.ContainerStatuses)
	return st
}

// TestSlimPodStatus: every function a pass reads a pod's status through answers on the
// cached (slim) pod as on the kubelet's whole one, in each state a run goes through.
func TestSlimPodStatus(t *testing.T) {
	occ := time.Date(2026, 6, 6, 10, 0, 0, 0, time.UTC)
	at := metav1.NewTime(occ.Add(2 * time.Second))
	msg, err := report.Encode(report.Report{Outcome: report.Failed, Occurrence: occ.Format(time.RFC3339), Key: "k", Holder: "h", FencingToken: 7, ExitCode: 3, StartedAt: at.Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	initDone := []corev1.ContainerStatus{{Name: runpod.InitContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: at, FinishedAt: at}}}}
	term := func(code int32, message string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: message, StartedAt: at, FinishedAt: at}
	}
	states := map[string]corev1.PodStatus{
		"unschedulable": {Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}},
		"image pull": {Phase: corev1.PodPending, InitContainerStatuses: initDone, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "busybox:nope"`}}}}},
		"init failed": {Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: runpod.InitContainerName, State: corev1.ContainerState{Terminated: term(1, "")}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}},
		"running": {Phase: corev1.PodRunning, InitContainerStatuses: initDone, ContainerStatuses: []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}}},
		"restarted": {Phase: corev1.PodRunning, InitContainerStatuses: initDone, ContainerStatuses: []corev1.ContainerStatus{{Name: "job", RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}, LastTerminationState: corev1.ContainerState{Terminated: term(3, string(msg))}}}},
		"failed with a report": {Phase: corev1.PodFailed, InitContainerStatuses: initDone, ContainerStatuses: []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Terminated: term(3, string(msg))}}}},
		"evicted": {Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.", InitContainerStatuses: initDone,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Terminated: term(137, "")}}}},
	}
	deadline := 30 * time.Second
	for name, st := range states {
		for _, ahead := range []bool{false, true} {
			whole := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "j-1", Namespace: "ns", CreationTimestamp: metav1.NewTime(occ.Add(-time.Second)),
					Labels:      map[string]string{runpod.LabelJob: "j"},
					Annotations: map[string]string{runpod.AnnotationScheduledTime: occ.Format(time.RFC3339), runpod.AnnotationWrappedContainer: "job"}},
				Status: kubeletStatus(*st.DeepCopy(), at.Time),
			}
			if ahead {
				whole.Annotations[runpod.AnnotationWithdrawnAhead] = "suspended"
			}
			slim := cached(t, whole.DeepCopy())
			terminatedID := false
			for _, cs := range append(slices.Clone(slim.Status.InitContainerStatuses), slim.Status.ContainerStatuses...) {
				for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
					terminatedID = terminatedID || term != nil && term.ContainerID != ""
				}
			}
			if len(slim.Status.Conditions) > 1 || slim.Status.PodIP != "" || slim.Status.QOSClass != "" || terminatedID ||
				slim.Status.ContainerStatuses != nil && (slim.Status.ContainerStatuses[0].ImageID != "" || slim.Status.ContainerStatuses[0].VolumeMounts != nil) {
				t.Errorf("%s: the slim status keeps what no pass reads: %+v", name, slim.Status)
			}
			type answers struct {
				Decisions                    []tracking.Decision
				Started, JobRan, Stuck, News bool
				RunningSince, NewsAt         time.Time
				Attempts                     int32
				Note, Waiting                string
				Result                       runstatus.Result
				Finished, Succeeded          bool
				State                        podState
			}
			ask := func(p *corev1.Pod) answers {
				var a answers
				for _, now := range []time.Time{occ.Add(time.Second), occ.Add(time.Hour + time.Minute)} {
					for _, sd := range []*time.Duration{nil, &deadline} {
						a.Decisions = append(a.Decisions, tracking.Decide(p, occ, tracking.Input{Now: now, StartingDeadline: sd}),
							tracking.Decide(p, occ, tracking.Input{Now: now, StartingDeadline: sd, Blackout: "window nightly"}))
					}
				}
				a.Started, a.JobRan, a.Stuck, a.News = tracking.Started(p), tracking.JobRan(p), stuck(p), hasNews(p)
				a.RunningSince, _ = tracking.RunningSince(p)
				a.NewsAt, _ = newsAt(p)
				a.Attempts, a.Note, a.Waiting = tracking.Attempts(p), tracking.AttemptsNote(p), tracking.WaitingReason(p)
				a.Result, a.Finished, a.Succeeded, a.State = runstatus.ResultOf(p), runstatus.Finished(p), runstatus.Succeeded(p), stateOf(p)
				return a
			}
			if w, s := ask(whole), ask(slim); !reflect.DeepEqual(w, s) {
				t.Errorf("%s (withdrawn ahead %v): a pass reads the slim pod differently:\nwhole %+v\nslim  %+v", name, ahead, w, s)
			}
		}
	}
}

// TestSlimMetadata: the cache keeps of a pod's labels and annotations, and of a job's
// annotations, only the controller's own (runpod.ReservedPrefix). A pod template's labels
// and annotations are copied to every pod of the job, and kubectl apply's
// last-applied-configuration is a second copy of the whole job; no pass reads them. What
// a pass reads of them answers the same on the slim copies.
func TestSlimMetadata(t *testing.T) {
	big := strings.Repeat("x", 4096)
	own := map[string]string{runpod.AnnotationScheduledTime: "2026-06-06T10:00:00Z", runpod.AnnotationWrappedContainer: "job",
		runpod.AnnotationWithdrawnAhead: "suspended", runpod.AnnotationWithdrawn: "blackout", runpod.AnnotationRequestedAt: "2026-06-06T09:59:00Z"}
	ownLabels := map[string]string{runpod.LabelJob: "j", runpod.LabelCounted: "true", runpod.LabelRunRequest: "r1"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-1", Namespace: "ns",
		Labels:      map[string]string{"app": "billing", "team": "a"},
		Annotations: map[string]string{"vault.hashicorp.com/agent-inject-template-config": big, "prometheus.io/scrape": "true"}}}
	maps.Copy(pod.Labels, ownLabels)
	maps.Copy(pod.Annotations, own)
	slim := cached(t, pod.DeepCopy())
	if !maps.Equal(slim.Labels, ownLabels) || !maps.Equal(slim.Annotations, own) {
		t.Errorf("slim pod keeps labels %v and annotations %v; want only the controller's", slim.Labels, slices.Collect(maps.Keys(slim.Annotations)))
	}

	request := map[string]string{v1alpha1.AnnotationRunRequest: "r1", v1alpha1.AnnotationRunContention: v1alpha1.ManualContentionFailFast,
		v1alpha1.AnnotationRunOccurrence: "2026-06-06T10:00:00Z"}
	job := plainJob("0 10 * * *")
	job.Labels = map[string]string{"team": "a", "app.kubernetes.io/name": "billing"}
	job.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": big, "team.example.com/owner": "billing"}
	maps.Copy(job.Annotations, request)
	obj, err := slimJob(job.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slimJ := heldJob(t, obj)
	if !maps.Equal(slimJ.Annotations, request) || len(slimJ.Labels) != 0 {
		t.Errorf("slim job keeps annotations %v, labels %v; want only the run request's annotations, no label", slices.Collect(maps.Keys(slimJ.Annotations)), slimJ.Labels)
	}
	sched, err := schedule.Parse(job.Spec.Schedule, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	w, werr := parseRunRequest(job.Annotations, sched, now, time.Hour)
	s, serr := parseRunRequest(slimJ.Annotations, sched, now, time.Hour)
	if !reflect.DeepEqual(w, s) || (werr == nil) != (serr == nil) {
		t.Errorf("parseRunRequest: whole %+v (%v), slim %+v (%v)", w, werr, s, serr)
	}

	// The run-request predicate: a new request wakes the pass on the slim copies; a new
	// last-applied configuration alone does not (nor did it on the whole job).
	changed := func(mutate func(*v1alpha1.LockedCronJob)) (whole, slim bool) {
		n := job.DeepCopy()
		mutate(n)
		o1, _ := slimJob(job.DeepCopy())
		n1, _ := slimJob(n.DeepCopy())
		return runRequestChanged.Update(crevent.UpdateEvent{ObjectOld: job, ObjectNew: n}),
			runRequestChanged.Update(crevent.UpdateEvent{ObjectOld: o1.(client.Object), ObjectNew: n1.(client.Object)})
	}
	if w, s := changed(func(j *v1alpha1.LockedCronJob) { j.Annotations[v1alpha1.AnnotationRunRequest] = "r2" }); !w || !s {
		t.Errorf("a new run request wakes the pass: whole %v, slim %v; want both", w, s)
	}
	if w, s := changed(func(j *v1alpha1.LockedCronJob) {
		j.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
	}); w || s {
		t.Errorf("a new last-applied configuration wakes the pass: whole %v, slim %v; want neither", w, s)
	}

	// Nothing to drop: the maps are kept as they are.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{runpod.LabelJob: "j"}}}
	if got := cached(t, bare); got.Annotations != nil || !maps.Equal(got.Labels, map[string]string{runpod.LabelJob: "j"}) {
		t.Errorf("slim bare pod: labels %v, annotations %v", got.Labels, got.Annotations)
	}
}

// TestSlimHistoryPod: of a pod already counted and finished (history) the cache keeps only
// the phase of its status, and a pass decides the same on it as on the kubelet's whole pod:
// what it marks, keeps as history, prunes, deletes, sets aside or counts again. Pods that
// are not history (withdrawn ahead, not finished, counted but not yet labelled) keep what
// TestSlimPodStatus asks of them.
func TestSlimHistoryPod(t *testing.T) {
	now := time.Date(2026, 6, 6, 12, 0, 0, 0, time.UTC)
	occ := now.Add(-time.Hour)
	at := metav1.NewTime(occ.Add(time.Second))
	reportOf := func(o report.Outcome, started bool) string {
		r := report.Report{Outcome: o, Occurrence: occ.Format(time.RFC3339), Key: "k", Holder: "h", FencingToken: 7}
		if started {
			r.StartedAt = at.Format(time.RFC3339Nano)
		}
		msg, err := report.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	initDone := []corev1.ContainerStatus{{Name: runpod.InitContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: at, FinishedAt: at}}}}
	ended := func(phase corev1.PodPhase, code int32, msg string) corev1.PodStatus {
		return corev1.PodStatus{Phase: phase, InitContainerStatuses: initDone, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", Message: msg, StartedAt: at, FinishedAt: at}}}}}
	}
	succeeded := ended(corev1.PodSucceeded, 0, reportOf(report.Succeeded, true))
	failed := ended(corev1.PodFailed, 3, reportOf(report.Failed, true))
	notRun := ended(corev1.PodFailed, 0, reportOf(report.SuppressedDuplicate, false))
	running := corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: initDone, ContainerStatuses: []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}}}
	deleted := metav1.NewTime(now.Add(-time.Minute))

	for _, c := range []struct {
		name      string
		occ       time.Time
		status    corev1.PodStatus
		counted   bool // labelled counted
		pending   bool // named in status.countedPods
		finalizer bool
		ahead     bool // withdrawn ahead of its instant
		manual    bool
		deleted   bool
		history   bool // what the cache should take it for
	}{
		{name: "succeeded, marked and released", occ: occ, status: succeeded, counted: true, history: true},
		{name: "failed, marked, finalizer still on", occ: occ, status: failed, counted: true, finalizer: true, history: true},
		{name: "succeeded, being deleted", occ: occ, status: succeeded, counted: true, deleted: true, history: true},
		{name: "a manual run's, succeeded", occ: occ, status: succeeded, counted: true, manual: true, history: true},
		{name: "ran early by the controller's clock", occ: now.Add(time.Minute), status: succeeded, counted: true, history: true},
		{name: "withdrawn ahead, its job ran", occ: occ, status: failed, counted: true, ahead: true},
		{name: "withdrawn ahead, its job did not run", occ: occ, status: notRun, counted: true, ahead: true},
		{name: "counted as lost, still running", occ: occ, status: running, counted: true, finalizer: true},
		{name: "counted, not yet labelled", occ: occ, status: succeeded, pending: true, finalizer: true},
		{name: "finished, not counted", occ: occ, status: failed, finalizer: true},
	} {
		whole := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: runpod.Name("j", c.occ), Namespace: "ns", CreationTimestamp: metav1.NewTime(c.occ.Add(-time.Second)),
				Labels:      map[string]string{runpod.LabelJob: "j"},
				Annotations: map[string]string{runpod.AnnotationScheduledTime: c.occ.Format(time.RFC3339), runpod.AnnotationWrappedContainer: "job"}},
			Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "job", Image: "busybox"}}},
			Status: kubeletStatus(*c.status.DeepCopy(), at.Time),
		}
		if c.counted {
			whole.Labels[runpod.LabelCounted] = "true"
		}
		if c.finalizer {
			whole.Finalizers = []string{runpod.FinalizerTracking}
		}
		if c.ahead {
			whole.Annotations[runpod.AnnotationWithdrawnAhead] = "suspended"
		}
		if c.manual {
			whole.Labels[runpod.LabelRunRequest] = "r1"
		}
		if c.deleted {
			whole.DeletionTimestamp = &deleted
		}
		slim := cached(t, whole.DeepCopy())
		if kept := !reflect.DeepEqual(slim.Status, corev1.PodStatus{Phase: whole.Status.Phase}); kept == c.history {
			t.Errorf("%s: history %v, but the cache keeps of its status %d conditions, %d init and %d container statuses",
				c.name, c.history, len(slim.Status.Conditions), len(slim.Status.InitContainerStatuses), len(slim.Status.ContainerStatuses))
		}

		type decisions struct {
			Mark, History, Doomed, Active, CountedPods, Prune []string
			Aside                                             map[string]asideEntry
			Status                                            v1alpha1.LockedCronJobStatus
		}
		names := func(pods []*corev1.Pod) []string {
			var out []string
			for _, p := range pods {
				out = append(out, p.Name)
			}
			return out
		}
		decide := func(pod *corev1.Pod) decisions {
			job := plainJob("@hourly")
			job.Spec.SuccessfulRunsHistoryLimit, job.Spec.FailedRunsHistoryLimit = ptr.To(int32(0)), ptr.To(int32(0))
			st := &v1alpha1.LockedCronJobStatus{}
			if c.pending {
				st.CountedPods = []string{pod.Name}
			}
			p := &pass{job: job, status: st, now: now}
			p.track([]corev1.Pod{*pod.DeepCopy()})
			return decisions{Mark: names(p.mark), History: names(p.history), Doomed: names(p.doomed), Active: names(p.active),
				CountedPods: p.countedPods, Prune: names(p.prunable()), Aside: p.aside, Status: *p.status}
		}
		if w, s := decide(whole), decide(slim); !reflect.DeepEqual(w, s) {
			t.Errorf("%s: a pass decides differently on the cached pod:\nwhole %+v\nslim  %+v", c.name, w, s)
		}
	}

	// The pass that labels a pod counted is still woken by it (podEvents): the update
	// from a finished pod to history changes its state.
	before := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-1", Labels: map[string]string{runpod.LabelJob: "j"}, Finalizers: []string{runpod.FinalizerTracking}}, Status: *succeeded.DeepCopy()}
	after := before.DeepCopy()
	after.Labels[runpod.LabelCounted], after.Finalizers = "true", nil
	o, _ := slimPod(before)
	n, _ := slimPod(after)
	if !podEvents.Update(crevent.UpdateEvent{ObjectOld: o.(client.Object), ObjectNew: n.(client.Object)}) {
		t.Error("the update that makes a pod history does not wake its job's pass")
	}
}

// TestCachedPodReadsAsAPod: what the cache holds of a pod (cachedPod) is handed out as a
// *corev1.Pod by the cache's readers, which copy it with DeepCopyObject and, for a list,
// set it into a PodList; it is an object the informer's handlers, the owner index and label
// selectors read; and podEvents still lets through only the updates that change what a pass
// reads.
func TestCachedPodReadsAsAPod(t *testing.T) {
	for _, history := range []bool{false, true} {
		pod := finishedPod(t)
		if !history {
			delete(pod.Labels, runpod.LabelCounted)
		}
		// Being deleted, with the tracking finalizer and another's (the rare fields).
		pod.Finalizers = []string{runpod.FinalizerTracking, "example.com/other"}
		pod.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)}
		want := pod.DeepCopy()
		held, err := slimPod(pod.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		obj, ok := held.(client.Object)
		if !ok {
			t.Fatalf("the cache holds %T, not a client.Object", held)
		}

		// Two transforms of one pod hold the same (client-go's watch-list consistency
		// detector compares them), whatever order its maps are read in.
		for range 20 {
			if again, _ := slimPod(pod.DeepCopy()); !reflect.DeepEqual(again, held) {
				t.Fatalf("two transforms of one pod differ:\n%+v\n%+v", again, held)
			}
		}

		// Get copies the held object into the caller's pod; List sets the copies into the list.
		got, ok := obj.DeepCopyObject().(*corev1.Pod)
		if !ok {
			t.Fatalf("a reader is handed %T", obj.DeepCopyObject())
		}
		var list corev1.PodList
		if err := apimeta.SetList(&list, []kruntime.Object{obj.DeepCopyObject()}); err != nil {
			t.Fatalf("a list of cached pods: %v", err)
		}
		if len(list.Items) != 1 || !reflect.DeepEqual(&list.Items[0], got) {
			t.Errorf("the listed pod differs from the pod a Get hands out:\n%+v\n%+v", list.Items, got)
		}
		if got.Name != want.Name || got.UID != want.UID || got.Spec.NodeName != want.Spec.NodeName || got.Status.Phase != want.Status.Phase ||
			!maps.Equal(got.Labels, want.Labels) || !reflect.DeepEqual(got.OwnerReferences, want.OwnerReferences) {
			t.Errorf("history %v: a reader is handed %+v; want the metadata, node and phase of %+v", history, got, want)
		}
		if r := runstatus.ResultOf(got); !history && (r.Invalid != nil || r.Report.Outcome != report.Succeeded) {
			t.Errorf("a pod not yet counted is handed out without its report: %+v", r)
		}

		if !slices.Equal(got.Finalizers, want.Finalizers) || !got.DeletionTimestamp.Equal(want.DeletionTimestamp) {
			t.Errorf("history %v: finalizers %v, deletion %v; want %v, %v", history, got.Finalizers, got.DeletionTimestamp, want.Finalizers, want.DeletionTimestamp)
		}

		// A reader's copy is its own: changing it leaves the cache as it was
		// (controllerutil.RemoveFinalizer edits the finalizers in place).
		got.Labels[runpod.LabelCounted] = "changed"
		got.Status.Phase = corev1.PodFailed
		got.Finalizers[0] = "changed"
		got.DeletionTimestamp.Time = got.DeletionTimestamp.Add(time.Hour)
		if !history {
			got.Status.ContainerStatuses[0].State.Terminated.Message = "changed"
			got.Status.InitContainerStatuses[0].State.Terminated.ExitCode = 9
		}
		if again := obj.DeepCopyObject().(*corev1.Pod); again.Labels[runpod.LabelCounted] == "changed" || again.Status.Phase != corev1.PodSucceeded ||
			again.Finalizers[0] != runpod.FinalizerTracking || !again.DeletionTimestamp.Equal(want.DeletionTimestamp) ||
			!history && (again.Status.ContainerStatuses[0].State.Terminated.Message == "changed" || again.Status.InitContainerStatuses[0].State.Terminated.ExitCode == 9) {
			t.Errorf("changing a reader's copy changed the cached pod: %+v", again)
		}

		// The owner index and the owner watch read its controller; label selectors its labels.
		if owner := metav1.GetControllerOf(obj); owner == nil || owner.Name != "nightly-report" {
			t.Errorf("controller of the cached pod: %+v", owner)
		}
		m, err := apimeta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		if sel := labels.SelectorFromSet(labels.Set{runpod.LabelJob: "nightly-report"}); !sel.Matches(labels.Set(m.GetLabels())) {
			t.Errorf("a List's selector %s does not match the cached pod's labels %v", sel, m.GetLabels())
		}
		if !maps.Equal(m.GetLabels(), want.Labels) || !maps.Equal(m.GetAnnotations(), want.Annotations) {
			t.Errorf("the cached pod's labels %v and annotations %v; want %v and %v", m.GetLabels(), m.GetAnnotations(), want.Labels, want.Annotations)
		}

		// podEvents: an update that changes nothing a pass reads (a kubelet's status write of
		// a field slimPod drops) is filtered; a deletion is let through.
		live := pod.DeepCopy()
		live.DeletionTimestamp = nil
		old, _ := slimPod(live.DeepCopy())
		bumped := live.DeepCopy()
		bumped.ResourceVersion = "123457"
		bumped.Status.PodIP = "10.244.0.32"
		newer, _ := slimPod(bumped.DeepCopy())
		if podEvents.Update(crevent.UpdateEvent{ObjectOld: old.(client.Object), ObjectNew: newer.(client.Object)}) {
			t.Errorf("history %v: an update that changes nothing a pass reads wakes the pass", history)
		}
		bumped.DeletionTimestamp = &metav1.Time{Time: t0}
		deleted, _ := slimPod(bumped.DeepCopy())
		if !podEvents.Update(crevent.UpdateEvent{ObjectOld: old.(client.Object), ObjectNew: deleted.(client.Object)}) {
			t.Errorf("history %v: the pod's deletion does not wake the pass", history)
		}
	}
}

// BenchmarkPodHeld: the bytes the cache holds per finished pod, as a kubelet writes it,
// decoded whole and after slimPod, before and after it is counted (history)
// (go test ./internal/controller/ -run '^$' -bench PodHeld).
func BenchmarkPodHeld(b *testing.B) {
	pod := finishedPod(b)
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	// The same pod before the pass that counts it labels it (not history yet).
	uncounted := pod.DeepCopy()
	delete(uncounted.Labels, runpod.LabelCounted)
	rawUncounted, err := json.Marshal(uncounted)
	if err != nil {
		b.Fatal(err)
	}
	// Pods come four to a job (the default history limits keep three succeeded and one
	// failed), each job's with its own owner: what the cache shares per job is counted.
	const n, perJob = 2000, 4
	slim := func(p *corev1.Pod) any { o, _ := slimPod(p); return o }
	for _, tc := range []struct {
		name      string
		raw       []byte
		transform func(*corev1.Pod) any
	}{
		{"decoded", raw, func(p *corev1.Pod) any { return p }},
		{"slimPod/finished", rawUncounted, slim},
		{"slimPod/history", raw, slim},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				held := make([]any, n)
				before := heapInUse()
				for i := range held {
					var p corev1.Pod
					if err := json.Unmarshal(tc.raw, &p); err != nil {
						b.Fatal(err)
					}
					job := fmt.Sprintf("nightly-report-%04d", i/perJob)
					p.Labels[runpod.LabelJob], p.OwnerReferences[0].Name = job, strings.Clone(job)
					p.OwnerReferences[0].UID = types.UID(fmt.Sprintf("5d0f2c3e-1111-4c43-9a43-7c1f2d9e%04d", i/perJob))
					held[i] = tc.transform(&p)
				}
				b.ReportMetric(float64(heapInUse()-before)/n, "B-held/pod")
				runtime.KeepAlive(held)
			}
		})
	}
}

// TestCachedJobReadsAsAJob: the cache holds a job's spec and status packed (cachedJob);
// what its readers are handed is the job as the API served it (less what slimJob drops),
// a copy of their own; and what is handed the held object itself (the job watch's
// predicates, the rollout index) reads it as the job too.
func TestCachedJobReadsAsAJob(t *testing.T) {
	job := plainJob("0 2 * * *")
	job.Generation, job.ResourceVersion, job.UID = 3, "4711", "5d0f2c3e-1111-4c43-9a43-7c1f2d9e5a11"
	job.Labels = map[string]string{"team": "billing"}
	job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "r1", "team.example.com/owner": "billing"}
	job.Spec.Lock.Key = "ledger"
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "api"},
		{Kind: v1alpha1.KindStatefulSet, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "job", Image: "registry.example.com/ledger:1.4", Command: []string{"/bin/reconcile"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}
	job.Status = steadyStatus(job, t0)
	at := metav1.NewTime(t0)
	job.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: v1alpha1.GroupVersion.String(), Time: &at,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:schedule":{},"f:timeZone":{}}}`)}},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: v1alpha1.GroupVersion.String(), Time: &at,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + v1alpha1.AnnotationRunRequest + `":{}}}}`)}},
	}
	// As the API serves it: decoded from JSON (whole seconds, local times).
	raw, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	served := &v1alpha1.LockedCronJob{}
	if err := json.Unmarshal(raw, served); err != nil {
		t.Fatal(err)
	}
	want := served.DeepCopy()
	want.Labels, want.Annotations = ownKeys(want.Labels), ownKeys(want.Annotations)
	if want.ManagedFields = slimManagedFields(want.ManagedFields); len(want.ManagedFields) != 2 {
		t.Fatalf("the job's managed fields are what slimManagedFields keeps whole: %+v", want.ManagedFields)
	}

	held, err := slimJob(served.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	obj, ok := held.(*cachedJob)
	if !ok {
		t.Fatalf("the cache holds %T, not a cachedJob", held)
	}
	if again, _ := slimJob(served.DeepCopy()); !reflect.DeepEqual(again, held) {
		t.Errorf("two transforms of one job differ") // the watch-list consistency detector compares them
	}

	if obj.ManagedFields != nil {
		t.Errorf("the cached job holds its managed fields beside its packed body: %+v", obj.ManagedFields)
	}

	// Get copies the held object into the caller's job; List sets the copies into the list.
	got := heldJob(t, obj)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("a reader is handed\n%+v\nwant\n%+v", got, want)
	}
	var list v1alpha1.LockedCronJobList
	if err := apimeta.SetList(&list, []kruntime.Object{obj.DeepCopyObject()}); err != nil {
		t.Fatalf("a list of cached jobs: %v", err)
	}
	if len(list.Items) != 1 || !equality.Semantic.DeepEqual(&list.Items[0], want) {
		t.Errorf("the listed job differs from the job:\n%+v", list.Items)
	}

	// A reader's copy is its own.
	got.Status.Recent[0].Outcome = "changed"
	got.Spec.Template.Spec.Containers[0].Image = "changed"
	got.Annotations[v1alpha1.AnnotationRunRequest] = "changed"
	if again := heldJob(t, obj); !equality.Semantic.DeepEqual(again, want) {
		t.Errorf("changing a reader's copy changed the cached job: %+v", again)
	}

	// The rollout index and the job watch's predicates, handed the held object.
	if keys, wantKeys := rolloutRefKeys(obj), rolloutRefKeys(want); !slices.Equal(keys, wantKeys) || len(keys) != 2 {
		t.Errorf("rollout index of the cached job: %q, of the job %q", keys, wantKeys)
	}
	edited := served.DeepCopy()
	edited.Generation++
	edited.Annotations[v1alpha1.AnnotationRunRequest] = "r2"
	newer, _ := slimJob(edited)
	update := crevent.UpdateEvent{ObjectOld: obj, ObjectNew: newer.(client.Object)}
	if !(predicate.GenerationChangedPredicate{}).Update(update) || !runRequestChanged.Update(update) {
		t.Errorf("a spec edit and a run request on the cached job do not wake the pass")
	}
	if !reflect.DeepEqual(obj.GetAnnotations(), want.Annotations) || obj.GetNamespace() != "ns" || obj.GetName() != "j" {
		t.Errorf("the cached job's metadata: %+v", obj.ObjectMeta)
	}
}

// slimServed is the job the API server serves as raw, and what the cache holds of it.
func slimServed(t *testing.T, raw string) (*v1alpha1.LockedCronJob, any) {
	t.Helper()
	var job v1alpha1.LockedCronJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		t.Fatal(err)
	}
	held, err := slimJob(job.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return &job, held
}

// TestSlimJobKeepsWhatDoesNotReadBack: a job whose JSON, as Go writes it again, does not
// decode (a time the API accepts in a zone west of UTC, past the year 9999 in UTC, which
// anyone who may write the status subresource can store) is held as decoded: its readers
// and the rollout index read it, where a packed copy would panic on every read.
func TestSlimJobKeepsWhatDoesNotReadBack(t *testing.T) {
	raw := `{"apiVersion":"scheduling.lockedcron.io/v1alpha1","kind":"LockedCronJob","metadata":{"namespace":"ns","name":"far"},` +
		`"spec":{"schedule":"@daily","blackout":{"rollouts":[{"kind":"Deployment","name":"api"}]}},` +
		`"status":{"lastScheduleTime":"9999-12-31T23:00:00-05:00"}}`
	job, held := slimServed(t, raw)
	var got *v1alpha1.LockedCronJob
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("reading the cached job panics: %v", r)
			}
		}()
		got = heldJob(t, held)
	}()
	if got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Equal(job.Status.LastScheduleTime) {
		t.Errorf("lastScheduleTime read back as %v, want %v", got.Status.LastScheduleTime, job.Status.LastScheduleTime)
	}
	if keys := rolloutRefKeys(held.(client.Object)); !slices.Equal(keys, []string{"Deployment/api"}) {
		t.Errorf("rollout index of the held job: %q", keys)
	}
}

// TestSlimJobKeepsSubSecondTimes: a job whose times have fractions of a second (the API
// server stores a blackout window's end at 10:00:00.5 as written) is read from the cache
// with them. A packed copy, written again as metav1.Time writes (whole seconds), read the
// end back as 10:00:00, and the occurrence at 10:00:00, inside the window the user wrote,
// ran.
func TestSlimJobKeepsSubSecondTimes(t *testing.T) {
	raw := `{"apiVersion":"scheduling.lockedcron.io/v1alpha1","kind":"LockedCronJob","metadata":{"namespace":"ns","name":"freeze"},` +
		`"spec":{"schedule":"0 0 10 * * *","timeZone":"UTC","blackout":{"windows":[` +
		`{"name":"freeze","start":"2026-12-04T09:00:00Z","end":"2026-12-04T10:00:00.5Z"}]}}}`
	_, held := slimServed(t, raw)
	got := heldJob(t, held)
	end := time.Date(2026, 12, 4, 10, 0, 0, 5e8, time.UTC)
	if w := got.Spec.Blackout.Windows[0]; w.End == nil || !w.End.Time.Equal(end) {
		t.Fatalf("the window's end read back as %v, want %s", w.End, end.Format(time.RFC3339Nano))
	}
	rules, err := blackout.Compile(got.Spec.Blackout, got.Spec.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	if occ := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC); !rules.At(occ, nil).Blocked() {
		t.Errorf("the occurrence %s, inside the window that ends %s, is not blocked", occ.Format(time.RFC3339), end.Format(time.RFC3339Nano))
	}
}

// TestOwnerRequest: a pod's event wakes the pass of the LockedCronJob that controls it, in
// the pod's namespace, read from the held object; a pod another kind or group controls, or
// that a job owns without controlling, wakes none.
func TestOwnerRequest(t *testing.T) {
	held := func(mutate func(*metav1.OwnerReference)) client.Object {
		pod := finishedPod(t)
		mutate(&pod.OwnerReferences[0])
		obj, err := slimPod(pod)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(client.Object)
	}
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "nightly-report"}}}
	// The owner index keys the pod under its namespace and job (ownerIndexName), once.
	wantKeys := []string{"team-a/nightly-report"}
	second := func() *corev1.Pod { // another owner first, the job's reference second
		pod := finishedPod(t)
		pod.OwnerReferences = append([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u"}}, pod.OwnerReferences...)
		return pod
	}
	twoOwners, _ := slimPod(second())
	// A reference names its owner's group and kind; its version is whichever the writer
	// used (as for controller-runtime's Owns and the garbage collector): a pod made by a
	// manager serving another version of LockedCronJob is the job's all the same.
	otherVersion := func(o *metav1.OwnerReference) { o.APIVersion = v1alpha1.GroupVersion.Group + "/v1" }
	podOtherVersion := finishedPod(t)
	otherVersion(&podOtherVersion.OwnerReferences[0])
	for what, obj := range map[string]client.Object{"the cache's pod": held(func(*metav1.OwnerReference) {}), "a pod": finishedPod(t),
		"the cache's pod with two owners":                   twoOwners.(client.Object),
		"the cache's pod, its reference in another version": held(otherVersion), "a pod, its reference in another version": podOtherVersion} {
		if got := ownerRequest(context.Background(), obj); !reflect.DeepEqual(got, want) {
			t.Errorf("%s the job controls wakes %v, want %v", what, got, want)
		}
		if keys, err := ownerIndexKeys(obj); err != nil || !slices.Equal(keys, wantKeys) {
			t.Errorf("%s the job controls: owner index keys %q (%v), want %q", what, keys, err, wantKeys)
		}
	}
	for what, mutate := range map[string]func(*metav1.OwnerReference){
		"a Job":                         func(o *metav1.OwnerReference) { o.APIVersion, o.Kind = "batch/v1", "Job" },
		"another group's LockedCronJob": func(o *metav1.OwnerReference) { o.APIVersion = "example.com/v1" },
		"a group named like the job's":  func(o *metav1.OwnerReference) { o.APIVersion = "x" + v1alpha1.GroupVersion.String() },
		"a group the job's is a prefix of": func(o *metav1.OwnerReference) {
			o.APIVersion = v1alpha1.GroupVersion.Group + ".example.com/" + v1alpha1.GroupVersion.Version
		},
		"the core group's LockedCronJob": func(o *metav1.OwnerReference) { o.APIVersion = "v1" },
		"an owner, not the controller":   func(o *metav1.OwnerReference) { o.Controller = nil },
		"an owner, controller false":     func(o *metav1.OwnerReference) { o.Controller = ptr.To(false) },
	} {
		if got := ownerRequest(context.Background(), held(mutate)); got != nil {
			t.Errorf("a pod controlled by %s wakes %v, want none", what, got)
		}
		if keys, err := ownerIndexKeys(held(mutate)); err != nil || keys != nil {
			t.Errorf("a pod controlled by %s: owner index keys %q (%v), want none", what, keys, err)
		}
	}
}

// finishedPod is a finished pod of the controller's, its job's report in its status as a
// kubelet writes it, labelled counted.
func finishedPod(tb testing.TB) *corev1.Pod {
	occ := time.Date(2026, 6, 6, 10, 0, 0, 0, time.UTC)
	msg, err := report.Encode(report.Report{Outcome: report.Succeeded, Occurrence: occ.Format(time.RFC3339), Key: "team-a/nightly-report", Holder: "team-a/nightly-report-29676960/4f1c8a2e", FencingToken: 7, StartedAt: occ.Format(time.RFC3339Nano)})
	if err != nil {
		tb.Fatal(err)
	}
	at := metav1.NewTime(occ)
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-report-29676960", Namespace: "team-a", UID: "0c3b0c4e-5b3a-4c43-9a43-7c1f2d9e5a11", ResourceVersion: "123456",
			CreationTimestamp: at, Labels: map[string]string{runpod.LabelJob: "nightly-report", runpod.LabelCounted: "true"},
			Annotations:     map[string]string{runpod.AnnotationScheduledTime: occ.Format(time.RFC3339), runpod.AnnotationWrappedContainer: "job"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "nightly-report", UID: "5d0f2c3e-1111-4c43-9a43-7c1f2d9e5a11", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}}},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{Name: runpod.InitContainerName, Image: "k8s.local/lockedcron:dev", Command: []string{"/lockwrap", "install", "/lockwrap-bin"}}},
			Containers: []corev1.Container{{Name: "job", Image: "docker.io/library/busybox:1.36", Command: []string{"/lockwrap-bin/lockwrap", "--", "sh", "-c", "date"},
				Env: []corev1.EnvVar{{Name: "LOCKWRAP_REDIS_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: "url"}}}}}}},
		Status: kubeletStatus(corev1.PodStatus{Phase: corev1.PodSucceeded,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: runpod.InitContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: at, FinishedAt: at}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: string(msg), StartedAt: at, FinishedAt: at}}}},
		}, occ),
	}
	return pod
}

// cached returns what the cache's readers (Get, List) hand out for pod: slimPod's
// object, copied as they copy it (cachedPod).
func cached(tb testing.TB, pod *corev1.Pod) *corev1.Pod {
	tb.Helper()
	obj, err := slimPod(pod)
	if err != nil {
		tb.Fatal(err)
	}
	p, ok := obj.(client.Object).DeepCopyObject().(*corev1.Pod)
	if !ok {
		tb.Fatalf("the cache hands out %T for a pod", obj.(client.Object).DeepCopyObject())
	}
	return p
}

// heldJob returns what the cache's readers hand out for a job slimJob holds as obj.
func heldJob(tb testing.TB, obj any) *v1alpha1.LockedCronJob {
	tb.Helper()
	j, ok := obj.(client.Object).DeepCopyObject().(*v1alpha1.LockedCronJob)
	if !ok {
		tb.Fatalf("the cache hands out %T for a job", obj.(client.Object).DeepCopyObject())
	}
	return j
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkJobHeld: the bytes the cache holds per LockedCronJob, the README's job as
// kubectl apply stores it (its last-applied-configuration annotation and managed fields)
// with the status of a job that has run a while (steadyStatus), decoded whole and after
// slimJob (go test ./internal/controller/ -run '^$' -bench JobHeld).
func BenchmarkJobHeld(b *testing.B) {
	job := &v1alpha1.LockedCronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "reconcile-ledger", Namespace: "billing", Labels: map[string]string{ // as a Helm chart sets them
			"app.kubernetes.io/name": "ledger", "app.kubernetes.io/instance": "ledger-prod", "app.kubernetes.io/managed-by": "Helm",
			"app.kubernetes.io/component": "reconcile", "helm.sh/chart": "ledger-1.4.2"}},
		Spec: v1alpha1.LockedCronJobSpec{Schedule: "0 2 * * *", TimeZone: "Europe/Berlin", StartingDeadlineSeconds: ptr.To(int64(300)),
			Lock: v1alpha1.LockSpec{Key: "reconcile-ledger", TTL: &metav1.Duration{Duration: 30 * time.Second},
				Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}},
			Contention: v1alpha1.ContentionSpec{Policy: "Skip"},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "job", Image: "registry.example.com/ledger:1.4", Command: []string{"/bin/reconcile", "--all"}}}}}},
	}
	applied, err := json.Marshal(job)
	if err != nil {
		b.Fatal(err)
	}
	job.UID, job.ResourceVersion, job.Generation, job.CreationTimestamp = "5d0f2c3e-1111-4c43-9a43-7c1f2d9e5a11", "123456", 1, metav1.NewTime(t0)
	job.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(applied) + "\n"}
	job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: job.APIVersion,
		Time: &job.CreationTimestamp, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},` +
			`"f:spec":{".":{},"f:contention":{".":{},"f:policy":{}},"f:lock":{".":{},"f:key":{},"f:redis":{".":{},"f:secretRef":{".":{},"f:name":{}}},"f:ttl":{}},` +
			`"f:schedule":{},"f:startingDeadlineSeconds":{},"f:template":{".":{},"f:spec":{".":{},"f:containers":{},"f:restartPolicy":{}}},"f:timeZone":{}}}`)}}}
	job.Status = steadyStatus(job, t0)
	raw, err := json.Marshal(job)
	if err != nil {
		b.Fatal(err)
	}
	const n = 2000
	for _, tc := range []struct {
		name      string
		transform func(*v1alpha1.LockedCronJob) any
	}{
		{"decoded", func(j *v1alpha1.LockedCronJob) any { return j }},
		{"slimJob", func(j *v1alpha1.LockedCronJob) any {
			o, _ := slimJob(j)
			return o
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				held := make([]any, n)
				before := heapInUse()
				for i := range held {
					var j v1alpha1.LockedCronJob
					if err := json.Unmarshal(raw, &j); err != nil {
						b.Fatal(err)
					}
					held[i] = tc.transform(&j)
				}
				b.ReportMetric(float64(heapInUse()-before)/n, "B-held/job")
				runtime.KeepAlive(held)
			}
		})
	}
}

// BenchmarkJobRead: what a pass pays to read a cached job (a Get's copy) and the cache to
// take in a new version of it (the transform), the README's job with steadyStatus, held
// whole against held packed (cachedJob)
// (go test ./internal/controller/ -run '^$' -bench JobRead).
func BenchmarkJobRead(b *testing.B) {
	job := plainJob("0 2 * * *")
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "job", Image: "registry.example.com/ledger:1.4", Command: []string{"/bin/reconcile", "--all"}}}
	job.Status = steadyStatus(job, t0)
	held, err := slimJob(job.DeepCopy())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("get/whole", func(b *testing.B) {
		for b.Loop() {
			_ = job.DeepCopyObject()
		}
	})
	b.Run("get/cachedJob", func(b *testing.B) {
		obj := held.(client.Object)
		for b.Loop() {
			_ = obj.DeepCopyObject()
		}
	})
	b.Run("transform/cachedJob", func(b *testing.B) {
		for b.Loop() {
			if _, err := slimJob(job.DeepCopy()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// steadyStatus is the status of a daily job that has run a while, as the controller
// writes it: its conditions, ten recent runs, one active, five upcoming occurrences.
func steadyStatus(job *v1alpha1.LockedCronJob, now time.Time) v1alpha1.LockedCronJobStatus {
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	cond := func(t, r, m string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: r, Message: m, LastTransitionTime: *at(-72 * time.Hour), ObservedGeneration: 1}
	}
	st := v1alpha1.LockedCronJobStatus{ObservedGeneration: 1, LastScheduleTime: at(0), LastSuccessfulTime: at(-24 * time.Hour), NextScheduleTime: at(24 * time.Hour),
		ActiveCount: 1, LockKey: job.Namespace + "/" + job.Spec.Lock.Key,
		Conditions: []metav1.Condition{
			cond(ConditionReady, ReasonScheduled, "next occurrence 2026-06-07T02:00:00+02:00"),
			cond(ConditionLockBackendReady, ReasonRedisReachable, "redis at redis.billing.svc:6379 reachable"),
			{Type: ConditionBlackout, Status: metav1.ConditionFalse, Reason: blackout.ReasonNoBlackout, Message: "no window open, no rollout", LastTransitionTime: *at(-72 * time.Hour), ObservedGeneration: 1},
		},
		Active:      []corev1.ObjectReference{{Kind: "Pod", APIVersion: "v1", Namespace: job.Namespace, Name: runpod.Name(job.Name, now), UID: "0c3b0c4e-5b3a-4c43-9a43-7c1f2d9e5a11"}},
		LastHolder:  &v1alpha1.Holder{Identity: runpod.Name(job.Name, now) + "/1/4f1c8a2e9b7d6c5a", FencingToken: 41, Occurrence: at(0), AcquiredAt: at(time.Second)},
		LastSuccess: &v1alpha1.LastSuccess{Occurrence: at(-24 * time.Hour), FinishedAt: at(-23 * time.Hour), FencingToken: 40, Holder: runpod.Name(job.Name, now.Add(-24*time.Hour)) + "/1/9b7d6c5a4f1c8a2e"},
		Counters:    v1alpha1.Counters{Runs: 40, Succeeded: 40},
	}
	for i := range 10 {
		occ := now.Add(-time.Duration(i+1) * 24 * time.Hour)
		st.Recent = append(st.Recent, v1alpha1.RunRecord{Occurrence: metav1.NewTime(occ), Outcome: string(report.Succeeded), Pod: runpod.Name(job.Name, occ),
			Holder: runpod.Name(job.Name, occ) + "/1/4f1c8a2e9b7d6c5a", FencingToken: int64(40 - i), Duration: &metav1.Duration{Duration: 47 * time.Minute}, Trigger: v1alpha1.TriggerScheduled})
	}
	for i := range 5 {
		st.Upcoming = append(st.Upcoming, v1alpha1.UpcomingOccurrence{Time: *at(time.Duration(i+1) * 24 * time.Hour)})
	}
	return st
}

// TestSlimSharesRepeatedStrings: the cache's copies of two pods (and of two jobs),
// decoded apart, hold one copy of the strings every pod repeats (the controller's label,
// annotation and finalizer names, the owner's kind, the namespace, the node, the phase),
// and two pods of one job one copy of its owner reference and name; sharing them changes
// no value.
func TestSlimSharesRepeatedStrings(t *testing.T) {
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: two cached copies hold %q twice", what, x)
		}
	}
	key := func(m map[string]string, k string) string {
		for mk := range m {
			if mk == k {
				return mk
			}
		}
		t.Fatalf("no key %s in %v", k, m)
		return ""
	}

	pod := finishedPod(t)
	delete(pod.Labels, runpod.LabelCounted) // not history: slimPod keeps its container statuses
	pod.Finalizers = []string{runpod.FinalizerTracking}
	heldPod := func(obj any) (any, error) { // the cachedPod's own memory (view), not a reader's copy
		o, err := slimPod(obj)
		p, _ := podOf(o)
		return p, err
	}
	pods := cachedTwice(t, pod, sharePodStrings, heldPod)
	a, b := pods[0], pods[1]
	same("namespace", a.Namespace, b.Namespace)
	same("node", a.Spec.NodeName, b.Spec.NodeName)
	same("label name", key(a.Labels, runpod.LabelJob), key(b.Labels, runpod.LabelJob))
	same("annotation name", key(a.Annotations, runpod.AnnotationScheduledTime), key(b.Annotations, runpod.AnnotationScheduledTime))
	same("finalizer", a.Finalizers[0], b.Finalizers[0])
	same("owner API version", a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion)
	same("owner kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind)
	same("owner name", a.OwnerReferences[0].Name, b.OwnerReferences[0].Name)
	same("owner UID", string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID))
	same("job label's value and owner name", a.Labels[runpod.LabelJob], b.OwnerReferences[0].Name)
	same("phase", string(a.Status.Phase), string(b.Status.Phase))
	same("container", a.Status.ContainerStatuses[0].Name, b.Status.ContainerStatuses[0].Name)
	same("termination reason", a.Status.ContainerStatuses[0].State.Terminated.Reason, b.Status.ContainerStatuses[0].State.Terminated.Reason)

	job := plainJob("@daily")
	job.Namespace, job.Name = "billing", "ledger"
	job.Status = steadyStatus(job, t0)
	heldMeta := func(obj any) (any, error) { // the cachedJob's metadata (its status is packed)
		o, err := slimJob(obj)
		return &v1alpha1.LockedCronJob{ObjectMeta: o.(*cachedJob).ObjectMeta}, err
	}
	jobs := cachedTwice(t, job, func(j *v1alpha1.LockedCronJob) { shareMeta(&j.ObjectMeta) }, heldMeta)
	same("job's namespace", jobs[0].Namespace, jobs[1].Namespace)
}

// cachedTwice decodes obj twice, apart, as the cache does each object it is sent, and
// transforms each with slim; it fails t if share changes any value of a decoded copy.
func cachedTwice[T any, P interface {
	*T
	DeepCopy() P
}](t *testing.T, obj P, share func(P), slim func(any) (any, error)) [2]P {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]P
	for i := range out {
		decoded := P(new(T))
		if err := json.Unmarshal(raw, decoded); err != nil {
			t.Fatal(err)
		}
		shared := decoded.DeepCopy()
		share(shared)
		if !reflect.DeepEqual(shared, decoded) {
			t.Fatalf("sharing changed a value:\n%+v\nwant %+v", shared, decoded)
		}
		o, err := slim(decoded)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = o.(P)
	}
	return out
}

// BenchmarkOwnerIndexHeld: the bytes a client-go indexer holds per pod for 20,000 pods,
// four to a job in ten namespaces, with the namespace index the cache always has, and the
// owner index as ownerIndexKeys keys it (once a pod) or as controller-runtime's IndexField
// keyed it (twice: also under "__all_namespaces/")
// (go test ./internal/controller/ -run '^$' -bench OwnerIndexHeld -benchtime 1x).
func BenchmarkOwnerIndexHeld(b *testing.B) {
	const n, perJob = 20000, 4
	fieldIndexKeys := func(obj any) ([]string, error) {
		keys, err := ownerIndexKeys(obj)
		if len(keys) == 1 {
			_, name, _ := strings.Cut(keys[0], "/")
			keys = append(keys, "__all_namespaces/"+name)
		}
		return keys, err
	}
	for _, tc := range []struct {
		name  string
		owner toolscache.IndexFunc
	}{{"no owner index", nil}, {"ownerIndexKeys", ownerIndexKeys}, {"IndexField's two keys", fieldIndexKeys}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				pods := make([]any, n)
				for i := range pods {
					job := fmt.Sprintf("job-%05d", i/perJob)
					pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", (i/perJob)%10), Name: fmt.Sprintf("%s-%08d", job, i),
						OwnerReferences: []metav1.OwnerReference{{APIVersion: jobAPIVersion, Kind: jobKind, Name: job, UID: "u", Controller: ptr.To(true)}}}}
					pods[i], _ = slimPod(pod)
				}
				indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
				if tc.owner != nil {
					indexers[ownerIndexName] = tc.owner
				}
				before := heapInUse()
				idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
				for _, p := range pods {
					if err := idx.Add(p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(heapInUse()-before)/n, "B-held/pod")
				runtime.KeepAlive(idx)
			}
		})
	}
}

// TestSlimPodHoldsOnlyTheControllersKeys: the cache holds of a pod's labels and
// annotations only the keys the controller writes, their values bounded. Whoever may
// patch the pod could add any key under the reserved prefix, 256 KiB each pod, held in
// the manager's memory for as long as the pod lives.
func TestSlimPodHoldsOnlyTheControllersKeys(t *testing.T) {
	big := "x" + strings.Repeat("é", 100<<10) // two bytes each: 1 KiB ends inside one
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-1", Namespace: "ns",
		Labels: map[string]string{runpod.LabelJob: "j", runpod.ReservedPrefix + "anything": "x"},
		Annotations: map[string]string{runpod.ReservedPrefix + "anything": big, runpod.AnnotationWithdrawn: big,
			runpod.AnnotationScheduledTime: "2026-06-06T10:00:00Z"}}}
	got := cached(t, pod)
	if _, ok := got.Annotations[runpod.ReservedPrefix+"anything"]; ok {
		t.Error("the cache holds an annotation the controller does not write")
	}
	if _, ok := got.Labels[runpod.ReservedPrefix+"anything"]; ok {
		t.Error("the cache holds a label the controller does not write")
	}
	if v := got.Annotations[runpod.AnnotationWithdrawn]; len(v) == 0 || len(v) > 1024 || !utf8.ValidString(v) {
		t.Errorf("the cache holds %d bytes of %s (valid UTF-8: %t)", len(v), runpod.AnnotationWithdrawn, utf8.ValidString(v))
	}
	if got.Labels[runpod.LabelJob] != "j" || got.Annotations[runpod.AnnotationScheduledTime] != "2026-06-06T10:00:00Z" {
		t.Errorf("the cache lost what a pass reads: %v %v", got.Labels, got.Annotations)
	}
}

// TestSlimJobHoldsNoLargeTemplate: a job's template is bounded only by what etcd stores
// (1.5 MiB); a tenant's jobs each near it (a large value in the template, which does not
// compress) were held by every replica's cache, and about 150 of them exhausted the
// manager's memory, stopping every tenant's jobs (helper-114). The cache holds such a
// job without its template, marked so; a pass reads it whole from the API server.
func TestSlimJobHoldsNoLargeTemplate(t *testing.T) {
	big := make([]byte, 300<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	job := newJob("ns", "j", "@hourly")
	job.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BIG", Value: base64.StdEncoding.EncodeToString(big)}}
	job.Status.LastScheduleTime = &metav1.Time{Time: t0}
	obj, err := slimJob(job.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := obj.(*cachedJob)
	if !ok {
		t.Fatalf("held as %T", obj)
	}
	if len(c.body) > maxHeldJobBody {
		t.Errorf("held %d bytes of the job, want at most %d", len(c.body), maxHeldJobBody)
	}
	got := heldJob(t, obj)
	if _, marked := got.Annotations[annotationTemplateNotHeld]; !marked || len(got.Spec.Template.Spec.Containers) != 0 {
		t.Errorf("the job is handed out with %d containers, marked %t: want none, marked", len(got.Spec.Template.Spec.Containers), marked)
	}
	if got.Spec.Schedule != "@hourly" || !got.Status.LastScheduleTime.Equal(job.Status.LastScheduleTime) {
		t.Errorf("the rest of the job was not kept: %q %v", got.Spec.Schedule, got.Status.LastScheduleTime)
	}

	// A job that does not read back from JSON (a window's sub-second end) is held as
	// decoded: without its template too.
	end := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 5e8, time.UTC))
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "freeze", Start: &metav1.Time{Time: end.Add(-time.Hour)}, End: &end}}}
	obj, err = slimJob(job.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if held, ok := obj.(*v1alpha1.LockedCronJob); !ok || len(held.Spec.Template.Spec.Containers) != 0 {
		t.Errorf("a job that does not read back is held as %T with its template", obj)
	}
	got = heldJob(t, obj)
	if _, marked := got.Annotations[annotationTemplateNotHeld]; !marked || !got.Spec.Blackout.Windows[0].End.Equal(&end) {
		t.Errorf("a job that does not read back, held without its template, is handed out marked %t, its window's end %v", marked, got.Spec.Blackout.Windows[0].End)
	}

	// A job of an ordinary size is held whole, unmarked.
	obj, err = slimJob(newJob("ns", "j", "@hourly"))
	if err != nil {
		t.Fatal(err)
	}
	got = heldJob(t, obj)
	if _, marked := got.Annotations[annotationTemplateNotHeld]; marked || len(got.Spec.Template.Spec.Containers) == 0 {
		t.Errorf("an ordinary job is handed out marked %t, with %d containers", marked, len(got.Spec.Template.Spec.Containers))
	}
}
