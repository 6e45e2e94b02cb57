//go:build linux

package wrapper

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/redistest"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// TestStraysLeftAreReported: when the search for the command's processes gives up (a
// process whose memory cannot be read, behind a hung mount; one it may not kill), some
// may outlive the lock's release and run alongside the next holder. The report says so:
// only lockwrap's stderr did, and the report read as a clean success.
func TestStraysLeftAreReported(t *testing.T) {
	killMarkedFn = func(string, bool) error {
		return errors.New("processes of the command still alive after 200 rounds of SIGKILL")
	}
	t.Cleanup(func() { killMarkedFn = killMarked })
	s := redistest.Start(t)
	cfg, cmd, err := config.Parse([]string{"--redis-url", s.URL(), "--key", "strays-left", "--holder", "a",
		"--occurrence", "2026-11-30T06:00:00Z", "--termination-log", t.TempDir() + "/report", "--", "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	rep, code := Run(context.Background(), cfg, cmd, Deps{Locker: RedisLocker{L: lock.New(s.Client())}, Stderr: &stderr})
	if code != 0 || rep.Outcome != report.Succeeded {
		t.Fatalf("%d %+v", code, rep)
	}
	if !strings.Contains(strings.Join(rep.Warnings, "\n"), "may outlive the lock's release: processes of the command still alive") {
		t.Errorf("the report does not say processes may be left: %q", rep.Warnings)
	}
}
