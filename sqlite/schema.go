package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/loomthreads/loom/thread"
)

// ErrNewerSchema is returned by Open when the database was written by a
// newer version of this package, whose schema this one does not know. It
// wraps thread.ErrUnsupported.
var ErrNewerSchema = fmt.Errorf("database schema is newer than this build of loom: %w", thread.ErrUnsupported)

// ErrNotLoom is returned by Open when the file is a SQLite database of
// something else. It wraps thread.ErrInvalid.
var ErrNotLoom = fmt.Errorf("not a loom database: %w", thread.ErrInvalid)

// applicationID marks a loom database in the SQLite header ("loom").
const applicationID = 0x6c6f6f6d

// migration brings the schema from version i to i+1, where i is its index
// in migrations. It runs inside the transaction that sets user_version.
type migration func(ctx context.Context, tx *sql.Tx) error

// migrations are the schema's history; the schema version is their number,
// kept in PRAGMA user_version. Append, never edit.
var migrations = []migration{
	execAll(schemaV1...),
	execAll(schemaV2...),
	migrateV3,
	execAll(schemaV4...),
	execAll(schemaV5...),
}

// SchemaVersion is the schema version this build writes.
const SchemaVersion = 5

// schemaV5 makes the reads of a fork family and of a page of a label cost
// what they return, not the size of the store (issue 27).
//
// threads_by_fork indexes forks by the thread they were forked from (of
// forks only: most threads are not), for Forks and Descendants.
//
// label_index holds a row per label of each thread, as labels does, with
// the thread's tenant, id and update time beside it: its two indexes give
// a tenant's threads of a label in id order and in the order of updates,
// so that a page of a label is a seek and a walk of that label's entries,
// however rare or common the label is (with labels alone, a page was a
// walk of the tenant's threads, each looked up among the label's). It is
// kept by triggers: on labels, whose rows Apply writes after the thread's
// and deletes with it; and on threads, whose update time changes with
// every move (only a labelled thread's rows are touched). It replaces
// labels_by_value, whose lookups its indexes serve. The labels of the
// threads the file holds are indexed by the migration.
var schemaV5 = []string{
	`CREATE INDEX threads_by_fork ON threads (forked_thread, id) WHERE forked_thread <> ''`,
	`CREATE TABLE label_index (
		thread  INTEGER NOT NULL,
		key     TEXT NOT NULL,
		value   TEXT NOT NULL,
		tenant  TEXT NOT NULL,
		id      TEXT NOT NULL,
		updated INTEGER NOT NULL,
		PRIMARY KEY (thread, key)
	) WITHOUT ROWID`,
	`CREATE INDEX label_index_by_id ON label_index (key, value, tenant, id)`,
	`CREATE INDEX label_index_by_updated ON label_index (key, value, tenant, updated, id)`,
	`INSERT INTO label_index (thread, key, value, tenant, id, updated)
		SELECT l.thread, l.key, l.value, t.tenant, t.id, t.updated FROM labels l JOIN threads t ON t.k = l.thread`,
	`DROP INDEX labels_by_value`,
	`CREATE TRIGGER label_index_insert AFTER INSERT ON labels BEGIN
		INSERT OR REPLACE INTO label_index (thread, key, value, tenant, id, updated)
		SELECT NEW.thread, NEW.key, NEW.value, t.tenant, t.id, t.updated FROM threads t WHERE t.k = NEW.thread;
	END`,
	`CREATE TRIGGER label_index_update AFTER UPDATE ON labels BEGIN
		DELETE FROM label_index WHERE thread = OLD.thread AND key = OLD.key;
		INSERT OR REPLACE INTO label_index (thread, key, value, tenant, id, updated)
		SELECT NEW.thread, NEW.key, NEW.value, t.tenant, t.id, t.updated FROM threads t WHERE t.k = NEW.thread;
	END`,
	`CREATE TRIGGER label_index_delete AFTER DELETE ON labels BEGIN
		DELETE FROM label_index WHERE thread = OLD.thread AND key = OLD.key;
	END`,
	// A move sets updated: the WHEN clause keeps an unlabelled thread's
	// (NULL labels, see encodeStrings) from costing a lookup, and only
	// label_index_by_updated changes. A thread's id and tenant change
	// only in migrations.
	`CREATE TRIGGER label_index_updated AFTER UPDATE OF updated ON threads
		WHEN NEW.labels IS NOT NULL AND NEW.updated IS NOT OLD.updated
	BEGIN
		UPDATE label_index SET updated = NEW.updated WHERE thread = NEW.k;
	END`,
	`CREATE TRIGGER label_index_thread AFTER UPDATE OF id, tenant ON threads
		WHEN NEW.id IS NOT OLD.id OR NEW.tenant IS NOT OLD.tenant
	BEGIN
		UPDATE label_index SET tenant = NEW.tenant, id = NEW.id WHERE thread = NEW.k;
	END`,
	`CREATE TRIGGER label_index_thread_delete AFTER DELETE ON threads WHEN OLD.labels IS NOT NULL BEGIN
		DELETE FROM label_index WHERE thread = OLD.k;
	END`,
}

// schemaV4 indexes threads by their last update, for listings most
// recently updated first (thread.OrderUpdated): a page is a seek in the
// index, not a sort of the tenant's threads.
var schemaV4 = []string{
	`CREATE INDEX threads_by_updated ON threads (tenant, updated, id)`,
}

// schemaV1 is the first schema.
//
// Commits are keyed by an integer (the rowid) and point at their parent by
// it: a walk up the parents is a chain of rowid lookups in one B-tree, which
// is what makes the recursive ancestor query fast. The public text id has a
// unique index. refs counts what points at a commit (child commits, history
// entries, checkpoints); a commit is deleted when it drops to 0.
//
// Times are Unix microseconds in UTC. messages is the JSON array of the
// commit's messages, as package message writes them; state, metadata and
// labels are maps in a small length-prefixed binary form (see codec.go),
// which keeps every byte of keys and values exactly.
var schemaV1 = []string{
	`CREATE TABLE commits (
		k          INTEGER PRIMARY KEY,
		id         TEXT NOT NULL UNIQUE,
		parent     INTEGER,
		depth      INTEGER NOT NULL,
		refs       INTEGER NOT NULL,
		op         TEXT NOT NULL,
		time       INTEGER NOT NULL,
		state_from TEXT NOT NULL,
		messages   BLOB,
		state      BLOB,
		metadata   BLOB
	)`,
	`CREATE TABLE threads (
		k              INTEGER PRIMARY KEY,
		id             TEXT NOT NULL UNIQUE,
		tenant         TEXT NOT NULL,
		kind           TEXT NOT NULL,
		title          TEXT NOT NULL,
		labels         BLOB,
		head           INTEGER,
		version        INTEGER NOT NULL,
		created        INTEGER NOT NULL,
		updated        INTEGER NOT NULL,
		forked_thread  TEXT NOT NULL,
		forked_commit  TEXT NOT NULL,
		forked_message TEXT NOT NULL
	)`,
	`CREATE INDEX threads_by_tenant ON threads (tenant, id)`,
	`CREATE TABLE labels (
		thread INTEGER NOT NULL,
		key    TEXT NOT NULL,
		value  TEXT NOT NULL,
		PRIMARY KEY (thread, key)
	) WITHOUT ROWID`,
	`CREATE INDEX labels_by_value ON labels (key, value, thread)`,
	`CREATE TABLE history (
		thread     INTEGER NOT NULL,
		version    INTEGER NOT NULL,
		commit_key INTEGER,
		op         TEXT NOT NULL,
		time       INTEGER NOT NULL,
		PRIMARY KEY (thread, version)
	) WITHOUT ROWID`,
	`CREATE TABLE checkpoints (
		thread     INTEGER NOT NULL,
		name       TEXT NOT NULL,
		commit_key INTEGER NOT NULL,
		version    INTEGER NOT NULL,
		created    INTEGER NOT NULL,
		PRIMARY KEY (thread, name)
	) WITHOUT ROWID`,
}

func execAll(stmts ...string) migration {
	return func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
}

// migrate brings the schema up to len(migs) in one write transaction, so
// that processes opening the same new file at once migrate it once.
func migrate(ctx context.Context, db *sql.DB, migs []migration) (err error) {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: _txlock
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var version, app int64
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return fmt.Errorf("application id: %w", err)
	}
	if app != 0 && app != applicationID {
		return fmt.Errorf("application id %#x: %w", app, ErrNotLoom)
	}
	if version == 0 {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("%d schema objects and no loom schema version: %w", n, ErrNotLoom)
		}
	}
	if version > int64(len(migs)) {
		return fmt.Errorf("schema version %d, this build knows up to %d; open it with a newer loom: %w", version, len(migs), ErrNewerSchema)
	}
	if version == int64(len(migs)) {
		return tx.Commit()
	}
	for v := version; v < int64(len(migs)); v++ {
		if err := migs[v](ctx, tx); err != nil {
			return fmt.Errorf("migrate schema from version %d to %d: %w", v, v+1, err)
		}
	}
	// PRAGMA takes no parameters; the numbers are ours.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migs))); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return fmt.Errorf("set application id: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit schema: %w", err)
	}
	return nil
}
