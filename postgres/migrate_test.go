package postgres

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/internal/migratetest"
	"github.com/loomthreads/loom/internal/testserver"
)

// releaseFixture is a database written by the release before tenants had
// namespaces (schema version 1, with the work log's loom_sessions table),
// by internal/migratetest/testdata/genfixture.go.txt, dumped with
// pg_dump --inserts --no-owner --no-privileges (its psql-only \restrict
// lines taken out).
const releaseFixture = "testdata/release-26c53b2.sql"

// restoreFixture returns the DSN of a fresh database holding the fixture.
func restoreFixture(t *testing.T) string {
	t.Helper()
	dump, err := os.ReadFile(releaseFixture)
	if err != nil {
		t.Fatal(err)
	}
	dsn := testserver.Postgres(t)
	// A connection of its own: the dump empties its search_path.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), string(dump), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("restore the fixture: %v", err)
	}
	return dsn
}

// TestMigrateRelease opens the release's database: every thread, version,
// checkpoint, fork, state, work item and session record is there, each
// tenant's threads in its own namespace, and loom_sessions is gone.
func TestMigrateRelease(t *testing.T) {
	dsn := restoreFixture(t)
	s := open(t, dsn, nil)
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
	var gone bool
	if err := s.pool.QueryRow(t.Context(), `SELECT to_regclass('loom_sessions') IS NULL`).Scan(&gone); err != nil || !gone {
		t.Errorf("loom_sessions is still there (%v)", err)
	}
	var v int
	if err := s.pool.QueryRow(t.Context(), `SELECT max(version) FROM loom_schema`).Scan(&v); err != nil || v != latestVersion() {
		t.Errorf("schema version %d (%v), want %d", v, err, latestVersion())
	}
}

// TestMigrateReleaseTwoServers: two servers opening the old database at
// once migrate it once and both read it whole.
func TestMigrateReleaseTwoServers(t *testing.T) {
	dsn := restoreFixture(t)
	var wg sync.WaitGroup
	stores := make([]*Store, 2)
	errs := make([]error, 2)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), dsn, nil) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer s.Close()
	}
	var n int
	if err := stores[0].pool.QueryRow(t.Context(), `SELECT count(*) FROM loom_threads WHERE id LIKE '%wls\_%'`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d session threads (%v), want 2", n, err)
	}
	migratetest.Check(t, stores[1], migratetest.Options{Sessions: true})
}
