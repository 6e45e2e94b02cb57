package controller

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lockedcron/lockedcron/internal/blackout"
)

// go test ./internal/controller/ -run TestBlackoutCause

// TestBlackoutCause: each window and workload has a series of its own, and the cause
// fits an Event's action whatever the workload's name.
func TestBlackoutCause(t *testing.T) {
	a := blackoutCause(blackout.Block{Cause: blackout.CauseWindow, By: `window "a"`})
	b := blackoutCause(blackout.Block{Cause: blackout.CauseWindow, By: `window "b"`})
	if a == b || !strings.Contains(a, `window "a"`) || !strings.HasPrefix(a, string(blackout.CauseWindow)) {
		t.Errorf("causes %q and %q: want one per window, each naming it", a, b)
	}
	long := "Deployment/" + strings.Repeat("é", 200) // a name of 253 characters, 2 bytes each
	c := blackoutCause(blackout.Block{Cause: blackout.CauseRollout, By: long})
	if len(c) > maxEventAction || !utf8.ValidString(c) || !strings.HasPrefix(c, string(blackout.CauseRollout)+" Deployment/é") {
		t.Errorf("cause %q (%d bytes): want a valid prefix of at most %d bytes", c, len(c), maxEventAction)
	}
}
