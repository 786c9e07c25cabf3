package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
func fastAppend(b *store.Batch) bool {
	if len(b.Commits) != 1 || len(b.Moves) != 1 || len(b.Create)+len(b.DropCheckpoints)+len(b.Checkpoints)+len(b.Prune)+len(b.Delete) != 0 {
		return false
	}
	c, m := b.Commits[0], b.Moves[0]
	return c != nil && m.Head == c.ID && m.Kind == "" && m.Title == nil && m.Labels == nil
}

// appendFacts are facts for planning an append of fastAppend's shape: its
// thread at version (0: not stored), its parent stored or not, its commit
// stored or not. Before anything is read, an append is planned on the
// facts it assumes (the thread at the version its move comes from, the
// parent stored, the commit not); loom_append writes the plan only if the
// first two hold (the commit's unique key fails it if the third does not),
// and otherwise answers what it found, for the planner to judge.
func appendFacts(b *store.Batch, version int64, parent, commit bool) *store.MapFacts {
	c, m := b.Commits[0], b.Moves[0]
	f := &store.MapFacts{Threads: map[string]store.ThreadFact{}, Commits: map[string]bool{}}
	if version > 0 {
		f.Threads[m.Thread] = store.ThreadFact{Version: version}
	}
	if c.Parent != "" {
		f.Commits[c.Parent] = parent
	}
	f.Commits[c.ID] = commit
	return f
}

// planAppend plans b, of fastAppend's shape, on the facts it assumes
// (appendFacts, the thread at the version its move comes from), and
// reports whether loom_append writes that plan: the references it adds
// are to the parent only. Otherwise the batch takes Apply's general path.
func planAppend(ctx context.Context, b *store.Batch) (*store.Plan, bool, error) {
	if b.Moves[0].From < 1 || b.Commits[0].ID == b.Commits[0].Parent {
		// No thread is at that version, or the parent assumed stored is
		// the commit assumed not: appendFacts cannot assume either.
		return nil, false, nil
	}
	p, err := store.PlanBatch(ctx, appendFacts(b, b.Moves[0].From, true, false), b)
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
	q.Queue(`SELECT o_version, o_parent, o_commit
		FROM loom_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17::boolean, $18::text)`,
		m.Thread, m.From, c.ID, c.Parent, c.Depth, string(c.Op), c.Time, c.StateFrom, msgs, state, meta, string(e.Op), e.Time,
		e.Version, p.NewRefs[0], parentRefs(p), !noIndex && hasWords(c.Messages), lockWait)
	return nil
}

// found is what loom_append answers: nil version when it wrote, else the
// facts it found.
type found struct {
	version        *int64
	parent, commit *bool
}

// scan reads loom_append's answer from row.
func (f *found) scan(row pgx.Row) error { return row.Scan(&f.version, &f.parent, &f.commit) }

// appendResult reads what loom_append answered (err, or the facts it
// found when they were not those its plan assumed). done is false when
// the batch must take Apply's general path: the parent was missing as the
// thread moved, or the planner, told the facts found, did not fail it.
func appendResult(ctx context.Context, b *store.Batch, f found, err error) (done bool, _ error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeNoParent {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if f.version == nil {
		return true, nil
	}
	if _, err := store.PlanBatch(ctx, appendFacts(b, *f.version, f.parent != nil && *f.parent, f.commit != nil && *f.commit), b); err != nil {
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
func (s *Store) applyAppend(ctx context.Context, b *store.Batch) (done bool, err error) {
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
	var f found
	// Decided is written: a cancel now would leave the caller not knowing.
	cctx, cancel := s.committing(ctx)
	defer cancel()
	br := pc.Conn().SendBatch(cctx, &q)
	err = f.scan(br.QueryRow())
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if done, err := appendResult(ctx, b, f, err); !done || err != nil {
		return done, err
	}
	s.notify(s.notes(b))
	s.kickFold()
	return true, nil
}
