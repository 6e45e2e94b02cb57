package controller

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
		crdKey := types.NamespacedName{Name: "lockedcronjobs." + v1alpha1.GroupVersion.Group}
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		Expect(k8sClient.Get(ctx, crdKey, crd)).To(Succeed())
		original := crd.DeepCopy()
		// update writes the CRD as it is, changed by change: the rule dropped, or put back.
		update := func(change func(*unstructured.Unstructured)) {
			GinkgoHelper()
			Eventually(func() error {
				Expect(k8sClient.Get(ctx, crdKey, crd)).To(Succeed())
				next := original.DeepCopy()
				next.SetResourceVersion(crd.GetResourceVersion())
				change(next)
				return k8sClient.Update(ctx, next)
			}).Should(Succeed())
		}
		restore := func(*unstructured.Unstructured) {}
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
		DeferCleanup(func() { update(restore) })

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
