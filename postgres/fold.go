package postgres

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

// schemaV6 takes the search index off the commit's path, as the SQLite
// store does: a batch writes, for each commit it makes with messages, a
// row of loom_search_pending (the commit's seq and the thread it is
// committed for), one small row in a table without an index, and a fold
// later tokenizes the pending commits' messages and writes their
// loom_search entries, many commits in one transaction (see Store.fold).
// A search folds whatever is pending before it reads, so that it finds
// every message committed before it started.
//
// Folds take turns on an advisory lock (foldLock), so that the entries
// are numbered in the order of their commits, and lock the commits they
// index (FOR KEY SHARE), so that a commit freed meanwhile is not indexed
// after its entries were dropped: loom_unref now deletes a commit before
// its entries, and waits for a fold that holds it.
//
// loom_append (a new signature; the old ones stay for the processes of
// earlier releases while they run) writes a planned append (see
// applyAppend) and its pending row, in four statements where it was seven:
// the thread's move, made only if the thread is at the version the plan
// assumed (else it writes nothing and answers, without waiting for the
// row, what it finds instead: the thread's version, 0 for none, and
// whether the parent and the commit are stored); the parent's references,
// made only if the parent is stored (else it raises LM002, which undoes
// the move); the commit, with the seq the move took (an id taken is a
// unique violation); and the history entry. It sets the transaction's
// lock_timeout itself, when given one, instead of a statement of its own
// before it. Its version is NULL when it wrote.
const schemaV6 = `
CREATE TABLE loom_search_pending (
	commit_seq bigint NOT NULL,
	thread     text COLLATE "C" NOT NULL
);

CREATE OR REPLACE FUNCTION loom_unref(seqs bigint[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	s bigint;
	n bigint;
	r bigint;
	p bigint;
	freed bigint := 0;
BEGIN
	FOR s, n IN SELECT u, count(*) FROM unnest(seqs) u WHERE u IS NOT NULL GROUP BY u ORDER BY u DESC LOOP
		LOOP
			UPDATE loom_commits SET refs = refs - n WHERE seq = s RETURNING refs, parent INTO r, p;
			EXIT WHEN NOT FOUND OR r > 0;
			DELETE FROM loom_commits WHERE seq = s;
			DELETE FROM loom_search WHERE commit_seq = s;
			freed := freed + 1;
			EXIT WHEN p IS NULL;
			s := p;
			n := 1;
		END LOOP;
	END LOOP;
	RETURN freed;
END
$$;

-- loom_claim_pending takes (deletes) the lim oldest pending commits and
-- returns each with its thread and, when the commit is still stored,
-- its messages, having locked it (FOR KEY SHARE, highest seq first, the
-- order loom_unref frees in) until the fold commits.
CREATE FUNCTION loom_claim_pending(lim integer)
RETURNS TABLE (o_seq bigint, o_thread text, o_messages bytea) LANGUAGE plpgsql AS $$
DECLARE
	seqs bigint[];
	threads text[];
BEGIN
	WITH p AS (
		DELETE FROM loom_search_pending
		WHERE ctid = ANY(ARRAY(SELECT ctid FROM loom_search_pending ORDER BY commit_seq LIMIT lim))
		RETURNING commit_seq, thread)
	SELECT coalesce(array_agg(commit_seq), '{}'), coalesce(array_agg(thread), '{}') INTO seqs, threads FROM p;
	PERFORM 1 FROM loom_commits WHERE seq = ANY(seqs) ORDER BY seq DESC FOR KEY SHARE;
	RETURN QUERY SELECT u.s, u.t, c.messages
		FROM unnest(seqs, threads) AS u(s, t) LEFT JOIN loom_commits c ON c.seq = u.s;
END
$$;

CREATE FUNCTION loom_append(t_id text, from_version bigint, c_id text, parent_id text, c_depth bigint, c_op text,
	c_at timestamptz, c_state_from text, c_messages bytea, c_state bytea, c_metadata bytea, m_op text, m_at timestamptz,
	h_version bigint, c_refs bigint, p_refs bigint, pending boolean, lock_wait text,
	OUT o_version bigint, OUT o_parent boolean, OUT o_commit boolean)
LANGUAGE plpgsql AS $$
DECLARE
	t_seq bigint;
	p_seq bigint;
	c_seq bigint;
BEGIN
	IF lock_wait IS NOT NULL THEN
		PERFORM set_config('lock_timeout', lock_wait, true);
	END IF;
	UPDATE loom_threads SET version = version + 1, head = nextval('loom_commit_seq'), updated_at = m_at
		WHERE id = t_id AND version = from_version
		RETURNING seq, head INTO t_seq, c_seq;
	IF NOT FOUND THEN
		o_version := coalesce((SELECT version FROM loom_threads WHERE id = t_id), 0);
		o_parent := parent_id = '' OR EXISTS (SELECT 1 FROM loom_commits WHERE id = parent_id);
		o_commit := EXISTS (SELECT 1 FROM loom_commits WHERE id = c_id);
		RETURN;
	END IF;
	IF parent_id <> '' THEN
		UPDATE loom_commits SET refs = refs + p_refs WHERE id = parent_id RETURNING seq INTO p_seq;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'no parent' USING ERRCODE = 'LM002';
		END IF;
	END IF;
	INSERT INTO loom_commits (seq, id, parent, depth, refs, op, at, state_from, messages, state, metadata)
		VALUES (c_seq, c_id, p_seq, c_depth, c_refs, c_op, c_at, c_state_from, c_messages, c_state, c_metadata)
		ON CONFLICT (id) DO NOTHING RETURNING seq INTO c_seq;
	IF c_seq IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'unique_violation', MESSAGE = 'commit exists', CONSTRAINT = 'loom_commits_id_key';
	END IF;
	INSERT INTO loom_history (thread, version, commit_seq, op, at) VALUES (t_seq, h_version, c_seq, m_op, m_at);
	IF pending THEN
		INSERT INTO loom_search_pending (commit_seq, thread) VALUES (c_seq, t_id);
	END IF;
END
$$;
`

// codeNoParent is loom_append's error for a parent commit that is not
// stored.
const codeNoParent = "LM002"

// foldLock is the key of the advisory lock a fold holds in its
// transaction, so that folds of every process take turns.
const foldLock = 0x6c6f6f66 // "loof"

// foldBatch is how many pending commits one fold's transaction indexes at
// most.
const foldBatch = 1000

// foldDelay is how long the background folder waits after a write before
// it folds, so that one fold takes the commits of many writes.
var foldDelay = 20 * time.Millisecond

// pendingRows are rows of loom_search_pending to write.
type pendingRows struct {
	commits []int64
	threads []string
}

// queue queues their insert on q, if there are any.
func (p *pendingRows) queue(q *pgx.Batch) {
	if len(p.commits) > 0 {
		q.Queue(`INSERT INTO loom_search_pending (commit_seq, thread) SELECT * FROM unnest($1::bigint[], $2::text[])`,
			p.commits, p.threads)
	}
}

// fold indexes the oldest pending commits, up to foldBatch of them, in
// one transaction of two round trips: it claims them (loom_claim_pending,
// under foldLock), tokenizes their messages, and writes their entries in
// the order of their commits. It reports whether it took a whole batch
// (more may be pending).
func (s *Store) fold(ctx context.Context) (more bool, err error) {
	pc, err := s.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer rollback(ctx, conn)
	wctx, cancel := s.boundWrite(ctx)
	defer cancel()

	var q pgx.Batch
	q.Queue("BEGIN")
	lockTimeout := s.queueLockTimeout(&q)
	q.Queue("SELECT pg_advisory_xact_lock($1)", int64(foldLock))
	q.Queue("SELECT o_seq, o_thread, o_messages FROM loom_claim_pending($1)", foldBatch)
	type claimed struct {
		seq    int64
		thread string
		msgs   []byte
	}
	var got []claimed
	br := conn.SendBatch(wctx, &q)
	_, err = br.Exec()
	if err == nil && lockTimeout {
		_, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		var c claimed
		_, err = pgx.ForEachRow(mustQuery(br), []any{&c.seq, &c.thread, &c.msgs}, func() error {
			got = append(got, c)
			return nil
		})
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if len(got) == 0 {
		return false, nil // the transaction changed nothing: rolled back
	}
	slices.SortFunc(got, func(a, b claimed) int { return cmp.Compare(a.seq, b.seq) })
	var rows searchRows
	for _, c := range got {
		if c.msgs == nil {
			continue // freed meanwhile
		}
		// A commit whose messages do not decode is left out of the
		// index: reading it fails anyway, and one damaged row must not
		// stop the folds.
		msgs, err := decodeMessages(c.msgs)
		if err != nil {
			continue
		}
		rows.add(c.seq, c.thread, msgs)
	}
	var w pgx.Batch
	rows.queue(&w)
	w.Queue("COMMIT")
	cctx, cancel := s.committing(ctx)
	defer cancel()
	if err := (&writes{q: w}).run(cctx, conn); err != nil {
		return false, err
	}
	return len(got) == foldBatch, nil
}

// foldAll folds until nothing is pending that was committed before it
// started.
func (s *Store) foldAll(ctx context.Context) error {
	for {
		more, err := s.fold(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// folder is the store's background fold: writes kick it, and it folds
// what is pending shortly after.
type folder struct {
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// startFolding starts the background folder, which folds at once what
// an earlier process may have left pending.
func (s *Store) startFolding() {
	ctx, cancel := context.WithCancel(context.Background())
	s.folder = &folder{kick: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
	s.kickFold()
	go s.folding(ctx)
}

// kickFold tells the background folder that commits are pending.
func (s *Store) kickFold() {
	if f := s.folder; f != nil {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// stopFolding stops the background folder and waits for it. What is left
// pending is folded by the next search or fold, of any process.
func (s *Store) stopFolding() {
	if f := s.folder; f != nil {
		f.once.Do(func() {
			f.stop()
			<-f.done
		})
	}
}

// folding folds, foldDelay after each kick, whatever is pending, until
// ctx is done. A failed fold is logged (once until one succeeds) and
// tried again at the next kick, or the next search folds.
func (s *Store) folding(ctx context.Context) {
	f := s.folder
	defer close(f.done)
	failing := ""
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		t.Reset(foldDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := s.foldAll(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if msg := err.Error(); msg != failing {
				failing = msg
				slog.Warn("postgres: search index: fold of pending commits failed; retrying", "err", err)
			}
			continue
		}
		failing = ""
	}
}

// hasWords reports whether a commit of msgs may have words to index: a
// message with search text (store.SearchText; the fold tokenizes it). A
// workflow's step records have none: their commits are not queued.
func hasWords(msgs []message.Message) bool {
	for _, m := range msgs {
		if store.SearchText(m) != "" {
			return true
		}
	}
	return false
}
