package controller

import (
	"encoding/base64"
	"math/rand/v2"
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

	// A job whose template is too large to hold for every job (a large value in it) is
	// held without it (slimJob, TestSlimJobHoldsNoLargeTemplate): its pass reads it whole
	// from the API server, and its pods are its template's, the value included.
	It("runs a job whose template the cache does not hold, from the job as stored", func() {
		startManager(clock.RealClock{})
		ns := newNamespace()
		at := time.Now().Add(5 * time.Second).Truncate(time.Second)
		job := newJob(ns, "large", dailyAt(at))
		big := make([]byte, 200<<10)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range big {
			big[i] = byte(rng.Uint32()) // does not compress
		}
		value := base64.StdEncoding.EncodeToString(big)
		job.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BIG", Value: value}}
		createBefore(job, at)
		Eventually(func() error { _, err := getPod(ns, runpod.Name("large", at)); return err }, time.Until(at)+10*time.Second, 100*time.Millisecond).Should(Succeed())
		p, err := getPod(ns, runpod.Name("large", at))
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "BIG", Value: value}))
		Expect(getJob(job).Annotations).NotTo(HaveKey(annotationTemplateNotHeld), "the cache's mark is not written to the job")
	})
})
