package wrapper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
)

// TestLockwrapInsideItsOwnRunTakesNothingOver (helper-95): a job whose command runs
// lockwrap again (an image that wraps its step already, as on a VM; one exec'd into the
// container) gave it, through the environment, the run's holder, occurrence and key: it
// found the lock held under its own holder with a running entry of the lock's token, took
// the live run's lock over as a crashed predecessor's, recorded the occurrence succeeded
// and let the lock go. The outer run lost its lock (its job killed part-way, the lock free
// while it ran), and the ledger said the occurrence had succeeded.
func TestLockwrapInsideItsOwnRunTakesNothingOver(t *testing.T) {
	s := redistest.Start(t)
	rdb := admin(t, s)
	innerRep := filepath.Join(t.TempDir(), "inner.json")
	outer := startLockwrap(t, []string{
		"LOCKEDCRON_REDIS_URL=" + s.URL(), "LOCKEDCRON_LOCK_KEY=nest", "LOCKEDCRON_HOLDER=eu/ns/pod-1/uid-1",
		"LOCKEDCRON_HOLDER_INSTANCE=uid-1", "LOCKEDCRON_OCCURRENCE=" + occurrence, "LOCKEDCRON_TTL=3s",
		"LOCKEDCRON_RENEW_INTERVAL=1s", "LOCKEDCRON_KILL_GRACE=1s",
	}, "--",
		// The inner lockwrap is given what a pod's lockwrap has from its Secret; the rest
		// it inherits. Its exit status is the step's: the job goes on, then sleeps past a
		// renewal.
		"sh", "-c", `"$0" --redis-url "$1" --termination-log "$2" -- sh -c 'echo inner ran >&2'; echo "inner exited $?" >&2; sleep 2; echo outer done`, os.Args[0], s.URL(), innerRep)
	rep, code := outer.wait(t)
	if rep.Outcome != report.Succeeded || rep.LockLost || code != 0 {
		t.Errorf("outer run: exit %d, %+v; want it to end as its job did, holding its lock", code, rep)
	}
	// The inner one says why on stderr (the job's), and writes no report: its termination
	// log (here given, in a pod inherited or the default) is the outer run's.
	if b, err := os.ReadFile(innerRep); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused lockwrap wrote a report (%q, %v): the termination log is the running one's", b, err)
	}
	if out := outer.stderr.String(); !strings.Contains(out, `--holder "eu/ns/pod-1/uid-1": another lockwrap of this holder`) || !strings.Contains(out, "inner exited 70") {
		t.Errorf("stderr %q: want the refusal naming --holder and the holder, and exit 70", out)
	}
	if strings.Contains(outer.stderr.String(), "inner ran") {
		t.Errorf("the inner lockwrap ran its command: %s", outer.stderr)
	}
	entry := rdb.HGetAll(context.Background(), lock.RunKey("nest", mustTime(occurrence))).Val()
	if entry["holder"] != "eu/ns/pod-1/uid-1" || entry["state"] != lock.StateSucceeded || entry["tookOver"] != "" {
		t.Errorf("ledger entry %v: want the outer run's success, never taken over", entry)
	}
}
