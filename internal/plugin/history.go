package plugin

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// HistoryEntry is one row of `history -o json|yaml`.
type HistoryEntry struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	v1alpha1.RunRecord
}

func newHistoryCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "history [NAME]",
		Short: "Show a LockedCronJob's last finished occurrences (status.recent)",
		Long: `Show the last finished occurrences of a LockedCronJob, newest first: outcome, whether the
run was scheduled or requested by hand (TRIGGER), its pod, how long it held the lock and who
held it (-o wide adds the fencing token and the message).`,
		Example: `  kubectl lockedcron history report -n team-a
  kubectl lockedcron history report -o json | jq '.[] | select(.outcome=="Failed")'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			c, ns, err := o.kube()
			if err != nil {
				return err
			}
			jobs, err := o.jobs(cmd.Context(), c, ns, args)
			if err != nil {
				return err
			}
			entries := []HistoryEntry{}
			for _, j := range jobs {
				for _, r := range j.Status.Recent {
					entries = append(entries, HistoryEntry{Namespace: j.Namespace, Name: j.Name, RunRecord: r})
				}
			}
			if o.Output == "json" || o.Output == "yaml" {
				return printData(o.Out, o.Output, entries)
			}
			return historyTable(entries, len(args) == 0, o.AllNamespaces).write(o.Out, o.Output == "wide")
		},
	}
}

func historyTable(entries []HistoryEntry, withName, allNS bool) *table {
	t := &table{}
	if allNS {
		t.head = cols("NAMESPACE")
	}
	if withName {
		t.head = append(t.head, cols("NAME")...)
	}
	t.head = append(t.head, cols("OCCURRENCE", "OUTCOME", "TRIGGER", "POD", "DURATION", "HOLDER")...)
	// REQUESTED: a manual run's request time, which places it among the records (a re-run
	// of an old occurrence is listed as it ran, with its old OCCURRENCE).
	t.head = append(t.head, wideCols("FENCING TOKEN", "REQUESTED", "MESSAGE")...)
	for _, e := range entries {
		var row []string
		if allNS {
			row = append(row, e.Namespace)
		}
		if withName {
			row = append(row, e.Name)
		}
		d, fence, trigger, requested := "", "", e.Trigger, ""
		if e.Duration != nil {
			d = dur(e.Duration.Duration)
		}
		if e.FencingToken != 0 {
			fence = strconv.FormatInt(e.FencingToken, 10)
		}
		if trigger == "" {
			trigger = v1alpha1.TriggerScheduled
		}
		if e.RequestedAt != nil {
			requested = ts(e.RequestedAt.Time)
		}
		row = append(row, ts(e.Occurrence.Time), e.Outcome, trigger, e.Pod, d, e.Holder, fence, requested, e.Message)
		t.add(row...)
	}
	return t
}
