package lock

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockedcron/lockedcron/internal/redistest"
)

// A client that resends the acquire script after losing its reply (go-redis retries on
// network errors) gets the same grant back, not "held by myself".
func TestAcquireScriptIsIdempotentPerToken(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	defer c.Close()
	ctx := context.Background()
	occ := time.Unix(1700000000, 0)
	keys := []string{LockKey("idem"), FenceKey("idem"), RunKey("idem", occ)}
	args := []any{"tok h", 10000, 60000, "tok", "h", 1}
	first, err := acquireScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	again, err := acquireScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"acquired", int64(1), int64(0)}
	if d := cmp.Diff(want, first); d != "" {
		t.Fatal(d)
	}
	if d := cmp.Diff(want, again); d != "" {
		t.Fatalf("resent acquire (-want +got):\n%s", d)
	}
	other, err := acquireScript.Run(ctx, c, keys, "tok2 h2", 10000, 60000, "tok2", "h2", 1).Slice()
	if err != nil || cmp.Diff([]any{"held", "tok h"}, other) != "" {
		t.Fatalf("another token: %v %v", other, err)
	}
}
