package controller

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// everyField is pod metadata with every field set (the labels and annotations the
// controller's own, which are what slimPod keeps), with owners as its owner references.
func everyField(owners ...metav1.OwnerReference) metav1.ObjectMeta {
	at := metav1.NewTime(t0)
	return metav1.ObjectMeta{Name: "nightly-report-29676960", GenerateName: "nightly-report-", Namespace: "team-a",
		SelfLink: "/api/v1/namespaces/team-a/pods/nightly-report-29676960", UID: "0c3b0c4e-5b3a-4c43-9a43-7c1f2d9e5a11",
		ResourceVersion: "123456", Generation: 2, CreationTimestamp: at, DeletionTimestamp: &at, DeletionGracePeriodSeconds: ptr.To[int64](30),
		Labels:          map[string]string{runpod.LabelJob: "nightly-report", runpod.LabelCounted: "true"},
		Annotations:     map[string]string{runpod.AnnotationScheduledTime: "2026-06-06T10:00:00Z"},
		OwnerReferences: owners, Finalizers: []string{runpod.FinalizerTracking, "example.com/other"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}}}
}

func jobOwner(name string, controller, block *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: name,
		UID: "5d0f2c3e-1111-4c43-9a43-7c1f2d9e5a11", Controller: controller, BlockOwnerDeletion: block}
}

// ownerCases: one owner reference (held as a handle, with each of its optional
// booleans unset, false and true), none, an empty list, and several.
var ownerCases = map[string][]metav1.OwnerReference{
	"one owner":             {jobOwner("nightly-report", ptr.To(true), nil)},
	"one owner, both false": {jobOwner("nightly-report", ptr.To(false), ptr.To(false))},
	"one owner, block true": {jobOwner("nightly-report", nil, ptr.To(true))},
	"no owner":              nil,
	"an empty owner list":   {},
	"two owners":            {jobOwner("nightly-report", ptr.To(true), nil), {APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u"}},
}

// TestPodMetaKeepsEveryField: the compact metadata the cache holds of a pod (podMeta)
// hands its readers every field the pod had, whichever of them it sets, and answers
// every metav1.Object getter as the pod's own metadata does; its setters set what the
// getters and the readers' copy then show. slimPod drops only managed fields and the
// labels and annotations that are not the controller's (TestSlimMetadata).
func TestPodMetaKeepsEveryField(t *testing.T) {
	getters, setters := objectMethods(t)
	keeps := func(t *testing.T, want metav1.ObjectMeta) {
		pod := &corev1.Pod{ObjectMeta: *want.DeepCopy()}
		want.ManagedFields = nil // slimPod drops them
		if got := cached(t, pod); !reflect.DeepEqual(got.ObjectMeta, want) {
			t.Errorf("a reader is handed\n%+v\nwant\n%+v", got.ObjectMeta, want)
		}
		held, _ := slimPod(&corev1.Pod{ObjectMeta: *want.DeepCopy()})
		compareGetters(t, "held", getters, held.(metav1.Object), &want)

		// Every setter, each with a field of the other metadata, on a pod that held none.
		set := &cachedPod{}
		for _, m := range setters {
			get := reflect.ValueOf(metav1.Object(&want)).MethodByName("Get" + strings.TrimPrefix(m, "Set"))
			reflect.ValueOf(metav1.Object(set)).MethodByName(m).Call(get.Call(nil))
		}
		compareGetters(t, "set", getters, set, &want)
		if got := set.DeepCopyObject().(*corev1.Pod).ObjectMeta; !reflect.DeepEqual(got, want) {
			t.Errorf("after every setter a reader is handed\n%+v\nwant\n%+v", got, want)
		}
	}
	for name, owners := range ownerCases {
		t.Run(name, func(t *testing.T) { keeps(t, everyField(owners...)) })
	}
	// The API server's UIDs are UUIDs in their canonical form, held as 16 bytes; any
	// other is held as it is.
	for _, uid := range []types.UID{"0c3b0c4e-5b3a-4c43-9a43-7c1f2d9e5a11", "0C3B0C4E-5B3A-4C43-9A43-7C1F2D9E5A11",
		"{0c3b0c4e-5b3a-4c43-9a43-7c1f2d9e5a11}", "00000000-0000-0000-0000-000000000000", "u1", ""} {
		t.Run("UID "+string(uid), func(t *testing.T) {
			m := everyField(ownerCases["one owner"]...)
			m.UID = uid
			keeps(t, m)
		})
	}

	// Setting a rare field back to its zero value leaves nothing rare held.
	pod := &corev1.Pod{ObjectMeta: everyField(ownerCases["one owner"]...)}
	pod.ManagedFields, pod.GenerateName, pod.SelfLink, pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = nil, "", "", nil, nil
	held, _ := slimPod(pod)
	if c := held.(*cachedPod); c.rare != nil {
		t.Errorf("a pod with one owner and no rare field holds rare fields %+v", c.rare)
	}
	c := held.(*cachedPod)
	c.SetGenerateName("x-")
	c.SetGenerateName("")
	if c.rare != nil {
		t.Errorf("a rare field set and cleared is still held: %+v", c.rare)
	}
}

// TestPodMetaSharesTheOwner: pods of one job hold one copy of its owner reference;
// pods of another job, or with another owner UID (a job deleted and made again under
// its name), hold another.
func TestPodMetaSharesTheOwner(t *testing.T) {
	held := func(owner metav1.OwnerReference) *cachedPod {
		o, _ := slimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: []metav1.OwnerReference{owner}}})
		return o.(*cachedPod)
	}
	a, b := held(jobOwner("nightly-report", ptr.To(true), nil)), held(jobOwner(strings.Clone("nightly-report"), ptr.To(true), nil))
	if a.owner != b.owner {
		t.Error("two pods of one job hold two copies of its owner reference")
	}
	again := jobOwner("nightly-report", ptr.To(true), nil)
	again.UID = "another-uid"
	for _, other := range []*cachedPod{held(jobOwner("weekly-report", ptr.To(true), nil)), held(again), held(jobOwner("nightly-report", nil, nil))} {
		if other.owner == a.owner {
			t.Errorf("owner %+v holds the same reference as %+v", other.GetOwnerReferences(), a.GetOwnerReferences())
		}
	}
}

// objectMethods lists metav1.Object's getters and setters by name.
func objectMethods(t *testing.T) (getters, setters []string) {
	typ := reflect.TypeFor[metav1.Object]()
	for i := range typ.NumMethod() {
		switch m := typ.Method(i).Name; {
		case strings.HasPrefix(m, "Get"):
			getters = append(getters, m)
		case strings.HasPrefix(m, "Set"):
			setters = append(setters, m)
		default:
			t.Fatalf("metav1.Object has a method %s neither getter nor setter: the test must learn it", m)
		}
	}
	if len(getters) != len(setters) || len(getters) < 15 {
		t.Fatalf("metav1.Object: getters %v, setters %v", getters, setters)
	}
	return getters, setters
}

func compareGetters(t *testing.T, what string, getters []string, got, want metav1.Object) {
	t.Helper()
	for _, m := range getters {
		g := reflect.ValueOf(got).MethodByName(m).Call(nil)[0].Interface()
		w := reflect.ValueOf(want).MethodByName(m).Call(nil)[0].Interface()
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s() = %+v; want %+v", what, m, g, w)
		}
	}
}
