//go:build e2e

package e2e

import (
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/test/e2e/jobimage/audit"
)

// Manual runs (issue 11) requested with plain kubectl annotate: one requested while the
// scheduled run holds the lock waits for it (the audit shows no overlap), and the same
// request id twice makes one run.
var _ = Describe("manual runs on a real cluster", Ordered, func() {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	var j job
	var at time.Time

	BeforeAll(func() {
		// One scheduled occurrence, far enough ahead for the pod to be created and the
		// image started on a loaded node; the job holds the lock for 15s.
		at = time.Now().Add(40 * time.Second).Truncate(time.Second).UTC()
		j = job{ns: "e2e-manual-" + suffix, name: "adhoc", key: "e2e/manual-" + suffix,
			ttl: "10s", kill: "2s", sleep: "15s", label: "manual-" + suffix}
		j.schedule = fmt.Sprintf("%d %d %d * * *", at.Second(), at.Minute(), at.Hour())
	})
	AfterEach(func() { dumpOnFailure(j.ns) })
	AfterAll(func() { _, _ = kubectl("delete", "namespace", j.ns, "--wait=false") })

	annotate := func(args ...string) {
		out, err := kubectl(append([]string{"-n", j.ns, "annotate", "lcj", j.name, "--overwrite"}, args...)...)
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	}
	scheduledPod := func() string { return runpod.Name(j.name, at) }
	manualPod := runpod.ManualName("adhoc", "fix-1")

	It("starts a manual run requested while the scheduled run holds the lock only after it", func() {
		apply(j)
		// The scheduled run has started its job: it holds the lock.
		Eventually(func() []string {
			var pods []string
			for _, r := range runs(j.label) {
				pods = append(pods, r.Pod)
			}
			return pods
		}, 3*time.Minute, 200*time.Millisecond).Should(ContainElement(scheduledPod()))

		annotate(v1alpha1.AnnotationRunRequest + "=fix-1")
		Eventually(func() string {
			rr := get(j).Status.LastRunRequest
			if rr == nil {
				return ""
			}
			return rr.ID + " " + rr.Pod
		}, time.Minute, 200*time.Millisecond).Should(Equal("fix-1 " + manualPod))

		var rs []audit.Run
		Eventually(func() int {
			rs = nil
			for _, r := range runs(j.label) {
				if r.Finished {
					rs = append(rs, r)
				}
			}
			return len(rs)
		}, 4*time.Minute, time.Second).Should(Equal(2), "the scheduled run and the manual run, both finished")
		Expect(rs[0].Pod).To(Equal(scheduledPod()))
		Expect(rs[1].Pod).To(Equal(manualPod))
		rr := get(j).Status.LastRunRequest
		Expect(rr.HandledAt.Time).To(BeTemporally("<", rs[0].End), "the request came while the scheduled run held the lock")
		Expect(rs[1].Start).To(BeTemporally(">=", rs[0].End), "the manual run started after the scheduled one ended")
		Expect(audit.Overlaps(rs, time.Now())).To(BeEmpty(), "runs overlapped")
		Expect(rs[1].FencingToken).To(BeNumerically(">", rs[0].FencingToken))

		// Status: counted like any run, shown as manual, who asked.
		Eventually(func() []v1alpha1.RunRecord { return get(j).Status.Recent }, time.Minute, time.Second).Should(ContainElement(
			And(HaveField("Pod", manualPod), HaveField("Trigger", v1alpha1.TriggerManual), HaveField("Outcome", "Succeeded"))))
		st := get(j).Status
		Expect(st.Counters.Runs).To(Equal(int64(2)))
		Expect(st.LastScheduleTime.Time).To(BeTemporally("==", at), "the manual run is no scheduled occurrence")
		Expect(rr.RequestedBy).To(Equal("kubectl-annotate"))

		// What a user sees (docs/manual-runs.md quotes it).
		for _, args := range [][]string{
			{"get", "lcj", j.name, "-o", "jsonpath={.status.lastRunRequest}"},
			{"get", "lcj", j.name, "-o", `jsonpath={range .status.recent[*]}{.occurrence}{"\t"}{.trigger}{"\t"}{.outcome}{"\t"}{.pod}{"\n"}{end}`},
			{"get", "events", "--field-selector", "involvedObject.kind=LockedCronJob", "-o", "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message"},
			{"get", "pods", "-L", runpod.LabelRunRequest},
		} {
			out, err := kubectl(append([]string{"-n", j.ns}, args...)...)
			Expect(err).NotTo(HaveOccurred(), out)
			fmt.Fprintf(GinkgoWriter, "$ kubectl -n %s %v\n%s\n", j.ns, args, out)
		}
	})

	It("makes one run for two requests with the same id", func() {
		// The same id again: removed and set again, with another contention (each a
		// change the controller is woken by). Its pod, counted, is gone first (history
		// limits prune such pods): with it kept, a second pod could not have been made
		// under its name anyway, and the spec could not fail.
		var first corev1.Pod
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: j.ns, Name: manualPod}, &first)).To(Succeed())
		Expect(k8s.Delete(ctx, &first)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: j.ns, Name: manualPod}, &corev1.Pod{}))
		}, time.Minute, 250*time.Millisecond).Should(BeTrue())
		annotate(v1alpha1.AnnotationRunRequest + "-")
		annotate(v1alpha1.AnnotationRunRequest+"=fix-1", v1alpha1.AnnotationRunContention+"=FailFast")
		Consistently(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{runpod.LabelRunRequest: "fix-1"})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty(), "a pod made for fix-1 again")
			n := 0
			for _, r := range runs(j.label) {
				if r.Pod == manualPod {
					n++
				}
			}
			g.Expect(n).To(Equal(1), "runs of request fix-1")
			g.Expect(get(j).Status.LastRunRequest.Contention).To(Equal(v1alpha1.ManualContentionWait), "the request handled is the first one")
		}, 15*time.Second, time.Second).Should(Succeed())
		Expect(get(j).Status.Counters.Runs).To(Equal(int64(2)))
	})
})
