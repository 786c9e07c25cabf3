package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
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

// fastAppend reports whether b is one new commit and the move of a thread
// to it, with nothing else: the shape loom_append writes.
func fastAppend(b *thread.Batch) bool {
	if len(b.Commits) != 1 || len(b.Moves) != 1 || len(b.Create)+len(b.DropCheckpoints)+len(b.Checkpoints)+len(b.Delete) != 0 {
		return false
	}
	c, m := b.Commits[0], b.Moves[0]
	return c != nil && m.Head == c.ID && m.Kind == "" && m.Title == nil && m.Labels == nil
}

// appendFacts are the facts an append of fastAppend's shape is planned on
// before anything is read: its thread at version (0: not stored), its
// parent stored and its commit not. loom_append writes the plan only if
// the first two hold, and the commit's unique key fails it if the third
// does not; what it finds instead is then the planner's to judge.
func appendFacts(b *thread.Batch, version int64) *store.MapFacts {
	c, m := b.Commits[0], b.Moves[0]
	f := &store.MapFacts{Threads: map[string]store.ThreadFact{}, Commits: map[string]bool{c.Parent: c.Parent != ""}}
	if version > 0 {
		f.Threads[m.Thread] = store.ThreadFact{Version: version}
	}
	return f
}

// planAppend plans b, of fastAppend's shape, on the facts it assumes
// (appendFacts, the thread at the version its move comes from), and
// reports whether loom_append writes that plan: the references it adds
// are to the parent only. Otherwise the batch takes Apply's general path.
func planAppend(ctx context.Context, b *thread.Batch) (*store.Plan, bool, error) {
	p, err := store.PlanBatch(ctx, appendFacts(b, b.Moves[0].From), b)
	if err != nil {
		return nil, false, err
	}
	c := b.Commits[0]
	for _, r := range p.Refs {
		if r.Commit != c.Parent {
			return p, false, nil
		}
	}
	return p, true, nil
}

// parentRefs returns the references p adds to the parent of its commit.
func parentRefs(p *store.Plan) int64 {
	var n int64
	for _, r := range p.Refs {
		n += r.N
	}
	return n
}

// queueAppend queues loom_append for p (planAppend's) on q, with
// lockWait its lock_timeout (nil: the transaction's stays). It writes the
// commit's pending row for the search index (schemaV6) unless noIndex.
// Its notifications are queued after the commit (Store.notify).
func queueAppend(q *pgx.Batch, p *store.Plan, noIndex bool, lockWait *string) error {
	b := p.Batch
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
	e := m.Entry()
	q.Queue(`SELECT loom_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17::boolean, $18::text)`,
		m.Thread, m.From, c.ID, c.Parent, c.Depth, string(c.Op), c.Time, c.StateFrom, msgs, state, meta, string(e.Op), e.Time,
		e.Version, p.NewRefs[0], parentRefs(p), !noIndex && hasWords(c.Messages), lockWait)
	return nil
}

// appendResult reads what loom_append answered (err, or the thread's
// version when the facts its plan assumed did not hold). done is false
// when the batch must take Apply's general path: the facts were not as
// assumed and the planner, told what loom_append found, did not fail the
// batch.
func appendResult(ctx context.Context, b *thread.Batch, version *int64, err error) (done bool, _ error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeNoParent {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if version == nil {
		return true, nil
	}
	if _, err := store.PlanBatch(ctx, appendFacts(b, *version), b); err != nil {
		return true, err
	}
	return false, nil
}

// applyAppend applies b, of fastAppend's shape, in one statement and one
// round trip: it plans b on the facts an append assumes (planAppend), and
// loom_append writes the plan if they hold, in a transaction of its own
// (which sets its lock_timeout, see queueLockTimeout). Then it queues the
// notification of its change (Store.notify) and kicks the fold. done is
// false when the batch must take the general path (Store.apply).
func (s *Store) applyAppend(ctx context.Context, b *thread.Batch) (done bool, err error) {
	p, ok, err := planAppend(ctx, b)
	if err != nil || !ok {
		return err != nil, err
	}
	var q pgx.Batch
	if err := queueAppend(&q, p, s.noIndex, s.lockWait()); err != nil {
		return true, err
	}
	pc, err := s.acquire(ctx)
	if err != nil {
		return true, err
	}
	defer pc.Release()
	var version *int64
	// Decided is written: a cancel now would leave the caller not knowing.
	cctx, cancel := s.committing(ctx)
	defer cancel()
	br := pc.Conn().SendBatch(cctx, &q)
	err = br.QueryRow().Scan(&version)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if done, err := appendResult(ctx, b, version, err); !done || err != nil {
		return done, err
	}
	s.notify(s.notes(b))
	s.kickFold()
	return true, nil
}
