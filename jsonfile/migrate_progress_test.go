package jsonfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/loomthreads/loom/internal/migratetest"
	"github.com/loomthreads/loom/thread"
)

// TestMigrateReportsProgress: migrating the release's store reports each
// thread file, Done growing by one up to Total, the number of thread files;
// opening the migrated store reports nothing.
func TestMigrateReportsProgress(t *testing.T) {
	dir := copyFixture(t)
	files, err := filepath.Glob(filepath.Join(dir, "threads", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("thread files %v, %v", files, err)
	}
	open := func() (*Store, []thread.MigrationProgress) {
		t.Helper()
		var got []thread.MigrationProgress
		ctx := thread.WithMigrationProgress(t.Context(), func(p thread.MigrationProgress) { got = append(got, p) })
		s, err := Open(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, got
	}
	s, got := open()
	if len(got) != len(files) {
		t.Errorf("%d reports for %d thread files: %+v", len(got), len(files), got)
	}
	for i, p := range got {
		if want := (thread.MigrationProgress{Store: "jsonfile", Step: "tenant keys", Done: i + 1, Total: len(files)}); p != want {
			t.Errorf("report %d = %+v, want %+v", i, p, want)
		}
	}
	migratetest.Check(t, s, migratetest.Options{})
	s.Close()
	s, got = open()
	defer s.Close()
	if len(got) != 0 {
		t.Errorf("opening the migrated store reported %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "threads", "alice~secret.json")); err != nil {
		t.Error(err)
	}
}
