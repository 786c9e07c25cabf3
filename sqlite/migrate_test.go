package sqlite

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loomthreads/loom/internal/migratetest"
)

// releaseFixture is a database written by the release before tenants had
// namespaces (schema version 1, with the work log's sessions table),
// by internal/migratetest/testdata/genfixture.go.txt.
const releaseFixture = "testdata/release-26c53b2.db"

func copyFixture(tb testing.TB) string {
	tb.Helper()
	data, err := os.ReadFile(releaseFixture)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "loom.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestMigrateRelease opens the release's database: every thread, version,
// checkpoint, fork, state, work item and session record is there, each
// tenant's threads in its own namespace; and it opens again unchanged.
func TestMigrateRelease(t *testing.T) {
	path := copyFixture(t)
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
	s.Close()
	var tables int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'sessions'`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("the sessions table is still there: %d, %v", tables, err)
	}
	var v int
	if err := rawDB(t, path).QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Errorf("user_version %d (%v), want %d", v, err, SchemaVersion)
	}
}

// TestMigrateReleaseFromProcessesAtOnce: several stores opening the old
// file at once migrate it once, and every one of them reads it whole.
func TestMigrateReleaseAtOnce(t *testing.T) {
	path := copyFixture(t)
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), path, nil) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer s.Close()
	}
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM threads WHERE id LIKE '%wls_%'`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d session threads (%v), want 2: the sessions were carried more than once", n, err)
	}
	migratetest.Check(t, stores[len(stores)-1], migratetest.Options{Sessions: true})
}

// A crash after the sessions were carried and before the table was
// dropped: the next open finds the threads made and drops the table.
func TestMigrateSessionsCarriedOnce(t *testing.T) {
	path := copyFixture(t)
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := rawDB(t, path)
	// Put the table back as the crash would have left it.
	for _, q := range []string{
		`CREATE TABLE sessions (id TEXT PRIMARY KEY, project TEXT NOT NULL, started_at INTEGER, closed_at INTEGER, open_threads TEXT)`,
		`INSERT INTO sessions VALUES ('alice:s-alice-1', 'alice/victim', 1, 2, '["alice item two"]')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s, err = Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
}
