package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// --watch-namespaces (cmd/manager): the manager's cache is CacheOptions limited to
// DefaultNamespaces; the controller then acts there only.
var _ = Describe("Watching some namespaces only", func() {
	It("reconciles LockedCronJobs in the watched namespace and leaves the others alone", func() {
		watched, other := newNamespace(), newNamespace()
		opts := CacheOptions()
		opts.DefaultNamespaces = map[string]cache.Config{watched: {}}
		startManagerWith(clock.RealClock{}, opts)

		in, out := newJob(watched, "in", "@hourly"), newJob(other, "out", "@hourly")
		Expect(k8sClient.Create(ctx, in)).To(Succeed())
		Expect(k8sClient.Create(ctx, out)).To(Succeed())
		Eventually(func() int { return len(getJob(in).Status.Conditions) }).Should(BeNumerically(">", 0))
		Consistently(func() int { return len(getJob(out).Status.Conditions) }, 3*time.Second).Should(BeZero())
		Expect(getJob(out).Status.NextScheduleTime).To(BeNil())
	})
})
