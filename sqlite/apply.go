package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Apply implements store.Store. The batch's rules are store.PlanBatch's:
// the store answers the planner's questions (store.Facts) with reads in
// its write transaction, which holds SQLite's write lock from its BEGIN
// IMMEDIATE, so that what the planner sees is what the writes change, in
// this process or any other; then it writes the plan in that same
// transaction. Concurrent Applies share transactions (see group.go).
func (s *Store) Apply(ctx context.Context, b *store.Batch) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Encode outside the transaction: the write lock is held for the
	// writes only.
	enc, err := encodeCommits(b)
	if err != nil {
		return err
	}
	w := &write{ctx: ctx, b: b, enc: enc}
	s.group.run(w, s.writeGroup)
	if w.err != nil {
		return mapFull(w.err)
	}
	s.cacheWritten(b, enc, w.a.added)
	return nil
}

// applyOne plans and writes one batch in the open transaction.
func (s *Store) applyOne(st *wstmts, w *write) error {
	a := &applier{ctx: w.ctx, st: st, cache: s.cache, search: searchThreads(w.b)}
	w.a = a
	f := &facts{a: a, b: w.b, guess: true}
	if w.seed.ok {
		// AppendAt read the thread in this transaction.
		f.threads = append(f.threads, w.seed)
		if w.seed.head != "" {
			f.keep(w.seed.head, w.seedHead)
		}
	}
	// The threads whose heads move are read first, with their heads: the
	// usual batch, a commit on the head and a move to it, then needs no
	// read of the parent.
	if len(w.b.Moves) <= 4 {
		for _, m := range w.b.Moves {
			if _, _, _, err := f.Thread(w.ctx, m.Thread); err != nil {
				return err
			}
		}
	}
	p, err := store.PlanBatch(w.ctx, f, w.b)
	if err != nil && f.guessed {
		// The planner failed on facts that took the batch's commit ids to
		// be free: plan again on exact ones, for the first error a store
		// that read them all would give.
		f.guess = false
		p, err = store.PlanBatch(w.ctx, f, w.b)
	}
	if err != nil {
		return err
	}
	return a.write(p, f, w.enc)
}

// applier is one batch's writes.
type applier struct {
	ctx context.Context
	st  *wstmts
	// cache is told of the commits the batch deletes.
	cache *commitCache
	// args is the arguments of the statement being run.
	args []driver.NamedValue
	// added maps the ids of the batch's commits to their keys.
	added map[string]int64
	// unreferenced are commits whose last reference the batch dropped.
	unreferenced []int64
	// freed counts the commits the batch deleted.
	freed int
	// search is the thread to queue each commit of the batch for the
	// index under, by index ("" or nil: none).
	search []string
}

// facts answers store.PlanBatch with reads in the write transaction, and
// keeps the keys it finds for the writes that follow.
type facts struct {
	a *applier
	b *store.Batch
	// guess answers that a commit id of the batch is not stored without
	// reading: the insert finds one that is (store.Plan's step 1), and a
	// plan that fails is made again with guess off. guessed records that
	// a guess was made.
	guess, guessed bool

	// batchIDs holds the ids of a batch of many commits (a load, a
	// copy), so that inBatch is not a scan of the batch per question.
	batchIDs map[string]bool

	threads     []threadRow
	commits     map[string]int64
	checkpoints map[store.CheckpointKey]int64
}

// threadRow is what facts read of a thread.
type threadRow struct {
	id      string
	k       int64
	version int64
	head    string
	ok      bool
}

func (f *facts) thread(id string) *threadRow {
	for i := range f.threads {
		if f.threads[i].id == id {
			return &f.threads[i]
		}
	}
	return nil
}

func (f *facts) keep(id string, k int64) {
	if f.commits == nil {
		f.commits = make(map[string]int64, 4)
	}
	f.commits[id] = k
}

// Thread implements store.Facts.
func (f *facts) Thread(_ context.Context, id string) (int64, string, bool, error) {
	if t := f.thread(id); t != nil {
		return t.version, t.head, t.ok, nil
	}
	t := threadRow{id: id}
	var headK sql.NullInt64
	var head sql.NullString
	ok, err := f.a.scan(f.a.st.threadFact, []any{id}, &t.k, &t.version, &headK, &head)
	if err != nil {
		return 0, "", false, fmt.Errorf("thread %q: %w", clip(id), err)
	}
	t.ok, t.head = ok, head.String
	if ok && head.Valid {
		f.keep(head.String, headK.Int64)
	}
	f.threads = append(f.threads, t)
	return t.version, t.head, t.ok, nil
}

// inBatch reports whether id is one of the batch's commits.
func (f *facts) inBatch(id string) bool {
	if len(f.b.Commits) <= 8 {
		for _, c := range f.b.Commits {
			if c != nil && c.ID == id {
				return true
			}
		}
		return false
	}
	if f.batchIDs == nil {
		f.batchIDs = make(map[string]bool, len(f.b.Commits))
		for _, c := range f.b.Commits {
			if c != nil {
				f.batchIDs[c.ID] = true
			}
		}
	}
	return f.batchIDs[id]
}

// Commit implements store.Facts.
func (f *facts) Commit(_ context.Context, id string) (bool, error) {
	if _, ok := f.commits[id]; ok {
		return true, nil
	}
	if f.guess && f.inBatch(id) {
		f.guessed = true
		return false, nil
	}
	// A cached commit's key is checked with its id: a row deleted since
	// (by any process) and its key reused do not match.
	if k, ok := f.a.cache.key(id); ok {
		var one int64
		if found, err := f.a.scan(f.a.st.commitAt, []any{k, id}, &one); err != nil {
			return false, fmt.Errorf("commit %q: %w", clip(id), err)
		} else if found {
			f.keep(id, k)
			return true, nil
		}
	}
	var k int64
	found, err := f.a.scan(f.a.st.commitID, []any{id}, &k)
	if err != nil {
		return false, fmt.Errorf("commit %q: %w", clip(id), err)
	}
	if found {
		f.keep(id, k)
	}
	return found, nil
}

// Checkpoint implements store.Facts.
func (f *facts) Checkpoint(_ context.Context, th, name string) (string, bool, error) {
	var k int64
	var id sql.NullString
	found, err := f.a.scan(f.a.st.checkpointFact, []any{th, name}, &k, &id)
	if err != nil {
		return "", false, fmt.Errorf("checkpoint %q of thread %q: %w", clip(name), clip(th), err)
	}
	if !found {
		return "", false, nil
	}
	f.keep(id.String, k)
	if f.checkpoints == nil {
		f.checkpoints = make(map[store.CheckpointKey]int64, 1)
	}
	f.checkpoints[store.CheckpointKey{Thread: th, Name: name}] = k
	return id.String, true, nil
}

// key returns the key of a commit the plan names: one of the batch's or
// one the facts found. "" is the empty root, key 0.
func (a *applier) key(f *facts, id string) (int64, error) {
	if id == "" {
		return 0, nil
	}
	if k, ok := a.added[id]; ok {
		return k, nil
	}
	if k, ok := f.commits[id]; ok {
		return k, nil
	}
	var k int64
	if found, err := a.scan(a.st.commitID, []any{id}, &k); err != nil {
		return 0, fmt.Errorf("commit %q: %w", clip(id), err)
	} else if !found {
		// The planner saw it; the write lock kept it.
		return 0, fmt.Errorf("commit %q vanished inside the write transaction", clip(id))
	}
	return k, nil
}

// threadKey returns the key of a thread the plan names, which the facts
// read or the batch created.
func (a *applier) threadKey(f *facts, id string) (int64, error) {
	if t := f.thread(id); t != nil && t.ok {
		return t.k, nil
	}
	if _, _, _, err := f.Thread(a.ctx, id); err != nil {
		return 0, err
	}
	if t := f.thread(id); t != nil && t.ok {
		return t.k, nil
	}
	return 0, fmt.Errorf("thread %q vanished inside the write transaction", clip(id))
}

// write makes a plan's writes, in store.Plan's order. It checks no rule:
// the planner did. An insert that finds its key taken is the race the plan
// allows for (a commit id guessed free) and fails the batch.
func (a *applier) write(p *store.Plan, f *facts, enc []encodedCommit) error {
	b := p.Batch
	if len(b.Commits) > 0 {
		a.added = make(map[string]int64, len(b.Commits))
	}
	for i, c := range b.Commits {
		parent, err := a.key(f, c.Parent)
		if err != nil {
			return err
		}
		e := enc[i]
		res, err := a.exec(a.st.insertCommit, c.ID, nullKey(parent), c.Depth, p.NewRefs[i], string(c.Op), micros(c.Time), c.StateFrom,
			e.messages, e.state, e.metadata)
		if err != nil {
			return fmt.Errorf("commit %q: %w", clip(c.ID), err)
		}
		if n, err := rowsAffected(res); err != nil {
			return fmt.Errorf("commit %q: %w", clip(c.ID), err)
		} else if n != 1 {
			return fmt.Errorf("commit %q exists: %w", clip(c.ID), store.ErrConflict)
		}
		k, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("commit %q: %w", clip(c.ID), err)
		}
		a.added[c.ID] = k
		if a.search != nil && a.search[i] != "" {
			if _, err := a.exec(a.st.insertPending, k, a.search[i]); err != nil {
				return fmt.Errorf("commit %q: queue for the index: %w", clip(c.ID), err)
			}
		}
	}
	for _, r := range p.Refs {
		k, err := a.key(f, r.Commit)
		if err != nil {
			return err
		}
		if _, err := a.exec(a.st.addRefs, k, r.N); err != nil {
			return fmt.Errorf("reference commit %q: %w", clip(r.Commit), err)
		}
	}
	for _, cr := range b.Create {
		if err := a.create(f, cr); err != nil {
			return err
		}
	}
	for _, m := range b.Moves {
		if err := a.move(f, m); err != nil {
			return err
		}
	}
	for i, key := range b.DropCheckpoints {
		tk, err := a.threadKey(f, key.Thread)
		if err != nil {
			return err
		}
		if _, err := a.exec(a.st.dropCheckpoint, tk, key.Name); err != nil {
			return fmt.Errorf("drop checkpoint %q of %q: %w", clip(key.Name), clip(key.Thread), err)
		}
		k, ok := f.checkpoints[key]
		if !ok {
			if k, err = a.key(f, p.DropCommits[i]); err != nil {
				return err
			}
		}
		if err := a.release(k); err != nil {
			return err
		}
	}
	for _, cp := range b.Checkpoints {
		if err := a.checkpoint(f, cp); err != nil {
			return err
		}
	}
	for _, pr := range b.Prune {
		if err := a.prune(f, pr); err != nil {
			return err
		}
	}
	for _, d := range b.Delete {
		if err := a.delete(f, d); err != nil {
			return err
		}
	}
	return a.collect()
}

func (a *applier) create(f *facts, cr store.Creation) error {
	r := cr.Record
	entries := cr.Entries()
	keys := make([]int64, len(entries))
	for i, e := range entries {
		k, err := a.key(f, e.Commit)
		if err != nil {
			return fmt.Errorf("thread %q: %w", clip(r.ID), err)
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
		return fmt.Errorf("thread %q exists: %w", clip(r.ID), store.ErrConflict)
	}
	k, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("create thread %q: %w", clip(r.ID), err)
	}
	for i, e := range entries {
		if _, err := a.exec(a.st.insertHistory, k, e.Version, nullKey(keys[i]), string(e.Op), micros(e.Time)); err != nil {
			return fmt.Errorf("thread %q: history: %w", clip(r.ID), err)
		}
	}
	if err := a.setLabels(k, r.Labels, false); err != nil {
		return fmt.Errorf("thread %q: %w", clip(r.ID), err)
	}
	// Later changes of the batch find the thread by its key.
	if t := f.thread(r.ID); t != nil {
		*t = threadRow{id: r.ID, k: k, version: r.Version, head: r.Head, ok: true}
	} else {
		f.threads = append(f.threads, threadRow{id: r.ID, k: k, version: r.Version, head: r.Head, ok: true})
	}
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

// move writes a head's move: the thread's row by its key, and the
// history entry.
func (a *applier) move(f *facts, m store.Move) error {
	tk, err := a.threadKey(f, m.Thread)
	if err != nil {
		return err
	}
	head, err := a.key(f, m.Head)
	if err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	}
	var title string
	if m.Title != nil {
		title = *m.Title
	}
	res, err := a.exec(a.st.move, tk, m.From+1, nullKey(head), micros(m.Time), string(m.Kind),
		m.Title != nil, title, m.Labels != nil, encodeStrings(m.Labels))
	if err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	}
	if n, err := rowsAffected(res); err != nil {
		return fmt.Errorf("move thread %q: %w", clip(m.Thread), err)
	} else if n != 1 {
		return fmt.Errorf("move thread %q: no row", clip(m.Thread))
	}
	if _, err := a.exec(a.st.insertHistory, tk, m.From+1, nullKey(head), string(m.Op), micros(m.Time)); err != nil {
		return fmt.Errorf("thread %q: history: %w", clip(m.Thread), err)
	}
	if m.Labels != nil {
		if err := a.setLabels(tk, m.Labels, true); err != nil {
			return fmt.Errorf("thread %q: %w", clip(m.Thread), err)
		}
	}
	if t := f.thread(m.Thread); t != nil {
		t.version, t.head = m.From+1, m.Head
	}
	return nil
}

func (a *applier) checkpoint(f *facts, cp store.Checkpoint) error {
	tk, err := a.threadKey(f, cp.Thread)
	if err != nil {
		return err
	}
	commit, err := a.key(f, cp.Commit)
	if err != nil {
		return fmt.Errorf("checkpoint of %q: %w", clip(cp.Thread), err)
	}
	res, err := a.exec(a.st.insertCheckpoint, tk, cp.Name, commit, cp.Version, micros(cp.CreatedAt))
	if err != nil {
		return fmt.Errorf("checkpoint of %q: %w", clip(cp.Thread), err)
	}
	n, err := rowsAffected(res)
	if err != nil {
		return fmt.Errorf("checkpoint of %q: %w", clip(cp.Thread), err)
	}
	if n != 1 {
		return fmt.Errorf("checkpoint %q of thread %q exists: %w", clip(cp.Name), clip(cp.Thread), store.ErrConflict)
	}
	return nil
}

// delete removes a thread with its history, checkpoints and labels, drops
// the references they held in one statement, and then frees the commits
// that nothing reaches any more.
func (a *applier) delete(f *facts, d store.Deletion) error {
	k, err := a.threadKey(f, d.Thread)
	if err != nil {
		return err
	}
	if a.unreferenced, err = a.unrefs(a.st.unrefThread, a.unreferenced, k); err != nil {
		return fmt.Errorf("delete thread %q: references: %w", clip(d.Thread), err)
	}
	for _, st := range []wstmt{a.st.deleteHistory, a.st.deleteCheckpoints, a.st.deleteLabels, a.st.deleteThread} {
		if _, err := a.exec(st, k); err != nil {
			return fmt.Errorf("delete thread %q: %w", clip(d.Thread), err)
		}
	}
	if t := f.thread(d.Thread); t != nil {
		*t = threadRow{id: d.Thread}
	}
	return nil
}

// unrefs runs st, a statement that lets go of references and returns the
// key and count of each commit it changed, and appends to out the keys of
// those it left with none.
func (a *applier) unrefs(st wstmt, out []int64, args ...any) ([]int64, error) {
	err := a.each(st, args, func(row []driver.Value) error {
		var k, refs int64
		if err := assign(row, &k, &refs); err != nil {
			return err
		}
		if refs <= 0 {
			out = append(out, k)
		}
		return nil
	})
	return out, err
}

// prune drops the history entries of a thread below a version (retention)
// and the references they held, in one statement each; the commits left
// without references are freed with the batch's others, in collect, which
// takes their search entries with them (the commits_unindex trigger).
// Entries already gone are no error: there is nothing to drop.
func (a *applier) prune(f *facts, pr store.Prune) error {
	k, err := a.threadKey(f, pr.Thread)
	if err != nil {
		return err
	}
	if a.unreferenced, err = a.unrefs(a.st.unrefHistory, a.unreferenced, k, pr.Before); err != nil {
		return fmt.Errorf("prune thread %q: references: %w", clip(pr.Thread), err)
	}
	if _, err := a.exec(a.st.pruneHistory, k, pr.Before); err != nil {
		return fmt.Errorf("prune thread %q: %w", clip(pr.Thread), err)
	}
	return nil
}

// mapFull turns a write SQLite had no room for (SQLITE_FULL: the disk is
// full, or the database reached its max_page_count) into
// thread.ErrStorageFull; the transaction was rolled back.
func mapFull(err error) error {
	var se *msqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC) {
		return store.StorageFull("the SQLite database's disk is full", err)
	}
	return err
}

// cacheWritten caches the commits a batch wrote, decoded from what was
// stored (not the caller's values, which may differ from a read in time
// zones and number types), so that the walks that follow a write, such as
// an agent's next view, need no query.
func (s *Store) cacheWritten(b *store.Batch, enc []encodedCommit, added map[string]int64) {
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

// encodeCommits encodes the commits of b, which must not be nil.
func encodeCommits(b *store.Batch) ([]encodedCommit, error) {
	enc := make([]encodedCommit, len(b.Commits))
	for i, c := range b.Commits {
		if c == nil {
			return nil, fmt.Errorf("commit %d of the batch is nil: %w", i, store.ErrInvalid)
		}
		var err error
		if enc[i], err = encodeCommit(c); err != nil {
			return nil, err
		}
	}
	return enc, nil
}

func encodeCommit(c *thread.Commit) (encodedCommit, error) {
	msgs, err := encodeMessages(c.Messages)
	if err != nil {
		return encodedCommit{}, fmt.Errorf("commit %q: %v: %w", clip(c.ID), err, thread.ErrInvalid)
	}
	return encodedCommit{messages: msgs, state: encodeState(c.State), metadata: encodeStrings(c.Metadata)}, nil
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
	if len(a.unreferenced) >= bulkFree {
		return a.freeAll(a.unreferenced)
	}
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

// bulkFree is the number of commits left without references from which
// collect frees them a set at a time (freeAll) rather than one by one: a
// prune of a long history, or the deletion of a thread of many branches.
// A variable: tests set it to 1, to run every collection through freeAll.
var bulkFree = 32

// freeAll frees the commits ks that still have no references, and the
// commits that only they kept, a set at a time: each round deletes the set
// with the runs of ancestors only they kept (freeRuns, one statement),
// then lets go of one reference per deleted child of each ancestor where
// a run stopped (unrefAll, one statement); those left without any are the
// next round's set. The rounds are as many as the levels of shared
// ancestors freed, and the statements two per round, whatever the number
// of commits.
func (a *applier) freeAll(ks []int64) error {
	var buf []byte
	for len(ks) > 0 {
		deleted := make(map[int64]bool, len(ks))
		parents := map[int64]int64{} // k -> parent of each deleted commit
		err := a.each(a.st.freeRuns, []any{keyList(&buf, ks)}, func(row []driver.Value) error {
			var k int64
			var parent sql.NullInt64
			if err := assign(row, &k, &parent); err != nil {
				return err
			}
			deleted[k] = true
			a.freed++
			if parent.Valid {
				parents[k] = parent.Int64
			}
			a.cache.forget(k)
			return nil
		})
		if err != nil {
			return fmt.Errorf("free %d commits: %w", len(ks), err)
		}
		// Each deleted child lets go of its parent, unless the parent went
		// with it.
		drop := map[int64]int64{}
		for _, p := range parents {
			if !deleted[p] {
				drop[p]++
			}
		}
		if len(drop) == 0 {
			return nil
		}
		pairs := make([][2]int64, 0, len(drop))
		for p, n := range drop {
			pairs = append(pairs, [2]int64{p, n})
		}
		if ks, err = a.unrefs(a.st.unrefAll, ks[:0], pairList(&buf, pairs)); err != nil {
			return fmt.Errorf("unref %d commits: %w", len(drop), err)
		}
	}
	return nil
}

// pairList writes ps as a JSON array of pairs into *buf, for json_each.
func pairList(buf *[]byte, ps [][2]int64) string {
	b := append((*buf)[:0], '[')
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, p[0], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, p[1], 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	*buf = b
	return string(b)
}

// keyList writes ks as a JSON array into *buf, for json_each.
func keyList(buf *[]byte, ks []int64) string {
	b := append((*buf)[:0], '[')
	for i, k := range ks {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, k, 10)
	}
	b = append(b, ']')
	*buf = b
	return string(b)
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
			a.freed++
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

	threadFact, commitID, commitAt, checkpointFact              wstmt
	addRefs, refs, unref, insertCommit, freeRun                 wstmt
	insertThread, move, insertHistory                           wstmt
	deleteLabels, insertLabel                                   wstmt
	dropCheckpoint, insertCheckpoint                            wstmt
	unrefThread, deleteHistory, deleteCheckpoints, deleteThread wstmt
	unrefHistory, pruneHistory, freeRuns, unrefAll              wstmt
	freelistCount, pageCount, incrementalVacuum                 wstmt
	insertPending, claimPending, insertEntry, insertSearch      wstmt
	savepoint, release, rollbackTo, appendRecord                wstmt
}

func (s *wstmts) prepare(ctx context.Context, dc driver.ConnPrepareContext) error {
	for _, p := range []struct {
		st *wstmt
		q  string
	}{
		// The facts for store.PlanBatch.
		{&s.threadFact, `SELECT t.k, t.version, t.head, c.id FROM threads t LEFT JOIN commits c ON c.k = t.head WHERE t.id = ?`},
		{&s.commitID, `SELECT k FROM commits WHERE id = ?`},
		{&s.commitAt, `SELECT 1 FROM commits WHERE k = ? AND id = ?`},
		{&s.checkpointFact, `SELECT cp.commit_key, c.id FROM threads t
			JOIN checkpoints cp ON cp.thread = t.k JOIN commits c ON c.k = cp.commit_key
			WHERE t.id = ? AND cp.name = ?`},
		{&s.addRefs, `UPDATE commits SET refs = refs + ?2 WHERE k = ?1`},
		{&s.refs, `SELECT refs FROM commits WHERE k = ?`},
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
		// freeRuns is freeRun from each of a JSON array of commits that
		// have no references left (a commit with one reference is on one
		// run at most: the runs do not meet).
		{&s.freeRuns, `WITH RECURSIVE run(k, parent) AS (
				SELECT k, parent FROM commits WHERE k IN (SELECT value FROM json_each(?1)) AND refs <= 0
				UNION ALL
				SELECT c.k, c.parent FROM run JOIN commits c ON c.k = run.parent WHERE c.refs = 1
			)
			DELETE FROM commits WHERE k IN (SELECT k FROM run) RETURNING k, parent`},
		// unrefAll drops references of many commits: ?1 is a JSON array of
		// pairs, a commit's key and the number to drop.
		{&s.unrefAll, `UPDATE commits SET refs = commits.refs - d.n
			FROM (SELECT json_extract(value, '$[0]') AS k, json_extract(value, '$[1]') AS n FROM json_each(?1)) AS d
			WHERE commits.k = d.k
			RETURNING commits.k, commits.refs`},
		{&s.insertThread, `INSERT INTO threads (id, tenant, kind, title, labels, head, version, created, updated,
			forked_thread, forked_commit, forked_message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`},
		{&s.move, `UPDATE threads SET version = ?2, head = ?3, updated = ?4,
			kind = CASE WHEN ?5 = '' THEN kind ELSE ?5 END,
			title = CASE WHEN ?6 THEN ?7 ELSE title END,
			labels = CASE WHEN ?8 THEN ?9 ELSE labels END
			WHERE k = ?1`},
		{&s.insertHistory, `INSERT INTO history (thread, version, commit_key, op, time) VALUES (?, ?, ?, ?, ?)`},
		{&s.deleteLabels, `DELETE FROM labels WHERE thread = ?`},
		{&s.insertLabel, `INSERT INTO labels (thread, key, value) VALUES (?, ?, ?)`},
		{&s.dropCheckpoint, `DELETE FROM checkpoints WHERE thread = ? AND name = ?`},
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
		// A prune: the entries below ?2 drop one reference each, in one
		// statement (the rows that reach 0 come back), then go.
		{&s.unrefHistory, `UPDATE commits SET refs = commits.refs - d.n
			FROM (SELECT commit_key AS c, count(*) AS n FROM history
				WHERE thread = ?1 AND version < ?2 AND commit_key IS NOT NULL
				GROUP BY commit_key) AS d
			WHERE commits.k = d.c
			RETURNING commits.k, commits.refs`},
		{&s.pruneHistory, `DELETE FROM history WHERE thread = ?1 AND version < ?2`},
		{&s.deleteCheckpoints, `DELETE FROM checkpoints WHERE thread = ?`},
		{&s.deleteThread, `DELETE FROM threads WHERE k = ?`},
		{&s.insertPending, qInsertPending},
		{&s.claimPending, qClaimPending},
		{&s.insertEntry, qInsertEntry},
		{&s.insertSearch, qInsertSearch},
		// A group of batches in one transaction gives each a savepoint, so
		// that one that fails is undone alone (group.go).
		{&s.appendRecord, `SELECT ` + recordCols + `, t.k, coalesce(t.head, 0), coalesce(h.depth, 0), h.state_from
			FROM threads t LEFT JOIN commits h ON h.k = t.head WHERE t.id = ?`},
		{&s.freelistCount, `PRAGMA freelist_count`},
		{&s.pageCount, `PRAGMA page_count`},
		{&s.incrementalVacuum, `PRAGMA incremental_vacuum`},
		{&s.savepoint, `SAVEPOINT batch`},
		{&s.release, `RELEASE batch`},
		{&s.rollbackTo, `ROLLBACK TO batch`},
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
