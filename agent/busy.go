package agent

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/loomthreads/loom/thread"
)

// OnBusy says what a run does when another run of this process is running
// on the same thread.
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

// runKey names a thread across the handles and agents of one process.
type runKey struct {
	store  any
	tenant string
	id     string
}

type slot struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// runs are the threads this process is running. Whatever wins a race here,
// the commits of a run are conditional on the version it last wrote, so
// runs in other processes cannot interleave with it either: the loser's
// next commit fails with thread.ErrConflict and nothing is corrupted.
var runs = struct {
	sync.Mutex
	m map[runKey]*slot
}{m: make(map[runKey]*slot)}

func keyOf(db *thread.DB, id string) runKey {
	var store any = db
	// A store value that cannot be a map key (a wrapper holding a slice)
	// falls back to the DB: runs through other DBs on it are then not seen.
	if s := db.Store(); s != nil && reflect.ValueOf(s).Comparable() {
		store = s
	}
	return runKey{store: store, tenant: db.Tenant(), id: id}
}

// take registers a run of key and returns its slot, or returns the slot of
// the run that holds key.
func take(key runKey, cancel context.CancelCauseFunc) (*slot, bool) {
	runs.Lock()
	defer runs.Unlock()
	if s, busy := runs.m[key]; busy {
		return s, false
	}
	s := &slot{cancel: cancel, done: make(chan struct{})}
	runs.m[key] = s
	return s, true
}

// acquire takes the thread for a run, per how. It returns the run's context
// and the function that gives the thread back.
func acquire(ctx context.Context, key runKey, how OnBusy) (context.Context, func(), error) {
	for {
		rctx, cancel := context.WithCancelCause(ctx)
		s, mine := take(key, cancel)
		if mine {
			return rctx, func() {
				runs.Lock()
				delete(runs.m, key)
				runs.Unlock()
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
