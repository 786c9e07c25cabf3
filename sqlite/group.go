package sqlite

import (
	"context"
	"fmt"
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
// no writer goroutine: the waiting writers take turns, and a writer whose
// batch an earlier turn wrote returns that turn's answer.

// maxGroup bounds the batches of one transaction, and with it the wait of
// the first of them.
const maxGroup = 128

// group is the queue of batches waiting for the write connection.
type group struct {
	mu      sync.Mutex
	pending []*write
	// turn is held by the writer whose transaction is running.
	turn sync.Mutex
}

// write is one Apply's batch and, once its group's transaction ended, its
// answer.
type write struct {
	ctx context.Context
	b   *store.Batch
	enc []encodedCommit

	a   *applier
	err error
	// done is set by the writer that wrote the batch, while it holds
	// group.turn; the batch's own writer reads it after taking turn.
	done bool
}

// run queues w and returns once a transaction, its own or an earlier
// writer's, has answered it.
func (g *group) run(w *write, commit func([]*write)) {
	g.mu.Lock()
	g.pending = append(g.pending, w)
	g.mu.Unlock()

	g.turn.Lock()
	defer g.turn.Unlock()
	if w.done {
		return
	}
	g.mu.Lock()
	ws := g.pending
	if len(ws) > maxGroup {
		// The rest wait for the next turn; w is among these: it was
		// queued before the turn was taken, and the queue is in order
		// of arrival.
		ws, g.pending = ws[:maxGroup:maxGroup], append([]*write(nil), ws[maxGroup:]...)
	} else {
		g.pending = nil
	}
	g.mu.Unlock()
	commit(ws)
	for _, x := range ws {
		x.done = true
	}
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
			w.err = s.applyGuarded(st, w)
			return w.err
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
		return nil
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

// applyGuarded is applyOne for a batch whose context may have ended while
// it waited, or while it was written.
func (s *Store) applyGuarded(st *wstmts, w *write) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if err := s.applyOne(st, w); err != nil {
		return err
	}
	// As database/sql's Tx.Commit: a batch whose context ended is not
	// committed.
	return w.ctx.Err()
}
