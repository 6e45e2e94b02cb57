//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
)

// An incremental job (the worked example of docs/idempotency.md) in two namespaces sharing
// one lock key: each record is processed exactly once across the occurrences, although a
// holder pod is killed mid-run — the watermark moves only with a success, and the record
// id as a unique key makes the re-read records harmless.
var _ = Describe("an incremental job with a watermark on a real cluster", Ordered, func() {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	const records = 200
	var jobs []job

	BeforeAll(func() {
		Expect(rdb.Del(ctx, audit.Records, audit.Processed, audit.ProcessedLog, audit.StoreFence).Err()).To(Succeed())
		for i := 1; i <= records; i++ {
			Expect(rdb.RPush(ctx, audit.Records, strconv.Itoa(i)).Err()).To(Succeed())
		}
		for _, ns := range []string{"a", "b"} {
			jobs = append(jobs, job{ns: "e2e-incr-" + ns + "-" + suffix, name: "sync", key: "e2e/incremental-" + suffix,
				schedule: "*/5 * * * * *", ttl: "10s", kill: "2s", sleep: "200ms", label: "incr-" + suffix,
				args: []string{"--incremental", "--batch=5"}})
		}
	})
	AfterEach(func() {
		for _, j := range jobs {
			dumpOnFailure(j.ns)
		}
	})
	AfterAll(func() {
		for _, j := range jobs {
			_, _ = kubectl("delete", "namespace", j.ns, "--wait=false")
		}
	})

	It("processes every record exactly once across ≥ 10 occurrences with a holder killed mid-run", func() {
		for _, j := range jobs {
			apply(j)
		}
		processed := func() int64 { return rdb.LLen(ctx, audit.ProcessedLog).Val() }
		// Kill the pod that is processing, once a few runs went by.
		Eventually(processed, 2*time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 12))
		killed := ""
		Eventually(func() string {
			before := processed()
			for _, j := range jobs {
				var pods corev1.PodList
				Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelJob: j.name})).To(Succeed())
				for _, p := range pods.Items {
					if p.Status.Phase != corev1.PodRunning || processed() == before {
						continue
					}
					out, err := kubectl("-n", j.ns, "delete", "pod", p.Name, "--grace-period=0", "--force")
					Expect(err).NotTo(HaveOccurred(), out)
					killed = j.ns + "/" + p.Name
					return killed
				}
			}
			return ""
		}, 2*time.Minute, 50*time.Millisecond).ShouldNot(BeEmpty())
		GinkgoWriter.Printf("killed %s mid-run\n", killed)

		// Ten more successful occurrences after the kill.
		var after int64
		for _, j := range jobs {
			after += get(j).Status.Counters.Succeeded
		}
		Eventually(func() int64 {
			var n int64
			for _, j := range jobs {
				n += get(j).Status.Counters.Succeeded
			}
			return n
		}, 4*time.Minute, time.Second).Should(BeNumerically(">=", after+10))
		suspend(jobs...)
		settle(jobs...)

		log, err := rdb.LRange(ctx, audit.ProcessedLog, 0, -1).Result()
		Expect(err).NotTo(HaveOccurred())
		highest := 0
		for _, e := range log {
			if id, err := strconv.Atoi(strings.Fields(e)[0]); err == nil && id > highest {
				highest = id
			}
		}
		twice, missing, err := audit.ExactlyOnce(log, highest)
		Expect(err).NotTo(HaveOccurred())
		Expect(twice).To(BeEmpty(), "records processed twice")
		Expect(missing).To(BeEmpty(), "records skipped below the highest processed one (%d)", highest)
		Expect(highest).To(BeNumerically(">=", 50))
		// The status shows the watermark of the newest success.
		var newest string
		var fence int64
		for _, j := range jobs {
			if ls := get(j).Status.LastSuccess; ls != nil && ls.FencingToken > fence {
				fence, newest = ls.FencingToken, ls.Watermark
			}
		}
		Expect(newest).NotTo(BeEmpty())
		mark, err := strconv.Atoi(newest)
		Expect(err).NotTo(HaveOccurred())
		Expect(mark).To(BeNumerically("<=", highest))
		Expect(mark).To(BeNumerically(">=", highest-5), "the newest success's mark trails the processed records by at most a batch")
	})
})
