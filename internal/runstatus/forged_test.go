package runstatus

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// unstorable finds what the API server refuses in a status (and with it the whole status
// write, every pass, while the pod that carries it waits to be counted): a date-time
// outside the years 0001–9999, or a recent record without its (required) occurrence.
var unstorable = regexp.MustCompile(`"[0-9]{5,}-|"-[0-9]+-|"occurrence":null`)

// TestForgedTimesNeverReachStatus: a pod's report and annotations are the job's to write
// (a job can write its own termination message; whoever may patch its pods, their
// annotations). A time in them that status cannot hold used to be folded in, and every
// status write of the job was refused from then on; a scheduled pod's occurrence that is
// not the one its name says, or a manual run's after its pod was made, moved
// lastSuccessfulTime into the future, where later runs could not move it.
func TestForgedTimesNeverReachStatus(t *testing.T) {
	const ok = `{"v":1,"outcome":"Succeeded","holder":"c/ns/p","fencingToken":4}`
	const future = "9999-12-31T23:59:59-23:59" // 10000-01-01T23:58:59Z
	owned := func(pod *corev1.Pod) *corev1.Pod {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "nightly", UID: "u1", Controller: ptrTrue()}}
		return pod
	}
	for name, pod := range map[string]*corev1.Pod{
		"report times past 9999": finishedPod(runpod.Name("nightly", t0), t0, corev1.PodSucceeded,
			`{"v":1,"outcome":"Succeeded","holder":"c/ns/p","fencingToken":4,"acquiredAt":"`+future+`","startedAt":"`+future+`","releasedAt":"`+future+`"}`),
		"occurrence annotation past 9999": func() *corev1.Pod {
			p := finishedPod(runpod.Name("nightly", t0), t0, corev1.PodSucceeded, ok)
			p.Annotations[runpod.AnnotationScheduledTime] = future
			return p
		}(),
		"occurrence annotation before year 0": func() *corev1.Pod {
			p := finishedPod(runpod.Name("nightly", t0), t0, corev1.PodSucceeded, ok)
			p.Annotations[runpod.AnnotationScheduledTime] = "0000-01-01T00:00:00+01:00" // -0001-12-31T23:00:00Z
			return p
		}(),
		"occurrence annotation removed": func() *corev1.Pod {
			p := finishedPod(runpod.Name("nightly", t0), t0, corev1.PodSucceeded, ok)
			delete(p.Annotations, runpod.AnnotationScheduledTime)
			return p
		}(),
		"a scheduled pod's occurrence not its name's": owned(finishedPod(runpod.Name("nightly", t0), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), corev1.PodSucceeded, ok)),
		"a manual run's pod, its label removed, with an occurrence after it was made": func() *corev1.Pod {
			p := finishedPod("nightly-m-abc", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), corev1.PodSucceeded, ok)
			p.CreationTimestamp = metav1.NewTime(t0)
			return owned(p)
		}(),
		"a manual run's occurrence after its pod was made": func() *corev1.Pod {
			p := finishedPod("nightly-m-abc", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), corev1.PodSucceeded, ok)
			p.Labels = map[string]string{runpod.LabelRunRequest: "fix-1"}
			p.CreationTimestamp = metav1.NewTime(t0)
			return owned(p)
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			st := v1alpha1.LockedCronJobStatus{LastSuccessfulTime: &metav1.Time{Time: t0.Add(-time.Hour)}}
			Fold(&st, ResultOf(pod))
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if m := unstorable.Find(b); m != nil {
				t.Fatalf("status holds %s, which the API server refuses: %s", m, b)
			}
			if st.Counters.Runs != 1 || st.Counters.Succeeded != 1 {
				t.Errorf("counters %+v: the run is counted all the same", st.Counters)
			}
			if st.LastSuccessfulTime.After(t0) {
				t.Errorf("lastSuccessfulTime %s: after the occurrence the pod was made for", st.LastSuccessfulTime.UTC())
			}
		})
	}
}

func ptrTrue() *bool { b := true; return &b }

// TestManualOccurrenceWithinClockSkewIsKept: the controller stamps a manual run's time by
// its clock, the API server the pod's creation by its own; a clock a little ahead is not
// a forgery, and the occurrence stays the one lockwrap ran (LOCKEDCRON_OCCURRENCE).
func TestManualOccurrenceWithinClockSkewIsKept(t *testing.T) {
	p := finishedPod("nightly-m-abc", t0.Add(2*time.Second), corev1.PodSucceeded, `{"v":1,"outcome":"Succeeded"}`)
	p.Labels = map[string]string{runpod.LabelRunRequest: "fix-1"}
	p.CreationTimestamp = metav1.NewTime(t0)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob", Name: "nightly", UID: "u1", Controller: ptrTrue()}}
	if occ, err := Occurrence(p); err != nil || !occ.Equal(t0.Add(2*time.Second)) {
		t.Errorf("Occurrence = %v, %v; want %v", occ, err, t0.Add(2*time.Second))
	}
}

// TestHolderIsOneLineInStatus: status.lastHolder.identity is the LAST HOLDER column of
// `kubectl get lcj -A`, and kubectl escapes only ESC and CR in its cells. A job writes its
// own report: a newline in its holder (or in the heldBy of a skip, read from the tenant's
// Redis) made a row of its own in an admin's table, a forged job of another namespace.
// Report.Printable kept newlines and tabs, and so did Fold. A holder reaches status on one
// line (lastHolder, recent[].holder, lastSuccess.holder), with or without Printable.
func TestHolderIsOneLineInStatus(t *testing.T) {
	forged := "cluster-1/team-a/nightly-1/uid\nkube-system   backup   0 0 * * *   False\t0   cluster-1/kube-system/backup-1/uid"
	quoted, _ := json.Marshal(forged)
	for name, msg := range map[string]string{
		"holder": `{"v":1,"outcome":"Succeeded","holder":` + string(quoted) + `,"fencingToken":7}`,
		"heldBy": `{"v":1,"outcome":"SkippedContention","holder":"c/team-a/p/u","heldBy":` + string(quoted) + `}`,
	} {
		for _, printed := range []bool{true, false} {
			res := ResultOf(finishedPod(runpod.Name("nightly", t0), t0, corev1.PodSucceeded, msg))
			if printed {
				res.Report = res.Report.Printable() // as the controller's count does
			}
			var st v1alpha1.LockedCronJobStatus
			Fold(&st, res)
			if st.LastHolder == nil || len(st.Recent) != 1 {
				t.Fatalf("%s: no last holder or record: %+v", name, st)
			}
			shown := map[string]string{"lastHolder.identity": st.LastHolder.Identity, "recent[0].holder": st.Recent[0].Holder}
			if st.LastSuccess != nil {
				shown["lastSuccess.holder"] = st.LastSuccess.Holder
			}
			for field, v := range shown {
				if strings.ContainsAny(v, "\n\t") || !strings.Contains(v, `\u000a`) {
					t.Errorf("%s (Printable %v): status.%s %q: want one line, the newline escaped", name, printed, field, v)
				}
			}
		}
	}
}

// TestWrappedContainerAnnotationEditedReadsTheReport: the report is the termination
// message of the container lockwrap wraps, which the pod's spec says (its command is
// lockwrap's); the annotation naming it can be removed or pointed elsewhere by whoever may
// patch the pod, and the run was then counted missed ("pod ended before its job container
// started") or read another container's message.
func TestWrappedContainerAnnotationEditedReadsTheReport(t *testing.T) {
	const ok = `{"v":1,"outcome":"Succeeded","holder":"c/ns/p","fencingToken":4}`
	for name, edit := range map[string]func(map[string]string){
		"annotation removed": func(a map[string]string) { delete(a, runpod.AnnotationWrappedContainer) },
		"annotation forged":  func(a map[string]string) { a[runpod.AnnotationWrappedContainer] = "sidecar" },
	} {
		pod := finishedPod("p", t0, corev1.PodSucceeded, ok)
		pod.Spec.Containers = []corev1.Container{{Name: "sidecar", Command: []string{"envoy"}}, {Name: "job", Command: []string{runpod.WrapperPath, "--", "date"}}}
		edit(pod.Annotations)
		r := ResultOf(pod)
		if r.Invalid != nil || r.Report.Outcome != report.Succeeded || r.Report.FencingToken != 4 {
			t.Errorf("%s: ResultOf = %+v, want the job container's report (Succeeded, fence 4)", name, r)
		}
	}
}
