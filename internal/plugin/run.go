package plugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/runpod"
	"github.com/lockedcron/lockedcron/internal/runstatus"
)

// idPattern is the run-request id the controller accepts (v1alpha1.AnnotationRunRequest).
var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// RunResult is what `run -o json|yaml` prints: the request, and with --wait its pod and
// the job's report.
type RunResult struct {
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	ID         string         `json:"id"`
	Occurrence string         `json:"occurrence,omitempty"`
	Contention string         `json:"contention"`
	Refused    string         `json:"refused,omitempty"`
	Pod        string         `json:"pod,omitempty"`
	Report     *report.Report `json:"report,omitempty"`
	// ExitCode is the plugin's exit code (with --wait).
	ExitCode *int `json:"exitCode,omitempty"`
}

type runFlags struct {
	wait       bool
	occurrence string
	failFast   bool
	id         string
	timeout    time.Duration
}

func newRunCommand(o *Options) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run NAME [--wait] [--occurrence TIME] [--fail-fast] [--id ID]",
		Short: "Request a manual run, under the same lock as the scheduled ones",
		Long: `Request a manual run of a LockedCronJob: one merge patch (field manager kubectl-lockedcron)
sets the annotations scheduling.lockedcron.io/run-request (the id), run-request-occurrence
and run-request-contention; the controller creates one pod per id, never two, and the run
goes through the same Redis lock as the scheduled runs, so it never overlaps one.

--id makes the request idempotent: running the same command again with the same id asks for
nothing new (and with --wait follows the same run; a refused one shows its refusal, exit 95).
The same id with another --occurrence or --fail-fast is refused (exit 90). Without --id a new
id is generated.
--occurrence re-runs a scheduled occurrence (RFC 3339), refused if the ledger says it
succeeded. The run waits for the lock (bounded) unless --fail-fast.

--wait follows the request to its end: it prints the controller's refusal, or the job's
report, and exits with the job's exit code (or one of the codes below). A request removed
from the job before the controller recorded it is waited for 2m more (a controller behind
may still make its pod), then reported not run (101).

` + exitCodesHelp,
		Example: `  kubectl lockedcron run report -n team-a --wait
  kubectl lockedcron run report --id nightly-fix-1 --occurrence 2026-11-30T02:00:00Z --wait --timeout 30m
  kubectl lockedcron run report --fail-fast --wait -o json | jq .report.outcome`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			return o.run(cmd.Context(), args[0], f)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.wait, "wait", false, "Follow the run to its end, print its report and exit with the job's exit code.")
	fs.StringVar(&f.occurrence, "occurrence", "", "Re-run this scheduled occurrence (RFC 3339, e.g. 2026-11-30T02:00:00Z); refused if it succeeded.")
	fs.BoolVar(&f.failFast, "fail-fast", false, "Do not wait for the lock: skip the run if it is held (contention FailFast).")
	fs.StringVar(&f.id, "id", "", "The request id (1-63 of a-z, 0-9, '-', alphanumeric at both ends); generated when empty.")
	fs.DurationVar(&f.timeout, "timeout", 0, "With --wait: give up after this long (exit 96); 0 waits for ever.")
	return cmd
}

// newID is "<utc yyyymmdd-hhmmss>-<4 random hex>".
func newID(now time.Time) (string, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}

func (o *Options) run(ctx context.Context, name string, f runFlags) error {
	id := f.id
	if id == "" {
		var err error
		if id, err = newID(o.Now()); err != nil {
			return exitf(ExitGeneric, "generating an id: %w", err)
		}
	} else if !idPattern.MatchString(id) {
		return exitf(ExitGeneric, "--id %q: want 1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit", id)
	}
	var occurrence any // JSON null removes an earlier request's occurrence
	occText := ""
	var occ *metav1.Time // what --occurrence names; nil: a run of its own
	if f.occurrence != "" {
		t, err := time.Parse(time.RFC3339, f.occurrence)
		if err != nil {
			return exitf(ExitGeneric, "--occurrence %q: want an RFC 3339 time such as 2026-11-30T02:00:00Z", f.occurrence)
		}
		if t.Nanosecond() != 0 {
			// Formatted below, it lost its fraction, and re-ran the second's occurrence.
			return exitf(ExitGeneric, "--occurrence %q: occurrences are whole seconds: name a scheduled time as `kubectl lockedcron history` shows it (e.g. 2026-11-30T02:00:00Z)", f.occurrence)
		}
		occText = t.UTC().Format(time.RFC3339)
		occurrence = occText
		occ = &metav1.Time{Time: t}
	}
	contention := v1alpha1.ManualContentionWait
	if f.failFast {
		contention = v1alpha1.ManualContentionFailFast
	}
	if f.timeout < 0 {
		return exitf(ExitGeneric, "--timeout %v: must not be negative", f.timeout)
	}
	if f.timeout > 0 && !f.wait {
		// Without --wait nothing is waited for: the timeout would be ignored.
		return exitf(ExitGeneric, "--timeout %v bounds --wait: add --wait, or leave --timeout out", f.timeout)
	}
	c, ns, err := o.kube()
	if err != nil {
		return err
	}
	// Read first: a missing job is ExitNotFound, not a failed patch.
	current, err := getJob(ctx, c, ns, name)
	if err != nil {
		return err
	}
	structured := o.Output == "json" || o.Output == "yaml"
	if rr := current.Status.LastRunRequest; f.id != "" && rr != nil && rr.ID == id && rr.Refused != "" && sameRequest(rr, occText, contention) {
		// Asked again as it was refused: the controller handles an id once, so nothing
		// would be asked. The refusal is shown as --wait shows one, and when it was.
		code := ExitRefused
		res := RunResult{Namespace: ns, Name: name, ID: id, Occurrence: occText, Contention: contention, Refused: rr.Refused, ExitCode: &code}
		if structured {
			if err := printData(o.Out, o.Output, res); err != nil {
				return err
			}
		} else {
			printRun(o.Out, res)
		}
		return exitf(ExitRefused, "run %s of %s/%s was refused at %s (%s); the controller handles an id once: choose a new --id to ask again",
			id, ns, name, rr.HandledAt.UTC().Format(time.RFC3339), rr.Refused)
	}
	if f.id != "" { // a generated id is new
		if err := handledAlready(ctx, c, current, id, occ, occText, contention); err != nil {
			return err
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		v1alpha1.AnnotationRunRequest:    id,
		v1alpha1.AnnotationRunOccurrence: occurrence,
		v1alpha1.AnnotationRunContention: contention,
	}}})
	if err != nil {
		return exitf(ExitGeneric, "%w", err)
	}
	job := &v1alpha1.LockedCronJob{}
	job.Namespace, job.Name = ns, name
	if err := c.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return apiError(err, ns, name)
	}
	res := RunResult{Namespace: ns, Name: name, ID: id, Occurrence: occText, Contention: contention}
	if !f.wait {
		if structured {
			return printData(o.Out, o.Output, res)
		}
		fmt.Fprintf(o.Out, "run requested: lockedcronjob %s/%s, id %s\n", ns, name, id)
		return nil
	}
	fmt.Fprintf(o.ErrOut, "run requested: lockedcronjob %s/%s, id %s; waiting for the controller\n", ns, name, id)

	wctx := ctx
	if f.timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	code, err := o.follow(wctx, c, job, &res)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return exitf(ExitTimeout, "run %s of %s/%s: --timeout %v passed before it ended", id, ns, name, f.timeout)
		}
		return err
	}
	res.ExitCode = &code
	if structured {
		if err := printData(o.Out, o.Output, res); err != nil {
			return err
		}
	} else {
		printRun(o.Out, res)
	}
	if code == ExitOK {
		return nil
	}
	if res.Refused != "" {
		return exitf(code, "run %s of %s/%s refused: %s", id, ns, name, res.Refused)
	}
	return &ExitError{Code: code}
}

// follow waits for the controller to handle the request, then for its pod to end; it
// fills res and returns the exit code.
func (o *Options) follow(ctx context.Context, c client.WithWatch, job *v1alpha1.LockedCronJob, res *RunResult) (int, error) {
	req, err := o.awaitHandled(ctx, c, job, res)
	for errors.Is(err, errRequestedAgain) {
		req, err = o.awaitHandled(ctx, c, job, res)
	}
	if err != nil {
		return 0, err
	}
	return o.followPod(ctx, c, job, req, res)
}

// errRequestedAgain: the request was removed, and set again before it was given up.
var errRequestedAgain = errors.New("the run request was set again")

// awaitHandled waits for the controller to handle the request: what status or its pod
// says of it.
func (o *Options) awaitHandled(ctx context.Context, c client.WithWatch, job *v1alpha1.LockedCronJob, res *RunResult) (*v1alpha1.RunRequest, error) {
	var req *v1alpha1.RunRequest
	// A request removed from the job before the controller recorded it is waited for
	// o.RemovedGrace more (a controller behind may have made its pod already, or be about
	// to from the job as it read it), then taken as never handled.
	gctx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	var removed *time.Timer
	defer func() {
		if removed != nil {
			removed.Stop()
		}
	}()
	err := watchUntil(gctx, c, &v1alpha1.LockedCronJobList{}, job, func(ev watch.EventType, obj client.Object) (bool, error) {
		j := obj.(*v1alpha1.LockedCronJob)
		if ev == watch.Deleted {
			return false, exitf(ExitNotFound, "lockedcronjob %s/%s was deleted while waiting", j.Namespace, j.Name)
		}
		r := j.Status.LastRunRequest
		if r != nil && r.ID == res.ID {
			req = r
			return true, nil
		}
		if _, ok := j.Annotations[v1alpha1.AnnotationRunRequest]; !ok {
			pod, err := requestPod(gctx, c, j, res.ID)
			if err != nil || pod != "" {
				req = &v1alpha1.RunRequest{ID: res.ID, Pod: pod}
				return err == nil, err
			}
			if removed == nil {
				fmt.Fprintf(o.ErrOut, "run %s: the request was removed from lockedcronjob %s/%s before the controller recorded it; waiting %v for a pod of it\n",
					res.ID, j.Namespace, j.Name, o.RemovedGrace)
				removed = time.AfterFunc(o.RemovedGrace, func() { giveUp(errRequestRemoved) })
			}
			return false, nil
		}
		if removed != nil && removed.Stop() {
			removed = nil // requested again: waited for as any request
		}
		// Status keeps the last request handled only. Once the controller is at a later
		// request that replaced ours (it handles the annotation as it is, never an earlier
		// one), ours was handled before it — its pod says so — or never.
		// (Status records an id as runpod.RequestKey: a long one, refused, cut and digested.)
		current := j.Annotations[v1alpha1.AnnotationRunRequest]
		if current == res.ID || r == nil || r.ID != runpod.RequestKey(current) {
			return false, nil
		}
		pod, err := requestPod(ctx, c, j, res.ID)
		if err != nil || pod != "" {
			req = &v1alpha1.RunRequest{ID: res.ID, Pod: pod}
			return err == nil, err
		}
		// Its pod, counted, may be gone already (history limits): status.recent has it.
		if name := runpod.ManualName(j.Name, res.ID); recentOf(j, name) != nil {
			req = &v1alpha1.RunRequest{ID: res.ID, Pod: name}
			return true, nil
		}
		return false, exitf(ExitNotRun, "run %s of %s/%s: request %s replaced it before the controller recorded it, and no pod of it exists: it was refused or never handled (its Events say which: kubectl get events -n %s --field-selector involvedObject.name=%s)",
			res.ID, j.Namespace, j.Name, current, j.Namespace, j.Name)
	})
	if errors.Is(context.Cause(gctx), errRequestRemoved) && ctx.Err() == nil {
		req, err = o.removedLastLook(ctx, c, job, res)
	}
	return req, err
}

// followPod follows the handled request's pod to its end.
func (o *Options) followPod(ctx context.Context, c client.WithWatch, job *v1alpha1.LockedCronJob, req *v1alpha1.RunRequest, res *RunResult) (int, error) {
	if req.Refused != "" {
		res.Refused = req.Refused
		return ExitRefused, nil
	}
	res.Pod = req.Pod
	if req.Pod == "" {
		return 0, exitf(ExitGeneric, "run %s: the controller handled it without a pod or a refusal", res.ID)
	}
	fmt.Fprintf(o.ErrOut, "run %s: pod %s; waiting for it to end\n", res.ID, req.Pod)
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = job.Namespace, req.Pod
	var final *corev1.Pod
	counted := false
	err := watchUntil(ctx, c, &corev1.PodList{}, pod, func(ev watch.EventType, obj client.Object) (bool, error) {
		p := obj.(*corev1.Pod)
		if p.Labels[runpod.LabelCounted] == "true" && !runstatus.Finished(p) {
			// Counted before it ended, to be deleted (it never started, or its kubelet
			// never ended it). status.recent has its outcome; what its kubelet makes of
			// the deletion does not matter.
			counted = true
			return true, nil
		}
		if runstatus.Finished(p) {
			final = p
			return true, nil
		}
		if ev == watch.Deleted {
			return false, exitf(ExitNotRun, "pod %s/%s was deleted before it ended", p.Namespace, p.Name)
		}
		return false, nil
	})
	var x *ExitError
	if counted || errors.As(err, &x) && x.Code == ExitNotFound {
		// Already gone (counted and cleaned up): status.recent has its outcome.
		return o.fromRecent(ctx, c, job, res)
	}
	if err != nil {
		return 0, err
	}
	// As status shows it (fromRecent): its text with controls escaped.
	r := runstatus.ResultOf(final).Report.Printable()
	res.Report = &r
	return exitFor(r), nil
}

// errRequestRemoved: the request was removed from the job, and o.RemovedGrace passed
// with no sign that the controller handled it.
var errRequestRemoved = errors.New("the run request was removed")

// removedLastLook looks once more for a request removed before it was recorded: what
// status or its pod says of it, or that it was not run.
func (o *Options) removedLastLook(ctx context.Context, c client.Client, job *v1alpha1.LockedCronJob, res *RunResult) (*v1alpha1.RunRequest, error) {
	j, err := getJob(ctx, c, job.Namespace, job.Name)
	if err != nil {
		return nil, err
	}
	if r := j.Status.LastRunRequest; r != nil && r.ID == res.ID {
		return r, nil
	}
	if pod, err := requestPod(ctx, c, j, res.ID); err != nil || pod != "" {
		return &v1alpha1.RunRequest{ID: res.ID, Pod: pod}, err
	}
	if j.Annotations[v1alpha1.AnnotationRunRequest] == res.ID {
		return nil, errRequestedAgain
	}
	return nil, exitf(ExitNotRun, "run %s of %s/%s: the request was removed from the job (annotation %s) before the controller recorded it, and no pod of it was made within %v: it was not run",
		res.ID, j.Namespace, j.Name, v1alpha1.AnnotationRunRequest, o.RemovedGrace)
}

// handledAlready refuses, before anything is written, a request with an id the controller
// has handled and will not handle again: the controller handles an id once, so the patch
// would ask for nothing new, and --wait would follow the run the id had as if it were this
// one (occ: the asked occurrence, occText its RFC 3339 text). That is the last request
// handled (status.lastRunRequest) asked again with other qualifiers (asked again as it was
// refused, run shows the refusal); and an earlier id whose pod is kept, asked with
// qualifiers other than those its pod was built with (the controller records such an id
// with its pod; once the pod is gone, the id is a request again).
func handledAlready(ctx context.Context, c client.Client, job *v1alpha1.LockedCronJob, id string, occ *metav1.Time, occText, contention string) error {
	if rr := job.Status.LastRunRequest; rr != nil && rr.ID == id {
		switch {
		case rr.Refused != "" && !sameRequest(rr, occText, contention):
			return exitf(ExitGeneric, "--id %s was refused already (%s): the same id asks for nothing new; choose a new --id for %s",
				id, rr.Refused, describeRequest(occ, contention))
		case !sameRequest(rr, occText, contention):
			return exitf(ExitGeneric, "--id %s was handled already as %s: the same id asks for nothing new; choose a new --id for %s, or leave --occurrence and --fail-fast as they were to follow it",
				id, describeRequest(rr.Occurrence, rr.Contention), describeRequest(occ, contention))
		}
		return nil
	}
	// With the user's own rights: one who may request runs but not read pods is not
	// checked here (the request is followed as it is).
	pod, err := requestPodOf(ctx, c, job, id)
	switch {
	case apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return err
	case pod == nil:
		return nil
	}
	m := runpod.ManualRunOf(pod)
	was := &v1alpha1.RunRequest{ID: id, Contention: m.Contention}
	if !m.Occurrence.IsZero() {
		was.Occurrence = &metav1.Time{Time: m.Occurrence}
	}
	if sameRequest(was, occText, contention) {
		return nil
	}
	return exitf(ExitGeneric, "--id %s was handled already as %s (its pod %s is kept): the same id asks for nothing new; choose a new --id for %s, or leave --occurrence and --fail-fast as they were to follow it",
		id, describeRequest(was.Occurrence, was.Contention), pod.Name, describeRequest(occ, contention))
}

// requestPod is the name of the pod the controller made for run request id of job, ""
// when there is none.
func requestPod(ctx context.Context, c client.Client, job *v1alpha1.LockedCronJob, id string) (string, error) {
	pod, err := requestPodOf(ctx, c, job, id)
	if err != nil || pod == nil {
		return "", err
	}
	return pod.Name, nil
}

// requestPodOf is the pod the controller made for run request id of job, nil when there
// is none: runpod.ManualName, labelled with the id and controlled by the job.
func requestPodOf(ctx context.Context, c client.Client, job *v1alpha1.LockedCronJob, id string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: runpod.ManualName(job.Name, id)}, pod); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, exitf(ExitGeneric, "reading the pod of run %s: %w", id, err)
	case pod.Labels[runpod.LabelRunRequest] != id || !metav1.IsControlledBy(pod, job):
		return nil, nil
	}
	return pod, nil
}

// fromRecent takes the outcome of a pod that is gone from status.recent.
func (o *Options) fromRecent(ctx context.Context, c client.Client, job *v1alpha1.LockedCronJob, res *RunResult) (int, error) {
	j, err := getJob(ctx, c, job.Namespace, job.Name)
	if err != nil {
		return 0, err
	}
	rec := recentOf(j, res.Pod)
	if rec == nil {
		return 0, exitf(ExitNotRun, "pod %s/%s is gone and status.recent does not list it", job.Namespace, res.Pod)
	}
	r := report.Report{V: report.Version, Outcome: report.Outcome(rec.Outcome), Holder: rec.Holder,
		FencingToken: rec.FencingToken, Message: rec.Message, Occurrence: ts(rec.Occurrence.Time)}
	res.Report = &r
	code := exitFor(r)
	if r.Outcome == report.Failed {
		code = 1 // the exit code is not kept in status
	}
	return code, nil
}

// recentOf is the record of pod in the job's status.recent, nil when it lists none.
func recentOf(j *v1alpha1.LockedCronJob, pod string) *v1alpha1.RunRecord {
	for i := range j.Status.Recent {
		if j.Status.Recent[i].Pod == pod {
			return &j.Status.Recent[i]
		}
	}
	return nil
}

// exitFor is the plugin's exit code for a report.
func exitFor(r report.Report) int {
	switch r.Outcome {
	case report.Succeeded:
		return ExitOK
	case report.Failed:
		if r.ExitCode > 0 && r.ExitCode < 256 {
			return r.ExitCode
		}
		return 1
	case report.SkippedContention:
		return ExitSkipped
	case report.SuppressedDuplicate:
		return ExitSuppressed
	case report.Missed:
		return ExitMissed
	case report.LockLost:
		return ExitLockLost
	}
	return ExitNotRun
}

// watchUntil gets obj (ExitNotFound when absent) and watches it until cond says done,
// starting again from a fresh read when the API server closes the watch.
func watchUntil(ctx context.Context, c client.WithWatch, list client.ObjectList, obj client.Object,
	cond func(watch.EventType, client.Object) (bool, error)) error {
	key := client.ObjectKeyFromObject(obj)
	for {
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return exitf(ExitNotFound, "%s %s not found", kindOf(obj), key)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return exitf(ExitGeneric, "reading %s %s: %w", kindOf(obj), key, err)
		}
		if done, err := cond(watch.Modified, obj); done || err != nil {
			return err
		}
		w, err := c.Watch(ctx, list, client.InNamespace(key.Namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", key.Name)},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()}})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return exitf(ExitGeneric, "watching %s %s: %w", kindOf(obj), key, err)
		}
		done, err := drain(ctx, w, cond)
		w.Stop()
		if done || err != nil {
			return err
		}
	}
}

// drain reads w until cond is done, w closes (false, nil) or ctx ends.
func drain(ctx context.Context, w watch.Interface, cond func(watch.EventType, client.Object) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			if ev.Type == watch.Error {
				return false, nil // e.g. resource version too old: read again
			}
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			if done, err := cond(ev.Type, obj); done || err != nil {
				return done, err
			}
		}
	}
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Pod:
		return "pod"
	}
	return "lockedcronjob"
}

// printRun prints the outcome of run --wait for people.
func printRun(w io.Writer, res RunResult) {
	fmt.Fprintf(w, "Run:           %s (lockedcronjob %s/%s)\n", res.ID, res.Namespace, res.Name)
	if res.Refused != "" {
		fmt.Fprintf(w, "Refused:       %s\n", printable.OneLine(res.Refused))
		return
	}
	fmt.Fprintf(w, "Pod:           %s\n", res.Pod)
	r := res.Report
	if r == nil {
		return
	}
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-15s%s\n", k+":", printable.OneLine(v)) // a field cannot forge the next
		}
	}
	line("Outcome", string(r.Outcome))
	line("Occurrence", r.Occurrence)
	line("Holder", r.Holder)
	line("Held by", r.HeldBy)
	if r.FencingToken != 0 {
		line("Fencing token", strconv.FormatInt(r.FencingToken, 10))
	}
	if r.Attempts > 0 {
		line("Attempts", strconv.Itoa(r.Attempts))
	}
	if r.WaitedMs > 0 {
		line("Waited", dur(time.Duration(r.WaitedMs)*time.Millisecond))
	}
	line("Acquired at", r.AcquiredAt)
	line("Released at", r.ReleasedAt)
	if r.Outcome == report.Succeeded || r.Outcome == report.Failed || r.Outcome == report.LockLost {
		line("Exit code", strconv.Itoa(r.ExitCode))
	}
	line("Watermark", r.Watermark)
	for _, warn := range r.Warnings {
		line("Warning", warn)
	}
	line("Message", r.Message)
	if res.ExitCode != nil {
		line("Exit", strconv.Itoa(*res.ExitCode))
	}
}

// sameRequest reports whether the handled request rr asked what occText (RFC 3339, or
// empty: a run of its own) and contention ask.
func sameRequest(rr *v1alpha1.RunRequest, occText, contention string) bool {
	if (rr.Occurrence == nil) != (occText == "") {
		return false
	}
	if rr.Occurrence != nil && rr.Occurrence.UTC().Format(time.RFC3339) != occText {
		return false
	}
	return rr.Contention == contention
}

// describeRequest says what a request asks: a run of its own or an occurrence again,
// and its contention.
func describeRequest(occ *metav1.Time, contention string) string {
	what := "a run of its own"
	if occ != nil {
		what = "occurrence " + occ.UTC().Format(time.RFC3339) + " again"
	}
	return what + ", contention " + contention
}
