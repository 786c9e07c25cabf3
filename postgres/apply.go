package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Apply implements store.Store. The batch's rules are package store's
// planner's (store.PlanBatch); the store reads the facts it needs and
// writes the plan it returns, in one transaction of two round trips:
//
//  1. BEGIN; lock the threads the batch names (FOR NO KEY UPDATE, in id
//     order) and read their versions and heads, lock the stored commits it
//     names (in descending seq order, the order the garbage collector
//     walks in) and read the checkpoints it names (Store.lock); take the
//     seqs of the new commits and threads. Nothing of it can change while
//     the locks are held; the planner decides on it.
//  2. In one pipeline, the plan (facts.writes): insert the commits with
//     their reference counts, count the references the batch adds to
//     stored commits, create and move threads with their history entries,
//     drop and add checkpoints, drop references, prune histories and
//     delete threads (loom_unref, loom_prune and loom_delete_threads free
//     the commits nothing reaches any more), queue the new commits for
//     the search index (loom_search_pending, see schemaV6); COMMIT.
//
// The most common batch, one commit on a thread and the move to it, is
// one statement instead (see applyAppend).
//
// Once it committed, the batch's changes are queued to be notified, soon
// after Apply returns, by the Store's background sender (see Watch).
//
// A transaction that the server aborts for a deadlock or a serialization
// failure has applied nothing and runs again, up to Options.Retries times;
// after that Apply returns thread.ErrConflict. A concurrent writer that
// makes the same commit, thread or checkpoint makes this one fail with
// thread.ErrConflict.
func (s *Store) Apply(ctx context.Context, b *store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validate(b); err != nil {
		return err
	}
	if len(b.Commits)+len(b.Create)+len(b.Moves)+len(b.DropCheckpoints)+len(b.Checkpoints)+len(b.Prune)+len(b.Delete) == 0 {
		return nil
	}
	fast := fastAppend(b)
	return s.retry(ctx, "apply", func(ctx context.Context) error {
		if fast {
			if done, err := s.applyAppend(ctx, b); done || err != nil {
				return err
			}
		}
		return s.apply(ctx, b)
	})
}

// retry runs a transaction until it is not aborted for a deadlock, a
// serialization failure or a lock wait past the store's Timeout, at most
// Options.Retries more times. ctx is the caller's: each run bounds its own
// round trips (Store.acquire, Store.boundWrite, Store.committing).
func (s *Store) retry(ctx context.Context, what string, tx func(ctx context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := tx(ctx)
		if err == nil || !retryable(err) || s.retries < 0 || attempt >= s.retries {
			return mapError(ctx, what, err)
		}
		// Back off a little, at random, so that the transactions that
		// deadlocked do not meet again.
		t := time.NewTimer(time.Duration(rand.Int64N(int64(attempt+1) * int64(2*time.Millisecond))))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// validate checks what the server can hold: text without NUL, keys short
// enough for an index. The batch's rules are the planner's.
func validate(b *store.Batch) error {
	text := func(what, s string) error {
		if !validText(s) {
			return fmt.Errorf("%s %q: NUL or not UTF-8: %w", what, clip(s), thread.ErrInvalid)
		}
		return nil
	}
	key := func(what, s string) error {
		if !validKey(s) {
			return fmt.Errorf("%s %q: NUL, not UTF-8 or over %d bytes: %w", what, clip(s), maxKey, thread.ErrInvalid)
		}
		return nil
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range b.Commits {
		if c == nil {
			continue // the planner's to refuse
		}
		add(key("commit id", c.ID))
		add(text("commit op", string(c.Op)))
		add(text("state from", c.StateFrom))
		for k, v := range c.Metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				add(fmt.Errorf("commit %q: metadata %q: not UTF-8: %w", clip(c.ID), clip(k), thread.ErrInvalid))
			}
		}
		for k := range c.State {
			if !utf8.ValidString(k) {
				add(fmt.Errorf("commit %q: state key %q: not UTF-8: %w", clip(c.ID), clip(k), thread.ErrInvalid))
			}
		}
	}
	labels := func(l map[string]string) {
		for k, v := range l {
			add(text("label key", k))
			add(text("label", v))
		}
	}
	for _, cr := range b.Create {
		r := cr.Record
		if r == nil {
			continue // the planner's to refuse
		}
		add(key("thread id", r.ID))
		add(key("tenant", r.Tenant))
		add(text("kind", string(r.Kind)))
		add(text("title", r.Title))
		add(text("op", string(cr.Op)))
		add(text("forked from", r.ForkedFrom.Thread))
		add(text("forked from", r.ForkedFrom.Commit))
		add(text("forked from", r.ForkedFrom.Message))
		labels(r.Labels)
		for _, e := range cr.History {
			add(text("op", string(e.Op)))
		}
	}
	for _, m := range b.Moves {
		add(text("op", string(m.Op)))
		add(text("kind", string(m.Kind)))
		if m.Title != nil {
			add(text("title", *m.Title))
		}
		labels(m.Labels)
	}
	for _, cp := range b.Checkpoints {
		add(key("checkpoint name", cp.Name))
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// facts is what the first round trip read, under the locks: the planner's
// facts (store.MapFacts), and the seqs the writes refer to rows by.
type facts struct {
	store.MapFacts
	threadSeqs                   map[string]int64 // of the stored threads
	commitSeqs                   map[string]int64 // of the stored commits read, and the checkpoints'
	newCommitSeqs, newThreadSeqs []int64
}

// apply runs the batch's transaction once.
func (s *Store) apply(ctx context.Context, b *store.Batch) (err error) {
	pc, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer rollback(ctx, conn)

	wctx, cancel := s.boundWrite(ctx)
	defer cancel()
	f, err := s.lock(wctx, conn, b, true)
	if err != nil {
		return err
	}
	p, err := store.PlanBatch(ctx, &f.MapFacts, b)
	if err != nil {
		return err
	}
	w, err := f.writes(p, s.noIndex)
	if err != nil {
		return err
	}
	w.q.Queue("COMMIT")
	// What is decided is written even if the caller goes away: a cancel
	// during COMMIT would leave the caller not knowing whether it stuck.
	cctx, cancel := s.committing(ctx)
	defer cancel()
	if err := w.run(cctx, conn); err != nil {
		return err
	}
	s.notify(s.notes(b))
	s.kickFold()
	return nil
}

// rollback rolls back a failed transaction on conn; a connection that
// cannot be cleaned up is closed, and the pool drops it.
func rollback(ctx context.Context, conn *pgx.Conn) {
	if conn.PgConn().TxStatus() != 'I' && !conn.IsClosed() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
			conn.Close(rctx)
		}
	}
}

// lock is the first round trip: BEGIN and the lock timeout (unless begin
// is false: the transaction is open), then what the planner needs of b
// (store.NeedsOf), read under locks that hold until the transaction ends:
// the threads (FOR NO KEY UPDATE, in id order) and then, in a statement of
// its own that sees what the writers before committed, their versions
// and heads; the stored commits (FOR NO KEY UPDATE, highest seq first, the
// order loom_unref frees in, so that none is freed while the batch refers
// to it); the checkpoints (their threads are locked); and the seqs of the
// new commits and threads. What is not read does not exist.
func (s *Store) lock(ctx context.Context, conn *pgx.Conn, b *store.Batch, begin bool) (*facts, error) {
	needs := store.NeedsOf(b)
	// An id no column can hold is not stored: it is left out of the reads.
	var threadIDs, commitIDs, cpThreads, cpNames []string
	for _, id := range needs.Threads {
		if validKey(id) {
			threadIDs = append(threadIDs, id)
		}
	}
	for _, id := range needs.Commits {
		if validKey(id) {
			commitIDs = append(commitIDs, id)
		}
	}
	for _, k := range needs.Checkpoints {
		if validKey(k.Thread) && validKey(k.Name) {
			cpThreads, cpNames = append(cpThreads, k.Thread), append(cpNames, k.Name)
		}
	}
	slices.Sort(threadIDs)

	var q pgx.Batch
	lockTimeout := false
	if begin {
		q.Queue("BEGIN")
		lockTimeout = s.queueLockTimeout(&q)
	}
	if len(threadIDs) > 0 {
		q.Queue(`SELECT seq FROM loom_threads WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, threadIDs)
		q.Queue(`SELECT t.id, t.seq, t.version, coalesce(c.id, '')
			FROM loom_threads t LEFT JOIN loom_commits c ON c.seq = t.head WHERE t.id = ANY($1)`, threadIDs)
	}
	if len(commitIDs) > 0 {
		q.Queue(`SELECT id, seq FROM loom_commits WHERE id = ANY($1) ORDER BY seq DESC FOR NO KEY UPDATE`, commitIDs)
	}
	if len(cpThreads) > 0 {
		q.Queue(`SELECT t.id, k.name, c.id, c.seq FROM loom_checkpoints k JOIN loom_threads t ON t.seq = k.thread
				JOIN loom_commits c ON c.seq = k.commit_seq
			WHERE t.id = ANY($1) AND k.name = ANY($2)`, cpThreads, cpNames)
	}
	if n := len(b.Commits); n > 0 {
		q.Queue(`SELECT nextval('loom_commit_seq') FROM generate_series(1, $1)`, n)
	}
	if n := len(b.Create); n > 0 {
		q.Queue(`SELECT nextval('loom_thread_seq') FROM generate_series(1, $1)`, n)
	}

	f := &facts{
		MapFacts: store.MapFacts{
			Threads:     make(map[string]store.ThreadFact, len(threadIDs)),
			Commits:     make(map[string]bool, len(commitIDs)),
			Checkpoints: map[store.CheckpointKey]string{},
		},
		threadSeqs: make(map[string]int64, len(threadIDs)),
		commitSeqs: make(map[string]int64, len(commitIDs)),
	}
	br := conn.SendBatch(ctx, &q)
	defer br.Close()
	for range btoi(begin) + btoi(lockTimeout) {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	if len(threadIDs) > 0 {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
		var (
			id, head     string
			seq, version int64
		)
		_, err := pgx.ForEachRow(mustQuery(br), []any{&id, &seq, &version, &head}, func() error {
			f.Threads[id] = store.ThreadFact{Version: version, Head: head}
			f.threadSeqs[id] = seq
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(commitIDs) > 0 {
		var (
			id  string
			seq int64
		)
		_, err := pgx.ForEachRow(mustQuery(br), []any{&id, &seq}, func() error {
			f.Commits[id] = true
			f.commitSeqs[id] = seq
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(cpThreads) > 0 {
		var (
			k      store.CheckpointKey
			commit string
			seq    int64
		)
		_, err := pgx.ForEachRow(mustQuery(br), []any{&k.Thread, &k.Name, &commit, &seq}, func() error {
			f.Checkpoints[k] = commit
			f.commitSeqs[commit] = seq
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	seqs := func(n int) ([]int64, error) {
		if n == 0 {
			return nil, nil
		}
		rows := mustQuery(br)
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	var err error
	if f.newCommitSeqs, err = seqs(len(b.Commits)); err != nil {
		return nil, err
	}
	if f.newThreadSeqs, err = seqs(len(b.Create)); err != nil {
		return nil, err
	}
	return f, br.Close()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mustQuery returns the rows of the batch's next query; an error comes out
// of the rows.
func mustQuery(br pgx.BatchResults) pgx.Rows {
	rows, _ := br.Query()
	return rows
}

// writes is the second round trip: a plan, in statements.
type writes struct {
	q pgx.Batch
}

// writes queues the statements of p, in the order store.Plan gives, with
// the rows named by the seqs f read and took; COMMIT is the caller's. It
// checks nothing: p is decided. Unless noIndex, the new commits the batch
// commits for a thread are queued for the search index (schemaV6).
func (f *facts) writes(p *store.Plan, noIndex bool) (*writes, error) {
	b := p.Batch
	w := new(writes)
	newCommit := make(map[string]int64, len(b.Commits))
	for i, c := range b.Commits {
		newCommit[c.ID] = f.newCommitSeqs[i]
	}
	newThread := make(map[string]int64, len(b.Create))
	for i, cr := range b.Create {
		newThread[cr.Record.ID] = f.newThreadSeqs[i]
	}
	commitSeq := func(id string) int64 {
		if id == "" {
			return 0
		}
		if seq, ok := newCommit[id]; ok {
			return seq
		}
		return f.commitSeqs[id]
	}
	threadSeq := func(id string) int64 {
		if seq, ok := newThread[id]; ok {
			return seq
		}
		return f.threadSeqs[id]
	}

	// 1. The new commits, with the references the batch makes to them.
	if n := len(b.Commits); n > 0 {
		var (
			ids, ops, stateFrom []string
			parents, depths     = make([]int64, n), make([]int64, n)
			ats                 = make([]time.Time, n)
			msgs, states, metas = make([][]byte, n), make([][]byte, n), make([][]byte, n)
		)
		for i, c := range b.Commits {
			ids = append(ids, c.ID)
			ops = append(ops, string(c.Op))
			stateFrom = append(stateFrom, c.StateFrom)
			parents[i], depths[i], ats[i] = commitSeq(c.Parent), c.Depth, c.Time
			var err error
			if msgs[i], err = encodeMessages(c.Messages); err != nil {
				return nil, fmt.Errorf("commit %q: %w", clip(c.ID), err)
			}
			if states[i], err = encodeState(c.State); err != nil {
				return nil, fmt.Errorf("commit %q: %w", clip(c.ID), err)
			}
			if metas[i], err = encodeMeta(c.Metadata); err != nil {
				return nil, fmt.Errorf("commit %q: %w", clip(c.ID), err)
			}
		}
		w.q.Queue(`INSERT INTO loom_commits (seq, id, parent, depth, refs, op, at, state_from, messages, state, metadata)
			SELECT s, i, nullif(p, 0), d, r, o, a, f, m, st, md
			FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[],
				$7::timestamptz[], $8::text[], $9::bytea[], $10::bytea[], $11::bytea[]) AS u(s, i, p, d, r, o, a, f, m, st, md)`,
			f.newCommitSeqs, ids, parents, depths, p.NewRefs, ops, ats, stateFrom, msgs, states, metas)
		// Their pending rows, for the search index (schemaV6), under the
		// threads the batch commits them for.
		if !noIndex {
			var pend pendingRows
			owners := b.CommitThreads()
			for i, c := range b.Commits {
				if key, ok := owners[c.ID]; ok && hasWords(c.Messages) {
					pend.commits = append(pend.commits, f.newCommitSeqs[i])
					pend.threads = append(pend.threads, key)
				}
			}
			pend.queue(&w.q)
		}
	}
	// 2. The references to stored commits.
	if len(p.Refs) > 0 {
		seqs := make([]int64, 0, len(p.Refs))
		ns := make([]int64, 0, len(p.Refs))
		for _, r := range p.Refs {
			seqs, ns = append(seqs, commitSeq(r.Commit)), append(ns, r.N)
		}
		w.q.Queue(`UPDATE loom_commits c SET refs = c.refs + u.n FROM unnest($1::bigint[], $2::bigint[]) AS u(s, n) WHERE c.seq = u.s`, seqs, ns)
	}
	var hist struct {
		thread, version, commit []int64
		op                      []string
		at                      []time.Time
	}
	addEntry := func(threadSeq int64, e thread.HistoryEntry) {
		hist.thread = append(hist.thread, threadSeq)
		hist.version = append(hist.version, e.Version)
		hist.commit = append(hist.commit, commitSeq(e.Commit))
		hist.op = append(hist.op, string(e.Op))
		hist.at = append(hist.at, e.Time)
	}
	// 3. New threads, with their history.
	for i, cr := range b.Create {
		r := cr.Record
		w.q.Queue(`INSERT INTO loom_threads (seq, id, tenant, kind, title, labels, head, version, created_at, updated_at,
				forked_thread, forked_commit, forked_message)
			VALUES ($1, $2, $3, $4, $5, $6::jsonb, nullif($7, 0), $8, $9, $10, $11, $12, $13)`,
			f.newThreadSeqs[i], r.ID, r.Tenant, string(r.Kind), r.Title, encodeLabels(r.Labels), commitSeq(r.Head), r.Version,
			r.CreatedAt, r.UpdatedAt, r.ForkedFrom.Thread, r.ForkedFrom.Commit, r.ForkedFrom.Message)
		for _, e := range cr.Entries() {
			addEntry(f.newThreadSeqs[i], e)
		}
	}
	// 4. Moves, with their history entries.
	for _, m := range b.Moves {
		var title, labels *string
		if m.Title != nil {
			title = m.Title
		}
		if m.Labels != nil {
			l := encodeLabels(m.Labels)
			labels = &l
		}
		w.q.Queue(`UPDATE loom_threads SET version = version + 1, head = nullif($2, 0), updated_at = $3,
				kind = coalesce(nullif($4, ''), kind), title = coalesce($5, title), labels = coalesce($6::jsonb, labels)
			WHERE seq = $1`,
			threadSeq(m.Thread), commitSeq(m.Head), m.Time, string(m.Kind), title, labels)
		addEntry(threadSeq(m.Thread), m.Entry())
	}
	if len(hist.thread) > 0 {
		w.q.Queue(`INSERT INTO loom_history (thread, version, commit_seq, op, at)
			SELECT t, v, nullif(c, 0), o, a FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[]) AS u(t, v, c, o, a)`,
			hist.thread, hist.version, hist.commit, hist.op, hist.at)
	}
	// 5. Dropped checkpoints, then 6. new ones.
	var unref []int64
	if len(b.DropCheckpoints) > 0 {
		var threads []int64
		var names []string
		for i, k := range b.DropCheckpoints {
			threads, names = append(threads, threadSeq(k.Thread)), append(names, k.Name)
			unref = append(unref, commitSeq(p.DropCommits[i]))
		}
		w.q.Queue(`DELETE FROM loom_checkpoints k USING unnest($1::bigint[], $2::text[]) AS u(t, n) WHERE k.thread = u.t AND k.name = u.n`, threads, names)
	}
	if len(b.Checkpoints) > 0 {
		var (
			threads, commits, versions []int64
			names                      []string
			ats                        []time.Time
		)
		for _, cp := range b.Checkpoints {
			threads = append(threads, threadSeq(cp.Thread))
			names = append(names, cp.Name)
			commits = append(commits, commitSeq(cp.Commit))
			versions = append(versions, cp.Version)
			ats = append(ats, cp.CreatedAt)
		}
		w.q.Queue(`INSERT INTO loom_checkpoints (thread, name, commit_seq, version, created_at)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[])`,
			threads, names, commits, versions, ats)
	}
	// The references the dropped checkpoints held go after every new one
	// was counted; 7. prunes, 8. deletions, and 9. the commits they free
	// (loom_unref, loom_prune, loom_delete_threads).
	if len(unref) > 0 {
		w.q.Queue(`SELECT loom_unref($1::bigint[])`, unref)
	}
	if len(b.Prune) > 0 {
		threads := make([]int64, 0, len(b.Prune))
		befores := make([]int64, 0, len(b.Prune))
		for _, pr := range b.Prune {
			threads, befores = append(threads, threadSeq(pr.Thread)), append(befores, pr.Before)
		}
		w.q.Queue(`SELECT loom_prune($1::bigint[], $2::bigint[])`, threads, befores)
	}
	if len(b.Delete) > 0 {
		var threads []int64
		for _, d := range b.Delete {
			threads = append(threads, threadSeq(d.Thread))
		}
		w.q.Queue(`SELECT loom_delete_threads($1::bigint[])`, threads)
	}
	return w, nil
}

// run sends the writes and COMMIT in one pipeline and returns the first
// error.
func (w *writes) run(ctx context.Context, conn *pgx.Conn) error {
	br := conn.SendBatch(ctx, &w.q)
	var first error
	for i := range w.q.Len() {
		tag, err := br.Exec()
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if i == w.q.Len()-1 && first == nil && tag.String() != "COMMIT" {
			first = fmt.Errorf("commit: the server answered %q", tag.String())
		}
	}
	if err := br.Close(); first == nil {
		first = err
	}
	return first
}
