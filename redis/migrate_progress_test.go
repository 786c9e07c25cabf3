package redis_test

import (
	"testing"

	"github.com/loomthreads/loom/internal/migratetest"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
)

// migrationReports opens url with a context that collects the migration's
// reports, and returns them with the store.
func migrationReports(t *testing.T, url string) (*redis.Store, []thread.MigrationProgress) {
	t.Helper()
	var got []thread.MigrationProgress
	ctx := thread.WithMigrationProgress(t.Context(), func(p thread.MigrationProgress) { got = append(got, p) })
	s, err := redis.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, got
}

// TestMigrateReportsProgress: migrating the release's data reports each
// thread moved, then each session record carried into a thread, then each
// page of threads listed in the fork and label sets, every step ending
// with Done == Total; opening the migrated data reports nothing.
func TestMigrateReportsProgress(t *testing.T) {
	url, rdb := restoreFixture(t)
	threads, err := rdb.ZCard(t.Context(), "loom:a").Result()
	if err != nil {
		t.Fatal(err)
	}
	s, got := migrationReports(t, url)
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
	steps := map[string]thread.MigrationProgress{}
	reports := map[string]int{}
	var order []string
	for i, p := range got {
		reports[p.Step]++
		last, seen := steps[p.Step]
		if !seen {
			order = append(order, p.Step)
		}
		if p.Store != "redis" || p.Total <= 0 || p.Done < 1 || p.Done > p.Total ||
			(seen && (p.Done < last.Done || p.Total != last.Total)) || p.Step != order[len(order)-1] {
			t.Errorf("report %d: %+v after %+v", i, p, last)
		}
		steps[p.Step] = p
	}
	if len(order) != 3 || order[0] != "tenant keys" || order[1] != "session records" || order[2] != "fork and label sets" {
		t.Fatalf("steps %q, want tenant keys, session records, then fork and label sets", order)
	}
	// The sets list every thread, the session records' among them.
	if p := steps["fork and label sets"]; p.Done != p.Total || p.Total != int(threads)+2 {
		t.Errorf("fork and label sets ended at %+v, want %d of %d", p, int(threads)+2, int(threads)+2)
	}
	// One report per thread: none of the release's was moved before.
	if p := steps["tenant keys"]; p.Done != p.Total || p.Total != int(threads) || reports["tenant keys"] != int(threads) {
		t.Errorf("tenant keys: %d reports, the last %+v; the data held %d threads", reports["tenant keys"], p, threads)
	}
	if p := steps["session records"]; p.Done != p.Total || p.Total != 2 {
		t.Errorf("session records ended at %+v, want 2 of 2", p)
	}
	if _, again := migrationReports(t, url); len(again) != 0 {
		t.Errorf("opening migrated data reported %+v", again)
	}
}
