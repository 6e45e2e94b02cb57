package plugin_test

// The plugin against a real kube-apiserver and etcd (envtest) and a real redis-server:
// each test runs plugin.Main as a user would run the binary, with a kubeconfig file, and
// checks the printed output and the exit code. envtest runs no controller: where a test
// needs one (run --wait), the test does the controller's part (status.lastRunRequest, the
// pod, its end) through the API server.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/plugin"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

var (
	k8s        client.Client
	kubeconfig string
	nsCount    atomic.Int32
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if os.Getenv("KUBEBUILDER_ASSETS") == "" {
			fmt.Fprintln(os.Stderr, `KUBEBUILDER_ASSETS is not set: run KUBEBUILDER_ASSETS="$(hack/k8s-binaries.sh)" go test ./internal/plugin/`)
			return 1
		}
		env := &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
		}
		cfg, err := env.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer env.Stop()
		s := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(s)
		_ = v1alpha1.AddToScheme(s)
		if k8s, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		kc, err := admin.KubeConfig()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir, err := os.MkdirTemp("", "plugin-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

var occ = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a namespace with a Redis Secret and a LockedCronJob "report" using it.
type env struct {
	ns    string
	redis *redistest.Server
	job   *v1alpha1.LockedCronJob
}

func newEnv(t *testing.T, redisURL string) *env {
	t.Helper()
	ctx := ctxT(t)
	e := &env{ns: fmt.Sprintf("plugin-%d", nsCount.Add(1))}
	if redisURL == "" {
		e.redis = redistest.Start(t)
		redisURL = e.redis.URL()
	}
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "redis"},
		Data: map[string][]byte{"url": []byte(redisURL)}}))
	e.job = &v1alpha1.LockedCronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "report"},
		Spec: v1alpha1.LockedCronJobSpec{
			Schedule: "0 * * * *",
			Lock:     v1alpha1.LockSpec{Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "job", Image: "busybox", Command: []string{"/bin/sh", "-c", "echo hi"}}},
			}},
		},
	}
	must(t, k8s.Create(ctx, e.job))
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// result is one run of the plugin.
type result struct {
	code        int
	out, errOut string
}

// kl runs `kubectl lockedcron args…` with the test kubeconfig, at now (zero: the real clock).
func kl(now time.Time, args ...string) result {
	return klWith(func(o *plugin.Options) {
		if !now.IsZero() {
			o.Now = func() time.Time { return now }
		}
	}, args...)
}

// klWith runs the plugin as kl does, its options set by set.
func klWith(set func(*plugin.Options), args ...string) result {
	var out, errOut bytes.Buffer
	at := 1 // after the command's name, so that the last argument stays last (__complete)
	if args[0] == "__complete" {
		at = 2
	}
	args = append(append(append([]string{}, args[:at]...), "--kubeconfig", kubeconfig), args[at:]...)
	o := plugin.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	set(o)
	cmd := plugin.NewCommand(o)
	code := plugin.Execute(cmd, args, o)
	return result{code, out.String(), errOut.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errOut)
}

// takeLock takes the job's lock as a pod would.
func (e *env) takeLock(t *testing.T) *lock.Lease {
	t.Helper()
	c, err := lock.NewClient(lock.ClientConfig{URL: e.redis.URL()})
	must(t, err)
	t.Cleanup(func() { c.Close() })
	lease, err := lock.New(c).Acquire(ctxT(t), lock.Request{Key: e.ns + "/report", Occurrence: occ,
		Holder: "test/" + e.ns + "/report-1796018400", TTL: 5 * time.Minute})
	must(t, err)
	return lease
}

// status reads a job whose Secret names a hostile Sentinel (a one-word +switch-master on
// its subscription, which killed the plugin with go-redis's Sentinel client: an admin's
// `status -A` died on one tenant's Secret): the master it names is read, nothing is
// subscribed to.
func TestStatusThroughAHostileSentinel(t *testing.T) {
	srv := redistest.Start(t)
	sentinel := redistest.StartHostileSentinel(t, srv.Addr)
	e := newEnv(t, "redis+sentinel://"+sentinel.Addr+"?master=m")
	e.redis = srv
	lease := e.takeLock(t)
	r := kl(time.Time{}, "status", "report", "-n", e.ns)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 2 || !slices.Contains(strings.Fields(lines[1]), "test/"+e.ns+"/report-1796018400") ||
		!slices.Contains(strings.Fields(lines[1]), fmt.Sprint(lease.Fence)) {
		t.Fatalf("want the lock the master holds (its holder and fencing token %d in the row): %v", lease.Fence, r)
	}
	if sentinel.Received("subscribe") {
		t.Fatalf("the plugin subscribed: %v", sentinel.Commands())
	}
}

// status shows the live lock taken with internal/lock: holder, ttl, fencing token and
// occurrence in the table; the token too with -o wide; all of it in json and yaml.
func TestStatusShowsTheLiveLock(t *testing.T) {
	e := newEnv(t, "")
	r := kl(time.Time{}, "status", "report", "-n", e.ns)
	if r.code != 0 || !strings.Contains(r.out, "HOLDER") || !strings.Contains(r.out, "report") {
		t.Fatalf("free lock: %v", r)
	}
	if row := strings.Split(strings.TrimSpace(r.out), "\n")[1]; !strings.Contains(row, "0 * * * * UTC") || strings.Count(row, " - ") < 3 {
		t.Fatalf("free lock row %q", row)
	}
	lease := e.takeLock(t)
	holder := "test/" + e.ns + "/report-1796018400"
	fence := fmt.Sprint(lease.Fence)

	r = kl(time.Time{}, "status", "report", "-n", e.ns)
	if r.code != 0 {
		t.Fatal(r)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and a row: %v", r)
	}
	for _, h := range []string{"NAME", "SCHEDULE", "SUSPEND", "HOLDER", "TTL", "FENCING TOKEN", "OCCURRENCE"} {
		if !strings.Contains(lines[0], h) {
			t.Errorf("header lacks %s: %q", h, lines[0])
		}
	}
	for _, v := range []string{holder, fence, "2026-11-30T06:00:00Z"} {
		if !strings.Contains(lines[1], v) {
			t.Errorf("row lacks %s: %q", v, lines[1])
		}
	}
	if strings.Contains(r.out, lease.Token) {
		t.Errorf("the default table shows the lock's token: %v", r)
	}
	for _, h := range []string{" KEY", "RUNS", "SUCCEEDED", "LOCK LOST", "LAST REQUEST"} {
		if strings.Contains(lines[0], h) {
			t.Errorf("the default table shows the wide column %s: %q", strings.TrimSpace(h), lines[0])
		}
	}

	r = kl(time.Time{}, "status", "report", "-n", e.ns, "-o", "wide")
	if r.code != 0 || !strings.Contains(r.out, lease.Token) || !strings.Contains(r.out, e.ns+"/report") || !strings.Contains(r.out, "LAST REQUEST") {
		t.Fatalf("wide: %v", r)
	}

	for _, format := range []string{"json", "yaml"} {
		r = kl(time.Time{}, "status", "report", "-n", e.ns, "-o", format)
		if r.code != 0 {
			t.Fatal(r)
		}
		var js plugin.JobStatus
		var err error
		if format == "json" {
			err = json.Unmarshal([]byte(r.out), &js)
		} else {
			err = yaml.UnmarshalStrict([]byte(r.out), &js)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", format, err, r.out)
		}
		l := js.Lock
		if js.Name != "report" || js.Namespace != e.ns || l == nil || l.Holder != holder || l.Token != lease.Token ||
			l.FencingToken != lease.Fence || l.Occurrence == nil || !l.Occurrence.Equal(occ) ||
			l.TTLMillis <= 4*60*1000 || l.TTLMillis > 5*60*1000 || l.Key != e.ns+"/report" {
			t.Fatalf("%s: %+v %+v", format, js, l)
		}
	}

	// -A lists every job with its namespace; this one's row has the holder.
	r = kl(time.Time{}, "status", "-A")
	if !strings.Contains(r.out, "NAMESPACE") || !strings.Contains(r.out, e.ns) || !strings.Contains(r.out, holder) {
		t.Fatalf("-A: %v", r)
	}
}

// unlock deletes the lock only with the token status shows: a wrong token exits 94 and
// deletes nothing; the right one deletes it and warns that the holder may still run.
func TestUnlockOnlyWithTheToken(t *testing.T) {
	e := newEnv(t, "")
	lease := e.takeLock(t)
	r := kl(time.Time{}, "unlock", "report", "-n", e.ns, "--token", "0123456789abcdef0123456789abcdef")
	if r.code != plugin.ExitNotHeld || !strings.Contains(r.errOut, "nothing was deleted") {
		t.Fatalf("wrong token: %v", r)
	}
	if v := e.redis.Do("GET", lock.LockKey(e.ns+"/report")); v == nil {
		t.Fatal("a wrong token deleted the lock")
	}
	r = kl(time.Time{}, "unlock", "report", "-n", e.ns)
	if r.code != plugin.ExitGeneric || !strings.Contains(r.errOut, "--token is required") {
		t.Fatalf("no token: %v", r)
	}
	r = kl(time.Time{}, "unlock", "report", "-n", e.ns, "--token", lease.Token)
	if r.code != 0 || !strings.Contains(r.out, "released") || !strings.Contains(r.errOut, "may still be running") {
		t.Fatalf("right token: %v", r)
	}
	if v := e.redis.Do("GET", lock.LockKey(e.ns+"/report")); v != nil {
		t.Fatalf("lock still there: %v", v)
	}
	r = kl(time.Time{}, "unlock", "report", "-n", e.ns, "--token", lease.Token)
	if r.code != plugin.ExitNotHeld || !strings.Contains(r.errOut, "is not locked") {
		t.Fatalf("unlock of a free lock: %v", r)
	}
	r = kl(time.Time{}, "status", "report", "-n", e.ns, "-o", "json")
	if r.code != 0 || !strings.Contains(r.out, `"lock": null`) {
		t.Fatalf("status after unlock: %v", r)
	}
}

// A missing job, a Secret the user may not read, an unreachable Redis: each a clear
// message and its own exit code.
func TestErrors(t *testing.T) {
	e := newEnv(t, "")
	ctx := ctxT(t)
	for _, args := range [][]string{
		{"status", "nope"}, {"history", "nope"}, {"next", "nope"}, {"run", "nope"},
		{"suspend", "nope"}, {"resume", "nope"}, {"unlock", "nope", "--token", "x"},
	} {
		r := kl(time.Time{}, append(args, "-n", e.ns)...)
		if r.code != plugin.ExitNotFound || !strings.Contains(r.errOut, "lockedcronjob "+e.ns+"/nope not found") {
			t.Errorf("%v: %v", args, r)
		}
	}

	// alice may read LockedCronJobs but not Secrets.
	must(t, k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"scheduling.lockedcron.io"}, Resources: []string{"lockedcronjobs"}, Verbs: []string{"get", "list", "watch"}}}}))
	must(t, k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "viewer"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: "rbac.authorization.k8s.io"}}}))
	var r result
	// RBAC takes effect when the API server's authorizer cache has the binding.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		r = kl(time.Time{}, "status", "report", "-n", e.ns, "--as", "alice")
		return r.code != plugin.ExitGeneric, nil
	})
	if err != nil || r.code != plugin.ExitSecret || !strings.Contains(r.errOut, "cannot read Secret "+e.ns+"/redis: forbidden;") {
		t.Fatalf("forbidden Secret: %v", r)
	}
	r = kl(time.Time{}, "unlock", "report", "-n", e.ns, "--as", "alice", "--token", "abc")
	if r.code != plugin.ExitSecret {
		t.Fatalf("unlock with a forbidden Secret: %v", r)
	}
	// history and next need no Secret.
	if r = kl(time.Time{}, "history", "report", "-n", e.ns, "--as", "alice"); r.code != 0 {
		t.Fatalf("history as alice: %v", r)
	}
	// What the API server says when it refuses is printed, not its reason alone
	// ("forbidden: Forbidden"): which permission is missing, or what an admission policy
	// says (the run-request policy names pods/create and why) (helper-101).
	for _, args := range [][]string{{"run", "report"}, {"suspend", "report"}} {
		r = kl(time.Time{}, append(args, "-n", e.ns, "--as", "alice")...)
		if r.code != plugin.ExitGeneric || !strings.Contains(r.errOut, `User "alice" cannot patch resource "lockedcronjobs"`) {
			t.Errorf("%v as alice, who may not patch: %v", args, r)
		}
	}

	// A Secret without url, then a Redis that is not there.
	sec := &corev1.Secret{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "redis"}, sec))
	sec.Data = map[string][]byte{"password": []byte("x")}
	must(t, k8s.Update(ctx, sec))
	r = kl(time.Time{}, "status", "report", "-n", e.ns)
	if r.code != plugin.ExitSecret || !strings.Contains(r.errOut, `has no key "url"`) {
		t.Fatalf("no url: %v", r)
	}
	e.redis.Stop()
	sec.Data = map[string][]byte{"url": []byte(e.redis.URL())}
	must(t, k8s.Update(ctx, sec))
	r = kl(time.Time{}, "status", "report", "-n", e.ns, "--redis-timeout", "2s")
	if r.code != plugin.ExitRedis || !strings.Contains(r.errOut, "cannot reach Redis at "+e.redis.Addr()+" (Secret "+e.ns+"/redis)") {
		t.Fatalf("unreachable Redis: %v", r)
	}
	r = kl(time.Time{}, "unlock", "report", "-n", e.ns, "--token", "abc", "--redis-timeout", "2s")
	if r.code != plugin.ExitRedis {
		t.Fatalf("unlock, unreachable Redis: %v", r)
	}

	// Bad flags.
	for _, args := range [][]string{
		{"status", "report", "-o", "xml"}, {"run", "report", "--id", "Bad_ID"}, {"run", "report", "--occurrence", "yesterday"},
		{"status", "report", "-A"}, {"status", "--no-such-flag"}, {"next", "report", "--count", "0"},
	} {
		r := kl(time.Time{}, append(args, "-n", e.ns)...)
		if r.code != plugin.ExitGeneric || r.errOut == "" {
			t.Errorf("%v: %v", args, r)
		}
	}
}

// history prints status.recent (table, wide, json, yaml); next the upcoming occurrences
// with the blackout window that suppresses each.
func TestHistoryAndNext(t *testing.T) {
	e := newEnv(t, "redis://127.0.0.1:1")
	ctx := ctxT(t)
	job := &v1alpha1.LockedCronJob{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	job.Status.Recent = []v1alpha1.RunRecord{
		{Occurrence: metav1.NewTime(occ.Add(time.Hour)), Outcome: "Failed", Pod: "report-m-1", Holder: "c/ns/report-m-1",
			FencingToken: 42, Duration: &metav1.Duration{Duration: 1500 * time.Millisecond}, Message: "exit 3", Trigger: v1alpha1.TriggerManual,
			RequestedAt: &metav1.Time{Time: occ.Add(time.Hour + 30*time.Second)}},
		{Occurrence: metav1.NewTime(occ), Outcome: "Succeeded", Pod: "report-1796018400", Holder: "c/ns/report-1796018400",
			FencingToken: 41, Duration: &metav1.Duration{Duration: 2 * time.Second}},
	}
	must(t, k8s.Status().Update(ctx, job))

	r := kl(time.Time{}, "history", "report", "-n", e.ns)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "OCCURRENCE") ||
		!strings.Contains(lines[1], "Failed") || !strings.Contains(lines[1], "Manual") || !strings.Contains(lines[1], "1.5s") ||
		!strings.Contains(lines[2], "Scheduled") || strings.Contains(r.out, "exit 3") {
		t.Fatalf("history: %v", r)
	}
	r = kl(time.Time{}, "history", "report", "-n", e.ns, "-o", "wide")
	if r.code != 0 || !strings.Contains(r.out, "exit 3") || !strings.Contains(r.out, "42") ||
		!strings.Contains(r.out, "REQUESTED") || !strings.Contains(r.out, occ.Add(time.Hour+30*time.Second).UTC().Format(time.RFC3339)) {
		t.Fatalf("history wide (with the manual run's request time): %v", r)
	}
	for _, format := range []string{"json", "yaml"} {
		r = kl(time.Time{}, "history", "report", "-n", e.ns, "-o", format)
		var got []plugin.HistoryEntry
		if format == "json" {
			must(t, json.Unmarshal([]byte(r.out), &got))
		} else {
			must(t, yaml.Unmarshal([]byte(r.out), &got))
		}
		if len(got) != 2 || got[0].Trigger != "Manual" || got[0].FencingToken != 42 || got[1].Outcome != "Succeeded" || got[0].Name != "report" {
			t.Fatalf("history %s: %+v", format, got)
		}
	}

	// A daily window 08:00-10:00 UTC suppresses the hourly occurrences at 08:00 and 09:00.
	job.Spec.Blackout = &v1alpha1.BlackoutSpec{Windows: []v1alpha1.BlackoutWindow{
		{Name: "backup", Schedule: "0 8 * * *", Duration: &metav1.Duration{Duration: 2 * time.Hour}}}}
	must(t, k8s.Update(ctx, job))
	now := occ.Add(30 * time.Minute) // 06:30
	r = kl(now, "next", "report", "-n", e.ns, "--count", "4")
	lines = strings.Split(strings.TrimSpace(r.out), "\n")
	want := [][]string{
		{"2026-11-30T07:00:00Z", "in 30m0s", "-"},
		{"2026-11-30T08:00:00Z", "in 1h30m0s", `window "backup"`},
		{"2026-11-30T09:00:00Z", "in 2h30m0s", `window "backup"`},
		{"2026-11-30T10:00:00Z", "in 3h30m0s", "-"},
	}
	if r.code != 0 || len(lines) != 5 {
		t.Fatalf("next: %v", r)
	}
	for i, w := range want {
		for _, cell := range w {
			if !strings.Contains(lines[i+1], cell) {
				t.Errorf("next row %d lacks %s: %q", i, cell, lines[i+1])
			}
		}
	}
	r = kl(now, "next", "report", "-n", e.ns, "--count", "2", "-o", "json")
	var up []plugin.Upcoming
	must(t, json.Unmarshal([]byte(r.out), &up))
	if len(up) != 2 || !up[1].Time.Equal(occ.Add(2*time.Hour)) || up[1].BlockedBy != `window "backup"` || up[0].BlockedBy != "" {
		t.Fatalf("next json: %+v", up)
	}

	// suspend / resume patch spec.suspend; a suspended job's occurrences say so.
	r = kl(time.Time{}, "suspend", "report", "-n", e.ns)
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), job))
	if r.code != 0 || job.Spec.Suspend == nil || !*job.Spec.Suspend || !strings.Contains(r.out, "report suspended") {
		t.Fatalf("suspend: %v %v", r, job.Spec.Suspend)
	}
	if r = kl(now, "next", "report", "-n", e.ns, "--count", "1"); !strings.Contains(r.out, "suspended") {
		t.Fatalf("next while suspended: %v", r)
	}
	r = kl(time.Time{}, "resume", "report", "-n", e.ns)
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), job))
	if r.code != 0 || job.Spec.Suspend == nil || *job.Spec.Suspend {
		t.Fatalf("resume: %v", r)
	}
}

// run patches the three annotations in one patch as kubectl-lockedcron.
func TestRunRequests(t *testing.T) {
	e := newEnv(t, "redis://127.0.0.1:1")
	ctx := ctxT(t)
	r := kl(time.Time{}, "run", "report", "-n", e.ns, "--id", "fix-1", "--occurrence", "2026-11-30T07:00:00+01:00", "--fail-fast")
	if r.code != 0 || !strings.Contains(r.out, "id fix-1") {
		t.Fatal(r)
	}
	job := &v1alpha1.LockedCronJob{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	a := job.Annotations
	if a[v1alpha1.AnnotationRunRequest] != "fix-1" || a[v1alpha1.AnnotationRunOccurrence] != "2026-11-30T06:00:00Z" ||
		a[v1alpha1.AnnotationRunContention] != "FailFast" {
		t.Fatalf("annotations %v", a)
	}
	var managers []string
	for _, mf := range job.ManagedFields {
		if strings.Contains(string(mf.FieldsV1.Raw), v1alpha1.AnnotationRunRequest) {
			managers = append(managers, mf.Manager)
		}
	}
	if len(managers) != 1 || managers[0] != plugin.FieldManager {
		t.Fatalf("managers of the annotation: %v", managers)
	}
	// A second request without --occurrence removes the first one's; the id is generated.
	r = kl(time.Time{}, "run", "report", "-n", e.ns, "-o", "json")
	var res plugin.RunResult
	must(t, json.Unmarshal([]byte(r.out), &res))
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	a = job.Annotations
	if r.code != 0 || res.ID == "" || a[v1alpha1.AnnotationRunRequest] != res.ID || a[v1alpha1.AnnotationRunContention] != "Wait" {
		t.Fatalf("%v %v", r, a)
	}
	if _, ok := a[v1alpha1.AnnotationRunOccurrence]; ok {
		t.Fatalf("the earlier occurrence stayed: %v", a)
	}
}

// controller plays the controller's part for one request: it waits for the annotation,
// then either refuses it or creates a pod and ends it with the given report and code.
// controller plays the controller for one run request: refused (refuse), or its pod made
// and ended with rep and exitCode (exitCode < 0: counted and deleted before it ended).
func controller(t *testing.T, e *env, refuse string, rep *report.Report, exitCode int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan struct{})
	t.Cleanup(func() { <-done; cancel() })
	go func() {
		defer close(done)
		job := &v1alpha1.LockedCronJob{}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job); err != nil {
				return false, err
			}
			return job.Annotations[v1alpha1.AnnotationRunRequest] != "", nil
		})
		if err != nil {
			t.Error(err)
			return
		}
		id := job.Annotations[v1alpha1.AnnotationRunRequest]
		req := &v1alpha1.RunRequest{ID: id, RequestedBy: plugin.FieldManager, Contention: "Wait", HandledAt: metav1.Now(), Refused: refuse}
		if refuse == "" {
			req.Pod = "report-m-" + id
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: req.Pod,
				Annotations: map[string]string{runpod.AnnotationWrappedContainer: "job", runpod.AnnotationScheduledTime: occ.Format(time.RFC3339)}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "busybox"}}}}
			if err := k8s.Create(ctx, pod); err != nil {
				t.Error(err)
				return
			}
		}
		job.Status.LastRunRequest = req
		if err := k8s.Status().Update(ctx, job); err != nil {
			t.Error(err)
			return
		}
		if refuse != "" {
			return
		}
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: req.Pod}, pod); err != nil {
			t.Error(err)
			return
		}
		if exitCode < 0 {
			// Counted before it ended (its job never started): in status.recent,
			// marked, and deleted, never finished.
			job.Status.Recent = []v1alpha1.RunRecord{{Pod: req.Pod, Occurrence: metav1.NewTime(occ), Outcome: string(rep.Outcome), Message: rep.Message, Trigger: v1alpha1.TriggerManual}}
			pod.Labels = map[string]string{runpod.LabelCounted: "true"}
			for _, err := range []error{k8s.Status().Update(ctx, job), k8s.Update(ctx, pod), k8s.Delete(ctx, pod)} {
				if err != nil {
					t.Error(err)
				}
			}
			return
		}
		msg, _ := report.Encode(*rep)
		phase := corev1.PodSucceeded
		if exitCode != 0 {
			phase = corev1.PodFailed
		}
		pod.Status.Phase = phase
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: string(msg)}}}}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Error(err)
		}
	}()
}

// run --wait prints the report and exits with the job's exit code, or the code of an
// outcome in which the job did not run, or 95 for a refusal, or 96 after --timeout.
func TestRunWait(t *testing.T) {
	cases := []struct {
		name   string
		refuse string
		rep    report.Report
		exit   int32
		code   int
		out    []string
	}{
		{"failed job", "", report.Report{Outcome: report.Failed, ExitCode: 3, FencingToken: 7, Holder: "test/x/report-m"}, 3, 3,
			[]string{"Outcome:       Failed", "Exit code:     3", "Fencing token: 7"}},
		{"succeeded", "", report.Report{Outcome: report.Succeeded, FencingToken: 8}, 0, 0, []string{"Outcome:       Succeeded"}},
		{"skipped", "", report.Report{Outcome: report.SkippedContention, HeldBy: "test/x/report-1"}, 0, plugin.ExitSkipped,
			[]string{"SkippedContention", "Held by:       test/x/report-1"}},
		{"suppressed", "", report.Report{Outcome: report.SuppressedDuplicate}, 0, plugin.ExitSuppressed, []string{"SuppressedDuplicate"}},
		{"missed", "", report.Report{Outcome: report.Missed}, 0, plugin.ExitMissed, []string{"Missed"}},
		{"lock lost", "", report.Report{Outcome: report.LockLost, ExitCode: 0, LockLost: true}, 0, plugin.ExitLockLost, []string{"LockLost"}},
		{"error", "", report.Report{Outcome: report.Error, Message: "redis unreachable"}, 70, plugin.ExitNotRun, []string{"redis unreachable"}},
		// exit -1: the controller counts the pod and deletes it before it ends (counted
		// missed, its job never started): status.recent says how it ended.
		{"counted before it ended", "", report.Report{Outcome: report.Missed, Message: "its job had not started by 2026-11-30T06:01:00Z (startingDeadlineSeconds)"}, -1, plugin.ExitMissed,
			[]string{"Outcome:       Missed", "startingDeadlineSeconds"}},
		{"refused", "occurrence 2026-11-30T06:00:00Z already succeeded", report.Report{}, 0, plugin.ExitRefused,
			[]string{"Refused:       occurrence 2026-11-30T06:00:00Z already succeeded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "redis://127.0.0.1:1")
			controller(t, e, tc.refuse, &tc.rep, tc.exit)
			r := kl(time.Time{}, "run", "report", "-n", e.ns, "--wait", "--timeout", "30s")
			if r.code != tc.code {
				t.Fatalf("want exit %d: %v", tc.code, r)
			}
			for _, s := range tc.out {
				if !strings.Contains(r.out, s) {
					t.Errorf("output lacks %q: %v", s, r)
				}
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		e := newEnv(t, "redis://127.0.0.1:1")
		controller(t, e, "", &report.Report{Outcome: report.Failed, ExitCode: 4}, 4)
		r := kl(time.Time{}, "run", "report", "-n", e.ns, "--wait", "--id", "j-1", "-o", "json")
		var res plugin.RunResult
		must(t, json.Unmarshal([]byte(r.out), &res))
		if r.code != 4 || res.ID != "j-1" || res.Pod != "report-m-j-1" || res.Report == nil || res.Report.Outcome != report.Failed ||
			res.ExitCode == nil || *res.ExitCode != 4 {
			t.Fatalf("%+v %v", res, r)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		e := newEnv(t, "redis://127.0.0.1:1")
		r := kl(time.Time{}, "run", "report", "-n", e.ns, "--wait", "--timeout", "1s")
		if r.code != plugin.ExitTimeout || !strings.Contains(r.errOut, "--timeout 1s passed") {
			t.Fatal(r)
		}
	})
}

// completion: the cobra command exists, and NAME completes to the namespace's jobs.
func TestCompletion(t *testing.T) {
	e := newEnv(t, "redis://127.0.0.1:1")
	r := kl(time.Time{}, "completion", "bash")
	if r.code != 0 || !strings.Contains(r.out, "__start_kubectl-lockedcron") {
		t.Fatalf("completion bash: %.300s", r.String())
	}
	// help lists the commands and the exit codes a script relies on.
	r = kl(time.Time{}, "run", "--help")
	if r.code != 0 || !strings.Contains(r.out, "kubectl lockedcron run NAME") || !strings.Contains(r.out, "95       run: the controller refused") {
		t.Fatalf("run --help: %v", r)
	}
	r = kl(time.Time{}, "__complete", "status", "-n", e.ns, "")
	if r.code != 0 || !strings.Contains(r.out, "report\n") {
		t.Fatalf("name completion: %v", r)
	}
}

// unsafeForTerminal finds in s what a terminal would act on rather than show: C0
// controls other than newline and tab, DEL, C1 controls (U+0080–U+009F, CSI among them),
// and bytes that are not UTF-8.
func unsafeForTerminal(s string) (rune, bool) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return rune(s[i]), true
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return r, true
		}
	}
	return 0, false
}

// What a job's status, its Redis's lock and its Redis's errors hold is written by others
// (a tenant's job, a tenant's Redis server): printed as it is, an escape sequence in it
// would reach the terminal of the admin who runs the plugin (retitle it, rewrite what is
// on the screen, set the clipboard with OSC 52). The plugin shows such characters escaped,
// in every output form, and JSON still decodes to what the object holds.
func TestOutputCannotDriveTheTerminal(t *testing.T) {
	const forged = "done\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[2J\r\b\u009b31m \x7f\xff!\f2026-11-30T05:00:00Z   Succeeded\v\n"
	e := newEnv(t, "")
	ctx := ctxT(t)
	job := &v1alpha1.LockedCronJob{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	job.Status.Recent = []v1alpha1.RunRecord{{Occurrence: metav1.NewTime(occ), Outcome: "Failed", Pod: "report-1796018400",
		Holder: "c/ns/report-1796018400", Message: strings.ToValidUTF8(forged, "\uFFFD")}}
	must(t, k8s.Status().Update(ctx, job))

	c, err := lock.NewClient(lock.ClientConfig{URL: e.redis.URL()})
	must(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = lock.New(c).Acquire(ctx, lock.Request{Key: e.ns + "/report", Occurrence: occ, Holder: "evil" + forged, TTL: 5 * time.Minute})
	must(t, err)

	for _, args := range [][]string{
		{"history", "report", "-o", "wide"}, {"history", "report", "-o", "yaml"}, {"history", "report", "-o", "json"},
		{"status", "report", "-o", "wide"}, {"status", "report", "-o", "yaml"}, {"status", "report", "-o", "json"},
	} {
		r := kl(time.Time{}, append(args, "-n", e.ns)...)
		if r.code != 0 {
			t.Fatalf("%v: %v", args, r)
		}
		for _, s := range []string{r.out, r.errOut} {
			if ch, bad := unsafeForTerminal(s); bad {
				t.Errorf("%v prints %U raw: %q", args, ch, s)
			}
		}
		shown, format := `\u001b]52;c;`, args[len(args)-1]
		if format == "wide" && strings.Count(r.out, "\n") != 2 {
			t.Errorf("%v: want a header and one row (a form feed, vertical tab or newline in a field must not make rows): %q", args, r.out)
		}
		if format == "yaml" {
			shown = `\e]52;c;` // YAML's own escape
		}
		if !strings.Contains(r.out, shown) {
			t.Errorf("%v does not show the escape as %s: %q", args, shown, r.out)
		}
		if args[0] == "status" && format != "wide" {
			var js plugin.JobStatus
			if format == "json" {
				must(t, json.Unmarshal([]byte(r.out), &js))
			} else {
				must(t, yaml.Unmarshal([]byte(r.out), &js))
			}
			if js.Lock == nil || js.Lock.Holder != strings.ToValidUTF8("evil"+forged, "\uFFFD") {
				t.Errorf("status -o %s: the holder decodes to %+v, want it as Redis holds it", format, js.Lock)
			}
		}
	}

	// A server's error text, in the plugin's error.
	addr := redistest.StartHostileRedis(t, "-ERR "+strings.NewReplacer("\r", "", "\n", "").Replace(forged)+"\r\n", false)
	sec := &corev1.Secret{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "redis"}, sec))
	sec.Data = map[string][]byte{"url": []byte("redis://" + addr)}
	must(t, k8s.Update(ctx, sec))
	r := kl(time.Time{}, "status", "report", "-n", e.ns)
	if r.code != plugin.ExitRedis || !strings.Contains(r.errOut, `answered ERR done\u001b]52`) {
		t.Fatalf("a hostile server's error: %v", r)
	}
	if ch, bad := unsafeForTerminal(r.errOut); bad {
		t.Errorf("the error prints %U raw: %q", ch, r.errOut)
	}

	// A server's error with a newline (a RESP3 blob error, which go-redis reads on any
	// connection) printed a line of its own that looked like the plugin's error about
	// another namespace's job (helper-97).
	const blob = "ERR x\nerror: billing/payroll: the lock was stolen"
	addr = redistest.StartHostileRedis(t, fmt.Sprintf("!%d\r\n%s\r\n", len(blob), blob), false)
	sec.Data = map[string][]byte{"url": []byte("redis://" + addr)}
	must(t, k8s.Update(ctx, sec))
	for _, args := range [][]string{{"status", "report", "-n", e.ns}, {"status", "-A"}} {
		r = kl(time.Time{}, args...)
		if r.code != plugin.ExitRedis || strings.Contains(r.errOut, "\nerror: billing/payroll") || !strings.Contains(r.errOut, `ERR x\u000aerror: billing/payroll`) {
			t.Errorf("%v: a server's error with a newline: %v %q; want it on the plugin's one line, the newline escaped", args, r.code, r.errOut)
		}
	}
}

// The plugin dials the Redis a Secret names, from the admin's machine: a tenant's Secret
// must not make it dial cloud metadata (link-local: refused, as by the controller and
// lockwrap), nor, with --redis-allowed-hosts (or LOCKEDCRON_REDIS_ALLOWED_HOSTS), an
// endpoint outside the list.
func TestRedisEndpointsTheAdminAllows(t *testing.T) {
	e := newEnv(t, "")
	ctx := ctxT(t)
	setURL := func(url string) {
		sec := &corev1.Secret{}
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "redis"}, sec))
		sec.Data = map[string][]byte{"url": []byte(url)}
		must(t, k8s.Update(ctx, sec))
	}
	setURL("redis://169.254.169.254:6379")
	r := kl(time.Time{}, "status", "report", "-n", e.ns, "--redis-timeout", "30s")
	if r.code != plugin.ExitSecret || !strings.Contains(r.errOut, "169.254.169.254 is link-local") {
		t.Fatalf("link-local: %v", r)
	}

	setURL(e.redis.URL())
	if r = kl(time.Time{}, "status", "report", "-n", e.ns, "--redis-allowed-hosts", "redis.internal,10.0.0.0/8"); r.code != plugin.ExitSecret ||
		!strings.Contains(r.errOut, "127.0.0.1 is not in the allowed hosts") || !strings.Contains(r.errOut, "--redis-allowed-hosts") {
		t.Fatalf("outside the list: %v", r)
	}
	t.Setenv("LOCKEDCRON_REDIS_ALLOWED_HOSTS", "redis.internal")
	if r = kl(time.Time{}, "status", "report", "-n", e.ns); r.code != plugin.ExitSecret || !strings.Contains(r.errOut, "not in the allowed hosts") {
		t.Fatalf("outside the list from the environment: %v", r)
	}
	if r = kl(time.Time{}, "status", "report", "-n", e.ns, "--redis-allowed-hosts", "127.0.0.0/8"); r.code != 0 {
		t.Fatalf("in the list: %v", r)
	}
	if r = kl(time.Time{}, "status", "report", "-n", e.ns, "--redis-allowed-hosts", "a b"); r.code != plugin.ExitGeneric ||
		!strings.Contains(r.errOut, "--redis-allowed-hosts") {
		t.Fatalf("a bad list: %v", r)
	}
}

// run --wait follows its request when a later one replaced it: status keeps only the last
// request handled, so the plugin, reading the job after both were handled, waited for ever
// for its id there. Its pod tells that it was handled; without a pod, and with the
// controller at the later request, it was refused or never handled.
func TestRunWaitReplacedByALaterRequest(t *testing.T) {
	long := "fix-" + strings.Repeat("x", 70) // refused by the controller; status records its RequestKey
	for _, tc := range []struct {
		name     string
		ourPod   bool
		inRecent bool // its pod already counted and gone, listed in status.recent
		later    string
		code     int
		sayings  []string
	}{
		{"after its pod was made", true, false, "fix-2", 0, []string{"Outcome:       Succeeded"}},
		{"before it was handled", false, false, "fix-2", plugin.ExitNotRun, []string{"fix-2 replaced it", "refused or never handled"}},
		{"after its pod was counted and pruned", false, true, "fix-2", 0, []string{"Outcome:       Succeeded"}},
		{"by an id too long to be recorded as it is", false, false, long, plugin.ExitNotRun, []string{"replaced it", "refused or never handled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "redis://127.0.0.1:1")
			ctx := ctxT(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				job, ok := requestedJob(ctx, t, e, "fix-1")
				if !ok {
					return
				}
				if tc.ourPod && !succeededRequestPod(ctx, t, job, "fix-1") {
					return
				}
				// A later request is made and handled before the plugin reads the job.
				job.Annotations[v1alpha1.AnnotationRunRequest] = tc.later
				if err := k8s.Update(ctx, job); err != nil {
					t.Error(err)
					return
				}
				job.Status.LastRunRequest = &v1alpha1.RunRequest{ID: runpod.RequestKey(tc.later), Contention: "Wait", HandledAt: metav1.Now(), Refused: "a blackout is in effect"}
				if tc.inRecent {
					job.Status.Recent = append(job.Status.Recent, v1alpha1.RunRecord{Pod: runpod.ManualName("report", "fix-1"), Outcome: "Succeeded",
						Occurrence: metav1.Time{Time: occ}, Trigger: "Manual", FencingToken: 9})
				}
				if err := k8s.Status().Update(ctx, job); err != nil {
					t.Error(err)
				}
			}()
			r := kl(time.Time{}, "run", "report", "-n", e.ns, "--wait", "--id", "fix-1", "--timeout", "20s")
			<-done
			r.expect(t, tc.code, tc.sayings...)
		})
	}
}

// requestedJob is e's job once it carries run request id (the plugin has set it); false
// (the test failed) if it did not within 30 s.
func requestedJob(ctx context.Context, t *testing.T, e *env, id string) (*v1alpha1.LockedCronJob, bool) {
	t.Helper()
	job := &v1alpha1.LockedCronJob{}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job)
		return err == nil && job.Annotations[v1alpha1.AnnotationRunRequest] == id, err
	})
	if err != nil {
		t.Error(err)
		return nil, false
	}
	return job, true
}

// expect fails t unless the command exited with code and said each of sayings.
func (r result) expect(t *testing.T, code int, sayings ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d: %v", code, r)
	}
	for _, s := range sayings {
		if !strings.Contains(r.out+r.errOut, s) {
			t.Errorf("output lacks %q: %v", s, r)
		}
	}
}

// succeededRequestPod makes the pod of job's run request id as the controller names and
// labels it, ended Succeeded; false (the test failed) if it could not.
func succeededRequestPod(ctx context.Context, t *testing.T, job *v1alpha1.LockedCronJob, id string) bool {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: runpod.ManualName(job.Name, id),
		Labels:          map[string]string{runpod.LabelRunRequest: id},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, v1alpha1.GroupVersion.WithKind("LockedCronJob"))},
		Annotations:     map[string]string{runpod.AnnotationWrappedContainer: "job", runpod.AnnotationScheduledTime: occ.Format(time.RFC3339)}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "busybox"}}}}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Error(err)
		return false
	}
	msg, _ := report.Encode(report.Report{Outcome: report.Succeeded, FencingToken: 9})
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Message: string(msg)}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Error(err)
		return false
	}
	return true
}

// run --wait whose request is removed from the job before the controller recorded it
// (kubectl annotate …/run-request-, another tool's apply) waited until --timeout, or for
// ever: nothing tells that the controller will not handle it. It now waits a grace for a
// sign that it was (a controller behind may have made its pod from the job as it read
// it), follows that pod if one was made, and otherwise says the run was not run.
func TestRunWaitRequestRemoved(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ourPod  bool // a controller behind made its pod, and stopped before recording it
		code    int
		sayings []string
	}{
		{"before it was handled", false, plugin.ExitNotRun, []string{"was removed from lockedcronjob", "no pod of it was made within 2s: it was not run"}},
		{"its pod made by a controller behind", true, 0, []string{"was removed from lockedcronjob", "Outcome:       Succeeded"}},
		{"requested again before the grace ended, then refused", false, plugin.ExitRefused, []string{"was removed from lockedcronjob", "a blackout is in effect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "redis://127.0.0.1:1")
			ctx := ctxT(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				job, ok := requestedJob(ctx, t, e, "fix-1")
				if !ok {
					return
				}
				delete(job.Annotations, v1alpha1.AnnotationRunRequest)
				if err := k8s.Update(ctx, job); err != nil {
					t.Error(err)
					return
				}
				if tc.ourPod {
					succeededRequestPod(ctx, t, job, "fix-1")
				}
				if tc.code == plugin.ExitRefused {
					// Set again at once; recorded (refused) only after the grace would have
					// ended: the wait goes on as for any request.
					job.Annotations[v1alpha1.AnnotationRunRequest] = "fix-1"
					if err := k8s.Update(ctx, job); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(3 * time.Second) // past the 2 s grace: what the test is about
					job.Status.LastRunRequest = &v1alpha1.RunRequest{ID: "fix-1", Contention: "Wait", HandledAt: metav1.Now(), Refused: "a blackout is in effect"}
					if err := k8s.Status().Update(ctx, job); err != nil {
						t.Error(err)
					}
				}
			}()
			r := klWith(func(o *plugin.Options) { o.RemovedGrace = 2 * time.Second },
				"run", "report", "-n", e.ns, "--wait", "--id", "fix-1", "--timeout", "60s")
			<-done
			r.expect(t, tc.code, tc.sayings...)
		})
	}
}

// TestFlagsThatWouldBeIgnoredAreRefused: a flag the command would accept and then not
// act on is refused, naming it and the fix, before anything is written: `run --timeout`
// without --wait exited 0 at once (nothing waited), and --redis-timeout 0 made every Redis
// answer read as a timeout, "needs a port-forward".
func TestFlagsThatWouldBeIgnoredAreRefused(t *testing.T) {
	e := newEnv(t, "redis://127.0.0.1:1")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "report", "-n", e.ns, "--timeout", "5s"}, "--timeout 5s bounds --wait"},
		// Not rounded down to the second's occurrence, which the controller would run again.
		{[]string{"run", "report", "-n", e.ns, "--occurrence", "2026-11-30T02:00:00.5Z"}, `--occurrence "2026-11-30T02:00:00.5Z": occurrences are whole seconds`},
		{[]string{"status", "report", "-n", e.ns, "--redis-timeout", "0s"}, "--redis-timeout 0s: want a duration above 0"},
		{[]string{"status", "report", "-n", e.ns, "--redis-timeout", "-1s"}, "--redis-timeout -1s: want a duration above 0"},
	} {
		r := kl(time.Time{}, c.args...)
		if r.code != plugin.ExitGeneric || !strings.Contains(r.errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.errOut, plugin.ExitGeneric, c.want)
		}
	}
	job := &v1alpha1.LockedCronJob{}
	must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(e.job), job))
	if id, ok := job.Annotations[v1alpha1.AnnotationRunRequest]; ok {
		t.Errorf("a run was requested (id %s) by a command that was refused", id)
	}
}

// TestRunWithAHandledIdAsksTheSameOrIsRefused: an id the controller has handled asks for
// nothing new. Asked again with other qualifiers (now an occurrence, now FailFast), the
// patch rewrote them and nothing else, and --wait followed the id's earlier run, exiting 0
// as if the occurrence had run again. It is refused before anything is written, naming
// what the id ran; with the same qualifiers it is still accepted (and followed).
func TestRunWithAHandledIdAsksTheSameOrIsRefused(t *testing.T) {
	e := newEnv(t, "redis://127.0.0.1:1")
	ctx := ctxT(t)
	job := &v1alpha1.LockedCronJob{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	job.Status.LastRunRequest = &v1alpha1.RunRequest{ID: "fix-1", Contention: v1alpha1.ManualContentionWait, HandledAt: metav1.Now(), Pod: runpod.ManualName(job.Name, "fix-1")}
	must(t, k8s.Status().Update(ctx, job))
	for _, args := range [][]string{
		{"--occurrence", "2026-11-30T02:00:00Z"},
		{"--fail-fast"},
	} {
		r := kl(time.Time{}, append([]string{"run", "report", "-n", e.ns, "--id", "fix-1"}, args...)...)
		if r.code != plugin.ExitGeneric || !strings.Contains(r.errOut, "--id fix-1 was handled already as a run of its own, contention Wait") {
			t.Errorf("%v: exit %d, stderr %q; want %d, naming what fix-1 ran", args, r.code, r.errOut, plugin.ExitGeneric)
		}
	}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	if _, ok := job.Annotations[v1alpha1.AnnotationRunRequest]; ok {
		t.Errorf("annotations written by a refused command: %v", job.Annotations)
	}
	if r := kl(time.Time{}, "run", "report", "-n", e.ns, "--id", "fix-1"); r.code != plugin.ExitOK {
		t.Errorf("the same id with the same qualifiers: exit %d, stderr %q; want it accepted", r.code, r.errOut)
	}
	// A refused id asked again with other qualifiers (the occurrence corrected) ran
	// nothing: it is not "handled already as" the corrected one.
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	job.Status.LastRunRequest = &v1alpha1.RunRequest{ID: "fix-2", Contention: v1alpha1.ManualContentionWait, HandledAt: metav1.Now(),
		Occurrence: &metav1.Time{Time: time.Date(2026, 11, 30, 2, 30, 0, 0, time.UTC)}, Refused: "not an occurrence of spec.schedule"}
	must(t, k8s.Status().Update(ctx, job))
	r := kl(time.Time{}, "run", "report", "-n", e.ns, "--id", "fix-2", "--occurrence", "2026-11-30T02:00:00Z")
	if r.code != plugin.ExitGeneric || !strings.Contains(r.errOut, "--id fix-2 was refused already (not an occurrence of spec.schedule)") {
		t.Errorf("a refused id asked again: exit %d, stderr %q; want %d, saying it was refused", r.code, r.errOut, plugin.ExitGeneric)
	}
	// Asked again as it was refused, it asks for nothing new either: the controller handles
	// an id once. It printed "run requested" and exited 0 (with --wait: the old refusal, as
	// if the controller had just refused it, "request again when …" and all).
	for _, wait := range [][]string{nil, {"--wait", "--timeout", "20s"}} {
		r = kl(time.Time{}, append([]string{"run", "report", "-n", e.ns, "--id", "fix-2", "--occurrence", "2026-11-30T02:30:00Z"}, wait...)...)
		r.expect(t, plugin.ExitRefused, "run fix-2 of "+e.ns+"/report was refused at ", "(not an occurrence of spec.schedule)", "choose a new --id")
	}
	// As --wait -o json shows a refusal, for scripts that read it.
	r = kl(time.Time{}, "run", "report", "-n", e.ns, "--id", "fix-2", "--occurrence", "2026-11-30T02:30:00Z", "--wait", "-o", "json")
	r.expect(t, plugin.ExitRefused, `"refused": "not an occurrence of spec.schedule"`, `"exitCode": 95`)

	// An earlier id, not the last one, whose pod is kept: the controller records it with
	// that pod, as the pod was built, and runs nothing. Asked with other qualifiers, --wait
	// followed the old pod and exited 0 as if the occurrence had been run again (helper-101).
	if !succeededRequestPod(ctx, t, job, "fix-0") {
		return
	}
	for _, args := range [][]string{
		{"--occurrence", "2026-11-30T02:00:00Z", "--wait", "--timeout", "20s"},
		{"--fail-fast"},
	} {
		r := kl(time.Time{}, append([]string{"run", "report", "-n", e.ns, "--id", "fix-0"}, args...)...)
		r.expect(t, plugin.ExitGeneric, "--id fix-0 was handled already as a run of its own, contention Wait (its pod "+runpod.ManualName(job.Name, "fix-0")+" is kept)")
	}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e.job), job))
	if id := job.Annotations[v1alpha1.AnnotationRunRequest]; id != "fix-1" {
		t.Errorf("a refused command wrote the run request: %q", id)
	}
	if r := kl(time.Time{}, "run", "report", "-n", e.ns, "--id", "fix-0"); r.code != plugin.ExitOK {
		t.Errorf("an earlier id with the qualifiers its pod was built with: exit %d, stderr %q; want it accepted", r.code, r.errOut)
	}
}
