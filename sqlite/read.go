package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// The columns of a commit c with its parent p joined, as scanCommit reads
// them.
const commitCols = `c.k, c.id, p.id, c.depth, c.op, c.time, c.state_from, c.messages, c.state, c.metadata`

// The columns of a commit c on a walk up its parents, as Ancestors reads
// them: the parent's key instead of its id.
const walkCols = `c.k, c.id, c.parent, c.depth, c.op, c.time, c.state_from, c.messages, c.state, c.metadata`

// The columns of a thread t with its head h joined, as scanRecord reads
// them.
const recordCols = `t.id, t.tenant, t.kind, t.title, t.labels, h.id, t.version, t.created, t.updated,
	t.forked_thread, t.forked_commit, t.forked_message`

const (
	qCommit = `SELECT ` + commitCols + ` FROM commits c LEFT JOIN commits p ON p.k = c.parent WHERE c.id = ?`

	// qAncestors walks up the parents in one recursive query on the
	// integer keys, newest first. The first row is the commit itself,
	// whatever its depth (so that an unknown id and an empty walk differ);
	// the walk goes on from each commit above the floor, so its last row is
	// the first at or below the floor (or the root). That row is not
	// yielded, only its id read: each row's parent id is the id of the row
	// after it, with no join. CROSS JOIN keeps the walk's order: SQLite
	// never reorders the tables of a CROSS JOIN. A parent's key is always
	// below its child's (it existed when the child got the next key), and
	// the walk insists: a damaged file cannot make it loop.
	qAncestors = `WITH RECURSIVE a(k) AS (
		SELECT k FROM commits WHERE id = ?1
		UNION ALL
		SELECT c.parent FROM a CROSS JOIN commits c ON c.k = a.k WHERE c.depth > ?2 AND c.parent < c.k
	)
	SELECT ` + walkCols + ` FROM a CROSS JOIN commits c ON c.k = a.k`

	qThread = `SELECT ` + recordCols + ` FROM threads t LEFT JOIN commits h ON h.k = t.head WHERE t.id = ?`

	// qHistory has one row with a NULL version for a thread without
	// matching entries and none for an unknown thread.
	qHistory = `SELECT h.version, c.id, h.op, h.time FROM threads t
		LEFT JOIN history h ON h.thread = t.k AND h.version < ?2
		LEFT JOIN commits c ON c.k = h.commit_key
		WHERE t.id = ?1 ORDER BY h.version DESC LIMIT ?3`

	qCheckpoints = `SELECT p.name, c.id, p.version, p.created FROM threads t
		LEFT JOIN checkpoints p ON p.thread = t.k
		LEFT JOIN commits c ON c.k = p.commit_key
		WHERE t.id = ? ORDER BY p.name`
)

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// rawCommit is a commit row as read, before its messages are decoded. The
// RawBytes are the driver's: valid until the next row.
type rawCommit struct {
	k, depth, us          int64
	id, op, stateFrom     string
	parentKey             sql.NullInt64  // walk rows
	parentID              sql.NullString // single rows
	msgs, state, metadata sql.RawBytes
}

// commit returns the row's commit: from the cache when it holds it
// (cached true, a copy that is the caller's), or else decoded (cached
// false) and not yet cached, so that the caller may set its Parent first
// and then call keep.
func (s *Store) commit(r *rawCommit) (c *thread.Commit, cached bool, err error) {
	if hit := s.cache.get(r.k, r.id, len(r.msgs)); hit != nil {
		return hit, true, nil
	}
	c = &thread.Commit{ID: r.id, Parent: r.parentID.String, Depth: r.depth, StateFrom: r.stateFrom, Op: thread.Op(r.op), Time: fromMicros(r.us)}
	if c.Messages, err = decodeMessages(r.msgs); err != nil {
		return nil, false, fmt.Errorf("commit %q: messages: %w", c.ID, err)
	}
	if c.State, err = decodeState(r.state); err != nil {
		return nil, false, fmt.Errorf("commit %q: state: %w", c.ID, err)
	}
	if c.Metadata, err = decodeStrings(r.metadata); err != nil {
		return nil, false, fmt.Errorf("commit %q: metadata: %w", c.ID, err)
	}
	return c, false, nil
}

// keep caches a commit that commit decoded, now complete, and returns the
// caller's copy.
func (s *Store) keep(k int64, msgsLen int, cost int64, c *thread.Commit) *thread.Commit {
	if s.cache == nil {
		return c
	}
	s.cache.put(k, msgsLen, c, cost)
	return c.Clone()
}

func (r *rawCommit) cost() int64 { return int64(256 + len(r.msgs) + len(r.state) + len(r.metadata)) }

// scanCommit reads a row of qCommit.
func (s *Store) scanCommit(sc scanner) (*thread.Commit, error) {
	var r rawCommit
	if err := sc.Scan(&r.k, &r.id, &r.parentID, &r.depth, &r.op, &r.us, &r.stateFrom, &r.msgs, &r.state, &r.metadata); err != nil {
		return nil, err
	}
	c, cached, err := s.commit(&r)
	if err != nil || cached {
		return c, err
	}
	return s.keep(r.k, len(r.msgs), r.cost(), c), nil
}

func scanRecord(sc scanner) (*thread.Record, error) {
	var (
		r                  thread.Record
		kind               string
		labels             sql.RawBytes
		head               sql.NullString
		created, updated   int64
		ft, fc, fm, tenant string
	)
	if err := sc.Scan(&r.ID, &tenant, &kind, &r.Title, &labels, &head, &r.Version, &created, &updated, &ft, &fc, &fm); err != nil {
		return nil, err
	}
	r.Tenant, r.Kind, r.Head = tenant, thread.Kind(kind), head.String
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updated)
	r.ForkedFrom = thread.ForkPoint{Thread: ft, Commit: fc, Message: fm}
	var err error
	if r.Labels, err = decodeStrings(labels); err != nil {
		return nil, fmt.Errorf("thread %q: labels: %w", r.ID, err)
	}
	return &r, nil
}

// queryOne runs a query that returns at most one row and scans it, or
// returns sql.ErrNoRows. (Row.Scan refuses the sql.RawBytes the scans use
// to save a copy.)
func queryOne[T any](ctx context.Context, st *sql.Stmt, scan func(scanner) (T, error), args ...any) (T, error) {
	var zero T
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return zero, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return zero, err
		}
		return zero, sql.ErrNoRows
	}
	v, err := scan(rows)
	if err != nil {
		return zero, err
	}
	return v, rows.Close()
}

// CachedCommit implements store.CommitCache: the commit from the cache of
// decoded commits, nil when it is not there.
func (s *Store) CachedCommit(id string) *thread.Commit { return s.cache.getID(id) }

var _ store.CommitCache = (*Store)(nil)

// Commit implements store.Store. It always asks the file (and finds the
// decoded commit in the cache by row), so that a commit another process
// has deleted is ErrNotFound at once.
func (s *Store) Commit(ctx context.Context, id string) (*thread.Commit, error) {
	c, err := queryOne(ctx, s.st.commit, s.scanCommit, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("commit %q: %w", clip(id), err)
	}
	return c, nil
}

// Ancestors implements store.Store: from the commit cache while it holds
// the commits (an agent's views read what it has just written), then with
// one recursive query. A walk served by the cache does not ask the file
// whether another process has deleted the commits since: commits never
// change, so it yields what a walk a moment earlier would have. The query's
// rows are yielded as they come, each one row late: a commit's parent id is
// the id of the row after it. A walk caches only the commits nearest its
// start, a share of the cache (see walkShare); those past it, the older
// part of a long thread, are decoded and not kept.
func (s *Store) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		// budget is what is left of the cost the walk may cache.
		budget := s.cache.walkBudget()
		for {
			c, cost := s.cache.getIDCost(id)
			if c == nil {
				break
			}
			budget -= cost
			if c.Depth <= floor || !yield(c, nil) || c.Parent == "" {
				return
			}
			id = c.Parent
		}
		fail := func(err error) { yield(nil, fmt.Errorf("ancestors of %q: %w", clip(id), err)) }
		rows, err := s.st.ancestors.QueryContext(ctx, id, floor)
		if err != nil {
			fail(err)
			return
		}
		defer rows.Close()
		// The commit read but not yet yielded, waiting for its parent's id.
		var (
			pend          *thread.Commit
			pendCached    bool
			pendK, pendPK int64
			pendN         int
			pendCost      int64
			found         bool
		)
		finish := func(parentID string) bool {
			c := pend
			pend = nil
			budget -= pendCost
			if !pendCached {
				c.Parent = parentID
				if budget >= 0 {
					c = s.keep(pendK, pendN, pendCost, c)
				}
			}
			return yield(c, nil)
		}
		var r rawCommit
		for rows.Next() {
			if err := rows.Scan(&r.k, &r.id, &r.parentKey, &r.depth, &r.op, &r.us, &r.stateFrom, &r.msgs, &r.state, &r.metadata); err != nil {
				fail(err)
				return
			}
			found = true
			if pend != nil {
				if r.k != pendPK {
					fail(fmt.Errorf("commit %q: the walk reached key %d, not the parent's %d", pend.ID, r.k, pendPK))
					return
				}
				if !finish(r.id) {
					return
				}
			}
			if r.depth <= floor {
				break
			}
			c, cached, err := s.commit(&r)
			if err != nil {
				fail(err)
				return
			}
			pend, pendCached, pendK, pendPK, pendN, pendCost = c, cached, r.k, r.parentKey.Int64, len(r.msgs), r.cost()
		}
		if err := rows.Err(); err != nil {
			fail(err)
			return
		}
		if pend != nil {
			if pendPK != 0 {
				fail(fmt.Errorf("commit %q: parent key %d: %w", pend.ID, pendPK, thread.ErrNotFound))
				return
			}
			finish("")
			return
		}
		if !found {
			yield(nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound))
		}
	}
}

// Thread implements store.Store.
func (s *Store) Thread(ctx context.Context, id string) (*thread.Record, error) {
	r, err := queryOne(ctx, s.st.thread, scanRecord, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("thread %q: %w", clip(id), err)
	}
	return r, nil
}

// listPage is how many records Threads reads at a time. It reads a page,
// closes the query and then yields, so that a caller may write while it
// iterates without holding a read open.
const listPage = 256

// Threads implements store.Store. The filters are SQL: the tenant and id
// order come from an index (the order of updates from threads_by_updated),
// each label is a lookup in the labels table. A tenant's listing of a
// label walks that label's entries in label_index instead, in the order
// of the listing: a page costs its threads (and those of the first label,
// by key, that the other filters leave out), however many threads the
// tenant has.
func (s *Store) Threads(ctx context.Context, opts thread.ListOptions) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		first, paged, args, cursorArgs := listSQL(opts)
		nbase := len(args)
		cursor, started, n := cursorArgs(&thread.Record{ID: opts.After, UpdatedAt: opts.AfterUpdated}), opts.After != "", 0
		for {
			page := listPage
			if opts.Limit > 0 {
				page = min(page, opts.Limit-n)
			}
			var recs []*thread.Record
			err := func() error {
				query, a := first, append(args[:nbase:nbase], page)
				if started {
					query, a = paged, append(append(args[:nbase:nbase], cursor...), page)
				}
				rows, err := s.r.QueryContext(ctx, query, a...)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					r, err := scanRecord(rows)
					if err != nil {
						return err
					}
					recs = append(recs, r)
				}
				return rows.Err()
			}()
			if err != nil {
				yield(nil, fmt.Errorf("list threads: %w", err))
				return
			}
			for _, r := range recs {
				n++
				if !yield(r, nil) {
					return
				}
			}
			if len(recs) < page || (opts.Limit > 0 && n >= opts.Limit) {
				return
			}
			cursor, started = cursorArgs(recs[len(recs)-1]), true
		}
	}
}

// listSQL is the query of a listing: from the start and after a cursor,
// the filters' arguments (the cursor's and the page size follow them), and
// the cursor's arguments after a record.
func listSQL(opts thread.ListOptions) (first, paged string, args []any, cursorArgs func(*thread.Record) []any) {
	keys := slices.Sorted(maps.Keys(opts.Labels))
	// col qualifies the columns of the order and cursor: the thread's, or
	// those of the label_index entry that the listing walks.
	col := "t."
	var q strings.Builder
	q.WriteString(`SELECT ` + recordCols + ` FROM `)
	if len(keys) > 0 && !opts.AllTenants {
		// The first label's entries, in the order of the listing: the
		// index named, so that no plan may sort them instead. CROSS JOIN
		// keeps the walk outermost.
		index := "label_index_by_id"
		if opts.Order == thread.OrderUpdated {
			index = "label_index_by_updated"
		}
		q.WriteString(`label_index l INDEXED BY ` + index + ` CROSS JOIN threads t ON t.k = l.thread
			LEFT JOIN commits h ON h.k = t.head WHERE l.key = ? AND l.value = ? AND l.tenant = ?`)
		args = append(args, keys[0], opts.Labels[keys[0]], opts.Tenant)
		keys, col = keys[1:], "l."
	} else {
		q.WriteString(`threads t LEFT JOIN commits h ON h.k = t.head WHERE 1`)
		if !opts.AllTenants {
			q.WriteString(` AND t.tenant = ?`)
			args = append(args, opts.Tenant)
		}
	}
	if opts.Kind != "" {
		q.WriteString(` AND t.kind = ?`)
		args = append(args, string(opts.Kind))
	}
	for _, k := range keys {
		q.WriteString(` AND EXISTS (SELECT 1 FROM labels x WHERE x.thread = t.k AND x.key = ? AND x.value = ?)`)
		args = append(args, k, opts.Labels[k])
	}
	cmp, order := ">", "ASC"
	if opts.Desc {
		cmp, order = "<", "DESC"
	}
	base := q.String()
	paged = base + ` AND ` + col + `id ` + cmp + ` ? ORDER BY ` + col + `id ` + order + ` LIMIT ?`
	first = base + ` ORDER BY ` + col + `id ` + order + ` LIMIT ?`
	cursorArgs = func(r *thread.Record) []any { return []any{r.ID} }
	if opts.Order == thread.OrderUpdated {
		// threads_by_updated (or label_index_by_updated) gives the
		// order; the row value seeks it to the cursor.
		paged = base + ` AND (` + col + `updated, ` + col + `id) < (?, ?) ORDER BY ` + col + `updated DESC, ` + col + `id DESC LIMIT ?`
		first = base + ` ORDER BY ` + col + `updated DESC, ` + col + `id DESC LIMIT ?`
		cursorArgs = func(r *thread.Record) []any { return []any{micros(r.UpdatedAt), r.ID} }
	}
	return first, paged, args, cursorArgs
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, id string, opts thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error] {
	return func(yield func(thread.HistoryEntry, error) bool) {
		before, limit := opts.Before, int64(opts.Limit)
		if before <= 0 {
			before = 1<<63 - 1
		}
		if limit <= 0 {
			limit = -1
		}
		rows, err := s.st.history.QueryContext(ctx, id, before, limit)
		if err != nil {
			yield(thread.HistoryEntry{}, fmt.Errorf("history of %q: %w", clip(id), err))
			return
		}
		defer rows.Close()
		found := false
		for rows.Next() {
			found = true
			var (
				version, us sql.NullInt64
				commit, op  sql.NullString
			)
			if err := rows.Scan(&version, &commit, &op, &us); err != nil {
				yield(thread.HistoryEntry{}, fmt.Errorf("history of %q: %w", clip(id), err))
				return
			}
			if !version.Valid {
				break // the thread, without entries in range
			}
			e := thread.HistoryEntry{Version: version.Int64, Commit: commit.String, Op: thread.Op(op.String), Time: fromMicros(us.Int64)}
			if !yield(e, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(thread.HistoryEntry{}, fmt.Errorf("history of %q: %w", clip(id), err))
			return
		}
		if !found {
			yield(thread.HistoryEntry{}, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound))
		}
	}
}

// Checkpoints implements store.Store.
func (s *Store) Checkpoints(ctx context.Context, id string) iter.Seq2[thread.Checkpoint, error] {
	return func(yield func(thread.Checkpoint, error) bool) {
		rows, err := s.st.checkpoints.QueryContext(ctx, id)
		if err != nil {
			yield(thread.Checkpoint{}, fmt.Errorf("checkpoints of %q: %w", clip(id), err))
			return
		}
		defer rows.Close()
		found := false
		for rows.Next() {
			found = true
			var (
				name, commit    sql.NullString
				version, create sql.NullInt64
			)
			if err := rows.Scan(&name, &commit, &version, &create); err != nil {
				yield(thread.Checkpoint{}, fmt.Errorf("checkpoints of %q: %w", clip(id), err))
				return
			}
			if !name.Valid {
				break
			}
			cp := thread.Checkpoint{Thread: id, Name: name.String, Commit: commit.String, Version: version.Int64, CreatedAt: fromMicros(create.Int64)}
			if !yield(cp, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(thread.Checkpoint{}, fmt.Errorf("checkpoints of %q: %w", clip(id), err))
			return
		}
		if !found {
			yield(thread.Checkpoint{}, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound))
		}
	}
}

// clip shortens untrusted input for error messages.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
