package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// go test ./internal/controller/ -run TestCatchUp

func TestCatchUp(t *testing.T) {
	m := time.Minute
	job := plainJob("* * * * *")
	pod := func(occ time.Time) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: runpod.Name(job.Name, occ), Annotations: map[string]string{runpod.AnnotationScheduledTime: occ.Format(time.RFC3339)}}}
	}
	manual := pod(t0.Add(9 * m))
	manual.Name = job.Name + "-m-abc"
	type want struct {
		last                    time.Time
		missed, skippedBlackout int64
		recent                  []string // outcome@occurrence, newest first
		deferred                bool     // status.deferred left set
	}
	for _, c := range []struct {
		name     string
		last     time.Time
		deferred *time.Time
		deadline *int64
		pods     []corev1.Pod
		written  time.Time
		created  []time.Time
		now      time.Time
		want     want
	}{
		{name: "pods of consecutive occurrences (deferred status writes): nothing between",
			last: t0, pods: []corev1.Pod{pod(t0.Add(m)), pod(t0.Add(2 * m))}, now: t0.Add(2 * m),
			want: want{last: t0.Add(2 * m)}},
		{name: "a manual run's pod and a pod prepared ahead do not move the watermark",
			last: t0, pods: []corev1.Pod{manual, pod(t0.Add(3 * m))}, now: t0.Add(2 * m),
			want: want{last: t0}},
		{name: "a pass created t0+3m and lost its write: t0+1m and t0+2m were missed",
			last: t0, pods: []corev1.Pod{pod(t0.Add(3 * m))}, now: t0.Add(3 * m),
			want: want{last: t0.Add(3 * m), missed: 2, recent: []string{"Missed@" + t0.Add(2*m).Format(time.RFC3339)}}},
		{name: "the missed one between two pods is the newest without a pod",
			last: t0, pods: []corev1.Pod{pod(t0.Add(m)), pod(t0.Add(3 * m))}, now: t0.Add(4 * m),
			want: want{last: t0.Add(3 * m), missed: 1, recent: []string{"Missed@" + t0.Add(2*m).Format(time.RFC3339)}}},
		{name: "deferred t0+2m, superseded in the pass that started t0+3m (the soak's case)",
			last: t0, deferred: ptr.To(t0.Add(2 * m)), pods: []corev1.Pod{pod(t0.Add(3 * m))}, now: t0.Add(3 * m),
			// t0+1m was decided by the pass that deferred t0+2m: not counted again.
			want: want{last: t0.Add(3 * m), skippedBlackout: 1, recent: []string{"SkippedBlackout@" + t0.Add(2*m).Format(time.RFC3339)}}},
		{name: "deferred, then its deadline passed before t0+5m started: missed, with the one between",
			last: t0, deferred: ptr.To(t0.Add(2 * m)), deadline: ptr.To[int64](120), pods: []corev1.Pod{pod(t0.Add(5 * m))}, now: t0.Add(5 * m),
			want: want{last: t0.Add(5 * m), missed: 3, recent: []string{"Missed@" + t0.Add(4*m).Format(time.RFC3339), "Missed@" + t0.Add(2*m).Format(time.RFC3339)}}},
		{name: "the deferred occurrence started at last (its write lost): nothing to record",
			last: t0, deferred: ptr.To(t0.Add(2 * m)), pods: []corev1.Pod{pod(t0.Add(2 * m))}, now: t0.Add(2 * m),
			want: want{last: t0.Add(2 * m), deferred: true}},
		{name: "a pod the cache does not show yet, created by this manager",
			last: t0, created: []time.Time{t0.Add(m), t0.Add(2 * m)}, now: t0.Add(2 * m),
			want: want{last: t0.Add(2 * m)}},
		{name: "a status write that landed, the job cache behind it: nothing decided again",
			last: t0, written: t0.Add(3 * m), pods: []corev1.Pod{pod(t0.Add(m))}, now: t0.Add(3 * m),
			want: want{last: t0.Add(3 * m)}},
		{name: "never backwards",
			last: t0.Add(5 * m), pods: []corev1.Pod{pod(t0.Add(m))}, written: t0.Add(2 * m), now: t0.Add(6 * m),
			want: want{last: t0.Add(5 * m)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := job.DeepCopy()
			j.Spec.StartingDeadlineSeconds = c.deadline
			st := &v1alpha1.LockedCronJobStatus{LastScheduleTime: &metav1.Time{Time: c.last}, ObservedSchedule: "* * * * *|UTC|suspend=false"}
			if c.deferred != nil {
				st.Deferred = &metav1.Time{Time: *c.deferred}
			}
			p := &pass{job: j, status: st, now: c.now}
			p.catchUp(c.pods, c.written, c.created)
			if !st.LastScheduleTime.Time.Equal(c.want.last) {
				t.Errorf("lastScheduleTime %v, want %v", st.LastScheduleTime.Time, c.want.last)
			}
			if st.Counters.Missed != c.want.missed || st.Counters.SkippedBlackout != c.want.skippedBlackout {
				t.Errorf("missed %d, skippedBlackout %d; want %d, %d", st.Counters.Missed, st.Counters.SkippedBlackout, c.want.missed, c.want.skippedBlackout)
			}
			var recent []string
			for _, r := range st.Recent {
				recent = append(recent, r.Outcome+"@"+r.Occurrence.UTC().Format(time.RFC3339))
			}
			if !slices.Equal(recent, c.want.recent) {
				t.Errorf("status.recent %v, want %v", recent, c.want.recent)
			}
			if (st.Deferred != nil) != c.want.deferred {
				t.Errorf("status.deferred %v, want set: %t", st.Deferred, c.want.deferred)
			}
		})
	}
}
