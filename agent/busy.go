package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/loomthreads/loom/thread"
)

// OnBusy says what a run does when another run through the same
// thread.DB (or a WithTenant copy of it) is running on the same thread.
type OnBusy int

const (
	// Reject fails the run with ErrBusy at once. It is the default.
	Reject OnBusy = iota
	// Queue waits for the running run to end (or the run's context to end)
	// and then runs on the thread as the other left it.
	Queue
	// Interrupt cancels the running run (its cause is ErrInterrupted),
	// which commits what it completed, and then runs.
	Interrupt
)

func (b OnBusy) String() string {
	switch b {
	case Reject:
		return "reject"
	case Queue:
		return "queue"
	case Interrupt:
		return "interrupt"
	}
	return fmt.Sprintf("OnBusy(%d)", int(b))
}

// runKey names a thread among the runs of one DB.
type runKey struct {
	tenant string
	id     string
}

type slot struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// runs are the threads the agents of one thread.DB (and of its WithTenant
// copies) are running, kept on the DB (thread.DB.Shared): open a DB once
// and share it, as with database/sql. Whatever wins a race here, the
// commits of a run are conditional on the version it last wrote, so runs
// through other DBs or in other processes cannot interleave with it
// either: the loser's next commit fails with thread.ErrConflict and
// nothing is corrupted.
type runs struct {
	sync.Mutex
	m map[runKey]*slot
}

// runsKey is the key of a DB's runs in thread.DB.Shared.
type runsKey struct{}

func runsOf(db *thread.DB) *runs {
	return db.Shared(runsKey{}, func() any { return &runs{m: make(map[runKey]*slot)} }).(*runs)
}

// take registers a run of key and returns its slot, or returns the slot of
// the run that holds key.
func (rs *runs) take(key runKey, cancel context.CancelCauseFunc) (*slot, bool) {
	rs.Lock()
	defer rs.Unlock()
	if s, busy := rs.m[key]; busy {
		return s, false
	}
	s := &slot{cancel: cancel, done: make(chan struct{})}
	rs.m[key] = s
	return s, true
}

// acquire takes the thread for a run, per how. It returns the run's context
// and the function that gives the thread back.
func acquire(ctx context.Context, db *thread.DB, id string, how OnBusy) (context.Context, func(), error) {
	rs, key := runsOf(db), runKey{tenant: db.Tenant(), id: id}
	for {
		rctx, cancel := context.WithCancelCause(ctx)
		s, mine := rs.take(key, cancel)
		if mine {
			return rctx, func() {
				rs.Lock()
				delete(rs.m, key)
				rs.Unlock()
				close(s.done)
				cancel(nil)
			}, nil
		}
		cancel(nil)
		switch how {
		case Queue:
		case Interrupt:
			s.cancel(ErrInterrupted)
		default:
			return nil, nil, fmt.Errorf("run on %s: %w", key.id, ErrBusy)
		}
		select {
		case <-s.done:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("run on %s: waiting for the running run: %w", key.id, context.Cause(ctx))
		}
	}
}
