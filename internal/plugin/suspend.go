package plugin

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

func newSuspendCommand(o *Options, suspend bool) *cobra.Command {
	use, short, done := "suspend NAME", "Stop new occurrences of a LockedCronJob (spec.suspend: true)", "suspended"
	if !suspend {
		use, short, done = "resume NAME", "Let a suspended LockedCronJob run again (spec.suspend: false)", "resumed"
	}
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Long:              short + ". Running pods are left alone.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.kube()
			if err != nil {
				return err
			}
			job := &v1alpha1.LockedCronJob{}
			job.Namespace, job.Name = ns, args[0]
			patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
			if err := c.Patch(cmd.Context(), job, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
				return apiError(err, ns, args[0])
			}
			fmt.Fprintf(o.Out, "lockedcronjob.scheduling.lockedcron.io/%s %s\n", job.Name, done)
			return nil
		},
	}
}

func newUnlockCommand(o *Options) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "unlock NAME --token TOKEN",
		Short: "Release a stuck lock, only with the token 'status' shows",
		Long: `Delete a LockedCronJob's lock in Redis if, and only if, it is still held with TOKEN (the
TOKEN column of 'kubectl lockedcron status NAME -o wide', .lock.token in -o json): a
compare-and-delete, so a lock taken again since you looked is never removed.

The holder may still be running: unlocking lets another run start alongside it. Use it for a
holder you know is gone (its node lost, its pod stuck), not to cut a run short. The ledger is
left alone: the holder still records its outcome, and a new run of the same occurrence is
counted as recovered.`,
		Example: `  kubectl lockedcron status report -o wide        # the TOKEN column
  kubectl lockedcron unlock report --token 6f1c0e9d3b2a41c7a5e8f0d2b4c6a8e0`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" {
				return exitf(ExitGeneric, "--token is required: the TOKEN column of 'kubectl lockedcron status %s -o wide'", args[0])
			}
			ctx := cmd.Context()
			c, ns, err := o.kube()
			if err != nil {
				return err
			}
			job, err := getJob(ctx, c, ns, args[0])
			if err != nil {
				return err
			}
			rc, err := o.redisFor(ctx, c, job)
			if err != nil {
				return err
			}
			defer rc.Close()
			key := runpod.LockKey(job)
			holder, err := lock.Unlock(ctx, rc, key, token)
			if errors.Is(err, lock.ErrNotHeld) {
				return exitf(ExitNotHeld, "%v; nothing was deleted (see 'kubectl lockedcron status %s')", err, job.Name)
			}
			if err != nil {
				return exitf(ExitRedis, "%v", err)
			}
			fmt.Fprintf(o.Out, "lock %q released (was held by %s)\n", key, printable.OneLine(holder))
			fmt.Fprintf(o.ErrOut, "warning: %s may still be running: another run of %s/%s can now start alongside it\n",
				printable.OneLine(holder), job.Namespace, job.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "The lock's token, as 'status -o wide' shows it (required).")
	return cmd
}
