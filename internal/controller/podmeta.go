package controller

import (
	"unique"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podMeta is a pod's metadata as the cache holds it (cachedPod; issue 13: memory at
// thousands of jobs). A metav1.ObjectMeta is a 232-byte struct, most of it fields a
// pod of the controller's leaves empty, and each pod held its owner reference, an
// 80-byte element and the job's name and UID again, where every pod of a job has the
// same one. podMeta holds the fields every pod sets, its UID as the 16 bytes of the
// UUID it is (a string of 36 characters took 64 bytes), its owner reference as a handle
// to one copy per job (unique.Make: the copy goes when the job's last pod goes), and
// the fields a pod rarely sets (generateName, selfLink, a deletion's timestamp and
// grace period, managed fields, owner references when there are none or several, a UID
// that is not a UUID in its canonical form) in rare, nil when none is set. Labels and annotations are pairs (slimPod keeps only
// the controller's own).
//
// It implements metav1.Object, for what reads the held object itself (the pod
// informer's handlers, the owner index, a List's label selector); meta builds the
// metav1.ObjectMeta the cache's readers are handed.
type podMeta struct {
	name, namespace, resourceVersion string
	uid                              uuid.UUID // zero when it has none, or one held in rare
	generation                       int64
	created                          metav1.Time
	owner                            unique.Handle[podOwner] // its one owner reference; zero when it has none or several
	finalizers                       []string
	labels, annotations              pairs
	rare                             *metav1.ObjectMeta
}

// podOwner is an owner reference as a comparable value (unique.Make's key): its two
// optional booleans as optBool.
type podOwner struct {
	apiVersion, kind, name    string
	uid                       types.UID
	controller, blockDeletion optBool
}

// optBool is a *bool as a value: unset, false or true.
type optBool uint8

const (
	unset optBool = iota
	isFalse
	isTrue
)

func optOf(b *bool) optBool {
	switch {
	case b == nil:
		return unset
	case *b:
		return isTrue
	}
	return isFalse
}

func (o optBool) ptr() *bool {
	if o == unset {
		return nil
	}
	b := o == isTrue
	return &b
}

func (o podOwner) ref() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, UID: o.uid,
		Controller: o.controller.ptr(), BlockOwnerDeletion: o.blockDeletion.ptr()}
}

// slimMeta holds m (its labels and annotations given as pairs) as a podMeta. The label
// values that are the owner's name (runpod.LabelJob's) share its copy.
func slimMeta(m *metav1.ObjectMeta, labels, annotations pairs) podMeta {
	pm := podMeta{name: m.Name, namespace: m.Namespace, resourceVersion: m.ResourceVersion,
		generation: m.Generation, created: m.CreationTimestamp, finalizers: m.Finalizers,
		labels: labels, annotations: annotations}
	pm.setRare(metav1.ObjectMeta{GenerateName: m.GenerateName, SelfLink: m.SelfLink, DeletionTimestamp: m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds, ManagedFields: m.ManagedFields})
	pm.SetUID(m.UID)
	pm.SetOwnerReferences(m.OwnerReferences)
	if pm.hasOwner() {
		name := pm.owner.Value().name
		for i := 1; i < len(pm.labels); i += 2 {
			if pm.labels[i] == name {
				pm.labels[i] = name
			}
		}
	}
	return pm
}

// meta returns the metadata it holds as a metav1.ObjectMeta: the caller's own when deep,
// else sharing the finalizers (to be read, never changed).
func (m *podMeta) meta(deep bool) metav1.ObjectMeta {
	var out metav1.ObjectMeta
	if m.rare != nil {
		m.rare.DeepCopyInto(&out)
	}
	out.Name, out.Namespace, out.ResourceVersion, out.UID = m.name, m.namespace, m.resourceVersion, m.GetUID()
	out.Generation, out.CreationTimestamp = m.generation, m.created
	out.Labels, out.Annotations = m.labels.toMap(), m.annotations.toMap()
	out.Finalizers = m.finalizers
	if deep && m.finalizers != nil {
		out.Finalizers = append([]string{}, m.finalizers...)
	}
	if m.hasOwner() {
		out.OwnerReferences = []metav1.OwnerReference{m.owner.Value().ref()}
	}
	return out
}

func (m *podMeta) hasOwner() bool { return m.owner != unique.Handle[podOwner]{} }

// setRare keeps r as the rarely set fields, or none when r sets none. r's owner
// references are kept only when SetOwnerReferences put them there.
func (m *podMeta) setRare(r metav1.ObjectMeta) {
	if r.GenerateName == "" && r.SelfLink == "" && r.UID == "" && r.DeletionTimestamp == nil &&
		r.DeletionGracePeriodSeconds == nil && r.OwnerReferences == nil && r.ManagedFields == nil {
		m.rare = nil
		return
	}
	m.rare = &r
}

// rareFields returns a copy of the rarely set fields, to change and give to setRare.
func (m *podMeta) rareFields() metav1.ObjectMeta {
	if m.rare == nil {
		return metav1.ObjectMeta{}
	}
	return *m.rare
}

// The metav1.Object methods.

func (m *podMeta) GetNamespace() string               { return m.namespace }
func (m *podMeta) SetNamespace(s string)              { m.namespace = s }
func (m *podMeta) GetName() string                    { return m.name }
func (m *podMeta) SetName(s string)                   { m.name = s }
func (m *podMeta) GetResourceVersion() string         { return m.resourceVersion }
func (m *podMeta) SetResourceVersion(s string)        { m.resourceVersion = s }
func (m *podMeta) GetGeneration() int64               { return m.generation }
func (m *podMeta) SetGeneration(g int64)              { m.generation = g }
func (m *podMeta) GetCreationTimestamp() metav1.Time  { return m.created }
func (m *podMeta) SetCreationTimestamp(t metav1.Time) { m.created = t }
func (m *podMeta) GetFinalizers() []string            { return m.finalizers }
func (m *podMeta) SetFinalizers(f []string)           { m.finalizers = f }
func (m *podMeta) GetLabels() map[string]string       { return m.labels.toMap() }
func (m *podMeta) SetLabels(l map[string]string)      { m.labels = pairsOf(l) }
func (m *podMeta) GetAnnotations() map[string]string  { return m.annotations.toMap() }
func (m *podMeta) SetAnnotations(a map[string]string) { m.annotations = pairsOf(a) }
func (m *podMeta) GetGenerateName() string            { return m.rareFields().GenerateName }
func (m *podMeta) GetSelfLink() string                { return m.rareFields().SelfLink }
func (m *podMeta) GetDeletionTimestamp() *metav1.Time { return m.rareFields().DeletionTimestamp }
func (m *podMeta) GetDeletionGracePeriodSeconds() *int64 {
	return m.rareFields().DeletionGracePeriodSeconds
}
func (m *podMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return m.rareFields().ManagedFields }

func (m *podMeta) SetGenerateName(s string) {
	r := m.rareFields()
	r.GenerateName = s
	m.setRare(r)
}

func (m *podMeta) SetSelfLink(s string) {
	r := m.rareFields()
	r.SelfLink = s
	m.setRare(r)
}

func (m *podMeta) SetDeletionTimestamp(t *metav1.Time) {
	r := m.rareFields()
	r.DeletionTimestamp = t
	m.setRare(r)
}

func (m *podMeta) SetDeletionGracePeriodSeconds(s *int64) {
	r := m.rareFields()
	r.DeletionGracePeriodSeconds = s
	m.setRare(r)
}

func (m *podMeta) SetManagedFields(f []metav1.ManagedFieldsEntry) {
	r := m.rareFields()
	r.ManagedFields = f
	m.setRare(r)
}

func (m *podMeta) GetUID() types.UID {
	if m.uid == (uuid.UUID{}) {
		return m.rareFields().UID
	}
	return types.UID(m.uid.String())
}

// SetUID holds a UID that reads back as a UUID as its bytes, any other in rare.
func (m *podMeta) SetUID(u types.UID) {
	r := m.rareFields()
	if id, err := uuid.Parse(string(u)); err == nil && id != (uuid.UUID{}) && id.String() == string(u) {
		m.uid, r.UID = id, ""
	} else {
		m.uid, r.UID = uuid.UUID{}, u
	}
	m.setRare(r)
}

func (m *podMeta) GetOwnerReferences() []metav1.OwnerReference {
	if m.hasOwner() {
		return []metav1.OwnerReference{m.owner.Value().ref()}
	}
	return m.rareFields().OwnerReferences
}

// SetOwnerReferences holds one owner reference as a handle, none or several in rare.
func (m *podMeta) SetOwnerReferences(refs []metav1.OwnerReference) {
	r := m.rareFields()
	if len(refs) == 1 {
		o := refs[0]
		m.owner = unique.Make(podOwner{apiVersion: o.APIVersion, kind: o.Kind, name: o.Name, uid: o.UID,
			controller: optOf(o.Controller), blockDeletion: optOf(o.BlockOwnerDeletion)})
		r.OwnerReferences = nil
	} else {
		m.owner = unique.Handle[podOwner]{}
		r.OwnerReferences = refs
	}
	m.setRare(r)
}
