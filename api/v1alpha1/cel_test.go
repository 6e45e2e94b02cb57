package v1alpha1_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/utils/ptr"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/schedule"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// celValidator is the API server's validator of the CRD's x-kubernetes-validations rules,
// built from config/crd/bases as kube-apiserver builds it.
func celValidator(tb testing.TB) (*cel.Validator, *schema.Structural) {
	tb.Helper()
	s, err := schema.NewStructural(schemaProps(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return cel.NewValidator(s, true, celconfig.PerCallLimit), s
}

// schemaProps is the CRD's schema as the API server holds it.
func schemaProps(tb testing.TB) *apiextensions.JSONSchemaProps {
	tb.Helper()
	var props apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(loadCRD(tb).Spec.Versions[0].Schema.OpenAPIV3Schema, &props, nil); err != nil {
		tb.Fatal(err)
	}
	return &props
}

// TestCRDValid: the API server's own validation of the CRD passes, the estimated cost of
// every rule included (a rule over its budget makes the CRD uninstallable).
func TestCRDValid(t *testing.T) {
	var crd apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(loadCRD(t), &crd, nil); err != nil {
		t.Fatal(err)
	}
	crd.Status.StoredVersions = []string{v1alpha1.GroupVersion.Version} // the API server's, once created
	if errs := validation.ValidateCustomResourceDefinition(context.Background(), &crd); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
}

// statusWrite is a job as the samples show it, with the status a controller writes after
// a few runs, before and after one more status write (what a status PUT validates).
func statusWrite(tb testing.TB) (obj, old map[string]any) {
	tb.Helper()
	at := metav1.NewTime(time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC))
	job := &v1alpha1.LockedCronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LockedCronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-report", Namespace: "team-a", UID: "5d0f2c3e-1111-4c43-9a43-7c1f2d9e5a11", Generation: 1},
		Spec: v1alpha1.LockedCronJobSpec{Schedule: "*/10 * * * * *", TimeZone: "UTC", StartingDeadlineSeconds: ptr.To(int64(5)),
			Lock: v1alpha1.LockSpec{Key: "demo/nightly-report", TTL: &metav1.Duration{Duration: 6 * time.Second}, KillGracePeriod: &metav1.Duration{Duration: 2 * time.Second},
				Redis: v1alpha1.RedisSpec{SecretRef: corev1.LocalObjectReference{Name: "redis"}}},
			Contention: v1alpha1.ContentionSpec{Policy: v1alpha1.ContentionSkip},
			Dedupe:     v1alpha1.DedupeSpec{Retention: &metav1.Duration{Duration: 168 * time.Hour}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "job", Image: "k8s.local/lockedcron-e2e-job:dev", ImagePullPolicy: corev1.PullNever,
					Command: []string{"/usr/local/bin/e2e-job", "--sleep=2s", "--termination-log=/dev/null"},
					Env: []corev1.EnvVar{{Name: "E2E_REDIS_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: "url"}}}}}}}},
			SuccessfulRunsHistoryLimit: ptr.To(int32(3)), FailedRunsHistoryLimit: ptr.To(int32(1)),
		},
		Status: v1alpha1.LockedCronJobStatus{ObservedGeneration: 1, LastScheduleTime: &at, LockKey: "demo/nightly-report",
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Scheduled", Message: "next occurrence 2026-12-03T07:00:10Z", LastTransitionTime: at, ObservedGeneration: 1},
				{Type: "LockBackendReady", Status: metav1.ConditionTrue, Reason: "RedisReachable", Message: "Secret read and Redis answered", LastTransitionTime: at, ObservedGeneration: 1}},
			Counters: v1alpha1.Counters{Runs: 3, Succeeded: 3},
		},
	}
	for i := range 3 {
		t := metav1.NewTime(at.Add(time.Duration(i-3) * 10 * time.Second))
		job.Status.Recent = append(job.Status.Recent, v1alpha1.RunRecord{Occurrence: t, Outcome: "Succeeded", Trigger: v1alpha1.TriggerScheduled,
			Pod: "nightly-report-1796281200", Holder: "local/team-a/nightly-report-1796281200", Message: "ran in 2.01s"})
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		tb.Fatal(err)
	}
	job.Status.Counters.Runs--
	job.Status.Recent = job.Status.Recent[1:]
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		tb.Fatal(err)
	}
	return u, o
}

// TestCELRules runs the CRD's validation rules on a job as kubectl sends it on create
// (each alone, as the API server runs them): a good job passes, and each bad one fails
// with its rule's message and no other. envtest's admission table checks the same
// through a real API server for some of them; this one covers every rule of the spec
// and its template, in milliseconds.
func TestCELRules(t *testing.T) {
	v, s := celValidator(t)
	good, _ := statusWrite(t)
	for name, c := range map[string]struct {
		mutate func(spec map[string]any)
		want   string // "" = valid
	}{
		"the sample":              {func(map[string]any) {}, ""},
		"restartPolicy unset":     {func(sp map[string]any) { delete(podSpec(sp), "restartPolicy") }, ""},
		"restartPolicy OnFailure": {func(sp map[string]any) { podSpec(sp)["restartPolicy"] = "OnFailure" }, ""},
		"restartPolicy Always":    {func(sp map[string]any) { podSpec(sp)["restartPolicy"] = "Always" }, "template.spec.restartPolicy must be Never or OnFailure"},
		"no containers":           {func(sp map[string]any) { podSpec(sp)["containers"] = []any{} }, "template.spec.containers must have at least one container"},
		"no pod spec":             {func(sp map[string]any) { delete(sp["template"].(map[string]any), "spec") }, "template.spec.containers must have at least one container"},
		"no command":              {func(sp map[string]any) { delete(container(sp, 0), "command") }, "template.spec.containers[0].command is required"},
		"empty command":           {func(sp map[string]any) { container(sp, 0)["command"] = []any{} }, "template.spec.containers[0].command is required"},
		"wrapContainer with a command, the first without": {func(sp map[string]any) {
			delete(container(sp, 0), "command")
			addContainer(sp, map[string]any{"name": "side", "image": "x", "command": []any{"/side"}})
			sp["wrapContainer"] = "side"
		}, ""},
		"wrapContainer without a command": {func(sp map[string]any) {
			addContainer(sp, map[string]any{"name": "side", "image": "x"})
			sp["wrapContainer"] = "side"
		}, "wrapContainer must name a container of template.spec.containers that has a command"},
		"wrapContainer names no container": {func(sp map[string]any) { sp["wrapContainer"] = "nope" }, "wrapContainer must name a container"},
		"template labels and annotations of the user's": {func(sp map[string]any) {
			sp["template"].(map[string]any)["metadata"] = map[string]any{"labels": map[string]any{"app": "report"}, "annotations": map[string]any{"example.com/owner": "team-a"}}
		}, ""},
		"a reserved template label": {func(sp map[string]any) {
			sp["template"].(map[string]any)["metadata"] = map[string]any{"labels": map[string]any{"app": "report", "scheduling.lockedcron.io/job": "x"}}
		}, "template.metadata.labels: keys under scheduling.lockedcron.io/ are reserved"},
		"a reserved template annotation": {func(sp map[string]any) {
			sp["template"].(map[string]any)["metadata"] = map[string]any{"annotations": map[string]any{"scheduling.lockedcron.io/scheduled-time": "x"}}
		}, "template.metadata.annotations: keys under scheduling.lockedcron.io/ are reserved"},
		"dedupe.retention twice lock.ttl": {func(sp map[string]any) {
			sp["lock"].(map[string]any)["ttl"] = "2m"
			sp["dedupe"] = map[string]any{"retention": "4m"}
		}, ""},
		"dedupe.retention under twice lock.ttl": {func(sp map[string]any) {
			sp["lock"].(map[string]any)["ttl"] = "2m"
			sp["dedupe"] = map[string]any{"retention": "3m59s"}
		}, "dedupe.retention must be at least twice lock.ttl"},
		"dedupe.retention unset": {func(sp map[string]any) { delete(sp, "dedupe") }, ""},
		// The Secret's name: an empty one was admitted (LocalObjectReference's name
		// defaults to ""), and its jobs said "reading Secret ns/: no answer from the API
		// server"; an invalid one said "not found; create it", which nobody can.
		// A key of the form of the tag a braced key is stored under shared its lock.
		"lock.key a braced key's tag": {func(sp map[string]any) { sp["lock"].(map[string]any)["key"] = "#2762b91c221fc7f7" },
			"lock.key must not be '#' and 16 hex digits"},
		"lock.key # and 15 hex digits": {func(sp map[string]any) { sp["lock"].(map[string]any)["key"] = "#2762b91c221fc7f" }, ""},
		"secretRef.name with dots":     {func(sp map[string]any) { redisRef(sp)["name"] = "redis.prod-1" }, ""},
		"secretRef.name empty": {func(sp map[string]any) { redisRef(sp)["name"] = "" },
			"lock.redis.secretRef.name must name a Secret"},
		"secretRef.name not a DNS subdomain": {func(sp map[string]any) { redisRef(sp)["name"] = "Redis_Prod" },
			"lock.redis.secretRef.name must name a Secret"},
		// Retries asked for under the default policy were silently not made.
		"contention.retry without a policy": {func(sp map[string]any) { sp["contention"] = map[string]any{"retry": map[string]any{"attempts": 3}} },
			"contention.retry applies only to contention.policy Retry"},
		"contention.retry under Skip": {func(sp map[string]any) {
			sp["contention"] = map[string]any{"policy": "Skip", "retry": map[string]any{"attempts": 3}}
		}, "contention.retry applies only to contention.policy Retry"},
		"contention.retry under Retry": {func(sp map[string]any) {
			sp["contention"] = map[string]any{"policy": "Retry", "retry": map[string]any{"attempts": 3}}
		}, ""},
		"secretRef.name too long": {func(sp map[string]any) { redisRef(sp)["name"] = strings.Repeat("a", 254) },
			"lock.redis.secretRef.name must name a Secret"},
	} {
		t.Run(name, func(t *testing.T) {
			obj := runtime.DeepCopyJSON(good)
			delete(obj, "status")
			c.mutate(obj["spec"].(map[string]any))
			errs, _ := v.Validate(context.Background(), nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
			switch {
			case c.want == "" && len(errs) > 0:
				t.Fatalf("want valid, got %v", errs)
			case c.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want)):
				t.Fatalf("want one error %q, got %v", c.want, errs)
			}
		})
	}
}

// admission is what the API server runs on a create of a job: structural defaulting,
// the OpenAPI schema's validation, then the CEL rules.
type admission struct {
	s      *schema.Structural
	schema apivalidation.SchemaValidator
	cel    *cel.Validator
}

func newAdmission(tb testing.TB) admission {
	tb.Helper()
	sv, _, err := apivalidation.NewSchemaValidator(schemaProps(tb))
	if err != nil {
		tb.Fatal(err)
	}
	c, s := celValidator(tb)
	return admission{s: s, schema: sv, cel: c}
}

func (a admission) admit(obj map[string]any) field.ErrorList {
	defaulting.Default(obj, a.s)
	if errs := apivalidation.ValidateCustomResource(nil, obj, a.schema); len(errs) > 0 {
		return errs
	}
	errs, _ := a.cel.Validate(context.Background(), nil, a.s, obj, nil, celconfig.RuntimeCELCostBudget)
	return errs
}

// lockwrapVerdict builds the job's pod as the controller does and runs lockwrap's flag
// and environment checks (config.Parse) on its wrapped container: nil when lockwrap
// would take the lock.
func lockwrapVerdict(obj map[string]any) error {
	var job v1alpha1.LockedCronJob
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &job); err != nil {
		return err
	}
	pod, err := runpod.Build(&job, time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC), runpod.Options{ClusterName: "c", WrapperImage: "w"})
	if err != nil {
		return err
	}
	for _, c := range pod.Spec.Containers {
		if len(c.Command) == 0 || c.Command[0] != runpod.WrapperPath {
			continue
		}
		env := map[string]string{config.EnvRedisURL: "redis://127.0.0.1:6379/0"} // from the Secret
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
		_, _, err := config.Parse(c.Command[1:], func(k string) string { return env[k] })
		return err
	}
	return errors.New("no container runs lockwrap")
}

// TestAdmittedJobsStart: the API server admits exactly the jobs whose pods' lockwrap
// accepts its configuration. A job admitted with settings its pods refuse fails every
// run (each pod ends in a configuration error); one refused that lockwrap would take is a
// limit for nothing. 8,000 jobs near every limit of what the controller passes lockwrap:
// the lock's durations (on the kill-before-expiry limit give or take a millisecond or a
// nanosecond), the key (its length in bytes and in characters, whitespace at its ends,
// ASCII and Unicode), dedupe.retention, the contention retry's attempts and backoffs,
// minReplicas, the job's name. Found: the kill-before-expiry rule, computed in milliseconds, admitted a
// killGracePeriod a nanosecond too long; keys were measured in characters and trimmed of
// ASCII whitespace only, where lockwrap counts bytes and trims Unicode whitespace.
func TestAdmittedJobsStart(t *testing.T) {
	adm := newAdmission(t)
	base, _ := statusWrite(t)
	delete(base, "status")
	rng := rand.New(rand.NewPCG(13, 3))
	const ms = time.Millisecond
	pick := func(marks ...time.Duration) time.Duration {
		d := marks[rng.IntN(len(marks))]
		switch rng.IntN(4) {
		case 0:
			return d
		case 1:
			return d + time.Duration(rng.IntN(2001)-1000)*ms
		case 2:
			return d + time.Duration(rng.IntN(5)-2)*ms
		default:
			return d + time.Duration(rng.IntN(2001)-1000)*time.Microsecond
		}
	}
	spaces := []string{" ", "\t", "\u00a0", "\u2003", "\u3000", "\u0085", "\u200b"}
	key := func() string {
		fill := []string{"k", "é", "中", "🔒"}[rng.IntN(4)]
		n := []int{1, 20, 128, 170, 171, 256, 257, 511, 512, 513}[rng.IntN(10)]
		k := strings.Repeat(fill, n)
		switch rng.IntN(4) {
		case 0:
			k = spaces[rng.IntN(len(spaces))] + k
		case 1:
			k += spaces[rng.IntN(len(spaces))]
		case 2:
			k = "a" + spaces[rng.IntN(len(spaces))] + k
		}
		return k
	}
	counts := map[string]int{}
	for i := range 8000 {
		whole := i%4 != 0 // a quarter off the millisecond grid
		grid := func(d time.Duration) time.Duration {
			if whole {
				return d.Truncate(ms)
			}
			return d
		}
		ttl := grid(pick(time.Second, 3*time.Second, 10*time.Second, 30*time.Second, time.Minute, 24*time.Hour))
		var renew time.Duration // unset: ttl/3
		if rng.IntN(2) == 0 {
			renew = grid(pick(100*ms, ttl/3, ttl/2))
		}
		kill := grid(pick(0, time.Second, 2*time.Second, 10*time.Second, time.Hour))
		if rng.IntN(2) == 0 {
			// On the kill-before-expiry limit, ttl = renewInterval + killGracePeriod +
			// max(100ms, ttl/100), give or take up to 2ms (and a nanosecond off the grid).
			kill = ttl - max(100*ms, ttl/100) - renew
			if renew == 0 {
				kill -= ttl / 3
			}
			kill = grid(kill) + time.Duration(rng.IntN(5)-2)*ms
			if !whole {
				kill += time.Duration(rng.IntN(3) - 1)
			}
		}
		retention := pick(2*ttl, time.Minute, 168*time.Hour, 8784*time.Hour) + time.Duration(rng.IntN(3)-1)
		if ttl <= 0 || kill < 0 || renew < 0 || retention <= 0 {
			continue // not a duration the CRD's pattern admits
		}
		obj := runtime.DeepCopyJSON(base)
		spec := obj["spec"].(map[string]any)
		lock := spec["lock"].(map[string]any)
		lock["ttl"], lock["killGracePeriod"] = ttl.String(), kill.String()
		if renew > 0 {
			lock["renewInterval"] = renew.String()
		}
		spec["dedupe"] = map[string]any{"retention": retention.String()}
		if rng.IntN(3) == 0 {
			lock["key"] = key()
		}
		lock["minReplicas"] = int64(rng.IntN(3))
		obj["metadata"].(map[string]any)["name"] = strings.Repeat("n", []int{14, 52, 53}[rng.IntN(3)]) // pod names: <name>-<unix seconds>
		if rng.IntN(3) == 0 {
			// (Not 0: lockwrap takes 0 as "until the deadline"; the API asks for attempts.)
			r := map[string]any{"attempts": int64([]int{1, 2, 1000, 1001}[rng.IntN(4)])}
			if rng.IntN(2) == 0 {
				r["backoff"] = pick(10*ms, time.Second, 24*time.Hour).String()
			}
			if rng.IntN(2) == 0 {
				r["maxBackoff"] = pick(10*ms, 30*time.Second, 24*time.Hour).String()
			}
			spec["contention"] = map[string]any{"policy": "Retry", "retry": r}
			if rng.IntN(2) == 0 {
				spec["startingDeadlineSeconds"] = int64(rng.IntN(600))
			}
		}
		errs := adm.admit(obj)
		verdict := lockwrapVerdict(obj)
		switch {
		case len(errs) == 0 && verdict != nil:
			t.Errorf("admitted, but lockwrap refuses: %v\nlock %v, dedupe %v, contention %v", verdict, lock, spec["dedupe"], spec["contention"])
		case len(errs) > 0 && verdict == nil:
			t.Errorf("refused, but lockwrap would run it: %v\nlock %v, dedupe %v, contention %v", errs, lock, spec["dedupe"], spec["contention"])
		case len(errs) == 0:
			counts["admitted"]++
		default:
			counts["refused"]++
		}
	}
	t.Logf("%v", counts)
	if counts["admitted"] < 500 || counts["refused"] < 500 {
		t.Fatalf("%v: the cases do not probe both sides of the limits", counts)
	}
}

func podSpec(spec map[string]any) map[string]any {
	return spec["template"].(map[string]any)["spec"].(map[string]any)
}

func container(spec map[string]any, i int) map[string]any {
	return podSpec(spec)["containers"].([]any)[i].(map[string]any)
}

func addContainer(spec map[string]any, c map[string]any) {
	ps := podSpec(spec)
	ps["containers"] = append(ps["containers"].([]any), c)
}

// BenchmarkStatusWriteCEL: what the CRD's validation rules cost the API server on each
// status write of a job, which evaluates them all, spec's too (ratcheting only forgives
// their errors). (go test ./api/v1alpha1/ -run '^$' -bench StatusWriteCEL -benchmem)
func BenchmarkStatusWriteCEL(b *testing.B) {
	v, s := celValidator(b)
	obj, old := statusWrite(b)
	ctx := context.Background()
	for b.Loop() {
		if errs, _ := v.Validate(ctx, nil, s, obj, old, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// TestAdmittedDurationsDecode: every duration field of the spec that the API server admits
// decodes into the Go type the controller's cache holds (metav1.Duration, a time.Duration).
// The schema's pattern admits any number of hours; one job whose value overflows
// time.Duration ("2562048h") would make every list of LockedCronJobs undecodable, and the
// controller's cache with it, for every job of the cluster. Each field of the schema that
// carries the duration pattern is tried (a new one fails here until the base job below sets
// its parent) with values just inside and just outside time.Duration's range. Found:
// blackout.rollouts[].settle had no rule, and admitted "2562048h".
func TestAdmittedDurationsDecode(t *testing.T) {
	adm := newAdmission(t)
	base, _ := statusWrite(t)
	delete(base, "status")
	spec := base["spec"].(map[string]any)
	spec["lock"].(map[string]any)["renewInterval"] = "2s"
	spec["contention"] = map[string]any{"policy": "Retry", "retry": map[string]any{"attempts": int64(3), "backoff": "1s", "maxBackoff": "30s"}}
	spec["blackout"] = map[string]any{
		"windows":  []any{map[string]any{"schedule": "0 2 * * *", "duration": "1h"}},
		"rollouts": []any{map[string]any{"kind": "Deployment", "name": "api", "settle": "5m"}},
	}
	if errs := adm.admit(runtime.DeepCopyJSON(base)); len(errs) > 0 {
		t.Fatalf("the base job is refused: %v", errs)
	}
	var paths [][]string
	var walk func(path []string, s *apiextensions.JSONSchemaProps)
	walk = func(path []string, s *apiextensions.JSONSchemaProps) {
		if s.Pattern == `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$` { // the markers' duration pattern
			paths = append(paths, path)
		}
		for name, p := range s.Properties {
			walk(append(append([]string(nil), path...), name), &p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(append(append([]string(nil), path...), "[0]"), s.Items.Schema)
		}
	}
	specProps := schemaProps(t).Properties["spec"]
	walk(nil, &specProps)
	if len(paths) < 8 {
		t.Fatalf("found %d duration fields in the schema (%v): the walk is broken", len(paths), paths)
	}
	for _, path := range paths {
		for _, value := range []string{"2562047h", "2562048h", "9999999999999h", "9223372036854775808ns", "1h2562047h"} {
			obj := runtime.DeepCopyJSON(base)
			parent := obj["spec"]
			for _, step := range path[:len(path)-1] {
				if step == "[0]" {
					parent = parent.([]any)[0]
					continue
				}
				next, ok := parent.(map[string]any)[step]
				if !ok {
					t.Fatalf("spec.%s: the base job does not set %s; set it so that this field is tried", strings.Join(path, "."), step)
				}
				parent = next
			}
			parent.(map[string]any)[path[len(path)-1]] = value
			field := "spec." + strings.ReplaceAll(strings.Join(path, "."), ".[0]", "[0]")
			errs := adm.admit(obj)
			var job v1alpha1.LockedCronJob
			err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &job)
			if len(errs) == 0 && err != nil {
				t.Errorf("%s: %q is admitted, and the controller cannot decode the job: %v", field, value, err)
			}
			if leaf := path[len(path)-1]; len(errs) > 0 && !strings.Contains(errs.ToAggregate().Error(), leaf) {
				t.Errorf("%s: %q is refused without naming %s: %v", field, value, leaf, errs)
			}
		}
	}
}

// TestAdmittedBlackoutsCompile: the API server admits the blackout windows and rollout
// references the controller can use (blackout.Compile), and refuses, naming the field,
// those it cannot; a job admitted with a blackout the controller refuses stops (Ready
// False, no occurrence starts) where it should have been refused at admission. Found: a
// window schedule "@every 1h", "" or "TZ=UTC …" and a rollout name "" were admitted; so was
// spec.schedule "TZ=UTC …". A cron expression's own syntax (a minute 61) is checked by the
// controller only (Ready=False, InvalidSchedule): CEL has no cron parser.
func TestAdmittedBlackoutsCompile(t *testing.T) {
	adm := newAdmission(t)
	base, _ := statusWrite(t)
	delete(base, "status")
	window := func(schedule string) map[string]any {
		return map[string]any{"windows": []any{map[string]any{"schedule": schedule, "duration": "1h"}}}
	}
	rollout := func(name string) map[string]any {
		return map[string]any{"rollouts": []any{map[string]any{"kind": "Deployment", "name": name}}}
	}
	for _, c := range []struct {
		name     string
		schedule string // spec.schedule ("": the sample's)
		blackout map[string]any
	}{
		{"a cron window", "", window("0 2 * * 6")},
		{"a descriptor window", "", window("@daily")},
		{"an @every window", "", window("@every 1h")},
		{"an @every window after a space", "", window(" @every 1h")},
		{"an empty window schedule", "", window("")},
		{"a TZ= window", "", window("TZ=UTC 0 2 * * *")},
		{"a CRON_TZ= window", "", window("CRON_TZ=Europe/Berlin 0 2 * * *")},
		{"a rollout by name", "", rollout("api")},
		{"a rollout named \"\"", "", rollout("")},
		{"a TZ= schedule", "TZ=UTC 0 2 * * *", nil},
		{"a CRON_TZ= schedule after a space", " CRON_TZ=UTC 0 2 * * *", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := runtime.DeepCopyJSON(base)
			spec := obj["spec"].(map[string]any)
			if c.schedule != "" {
				spec["schedule"] = c.schedule
			}
			if c.blackout != nil {
				spec["blackout"] = runtime.DeepCopyJSONValue(c.blackout)
			}
			errs := adm.admit(obj)
			var job v1alpha1.LockedCronJob
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &job); err != nil {
				t.Fatal(err)
			}
			_, berr := blackout.Compile(job.Spec.Blackout, job.Spec.TimeZone)
			_, serr := schedule.Parse(job.Spec.Schedule, job.Spec.TimeZone)
			refused := errors.Join(berr, serr)
			switch {
			case len(errs) == 0 && refused != nil:
				t.Errorf("admitted, and the controller refuses it: %v", refused)
			case len(errs) > 0 && refused == nil:
				t.Errorf("refused, and the controller would use it: %v", errs)
			case len(errs) > 0 && !strings.Contains(errs.ToAggregate().Error(), "schedule") && !strings.Contains(errs.ToAggregate().Error(), "name"):
				t.Errorf("refused without naming the field: %v", errs)
			}
		})
	}
}

func redisRef(sp map[string]any) map[string]any {
	return sp["lock"].(map[string]any)["redis"].(map[string]any)["secretRef"].(map[string]any)
}
