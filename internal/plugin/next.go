package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/blackout"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/schedule"
)

// Upcoming is one row of `next -o json|yaml`.
type Upcoming struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Time      time.Time `json:"time"`
	// BlockedBy names the blackout window or workload expected to suppress it ("suspended"
	// when the job is suspended); empty when it should run.
	BlockedBy string `json:"blockedBy,omitempty"`
}

func newNextCommand(o *Options) *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "next [NAME]",
		Short: "Show a LockedCronJob's upcoming occurrences and the blackout that will suppress each",
		Long: `Show the next occurrences of a LockedCronJob's schedule (in its time zone) and, for each,
the blackout window or rolling-out workload expected to suppress it, computed here from the
spec with the controller's own schedule and blackout rules (workloads are read with your
rights; status.upcoming is the controller's view of the same).`,
		Example:           `  kubectl lockedcron next report -n team-a --count 10`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			if count < 1 || count > 1000 {
				return exitf(ExitGeneric, "--count %d: want 1 to 1000", count)
			}
			ctx := cmd.Context()
			c, ns, err := o.kube()
			if err != nil {
				return err
			}
			jobs, err := o.jobs(ctx, c, ns, args)
			if err != nil {
				return err
			}
			now := o.Now()
			out := []Upcoming{}
			for i := range jobs {
				up, err := o.upcoming(ctx, c, &jobs[i], now, count)
				if err != nil {
					return err
				}
				out = append(out, up...)
			}
			if o.Output == "json" || o.Output == "yaml" {
				return printData(o.Out, o.Output, out)
			}
			t := &table{}
			if o.AllNamespaces {
				t.head = cols("NAMESPACE")
			}
			if len(args) == 0 {
				t.head = append(t.head, cols("NAME")...)
			}
			t.head = append(t.head, cols("OCCURRENCE", "IN", "BLOCKED BY")...)
			for _, u := range out {
				var row []string
				if o.AllNamespaces {
					row = append(row, u.Namespace)
				}
				if len(args) == 0 {
					row = append(row, u.Name)
				}
				by := u.BlockedBy
				if by == "" {
					by = "-"
				}
				t.add(append(row, ts(u.Time), rel(u.Time, now), by)...)
			}
			return t.write(o.Out, o.Output == "wide")
		},
	}
	cmd.Flags().IntVar(&count, "count", 5, "How many occurrences to show.")
	return cmd
}

// upcoming computes the job's next count occurrences with what will suppress each.
func (o *Options) upcoming(ctx context.Context, c client.Client, job *v1alpha1.LockedCronJob, now time.Time, count int) ([]Upcoming, error) {
	sched, err := schedule.Parse(job.Spec.Schedule, job.Spec.TimeZone)
	if err != nil {
		return nil, exitf(ExitGeneric, "lockedcronjob %s/%s: spec.schedule: %v", job.Namespace, job.Name, err)
	}
	rules, err := blackout.Compile(job.Spec.Blackout, job.Spec.TimeZone)
	if err != nil {
		return nil, exitf(ExitGeneric, "lockedcronjob %s/%s: %v", job.Namespace, job.Name, err)
	}
	var rollouts []blackout.Rollout
	if len(rules.Refs) > 0 {
		workloads, err := readWorkloads(ctx, c, job.Namespace, rules.Refs)
		if err != nil {
			fmt.Fprintf(o.ErrOut, "warning: %s/%s: %s; rollouts are not considered\n", job.Namespace, job.Name, printable.OneLine(err.Error()))
		} else {
			rollouts, _ = blackout.ObserveRollouts(now, rules.Refs, workloads, job.Status.Rollouts)
		}
	}
	suspended := job.Spec.Suspended()
	var out []Upcoming
	for _, u := range rules.Upcoming(sched.Upcoming(now, count), now, rollouts) {
		by := u.BlockedBy
		if suspended {
			by = "suspended"
		}
		out = append(out, Upcoming{Namespace: job.Namespace, Name: job.Name, Time: u.Time.UTC(), BlockedBy: by})
	}
	return out, nil
}

// readWorkloads reads the workloads each rollout reference names, with the user's rights.
func readWorkloads(ctx context.Context, c client.Client, ns string, refs []blackout.Ref) ([][]metav1.Object, error) {
	out := make([][]metav1.Object, len(refs))
	for i, ref := range refs {
		var list client.ObjectList
		var one client.Object
		switch ref.Kind {
		case v1alpha1.KindDeployment:
			list, one = &appsv1.DeploymentList{}, &appsv1.Deployment{}
		case v1alpha1.KindStatefulSet:
			list, one = &appsv1.StatefulSetList{}, &appsv1.StatefulSet{}
		case v1alpha1.KindDaemonSet:
			list, one = &appsv1.DaemonSetList{}, &appsv1.DaemonSet{}
		}
		if ref.Selector == nil {
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, one)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
			}
			out[i] = []metav1.Object{one}
			continue
		}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: ref.Selector}); err != nil {
			return nil, fmt.Errorf("listing %ss in %s: %w", ref.Kind, ns, err)
		}
		switch l := list.(type) {
		case *appsv1.DeploymentList:
			for j := range l.Items {
				out[i] = append(out[i], &l.Items[j])
			}
		case *appsv1.StatefulSetList:
			for j := range l.Items {
				out[i] = append(out[i], &l.Items[j])
			}
		case *appsv1.DaemonSetList:
			for j := range l.Items {
				out[i] = append(out[i], &l.Items[j])
			}
		}
	}
	return out, nil
}
