package controller

import (
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

var _ = Describe("A reconcile whose API calls hang", func() {
	// An API server (or the network to it) that takes a request and never answers holds
	// the worker that sent it: client-go's requests have no timeout of their own, and
	// HTTP/2's health check gives up on the connection only after about 45 s. With every
	// worker held, no job is reconciled. The reconcile timeout cancels such a pass, frees
	// its worker, and the pass is tried again.
	It("is cancelled after the reconcile timeout, its worker freed", func() {
		api, err := url.Parse(cfg.Host)
		Expect(err).NotTo(HaveOccurred())
		proxy := redistest.StartProxy(GinkgoTB(), api.Host)
		proxied := rest.CopyConfig(cfg)
		proxied.Host = "https://" + proxy.Addr()
		startManagerOn(proxied, clock.RealClock{}, CacheOptions(), nil, func(r *LockedCronJobReconciler) {
			r.MaxConcurrentReconciles = 1
			r.ReconcileTimeout = 2 * time.Second
		})
		DeferCleanup(proxy.Thaw) // before the manager stops (cleanups run last first)
		ns := newNamespace()
		job := newJob(ns, "every-second", "* * * * * *")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() int { return len(podsOf(job)) }, 20*time.Second, 100*time.Millisecond).Should(BeNumerically(">", 0),
			"the manager creates the job's pods through the proxy")

		timeouts := func() float64 {
			return metricValue("controller_runtime_reconcile_timeouts_total", map[string]string{"controller": "lockedcronjob"})
		}
		before := timeouts()
		proxy.Freeze() // each second's pass now waits on a pod POST that is never answered
		Eventually(timeouts, 20*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", before+2),
			"a pass whose call hangs is not cancelled: it holds the only worker until the connection dies")
		proxy.Thaw()
		thawed := time.Now()
		Eventually(func() time.Time {
			if t := getJob(job).Status.LastScheduleTime; t != nil {
				return t.Time
			}
			return time.Time{}
		}, 20*time.Second, 100*time.Millisecond).Should(BeTemporally(">", thawed),
			"once the API server answers again, the job's occurrences are scheduled again")
	})
})
