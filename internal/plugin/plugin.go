// Package plugin is `kubectl lockedcron`: the commands of the kubectl plugin
// (cmd/kubectl-lockedcron) that request manual runs, show a LockedCronJob's status with
// the live Redis lock, its history and upcoming occurrences, suspend and resume it, and
// release a stuck lock by its token. Kubernetes is reached with the user's kubeconfig and
// rights (k8s.io/cli-runtime's flags), Redis with the Secret the job names, read with
// those same rights.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/printable"
)

// Exit codes. A script can rely on them; `kubectl lockedcron --help` and
// docs/kubectl-plugin.md list them.
const (
	ExitOK = 0
	// ExitGeneric: bad flags or arguments, an API server error or refusal, anything else.
	ExitGeneric = 90
	// ExitNotFound: the LockedCronJob does not exist.
	ExitNotFound = 91
	// ExitSecret: the job's Redis Secret cannot be read (forbidden, missing) or used.
	ExitSecret = 92
	// ExitRedis: Redis does not answer.
	ExitRedis = 93
	// ExitNotHeld: unlock found the lock free or held with another token; nothing deleted.
	ExitNotHeld = 94
	// ExitRefused: the controller refused the run request (status.lastRunRequest.refused).
	ExitRefused = 95
	// ExitTimeout: run --wait gave up after --timeout.
	ExitTimeout = 96
	// ExitSkipped: the run found the lock held and did not run (SkippedContention).
	ExitSkipped = 97
	// ExitSuppressed: the occurrence had already succeeded (SuppressedDuplicate).
	ExitSuppressed = 98
	// ExitMissed: the job did not run (Missed): too late, or held back by a blackout.
	ExitMissed = 99
	// ExitLockLost: the job ran but could not prove it held the lock to the end.
	ExitLockLost = 100
	// ExitNotRun: nothing ran: Interrupted, Error, or the pod ended without a report.
	ExitNotRun = 101
)

const exitCodesHelp = `Exit codes (the same for every command):
  0        success (run --wait: the job succeeded)
  1-89     run --wait: the job ran and failed with this exit code (also 102-255)
  90       error: bad flags or arguments, API server error or refusal
  91       the LockedCronJob does not exist
  92       the job's Redis Secret cannot be read with your rights, or holds no usable url
  93       Redis does not answer
  94       unlock: the lock is free or held with another token; nothing was deleted
  95       run: the controller refused the request (status.lastRunRequest.refused)
  96       run --wait: --timeout passed before the run ended
  97       run --wait: the lock was held elsewhere, the job did not run (SkippedContention)
  98       run --wait: the occurrence had already succeeded (SuppressedDuplicate)
  99       run --wait: the job did not run (Missed): too late, or held back by a blackout
  100      run --wait: the job ran but lost its lock (LockLost; the report has its exit code)
  101      run --wait: nothing ran (Interrupted, Error, pod ended or deleted without a report),
           or a later request replaced it, or it was removed, before it was recorded, and
           it has no pod
A job that itself exits 90-101 is told apart by the report's outcome (-o json: .report.outcome).`

// FieldManager is the field manager of every write the plugin makes; the controller
// records it as status.lastRunRequest.requestedBy.
const FieldManager = "kubectl-lockedcron"

// ExitError carries an exit code; Err (when set) is printed as "error: …".
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

func exitf(code int, format string, a ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, a...)}
}

// Options are the flags and streams every command shares.
type Options struct {
	Config *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	AllNamespaces bool
	Output        string
	RedisTimeout  time.Duration
	// RedisAllowedHosts are the Redis endpoints the plugin may dial (lock.ParseAllowedHosts);
	// empty: any but link-local ones.
	RedisAllowedHosts string
	// Now is the clock (tests fix it).
	Now func() time.Time
	// RemovedGrace is how long run --wait still waits, once its request was removed from
	// the job before the controller recorded it, for a sign that it was handled.
	RemovedGrace time.Duration
}

// NewOptions returns Options with kubectl's flags.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	cf := genericclioptions.NewConfigFlags(true)
	// --token is unlock's (the lock's token); a bearer token comes from the kubeconfig.
	cf.BearerToken = nil
	// Everything printed shows terminal controls escaped (terminal.go).
	streams.Out, streams.ErrOut = safeWriter(streams.Out), safeWriter(streams.ErrOut)
	return &Options{
		Config:       cf,
		IOStreams:    streams,
		RedisTimeout: 5 * time.Second,
		// The same variable lockwrap reads: an admin's shell can share the manager's list.
		RedisAllowedHosts: os.Getenv("LOCKEDCRON_REDIS_ALLOWED_HOSTS"),
		Now:               time.Now,
		// Longer than a pass may take (the manager's --reconcile-timeout, 1m).
		RemovedGrace: 2 * time.Minute,
	}
}

// Main runs the plugin with args (without the program name) and returns its exit code.
func Main(args []string, streams genericiooptions.IOStreams) int {
	o := NewOptions(streams)
	return Execute(NewCommand(o), args, o)
}

// Execute runs cmd (from NewCommand(o)) with args and returns the exit code, having
// printed the error.
func Execute(cmd *cobra.Command, args []string, o *Options) int {
	streams := o.IOStreams
	// The plugin reports errors itself; the libraries' own logs would only repeat them.
	ctrllog.SetLogger(logr.Discard())
	redis.SetLogger(quiet{})
	cmd.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.ExecuteContext(ctx)
	defer flush(streams.ErrOut)
	defer flush(streams.Out)
	if err == nil {
		return ExitOK
	}
	var x *ExitError
	if errors.As(err, &x) {
		if x.Err != nil {
			fmt.Fprintln(streams.ErrOut, errorLine(x.Err))
		}
		return x.Code
	}
	fmt.Fprintln(streams.ErrOut, errorLine(err))
	return ExitGeneric
}

// errorLine is how the plugin prints an error: one line. An error can quote what others
// wrote (a tenant's Redis server's reply, which can hold newlines): a line of its own in
// it would read as another error of the plugin's, about another job.
func errorLine(err error) string { return "error: " + printable.OneLine(err.Error()) }

// quiet drops go-redis's log lines (a dial failure is reported as ExitRedis).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// NewCommand is `kubectl lockedcron` with its subcommands.
func NewCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-lockedcron",
		Short: "Run, inspect and unlock LockedCronJobs",
		Long: `kubectl lockedcron requests manual runs of LockedCronJobs (under the same Redis lock as
the scheduled ones), shows their status with the live lock read from Redis, their history
and upcoming occurrences, suspends and resumes them, and releases a stuck lock by its token.

It uses your kubeconfig and your rights; the live lock is read with the Redis Secret the job
names (spec.lock.redis.secretRef), which you must be allowed to get.

` + exitCodesHelp,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl lockedcron",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(o.Out)
	root.SetErr(o.ErrOut)
	root.SetIn(o.In)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitGeneric, Err: err}
	})
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if o.RedisTimeout <= 0 {
			// A context that has already ended: every Redis answer would read as a
			// timeout, and the message would send the user to the network.
			return exitf(ExitGeneric, "--redis-timeout %v: want a duration above 0, e.g. 5s", o.RedisTimeout)
		}
		return nil
	}
	fs := root.PersistentFlags()
	o.Config.AddFlags(fs)
	fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List the LockedCronJobs of all namespaces (status, history, next without NAME).")
	fs.StringVarP(&o.Output, "output", "o", "", "Output format: wide, json or yaml (default: a table).")
	fs.DurationVar(&o.RedisTimeout, "redis-timeout", o.RedisTimeout, "How long to wait for Redis.")
	fs.StringVar(&o.RedisAllowedHosts, "redis-allowed-hosts", o.RedisAllowedHosts, "Comma list of the Redis endpoints the plugin may dial, as the manager's flag of that name "+
		"(host names, globs, IPs, CIDRs); a job's Secret naming another is refused before any connection. Empty: any, but link-local "+
		"addresses (169.254.0.0/16, fe80::/10) and the cloud metadata addresses fd00:ec2::254 and 100.100.100.200 are always refused unless a CIDR here allows them. Default: $LOCKEDCRON_REDIS_ALLOWED_HOSTS.")
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return o.completeNamespaces(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
	})

	root.AddCommand(newRunCommand(o), newStatusCommand(o), newHistoryCommand(o), newNextCommand(o),
		newSuspendCommand(o, true), newSuspendCommand(o, false), newUnlockCommand(o))
	return root
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// kube returns a client for the user's kubeconfig and the namespace in effect.
func (o *Options) kube() (client.WithWatch, string, error) {
	rc, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, "", exitf(ExitGeneric, "kubeconfig: %w", err)
	}
	rc.UserAgent = FieldManager
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", exitf(ExitGeneric, "%w", err)
	}
	ns, _, err := o.Config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", exitf(ExitGeneric, "kubeconfig: %w", err)
	}
	return c, ns, nil
}

// getJob reads one LockedCronJob; ExitNotFound when it does not exist.
func getJob(ctx context.Context, c client.Client, ns, name string) (*v1alpha1.LockedCronJob, error) {
	var job v1alpha1.LockedCronJob
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &job); err != nil {
		return nil, apiError(err, ns, name)
	}
	return &job, nil
}

// apiError maps an API error about the LockedCronJob ns/name to an exit code.
func apiError(err error, ns, name string) error {
	switch {
	case apierrors.IsNotFound(err):
		return exitf(ExitNotFound, "lockedcronjob %s/%s not found", ns, name)
	}
	// Anything else as the API server said it (a refusal names the missing permission,
	// or what an admission policy requires): printed on one line (errorLine).
	var x *ExitError
	if errors.As(err, &x) {
		return err
	}
	return exitf(ExitGeneric, "lockedcronjob %s/%s: %w", ns, name, err)
}

// jobs returns the named job, or every job of the namespace (all with -A).
func (o *Options) jobs(ctx context.Context, c client.Client, ns string, args []string) ([]v1alpha1.LockedCronJob, error) {
	if len(args) == 1 {
		if o.AllNamespaces {
			return nil, exitf(ExitGeneric, "NAME and --all-namespaces (-A) do not go together: name the job's namespace with -n")
		}
		job, err := getJob(ctx, c, ns, args[0])
		if err != nil {
			return nil, err
		}
		return []v1alpha1.LockedCronJob{*job}, nil
	}
	var list v1alpha1.LockedCronJobList
	var opts []client.ListOption
	if !o.AllNamespaces {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, exitf(ExitGeneric, "listing lockedcronjobs: %w", err)
	}
	if len(list.Items) == 0 {
		where := "namespace " + ns
		if o.AllNamespaces {
			where = "any namespace"
		}
		fmt.Fprintf(o.ErrOut, "No LockedCronJobs found in %s.\n", where)
	}
	return list.Items, nil
}

// checkOutput validates -o.
func (o *Options) checkOutput() error {
	switch o.Output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return exitf(ExitGeneric, "--output %q: want wide, json or yaml", o.Output)
}

// completeJobs completes NAME with the LockedCronJobs of the namespace in effect.
func (o *Options) completeJobs(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := o.kube()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	var list v1alpha1.LockedCronJobList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, j := range list.Items {
		names = append(names, j.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func (o *Options) completeNamespaces(ctx context.Context) []string {
	c, _, err := o.kube()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var list v1alpha1.LockedCronJobList
	if err := c.List(ctx, &list); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, j := range list.Items {
		if !seen[j.Namespace] {
			seen[j.Namespace] = true
			out = append(out, j.Namespace)
		}
	}
	return out
}
