package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

var _ store.Appender = (*Store)(nil)

// AppendAt implements store.Appender, which package thread uses for an
// append that lost a race on a hot thread. Its transaction first takes the
// thread's row lock (FOR UPDATE), waiting in PostgreSQL's queue for the
// row (for a while: past the store's Timeout it runs again, see
// queueLockTimeout), so writers racing on one thread take turns in the
// order they came instead of failing their version check and trying
// again; then it reads
// the record and head, has build make the batch on them, and applies it as
// Apply does, in the same transaction. The caller waits its turn; nobody
// starves.
func (s *Store) AppendAt(ctx context.Context, id string, build func(r *thread.Record, head *thread.Commit) (*store.Batch, error)) error {
	if !validKey(id) {
		return fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound)
	}
	return s.retry(ctx, "append", func(ctx context.Context) error {
		b, err := s.appendAt(ctx, id, build)
		if b != nil && err == nil {
			return s.apply(ctx, b) // its facts were not as its plan assumed
		}
		return err
	})
}

// appendAt runs AppendAt's transaction once: two round trips (three for a
// batch of another shape than loom_append's), the first of which waits for
// the row. It returns the batch built when loom_append found other facts
// than its plan assumed and the planner did not fail it: the batch then
// takes Apply's general path, in a transaction of its own.
func (s *Store) appendAt(ctx context.Context, id string, build func(r *thread.Record, head *thread.Commit) (*store.Batch, error)) (*store.Batch, error) {
	pc, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer rollback(ctx, conn)
	wctx, cancel := s.boundWrite(ctx)
	defer cancel()

	// The lock, then the read: a read in the locking statement would
	// join the head commit of the snapshot it started with, not the one
	// the writer before it moved to (PostgreSQL rechecks only the locked
	// row). Read committed: the second statement sees what that writer
	// committed.
	var q pgx.Batch
	q.Queue("BEGIN")
	lockTimeout := s.queueLockTimeout(&q)
	q.Queue(`SELECT 1 FROM loom_threads WHERE id = $1 FOR UPDATE`, id)
	q.Queue(`SELECT `+recordCols+`, coalesce(h.depth, 0), coalesce(h.state_from, '')
		FROM loom_threads t LEFT JOIN loom_commits h ON h.seq = t.head
		WHERE t.id = $1`, id)
	br := conn.SendBatch(wctx, &q)
	var (
		depth     int64
		stateFrom string
		one       int
		r         *thread.Record
	)
	_, err = br.Exec()
	if err == nil && lockTimeout {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&one)
	}
	if err == nil {
		r, err = scanRecord(br.QueryRow(), &depth, &stateFrom)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var head *thread.Commit
	if r.Head != "" {
		head = &thread.Commit{ID: r.Head, Depth: depth, StateFrom: stateFrom}
	}
	b, err := build(r, head)
	if err != nil {
		return nil, err
	}
	if err := validate(b); err != nil {
		return nil, err
	}
	cctx, cancel := s.committing(ctx)
	defer cancel()
	if fastAppend(b) {
		p, ok, err := planAppend(ctx, b)
		if err != nil {
			return nil, err
		}
		if ok {
			// One more round trip: loom_append and COMMIT.
			var q pgx.Batch
			if err := queueAppend(&q, p, s.noIndex, nil); err != nil {
				return nil, err
			}
			q.Queue("COMMIT")
			br := conn.SendBatch(cctx, &q)
			var f found
			err := f.scan(br.QueryRow())
			if err == nil {
				_, err = br.Exec()
			}
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			if done, err := appendResult(ctx, b, f, err); !done || err != nil {
				if !done {
					return b, nil
				}
				return nil, err
			}
			s.notify(s.notes(b))
			s.kickFold()
			return nil, nil
		}
	}
	f, err := s.lock(wctx, conn, b, false)
	if err != nil {
		return nil, err
	}
	p, err := store.PlanBatch(ctx, &f.MapFacts, b)
	if err != nil {
		return nil, err
	}
	w, err := f.writes(p, s.noIndex)
	if err != nil {
		return nil, err
	}
	w.q.Queue("COMMIT")
	if err := w.run(cctx, conn); err != nil {
		return nil, err
	}
	s.notify(s.notes(b))
	s.kickFold()
	return nil, nil
}
