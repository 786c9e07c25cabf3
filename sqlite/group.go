package sqlite

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/loomthreads/loom/thread/store"
)

// Group commit. A SQLite file has one writer at a time, and most of a small
// transaction's cost is its BEGIN and COMMIT (the WAL frame writes, the
// lock, the fsync when the store syncs): concurrent Applies therefore share
// transactions. Each Apply queues its batch and waits for the write lock;
// whoever takes it writes every batch queued by then in one transaction,
// each batch under its own savepoint, so that a batch that fails (a
// conflict, a missing commit) is undone alone and fails alone, and the
// batches after it see the store as if it had never been tried. There is
// no writer goroutine: the waiting writers take turns.

// maxGroup bounds the batches of one transaction, and with it the wait of
// the first of them.
const maxGroup = 128

// group is the queue of batches waiting for the write connection.
type group struct {
	mu      sync.Mutex
	pending []*write
	// busy says a writer has the turn: it is writing a group, or about to.
	busy bool
}

// write is one Apply's batch and, once its group's transaction ended, its
// answer.
type write struct {
	ctx context.Context
	b   *store.Batch
	enc []encodedCommit

	// at and build are an AppendAt's: the batch is built in the
	// transaction, on the thread's record and head as it finds them.
	at    string
	build func(r *store.Record, head *store.Commit) (*store.Batch, error)
	// seed is the thread as buildAt read it, with its head's key: the
	// planner's facts start from it.
	seed     threadRow
	seedHead int64

	a   *applier
	err error
	// done is set, under group.mu, once the batch's transaction ended;
	// wake then tells its writer, or tells it that it has the turn.
	done bool
	wake chan struct{}
}

// run queues w and returns once a transaction, its own or an earlier
// writer's, has answered it. The writer with the turn writes what is
// queued, answers each writer of it, and passes the turn to the first
// writer still waiting: writers answered by another's transaction wake
// together, not one after another.
func (g *group) run(w *write, commit func([]*write)) {
	w.wake = make(chan struct{}, 1)
	g.mu.Lock()
	g.pending = append(g.pending, w)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if !lead {
		<-w.wake
		g.mu.Lock()
		done := w.done
		g.mu.Unlock()
		if done {
			return
		}
	}
	g.mu.Lock()
	n := min(len(g.pending), maxGroup)
	// w is among these: the turn goes to the first writer queued, and the
	// queue is in order of arrival.
	ws := slices.Clone(g.pending[:n])
	g.pending = slices.Delete(g.pending, 0, n)
	g.mu.Unlock()

	commit(ws)

	g.mu.Lock()
	for _, x := range ws {
		x.done = true
	}
	g.handOff()
	g.mu.Unlock()
	for _, x := range ws {
		if x != w {
			x.wake <- struct{}{}
		}
	}
}

// handOff passes the turn to the first writer waiting, or frees it. Called
// with mu held.
func (g *group) handOff() {
	if len(g.pending) > 0 {
		g.pending[0].wake <- struct{}{}
		return
	}
	g.busy = false
}

// writeGroup writes ws in one transaction and sets each one's answer.
func (s *Store) writeGroup(ws []*write) {
	// The transaction is every batch's: no one batch's context ends it.
	// Each batch's own context is checked before its writes and before
	// its savepoint is released.
	ctx := context.WithoutCancel(ws[0].ctx)
	err := s.wc.do(ctx, s.w, func(st *wstmts) error {
		if len(ws) == 1 {
			w := ws[0]
			if w.err = s.applyGuarded(st, w); w.err != nil {
				return w.err
			}
			return vacuumFreed(ctx, st, ws)
		}
		a := &applier{ctx: ctx, st: st}
		for _, w := range ws {
			if _, err := a.exec(st.savepoint); err != nil {
				return fmt.Errorf("sqlite: savepoint: %w", err)
			}
			w.err = s.applyGuarded(st, w)
			if w.err == nil {
				if _, err := a.exec(st.release); err != nil {
					return fmt.Errorf("sqlite: release savepoint: %w", err)
				}
				continue
			}
			if _, err := a.exec(st.rollbackTo); err != nil {
				return fmt.Errorf("sqlite: roll back a failed batch: %w", err)
			}
			if _, err := a.exec(st.release); err != nil {
				return fmt.Errorf("sqlite: release savepoint: %w", err)
			}
		}
		return vacuumFreed(ctx, st, ws)
	})
	if err != nil {
		// Nothing was committed: a batch that had succeeded inside the
		// transaction did not either.
		for _, w := range ws {
			if w.err == nil {
				w.err = err
			}
		}
	}
}

// vacuumFreed gives the file back the pages of what the group's batches
// freed, if that was much (vacuum.go).
func vacuumFreed(ctx context.Context, st *wstmts, ws []*write) error {
	for _, w := range ws {
		if w.err == nil && w.a != nil && w.a.freed > 0 {
			a := &applier{ctx: ctx, st: st}
			if err := a.vacuumFreed(); err != nil {
				return fmt.Errorf("sqlite: %w", err)
			}
			return nil
		}
	}
	return nil
}

// applyGuarded is applyOne for a batch whose context may have ended while
// it waited, or while it was written.
func (s *Store) applyGuarded(st *wstmts, w *write) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.build != nil {
		if err := s.buildAt(st, w); err != nil {
			return err
		}
	}
	if err := s.applyOne(st, w); err != nil {
		return err
	}
	// As database/sql's Tx.Commit: a batch whose context ended is not
	// committed.
	return w.ctx.Err()
}
