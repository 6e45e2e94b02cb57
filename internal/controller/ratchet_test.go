package controller

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/utils/clock"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// The CRD came to refuse contention.retry under policy Skip (session 45: its retries were
// silently not made). A job stored before keeps its status writes and metadata patches (the
// API server's validation ratcheting: a rule on a part of the object that did not change
// is not run again), or the controller could not record its runs any more; applying its
// spec again unchanged is refused.
var _ = Describe("A job stored before the contention.retry rule", func() {
	It("keeps its status writes and spec changes elsewhere, and is refused as a new job", func() {
		const rule = "contention.retry applies only to contention.policy Retry"
		update, restore := editCRD()
		dropRule := func(u *unstructured.Unstructured) {
			versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
			v := versions[0].(map[string]any)
			at := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties", "contention", "x-kubernetes-validations"}
			rules, _, _ := unstructured.NestedSlice(v, at...)
			var kept []any
			for _, r := range rules {
				if !strings.Contains(r.(map[string]any)["message"].(string), rule) {
					kept = append(kept, r)
				}
			}
			Expect(kept).To(HaveLen(len(rules) - 1))
			Expect(unstructured.SetNestedSlice(v, kept, at...)).To(Succeed())
			versions[0] = v
			Expect(unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")).To(Succeed())
		}

		ns := newNamespace()
		stored := func(name string) *v1alpha1.LockedCronJob {
			j := newJob(ns, name, "@hourly")
			j.Spec.Contention = v1alpha1.ContentionSpec{Policy: v1alpha1.ContentionSkip, Retry: &v1alpha1.RetrySpec{Attempts: 3}}
			return j
		}
		// Before the rule: such a job is stored.
		update(dropRule)
		old := stored("before-the-rule")
		Eventually(func() error { return k8sClient.Create(ctx, old.DeepCopy()) }, 20*time.Second).Should(Succeed())
		// The rule back: a new one is refused, naming the fix.
		update(restore)
		Eventually(func() error { return k8sClient.Create(ctx, stored("after-the-rule")) }, 20*time.Second).Should(
			MatchError(ContainSubstring(rule)))

		// The stored one: its status written, as the controller does, a label patched,
		// its schedule changed.
		j := getJob(old)
		j.Status.LastScheduleTime = &metav1.Time{Time: time.Now().Truncate(time.Second)}
		Expect(k8sClient.Status().Update(ctx, j)).To(Succeed(), "the status write of a job stored before the rule")
		Expect(k8sClient.Patch(ctx, j, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))).To(Succeed())
		j = getJob(old)
		j.Spec.Schedule = "@daily"
		Expect(k8sClient.Update(ctx, j)).To(Succeed(), "a spec change that leaves contention alone")
		// Its contention touched, the rule holds.
		j = getJob(old)
		j.Spec.Contention.Retry.Attempts = 4
		Expect(k8sClient.Update(ctx, j)).To(MatchError(ContainSubstring(rule)))
	})
})

// editCRD returns update, which writes the installed LockedCronJob CRD as it was, changed
// by change, and restore, a change that leaves it as it was: the CRD is put back so after
// the spec.
func editCRD() (update func(change func(*unstructured.Unstructured)), restore func(*unstructured.Unstructured)) {
	crdKey := types.NamespacedName{Name: "lockedcronjobs." + v1alpha1.GroupVersion.Group}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	Expect(k8sClient.Get(ctx, crdKey, crd)).To(Succeed())
	original := crd.DeepCopy()
	update = func(change func(*unstructured.Unstructured)) {
		GinkgoHelper()
		Eventually(func() error {
			Expect(k8sClient.Get(ctx, crdKey, crd)).To(Succeed())
			next := original.DeepCopy()
			next.SetResourceVersion(crd.GetResourceVersion())
			change(next)
			return k8sClient.Update(ctx, next)
		}).Should(Succeed())
	}
	restore = func(*unstructured.Unstructured) {}
	DeferCleanup(func() { update(restore) })
	return update, restore
}

// A manager newer than its CRD (helm upgrade does not update CRDs): the API server pruned
// the status fields the old CRD lacks, and with them the accounting they carry (a
// withdrawn pod named in status.dueBeforeChange, a handled status.lastRunRequest), saying
// so only in a warning (helper-107). The write is strict now: refused, and the job's Events
// say which fields and how to fix it; once the CRD is applied, status is written again.
var _ = Describe("A manager newer than the installed CRD", func() {
	It("does not write status with fields the CRD would prune, and says on the job to apply the CRD", func() {
		update, restore := editCRD()
		update(func(u *unstructured.Unstructured) {
			versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
			v := versions[0].(map[string]any)
			unstructured.RemoveNestedField(v, "schema", "openAPIV3Schema", "properties", "status", "properties", "lockKey")
			versions[0] = v
			Expect(unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")).To(Succeed())
		})
		startManager(clock.RealClock{})
		job := newJob(newNamespace(), "old-crd", "* * * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() []string { return eventNotes(job, ReasonStatusRejected) }, 20*time.Second).Should(ContainElement(And(
			ContainSubstring(`unknown field "status.lockKey"`), ContainSubstring("CRD is older than the manager"))))
		Expect(getJob(job).Status.LockKey).To(BeEmpty())

		update(restore)
		Eventually(func() string { return getJob(job).Status.LockKey }, 20*time.Second).Should(Equal(job.Namespace + "/old-crd"))
	})
})

// etcd stores objects of at most 1.5 MiB (--max-request-bytes); the API server answers a
// write past that with a 500, "etcdserver: request is too large". A job whose spec takes
// nearly all of it (a large value in its template) is created, but no status write of
// its lands. Taken for an answer that may have been lost, it was retried at every pass
// and said nowhere but the manager's log (helper-114).
var _ = Describe("A job too large for its status to be written", func() {
	It("says so on the job, naming the limit and the fix", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		// The largest job etcd takes, to within 64 bytes: any status is more.
		var job *v1alpha1.LockedCronJob
		for size := 1536 << 10; ; size -= 64 {
			Expect(size).To(BeNumerically(">", 1<<20), "no job of over 1 MiB was stored")
			j := newJob(ns, "large", "@hourly")
			j.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", size)}}
			err := k8sClient.Create(ctx, j)
			if err == nil {
				job = j
				break
			}
			Expect(err.Error()).To(Or(ContainSubstring("too large"), ContainSubstring("Too large")), "refused for another reason")
		}
		Eventually(func() []string { return eventNotes(job, ReasonStatusRejected) }, 20*time.Second).Should(ContainElement(And(
			ContainSubstring("too large"), ContainSubstring("spec.template"))))
		Expect(k8sClient.Delete(ctx, job)).To(Succeed()) // no edit of it fits either (the suite suspends every job after each spec)
	})
})
