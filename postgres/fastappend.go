package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomthreads/loom/thread"
)

// schemaV3 adds loom_append, the write of the most common batch — one new
// commit on a stored thread's head, and the move of that thread to it — in
// one statement: one round trip and one implicit transaction instead of
// two round trips of nine statements. It locks the thread (then the
// parent commit, the order every batch locks in) and checks everything
// Apply would; it answers 'ok', or what failed.
const schemaV3 = `
CREATE FUNCTION loom_append(t_id text, from_version bigint, c_id text, parent_id text, c_depth bigint, c_op text,
	c_at timestamptz, c_state_from text, c_messages bytea, c_state bytea, c_metadata bytea, m_op text, m_at timestamptz)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	t_seq bigint;
	t_version bigint;
	p_seq bigint;
	c_seq bigint;
BEGIN
	SELECT seq, version INTO t_seq, t_version FROM loom_threads WHERE id = t_id FOR NO KEY UPDATE;
	IF NOT FOUND THEN
		RETURN 'no thread';
	END IF;
	IF t_version <> from_version THEN
		RETURN 'stale';
	END IF;
	IF parent_id <> '' THEN
		SELECT seq INTO p_seq FROM loom_commits WHERE id = parent_id FOR NO KEY UPDATE;
		IF NOT FOUND THEN
			RETURN 'no parent';
		END IF;
		UPDATE loom_commits SET refs = refs + 1 WHERE seq = p_seq;
	END IF;
	INSERT INTO loom_commits (id, parent, depth, refs, op, at, state_from, messages, state, metadata)
		VALUES (c_id, p_seq, c_depth, 1, c_op, c_at, c_state_from, c_messages, c_state, c_metadata)
		ON CONFLICT (id) DO NOTHING RETURNING seq INTO c_seq;
	IF c_seq IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'unique_violation', MESSAGE = 'commit exists', CONSTRAINT = 'loom_commits_id_key';
	END IF;
	UPDATE loom_threads SET version = version + 1, head = c_seq, updated_at = m_at WHERE seq = t_seq;
	INSERT INTO loom_history (thread, version, commit_seq, op, at) VALUES (t_seq, from_version + 1, c_seq, m_op, m_at);
	RETURN 'ok';
END
$$;
`

// fastAppend reports whether b is one new commit and the move of a stored
// thread to it, with nothing else: what loom_append writes.
func fastAppend(b *thread.Batch) bool {
	if len(b.Commits) != 1 || len(b.Moves) != 1 || len(b.Create)+len(b.DropCheckpoints)+len(b.Checkpoints)+len(b.Delete) != 0 {
		return false
	}
	c, m := b.Commits[0], b.Moves[0]
	return c != nil && m.Head == c.ID && m.Kind == "" && m.Title == nil && m.Labels == nil
}

// queueAppend queues loom_append for b (fastAppend's shape) on q, with
// lockWait its lock_timeout (nil: the transaction's stays). It writes the
// commit's pending row for the search index (schemaV6) unless noIndex. Its
// notifications are queued after the commit (Store.notify).
func queueAppend(q *pgx.Batch, b *thread.Batch, noIndex bool, lockWait *string) error {
	c, m := b.Commits[0], b.Moves[0]
	msgs, err := encodeMessages(c.Messages)
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	state, err := encodeState(c.State)
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	meta, err := encodeMeta(c.Metadata)
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	q.Queue(`SELECT loom_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::boolean, $15::text)`,
		m.Thread, m.From, c.ID, c.Parent, c.Depth, string(c.Op), c.Time, c.StateFrom, msgs, state, meta, string(m.Op), m.Time,
		!noIndex && hasWords(c.Messages), lockWait)
	return nil
}

// appendResult turns loom_append's answer, or its error, into Apply's
// error.
func appendResult(b *thread.Batch, res string, err error) error {
	m, c := b.Moves[0], b.Commits[0]
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeNoParent {
		return fmt.Errorf("commit %q: parent %q: %w", clip(c.ID), clip(c.Parent), thread.ErrNotFound)
	}
	if err != nil {
		return err
	}
	switch res {
	case "ok":
		return nil
	case "no thread":
		return fmt.Errorf("thread %q: %w", clip(m.Thread), thread.ErrNotFound)
	case "stale":
		return fmt.Errorf("thread %q is not at version %d: %w", clip(m.Thread), m.From, thread.ErrConflict)
	}
	return fmt.Errorf("loom_append answered %q", res)
}

// applyAppend runs loom_append for b, one statement in a transaction of
// its own (which sets its lock_timeout, see queueLockTimeout), then
// queues the notification of its change (Store.notify) and kicks the
// fold.
func (s *Store) applyAppend(ctx context.Context, b *thread.Batch) error {
	var q pgx.Batch
	if err := queueAppend(&q, b, s.noIndex, s.lockWait()); err != nil {
		return err
	}
	pc, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	var res string
	// Decided is written: a cancel now would leave the caller not knowing.
	cctx, cancel := s.committing(ctx)
	defer cancel()
	br := pc.Conn().SendBatch(cctx, &q)
	err = br.QueryRow().Scan(&res)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err := appendResult(b, res, err); err != nil {
		return err
	}
	s.notify(s.notes(b))
	s.kickFold()
	return nil
}
