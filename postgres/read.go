package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomthreads/loom/thread"
)

// Reads buffer a page of rows and give the connection back before they
// yield, so a caller may write to the store, or read more, inside its loop
// without holding a connection of the pool.

// query runs the query of one page of a read, bounded by the store's
// Timeout; closing the rows ends the deadline.
func (s *Store) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	pc, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	qctx, cancel := s.bound(ctx)
	rows, err := pc.Query(qctx, sql, args...)
	if err != nil {
		cancel()
		pc.Release()
		return nil, err
	}
	return &boundRows{Rows: rows, cancel: cancel, pc: pc}, nil
}

type boundRows struct {
	pgx.Rows
	cancel context.CancelFunc
	pc     *pgxpool.Conn
}

func (r *boundRows) Close() {
	r.Rows.Close()
	r.cancel()
	r.pc.Release()
}

// queryRow runs a query of one row and has scan read it, bounded by the
// store's Timeout (not the wait for a connection, see acquire).
func (s *Store) queryRow(ctx context.Context, scan func(pgx.Row) error, sql string, args ...any) error {
	pc, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	qctx, cancel := s.bound(ctx)
	defer cancel()
	return scan(pc.QueryRow(qctx, sql, args...))
}

// commitCols are the columns scanCommit reads, c being the commit and p its
// parent.
const commitCols = `c.id, coalesce(p.id, ''), c.parent, c.depth, c.messages, c.state, c.state_from, c.op, c.at, c.metadata`

type commitRow struct {
	c      *thread.Commit
	parent *int64 // the parent's seq
}

func scanCommit(row pgx.Row, extra ...any) (commitRow, error) {
	var (
		c                 thread.Commit
		op                string
		parent            *int64
		msgs, state, meta []byte
	)
	dest := append(extra, &c.ID, &c.Parent, &parent, &c.Depth, &msgs, &state, &c.StateFrom, &op, &c.Time, &meta)
	if err := row.Scan(dest...); err != nil {
		return commitRow{}, err
	}
	c.Op = thread.Op(op)
	c.Time = c.Time.UTC()
	var err error
	if c.Messages, err = decodeMessages(msgs); err != nil {
		return commitRow{}, fmt.Errorf("commit %s: messages: %w", c.ID, err)
	}
	if c.State, err = decodeState(state); err != nil {
		return commitRow{}, fmt.Errorf("commit %s: state: %w", c.ID, err)
	}
	if c.Metadata, err = decodeMeta(meta); err != nil {
		return commitRow{}, fmt.Errorf("commit %s: metadata: %w", c.ID, err)
	}
	return commitRow{&c, parent}, nil
}

// Commit implements store.Store.
func (s *Store) Commit(ctx context.Context, id string) (*thread.Commit, error) {
	if !validKey(id) {
		return nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound)
	}
	var cr commitRow
	err := s.queryRow(ctx, func(row pgx.Row) (err error) {
		cr, err = scanCommit(row)
		return err
	}, `SELECT `+commitCols+`
		FROM loom_commits c LEFT JOIN loom_commits p ON p.seq = c.parent
		WHERE c.id = $1`, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound)
	}
	if err != nil {
		return nil, mapError(ctx, fmt.Sprintf("commit %q", clip(id)), err)
	}
	return cr.c, nil
}

// ancestorsSQL walks from one commit (by id or by seq) to its parents in
// one recursive query on the integer keys, for as long as their depth is
// above the floor ($2) and the page ($3) is not full. The first commit is
// always returned, so that an unknown id can be told from a walk that yields
// nothing.
func ancestorsSQL(start string) string {
	return `WITH RECURSIVE a(seq, parent, n) AS (
			SELECT seq, parent, 1 FROM loom_commits WHERE ` + start + ` = $1
			UNION ALL
			SELECT c.seq, c.parent, a.n + 1 FROM a JOIN loom_commits c ON c.seq = a.parent
			WHERE c.depth > $2 AND a.n < $3
		)
		SELECT a.n, ` + commitCols + `
		FROM a JOIN loom_commits c ON c.seq = a.seq LEFT JOIN loom_commits p ON p.seq = c.parent
		ORDER BY a.n`
}

var (
	ancestorsByID  = ancestorsSQL("id")
	ancestorsBySeq = ancestorsSQL("seq")
)

// The pages of a walk of the ancestors. A walk down to a floor above 0 is
// bounded by the floor and takes one query; a walk to the root (floor 0 or
// -1) reads a first page big enough for most threads, then bigger ones.
const (
	firstAncestorPage = 1024
	nextAncestorPage  = 16384
)

// Ancestors implements store.Store.
func (s *Store) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		if !validKey(id) {
			yield(nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound))
			return
		}
		query, start := ancestorsByID, any(id)
		page := int64(firstAncestorPage)
		if floor > 0 {
			page = math.MaxInt32
		}
		first := true
		for {
			rows, err := s.query(ctx, query, start, floor, page)
			if err != nil {
				yield(nil, mapError(ctx, "ancestors", err))
				return
			}
			var buf []commitRow
			for rows.Next() {
				var n int64
				cr, err := scanCommit(rows, &n)
				if err != nil {
					rows.Close()
					yield(nil, mapError(ctx, "ancestors", err))
					return
				}
				buf = append(buf, cr)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				yield(nil, mapError(ctx, "ancestors", err))
				return
			}
			if len(buf) == 0 {
				// Every page is a query of its own. The first commit of a
				// page is always returned when it exists, and a commit
				// keeps its ancestors, so a later page comes back empty
				// only when the commit it starts at was freed since the
				// last one (its thread deleted): the walk cannot go on,
				// and ending it here would pass the commits yielded so
				// far off as the whole line.
				if first {
					yield(nil, fmt.Errorf("commit %q: %w", clip(id), thread.ErrNotFound))
				} else {
					yield(nil, fmt.Errorf("commit %q: an ancestor was deleted during the walk: %w", clip(id), thread.ErrNotFound))
				}
				return
			}
			for _, cr := range buf {
				// Only the first commit of a page can be at or below the
				// floor: the query stops the walk there.
				if cr.c.Depth <= floor {
					return
				}
				if !yield(cr.c, nil) {
					return
				}
			}
			last := buf[len(buf)-1]
			if int64(len(buf)) < page || last.parent == nil {
				return
			}
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			query, start, page, first = ancestorsBySeq, *last.parent, nextAncestorPage, false
		}
	}
}

// recordCols are the columns scanRecord reads, t being the thread and h its
// head commit.
const recordCols = `t.id, t.tenant, t.kind, t.title, t.labels, coalesce(h.id, ''), t.version, t.created_at, t.updated_at,
	t.forked_thread, t.forked_commit, t.forked_message`

// scanRecord scans a row of recordCols, then of extra columns into extra.
func scanRecord(row pgx.Row, extra ...any) (*thread.Record, error) {
	var (
		r      thread.Record
		kind   string
		labels []byte
	)
	err := row.Scan(append([]any{&r.ID, &r.Tenant, &kind, &r.Title, &labels, &r.Head, &r.Version, &r.CreatedAt, &r.UpdatedAt,
		&r.ForkedFrom.Thread, &r.ForkedFrom.Commit, &r.ForkedFrom.Message}, extra...)...)
	if err != nil {
		return nil, err
	}
	r.Kind = thread.Kind(kind)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if r.Labels, err = decodeLabels(labels); err != nil {
		return nil, fmt.Errorf("thread %s: labels: %w", r.ID, err)
	}
	return &r, nil
}

// Thread implements store.Store.
func (s *Store) Thread(ctx context.Context, id string) (*thread.Record, error) {
	if !validKey(id) {
		return nil, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound)
	}
	var r *thread.Record
	err := s.queryRow(ctx, func(row pgx.Row) (err error) {
		r, err = scanRecord(row)
		return err
	}, `SELECT `+recordCols+`
		FROM loom_threads t LEFT JOIN loom_commits h ON h.seq = t.head
		WHERE t.id = $1`, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound)
	}
	if err != nil {
		return nil, mapError(ctx, fmt.Sprintf("thread %q", clip(id)), err)
	}
	return r, nil
}

const threadPage = 256

// Threads implements store.Store: pages of records in id order (or by
// update time, from loom_threads_updated), filtered by the server: a
// tenant's listing by label in id order walks that label's entries in
// loom_labels (schemaV7); the others filter the labels of the records they
// walk.
func (s *Store) Threads(ctx context.Context, opts thread.ListOptions) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		ok := validText(opts.Tenant) && validText(string(opts.Kind)) && validText(opts.After)
		for k, v := range opts.Labels {
			ok = ok && validText(k) && validText(v)
		}
		if !ok {
			yield(nil, fmt.Errorf("list threads: text with NUL or not UTF-8: %w", thread.ErrInvalid))
			return
		}
		fromStart, afterCursor, args, cursorArgs := listSQL(opts)
		cursor, started, n := cursorArgs(&thread.Record{ID: opts.After, UpdatedAt: opts.AfterUpdated}), opts.After != "", 0
		for {
			page := threadPage
			if opts.Limit > 0 {
				page = min(page, opts.Limit-n)
			}
			q, a := fromStart, append(slices.Clone(args), page)
			if started {
				q, a = afterCursor, append(append(slices.Clone(args), cursor...), page)
			}
			rows, err := s.query(ctx, q, a...)
			if err != nil {
				yield(nil, mapError(ctx, "list threads", err))
				return
			}
			var buf []*thread.Record
			for rows.Next() {
				r, err := scanRecord(rows)
				if err != nil {
					rows.Close()
					yield(nil, mapError(ctx, "list threads", err))
					return
				}
				buf = append(buf, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				yield(nil, mapError(ctx, "list threads", err))
				return
			}
			for _, r := range buf {
				n++
				if !yield(r, nil) {
					return
				}
			}
			if len(buf) < page || (opts.Limit > 0 && n >= opts.Limit) {
				return
			}
			cursor, started = cursorArgs(buf[len(buf)-1]), true
		}
	}
}

// listSQL is the query of a listing from the start and after a cursor, the
// filters' arguments (the cursor's and the page size follow them), and the
// cursor's arguments after a record.
func listSQL(opts thread.ListOptions) (fromStart, afterCursor string, args []any, cursorArgs func(*thread.Record) []any) {
	var where []string
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	// A tenant's threads of a label, in id order, are a walk of that
	// label's entries in loom_labels (schemaV7), joined to their records:
	// a page costs its rows, not a scan past the threads without it.
	// The other labels indexed are looked up there too, and only the
	// labels it does not hold are filtered on the record.
	from, idCol := "loom_threads t", "t.id"
	labels := opts.Labels
	if k, v, ok := labelIndexed(labels); ok && !opts.AllTenants && opts.Order != thread.OrderUpdated {
		// OFFSET 0 keeps the record a lookup of each entry: a merge join
		// would walk the threads' id index from its start.
		from, idCol = "loom_labels l CROSS JOIN LATERAL (SELECT * FROM loom_threads WHERE id = l.thread OFFSET 0) t", "l.thread"
		where = append(where, "l.tenant = "+arg(opts.Tenant), "l.key = "+arg(k), "l.value = "+arg(v))
		rest := map[string]string{}
		for k2, v2 := range labels {
			switch {
			case k2 == k:
			case len(k2)+len(v2) <= maxIndexedLabel:
				where = append(where, "EXISTS (SELECT 1 FROM loom_labels l2 WHERE l2.tenant = l.tenant AND l2.key = "+arg(k2)+
					" AND l2.value = "+arg(v2)+" AND l2.thread = l.thread)")
			default:
				rest[k2] = v2
			}
		}
		labels = rest
	} else if !opts.AllTenants {
		where = append(where, "t.tenant = "+arg(opts.Tenant))
	}
	if opts.Kind != "" {
		where = append(where, "t.kind = "+arg(string(opts.Kind)))
	}
	if len(labels) > 0 {
		where = append(where, "t.labels @> "+arg(encodeLabels(labels))+"::jsonb")
	}
	order, cmp := "ASC", ">"
	if opts.Desc {
		order, cmp = "DESC", "<"
	}
	// Two queries: from the start, and after a cursor (a separate query
	// rather than "$n OR t.id > $m", so that a generic plan still
	// seeks the index to the cursor). The page size is the last
	// argument.
	n0 := len(args)
	orderBy := idCol + " " + order
	cursorArgs = func(r *thread.Record) []any { return []any{r.ID} }
	if opts.Order == thread.OrderUpdated {
		// loom_threads_updated gives the order; the row comparison
		// seeks it to the cursor.
		orderBy = "t.updated_at DESC, t.id DESC"
		cursorArgs = func(r *thread.Record) []any { return []any{r.UpdatedAt, r.ID} }
	}
	query := func(cursor bool) string {
		w := where
		limit := fmt.Sprintf("$%d", n0+1)
		if cursor && opts.Order == thread.OrderUpdated {
			w = append(slices.Clone(where), fmt.Sprintf("(t.updated_at, t.id) < ($%d, $%d)", n0+1, n0+2))
			limit = fmt.Sprintf("$%d", n0+3)
		} else if cursor {
			w = append(slices.Clone(where), fmt.Sprintf("%s %s $%d", idCol, cmp, n0+1))
			limit = fmt.Sprintf("$%d", n0+2)
		}
		cond := "true"
		if len(w) > 0 {
			cond = strings.Join(w, " AND ")
		}
		return `SELECT ` + recordCols + `
			FROM ` + from + ` LEFT JOIN loom_commits h ON h.seq = t.head
			WHERE ` + cond + `
			ORDER BY ` + orderBy + ` LIMIT ` + limit
	}
	return query(false), query(true), args, cursorArgs
}

const historyPage = 1024

// historySQL reads a page of a thread's history, the thread named by id or
// by seq: one row with a NULL version for a thread without entries (left),
// none for an unknown thread.
func historySQL(by string) string {
	return `SELECT t.seq, e.version, coalesce(c.id, ''), e.op, e.at
		FROM loom_threads t
		LEFT JOIN LATERAL (SELECT version, commit_seq, op, at FROM loom_history
			WHERE thread = t.seq AND version < $2 ORDER BY version DESC LIMIT $3) e ON true
		LEFT JOIN loom_commits c ON c.seq = e.commit_seq
		WHERE t.` + by + ` = $1
		ORDER BY e.version DESC`
}

var (
	historyByID  = historySQL("id")
	historyBySeq = historySQL("seq")
)

// History implements store.Store. The pages after the first read the
// thread by its seq, which no other thread ever gets: a thread deleted
// during the walk, even if one of the same id was created since, ends it
// with ErrNotFound rather than with the entries read so far, or another
// thread's.
func (s *Store) History(ctx context.Context, id string, opts thread.HistoryOptions) iter.Seq2[thread.HistoryEntry, error] {
	return func(yield func(thread.HistoryEntry, error) bool) {
		if !validKey(id) {
			yield(thread.HistoryEntry{}, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound))
			return
		}
		before := opts.Before
		if before <= 0 {
			before = math.MaxInt64
		}
		query, key := historyByID, any(id)
		n := 0
		for {
			page := historyPage
			if opts.Limit > 0 {
				page = min(page, opts.Limit-n)
			}
			rows, err := s.query(ctx, query, key, before, page)
			if err != nil {
				yield(thread.HistoryEntry{}, mapError(ctx, "history", err))
				return
			}
			var (
				buf   []thread.HistoryEntry
				found bool
				seq   int64
			)
			for rows.Next() {
				found = true
				var (
					version *int64
					commit  string
					op      *string
					at      *time.Time
				)
				if err := rows.Scan(&seq, &version, &commit, &op, &at); err != nil {
					rows.Close()
					yield(thread.HistoryEntry{}, mapError(ctx, "history", err))
					return
				}
				if version != nil {
					buf = append(buf, thread.HistoryEntry{Version: *version, Commit: commit, Op: thread.Op(*op), Time: at.UTC()})
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				yield(thread.HistoryEntry{}, mapError(ctx, "history", err))
				return
			}
			if !found {
				if query == historyByID {
					yield(thread.HistoryEntry{}, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound))
				} else {
					yield(thread.HistoryEntry{}, fmt.Errorf("thread %q: deleted during the walk of its history: %w", clip(id), thread.ErrNotFound))
				}
				return
			}
			for _, e := range buf {
				n++
				if !yield(e, nil) {
					return
				}
			}
			if len(buf) < page || (opts.Limit > 0 && n >= opts.Limit) {
				return
			}
			query, key, before = historyBySeq, seq, buf[len(buf)-1].Version
		}
	}
}

// Checkpoints implements store.Store.
func (s *Store) Checkpoints(ctx context.Context, id string) iter.Seq2[thread.Checkpoint, error] {
	return func(yield func(thread.Checkpoint, error) bool) {
		if !validKey(id) {
			yield(thread.Checkpoint{}, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound))
			return
		}
		rows, err := s.query(ctx, `SELECT k.name, coalesce(c.id, ''), k.version, k.created_at
			FROM loom_threads t
			LEFT JOIN loom_checkpoints k ON k.thread = t.seq
			LEFT JOIN loom_commits c ON c.seq = k.commit_seq
			WHERE t.id = $1
			ORDER BY k.name`, id)
		if err != nil {
			yield(thread.Checkpoint{}, mapError(ctx, "checkpoints", err))
			return
		}
		var (
			buf   []thread.Checkpoint
			found bool
		)
		for rows.Next() {
			found = true
			var (
				name    *string
				commit  string
				version *int64
				at      *time.Time
			)
			if err := rows.Scan(&name, &commit, &version, &at); err != nil {
				rows.Close()
				yield(thread.Checkpoint{}, mapError(ctx, "checkpoints", err))
				return
			}
			if name != nil {
				buf = append(buf, thread.Checkpoint{Thread: id, Name: *name, Commit: commit, Version: *version, CreatedAt: at.UTC()})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			yield(thread.Checkpoint{}, mapError(ctx, "checkpoints", err))
			return
		}
		if !found {
			yield(thread.Checkpoint{}, fmt.Errorf("thread %q: %w", clip(id), thread.ErrNotFound))
			return
		}
		for _, cp := range buf {
			if !yield(cp, nil) {
				return
			}
		}
	}
}
