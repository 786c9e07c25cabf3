package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

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
	a := &applier{ctx: ctx, cache: s.cache, inBatch: batchRefs(b), search: searchThreads(b)}
	if err := s.wc.do(ctx, s.w, func(st *wstmts) error {
		a.st = st
		return a.apply(b, enc)
	}); err != nil {
		return mapFull(err)
	}
	s.cacheWritten(b, enc, a.added)
	return nil
}

// mapFull turns a write SQLite had no room for (SQLITE_FULL: the disk is
// full, or the database reached its max_page_count) into
// thread.ErrStorageFull; the transaction was rolled back.
func mapFull(err error) error {
	var se *msqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC) {
		return thread.StorageFull("the SQLite database's disk is full", err)
	}
	return err
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
	st  *wstmts
	// cache is told of the commits the batch deletes.
	cache *commitCache
	// args is the arguments of the statement being run.
	args []driver.NamedValue
	// added maps the ids of the batch's commits to their keys.
	added map[string]int64
	// inBatch counts the references that the batch's own changes make to
	// each of its commits (see batchRefs).
	inBatch map[string]int64
	// created are the threads the batch creates.
	created map[string]bool
	// unreferenced are commits whose last reference the batch dropped.
	unreferenced []int64
	// search is the thread to queue each commit of the batch for the
	// index under, by index ("" or nil: none).
	search []string
}

// named converts a statement's arguments as database/sql would.
func (a *applier) named(args []any) ([]driver.NamedValue, error) {
	a.args = a.args[:0]
	for i, v := range args {
		dv, err := driver.DefaultParameterConverter.ConvertValue(v)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		a.args = append(a.args, driver.NamedValue{Ordinal: i + 1, Value: dv})
	}
	return a.args, nil
}

func (a *applier) exec(st wstmt, args ...any) (driver.Result, error) {
	nv, err := a.named(args)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(a.ctx, nv)
}

// each runs a query and calls f with each row, whose values are valid
// until f returns.
func (a *applier) each(st wstmt, args []any, f func(row []driver.Value) error) error {
	nv, err := a.named(args)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(a.ctx, nv)
	if err != nil {
		return err
	}
	row := make([]driver.Value, len(rows.Columns()))
	for {
		err := rows.Next(row)
		if err == io.EOF {
			return rows.Close()
		}
		if err == nil {
			err = f(row)
		}
		if err != nil {
			rows.Close()
			return err
		}
	}
}

// scan runs a query of at most one row into dest; it reports false for
// none.
func (a *applier) scan(st wstmt, args []any, dest ...any) (bool, error) {
	found := false
	err := a.each(st, args, func(row []driver.Value) error {
		if found {
			return nil
		}
		found = true
		return assign(row, dest...)
	})
	return found && err == nil, err
}

// assign stores a row's values in dest: *int64 or a sql.Scanner.
func assign(row []driver.Value, dest ...any) error {
	if len(row) != len(dest) {
		return fmt.Errorf("sqlite: %d columns into %d values", len(row), len(dest))
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *int64:
			v, ok := row[i].(int64)
			if !ok {
				return fmt.Errorf("sqlite: column %d: %T, want an integer", i, row[i])
			}
			*d = v
		case sql.Scanner:
			if err := d.Scan(row[i]); err != nil {
				return fmt.Errorf("sqlite: column %d: %w", i, err)
			}
		default:
			return fmt.Errorf("sqlite: column %d: cannot scan into %T", i, d)
		}
	}
	return nil
}

// nullKey is a commit key for SQL: NULL for none (the empty root).
func nullKey(k int64) any {
	if k == 0 {
		return nil
	}
	return k
}

// batchRefs counts, for each commit of b, the references that b's own
// changes make to it: child commits after it in b, creations' history
// entries, moves' heads and new checkpoints. A commit of the batch is
// inserted with that count, so that referencing it later in the batch
// costs no statement; a change that fails to make its reference fails the
// batch, which is then rolled back.
func batchRefs(b *thread.Batch) map[string]int64 {
	if len(b.Commits) == 0 {
		return nil
	}
	n := make(map[string]int64, len(b.Commits))
	for _, c := range b.Commits {
		if c == nil {
			continue
		}
		if _, ok := n[c.Parent]; ok {
			n[c.Parent]++
		}
		if _, ok := n[c.ID]; !ok && c.ID != "" {
			n[c.ID] = 0
		}
	}
	count := func(id string) {
		if _, ok := n[id]; ok {
			n[id]++
		}
	}
	for _, cr := range b.Create {
		if cr.Record == nil {
			continue
		}
		if len(cr.History) == 0 {
			count(cr.Record.Head)
		}
		for _, e := range cr.History {
			count(e.Commit)
		}
	}
	for _, m := range b.Moves {
		count(m.Head)
	}
	for _, cp := range b.Checkpoints {
		count(cp.Commit)
	}
	return n
}

// ref counts one more reference to the commit id and returns its key; ""
// is the empty root, key 0. A missing commit reports false. A commit of
// the batch counted its references from the batch when it was inserted
// (batchRefs).
func (a *applier) ref(id string) (int64, bool, error) {
	if id == "" {
		return 0, true, nil
	}
	if k, ok := a.added[id]; ok {
		return k, true, nil
	}
	// A cached commit's key saves the lookup by id and RETURNING's
	// buffering. The key is checked with the id: a row deleted since (by
	// any process) and its key reused by another commit do not match, and
	// the lookup by id below decides.
	if k, ok := a.cache.key(id); ok {
		res, err := a.exec(a.st.refKey, k, id)
		if err != nil {
			return 0, false, err
		}
		n, err := rowsAffected(res)
		if err != nil {
			return 0, false, err
		}
		if n == 1 {
			return k, true, nil
		}
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
		err := a.each(a.st.freeRun, []any{k}, func(row []driver.Value) error {
			var g struct{ k, parent int64 }
			var parent sql.NullInt64
			if err := assign(row, &g.k, &parent); err != nil {
				return err
			}
			g.parent = parent.Int64
			gone = append(gone, g)
			a.cache.forget(g.k)
			return nil
		})
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
		if a.search != nil && a.search[i] != "" {
			if _, err := a.exec(a.st.insertPending, a.added[c.ID], a.search[i]); err != nil {
				return fmt.Errorf("commit %q: queue for the index: %w", clip(c.ID), err)
			}
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
	res, err := a.exec(a.st.insertCommit, c.ID, nullKey(parent), c.Depth, a.inBatch[c.ID], string(c.Op), micros(c.Time), c.StateFrom,
		e.messages, e.state, e.metadata)
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	n, err := rowsAffected(res)
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	if n != 1 {
		return fmt.Errorf("commit %q exists: %w", clip(c.ID), thread.ErrConflict)
	}
	k, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("commit %q: %w", clip(c.ID), err)
	}
	a.added[c.ID] = k
	return nil
}

func (a *applier) create(cr thread.Creation) error {
	r := cr.Record
	if r == nil || r.ID == "" {
		return fmt.Errorf("create: no thread id: %w", thread.ErrInvalid)
	}
	// A taken id is the first error. The insert finds it; only when an
	// earlier check fails does a read look for it.
	taken := func(err error) error {
		if _, _, ok, err2 := a.threadKey(r.ID); err2 != nil {
			return fmt.Errorf("create thread %q: %w", clip(r.ID), err2)
		} else if ok {
			return fmt.Errorf("thread %q exists: %w", clip(r.ID), thread.ErrConflict)
		}
		return err
	}
	if err := cr.Validate(); err != nil {
		return taken(err)
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
			return taken(fmt.Errorf("thread %q: %s %q: %w", clip(r.ID), what, clip(e.Commit), thread.ErrNotFound))
		}
		keys[i] = k
	}
	res, err := a.exec(a.st.insertThread, r.ID, r.Tenant, string(r.Kind), r.Title, encodeStrings(r.Labels), nullKey(keys[len(keys)-1]),
		r.Version, micros(r.CreatedAt), micros(r.UpdatedAt), r.ForkedFrom.Thread, r.ForkedFrom.Commit, r.ForkedFrom.Message)
	if err != nil {
		return fmt.Errorf("create thread %q: %w", clip(r.ID), err)
	}
	if n, err := rowsAffected(res); err != nil {
		return fmt.Errorf("create thread %q: %w", clip(r.ID), err)
	} else if n != 1 {
		return fmt.Errorf("thread %q exists: %w", clip(r.ID), thread.ErrConflict)
	}
	k, err := res.LastInsertId()
	if err != nil {
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

// move moves a head by compare-and-swap: one UPDATE that matches the
// thread only at version m.From. Only when it matches nothing does a read
// tell a missing thread from a conflict.
func (a *applier) move(m thread.Move) error {
	head, ok, err := a.ref(m.Head)
	if err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	}
	if !ok {
		// A missing thread or a conflict is the first error, whatever
		// the head.
		if err := a.moveFailed(m); err != nil {
			return err
		}
		return fmt.Errorf("thread %q: head %q: %w", clip(m.Thread), clip(m.Head), thread.ErrNotFound)
	}
	var title string
	if m.Title != nil {
		title = *m.Title
	}
	res, err := a.exec(a.st.move, m.Thread, m.From, m.From+1, nullKey(head), micros(m.Time), string(m.Kind),
		m.Title != nil, title, m.Labels != nil, encodeStrings(m.Labels))
	if err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	}
	if n, err := rowsAffected(res); err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	} else if n != 1 {
		if err := a.moveFailed(m); err != nil {
			return err
		}
		return fmt.Errorf("move thread %q: no row at version %d", clip(m.Thread), m.From)
	}
	if _, err := a.exec(a.st.moveHistory, m.Thread, m.From+1, nullKey(head), string(m.Op), micros(m.Time)); err != nil {
		return fmt.Errorf("thread %q: history: %w", clip(m.Thread), err)
	}
	if m.Labels != nil {
		k, _, _, err := a.threadKey(m.Thread)
		if err != nil {
			return fmt.Errorf("thread %q: %w", clip(m.Thread), err)
		}
		if err := a.setLabels(k, m.Labels, true); err != nil {
			return fmt.Errorf("thread %q: %w", clip(m.Thread), err)
		}
	}
	return nil
}

// moveFailed returns the error of a move whose thread is missing or not
// at version m.From, or nil if it is there at m.From.
func (a *applier) moveFailed(m thread.Move) error {
	_, v, ok, err := a.threadKey(m.Thread)
	switch {
	case err != nil:
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	case !ok:
		return fmt.Errorf("thread %q: %w", clip(m.Thread), thread.ErrNotFound)
	case v != m.From:
		return fmt.Errorf("thread %q is at version %d, not %d: %w", clip(m.Thread), v, m.From, thread.ErrConflict)
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
	err = a.each(a.st.unrefThread, []any{k}, func(row []driver.Value) error {
		var k, refs int64
		if err := assign(row, &k, &refs); err != nil {
			return err
		}
		if refs <= 0 {
			a.unreferenced = append(a.unreferenced, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete thread %q: references: %w", clip(d.Thread), err)
	}
	for _, st := range []wstmt{a.st.deleteHistory, a.st.deleteCheckpoints, a.st.deleteLabels, a.st.deleteThread} {
		if _, err := a.exec(st, k); err != nil {
			return fmt.Errorf("delete thread %q: %w", clip(d.Thread), err)
		}
	}
	return nil
}

// stmts are the read statements, prepared on the read pool.
type stmts struct {
	all []*sql.Stmt

	commit, ancestors, thread, history, checkpoints *sql.Stmt
}

func (s *stmts) prepare(ctx context.Context, r *sql.DB) error {
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&s.commit, qCommit},
		{&s.ancestors, qAncestors},
		{&s.thread, qThread},
		{&s.history, qHistory},
		{&s.checkpoints, qCheckpoints},
	} {
		st, err := r.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %.60q: %w", p.q, err)
		}
		*p.st = st
		s.all = append(s.all, st)
	}
	return nil
}

func (s *stmts) close() error {
	err := closeAll(s.all)
	s.all = nil
	return err
}

// closeAll closes every statement of all.
func closeAll[S io.Closer](all []S) error {
	var errs []error
	for _, st := range all {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// wstmt is a statement prepared on the write connection, run through the
// driver: an Apply holds that connection for its transaction, and going
// around database/sql's Tx saves its per-transaction goroutine and the
// per-statement copies and conversions.
type wstmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// wstmts are the write statements, prepared on one driver connection.
type wstmts struct {
	all []wstmt

	refID, refKey, refs, unref, insertCommit, freeRun, commitID   wstmt
	threadVersion, insertThread, move, moveHistory, insertHistory wstmt
	deleteLabels, insertLabel                                     wstmt
	dropCheckpoint, insertCheckpoint                              wstmt
	unrefThread, deleteHistory, deleteCheckpoints, deleteThread   wstmt
	insertPending, claimPending, insertEntry, insertSearch        wstmt
}

func (s *wstmts) prepare(ctx context.Context, dc driver.ConnPrepareContext) error {
	for _, p := range []struct {
		st *wstmt
		q  string
	}{
		{&s.refID, `UPDATE commits SET refs = refs + 1 WHERE id = ? RETURNING k`},
		{&s.refKey, `UPDATE commits SET refs = refs + 1 WHERE k = ? AND id = ?`},
		{&s.refs, `SELECT refs FROM commits WHERE k = ?`},
		{&s.commitID, `SELECT k FROM commits WHERE id = ?`},
		{&s.unref, `UPDATE commits SET refs = refs - ?2 WHERE k = ?1 RETURNING refs, parent`},
		{&s.insertCommit, `INSERT INTO commits (id, parent, depth, refs, op, time, state_from, messages, state, metadata)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`},
		// freeRun deletes commit ?1 (which has no references left) and
		// the ancestors that only the commit below them referenced.
		{&s.freeRun, `WITH RECURSIVE run(k, parent) AS (
				SELECT k, parent FROM commits WHERE k = ?1
				UNION ALL
				SELECT c.k, c.parent FROM run JOIN commits c ON c.k = run.parent WHERE c.refs = 1
			)
			DELETE FROM commits WHERE k IN (SELECT k FROM run) RETURNING k, parent`},
		{&s.threadVersion, `SELECT k, version FROM threads WHERE id = ?`},
		{&s.insertThread, `INSERT INTO threads (id, tenant, kind, title, labels, head, version, created, updated,
			forked_thread, forked_commit, forked_message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`},
		// move is the compare-and-swap on the version.
		{&s.move, `UPDATE threads SET version = ?3, head = ?4, updated = ?5,
			kind = CASE WHEN ?6 = '' THEN kind ELSE ?6 END,
			title = CASE WHEN ?7 THEN ?8 ELSE title END,
			labels = CASE WHEN ?9 THEN ?10 ELSE labels END
			WHERE id = ?1 AND version = ?2`},
		{&s.moveHistory, `INSERT INTO history (thread, version, commit_key, op, time)
			SELECT k, ?2, ?3, ?4, ?5 FROM threads WHERE id = ?1`},
		{&s.insertHistory, `INSERT INTO history (thread, version, commit_key, op, time) VALUES (?, ?, ?, ?, ?)`},
		{&s.deleteLabels, `DELETE FROM labels WHERE thread = ?`},
		{&s.insertLabel, `INSERT INTO labels (thread, key, value) VALUES (?, ?, ?)`},
		{&s.dropCheckpoint, `DELETE FROM checkpoints WHERE thread = ? AND name = ? RETURNING commit_key`},
		{&s.insertCheckpoint, `INSERT INTO checkpoints (thread, name, commit_key, version, created) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (thread, name) DO NOTHING`},
		// Every history entry and checkpoint of the thread drops one
		// reference, in one statement; the rows that reach 0 come back.
		{&s.unrefThread, `UPDATE commits SET refs = commits.refs - d.n
			FROM (SELECT commit_key AS c, count(*) AS n FROM (
				SELECT commit_key FROM history WHERE thread = ?1 AND commit_key IS NOT NULL
				UNION ALL SELECT commit_key FROM checkpoints WHERE thread = ?1
			) GROUP BY commit_key) AS d
			WHERE commits.k = d.c
			RETURNING commits.k, commits.refs`},
		{&s.deleteHistory, `DELETE FROM history WHERE thread = ?`},
		{&s.deleteCheckpoints, `DELETE FROM checkpoints WHERE thread = ?`},
		{&s.deleteThread, `DELETE FROM threads WHERE k = ?`},
		{&s.insertPending, qInsertPending},
		{&s.claimPending, qClaimPending},
		{&s.insertEntry, qInsertEntry},
		{&s.insertSearch, qInsertSearch},
	} {
		st, err := dc.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %.60q: %w", p.q, err)
		}
		w, ok := st.(wstmt)
		if !ok {
			st.Close()
			return fmt.Errorf("prepare %.60q: statement %T lacks ExecContext or QueryContext", p.q, st)
		}
		*p.st = w
		s.all = append(s.all, w)
	}
	return nil
}

func (s *wstmts) close() error {
	err := closeAll(s.all)
	s.all = nil
	return err
}

// writeConn runs the write transactions on the write pool's one
// connection, with the statements prepared on it. If database/sql replaces
// that connection (it does when a driver call reports it broken), the
// statements are prepared again on the new one.
type writeConn struct {
	mu sync.Mutex
	dc any // the driver connection st was prepared on
	st *wstmts
}

// stmts returns the statements prepared on dc. Called with mu held.
func (wc *writeConn) stmts(ctx context.Context, dc any) (*wstmts, error) {
	if wc.st != nil && wc.dc == dc {
		return wc.st, nil
	}
	// The old connection was replaced: finalize its statements, so that
	// it can close for good (SQLite keeps a connection with unfinalized
	// statements open).
	if wc.st != nil {
		wc.st.close()
	}
	wc.dc, wc.st = nil, nil
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("sqlite: driver connection %T cannot prepare with a context", dc)
	}
	st := &wstmts{}
	if err := st.prepare(ctx, pc); err != nil {
		st.close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	wc.dc, wc.st = dc, st
	return st, nil
}

// do runs f in one BEGIN IMMEDIATE transaction (the write pool's _txlock)
// on w's connection, and commits it if f succeeds; otherwise, or if ctx is
// done before the commit, it rolls back.
func (wc *writeConn) do(ctx context.Context, w *sql.DB, f func(st *wstmts) error) error {
	conn, err := w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		wc.mu.Lock()
		defer wc.mu.Unlock()
		st, err := wc.stmts(ctx, dc)
		if err != nil {
			return err
		}
		bt, ok := dc.(driver.ConnBeginTx)
		if !ok {
			return fmt.Errorf("sqlite: driver connection %T cannot begin with a context", dc)
		}
		tx, err := bt.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return fmt.Errorf("sqlite: begin: %w", err)
		}
		if err := f(st); err != nil {
			tx.Rollback()
			return err
		}
		// As database/sql's Tx.Commit: a transaction whose context
		// ended is not committed.
		if err := ctx.Err(); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: commit: %w", err)
		}
		return nil
	})
}

// prepare prepares the write statements at Open, so that an error in them
// shows there.
func (wc *writeConn) prepare(ctx context.Context, w *sql.DB) error {
	conn, err := w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		wc.mu.Lock()
		defer wc.mu.Unlock()
		_, err := wc.stmts(ctx, dc)
		return err
	})
}

// close closes the write statements, if the connection they were prepared
// on is still the write pool's.
func (wc *writeConn) close(w *sql.DB) error {
	wc.mu.Lock()
	none := wc.st == nil
	wc.mu.Unlock()
	if none {
		return nil
	}
	conn, err := w.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		wc.mu.Lock()
		defer wc.mu.Unlock()
		var err error
		if wc.st != nil && wc.dc == dc {
			err = wc.st.close()
		}
		wc.dc, wc.st = nil, nil
		return err
	})
}

// rowsAffected is sql.Result.RowsAffected; tests make it fail.
var rowsAffected = sql.Result.RowsAffected
