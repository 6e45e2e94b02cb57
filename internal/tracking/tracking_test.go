package tracking

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/internal/runpod"
)

var occ = time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)

func pod(mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name:              "job-1",
		CreationTimestamp: metav1.NewTime(occ.Add(time.Second)),
		Annotations:       map[string]string{runpod.AnnotationWrappedContainer: "job"},
	}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func waiting(reason, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
}

func running(restarts int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		cs := corev1.ContainerStatus{Name: "job", RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		if restarts > 0 {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	}
}

func exited(code int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	}
}

// endedAt: the wrapped container ended at `at` with code, the pod's restartPolicy Never.
func endedAt(at time.Time, code int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "job",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(at)}}})
	}
}

// endedWith: the wrapped container ended at `at` with code and report msg, the pod's
// restartPolicy Never.
func endedWith(at time.Time, code int32, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		endedAt(at, code)(p)
		p.Status.ContainerStatuses[len(p.Status.ContainerStatuses)-1].State.Terminated.Message = msg
	}
}

// sidecarRunning: another regular container of the pod runs.
func sidecarRunning(p *corev1.Pod) {
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "proxy",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func deleted(at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: at} }
}

// onNode: bound to a node, whose kubelet may start it before the cache shows it.
func onNode(p *corev1.Pod) { p.Spec.NodeName = "node-1" }

// endedOnNode: the kubelet's last word on a pod whose job container never ran.
func endedOnNode(p *corev1.Pod) {
	p.Spec.NodeName = "node-1"
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
}

// withdrawnFor: the controller withdrew the pod (Withdraw) for why.
func withdrawnFor(why string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations[runpod.AnnotationWithdrawn] = why }
}

// withdrawnAhead: prepared ahead of its instant, withdrawn before it.
func withdrawnAhead(p *corev1.Pod) {
	p.Annotations[runpod.AnnotationWithdrawnAhead] = "suspended"
}

// reported: the wrapped container exited with a report.
func reported(code int32, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}
	}
}

// prepared: created a minute before its occurrence by a prepare pass, which marks it
// (prepareAheadSeconds).
func prepared(p *corev1.Pod) {
	p.CreationTimestamp = metav1.NewTime(occ.Add(-time.Minute))
	metav1.SetMetaDataAnnotation(&p.ObjectMeta, runpod.AnnotationPreparedAhead, "true")
}

// createdAt: the API server stamped its creation at `at` (its clock, not the controller's).
func createdAt(at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(at) }
}

// evicted asks for the pod's graceful deletion at `at`, with the grace period a kubelet
// gives (deletionTimestamp = the ask + grace).
func evicted(at time.Time, grace int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: at.Add(time.Duration(grace) * time.Second)}, &grace
	}
}

func unschedulable(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
}

func TestDecide(t *testing.T) {
	twoMin := 2 * time.Minute
	for _, c := range []struct {
		name    string
		pod     *corev1.Pod
		in      Input
		want    Verdict
		reason  []string // substrings
		recheck time.Time
	}{
		{"finished: fold its report", pod(phase(corev1.PodSucceeded)), Input{Now: occ.Add(time.Hour)}, Report, nil, time.Time{}},
		{"failed: fold its report", pod(phase(corev1.PodFailed)), Input{Now: occ.Add(48 * time.Hour)}, Report, nil, time.Time{}},
		{"finished and deleted: still its report", pod(phase(corev1.PodSucceeded), exited(0), deleted(occ)), Input{Now: occ.Add(time.Hour)}, Report, nil, time.Time{}},
		{"pending within the deadline", pod(waiting("ImagePullBackOff", "back-off pulling")), Input{Now: occ.Add(time.Minute), StartingDeadline: &twoMin}, Active, nil, occ.Add(twoMin)},
		{"pending past the deadline: the pod's own reason", pod(waiting("ImagePullBackOff", "back-off pulling \"nope\"")), Input{Now: occ.Add(twoMin), StartingDeadline: &twoMin},
			Withdraw, []string{"2026-11-30T02:02:00Z", "startingDeadlineSeconds", `ImagePullBackOff: back-off pulling "nope"`}, time.Time{}},
		{"unschedulable past the default pending timeout", pod(unschedulable), Input{Now: occ.Add(time.Hour + time.Second)},
			Withdraw, []string{"pending timeout (1h0m0s)", "Unschedulable: 0/1 nodes are available"}, time.Time{}},
		{"default pending timeout counts from creation", pod(unschedulable, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(occ.Add(10 * time.Minute)) }),
			Input{Now: occ.Add(time.Hour + time.Second)}, Active, nil, occ.Add(70 * time.Minute)},
		{"init container rejected", pod(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "lockedcron-install", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root"}}}}
		}), Input{Now: occ.Add(time.Hour), StartingDeadline: &twoMin}, Withdraw, []string{"init container lockedcron-install: CreateContainerConfigError: container has runAsNonRoot"}, time.Time{}},
		{"running past the deadline: left alone", pod(running(0)), Input{Now: occ.Add(time.Hour), StartingDeadline: &twoMin}, Active, nil, time.Time{}},
		{"not started when a blackout is in effect", pod(waiting("ContainerCreating", "")), Input{Now: occ.Add(time.Second), Blackout: "Deployment/web is rolling out"},
			Withdraw, []string{"a blackout began before its job started: Deployment/web is rolling out"}, time.Time{}},
		// The soak found it: a pod whose job started 20 ms before a blackout window, its
		// Running status not yet seen, was counted missed and deleted; it reported Failed
		// (exit 143) a second later. On a node it is withdrawn: deleted, counted once the
		// kubelet has said what happened.
		{"not started on its node when a blackout is in effect: withdrawn", pod(waiting("ContainerCreating", ""), onNode), Input{Now: occ.Add(time.Second), Blackout: "window"},
			Withdraw, []string{"a blackout began before its job started: window"}, time.Time{}},
		{"pending on its node past the deadline: withdrawn", pod(waiting("ImagePullBackOff", "back-off"), onNode), Input{Now: occ.Add(twoMin), StartingDeadline: &twoMin},
			Withdraw, []string{"startingDeadlineSeconds", "ImagePullBackOff: back-off"}, time.Time{}},
		{"withdrawn, then the kubelet's word: it never started, for the withdrawal's reason", pod(endedOnNode, withdrawnFor("a blackout began before its job started: window"), deleted(occ.Add(time.Minute))),
			Input{Now: occ.Add(time.Minute)}, NeverStarted, []string{"deleted before its job started: a blackout began before its job started: window"}, time.Time{}},
		{"withdrawn, then the kubelet's word: it ran", pod(onNode, withdrawnFor("window"), phase(corev1.PodFailed), exited(143), deleted(occ.Add(time.Minute))),
			Input{Now: occ.Add(time.Minute)}, Report, nil, time.Time{}},
		{"running when a blackout is in effect: left alone", pod(running(0)), Input{Now: occ.Add(time.Second), Blackout: "window"}, Active, nil, time.Time{}},
		// Unbound when deleted: the API server binds no pod being deleted, so it never
		// started (the cache may show a pod unbound that is bound: only the deletion is sure).
		{"withdrawn while unbound: never started, for the withdrawal's reason", pod(unschedulable, withdrawnFor("a blackout began before its job started: window"), deleted(occ.Add(time.Minute))),
			Input{Now: occ.Add(time.Minute)}, NeverStarted, []string{"deleted before its job started: a blackout began before its job started: window"}, time.Time{}},
		{"deleted before it started", pod(unschedulable, deleted(occ.Add(time.Minute))), Input{Now: occ.Add(time.Minute)},
			NeverStarted, []string{"deleted before its job started", "Unschedulable"}, time.Time{}},
		// The soak found it: a pod deleted while its job ran, whose Running status the
		// controller had not seen yet, was counted missed; its report came a second later.
		{"deleted on its node before the cache shows it started: waits for the kubelet's word", pod(waiting("ContainerCreating", ""), onNode, deleted(occ.Add(time.Minute))),
			Input{Now: occ.Add(time.Minute)}, Active, nil, occ.Add(time.Minute + TerminatingGrace)},
		{"deleted on its node, the kubelet's word: it ran", pod(onNode, phase(corev1.PodFailed), exited(143), deleted(occ.Add(time.Minute))), Input{Now: occ.Add(time.Minute)}, Report, nil, time.Time{}},
		{"deleted on its node, the kubelet's word: it never started", pod(endedOnNode, deleted(occ.Add(time.Minute))), Input{Now: occ.Add(time.Minute)},
			NeverStarted, []string{"deleted before its job started"}, time.Time{}},
		{"deleted on its node, no word from the kubelet in time", pod(waiting("ContainerCreating", ""), onNode, deleted(occ.Add(time.Minute))),
			Input{Now: occ.Add(time.Minute + TerminatingGrace)}, NeverStarted, []string{"deleted before its job started"}, time.Time{}},
		{"deleted while running: waits for the report", pod(running(0), deleted(occ.Add(time.Minute))), Input{Now: occ.Add(time.Minute)}, Active, nil, occ.Add(time.Minute + TerminatingGrace)},
		{"deleted while running, no report in time: Lost", pod(running(0), deleted(occ.Add(time.Minute))), Input{Now: occ.Add(time.Minute + TerminatingGrace)},
			Lost, []string{"deleted after its job started", "node lost"}, time.Time{}},
		// Prepared ahead, withdrawn before its instant: its lockwrap may have started the
		// job all the same (the kubelet acted after the instant). Counted only if it ran.
		{"withdrawn ahead, waiting for its instant: waits for the kubelet's word", pod(running(0), onNode, withdrawnAhead, deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Active, nil, occ.Add(-time.Second + TerminatingGrace)},
		{"withdrawn ahead, not yet deleted: waits", pod(running(0), onNode, withdrawnAhead), Input{Now: occ.Add(-time.Second)}, Active, nil, time.Time{}},
		{"withdrawn ahead, interrupted while waiting: released uncounted", pod(onNode, withdrawnAhead, phase(corev1.PodFailed), reported(70, `{"v":1,"outcome":"Interrupted","message":"interrupted by terminated while waiting for the occurrence's instant; the command did not run"}`), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Withdrawn, nil, time.Time{}},
		{"withdrawn ahead, found the lock held: released uncounted", pod(onNode, withdrawnAhead, phase(corev1.PodSucceeded), reported(0, `{"v":1,"outcome":"SkippedContention","heldBy":"x"}`), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Withdrawn, nil, time.Time{}},
		{"withdrawn ahead, its job ran after the instant: its report counts", pod(onNode, withdrawnAhead, phase(corev1.PodFailed), reported(143, `{"v":1,"outcome":"Failed","exitCode":143,"startedAt":"2026-11-30T02:00:00.01Z"}`), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Report, nil, time.Time{}},
		{"withdrawn ahead, an error after its job started: its report counts", pod(onNode, withdrawnAhead, phase(corev1.PodFailed), reported(70, `{"v":1,"outcome":"Error","startedAt":"2026-11-30T02:00:00.01Z"}`), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Report, nil, time.Time{}},
		{"withdrawn ahead, ended without a readable report: counted (it may have run)", pod(onNode, withdrawnAhead, phase(corev1.PodFailed), exited(137), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Report, nil, time.Time{}},
		{"withdrawn ahead, an earlier attempt ran the job (restartPolicy OnFailure), the last was interrupted: its report counts",
			pod(onNode, withdrawnAhead, phase(corev1.PodFailed), reported(70, `{"v":1,"outcome":"Interrupted"}`), func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].RestartCount = 1
				p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1,
					Message: `{"v":1,"outcome":"Failed","exitCode":1,"startedAt":"2026-11-30T02:00:00.01Z"}`}
			}, deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Minute)}, Report, nil, time.Time{}},
		// Its node lost, the pod GC failed it as its kubelet last said (running): no word
		// on whether the job ran. As a silent kubelet: Lost, no sooner than the grace and
		// the instant. It was released uncounted at once, though the job may have run.
		{"withdrawn ahead, failed by the pod GC while running, within the grace: waits", pod(running(0), onNode, withdrawnAhead, phase(corev1.PodFailed), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(10 * time.Second)}, Active, nil, occ.Add(-time.Second + TerminatingGrace)},
		{"withdrawn ahead, failed by the pod GC while running, past the grace: Lost", pod(running(0), onNode, withdrawnAhead, phase(corev1.PodFailed), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(TerminatingGrace)}, Lost, []string{"whether the job ran"}, time.Time{}},
		{"withdrawn ahead, its container never started: released uncounted", pod(endedOnNode, withdrawnAhead, deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Withdrawn, nil, time.Time{}},
		{"withdrawn ahead, unscheduled: released at once", pod(unschedulable, withdrawnAhead, deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(-time.Second)}, Withdrawn, nil, time.Time{}},
		{"withdrawn ahead, no word from its kubelet in time: Lost (it may have run)", pod(running(0), onNode, withdrawnAhead, deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(TerminatingGrace)}, Lost, []string{"withdrawn before its instant", "whether the job ran"}, time.Time{}},
		// Withdrawn well ahead (prepareAheadSeconds up to 300) from a node gone silent: the
		// grace ends before the instant, before which lockwrap runs nothing. Counted Lost
		// then, the occurrence was counted again when it came (a second pod, or missed).
		{"withdrawn ahead, silent past the grace but before its instant: waits for the instant", pod(running(0), onNode, withdrawnAhead, deleted(occ.Add(-2*time.Minute))),
			Input{Now: occ.Add(-time.Minute)}, Active, nil, occ},
		{"withdrawn ahead, silent past the grace and the instant: Lost", pod(running(0), onNode, withdrawnAhead, deleted(occ.Add(-2*time.Minute))),
			Input{Now: occ}, Lost, []string{"withdrawn before its instant", "whether the job ran"}, time.Time{}},
		// Prepared ahead and taken away before its instant by someone else (a drain,
		// preemption, kubectl delete, its kubelet): its occurrence has not come, so it is
		// withdrawn as the controller's own withdrawals, not counted. Counted, it was
		// counted again when the schedule ran the occurrence in a second pod.
		{"prepared, deleted unscheduled before its instant: withdrawn ahead", pod(prepared, unschedulable, deleted(occ.Add(-30*time.Second))),
			Input{Now: occ.Add(-30 * time.Second)}, WithdrawAhead, []string{"deleted before its instant"}, time.Time{}},
		{"prepared, evicted from its node before its instant: withdrawn ahead", pod(prepared, running(0), onNode, evicted(occ.Add(-10*time.Second), 30)),
			Input{Now: occ.Add(-5 * time.Second)}, WithdrawAhead, []string{"deleted before its instant"}, time.Time{}},
		// Once the instant has come on the controller's clock the occurrence may be decided
		// (lastScheduleTime moved to it): a pod withdrawn then would leave it neither run
		// nor counted. It counts as its occurrence, as any pod.
		{"prepared, evicted before its instant, seen after it: as any pod", pod(prepared, running(0), onNode, evicted(occ.Add(-10*time.Second), 30)),
			Input{Now: occ.Add(5 * time.Second)}, Active, nil, occ.Add(20*time.Second + TerminatingGrace)},
		{"created at the instant, the API server's clock behind, withdrawn for a blackout: as any pod", pod(unschedulable, withdrawnFor("window"), deleted(occ.Add(-time.Second)),
			func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(occ.Add(-time.Second)) }),
			Input{Now: occ.Add(time.Second)}, NeverStarted, []string{"deleted before its job started: window"}, time.Time{}},
		// A prepared pod that ended before the controller's instant with another word than
		// lockwrap's Interrupted is its occurrence's outcome: replaced, it would run again
		// (a skip on a node whose clock is ahead), or fail again and again (a kubelet's refusal).
		{"prepared, refused by its kubelet before its instant (OutOfcpu): its outcome, not replaced", pod(prepared, onNode, phase(corev1.PodFailed),
			func(p *corev1.Pod) { p.Status.Reason = "OutOfcpu" }), Input{Now: occ.Add(-10 * time.Second)}, Report, nil, time.Time{}},
		{"prepared, skipped before the controller's instant (a node's clock ahead): its outcome", pod(prepared, onNode, phase(corev1.PodSucceeded), reported(0, `{"v":1,"outcome":"SkippedContention","heldBy":"x"}`)),
			Input{Now: occ.Add(-time.Second)}, Report, nil, time.Time{}},
		// Deleted, it is gone once counted: counted before its instant, its occurrence got
		// a new pod at the instant, counted again. It is its occurrence's outcome at the
		// instant, its finalizer kept until then, so that its name holds the occurrence.
		{"prepared, skipped, then deleted before its instant: its outcome at the instant", pod(prepared, onNode, phase(corev1.PodSucceeded), reported(0, `{"v":1,"outcome":"SkippedContention","heldBy":"x"}`), evicted(occ.Add(-2*time.Second), 30)),
			Input{Now: occ.Add(-time.Second)}, Active, nil, occ},
		{"prepared, skipped, then deleted before its instant, seen at it: its outcome", pod(prepared, onNode, phase(corev1.PodSucceeded), reported(0, `{"v":1,"outcome":"SkippedContention","heldBy":"x"}`), evicted(occ.Add(-2*time.Second), 30)),
			Input{Now: occ}, Report, nil, time.Time{}},
		{"prepared, failed by the pod GC while its container ran, before its instant: decided at the instant", pod(prepared, onNode, phase(corev1.PodFailed), running(0), phase(corev1.PodFailed), deleted(occ.Add(-5*time.Second))),
			Input{Now: occ.Add(-time.Second)}, Active, nil, occ},
		{"withdrawn ahead, its job run early (its node's clock ahead), deleted, ended before the instant: decided at the instant", pod(onNode, withdrawnAhead, phase(corev1.PodSucceeded),
			reported(0, `{"v":1,"outcome":"Succeeded","startedAt":"2026-11-30T01:59:58Z"}`), deleted(occ.Add(-5*time.Second))),
			Input{Now: occ.Add(-time.Second)}, Active, nil, occ},
		{"prepared, deleted before its instant, its kubelet's word: it never started", pod(prepared, endedOnNode, evicted(occ.Add(-10*time.Second), 30)),
			Input{Now: occ.Add(-time.Second)}, WithdrawAhead, []string{"deleted before its instant"}, time.Time{}},
		{"prepared, withdrawn by the controller before its instant: withdrawn ahead", pod(prepared, unschedulable, withdrawnFor("a blackout began before its job started: window"), deleted(occ.Add(-10*time.Second))),
			Input{Now: occ.Add(-10 * time.Second)}, WithdrawAhead, []string{"deleted before its instant: a blackout began before its job started: window"}, time.Time{}},
		{"prepared, failed by its kubelet before its instant: withdrawn ahead", pod(prepared, onNode, phase(corev1.PodFailed), reported(70, `{"v":1,"outcome":"Interrupted"}`),
			func(p *corev1.Pod) {
				p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
			}),
			Input{Now: occ.Add(-10 * time.Second)}, WithdrawAhead, []string{"ended before its instant: Evicted: The node was low on resource: memory."}, time.Time{}},
		{"prepared, deletion asked after its instant: as any pod", pod(prepared, unschedulable, deleted(occ.Add(time.Minute))),
			Input{Now: occ.Add(time.Minute)}, NeverStarted, []string{"deleted before its job started"}, time.Time{}},
		{"prepared, evicted just after its instant (deletionTimestamp before it plus the grace): as any pod", pod(prepared, running(0), onNode, evicted(occ.Add(time.Second), 30)),
			Input{Now: occ.Add(2 * time.Second)}, Active, nil, occ.Add(31*time.Second + TerminatingGrace)},
		// "Before its instant" is judged on the controller's clock alone, and "prepared" by
		// the prepare pass's mark: the API server's timestamps (creation, deletion) are
		// another clock.
		{"prepared, the API server's clock ahead (created and deleted after the instant on it), seen before the controller's instant: withdrawn ahead",
			pod(prepared, createdAt(occ.Add(10*time.Second)), unschedulable, deleted(occ.Add(20*time.Second))),
			Input{Now: occ.Add(-time.Second)}, WithdrawAhead, []string{"deleted before its instant"}, time.Time{}},
		{"made at its instant (not marked), the API server's and the controller's clocks behind, deleted: as any pod",
			pod(createdAt(occ.Add(-5*time.Second)), unschedulable, deleted(occ.Add(-3*time.Second))),
			Input{Now: occ.Add(-2 * time.Second)}, NeverStarted, []string{"deleted before its job started"}, time.Time{}},
		{"prepared, its occurrence decided (lastScheduleTime), deleted unstarted, seen on a clock behind: as any pod",
			pod(prepared, unschedulable, deleted(occ.Add(10*time.Second))),
			Input{Now: occ.Add(-5 * time.Second), Decided: occ}, NeverStarted, []string{"deleted before its job started"}, time.Time{}},
		{"prepared, an earlier occurrence decided, deleted before its instant: withdrawn ahead",
			pod(prepared, unschedulable, deleted(occ.Add(-10*time.Second))),
			Input{Now: occ.Add(-5 * time.Second), Decided: occ.Add(-time.Minute)}, WithdrawAhead, []string{"deleted before its instant"}, time.Time{}},
		{"prepared, failed by its kubelet, seen after its instant: its report", pod(prepared, onNode, phase(corev1.PodFailed), reported(70, `{"v":1,"outcome":"Interrupted"}`)),
			Input{Now: occ.Add(10 * time.Second)}, Report, nil, time.Time{}},
		{"prepared, its job ran before the controller's instant (a node's clock ahead): its report", pod(prepared, onNode, phase(corev1.PodSucceeded), reported(0, `{"v":1,"outcome":"Succeeded","startedAt":"2026-11-30T01:59:59.5Z"}`)),
			Input{Now: occ.Add(-time.Second)}, Report, nil, time.Time{}},
		{"prepared, deleted before its instant, its job ran all the same: its report", pod(prepared, onNode, phase(corev1.PodFailed), reported(143, `{"v":1,"outcome":"Failed","exitCode":143,"startedAt":"2026-11-30T02:00:00.01Z"}`), evicted(occ.Add(-time.Second), 30)),
			Input{Now: occ.Add(time.Second)}, Report, nil, time.Time{}},
		{"no status at all: waits like a pending pod", pod(), Input{Now: occ.Add(time.Second)}, Active, nil, occ.Add(time.Second + time.Hour)},
		// Another container of the pod (a proxy, a log shipper) runs on after the job's
		// ended: the pod never ended, and its occurrence was never counted.
		{"the job ended, another container runs: its report once the pod has had time to end", pod(phase(corev1.PodRunning), endedAt(occ.Add(time.Minute), 0), sidecarRunning),
			Input{Now: occ.Add(time.Minute + EndGrace)}, Report, nil, time.Time{}},
		{"the job ended, another container runs: the pod may still end by itself", pod(phase(corev1.PodRunning), endedAt(occ.Add(time.Minute), 1), sidecarRunning),
			Input{Now: occ.Add(time.Minute + time.Second)}, Active, nil, occ.Add(time.Minute + EndGrace)},
		{"the job failed under OnFailure: its container runs again", pod(phase(corev1.PodRunning), endedAt(occ.Add(time.Minute), 1), sidecarRunning,
			func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }),
			Input{Now: occ.Add(time.Hour)}, Active, nil, time.Time{}},
		// Every regular container has ended: the kubelet is ending the pod (stopping its
		// native sidecars, up to its terminationGracePeriodSeconds): it stays, as history.
		{"the job ended, no other regular container runs: the pod ends by itself", pod(phase(corev1.PodRunning), endedAt(occ.Add(time.Minute), 0), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "mesh", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}), Input{Now: occ.Add(10 * time.Minute)}, Active, nil, time.Time{}},
		// The kubelet lost the job's container (ContainerStatusUnknown, no end time) while
		// another container runs on: the pod never ends. It was never counted. Its end is
		// taken as no earlier than the pod's creation.
		{"the job ended at an unknown time, another container runs: counted from its creation on", pod(phase(corev1.PodRunning), endedAt(time.Time{}, 137), sidecarRunning),
			Input{Now: occ.Add(10 * time.Minute)}, Report, nil, time.Time{}},
		{"the job ended at an unknown time, another container runs, soon after its creation", pod(phase(corev1.PodRunning), endedAt(time.Time{}, 137), sidecarRunning),
			Input{Now: occ.Add(30 * time.Second)}, Active, nil, occ.Add(time.Second + EndGrace)},
		// A prepared pod whose lockwrap ended before the instant (a probe, the OOM killer)
		// beside a plain sidecar: counted then, and deleted, its occurrence ran again in
		// a new pod at the instant.
		{"prepared, its lockwrap ended before the instant, a sidecar runs: waits for the instant", pod(prepared, phase(corev1.PodRunning), endedAt(occ.Add(-4*time.Minute), 0), sidecarRunning,
			func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(occ.Add(-5 * time.Minute)) }),
			Input{Now: occ.Add(-2 * time.Minute)}, Active, nil, occ},
		// A pod being deleted never becomes history: once its job has ended for good, its
		// report is its word, whatever the kubelet says (or fails to say) of the rest.
		{"deleted just after its job ended, a proxy still shown running: its report", pod(onNode, phase(corev1.PodRunning), endedAt(occ.Add(time.Minute), 0), sidecarRunning, deleted(occ.Add(time.Minute+time.Second))),
			Input{Now: occ.Add(time.Minute + 31*time.Second)}, Report, nil, time.Time{}},
		{"its node lost after its job ended, before the kubelet wrote the phase: its report", pod(onNode, phase(corev1.PodRunning), endedAt(occ.Add(time.Minute), 0), deleted(occ.Add(2*time.Minute))),
			Input{Now: occ.Add(10 * time.Minute)}, Report, nil, time.Time{}},
		{"withdrawn ahead, its lockwrap interrupted at the deletion, the phase not yet written: released", pod(onNode, withdrawnAhead, phase(corev1.PodRunning),
			endedWith(occ.Add(-10*time.Second), 70, `{"v":1,"outcome":"Interrupted"}`), evicted(occ.Add(-10*time.Second), 5)),
			Input{Now: occ.Add(15 * time.Second)}, Withdrawn, nil, time.Time{}},
		// lockwrap interrupted while it waited for the instant (a liveness probe, a kill):
		// replaced, as without the sidecar, so that the occurrence runs.
		{"prepared, interrupted before its instant, a sidecar runs: withdrawn ahead", pod(prepared, onNode, phase(corev1.PodRunning),
			endedWith(occ.Add(-30*time.Second), 70, `{"v":1,"outcome":"Interrupted"}`), sidecarRunning),
			Input{Now: occ.Add(-20 * time.Second)}, WithdrawAhead, nil, time.Time{}},
		// Deleted before its instant with its job's word already in (its node's clock
		// ahead, or lockwrap's error): counted then, it was released and a new pod made for
		// the occurrence, counted again. Taken away, as a prepared pod ended before its instant.
		{"prepared, its lockwrap ended with an error, deleted before its instant, a sidecar runs: withdrawn ahead", pod(prepared, onNode, phase(corev1.PodRunning),
			endedWith(occ.Add(-30*time.Second), 1, `{"v":1,"outcome":"Error","message":"boom"}`), sidecarRunning, deleted(occ.Add(-20*time.Second))),
			Input{Now: occ.Add(-10 * time.Second)}, WithdrawAhead, nil, time.Time{}},
		// The kubelet lost the container (ContainerStatusUnknown, exit 137, no end time, no
		// report) of a pod being deleted: the job may still run. Its word is awaited.
		{"deleted, its container's state unknown to the kubelet: waits for its word", pod(onNode, phase(corev1.PodRunning), func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was deleted."}}}}
		}, deleted(occ.Add(time.Minute))), Input{Now: occ.Add(time.Minute + 10*time.Second)}, Active, nil, occ.Add(time.Minute + TerminatingGrace)},
		// A report the kubelet cut (more containers than lockwrap was told of) says
		// Interrupted as a whole one does.
		{"prepared, interrupted before its instant, its report cut, a sidecar runs: withdrawn ahead", pod(prepared, onNode, phase(corev1.PodRunning),
			endedWith(occ.Add(-30*time.Second), 70, `{"v":1,"outcome":"Interrupted","occurrence":"2026-11-30T02:0`), sidecarRunning),
			Input{Now: occ.Add(-20 * time.Second)}, WithdrawAhead, nil, time.Time{}},
		{"withdrawn ahead, interrupted, its report cut: released", pod(onNode, withdrawnAhead, phase(corev1.PodFailed),
			reported(70, `{"v":1,"outcome":"Interrupted","occurrence":"2026-11-30T02:0`), deleted(occ.Add(-time.Second))),
			Input{Now: occ.Add(time.Second)}, Withdrawn, nil, time.Time{}},
		{"the job succeeded under OnFailure, another container runs", pod(phase(corev1.PodRunning), endedAt(occ.Add(time.Minute), 0), sidecarRunning,
			func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }),
			Input{Now: occ.Add(time.Hour)}, Report, nil, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.pod, occ, c.in)
			if got.Verdict != c.want {
				t.Fatalf("verdict %s (%s), want %s", got.Verdict, got.Reason, c.want)
			}
			for _, s := range c.reason {
				if !strings.Contains(got.Reason, s) {
					t.Errorf("reason %q lacks %q", got.Reason, s)
				}
			}
			if !got.Recheck.Equal(c.recheck) {
				t.Errorf("recheck %s, want %s", got.Recheck, c.recheck)
			}
		})
	}
}

func TestAttempts(t *testing.T) {
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want int32
		note string
	}{
		{"never started", pod(waiting("ContainerCreating", "")), 0, ""},
		{"first attempt", pod(running(0)), 1, ""},
		{"third attempt after two failures", pod(running(2)), 3, "after 3 attempts (restartPolicy OnFailure), counted once; the attempt before exited 3"},
		// Past spec.backoffLimit after attempts that did not run the job: the last start
		// ran nothing and says so; what kept the one before from running is kept.
		{"the start past the backoff limit after an Error", pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", RestartCount: 2,
				State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: `{"v":1,"outcome":"Error","message":"not run again"}`}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 70, Message: `{"v":1,"outcome":"Error","message":"redis: connection refused"}`}}}}
		}), 3, "after 3 attempts (restartPolicy OnFailure), counted once; the attempt before: Error, exit 70: redis: connection refused"},
		{"the attempt before killed with its lockwrap (OOM)", pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", RestartCount: 1,
				State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: `{"v":1,"outcome":"Error","message":"not run again"}`}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}), 2, "after 2 attempts (restartPolicy OnFailure), counted once; the attempt before exited 137 (OOMKilled)"},
		{"finished after a restart", pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", RestartCount: 1, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143}}}}
		}), 2, "after 2 attempts (restartPolicy OnFailure), counted once; the attempt before exited 143"},
		{"the attempt before lost the lock", pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", RestartCount: 1, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143,
					Message: `{"v":1,"outcome":"LockLost","occurrence":"2026-11-30T02:00:00Z","key":"k","holder":"h","lockLost":true,"exitCode":143}`}}}}
		}), 2, "after 2 attempts (restartPolicy OnFailure), counted once; the attempt before: LockLost, exit 143"},
		{"another container restarted", pod(running(0), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "sidecar", RestartCount: 5})
		}), 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Attempts(c.pod); got != c.want {
				t.Errorf("Attempts = %d, want %d", got, c.want)
			}
			if got := AttemptsNote(c.pod); got != c.note {
				t.Errorf("AttemptsNote = %q, want %q", got, c.note)
			}
		})
	}
}

func TestPendingDeadline(t *testing.T) {
	created := occ.Add(5 * time.Minute)
	if got := PendingDeadline(occ, created, ptr.To(time.Minute)); !got.Equal(occ.Add(time.Minute)) {
		t.Errorf("with a deadline: %s", got)
	}
	if got := PendingDeadline(occ, created, ptr.To(-time.Minute)); !got.Equal(occ) {
		t.Errorf("negative deadline: %s", got)
	}
	if got := PendingDeadline(occ, created, nil); !got.Equal(created.Add(time.Hour)) {
		t.Errorf("default: %s", got)
	}
	if got := PendingDeadline(occ, occ.Add(-time.Second), nil); !got.Equal(occ.Add(time.Hour)) {
		t.Errorf("created before its occurrence: %s", got)
	}
}
