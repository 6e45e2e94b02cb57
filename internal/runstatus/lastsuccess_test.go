package runstatus

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
)

func TestFoldLastSuccess(t *testing.T) {
	var st v1alpha1.LockedCronJobStatus
	fold := func(n int, rep report.Report) {
		rep.V = report.Version
		rep.Holder = "c/ns/p"
		rep.ReleasedAt = t0.Add(time.Duration(n)*time.Minute + 5*time.Second).Format("2006-01-02T15:04:05.000Z07:00")
		Fold(&st, Result{Pod: "p", Occurrence: t0.Add(time.Duration(n) * time.Minute), Report: rep})
	}
	at := func(n int, d time.Duration) *metav1.Time {
		m := metav1.NewTime(t0.Add(time.Duration(n)*time.Minute + d))
		return &m
	}
	// A failed run is never the last success.
	fold(0, report.Report{Outcome: report.Failed, FencingToken: 1, Watermark: "x"})
	if st.LastSuccess != nil {
		t.Fatalf("after a failure: %+v", st.LastSuccess)
	}
	fold(1, report.Report{Outcome: report.Succeeded, FencingToken: 10, Watermark: "10", PreviousWatermark: "5"})
	want := &v1alpha1.LastSuccess{Occurrence: at(1, 0), FinishedAt: at(1, 5*time.Second), FencingToken: 10, Holder: "c/ns/p", Watermark: "10"}
	if d := cmp.Diff(want, st.LastSuccess); d != "" {
		t.Fatalf("first success (-want +got):\n%s", d)
	}
	// LockLost (its mark was not stored) and an older success folded late change nothing.
	fold(2, report.Report{Outcome: report.LockLost, FencingToken: 20, Watermark: ""})
	fold(0, report.Report{Outcome: report.Succeeded, FencingToken: 5, Watermark: "5"})
	if d := cmp.Diff(want, st.LastSuccess); d != "" {
		t.Fatalf("after a lost and an older run (-want +got):\n%s", d)
	}
	// A success that stored nothing: the key's watermark is the one it was given.
	fold(3, report.Report{Outcome: report.Succeeded, FencingToken: 30, PreviousWatermark: "10"})
	if ls := st.LastSuccess; ls.FencingToken != 30 || ls.Watermark != "10" || !ls.Occurrence.Equal(at(3, 0)) {
		t.Fatalf("success without a new mark: %+v", ls)
	}
	// Never more than report.MaxWatermarkBytes (+ "…") in status.
	fold(4, report.Report{Outcome: report.Succeeded, FencingToken: 40, Watermark: strings.Repeat("é", 300)})
	if w := st.LastSuccess.Watermark; len(w) > report.MaxWatermarkBytes+len("…") || !strings.HasSuffix(w, "…") {
		t.Fatalf("watermark of %d bytes: %q", len(w), w)
	}
}

// The report's watermark fields survive the termination message round trip.
func TestLastSuccessFromPod(t *testing.T) {
	r := ResultOf(finishedPod("p", t0, corev1.PodSucceeded,
		`{"v":1,"outcome":"Succeeded","holder":"c/ns/p","fencingToken":4,"watermark":"2026-11-30#9","previousWatermark":"2026-11-29#3"}`))
	var st v1alpha1.LockedCronJobStatus
	Fold(&st, r)
	if ls := st.LastSuccess; ls == nil || ls.Watermark != "2026-11-30#9" || ls.FencingToken != 4 {
		t.Fatalf("%+v", ls)
	}
}
