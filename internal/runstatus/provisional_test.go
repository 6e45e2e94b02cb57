package runstatus

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/report"
)

// TestProvisionalReportIsCountedAsARunNotRecorded: a pod whose lockwrap the kubelet
// SIGKILLed (137) after its command exited leaves the provisional report lockwrap wrote at
// that exit (wrapper.Provisional; here as lockwrap writes it). It is counted a run that
// ran, LockLost (nothing recorded its success: another holder may run the occurrence
// again), with its holder and fencing token: not an Error "without a valid report", and
// never a success (no lastSuccess, no lastSuccessfulTime).
func TestProvisionalReportIsCountedAsARunNotRecorded(t *testing.T) {
	msg := `{"v":1,"outcome":"LockLost","occurrence":"2026-11-30T02:00:00Z","key":"k","holder":"c/ns/p/uid","fencingToken":9,` +
		`"attempts":1,"acquiredAt":"2026-11-30T02:00:00.010Z","startedAt":"2026-11-30T02:00:00.012Z","lockLost":true,` +
		`"message":"lockwrap was ended before its final report: this one was written when the command exited 0 (at 2026-11-30T02:00:01.000Z), before succeeded was recorded in the ledger and the lock released; if nothing recorded it, the lock expires by itself and another holder may run this occurrence again"}`
	pod := finishedPod("p", t0, corev1.PodFailed, msg)
	pod.Status.ContainerStatuses[1].State.Terminated.ExitCode = 137
	r := ResultOf(pod)
	if r.Invalid != nil || r.Report.Outcome != report.LockLost || !r.Report.LockLost || r.StartedAt.IsZero() {
		t.Fatalf("%+v", r)
	}
	var st v1alpha1.LockedCronJobStatus
	Fold(&st, r)
	if want := (v1alpha1.Counters{Runs: 1, Failed: 1, LockLost: 1}); st.Counters != want {
		t.Errorf("counters %+v, want %+v", st.Counters, want)
	}
	if st.LastSuccess != nil || st.LastSuccessfulTime != nil {
		t.Errorf("a run whose success nothing recorded became the last success: %+v %v", st.LastSuccess, st.LastSuccessfulTime)
	}
	if st.LastHolder == nil || st.LastHolder.Identity != "c/ns/p/uid" || st.LastHolder.FencingToken != 9 || st.LastHolder.ReleasedAt != nil {
		t.Errorf("last holder %+v", st.LastHolder)
	}
	if len(st.Recent) != 1 || st.Recent[0].Outcome != string(report.LockLost) || !strings.Contains(st.Recent[0].Message, "before its final report") {
		t.Errorf("recent %+v", st.Recent)
	}
}
