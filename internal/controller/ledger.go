package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
)

// ledgerLookups answers run requests' ledger questions (did this occurrence succeed?)
// off the reconcile workers, so that a tenant's Redis slow to answer holds no worker, and
// with it no other tenant's job. The first pass to ask starts the look-up and goes on
// without an answer; the look-up wakes the job when it has one, and the next pass takes
// it. lockwrap stays the authority: it reads the ledger again before it runs the job.
type ledgerLookups struct {
	mu   sync.Mutex
	byQ  map[ledgerQuestion]*ledgerAnswer
	wake func(types.NamespacedName)
	now  func() time.Time
}

// ledgerQuestion is one run request's question: the job, the request's id, what it asks
// about (an id's occurrence annotation can be edited while the look-up runs) and whom:
// the Secret's client, new when the Secret changes (it may point at another Redis, whose
// ledger knows other occurrences). go-redis's clients are pointers, so comparable.
type ledgerQuestion struct {
	job             types.NamespacedName
	uid             types.UID // a job created again under the name asks again
	id, key         string
	occurrenceNanos int64
	backend         redis.UniversalClient
}

// ledgerAnswer is what the ledger said: succeeded, or err if the look-up failed.
type ledgerAnswer struct {
	succeeded bool
	err       error
	asked     time.Time // when the look-up began
	ended     time.Time // zero while the look-up runs
}

// answerKeep is how long an answer that no pass took is kept (its job deleted, its
// request replaced while the look-up ran).
const answerKeep = 10 * time.Minute

func newLedgerLookups(wake func(types.NamespacedName)) *ledgerLookups {
	return &ledgerLookups{byQ: map[ledgerQuestion]*ledgerAnswer{}, wake: wake, now: time.Now}
}

// answer returns q's answer (ok) once its look-up has ended, and forgets it. Until then
// ok is false; the first call starts ask, which runs with ctx's values but not its
// cancellation (ask bounds itself), then wakes q's job.
func (l *ledgerLookups) answer(ctx context.Context, q ledgerQuestion, ask func(context.Context) (bool, error)) (a ledgerAnswer, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	if pending, found := l.byQ[q]; found {
		if pending.ended.IsZero() {
			return ledgerAnswer{}, false
		}
		delete(l.byQ, q)
		return *pending, true
	}
	pending := &ledgerAnswer{asked: now}
	l.byQ[q] = pending
	go func() {
		var (
			succeeded bool
			err       error
		)
		func() {
			// As the health probe: a client failing on a hostile answer is a failed look-up.
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("the Redis client failed on its answer: %v", p)
				}
			}()
			succeeded, err = ask(context.WithoutCancel(ctx))
		}()
		l.mu.Lock()
		pending.succeeded, pending.err, pending.ended = succeeded, err, l.now()
		l.mu.Unlock()
		l.wake(q.job)
	}()
	return ledgerAnswer{}, false
}

// keep puts back an answer a pass took but did not act on, for a later pass to take.
func (l *ledgerLookups) keep(q ledgerQuestion, a ledgerAnswer) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	l.byQ[q] = &a
}

// prune forgets the answers no pass took within answerKeep. l.mu is held.
func (l *ledgerLookups) prune(now time.Time) {
	for k, old := range l.byQ {
		if !old.ended.IsZero() && now.Sub(old.ended) > answerKeep {
			delete(l.byQ, k)
		}
	}
}
