package wrapper

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// Found by the soak (seed 14, issue 14): lockwrap was SIGSTOPped while its command
// finished with exit 0; on waking, the command's exit and the overdue stop deadline were
// both ready, select took the deadline, and the run was recorded failed — so the lock's
// next holder ran the occurrence again. A command that has exited is never "stopped for
// the lock's sake": its exit wins over any deadline that falls due at the same wake-up.
// go test ./internal/wrapper/ -run TestExitedCommandBeatsOverdueDeadline

type exitedProcess struct{ signals []syscall.Signal }

func (p *exitedProcess) Signal(s syscall.Signal) error { p.signals = append(p.signals, s); return nil }
func (p *exitedProcess) Wait() int                     { return 0 }

type idleLease struct{}

func (idleLease) Renew(context.Context) error { return nil }
func (idleLease) FinishWith(context.Context, string, lock.FinishOptions) (lock.FinishResult, error) {
	return lock.FinishResult{}, nil
}
func (idleLease) Release(context.Context) error { return nil }

func TestExitedCommandBeatsOverdueDeadline(t *testing.T) {
	cfg := config.Config{TTL: 4 * time.Second, RenewInterval: time.Hour, KillGrace: time.Second, OnLost: config.OnLostTerminate}
	// The last renewal was sent a whole ttl ago: the stop deadline is overdue the moment
	// supervise looks, as after a wake-up from SIGSTOP; the command has exited meanwhile.
	// Each round is a fresh race between the two; one lost round is the bug.
	for i := range 200 {
		proc := &exitedProcess{}
		rep := &report.Report{}
		code, stopped, _ := supervise(context.Background(), cfg, idleLease{}, proc, time.Now().Add(-cfg.TTL), nil, rep, io.Discard, nil)
		if code != 0 || stopped || len(proc.signals) > 0 {
			t.Fatalf("round %d: exited command reported code %d, stopped %t, signalled %v: it must count as its own exit", i, code, stopped, proc.signals)
		}
	}
}
