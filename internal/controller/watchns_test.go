package controller

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

// --watch-namespaces (cmd/manager): the manager's cache is CacheOptions limited to
// DefaultNamespaces; the controller then acts there only.
var _ = Describe("Watching some namespaces only", func() {
	It("reconciles LockedCronJobs in the watched namespace and leaves the others alone", func() {
		watched, other := newNamespace(), newNamespace()
		opts := CacheOptions()
		opts.DefaultNamespaces = map[string]cache.Config{watched: {}}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  opts,
			Controller:             ctrlConfig(),
		})
		Expect(err).NotTo(HaveOccurred())
		r := &LockedCronJobReconciler{
			Client: mgr.GetClient(),
			Clock:  clock.RealClock{},
			Pod:    runpod.Options{ClusterName: "test", WrapperImage: "k8s.local/lockedcron:dev", WrapperImagePullPolicy: corev1.PullNever},
		}
		Expect(r.SetupWithManager(mgr)).To(Succeed())
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		DeferCleanup(func() {
			mcancel()
			Eventually(done, 30*time.Second).Should(BeClosed())
			r.backends.close()
		})

		in, out := newJob(watched, "in", "@hourly"), newJob(other, "out", "@hourly")
		Expect(k8sClient.Create(ctx, in)).To(Succeed())
		Expect(k8sClient.Create(ctx, out)).To(Succeed())
		Eventually(func() int { return len(getJob(in).Status.Conditions) }).Should(BeNumerically(">", 0))
		Consistently(func() int { return len(getJob(out).Status.Conditions) }, 3*time.Second).Should(BeZero())
		Expect(getJob(out).Status.NextScheduleTime).To(BeNil())
	})
})
