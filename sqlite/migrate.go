package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/loomthreads/loom/internal/sessionrec"
	"github.com/loomthreads/loom/thread"
)

// schemaV2 gives each tenant its own namespace of thread ids: a thread of
// a tenant other than the default is kept under its key, tenant/id
// (thread.Key), and so is the thread it was forked from (always one of the
// same tenant's). History, checkpoints and labels point at threads by
// their integer key, which does not change.
var schemaV2 = []string{
	`UPDATE threads SET id = tenant || '/' || id WHERE tenant <> '' AND instr(id, '/') = 0`,
	`UPDATE threads SET forked_thread = tenant || '/' || forked_thread
		WHERE tenant <> '' AND forked_thread <> '' AND instr(forked_thread, '/') = 0`,
}

// carrySessions carries the rows of the sessions table that this package
// kept for package worklog before session records lived in threads into
// threads (sessionrec.LegacyBatch), then drops the table. The batch is
// atomic; a crash before the drop leaves the table, and the next open
// finds the threads made (ErrConflict) and drops it. Processes opening
// the file at once do the same.
func (s *Store) carrySessions(ctx context.Context) error {
	exists := func() (bool, error) {
		var n int
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'sessions'`).Scan(&n); err != nil {
			return false, fmt.Errorf("look for a sessions table: %w", err)
		}
		return n > 0, nil
	}
	if ok, err := exists(); !ok || err != nil {
		return err
	}
	rows, err := legacySessions(ctx, s.r)
	if err != nil {
		// Another process carried the table and dropped it meanwhile.
		if ok, xerr := exists(); xerr == nil && !ok {
			return nil
		}
		return err
	}
	b, err := sessionrec.LegacyBatch(rows, time.Now())
	if err != nil {
		return fmt.Errorf("carry the sessions table into threads: %w", err)
	}
	if len(b.Create) > 0 {
		if err := s.Apply(ctx, b); err != nil && !errors.Is(err, thread.ErrConflict) {
			return fmt.Errorf("carry the sessions table into threads: %w", err)
		}
	}
	if _, err := s.w.ExecContext(ctx, `DROP TABLE IF EXISTS sessions`); err != nil {
		return fmt.Errorf("drop the sessions table: %w", err)
	}
	return nil
}

// legacySessions reads the sessions table in the order its rows were
// first recorded.
func legacySessions(ctx context.Context, db *sql.DB) ([]sessionrec.Legacy, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, project, started_at, closed_at, open_threads FROM sessions ORDER BY rowid`)
	if err != nil {
		return nil, fmt.Errorf("read the sessions table: %w", err)
	}
	defer rows.Close()
	var out []sessionrec.Legacy
	for rows.Next() {
		var (
			l               sessionrec.Legacy
			started, closed sql.NullInt64
			open            sql.NullString
		)
		if err := rows.Scan(&l.ID, &l.Project, &started, &closed, &open); err != nil {
			return nil, fmt.Errorf("read the sessions table: %w", err)
		}
		if started.Valid {
			l.StartedAt = fromMicros(started.Int64)
		}
		if closed.Valid {
			l.ClosedAt = fromMicros(closed.Int64)
		}
		l.OpenThreads = []byte(open.String)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the sessions table: %w", err)
	}
	return out, nil
}
