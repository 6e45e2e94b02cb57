package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockedcron/lockedcron/internal/lock"
)

// Example takes the lock for one occurrence, renews it while working, and records success.
// (Compiled, not run: it needs a Redis server.)
func Example() {
	ctx := context.Background()
	c, err := lock.NewClient(lock.ClientConfig{URL: "redis://127.0.0.1:6379"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	occurrence := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	lease, err := lock.New(c).Acquire(ctx, lock.Request{
		Key: "ns/report", Occurrence: occurrence, Holder: "cluster-a/ns/pod-1", TTL: 30 * time.Second,
	})
	var held *lock.HeldError
	switch {
	case errors.Is(err, lock.ErrSuppressed):
		fmt.Println("already done")
		return
	case errors.As(err, &held):
		fmt.Println("held by", held.Holder)
		return
	case err != nil:
		panic(err)
	}
	fmt.Println("fencing token", lease.Fence)
	_ = lease.Renew(ctx) // every ttl/3 while working
	_ = lease.Finish(ctx, lock.StateSucceeded)
}
