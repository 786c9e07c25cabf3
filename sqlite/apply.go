package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/loomthreads/loom/thread"
)

// Apply implements thread.Store. The whole batch is one BEGIN IMMEDIATE
// transaction: it takes SQLite's write lock first, so every check below
// sees the state that its writes change, in this process or any other. The
// changes are made in the batch's order and each precondition is checked
// just before its change, against the state the earlier changes left; the
// first failure rolls everything back.
func (s *Store) Apply(ctx context.Context, b *thread.Batch) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Encode outside the transaction: the write lock is held for the
	// writes only.
	enc := make([]encodedCommit, len(b.Commits))
	for i, c := range b.Commits {
		if c == nil {
			return fmt.Errorf("commit %d of the batch is nil: %w", i, thread.ErrInvalid)
		}
		if enc[i], err = encodeCommit(c); err != nil {
			return err
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	a := &applier{ctx: ctx, tx: tx, st: &s.st, cache: s.cache}
	if err := a.apply(b, enc); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	s.cacheWritten(b, enc, a.added)
	return nil
}

// cacheWritten caches the commits a batch wrote, decoded from what was
// stored (not the caller's values, which may differ from a read in time
// zones and number types), so that the walks that follow a write, such as
// an agent's next view, need no query.
func (s *Store) cacheWritten(b *thread.Batch, enc []encodedCommit, added map[string]int64) {
	if s.cache == nil {
		return
	}
	for i, c := range b.Commits {
		k, ok := added[c.ID]
		if !ok {
			continue
		}
		r := rawCommit{k: k, id: c.ID, depth: c.Depth, us: micros(c.Time), op: string(c.Op), stateFrom: c.StateFrom,
			msgs: enc[i].messages, state: enc[i].state, metadata: enc[i].metadata}
		r.parentID.String = c.Parent
		d, cached, err := s.commit(&r)
		if err != nil || cached {
			continue
		}
		s.cache.put(k, len(r.msgs), d, r.cost())
	}
}

type encodedCommit struct {
	messages, state, metadata []byte
}

func encodeCommit(c *thread.Commit) (encodedCommit, error) {
	msgs, err := encodeMessages(c.Messages)
	if err != nil {
		return encodedCommit{}, fmt.Errorf("commit %q: %v: %w", clip(c.ID), err, thread.ErrInvalid)
	}
	return encodedCommit{messages: msgs, state: encodeState(c.State), metadata: encodeStrings(c.Metadata)}, nil
}

// applier is one Apply's transaction.
type applier struct {
	ctx context.Context
	tx  *sql.Tx
	st  *stmts
	// cache is told of the commits the batch deletes.
	cache *commitCache
	// stmt holds the transaction's copies of the prepared statements.
	stmt map[*sql.Stmt]*sql.Stmt
	// added maps the ids of the batch's commits to their keys.
	added map[string]int64
	// created are the threads the batch creates.
	created map[string]bool
	// unreferenced are commits whose last reference the batch dropped.
	unreferenced []int64
}

// use returns the transaction's copy of a prepared statement.
func (a *applier) use(st *sql.Stmt) *sql.Stmt {
	if s, ok := a.stmt[st]; ok {
		return s
	}
	if a.stmt == nil {
		a.stmt = make(map[*sql.Stmt]*sql.Stmt, 8)
	}
	s := a.tx.StmtContext(a.ctx, st)
	a.stmt[st] = s
	return s
}

func (a *applier) exec(st *sql.Stmt, args ...any) (sql.Result, error) {
	return a.use(st).ExecContext(a.ctx, args...)
}

// scan runs a query of at most one row; it reports false for none.
func (a *applier) scan(st *sql.Stmt, args []any, dest ...any) (bool, error) {
	err := a.use(st).QueryRowContext(a.ctx, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// nullKey is a commit key for SQL: NULL for none (the empty root).
func nullKey(k int64) any {
	if k == 0 {
		return nil
	}
	return k
}

// ref counts one more reference to the commit id and returns its key; ""
// is the empty root, key 0. A missing commit reports false.
func (a *applier) ref(id string) (int64, bool, error) {
	if id == "" {
		return 0, true, nil
	}
	if k, ok := a.added[id]; ok {
		_, err := a.exec(a.st.refKey, k)
		return k, err == nil, err
	}
	var k int64
	ok, err := a.scan(a.st.refID, []any{id}, &k)
	return k, ok, err
}

// release drops one reference to commit k. A commit left without any is
// freed at the end of the batch, not now: a later change of the same batch
// (a new checkpoint replacing a dropped one) may reference it again.
func (a *applier) release(k int64) error {
	var refs int64
	var parent sql.NullInt64
	ok, err := a.scan(a.st.unref, []any{k, 1}, &refs, &parent)
	if err != nil {
		return fmt.Errorf("unref commit %d: %w", k, err)
	}
	if ok && refs <= 0 {
		a.unreferenced = append(a.unreferenced, k)
	}
	return nil
}

// collect frees the commits that the batch left without references.
func (a *applier) collect() error {
	for _, k := range a.unreferenced {
		var refs int64
		ok, err := a.scan(a.st.refs, []any{k}, &refs)
		if err != nil {
			return fmt.Errorf("commit %d: %w", k, err)
		}
		if ok && refs <= 0 {
			if err := a.free(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// free deletes commit k, which nothing references any more, and the
// commits that only it kept: O(commits freed). Each step deletes, in one
// statement, k and the run of ancestors that had no other reference than
// their child on the run, and then drops one reference to the ancestor the
// run stopped at, which may free it in turn.
func (a *applier) free(k int64) error {
	for k != 0 {
		var gone []struct{ k, parent int64 }
		err := func() error {
			rows, err := a.use(a.st.freeRun).QueryContext(a.ctx, k)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var g struct{ k, parent int64 }
				var parent sql.NullInt64
				if err := rows.Scan(&g.k, &parent); err != nil {
					return err
				}
				g.parent = parent.Int64
				gone = append(gone, g)
				a.cache.forget(g.k)
			}
			return rows.Err()
		}()
		if err != nil {
			return fmt.Errorf("free commit %d: %w", k, err)
		}
		// The run is a chain: the one parent not deleted with it is where
		// it stopped.
		deleted := make(map[int64]bool, len(gone))
		for _, g := range gone {
			deleted[g.k] = true
		}
		stop := int64(0)
		for _, g := range gone {
			if g.parent != 0 && !deleted[g.parent] {
				stop = g.parent
			}
		}
		if stop == 0 {
			return nil
		}
		var refs int64
		var parent sql.NullInt64
		ok, err := a.scan(a.st.unref, []any{stop, 1}, &refs, &parent)
		if err != nil {
			return fmt.Errorf("unref commit %d: %w", stop, err)
		}
		if !ok || refs > 0 {
			return nil
		}
		k = stop
	}
	return nil
}

// threadKey returns the key and version of a thread, or false.
func (a *applier) threadKey(id string) (k, version int64, ok bool, err error) {
	ok, err = a.scan(a.st.threadVersion, []any{id}, &k, &version)
	return k, version, ok, err
}

func (a *applier) apply(b *thread.Batch, enc []encodedCommit) error {
	if len(b.Commits) > 0 {
		a.added = make(map[string]int64, len(b.Commits))
	}
	for i, c := range b.Commits {
		if err := a.commit(c, enc[i]); err != nil {
			return err
		}
	}
	for _, cr := range b.Create {
		if err := a.create(cr); err != nil {
			return err
		}
	}
	for _, m := range b.Moves {
		if err := a.move(m); err != nil {
			return err
		}
	}
	for _, key := range b.DropCheckpoints {
		if err := a.dropCheckpoint(key); err != nil {
			return err
		}
	}
	for _, cp := range b.Checkpoints {
		if err := a.checkpoint(cp); err != nil {
			return err
		}
	}
	for _, d := range b.Delete {
		if err := a.delete(d); err != nil {
			return err
		}
	}
	return a.collect()
}

func (a *applier) commit(c *thread.Commit, e encodedCommit) error {
	if c.ID == "" {
		return fmt.Errorf("commit without an id: %w", thread.ErrConflict)
	}
	if _, dup := a.added[c.ID]; dup {
		return fmt.Errorf("commit %q exists: %w", clip(c.ID), thread.ErrConflict)
	}
	parent, ok, err := a.ref(c.Parent)
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	if !ok {
		// The id taken is the first error, as in thread.MemoryStore,
		// whatever the parent (the usual path never asks).
		var k int64
		if dup, err := a.scan(a.st.commitID, []any{c.ID}, &k); err != nil {
			return fmt.Errorf("commit %q: %w", clip(c.ID), err)
		} else if dup {
			return fmt.Errorf("commit %q exists: %w", clip(c.ID), thread.ErrConflict)
		}
		return fmt.Errorf("commit %q: parent %q: %w", clip(c.ID), clip(c.Parent), thread.ErrNotFound)
	}
	var k int64
	ok, err = a.scan(a.st.insertCommit, []any{c.ID, nullKey(parent), c.Depth, string(c.Op), micros(c.Time), c.StateFrom,
		e.messages, e.state, e.metadata}, &k)
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	if !ok {
		return fmt.Errorf("commit %q exists: %w", clip(c.ID), thread.ErrConflict)
	}
	a.added[c.ID] = k
	return nil
}

func (a *applier) create(cr thread.Creation) error {
	r := cr.Record
	if r == nil || r.ID == "" {
		return fmt.Errorf("create: no thread id: %w", thread.ErrInvalid)
	}
	if _, _, ok, err := a.threadKey(r.ID); err != nil {
		return fmt.Errorf("create thread %q: %w", clip(r.ID), err)
	} else if ok {
		return fmt.Errorf("thread %q exists: %w", clip(r.ID), thread.ErrConflict)
	}
	if err := cr.Validate(); err != nil {
		return err
	}
	history := cr.History
	if len(history) == 0 {
		history = []thread.HistoryEntry{{Version: 1, Commit: r.Head, Op: cr.Op, Time: r.CreatedAt}}
	}
	// The head is the commit of the last entry (Validate checked).
	keys := make([]int64, len(history))
	for i, e := range history {
		k, ok, err := a.ref(e.Commit)
		if err != nil {
			return fmt.Errorf("thread %q: %w", clip(r.ID), err)
		}
		if !ok {
			what := "history commit"
			if i == len(history)-1 {
				what = "head"
			}
			return fmt.Errorf("thread %q: %s %q: %w", clip(r.ID), what, clip(e.Commit), thread.ErrNotFound)
		}
		keys[i] = k
	}
	var k int64
	if _, err := a.scan(a.st.insertThread, []any{r.ID, r.Tenant, string(r.Kind), r.Title, encodeStrings(r.Labels), nullKey(keys[len(keys)-1]),
		r.Version, micros(r.CreatedAt), micros(r.UpdatedAt), r.ForkedFrom.Thread, r.ForkedFrom.Commit, r.ForkedFrom.Message}, &k); err != nil {
		return fmt.Errorf("create thread %q: %w", clip(r.ID), err)
	}
	for i, e := range history {
		if _, err := a.exec(a.st.insertHistory, k, e.Version, nullKey(keys[i]), string(e.Op), micros(e.Time)); err != nil {
			return fmt.Errorf("thread %q: history: %w", clip(r.ID), err)
		}
	}
	if err := a.setLabels(k, r.Labels, false); err != nil {
		return fmt.Errorf("thread %q: %w", clip(r.ID), err)
	}
	if a.created == nil {
		a.created = make(map[string]bool, 1)
	}
	a.created[r.ID] = true
	return nil
}

// setLabels writes the labels table rows of thread k.
func (a *applier) setLabels(k int64, labels map[string]string, replace bool) error {
	if replace {
		if _, err := a.exec(a.st.deleteLabels, k); err != nil {
			return fmt.Errorf("labels: %w", err)
		}
	}
	for key, v := range labels {
		if _, err := a.exec(a.st.insertLabel, k, key, v); err != nil {
			return fmt.Errorf("label %q: %w", clip(key), err)
		}
	}
	return nil
}

func (a *applier) move(m thread.Move) error {
	k, v, ok, err := a.threadKey(m.Thread)
	if err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	}
	if !ok {
		return fmt.Errorf("thread %q: %w", clip(m.Thread), thread.ErrNotFound)
	}
	if v != m.From {
		return fmt.Errorf("thread %q is at version %d, not %d: %w", clip(m.Thread), v, m.From, thread.ErrConflict)
	}
	head, ok, err := a.ref(m.Head)
	if err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	}
	if !ok {
		return fmt.Errorf("thread %q: head %q: %w", clip(m.Thread), clip(m.Head), thread.ErrNotFound)
	}
	var title string
	if m.Title != nil {
		title = *m.Title
	}
	if _, err := a.exec(a.st.move, k, m.From+1, nullKey(head), micros(m.Time), string(m.Kind),
		m.Title != nil, title, m.Labels != nil, encodeStrings(m.Labels)); err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	}
	if _, err := a.exec(a.st.insertHistory, k, m.From+1, nullKey(head), string(m.Op), micros(m.Time)); err != nil {
		return fmt.Errorf("thread %q: history: %w", clip(m.Thread), err)
	}
	if m.Labels != nil {
		if err := a.setLabels(k, m.Labels, true); err != nil {
			return fmt.Errorf("thread %q: %w", clip(m.Thread), err)
		}
	}
	return nil
}

func (a *applier) dropCheckpoint(key thread.CheckpointKey) error {
	k, _, ok, err := a.threadKey(key.Thread)
	if err != nil {
		return fmt.Errorf("drop checkpoint of %q: %w", clip(key.Thread), err)
	}
	if !ok || a.created[key.Thread] {
		return fmt.Errorf("thread %q: %w", clip(key.Thread), thread.ErrNotFound)
	}
	var commit int64
	ok, err = a.scan(a.st.dropCheckpoint, []any{k, key.Name}, &commit)
	if err != nil {
		return fmt.Errorf("drop checkpoint of %q: %w", clip(key.Thread), err)
	}
	if !ok {
		return fmt.Errorf("checkpoint %q of thread %q: %w", clip(key.Name), clip(key.Thread), thread.ErrNotFound)
	}
	return a.release(commit)
}

func (a *applier) checkpoint(cp thread.Checkpoint) error {
	k, _, ok, err := a.threadKey(cp.Thread)
	if err != nil {
		return fmt.Errorf("checkpoint of %q: %w", clip(cp.Thread), err)
	}
	if !ok {
		return fmt.Errorf("thread %q: %w", clip(cp.Thread), thread.ErrNotFound)
	}
	commit, ok := int64(0), false
	if cp.Commit != "" {
		if commit, ok, err = a.ref(cp.Commit); err != nil {
			return fmt.Errorf("checkpoint of %q: %w", clip(cp.Thread), err)
		}
	}
	if !ok {
		return fmt.Errorf("checkpoint %q: commit %q: %w", clip(cp.Name), clip(cp.Commit), thread.ErrNotFound)
	}
	res, err := a.exec(a.st.insertCheckpoint, k, cp.Name, commit, cp.Version, micros(cp.CreatedAt))
	if err != nil {
		return fmt.Errorf("checkpoint of %q: %w", clip(cp.Thread), err)
	}
	n, err := rowsAffected(res)
	if err != nil {
		return fmt.Errorf("checkpoint of %q: %w", clip(cp.Thread), err)
	}
	if n != 1 {
		return fmt.Errorf("checkpoint %q of thread %q exists: %w", clip(cp.Name), clip(cp.Thread), thread.ErrConflict)
	}
	return nil
}

// delete removes a thread with its history, checkpoints and labels, drops
// the references they held in one statement, and then frees the commits
// that nothing reaches any more.
func (a *applier) delete(d thread.Deletion) error {
	k, v, ok, err := a.threadKey(d.Thread)
	if err != nil {
		return fmt.Errorf("delete thread %q: %w", clip(d.Thread), err)
	}
	if !ok || a.created[d.Thread] {
		return fmt.Errorf("thread %q: %w", clip(d.Thread), thread.ErrNotFound)
	}
	if d.Version != 0 && v != d.Version {
		return fmt.Errorf("thread %q is at version %d, not %d: %w", clip(d.Thread), v, d.Version, thread.ErrConflict)
	}
	err = func() error {
		rows, err := a.use(a.st.unrefThread).QueryContext(a.ctx, k)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k, refs int64
			if err := rows.Scan(&k, &refs); err != nil {
				return err
			}
			if refs <= 0 {
				a.unreferenced = append(a.unreferenced, k)
			}
		}
		return rows.Err()
	}()
	if err != nil {
		return fmt.Errorf("delete thread %q: references: %w", clip(d.Thread), err)
	}
	for _, st := range []*sql.Stmt{a.st.deleteHistory, a.st.deleteCheckpoints, a.st.deleteLabels, a.st.deleteThread} {
		if _, err := a.exec(st, k); err != nil {
			return fmt.Errorf("delete thread %q: %w", clip(d.Thread), err)
		}
	}
	return nil
}

// stmts are the prepared statements: reads on the read pool, writes on the
// write connection (an Apply takes its transaction's copies).
type stmts struct {
	all []*sql.Stmt

	// reads
	commit, ancestors, thread, history, checkpoints *sql.Stmt

	// writes
	refID, refKey, refs, unref, insertCommit, freeRun, commitID *sql.Stmt
	threadVersion, insertThread, move, insertHistory            *sql.Stmt
	deleteLabels, insertLabel                                   *sql.Stmt
	dropCheckpoint, insertCheckpoint                            *sql.Stmt
	unrefThread, deleteHistory, deleteCheckpoints, deleteThread *sql.Stmt
}

func (s *stmts) prepare(ctx context.Context, w, r *sql.DB) error {
	for _, p := range []struct {
		db *sql.DB
		st **sql.Stmt
		q  string
	}{
		{r, &s.commit, qCommit},
		{r, &s.ancestors, qAncestors},
		{r, &s.thread, qThread},
		{r, &s.history, qHistory},
		{r, &s.checkpoints, qCheckpoints},

		{w, &s.refID, `UPDATE commits SET refs = refs + 1 WHERE id = ? RETURNING k`},
		{w, &s.refKey, `UPDATE commits SET refs = refs + 1 WHERE k = ?`},
		{w, &s.refs, `SELECT refs FROM commits WHERE k = ?`},
		{w, &s.commitID, `SELECT k FROM commits WHERE id = ?`},
		{w, &s.unref, `UPDATE commits SET refs = refs - ?2 WHERE k = ?1 RETURNING refs, parent`},
		{w, &s.insertCommit, `INSERT INTO commits (id, parent, depth, refs, op, time, state_from, messages, state, metadata)
			VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING k`},
		// freeRun deletes commit ?1 (which has no references left) and
		// the ancestors that only the commit below them referenced.
		{w, &s.freeRun, `WITH RECURSIVE run(k, parent) AS (
				SELECT k, parent FROM commits WHERE k = ?1
				UNION ALL
				SELECT c.k, c.parent FROM run JOIN commits c ON c.k = run.parent WHERE c.refs = 1
			)
			DELETE FROM commits WHERE k IN (SELECT k FROM run) RETURNING k, parent`},
		{w, &s.threadVersion, `SELECT k, version FROM threads WHERE id = ?`},
		{w, &s.insertThread, `INSERT INTO threads (id, tenant, kind, title, labels, head, version, created, updated,
			forked_thread, forked_commit, forked_message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING k`},
		{w, &s.move, `UPDATE threads SET version = ?2, head = ?3, updated = ?4,
			kind = CASE WHEN ?5 = '' THEN kind ELSE ?5 END,
			title = CASE WHEN ?6 THEN ?7 ELSE title END,
			labels = CASE WHEN ?8 THEN ?9 ELSE labels END
			WHERE k = ?1`},
		{w, &s.insertHistory, `INSERT INTO history (thread, version, commit_key, op, time) VALUES (?, ?, ?, ?, ?)`},
		{w, &s.deleteLabels, `DELETE FROM labels WHERE thread = ?`},
		{w, &s.insertLabel, `INSERT INTO labels (thread, key, value) VALUES (?, ?, ?)`},
		{w, &s.dropCheckpoint, `DELETE FROM checkpoints WHERE thread = ? AND name = ? RETURNING commit_key`},
		{w, &s.insertCheckpoint, `INSERT INTO checkpoints (thread, name, commit_key, version, created) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (thread, name) DO NOTHING`},
		// Every history entry and checkpoint of the thread drops one
		// reference, in one statement; the rows that reach 0 come back.
		{w, &s.unrefThread, `UPDATE commits SET refs = commits.refs - d.n
			FROM (SELECT commit_key AS c, count(*) AS n FROM (
				SELECT commit_key FROM history WHERE thread = ?1 AND commit_key IS NOT NULL
				UNION ALL SELECT commit_key FROM checkpoints WHERE thread = ?1
			) GROUP BY commit_key) AS d
			WHERE commits.k = d.c
			RETURNING commits.k, commits.refs`},
		{w, &s.deleteHistory, `DELETE FROM history WHERE thread = ?`},
		{w, &s.deleteCheckpoints, `DELETE FROM checkpoints WHERE thread = ?`},
		{w, &s.deleteThread, `DELETE FROM threads WHERE k = ?`},
	} {
		st, err := p.db.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %.60q: %w", p.q, err)
		}
		*p.st = st
		s.all = append(s.all, st)
	}
	return nil
}

// rowsAffected is sql.Result.RowsAffected; tests make it fail.
var rowsAffected = sql.Result.RowsAffected

func (s *stmts) close() error {
	var errs []error
	for _, st := range s.all {
		errs = append(errs, st.Close())
	}
	s.all = nil
	return errors.Join(errs...)
}
