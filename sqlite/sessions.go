package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

func init() {
	worklog.RegisterSessions("sqlite", func(ctx context.Context, u *url.URL) (worklog.SessionStore, error) {
		path, opts, err := parseURL(u)
		if err != nil {
			return nil, asInvalid(err)
		}
		return openSessions(ctx, path, opts)
	})
}

// asInvalid makes a thread.ErrInvalid error (a bad path or option) match
// worklog.ErrInvalid as well, as the callers of a SessionStore expect.
func asInvalid(err error) error {
	if errors.Is(err, thread.ErrInvalid) && !errors.Is(err, worklog.ErrInvalid) {
		return invalidError{err}
	}
	return err
}

type invalidError struct{ err error }

func (e invalidError) Error() string   { return e.err.Error() }
func (e invalidError) Unwrap() []error { return []error{e.err, worklog.ErrInvalid} }

// sessionsSchema is the sessions table of worklog. It is created if
// missing, beside the thread tables of a loom database, and is not part of
// their versioned schema. Times are Unix microseconds in UTC, NULL when
// zero; open_threads is the JSON array of the items a session carried
// when it closed. The rowid keeps the order in which sessions were first
// recorded, which breaks ties between sessions closed at the same instant.
var sessionsSchema = []string{
	`CREATE TABLE IF NOT EXISTS sessions (
		id           TEXT PRIMARY KEY,
		project      TEXT NOT NULL,
		started_at   INTEGER,
		closed_at    INTEGER,
		open_threads TEXT
	)`,
	`CREATE INDEX IF NOT EXISTS sessions_closed ON sessions (project, closed_at DESC) WHERE closed_at IS NOT NULL`,
}

// Sessions is a worklog.SessionStore in a sessions table of a SQLite
// database file, in WAL mode: the same file as a Store's threads, or one
// of its own. It is safe for concurrent use, and several processes may
// open the same file.
type Sessions struct {
	path string
	w    *sql.DB // one connection: every write is a BEGIN IMMEDIATE transaction on it
	r    *sql.DB // read-only connections
}

var _ worklog.SessionStore = (*Sessions)(nil)

// OpenSessions opens the sessions table of the database at path, creating
// the file (as a loom database, which Open accepts too) and the table if
// they do not exist. path may also be a sqlite:// URL with the options of
// Open (cache_bytes is ignored).
func OpenSessions(ctx context.Context, path string) (*Sessions, error) {
	path, opts, err := splitPath(path, nil)
	if err != nil {
		return nil, asInvalid(err)
	}
	return openSessions(ctx, path, opts)
}

func openSessions(ctx context.Context, path string, opts *Options) (*Sessions, error) {
	// The thread store's setup makes a new file a loom database (so that
	// Open accepts it later) and refuses a file of something else; its
	// write and read pools are what this store needs too, without the
	// thread statements or the commit cache.
	o, err := opts.withDefaults()
	if err != nil {
		return nil, asInvalid(err)
	}
	o.CacheBytes = -1
	st, err := openDB(ctx, path, &o, migrations)
	if err != nil {
		return nil, asInvalid(err)
	}
	s := &Sessions{path: st.path, w: st.w, r: st.r}
	if err := s.createTable(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: %s: sessions table: %w", path, err)
	}
	return s, nil
}

func (s *Sessions) createTable(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range sessionsSchema {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Path returns the absolute path of the database file.
func (s *Sessions) Path() string { return s.path }

// Close closes the database. Operations after Close fail.
func (s *Sessions) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// nullMicros is t in Unix microseconds, NULL when t is zero.
func nullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(t), Valid: true}
}

func fromNullMicros(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMicros(n.Int64)
}

// StartSession implements worklog.SessionStore.
func (s *Sessions) StartSession(ctx context.Context, ses worklog.Session) error {
	if err := worklog.CheckSession(ses); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx,
		`INSERT INTO sessions (id, project, started_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		ses.ID, ses.Project, nullMicros(ses.StartedAt))
	if err != nil {
		return fmt.Errorf("sqlite: start session %s: %w", ses.ID, err)
	}
	return nil
}

// CloseSession implements worklog.SessionStore.
func (s *Sessions) CloseSession(ctx context.Context, ses worklog.Session) error {
	if err := worklog.CheckSession(ses); err != nil {
		return err
	}
	if !ses.Closed() {
		return fmt.Errorf("sqlite: close of session %s without a close time: %w", ses.ID, worklog.ErrInvalid)
	}
	threads, err := encodeThreads(ses.OpenThreads)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx,
		`INSERT INTO sessions (id, project, started_at, closed_at, open_threads) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			closed_at = excluded.closed_at,
			open_threads = excluded.open_threads,
			started_at = coalesce(sessions.started_at, excluded.started_at)`,
		ses.ID, ses.Project, nullMicros(ses.StartedAt), nullMicros(ses.ClosedAt), threads)
	if err != nil {
		return fmt.Errorf("sqlite: close session %s: %w", ses.ID, err)
	}
	return nil
}

// ClosedSessions implements worklog.SessionStore.
func (s *Sessions) ClosedSessions(ctx context.Context, opts worklog.ClosedOptions) ([]worklog.Session, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = worklog.DefaultMaxSessions
	}
	since := int64(-1 << 63)
	if !opts.Since.IsZero() {
		since = micros(opts.Since)
	}
	rows, err := s.r.QueryContext(ctx,
		`SELECT id, project, started_at, closed_at, open_threads FROM sessions
		WHERE project = ? AND closed_at IS NOT NULL AND closed_at >= ?
		ORDER BY closed_at DESC, rowid LIMIT `+strconv.Itoa(limit),
		opts.Project, since)
	if err != nil {
		return nil, fmt.Errorf("sqlite: closed sessions: %w", err)
	}
	defer rows.Close()
	var out []worklog.Session
	for rows.Next() {
		var (
			ses             worklog.Session
			started, closed sql.NullInt64
			threads         sql.NullString
		)
		if err := rows.Scan(&ses.ID, &ses.Project, &started, &closed, &threads); err != nil {
			return nil, fmt.Errorf("sqlite: closed sessions: %w", err)
		}
		ses.StartedAt, ses.ClosedAt = fromNullMicros(started), fromNullMicros(closed)
		if ses.OpenThreads, err = decodeThreads(threads); err != nil {
			return nil, fmt.Errorf("sqlite: session %s: open_threads: %w", ses.ID, err)
		}
		out = append(out, ses)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: closed sessions: %w", err)
	}
	return out, nil
}

// encodeThreads is the JSON array of a session's open_threads, NULL when
// there are none.
func encodeThreads(ts []json.RawMessage) (sql.NullString, error) {
	if len(ts) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(ts)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("sqlite: open_threads: %v: %w", err, worklog.ErrInvalid)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

func decodeThreads(ns sql.NullString) ([]json.RawMessage, error) {
	if !ns.Valid || ns.String == "" {
		return nil, nil
	}
	var out []json.RawMessage
	if err := json.Unmarshal([]byte(ns.String), &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
