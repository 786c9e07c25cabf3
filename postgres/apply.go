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
)

// Apply implements thread.Store. A batch is one transaction of two round
// trips:
//
//  1. BEGIN; lock the batch's threads (FOR NO KEY UPDATE, in id order, by
//     loom_lock_threads, which fails a move from a stale version at once and
//     then holds no lock, so that writers racing on one thread do not queue
//     behind the losers) and, unless a thread was stale, the stored commits
//     it refers to (in descending seq order, the order the garbage
//     collector walks in); read the checkpoints it names; take the seqs of
//     the new commits and threads.
//     Every precondition is then checked against what was read, as the
//     memory store does: nothing of it can change while the locks are held.
//  2. In one pipeline: insert the commits with their reference counts,
//     count the references the batch adds to stored commits, create and
//     move threads with their history entries, drop and add checkpoints,
//     drop references and delete threads (loom_unref and
//     loom_delete_threads free the commits nothing reaches any more),
//     queue the new commits for the search index (loom_search_pending,
//     see schemaV6); COMMIT.
//
// Once it committed, the batch's changes are queued to be notified, soon
// after Apply returns, by the Store's background sender (see Watch).
//
// A transaction that the server aborts for a deadlock or a serialization
// failure has applied nothing and runs again, up to Options.Retries times;
// after that Apply returns thread.ErrConflict. A concurrent writer that
// makes the same commit, thread or checkpoint makes this one fail with
// thread.ErrConflict.
func (s *Store) Apply(ctx context.Context, b *thread.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validate(b); err != nil {
		return err
	}
	if len(b.Commits)+len(b.Create)+len(b.Moves)+len(b.DropCheckpoints)+len(b.Checkpoints)+len(b.Delete) == 0 {
		return nil
	}
	apply := s.apply
	if fastAppend(b) {
		apply = s.applyAppend
	}
	return s.retry(ctx, "apply", func(ctx context.Context) error { return apply(ctx, b) })
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

// validate checks what needs no database: text the server can hold, keys
// short enough for an index.
func validate(b *thread.Batch) error {
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
			return fmt.Errorf("nil commit: %w", thread.ErrInvalid)
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
		if r == nil || r.ID == "" {
			return fmt.Errorf("create: no thread id: %w", thread.ErrInvalid)
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

// snapshot is what the first round trip read, under the locks.
type snapshot struct {
	threads                      map[string]threadRow           // the batch's stored threads, locked
	commits                      map[string]int64               // seqs of the stored commits it refers to, locked
	cps                          map[thread.CheckpointKey]int64 // its stored checkpoints, with their commits' seqs
	newCommitSeqs, newThreadSeqs []int64
}

type threadRow struct {
	seq, version int64
}

// apply runs the batch's transaction once.
func (s *Store) apply(ctx context.Context, b *thread.Batch) (err error) {
	pc, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer rollback(ctx, conn)

	wctx, cancel := s.boundWrite(ctx)
	defer cancel()
	snap, err := s.lock(wctx, conn, b, true)
	if err != nil {
		return err
	}
	w, err := check(b, snap, s.noIndex)
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
// is false: the transaction is open), the locks and the reads.
func (s *Store) lock(ctx context.Context, conn *pgx.Conn, b *thread.Batch, begin bool) (*snapshot, error) {
	var threadIDs, commitIDs, cpThreads, cpNames []string
	addThread := func(id string) {
		if validKey(id) {
			threadIDs = append(threadIDs, id)
		}
	}
	addCommit := func(id string) {
		if id != "" && validKey(id) {
			commitIDs = append(commitIDs, id)
		}
	}
	for _, c := range b.Commits {
		addCommit(c.ID)
		addCommit(c.Parent)
	}
	for _, cr := range b.Create {
		addThread(cr.Record.ID)
		addCommit(cr.Record.Head)
		for _, e := range cr.History {
			addCommit(e.Commit)
		}
	}
	for _, m := range b.Moves {
		addThread(m.Thread)
		addCommit(m.Head)
	}
	for _, k := range b.DropCheckpoints {
		addThread(k.Thread)
		if validKey(k.Thread) && validKey(k.Name) {
			cpThreads, cpNames = append(cpThreads, k.Thread), append(cpNames, k.Name)
		}
	}
	for _, cp := range b.Checkpoints {
		addThread(cp.Thread)
		addCommit(cp.Commit)
		if validKey(cp.Thread) {
			cpThreads, cpNames = append(cpThreads, cp.Thread), append(cpNames, cp.Name)
		}
	}
	for _, d := range b.Delete {
		addThread(d.Thread)
	}
	// The versions the batch expects of stored threads: the first move's
	// From, or a deletion's Version, of each thread it does not create.
	var (
		wantIDs      []string
		wantVersions []int64
		seen         = map[string]bool{}
	)
	for _, cr := range b.Create {
		seen[cr.Record.ID] = true
	}
	for _, m := range b.Moves {
		if !seen[m.Thread] && validKey(m.Thread) {
			wantIDs, wantVersions = append(wantIDs, m.Thread), append(wantVersions, m.From)
		}
		seen[m.Thread] = true
	}
	for _, d := range b.Delete {
		if !seen[d.Thread] && d.Version != 0 && validKey(d.Thread) {
			wantIDs, wantVersions = append(wantIDs, d.Thread), append(wantVersions, d.Version)
		}
		seen[d.Thread] = true
	}
	slices.Sort(threadIDs)
	threadIDs = slices.Compact(threadIDs)
	slices.Sort(commitIDs)
	commitIDs = slices.Compact(commitIDs)

	var q pgx.Batch
	lockTimeout := false
	if begin {
		q.Queue("BEGIN")
		lockTimeout = s.queueLockTimeout(&q)
	}
	if len(threadIDs) > 0 {
		q.Queue(`SELECT o_id, o_seq, o_version, o_stale FROM loom_lock_threads($1, $2, $3)`, threadIDs, wantIDs, wantVersions)
	}
	if len(commitIDs) > 0 {
		// The commits are locked only if no thread is stale: the threads
		// are locked by then, so their versions are those
		// loom_lock_threads saw, and a batch that lost the version check
		// takes no lock that would make others queue behind it.
		q.Queue(`SELECT id, seq FROM loom_commits
			WHERE id = ANY($1) AND NOT EXISTS (SELECT 1 FROM loom_threads t JOIN unnest($2::text[], $3::bigint[]) AS w(id, v) ON t.id = w.id
				WHERE t.version <> w.v)
			ORDER BY seq DESC FOR NO KEY UPDATE OF loom_commits`, commitIDs, wantIDs, wantVersions)
	}
	if len(cpThreads) > 0 {
		q.Queue(`SELECT t.id, k.name, k.commit_seq FROM loom_checkpoints k JOIN loom_threads t ON t.seq = k.thread
			WHERE t.id = ANY($1) AND k.name = ANY($2)`, cpThreads, cpNames)
	}
	if n := len(b.Commits); n > 0 {
		q.Queue(`SELECT nextval('loom_commit_seq') FROM generate_series(1, $1)`, n)
	}
	if n := len(b.Create); n > 0 {
		q.Queue(`SELECT nextval('loom_thread_seq') FROM generate_series(1, $1)`, n)
	}

	snap := &snapshot{threads: map[string]threadRow{}, commits: map[string]int64{}, cps: map[thread.CheckpointKey]int64{}}
	br := conn.SendBatch(ctx, &q)
	defer br.Close()
	if begin {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	if lockTimeout {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	if len(threadIDs) > 0 {
		var (
			id    string
			r     threadRow
			stale bool
			moved error
		)
		_, err := pgx.ForEachRow(mustQuery(br), []any{&id, &r.seq, &r.version, &stale}, func() error {
			if stale && moved == nil {
				moved = fmt.Errorf("thread %q is at version %d, not the version the batch expects: %w", clip(id), r.version, thread.ErrConflict)
			}
			snap.threads[id] = r
			return nil
		})
		if err != nil {
			return nil, err
		}
		if moved != nil {
			return nil, moved
		}
	}
	if len(commitIDs) > 0 {
		var (
			id  string
			seq int64
		)
		_, err := pgx.ForEachRow(mustQuery(br), []any{&id, &seq}, func() error {
			snap.commits[id] = seq
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(cpThreads) > 0 {
		var (
			k   thread.CheckpointKey
			seq int64
		)
		_, err := pgx.ForEachRow(mustQuery(br), []any{&k.Thread, &k.Name, &seq}, func() error {
			snap.cps[k] = seq
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
	if snap.newCommitSeqs, err = seqs(len(b.Commits)); err != nil {
		return nil, err
	}
	if snap.newThreadSeqs, err = seqs(len(b.Create)); err != nil {
		return nil, err
	}
	return snap, br.Close()
}

// mustQuery returns the rows of the batch's next query; an error comes out
// of the rows.
func mustQuery(br pgx.BatchResults) pgx.Rows {
	rows, _ := br.Query()
	return rows
}

// writes is the second round trip, decided by check.
type writes struct {
	q pgx.Batch
}

// check checks every precondition of b against snap, as the memory store's
// check does against its maps, and plans the writes.
func check(b *thread.Batch, snap *snapshot, noIndex bool) (*writes, error) {
	newCommits := make(map[string]int, len(b.Commits))
	commitExists := func(id string) bool {
		if id == "" {
			return true
		}
		if _, ok := snap.commits[id]; ok {
			return true
		}
		_, ok := newCommits[id]
		return ok
	}
	for i, c := range b.Commits {
		_, stored := snap.commits[c.ID]
		if _, dup := newCommits[c.ID]; c.ID == "" || stored || dup {
			return nil, fmt.Errorf("commit %q exists: %w", clip(c.ID), thread.ErrConflict)
		}
		if !commitExists(c.Parent) {
			return nil, fmt.Errorf("commit %q: parent %q: %w", clip(c.ID), clip(c.Parent), thread.ErrNotFound)
		}
		newCommits[c.ID] = i
	}
	// Threads as the batch leaves them.
	version := map[string]int64{}
	created := map[string]int64{} // seqs of the threads the batch creates
	lookup := func(id string) (int64, bool) {
		if v, ok := version[id]; ok {
			return v, true
		}
		if t, ok := snap.threads[id]; ok {
			return t.version, true
		}
		return 0, false
	}
	threadSeq := func(id string) int64 {
		if seq, ok := created[id]; ok {
			return seq
		}
		return snap.threads[id].seq
	}
	for i, cr := range b.Create {
		r := cr.Record
		if _, ok := lookup(r.ID); ok {
			return nil, fmt.Errorf("thread %q exists: %w", clip(r.ID), thread.ErrConflict)
		}
		if err := cr.Validate(); err != nil {
			return nil, err
		}
		if !commitExists(r.Head) {
			return nil, fmt.Errorf("thread %q: head %q: %w", clip(r.ID), clip(r.Head), thread.ErrNotFound)
		}
		for _, e := range cr.History {
			if !commitExists(e.Commit) {
				return nil, fmt.Errorf("thread %q: history commit %q: %w", clip(r.ID), clip(e.Commit), thread.ErrNotFound)
			}
		}
		version[r.ID] = r.Version
		created[r.ID] = snap.newThreadSeqs[i]
	}
	for _, m := range b.Moves {
		v, ok := lookup(m.Thread)
		if !ok {
			return nil, fmt.Errorf("thread %q: %w", clip(m.Thread), thread.ErrNotFound)
		}
		if v != m.From {
			return nil, fmt.Errorf("thread %q is at version %d, not %d: %w", clip(m.Thread), v, m.From, thread.ErrConflict)
		}
		if !commitExists(m.Head) {
			return nil, fmt.Errorf("thread %q: head %q: %w", clip(m.Thread), clip(m.Head), thread.ErrNotFound)
		}
		version[m.Thread] = m.From + 1
	}
	dropped := map[thread.CheckpointKey]bool{}
	for _, k := range b.DropCheckpoints {
		if _, ok := snap.threads[k.Thread]; !ok {
			return nil, fmt.Errorf("thread %q: %w", clip(k.Thread), thread.ErrNotFound)
		}
		if _, ok := snap.cps[k]; !ok || dropped[k] {
			return nil, fmt.Errorf("checkpoint %q of thread %q: %w", clip(k.Name), clip(k.Thread), thread.ErrNotFound)
		}
		dropped[k] = true
	}
	added := map[thread.CheckpointKey]bool{}
	for _, cp := range b.Checkpoints {
		k := thread.CheckpointKey{Thread: cp.Thread, Name: cp.Name}
		if _, ok := lookup(cp.Thread); !ok {
			return nil, fmt.Errorf("thread %q: %w", clip(cp.Thread), thread.ErrNotFound)
		}
		if cp.Commit == "" || !commitExists(cp.Commit) {
			return nil, fmt.Errorf("checkpoint %q: commit %q: %w", clip(cp.Name), clip(cp.Commit), thread.ErrNotFound)
		}
		_, stored := snap.cps[k]
		if added[k] || (stored && !dropped[k]) {
			return nil, fmt.Errorf("checkpoint %q of thread %q exists: %w", clip(cp.Name), clip(cp.Thread), thread.ErrConflict)
		}
		added[k] = true
	}
	deleted := map[string]bool{}
	for _, d := range b.Delete {
		v, ok := lookup(d.Thread)
		if _, stored := snap.threads[d.Thread]; !ok || !stored || deleted[d.Thread] {
			return nil, fmt.Errorf("thread %q: %w", clip(d.Thread), thread.ErrNotFound)
		}
		if d.Version != 0 && v != d.Version {
			return nil, fmt.Errorf("thread %q is at version %d, not %d: %w", clip(d.Thread), v, d.Version, thread.ErrConflict)
		}
		deleted[d.Thread] = true
	}
	return plan(b, snap, newCommits, threadSeq, noIndex)
}

// plan queues the writes of a checked batch; commit ends them.
func plan(b *thread.Batch, snap *snapshot, newCommits map[string]int, threadSeq func(string) int64, noIndex bool) (*writes, error) {
	w := new(writes)
	commitSeq := func(id string) int64 {
		if id == "" {
			return 0
		}
		if i, ok := newCommits[id]; ok {
			return snap.newCommitSeqs[i]
		}
		return snap.commits[id]
	}
	// References: the new commits' counts start with those the batch makes;
	// the stored commits' counts go up by theirs.
	newRefs := make([]int64, len(b.Commits))
	incr := map[int64]int64{}
	ref := func(id string) {
		if id == "" {
			return
		}
		if i, ok := newCommits[id]; ok {
			newRefs[i]++
			return
		}
		incr[snap.commits[id]]++
	}
	for _, c := range b.Commits {
		ref(c.Parent)
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
		ref(e.Commit)
	}
	for i, cr := range b.Create {
		seq := snap.newThreadSeqs[i]
		if len(cr.History) == 0 {
			addEntry(seq, thread.HistoryEntry{Version: 1, Commit: cr.Record.Head, Op: cr.Op, Time: cr.Record.CreatedAt})
		}
		for _, e := range cr.History {
			addEntry(seq, e)
		}
	}
	for _, m := range b.Moves {
		addEntry(threadSeq(m.Thread), thread.HistoryEntry{Version: m.From + 1, Commit: m.Head, Op: m.Op, Time: m.Time})
	}
	for _, cp := range b.Checkpoints {
		ref(cp.Commit)
	}

	// 1. The new commits.
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
			snap.newCommitSeqs, ids, parents, depths, newRefs, ops, ats, stateFrom, msgs, states, metas)
		// Their pending rows, for the search index (schemaV6), under the
		// threads the batch commits them for.
		if !noIndex {
			var pend pendingRows
			owners := b.CommitThreads()
			for i, c := range b.Commits {
				if key, ok := owners[c.ID]; ok && hasWords(c.Messages) {
					pend.commits = append(pend.commits, snap.newCommitSeqs[i])
					pend.threads = append(pend.threads, key)
				}
			}
			pend.queue(&w.q)
		}
	}
	// 2. The references to stored commits.
	if len(incr) > 0 {
		seqs := make([]int64, 0, len(incr))
		ns := make([]int64, 0, len(incr))
		for seq, n := range incr {
			seqs, ns = append(seqs, seq), append(ns, n)
		}
		w.q.Queue(`UPDATE loom_commits c SET refs = c.refs + u.n FROM unnest($1::bigint[], $2::bigint[]) AS u(s, n) WHERE c.seq = u.s`, seqs, ns)
	}
	// 3. New threads.
	for i, cr := range b.Create {
		r := cr.Record
		w.q.Queue(`INSERT INTO loom_threads (seq, id, tenant, kind, title, labels, head, version, created_at, updated_at,
				forked_thread, forked_commit, forked_message)
			VALUES ($1, $2, $3, $4, $5, $6::jsonb, nullif($7, 0), $8, $9, $10, $11, $12, $13)`,
			snap.newThreadSeqs[i], r.ID, r.Tenant, string(r.Kind), r.Title, encodeLabels(r.Labels), commitSeq(r.Head), r.Version,
			r.CreatedAt, r.UpdatedAt, r.ForkedFrom.Thread, r.ForkedFrom.Commit, r.ForkedFrom.Message)
	}
	// 4. Moves.
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
	}
	// 5. History entries.
	if len(hist.thread) > 0 {
		w.q.Queue(`INSERT INTO loom_history (thread, version, commit_seq, op, at)
			SELECT t, v, nullif(c, 0), o, a FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[]) AS u(t, v, c, o, a)`,
			hist.thread, hist.version, hist.commit, hist.op, hist.at)
	}
	// 6. Dropped checkpoints, then 7. new ones.
	var unref []int64
	if len(b.DropCheckpoints) > 0 {
		var threads []int64
		var names []string
		for _, k := range b.DropCheckpoints {
			threads, names = append(threads, threadSeq(k.Thread)), append(names, k.Name)
			unref = append(unref, snap.cps[k])
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
	// 8. References dropped with the checkpoints, after every new one was
	// counted; 9. deletions.
	if len(unref) > 0 {
		w.q.Queue(`SELECT loom_unref($1::bigint[])`, unref)
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
