package runpod

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

var requested = time.Date(2026, 11, 30, 9, 15, 42, 500e6, time.UTC)

func secretEnv(env, key string, optional bool) corev1.EnvVar {
	s := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: key}
	if optional {
		s.Optional = ptr.To(true)
	}
	return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: s}}
}

// commonEnv is the wrapped container's environment up to the contention settings, for
// nightly() with the given occurrence and pod name.
func commonEnv(occ, pod string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "MODE", Value: "full"},
		secretEnv("LOCKEDCRON_REDIS_URL", "url", false),
		{Name: "LOCKEDCRON_REDIS_USERNAME"}, // what the Secret lacks is empty, not envFrom's
		secretEnv("LOCKEDCRON_REDIS_USERNAME", "username", true),
		{Name: "LOCKEDCRON_REDIS_PASSWORD"},
		secretEnv("LOCKEDCRON_REDIS_PASSWORD", "password", true),
		{Name: "LOCKEDCRON_REDIS_CA_CERT"},
		secretEnv("LOCKEDCRON_REDIS_CA_CERT", "ca.crt", true),
		{Name: "LOCKEDCRON_LOCK_KEY", Value: "reconcile-ledger"},
		{Name: "LOCKEDCRON_LOCK_TTL", Value: "30s"},
		{Name: "LOCKEDCRON_RENEW_INTERVAL", Value: "10s"},
		{Name: "LOCKEDCRON_OCCURRENCE", Value: occ},
		{Name: "LOCKEDCRON_POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
		{Name: "LOCKEDCRON_HOLDER", Value: "eu-1/billing/" + pod + "/$(LOCKEDCRON_POD_UID)"},
		{Name: "LOCKEDCRON_ON_LOST", Value: "terminate"},
		{Name: "LOCKEDCRON_KILL_GRACE", Value: "10s"},
		{Name: "LOCKEDCRON_MIN_REPLICAS", Value: "0"},
		{Name: "LOCKEDCRON_DEDUPE_RETENTION", Value: "168h0m0s"},
		{Name: "LOCKEDCRON_TERMINATION_LOG", Value: "/dev/termination-log"},
		{Name: "LOCKEDCRON_BLACKOUT_ID", Value: "uid-1"},
		{Name: "LOCKEDCRON_MADE_AT", Value: "2026-11-30T01:59:50.25Z"},
	}
}

// TestBuildManualLiteral: a manual run without an occurrence is the occurrence's pod
// named after the request id, with the same lock key, a ledger entry of its own
// (--run-id), contention Wait as lockwrap retries bounded by ManualWaitLimit after the
// request (not by startingDeadlineSeconds: the job's 120s would end a wait behind a
// longer scheduled run), and the request id and time on the pod.
func TestBuildManualLiteral(t *testing.T) {
	got, err := BuildManual(nightly(), ManualRun{ID: "fix-1", RequestedAt: requested, Contention: v1alpha1.ManualContentionWait}, opts)
	if err != nil {
		t.Fatal(err)
	}
	const name = "nightly-m-qphzpbkg" // base32(SHA-256("fix-1"))[:8]
	wantMeta := metav1.ObjectMeta{
		Name:      name,
		Namespace: "billing",
		Labels:    map[string]string{"app": "ledger", "scheduling.lockedcron.io/job": "nightly", "scheduling.lockedcron.io/run-request": "fix-1"},
		Annotations: map[string]string{"team": "billing", "scheduling.lockedcron.io/scheduled-time": "2026-11-30T09:15:42Z",
			"scheduling.lockedcron.io/wrapped-container": "job", "scheduling.lockedcron.io/requested-at": "2026-11-30T09:15:42Z"},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "scheduling.lockedcron.io/v1alpha1", Kind: "LockedCronJob", Name: "nightly", UID: "uid-1",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
		Finalizers: []string{"scheduling.lockedcron.io/run-tracking"},
	}
	if d := cmp.Diff(wantMeta, got.ObjectMeta); d != "" {
		t.Errorf("metadata (-want +got):\n%s", d)
	}
	wantEnv := append(commonEnv("2026-11-30T09:15:42Z", name),
		corev1.EnvVar{Name: "LOCKEDCRON_RUN_ID", Value: "manual:uid-1:fix-1"},
		corev1.EnvVar{Name: "LOCKEDCRON_CONTENTION", Value: "retry"},
		corev1.EnvVar{Name: "LOCKEDCRON_RETRY_BACKOFF", Value: "1s"},
		corev1.EnvVar{Name: "LOCKEDCRON_RETRY_MAX_BACKOFF", Value: "5s"},
		corev1.EnvVar{Name: "LOCKEDCRON_NOT_AFTER", Value: "2026-11-30T10:15:42Z"},
	)
	wantEnv = append(wantEnv, unsetEnv("LOCKEDCRON_REDIS_CA_FILE", "LOCKEDCRON_REDIS_ALLOWED_HOSTS", "LOCKEDCRON_HOLDER_INSTANCE",
		"LOCKEDCRON_RETRY_ATTEMPTS", "LOCKEDCRON_RETRY_DEADLINE", "LOCKEDCRON_NOT_BEFORE", "LOCKEDCRON_REPORT_MAX_BYTES", "LOCKEDCRON_WATERMARK_MONOTONIC", "LOCKEDCRON_BACKOFF_LIMIT", "LOCKEDCRON_ATTEMPTS_DIR")...)
	c := got.Spec.Containers[0]
	if d := cmp.Diff(wantEnv, c.Env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"/lockedcron/lockwrap", "--", "/bin/reconcile"}, c.Command); d != "" {
		t.Errorf("command (-want +got):\n%s", d)
	}
	// The rest of the pod is the occurrence's.
	sched, err := Build(nightly(), requested, opts)
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Containers[0].Env, sched.Spec.Containers[0].Env = nil, nil
	if d := cmp.Diff(sched.Spec, got.Spec); d != "" {
		t.Errorf("spec differs from the occurrence's beyond the environment (-scheduled +manual):\n%s", d)
	}
}

// TestBuildManualOccurrenceFailFast: a request naming an occurrence runs under that
// occurrence's ledger entry (no --run-id: lockwrap suppresses it if it succeeded
// meanwhile); FailFast skips when the lock is held.
func TestBuildManualOccurrenceFailFast(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	got, err := BuildManual(nightly(), ManualRun{ID: "rerun-0200", Occurrence: occ, RequestedAt: requested, Contention: v1alpha1.ManualContentionFailFast}, opts)
	if err != nil {
		t.Fatal(err)
	}
	const name = "nightly-m-nmlmqntl"
	wantEnv := append(commonEnv("2026-11-30T02:00:00Z", name),
		corev1.EnvVar{Name: "LOCKEDCRON_CONTENTION", Value: "skip"},
		corev1.EnvVar{Name: "LOCKEDCRON_NOT_AFTER", Value: "2026-11-30T10:15:42Z"},
	)
	wantEnv = append(wantEnv, unsetEnv("LOCKEDCRON_REDIS_CA_FILE", "LOCKEDCRON_REDIS_ALLOWED_HOSTS", "LOCKEDCRON_HOLDER_INSTANCE",
		"LOCKEDCRON_RUN_ID", "LOCKEDCRON_RETRY_ATTEMPTS", "LOCKEDCRON_RETRY_BACKOFF", "LOCKEDCRON_RETRY_MAX_BACKOFF",
		"LOCKEDCRON_RETRY_DEADLINE", "LOCKEDCRON_NOT_BEFORE", "LOCKEDCRON_REPORT_MAX_BYTES", "LOCKEDCRON_WATERMARK_MONOTONIC", "LOCKEDCRON_BACKOFF_LIMIT", "LOCKEDCRON_ATTEMPTS_DIR")...)
	if d := cmp.Diff(wantEnv, got.Spec.Containers[0].Env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if got.Annotations[AnnotationScheduledTime] != "2026-11-30T02:00:00Z" || got.Annotations[AnnotationRequestedAt] != "2026-11-30T09:15:42Z" {
		t.Errorf("annotations %v", got.Annotations)
	}
	if at, ok := RequestedAt(got); !ok || !at.Equal(requested.Truncate(time.Second)) || Trigger(got) != v1alpha1.TriggerManual {
		t.Errorf("RequestedAt = %v %v, Trigger = %s", at, ok, Trigger(got))
	}
}

// TestManualNameFitsAndDiffers: the longest job name with the longest id gives a name
// that fits a label value (the invariant of occurrence pods), different ids different
// names, and the same id the same name.
func TestManualNameFitsAndDiffers(t *testing.T) {
	job := strings.Repeat("j", MaxJobNameLength)
	id := strings.Repeat("a", 63)
	n := ManualName(job, id)
	if errs := validation.IsValidLabelValue(n); len(errs) > 0 || len(n) > 63 {
		t.Errorf("%q (%d chars): %v", n, len(n), errs)
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		t.Errorf("%q is not a valid pod name: %v", n, errs)
	}
	if ManualName("nightly", "x") != "nightly-m-fvyrmqvx" || !regexp.MustCompile(`^nightly-m-[a-z2-7]{8}$`).MatchString(ManualName("nightly", "x")) {
		t.Errorf("name %q", ManualName("nightly", "x"))
	}
	if ManualName("nightly", "a") == ManualName("nightly", "b") || ManualName("nightly", "a") != ManualName("nightly", "a") {
		t.Error("names are not one per id")
	}
	if scheduled, _ := Build(nightly(), time.Unix(1796004000, 0), opts); IsManual(scheduled) || Trigger(scheduled) != v1alpha1.TriggerScheduled {
		t.Error("an occurrence's pod reads as manual")
	}
}

// TestRequestedAtNeverAfterThePodWasMade: the request's time bounds how long a manual
// run's pod may wait to start (tracking). Whoever may patch the pod can rewrite its
// annotation: a time after the pod was made, or one status cannot hold, reads as the
// pod's creation.
func TestRequestedAtNeverAfterThePodWasMade(t *testing.T) {
	got, err := BuildManual(nightly(), ManualRun{ID: "fix-1", RequestedAt: requested, Contention: v1alpha1.ManualContentionWait}, opts)
	if err != nil {
		t.Fatal(err)
	}
	created := requested.Truncate(time.Second).Add(time.Second)
	got.CreationTimestamp = metav1.NewTime(created)
	for _, forged := range []string{"2099-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59", "soon", created.Add(MaxClockSkew + time.Second).Format(time.RFC3339)} {
		got.Annotations[AnnotationRequestedAt] = forged
		if at, ok := RequestedAt(got); !ok || !at.Equal(created) {
			t.Errorf("annotation %q: RequestedAt = %v %v, want the pod's creation %v", forged, at, ok, created)
		}
	}
	// A controller clock a little ahead of the API server's is not a forgery.
	ahead := created.Add(2 * time.Second)
	got.Annotations[AnnotationRequestedAt] = ahead.Format(time.RFC3339)
	if at, ok := RequestedAt(got); !ok || !at.Equal(ahead) {
		t.Errorf("RequestedAt = %v %v, want %v", at, ok, ahead)
	}
}

// TestManualRunOfReadsWhatThePodWasBuiltFor: the run a manual pod runs, read back from
// the pod alone (the job's annotations may have been edited since it was made): every
// combination of a run of its own or an occurrence again, Wait or FailFast.
func TestManualRunOfReadsWhatThePodWasBuiltFor(t *testing.T) {
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	for _, m := range []ManualRun{
		{ID: "own-wait", RequestedAt: requested, Contention: v1alpha1.ManualContentionWait},
		{ID: "own-failfast", RequestedAt: requested, Contention: v1alpha1.ManualContentionFailFast},
		{ID: "again-wait", Occurrence: occ, RequestedAt: requested, Contention: v1alpha1.ManualContentionWait},
		{ID: "again-failfast", Occurrence: occ, RequestedAt: requested, Contention: v1alpha1.ManualContentionFailFast},
	} {
		pod, err := BuildManual(nightly(), m, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := m
		want.RequestedAt = requested.Truncate(time.Second)
		if got := ManualRunOf(pod); !cmp.Equal(got, want) {
			t.Errorf("%s: ManualRunOf = %+v, want %+v", m.ID, got, want)
		}
	}
}

// TestWrappedContainerIsReadFromTheSpec: the wrapped container's annotation is whoever
// may patch the pod's to edit, its containers nobody's. With the annotation removed or
// naming another container, a manual run's pod read as a run of its own with Wait, and
// (runstatus.ResultOf, tracking) its report as missing.
func TestWrappedContainerIsReadFromTheSpec(t *testing.T) {
	job := nightly()
	job.Spec.Template.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "envoy", Command: []string{"envoy"}}}, job.Spec.Template.Spec.Containers...)
	job.Spec.WrapContainer = job.Spec.Template.Spec.Containers[1].Name
	occ := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	m := ManualRun{ID: "again-failfast", Occurrence: occ, RequestedAt: requested, Contention: v1alpha1.ManualContentionFailFast}
	for name, edit := range map[string]func(map[string]string){
		"as built":           func(map[string]string) {},
		"annotation removed": func(a map[string]string) { delete(a, AnnotationWrappedContainer) },
		"annotation forged":  func(a map[string]string) { a[AnnotationWrappedContainer] = "sidecar" },
	} {
		pod, err := BuildManual(job, m, opts)
		if err != nil {
			t.Fatal(err)
		}
		edit(pod.Annotations)
		if got := WrappedContainer(pod); got != job.Spec.WrapContainer {
			t.Errorf("%s: WrappedContainer = %q, want %q", name, got, job.Spec.WrapContainer)
		}
		want := m
		want.RequestedAt = requested.Truncate(time.Second)
		if got := ManualRunOf(pod); !cmp.Equal(got, want) {
			t.Errorf("%s: ManualRunOf = %+v, want %+v", name, got, want)
		}
	}
	// A pod as the controller's cache holds it (no containers) reads the annotation.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationWrappedContainer: "job"}}}
	if got := WrappedContainer(pod); got != "job" {
		t.Errorf("a pod without containers: WrappedContainer = %q, want the annotation's %q", got, "job")
	}
}
