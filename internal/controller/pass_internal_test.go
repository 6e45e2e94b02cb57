package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
	"github.com/lockedcron/lockedcron/internal/tracking"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// Plain tests of one pass's planning steps (track, catch up, schedule, a run request), as
// Reconcile runs them, against a fake client: what the pass decides at a chosen time.

var passAt = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// passJob is a job created a day before passAt, its schedule already observed.
func passJob(sched string, suspend bool) *v1alpha1.LockedCronJob {
	job := newJob("ns", "j", sched)
	job.Spec.TimeZone = "UTC"
	job.UID, job.Generation, job.CreationTimestamp = "uid-1", 1, metav1.NewTime(passAt.Add(-24*time.Hour))
	job.Spec.Suspend = ptr.To(suspend)
	job.Status.ObservedSchedule = fmt.Sprintf("%s|%s|suspend=%t", sched, job.Spec.TimeZone, suspend)
	return job
}

// runPass runs a pass's planning steps for job at now, its pods (and other objects) in
// a fake API server; it returns the reconciler (its client) and the pass.
func runPass(t *testing.T, job *v1alpha1.LockedCronJob, now time.Time, objs ...client.Object) (*LockedCronJobReconciler, *pass) {
	t.Helper()
	r := testReconciler(fakeAPI(t, objs...))
	return r, passWith(t, r, job, now)
}

// testReconciler is a reconciler whose cache and API reader are both api.
func testReconciler(api client.Client) *LockedCronJobReconciler {
	return &LockedCronJobReconciler{Client: api, APIReader: api, Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}
}

// fakeAPI is a fake API server holding objs.
func fakeAPI(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
}

// testScheme knows Kubernetes' built-in kinds and ours.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// passWith runs a pass's planning steps for job at now with r, as Reconcile does: what r
// decided before (r.decided) included.
func passWith(t *testing.T, r *LockedCronJobReconciler, job *v1alpha1.LockedCronJob, now time.Time) *pass {
	t.Helper()
	ctx := context.Background()
	p := newPass(job, now, logr.Discard())
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace)); err != nil {
		t.Fatal(err)
	}
	p.track(pods.Items)
	if err := r.resolveUnsure(ctx, job, now); err != nil {
		t.Fatal(err)
	}
	written, created := r.decided.of(job)
	p.catchUp(p.standing(pods.Items), written, created)
	for i := range pods.Items {
		p.seen = append(p.seen, pods.Items[i].Name)
	}
	if c := r.schedule(ctx, p, nil); c != nil {
		p.active = append(p.active, c)
	}
	r.manualRun(ctx, p, nil, nil)
	p.bookkeeping() // step 6
	return p
}

// TestLostPrepareAnswerAfterTheInstant: the same lost prepare POST, resolved by a pass
// after the pod's instant while the pod cache does not show the pod yet (a
// kube-apiserver restart makes both): the pod stands for its occurrence, which is not
// counted missed while the pod runs it.
func TestLostPrepareAnswerAfterTheInstant(t *testing.T) {
	at := passAt
	job := passJob("* * * * *", false)
	job.Spec.StartingDeadlineSeconds = ptr.To(int64(10))
	job.Status.LastScheduleTime = &metav1.Time{Time: at.Add(-time.Minute)}
	pod, err := runpod.Build(job, at, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
	r := &LockedCronJobReconciler{Client: fakeAPI(t), APIReader: fakeAPI(t, pod), Pod: runpod.Options{ClusterName: "c", WrapperImage: "w"}}
	r.decided.noteUnsure(job, at)

	p := passWith(t, r, job, at.Add(20*time.Second))
	if c := p.status.Counters; c.Missed != 0 {
		t.Errorf("occurrence %s, its pod in the API server: Missed %d, want 0 (recent %+v)", at.Format(time.RFC3339), c.Missed, p.status.Recent)
	}
	if lst := p.status.LastScheduleTime; lst == nil || !lst.Time.Equal(at) {
		t.Errorf("lastScheduleTime %v, want %s", lst, at.Format(time.RFC3339))
	}
}

// TestClockBehindCountsDecidedPreparedPod: a prepared pod whose occurrence status has
// decided (lastScheduleTime), deleted before its job started, seen by a pass whose clock
// is behind the instant (a new leader on a slower node): it is the occurrence's pod, counted
// missed, not a prepared pod to release uncounted while no pass comes back to its
// occurrence.
func TestClockBehindCountsDecidedPreparedPod(t *testing.T) {
	at := passAt
	job := passJob("* * * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: at}
	pod, err := runpod.Build(job, at, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
	pod.DeletionTimestamp = &metav1.Time{Time: at.Add(10 * time.Second)}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	p := &pass{job: job, status: job.Status.DeepCopy(), now: at.Add(-5 * time.Second), log: logr.Discard()}
	p.track([]corev1.Pod{*pod})
	if got := p.status.Counters.Missed; got != 1 {
		t.Fatalf("occurrence %s decided, its pod deleted unstarted: Missed %d, want 1 (aside %v, recent %+v)", at.Format(time.RFC3339), got, p.aside, p.status.Recent)
	}
}

// TestLostPrepareAnswerLeavesTheOccurrenceToTheSchedule: a prepare pass's POST whose
// answer was lost (noteUnsure) is resolved by a GET that finds the pod; the pod is a
// prepared one, its occurrence still to come, and it is not the occurrence's decision: a
// blackout that opens before the instant withdraws it, and the schedule counts the
// occurrence SkippedBlackout at its instant. It used to be noted as created (decided),
// and the occurrence went by with no record at all.
func TestLostPrepareAnswerLeavesTheOccurrenceToTheSchedule(t *testing.T) {
	at := passAt
	job := passJob("* * * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: at.Add(-time.Minute)}
	pod, err := runpod.Build(job, at, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[runpod.AnnotationPreparedAhead] = "true" // as the prepare pass made it

	// The prepare POST at at-30s: created, its answer lost; the next pass finds the pod.
	cl := fakeAPI(t, pod)
	r := testReconciler(cl)
	r.decided.noteUnsure(job, at)
	if err := r.resolveUnsure(context.Background(), job, at.Add(-25*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Then a blackout window opened at at-10s and the pod was withdrawn and is gone.
	s, e := metav1.NewTime(at.Add(-10*time.Second)), metav1.NewTime(at.Add(time.Hour))
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "maint", Start: &s, End: &e}}}
	r.Client, r.APIReader = fakeAPI(t), fakeAPI(t)

	p := passWith(t, r, job, at.Add(time.Second))
	if got := p.status.Counters.SkippedBlackout; got != 1 {
		t.Fatalf("occurrence %s: SkippedBlackout %d, want 1 (recent %+v)", at.Format(time.RFC3339), got, p.status.Recent)
	}
}

// TestClockBehindKeepsDecidedOccurrence: a pass whose clock reads before an occurrence
// status has already decided (lastScheduleTime: an NTP step back, a new leader on a node
// whose clock is slower) does not take that occurrence's pod for a prepared one. It used to
// withdraw it as "no longer the next occurrence" (or "suspended"): a running job was
// stopped, and a pod that had not started was released uncounted while no later pass came
// back to its occurrence, neither run nor counted.
func TestClockBehindKeepsDecidedOccurrence(t *testing.T) {
	at := passAt
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "job",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at.Add(time.Second))}}}}}
	unscheduled := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	for _, c := range []struct {
		name    string
		status  corev1.PodStatus
		node    string
		suspend bool
	}{
		{"its job running", running, "node-1", false},
		{"not started (unschedulable)", unscheduled, "", false},
		{"its job running, the job suspended", running, "node-1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := passJob("* * * * *", c.suspend)
			job.Status.LastScheduleTime = &metav1.Time{Time: at} // decided: its start was news
			pod, err := runpod.Build(job, at, runpod.Options{ClusterName: "c", WrapperImage: "w"})
			if err != nil {
				t.Fatal(err)
			}
			pod.CreationTimestamp, pod.Spec.NodeName, pod.Status = metav1.NewTime(at), c.node, c.status
			prepared := pod.DeepCopy() // created ahead, then decided at its instant
			prepared.Annotations[runpod.AnnotationPreparedAhead] = "true"
			prepared.CreationTimestamp = metav1.NewTime(at.Add(-time.Minute))

			_, p := runPass(t, job, at.Add(-5*time.Second), prepared) // 5 s before the occurrence on its clock
			for _, w := range p.withdrawn {
				t.Errorf("pod %s of the decided occurrence %s withdrawn: %q", w.pod.Name, at.Format(time.RFC3339), w.why)
			}
			if !p.status.LastScheduleTime.Time.Equal(at) {
				t.Errorf("lastScheduleTime %s, want %s", p.status.LastScheduleTime.Time, at)
			}

			// The status write that decided it was deferred (a pod's creation is not news)
			// and the manager that made it is gone: only the pod, created at its instant
			// (not marked prepared ahead), says the occurrence was decided. It is no prepared
			// pod either (it used to be withdrawn when the job was suspended meanwhile).
			job.Status.LastScheduleTime = &metav1.Time{Time: at.Add(-time.Minute)}
			_, p = runPass(t, job, at.Add(-5*time.Second), pod)
			for _, w := range p.withdrawn {
				t.Errorf("status not written: pod %s, created at its instant, withdrawn: %q", w.pod.Name, w.why)
			}
		})
	}
}

// TestManualRunBlackout: a run request is judged against the blackout at the pass's
// time, suspended job or not (a suspended job's pass stops before the schedule's blackout
// step, and its Blackout condition stays as it was: a window long over refused requests,
// one open let them run), and its pod, like a scheduled one's, does not start its job once
// the next window has opened (it waited for the lock up to an hour, into the window).
func TestManualRunBlackout(t *testing.T) {
	window := func(job *v1alpha1.LockedCronJob, from, to time.Duration) {
		s, e := metav1.NewTime(passAt.Add(from)), metav1.NewTime(passAt.Add(to))
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{{Name: "maint", Start: &s, End: &e}}}
	}
	condition := func(job *v1alpha1.LockedCronJob, open bool) {
		st, reason := metav1.ConditionFalse, "NoBlackout"
		if open {
			st, reason = metav1.ConditionTrue, "WindowOpen"
		}
		meta.SetStatusCondition(&job.Status.Conditions, metav1.Condition{Type: ConditionBlackout, Status: st, Reason: reason, Message: "as a pass long ago found it"})
	}
	for _, c := range []struct {
		name      string
		suspend   bool
		from, to  time.Duration
		condition bool
		refused   string // "" when the pod is created
		notAfter  time.Time
	}{
		{"a window ahead: the pod stops at its start", false, 10 * time.Minute, 2 * time.Hour, false, "", passAt.Add(10 * time.Minute)},
		{"suspended, a window ahead: the pod stops at its start", true, 10 * time.Minute, 2 * time.Hour, false, "", passAt.Add(10 * time.Minute)},
		{"suspended, the window over, the condition still open", true, -3 * time.Hour, -time.Hour, true, "", passAt.Add(runpod.ManualWaitLimit)},
		{"suspended, a window open, the condition not", true, -10 * time.Minute, time.Hour, false, `a blackout is in effect (window "maint"`, time.Time{}},
		{"a window open", false, -10 * time.Minute, time.Hour, true, `a blackout is in effect (window "maint"`, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := passJob("0 3 * * *", c.suspend)
			job.Status.LastScheduleTime = &metav1.Time{Time: time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)}
			window(job, c.from, c.to)
			condition(job, c.condition)
			job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "fix-1"}
			r, p := runPass(t, job, passAt)
			rr := p.status.LastRunRequest
			if rr == nil {
				t.Fatal("the request was not handled")
			}
			if c.refused != "" {
				if rr.Pod != "" || !containsAll(rr.Refused, c.refused) {
					t.Fatalf("want refused %q and no pod, got %+v", c.refused, rr)
				}
				return
			}
			if rr.Refused != "" || rr.Pod == "" {
				t.Fatalf("want a pod, got %+v", rr)
			}
			var pod corev1.Pod
			if err := r.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: rr.Pod}, &pod); err != nil {
				t.Fatal(err)
			}
			na := ""
			for _, e := range pod.Spec.Containers[0].Env {
				if e.Name == config.EnvNotAfter {
					na = e.Value
				}
			}
			if want := c.notAfter.UTC().Format(time.RFC3339); na != want {
				t.Errorf("%s=%q, want %q", config.EnvNotAfter, na, want)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestRunRequestRefusalStaysSmall: a request whose annotations are huge (an annotation
// may hold 256 KiB) is refused with a message that quotes only their beginning, status
// records a short key of the id (the whole id was recorded twice, and quoted: a status
// over etcd's request limit, every later status write refused), it is refused once, and
// no Event note is longer than the API server accepts.
func TestRunRequestRefusalStaysSmall(t *testing.T) {
	huge := strings.Repeat(`"`, 250000)
	for _, c := range []struct {
		name string
		ann  map[string]string
	}{
		{"id", map[string]string{v1alpha1.AnnotationRunRequest: huge}},
		{"contention", map[string]string{v1alpha1.AnnotationRunRequest: "fix-1", v1alpha1.AnnotationRunContention: huge}},
		{"occurrence", map[string]string{v1alpha1.AnnotationRunRequest: "fix-1", v1alpha1.AnnotationRunOccurrence: huge}},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := passJob("0 3 * * *", false)
			job.Status.LastScheduleTime = &metav1.Time{Time: time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)}
			job.Annotations = c.ann
			_, p := runPass(t, job, passAt)
			rr := p.status.LastRunRequest
			if rr == nil || rr.Refused == "" || rr.Pod != "" {
				t.Fatalf("not refused: %+v", rr)
			}
			if b, err := json.Marshal(p.status); err != nil || len(b) > 4096 {
				t.Errorf("status is %d bytes (%v)", len(b), err)
			}
			if !strings.Contains(rr.Refused, "(250000 bytes)") {
				t.Errorf("the refusal does not say how long the value is: %.200s", rr.Refused)
			}
			refusals := 0
			for _, e := range p.events {
				if len(e.note) > maxEventNote {
					t.Errorf("Event %s: note of %d bytes", e.reason, len(e.note))
				}
				if e.reason == ReasonManualRunRefused {
					refusals++
				}
			}
			if refusals != 1 {
				t.Errorf("%d %s Events, want 1: %+v", refusals, ReasonManualRunRefused, p.events)
			}
			job.Status = *p.status
			_, again := runPass(t, job, passAt.Add(time.Minute))
			for _, e := range again.events {
				if e.reason == ReasonManualRunRefused {
					t.Errorf("refused again: %.200s", e.note)
				}
			}
		})
	}
}

func TestEventNoteCut(t *testing.T) {
	p := &pass{}
	p.eventf(corev1.EventTypeWarning, ReasonInvalidTemplate, "%s", strings.Repeat("é", 1000))
	n := p.events[0].note
	if len(n) > maxEventNote || !utf8.ValidString(n) || !strings.HasSuffix(n, "…") {
		t.Errorf("note of %d bytes, valid UTF-8 %t, %q", len(n), utf8.ValidString(n), n[len(n)-10:])
	}
}

// TestFoundManualPodSaysStarted: a run request whose pod exists while status does not
// record it (the creating pass's status write, and with it its Events, did not land) is
// recorded by the next pass with its pod, and that pass says it started — it used to
// record it silently, and ManualRunStarted was never sent. Once recorded, nothing more.
func TestFoundManualPodSaysStarted(t *testing.T) {
	job := passJob("0 3 * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)}
	job.Annotations = map[string]string{v1alpha1.AnnotationRunRequest: "fix-1"}
	pod, err := runpod.BuildManual(job, runpod.ManualRun{ID: "fix-1", RequestedAt: passAt.Add(-time.Minute), Contention: v1alpha1.ManualContentionWait},
		runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	started := func(p *pass) []string {
		var notes []string
		for _, e := range p.events {
			if e.reason == ReasonManualRunStarted {
				notes = append(notes, e.note)
			}
		}
		return notes
	}
	_, p := runPass(t, job, passAt, pod)
	if rr := p.status.LastRunRequest; rr == nil || rr.Pod != pod.Name || rr.Refused != "" {
		t.Fatalf("request not recorded with its pod %s: %+v", pod.Name, rr)
	}
	if notes := started(p); len(notes) != 1 || !strings.Contains(notes[0], "found pod "+pod.Name+", created by an earlier pass") {
		t.Fatalf("ManualRunStarted: %q", notes)
	}
	job.Status = *p.status
	if _, again := runPass(t, job, passAt.Add(time.Minute), pod); len(started(again)) != 0 {
		t.Fatalf("said again once recorded: %q", started(again))
	}
	// The id asked for again (after another) while its earlier pod, finished, is kept:
	// recorded, and nothing said to start (nothing did).
	job.Status.LastRunRequest = &v1alpha1.RunRequest{ID: "other"}
	pod.Status.Phase = corev1.PodFailed
	if _, again := runPass(t, job, passAt.Add(2*time.Minute), pod); len(started(again)) != 0 || again.status.LastRunRequest.Pod != pod.Name {
		t.Fatalf("a finished pod of the id: said %q, recorded %+v", started(again), again.status.LastRunRequest)
	}
}

// TestPreparedPodWithdrawnWhateverItsCreationTime: a pod prepared ahead is withdrawn when
// the job no longer wants it (here: suspended) before its instant, even when the API
// server stamped it after the instant: a controller whose clock is behind the API
// server's by more than prepareAheadSeconds prepares it so. Only the controller's mark
// says a pod was prepared.
func TestPreparedPodWithdrawnWhateverItsCreationTime(t *testing.T) {
	at := passAt
	job := passJob("* * * * *", true)
	job.Spec.PrepareAheadSeconds = ptr.To[int32](5)
	job.Status.LastScheduleTime = &metav1.Time{Time: at.Add(-time.Minute)}
	pod, err := runpod.Build(job, at, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[runpod.AnnotationPreparedAhead] = "true"
	pod.CreationTimestamp = metav1.NewTime(at.Add(time.Second)) // the API server's clock, 6 s ahead
	_, p := runPass(t, job, at.Add(-5*time.Second), pod)
	if len(p.withdrawn) != 1 || p.withdrawn[0].pod.Name != pod.Name || p.withdrawn[0].why != "suspended" {
		t.Fatalf("withdrawn %+v, want %s (suspended)", p.withdrawn, pod.Name)
	}
}

// TestStatusRejected: the StatusRejected Event of a refused status write names the field
// the API server names, in its note and as its series' action (one series per field: a
// series keeps its first note, and a second field refused later must be told too), and
// says how to fix it; a long message is cut to what the API server takes.
func TestStatusRejected(t *testing.T) {
	job := passJob("* * * * *", false)
	gk := v1alpha1.GroupVersion.WithKind("LockedCronJob").GroupKind()
	refused := func(path *field.Path, msg string) error {
		return apierrors.NewInvalid(gk, job.Name, field.ErrorList{field.Invalid(path, "10000-01-01T04:00:00Z", msg)})
	}
	a1, n1 := statusRejected(job, refused(field.NewPath("status", "lastSuccessfulTime"), "must be of type date-time"))
	a2, _ := statusRejected(job, refused(field.NewPath("status", "recent").Index(0).Child("occurrence"), "must be of type date-time"))
	if a1 != "status.lastSuccessfulTime" || a2 != "status.recent[0].occurrence" || a1 == a2 {
		t.Errorf("actions %q and %q, want one per field refused", a1, a2)
	}
	if !containsAll(n1, "status.lastSuccessfulTime", "kubectl edit lockedcronjob j -n ns --subresource=status") {
		t.Errorf("note %q does not name the field and the fix", n1)
	}
	long, note := statusRejected(job, refused(field.NewPath("status", strings.Repeat("x", 300)), strings.Repeat("y", 2000)))
	if len(long) > maxEventAction || len(note) > maxEventNote || !utf8.ValidString(note) {
		t.Errorf("action of %d bytes (max %d), note of %d bytes (max %d)", len(long), maxEventAction, len(note), maxEventNote)
	}
}

// TestStatusFarAheadIsNotTrusted: a lastScheduleTime or scheduleSince far ahead of the
// controller's clock (written by hand through the status subresource, or by a replica
// whose clock was far ahead) does not stop the schedule until then: the pass plans from
// now, says so in a Warning Event, and the next occurrence starts at its instant. A time
// ahead by less than maxStatusAhead (a pass whose clock is behind the one that decided)
// is taken as it is.
func TestStatusFarAheadIsNotTrusted(t *testing.T) {
	now := passAt.Add(30 * time.Second)
	year := passAt.AddDate(1, 0, 0)
	for _, c := range []struct {
		name        string
		last, since *time.Time
		trusted     bool
		unobserved  bool // status.observedSchedule empty too: a first pass
		changed     bool // spec.schedule changed since status.observedSchedule
	}{
		{name: "lastScheduleTime a year ahead, and no observedSchedule (a first pass)", last: &year, unobserved: true},
		{name: "lastScheduleTime a year ahead, and the schedule changed", last: &year, changed: true},
		{name: "lastScheduleTime a year ahead", last: &year},
		{name: "scheduleSince a year ahead", since: &year},
		{name: "both a year ahead", last: &year, since: &year},
		{name: "lastScheduleTime just beyond the bound", last: ptr.To(now.Add(maxStatusAhead + time.Second))},
		{name: "lastScheduleTime at the bound: a clock behind", last: ptr.To(now.Add(maxStatusAhead)), trusted: true},
		{name: "lastScheduleTime 5 minutes ahead: a clock behind", last: ptr.To(passAt.Add(5 * time.Minute)), trusted: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := passJob("* * * * *", false)
			job.Status.LastScheduleTime = &metav1.Time{Time: passAt.Add(-time.Minute)}
			if c.last != nil {
				job.Status.LastScheduleTime = &metav1.Time{Time: *c.last}
			}
			if c.since != nil {
				job.Status.ScheduleSince = &metav1.Time{Time: *c.since}
			}
			if c.unobserved {
				job.Status.ObservedSchedule = ""
			}
			if c.changed {
				job.Status.ObservedSchedule = "*/2 * * * *|UTC|suspend=false"
				job.Generation = 2
			}
			r, p := runPass(t, job, now)
			var warned []string
			for _, e := range p.events {
				if e.reason == ReasonStatusAhead {
					warned = append(warned, e.note)
				}
			}
			if c.trusted {
				if len(warned) > 0 || !p.status.LastScheduleTime.Equal(job.Status.LastScheduleTime) {
					t.Fatalf("a time within the bound not trusted: events %q, lastScheduleTime %v", warned, p.status.LastScheduleTime)
				}
				return
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "not trusted") ||
				(c.last != nil && !strings.Contains(warned[0], "status.lastScheduleTime "+c.last.UTC().Format(time.RFC3339))) ||
				(c.since != nil && !strings.Contains(warned[0], "status.scheduleSince "+c.since.UTC().Format(time.RFC3339))) {
				t.Fatalf("want one %s Event naming the field and its time, got %q", ReasonStatusAhead, warned)
			}
			next := passAt.Add(time.Minute)
			if p.status.NextScheduleTime == nil || !p.status.NextScheduleTime.Time.Equal(next) {
				t.Fatalf("nextScheduleTime %v, want %s (the schedule from now)", p.status.NextScheduleTime, next)
			}
			// This second's occurrence is planned; a schedule change (here, as the pass sees
			// it, at now) may start it later.
			from := now.Truncate(time.Second).Add(-time.Second)
			if p.status.LastScheduleTime != nil || p.status.ScheduleSince == nil || p.status.ScheduleSince.Time.Before(from) ||
				p.status.ScheduleSince.Time.After(now) || (!c.changed && !p.status.ScheduleSince.Time.Equal(from)) {
				t.Fatalf("status lastScheduleTime %v scheduleSince %v, want none and %s", p.status.LastScheduleTime, p.status.ScheduleSince, from)
			}
			if len(p.active) != 0 || p.recorded != nil {
				t.Fatalf("what fell due before now is neither run nor counted: active %d, recorded %v", len(p.active), p.recorded)
			}

			// The status as written; the next occurrence starts at its instant, once.
			job.Status = *p.status
			p = passWith(t, r, job, next)
			if len(p.active) != 1 || p.active[0].Name != runpod.Name(job.Name, next) {
				t.Fatalf("at %s: active %v, want the occurrence's pod", next, p.active)
			}
			for _, e := range p.events {
				if e.reason == ReasonStatusAhead {
					t.Fatalf("the status written is trusted again: %q", e.note)
				}
			}
		})
	}

	// A pass at an instant (requeued for it: 10 ms after) that finds the time ahead starts
	// that instant's occurrence.
	t.Run("found by the pass at an instant", func(t *testing.T) {
		job := passJob("* * * * *", false)
		job.Status.LastScheduleTime = &metav1.Time{Time: year}
		at := passAt.Add(time.Minute)
		_, p := runPass(t, job, at.Add(10*time.Millisecond))
		if len(p.active) != 1 || p.active[0].Name != runpod.Name(job.Name, at) {
			t.Fatalf("at %s: active %v, want the occurrence's pod", at, p.active)
		}
	})
}

// TestStatusAndEventsShowControlsEscaped: text the controller does not write itself — a
// schedule the tenant typed, a kubelet's or a registry's message about a pod — reaches
// conditions, status.recent and Events with the controls a terminal acts on escaped; and
// the same text on the next pass is no change, so it is not said again.
func TestStatusAndEventsShowControlsEscaped(t *testing.T) {
	raw := func(s string) bool { return strings.ContainsFunc(s, printable.IsControl) }
	job := passJob("0 3 * * *\x1b]52;c;eA==\x07", false)
	_, p := runPass(t, job, passAt)
	ready := meta.FindStatusCondition(p.status.Conditions, ConditionReady)
	if ready == nil || ready.Reason != ReasonInvalidSchedule || raw(ready.Message) || !strings.Contains(ready.Message, `\u001b]52`) {
		t.Fatalf("Ready: %+v", ready)
	}
	if len(p.events) != 1 || raw(p.events[0].note) || !strings.Contains(p.events[0].note, `\u001b]52`) {
		t.Fatalf("events: %+v", p.events)
	}
	job.Status = *p.status
	if _, again := runPass(t, job, passAt.Add(time.Minute)); len(again.events) != 0 {
		t.Fatalf("the same invalid schedule said again: %+v", again.events)
	}

	// A pod that never started, counted missed with its kubelet's reason (a registry's
	// answer to a pull is in it).
	p = newPass(passJob("0 3 * * *", false), passAt, logr.Discard())
	p.recordN(runstatus.OutcomeMissed, "ErrImagePull", passAt, 1, "pod waiting: ErrImagePull: \u009b2J\x1b[8m")
	if rec := p.status.Recent[0]; raw(rec.Message) || !strings.Contains(rec.Message, `\u009b2J\u001b[8m`) {
		t.Fatalf("recent: %q", rec.Message)
	}
	if len(p.events) != 1 || raw(p.events[0].note) {
		t.Fatalf("events: %+v", p.events)
	}
}

// TestJobEndedWhileAnotherContainerRuns: the job's container ended (Succeeded), and
// another regular container of its pod (a proxy) runs on, so the pod never ends. It was
// never counted, and stayed for ever. Once the pod has had tracking.EndGrace to end by
// itself, its report is counted, once, and the pod deleted.
func TestJobEndedWhileAnotherContainerRuns(t *testing.T) {
	t1 := passAt
	job := passJob("0 * * * *", false)
	job.Status.LastScheduleTime = &metav1.Time{Time: t1}
	pod, err := runpod.Build(job, t1, runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "proxy", Image: "proxy"})
	rep := `{"v":1,"outcome":"Succeeded","occurrence":"` + t1.Format(time.RFC3339) + `","key":"ns/j","holder":"h","fencingToken":7,"exitCode":0}`
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: pod.Annotations[runpod.AnnotationWrappedContainer], State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Message: rep, StartedAt: metav1.NewTime(t1), FinishedAt: metav1.NewTime(t1.Add(10 * time.Second))}}},
		{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t1)}}},
	}
	r := testReconciler(fakeAPI(t, pod))

	p := passWith(t, r, job, t1.Add(30*time.Second))
	if p.status.Counters.Succeeded != 0 || len(p.doomed) != 0 {
		t.Fatalf("counted %+v, doomed %v before the pod had time to end by itself", p.status.Counters, p.doomed)
	}
	job.Status = *p.status
	p = passWith(t, r, job, t1.Add(10*time.Second+tracking.EndGrace))
	if c := p.status.Counters; c.Succeeded != 1 || c.Runs != 1 {
		t.Errorf("counters %+v, want the run counted once as Succeeded", c)
	}
	if !slices.ContainsFunc(p.doomed, func(d *corev1.Pod) bool { return d.Name == pod.Name }) {
		t.Errorf("the pod, still running its proxy, is not deleted: doomed %v", p.doomed)
	}
}

// TestDescribeACutReport: a report the kubelet cut holds its outcome only; its Event said
// "ran … as  (fencing token 0), exit code 0", or "held by ;".
func TestDescribeACutReport(t *testing.T) {
	for _, o := range []report.Outcome{report.Failed, report.Succeeded, report.SkippedContention} {
		r := runstatus.Result{Pod: "j-1", Occurrence: passAt, Cut: true, Report: report.Report{V: 1, Outcome: o, Message: "lockwrap's report was cut"}}
		got := describe(r)
		if strings.Contains(got, "exit code 0") || strings.Contains(got, "fencing token 0") || strings.Contains(got, "held by ;") ||
			!strings.Contains(got, string(o)) || !strings.Contains(got, "cut") {
			t.Errorf("%s: %q", o, got)
		}
	}
}

// TestMinScheduleInterval: with --min-schedule-interval, a job whose schedule fires more
// often is not scheduled, and says why naming the flag (a tenant's per-second jobs took the
// API budget and the workers every tenant shares); one at the floor is.
func TestMinScheduleInterval(t *testing.T) {
	for _, c := range []struct {
		sched   string
		refused bool
	}{
		{"*/10 * * * * *", true},
		{"@every 30s", true},
		{"0,1 0 3 * * *", true}, // twice a night, a second apart
		{"* * * * *", false},
		{"0 3 * * *", false},
	} {
		t.Run(c.sched, func(t *testing.T) {
			r := testReconciler(fakeAPI(t))
			r.MinScheduleInterval = time.Minute
			job := passJob(c.sched, false)
			p := passWith(t, r, job, passAt)
			ready := meta.FindStatusCondition(p.status.Conditions, ConditionReady)
			if ready == nil {
				t.Fatal("no Ready condition")
			}
			if c.refused {
				if ready.Status != metav1.ConditionFalse || ready.Reason != ReasonInvalidSchedule ||
					!strings.Contains(ready.Message, "--min-schedule-interval 1m0s") || p.status.NextScheduleTime != nil {
					t.Fatalf("Ready %+v, next %v: want refused naming the flag", ready, p.status.NextScheduleTime)
				}
				return
			}
			if ready.Status != metav1.ConditionTrue || p.status.NextScheduleTime == nil {
				t.Fatalf("Ready %+v: want scheduled", ready)
			}
		})
	}
}
