package controller

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// The manager caches LockedCronJobs with only the managed fields it reads (slimJob); its
// status writes, made from that copy, must not replace the stored ones with it (other
// tools' server-side apply and conflict detection rely on them).
var _ = Describe("The slim job cache", func() {
	It("leaves a job's stored managed fields whole when it writes status from its slim copy", func() {
		ns := newNamespace()
		job := newJob(ns, "whole", "@hourly")
		Expect(k8sClient.Create(ctx, job, client.FieldOwner("tenant-tool"))).To(Succeed())
		stop := startManager(clock.RealClock{})
		defer stop()

		// The controller's status write, made from the cached copy, has landed.
		Eventually(func() int64 { return getJob(job).Status.ObservedGeneration }).Should(Equal(int64(1)))
		stored := getJob(job).ManagedFields
		var tenant, status string
		for _, mf := range stored {
			switch {
			case mf.Manager == "tenant-tool" && mf.Subresource == "":
				tenant = string(mf.FieldsV1.Raw)
			case mf.Subresource == "status":
				status = string(mf.FieldsV1.Raw)
			}
		}
		// The tenant still owns its whole spec (the pod template too), not only the
		// schedule the cache keeps; the controller owns the status it wrote.
		Expect(tenant).To(And(ContainSubstring(`"f:schedule"`), ContainSubstring(`"f:template"`), ContainSubstring(`"f:lock"`)))
		Expect(status).To(ContainSubstring(`"f:observedGeneration"`))
		Expect(strings.Count(tenant, "f:")).To(BeNumerically(">", 5))

	})

	// The cache keeps only the controller's own labels and annotations (slimMeta); its
	// writes from those copies (the job's status, the pods' counted label) must leave the
	// others where the user put them.
	It("leaves a job's annotations and its pods' labels and annotations when it writes from its slim copies", func() {
		ns := newNamespace()
		job := newJob(ns, "meta", rarely)
		job.Annotations = map[string]string{"team.example.com/owner": "billing", "kubectl.kubernetes.io/last-applied-configuration": `{"kind":"LockedCronJob"}`}
		job.Spec.Template.Labels = map[string]string{"app": "billing"}
		job.Spec.Template.Annotations = map[string]string{"prometheus.io/scrape": "true"}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		pod := createPodFor(job, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		finishPod(pod, corev1.PodSucceeded, 0, reportJSON(report.Report{Outcome: report.Succeeded, Holder: "h", FencingToken: 3}))
		stop := startManager(clock.RealClock{})
		defer stop()

		// The pod counted (status written, then the pod labelled from the cached copy).
		var p corev1.Pod
		Eventually(func() map[string]string {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			return p.Labels
		}).Should(HaveKeyWithValue(runpod.LabelCounted, "true"))
		Expect(getJob(job).Status.Counters.Succeeded).To(Equal(int64(1)))
		Expect(p.Labels).To(HaveKeyWithValue("app", "billing"))
		Expect(p.Annotations).To(HaveKeyWithValue("prometheus.io/scrape", "true"))
		Expect(getJob(job).Annotations).To(Equal(job.Annotations))
	})
})
