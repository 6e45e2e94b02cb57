package plugin

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// JobStatus is one job in `status -o json|yaml`: its status and the live lock.
type JobStatus struct {
	Namespace string                       `json:"namespace"`
	Name      string                       `json:"name"`
	Schedule  string                       `json:"schedule"`
	TimeZone  string                       `json:"timeZone,omitempty"`
	Suspend   bool                         `json:"suspend"`
	Status    v1alpha1.LockedCronJobStatus `json:"status"`
	// Lock is the live lock in Redis; nil when it is free (or could not be read: LockError).
	Lock      *LiveLock `json:"lock"`
	LockError string    `json:"lockError,omitempty"`
}

// LiveLock is a lock as Redis holds it now.
type LiveLock struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// Token is what `unlock --token` takes.
	Token        string     `json:"token"`
	TTLMillis    int64      `json:"ttlMillis"` // -1: the Secret's Redis user may not run PTTL
	FencingToken int64      `json:"fencingToken"`
	Occurrence   *time.Time `json:"occurrence,omitempty"`
}

func newStatusCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show a LockedCronJob's status and its live lock in Redis",
		Long: `Show the status of a LockedCronJob (all of the namespace without NAME, of all namespaces
with -A) and its lock as Redis holds it now: the holder, the time left before it expires
(PTTL), its fencing token, the occurrence it runs and (-o wide, json, yaml) the token that
'unlock --token' takes. The lock is read with the Redis Secret the job names, with your own
rights to read it.`,
		Example: `  kubectl lockedcron status report -n team-a
  kubectl lockedcron status -A -o wide
  kubectl lockedcron status report -o json | jq .lock.holder`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
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
			var out []JobStatus
			var firstErr error
			for i := range jobs {
				job := &jobs[i]
				js := JobStatus{Namespace: job.Namespace, Name: job.Name, Schedule: job.Spec.Schedule,
					TimeZone: job.Spec.TimeZone, Suspend: job.Spec.Suspended(), Status: job.Status}
				live, err := o.liveLock(cmd, c, job)
				if err != nil {
					if len(args) == 1 {
						return err
					}
					js.LockError = err.Error()
					fmt.Fprintln(o.ErrOut, errorLine(fmt.Errorf("%s/%s: %w", job.Namespace, job.Name, err)))
					if firstErr == nil {
						firstErr = &ExitError{Code: exitCode(err)}
					}
				}
				js.Lock = live
				out = append(out, js)
			}
			if o.Output == "json" || o.Output == "yaml" {
				if len(args) == 1 {
					return printData(o.Out, o.Output, out[0])
				}
				if out == nil {
					out = []JobStatus{}
				}
				if err := printData(o.Out, o.Output, out); err != nil {
					return err
				}
				return firstErr
			}
			if err := statusTable(out, o.AllNamespaces, o.Now()).write(o.Out, o.Output == "wide"); err != nil {
				return err
			}
			return firstErr
		},
	}
}

func exitCode(err error) int {
	var x *ExitError
	if errors.As(err, &x) {
		return x.Code
	}
	return ExitGeneric
}

// liveLock reads the job's lock from Redis (nil when free).
func (o *Options) liveLock(cmd *cobra.Command, c client.Client, job *v1alpha1.LockedCronJob) (*LiveLock, error) {
	rc, err := o.redisFor(cmd.Context(), c, job)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	key := runpod.LockKey(job)
	l, err := lock.Inspect(cmd.Context(), rc, key)
	if err != nil {
		return nil, exitf(ExitRedis, "reading the lock %q: %v", key, err)
	}
	if l == nil {
		return nil, nil
	}
	ll := &LiveLock{Key: key, Holder: l.Holder, Token: l.Token, TTLMillis: l.TTL.Milliseconds(), FencingToken: l.Fence}
	if !l.Occurrence.IsZero() {
		t := l.Occurrence
		ll.Occurrence = &t
	}
	return ll, nil
}

func statusTable(jobs []JobStatus, allNS bool, now time.Time) *table {
	t := &table{}
	if allNS {
		t.head = cols("NAMESPACE")
	}
	t.head = append(t.head, cols("NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "NEXT", "HOLDER", "TTL", "FENCING TOKEN", "OCCURRENCE")...)
	t.head = append(t.head, wideCols("TOKEN", "KEY", "RUNS", "SUCCEEDED", "FAILED", "SKIPPED", "SUPPRESSED", "MISSED", "LOCK LOST", "LAST REQUEST")...)
	for _, j := range jobs {
		st := j.Status
		holder, ttl, fence, occ, token := "-", "-", "-", "-", "-"
		switch {
		case j.LockError != "":
			holder, ttl, fence, occ, token = "<error>", "", "", "", ""
		case j.Lock != nil:
			holder, ttl = j.Lock.Holder, dur(time.Duration(j.Lock.TTLMillis)*time.Millisecond)
			if j.Lock.TTLMillis < 0 {
				ttl = "<unknown>" // the Secret's Redis user may not run PTTL
			}
			fence, token = strconv.FormatInt(j.Lock.FencingToken, 10), j.Lock.Token
			occ = "<unknown>"
			if j.Lock.Occurrence != nil {
				occ = ts(*j.Lock.Occurrence)
			}
		}
		var last, next string
		if st.LastScheduleTime != nil {
			last = ts(st.LastScheduleTime.Time) + " (" + rel(st.LastScheduleTime.Time, now) + ")"
		}
		if st.NextScheduleTime != nil {
			next = ts(st.NextScheduleTime.Time) + " (" + rel(st.NextScheduleTime.Time, now) + ")"
		}
		key := st.LockKey
		if j.Lock != nil {
			key = j.Lock.Key
		}
		req := ""
		if r := st.LastRunRequest; r != nil {
			req = r.ID
			switch {
			case r.Refused != "":
				req += " (refused)"
			case r.Pod != "":
				req += " (" + r.Pod + ")"
			}
		}
		zone := j.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		row := []string{j.Name, j.Schedule + " " + zone, strconv.FormatBool(j.Suspend), strconv.Itoa(int(st.ActiveCount)),
			last, next, holder, ttl, fence, occ, token, key}
		c := st.Counters
		for _, n := range []int64{c.Runs, c.Succeeded, c.Failed, c.SkippedContention, c.DuplicatesSuppressed, c.Missed, c.LockLost} {
			row = append(row, strconv.FormatInt(n, 10))
		}
		row = append(row, req)
		if allNS {
			row = append([]string{j.Namespace}, row...)
		}
		t.add(row...)
	}
	return t
}
