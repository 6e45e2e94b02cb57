package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// lostStatusWrite is the manager's client whose first status write that lose picks never
// lands: the pass that made it has already created its pod, and its decisions are gone
// (the operator pod deleted mid-pass, or a conflict). The soak found it: an occurrence
// deferred by a blackout window, then superseded in the pass that started the next one,
// was in no counter.
type lostStatusWrite struct {
	client.Client
	lose  func(*v1alpha1.LockedCronJob) bool
	once  *sync.Once
	fired *atomic.Bool
	// landed: the write is stored and its answer lost (a reset connection), not refused.
	landed bool
}

func (c lostStatusWrite) Status() client.SubResourceWriter {
	return lostStatus{c.Client.Status(), c}
}

type lostStatus struct {
	client.SubResourceWriter
	c lostStatusWrite
}

func (s lostStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if job, ok := obj.(*v1alpha1.LockedCronJob); ok && s.c.lose(job) {
		lost := false
		s.c.once.Do(func() { lost = true })
		if lost {
			s.c.fired.Store(true)
			if s.c.landed {
				if err := s.SubResourceWriter.Update(ctx, obj, opts...); err != nil {
					return err
				}
				return errors.New("http2: client connection lost")
			}
			return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "lockedcronjobs"}, job.Name, context.Canceled)
		}
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

var _ = Describe("a pass whose status write is lost after it created a pod", func() {
	It("still accounts for the occurrences it decided before that pod's", func() {
		var fired atomic.Bool
		startManagerWrapped(clock.RealClock{}, CacheOptions(), func(c client.Client) client.Client {
			return lostStatusWrite{Client: c, once: &sync.Once{}, fired: &fired, lose: func(j *v1alpha1.LockedCronJob) bool {
				// The pass that ends the blackout: it records the second deferred
				// occurrence superseded and starts the next one.
				return j.Status.Counters.SkippedBlackout == 2 && len(j.Status.Active) > 0
			}}
		})
		ns := newNamespace()
		// A one-off window over two occurrences, B+4 and B+6 (Defer): B+6 supersedes B+4,
		// and B+8, when the window has closed, supersedes B+6 and starts. (B and B+2 run
		// before it: B is the first pass of a fresh manager, slow on a loaded machine.)
		b := time.Now().Truncate(2 * time.Second).Add(6 * time.Second)
		start, end := metav1.NewTime(b.Add(3*time.Second)), metav1.NewTime(b.Add(8*time.Second))
		job := newJob(ns, "lost-write", "*/2 * * * * *")
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Policy: v1alpha1.BlackoutDefer, Windows: []v1alpha1.BlackoutWindow{{Name: "freeze", Start: &start, End: &end}}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		Eventually(fired.Load, 20*time.Second, 50*time.Millisecond).Should(BeTrue(), "the pass that ends the blackout did not write status")
		Expect(podsOf(job)).To(ContainElement(HaveField("Name", runpod.Name(job.Name, b.Add(8*time.Second)))), "the pass whose write was lost created its pod")
		Eventually(func() int64 { return getJob(job).Status.Counters.SkippedBlackout }, 5*time.Second, 50*time.Millisecond).
			Should(Equal(int64(2)), "occurrence %s was deferred, then superseded: it must be counted", b.Add(6*time.Second).UTC().Format(time.RFC3339))
		Consistently(func() int64 { return getJob(job).Status.Counters.SkippedBlackout }, 2*time.Second, 100*time.Millisecond).Should(Equal(int64(2)))
	})
})

var _ = Describe("a pass whose status write lands but whose answer is lost", func() {
	// The next pass finds the pods it counted in status.countedPods and settles them
	// without counting them again: it tells what the lost answer's pass had to tell (the
	// run's Event, lockedcron_runs_total), once (lostanswer.go). Here with the real API
	// server and the manager's cache: the status it reads back is the one written.
	It("tells the runs it counted once", func() {
		var fired atomic.Bool
		startManagerWrapped(clock.RealClock{}, CacheOptions(), func(c client.Client) client.Client {
			return lostStatusWrite{Client: c, once: &sync.Once{}, fired: &fired, landed: true, lose: func(j *v1alpha1.LockedCronJob) bool {
				return j.Status.Counters.Succeeded == 1
			}}
		})
		ns := newNamespace()
		job := newJob(ns, "lost-answer", rarely)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		ran := succeededRunOf(job, "its run")

		Eventually(fired.Load, 15*time.Second, 50*time.Millisecond).Should(BeTrue(), "no pass wrote the run's count")
		Eventually(func() string {
			p, err := getPod(ns, ran.Name)
			Expect(err).NotTo(HaveOccurred())
			return p.Labels[runpod.LabelCounted]
		}, 10*time.Second, 50*time.Millisecond).Should(Equal("true"), "the pod settled")
		runs := func() float64 {
			return metricValue("lockedcron_runs_total", map[string]string{"namespace": ns, "name": "lost-answer", "outcome": "Succeeded"})
		}
		Eventually(runs, 5*time.Second, 50*time.Millisecond).Should(Equal(1.0), "the run counted in lockedcron_runs_total")
		Eventually(func() []eventsv1.Event { return eventsAbout(job, string(report.Succeeded)) }, 10*time.Second, 100*time.Millisecond).
			Should(HaveLen(1), "the run's Event")
		Consistently(runs, 2*time.Second, 100*time.Millisecond).Should(Equal(1.0), "the run counted again")
		Expect(getJob(job).Status.Counters.Succeeded).To(Equal(int64(1)))
	})
})
