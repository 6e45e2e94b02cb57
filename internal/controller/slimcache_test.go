package controller

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
})
