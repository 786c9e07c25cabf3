package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomthreads/loom/internal/sessionrec"
	"github.com/loomthreads/loom/thread"
)

// schemaV2 gives each tenant its own namespace of thread ids: a thread of
// a tenant other than the default is kept under its key, tenant/id
// (thread.Key), and so is the thread it was forked from (always one of the
// same tenant's). History and checkpoints point at threads by seq, which
// does not change.
const schemaV2 = `
UPDATE loom_threads SET id = tenant || '/' || id WHERE tenant <> '' AND strpos(id, '/') = 0;
UPDATE loom_threads SET forked_thread = tenant || '/' || forked_thread
	WHERE tenant <> '' AND forked_thread <> '' AND strpos(forked_thread, '/') = 0;
`

// carrySessions carries the rows of loom_sessions, the table this package
// kept for package worklog before session records lived in threads, into
// threads (sessionrec.LegacyBatch), then drops it. The batch is atomic; a
// crash before the drop leaves the table, and the next Open finds the
// threads made (ErrConflict) and drops it. Servers opening the database at
// once do the same.
func (s *Store) carrySessions(ctx context.Context) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('loom_sessions') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("look for loom_sessions: %w", err)
	}
	if !exists {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, project, started_at, closed_at, open_threads::text FROM loom_sessions ORDER BY seq`)
	if undefinedTable(err) {
		return nil // another server carried it and dropped it meanwhile
	}
	if err != nil {
		return fmt.Errorf("read loom_sessions: %w", err)
	}
	var legacy []sessionrec.Legacy
	for rows.Next() {
		var (
			l               sessionrec.Legacy
			started, closed *time.Time
			open            *string
		)
		if err := rows.Scan(&l.ID, &l.Project, &started, &closed, &open); err != nil {
			rows.Close()
			return fmt.Errorf("read loom_sessions: %w", err)
		}
		if started != nil {
			l.StartedAt = *started
		}
		if closed != nil {
			l.ClosedAt = *closed
		}
		if open != nil {
			l.OpenThreads = []byte(*open)
		}
		legacy = append(legacy, l)
	}
	rows.Close()
	if err := rows.Err(); undefinedTable(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read loom_sessions: %w", err)
	}
	b, err := sessionrec.LegacyBatch(legacy, time.Now())
	if err != nil {
		return fmt.Errorf("carry loom_sessions into threads: %w", err)
	}
	if len(b.Create) > 0 {
		if err := s.Apply(ctx, b); err != nil && !errors.Is(err, thread.ErrConflict) {
			return fmt.Errorf("carry loom_sessions into threads: %w", err)
		}
	}
	if _, err := s.pool.Exec(ctx, `DROP TABLE IF EXISTS loom_sessions`, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("drop loom_sessions: %w", err)
	}
	return nil
}

// undefinedTable reports whether err is PostgreSQL's "relation does not
// exist".
func undefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
