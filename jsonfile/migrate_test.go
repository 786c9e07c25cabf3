package jsonfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/migratetest"
	"github.com/loomthreads/loom/thread"
)

// releaseFixture is a store written by the release before tenants had
// namespaces (schema 2), by internal/migratetest/testdata/genfixture.go.txt.
const releaseFixture = "testdata/release-26c53b2"

// copyFixture copies the fixture to a new directory, with the empty
// directories of the store's layout that git does not keep.
func copyFixture(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "store")
	err := filepath.WalkDir(releaseFixture, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dir, strings.TrimPrefix(p, releaseFixture))
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o600)
	})
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range []string{"commits", "refs", "threads", "history"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// TestMigrateRelease opens the release's store: every thread, version,
// checkpoint, fork, state and work item is there, each tenant's threads
// under their keys, a long thread's sealed history moved with it.
func TestMigrateRelease(t *testing.T) {
	dir := copyFixture(t)
	s, err := Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"threads/secret.json", "history/long"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	for _, there := range []string{"threads/alice~secret.json", "history/carol~long/0.json"} {
		if _, err := os.Stat(filepath.Join(dir, there)); err != nil {
			t.Error(err)
		}
	}
	migratetest.Check(t, s, migratetest.Options{})
	s.Close()
	// It opens again, as the migration and Check left it.
	s, err = Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := thread.New(s, &thread.Options{Tenant: "carol"}).Thread(t.Context(), "long"); err != nil {
		t.Errorf("carol's long after a reopen: %v", err)
	}
}

// A crash midway through the migration: a thread written under its key
// while its old file is still there, and a history directory moved while
// the thread's old file is still there. The next Open finishes it.
func TestMigrateReleaseAfterACrash(t *testing.T) {
	dir := copyFixture(t)
	copyFile := func(from, to string) {
		data, err := os.ReadFile(filepath.Join(dir, from))
		if err != nil {
			t.Fatal(err)
		}
		// The new file as the migration writes it: id and forked_from keys.
		s := strings.ReplaceAll(string(data), `"id": "secret-fork"`, `"id": "alice/secret-fork"`)
		s = strings.ReplaceAll(s, `"thread": "secret"`, `"thread": "alice/secret"`)
		if err := os.WriteFile(filepath.Join(dir, to), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("threads/secret-fork.json", "threads/alice~secret-fork.json")
	if err := os.Rename(filepath.Join(dir, "history/long"), filepath.Join(dir, "history/carol~long")); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	migratetest.Check(t, s, migratetest.Options{})
}
