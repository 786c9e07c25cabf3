package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, newStore, &storetest.Options{
		Reopen: func(s store.Store) (store.Store, error) {
			st := s.(*Store)
			if err := st.Close(); err != nil {
				return nil, err
			}
			return Open(context.Background(), st.Path(), nil)
		},
	})
}

// TestStoreNoCache runs the suite with the commit cache off, so that every
// read decodes; the long chains and races are TestStore's.
func TestStoreNoCache(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), &Options{CacheBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, &storetest.Options{Writers: 8, ForkDepth: 100})
}

func TestChildProcess(t *testing.T) { proctest.Child(t) }

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	proctest.Crash(t, "sqlite://"+filepath.Join(t.TempDir(), "crash.db"), 5)
}

func TestConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	proctest.Concurrent(t, "sqlite://"+filepath.Join(t.TempDir(), "procs.db"), 3, 50)
}

// rawDB opens the file with no loom on top, to poke at it.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, err = Open(ctx, path, nil)
	if !errors.Is(err, ErrNewerSchema) || !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("open a database of schema 99: %v, want ErrNewerSchema", err)
	}
	if !strings.Contains(err.Error(), "99") {
		t.Fatalf("the error does not say which version: %v", err)
	}
	// Through the registry too.
	_, err = thread.Open(ctx, "sqlite://"+path, nil)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("thread.Open: %v, want ErrNewerSchema", err)
	}
}

func TestNotLoomRefused(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	other := filepath.Join(dir, "other.db")
	raw := rawDB(t, other)
	if _, err := raw.Exec("CREATE TABLE notes (x TEXT)"); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := Open(ctx, other, nil); !errors.Is(err, ErrNotLoom) {
		t.Fatalf("open another application's database: %v, want ErrNotLoom", err)
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, junk, nil); err == nil {
		t.Fatal("opened a file that is not a database")
	}
}

func TestMigrations(t *testing.T) {
	ctx := t.Context()
	if SchemaVersion != len(migrations) {
		t.Fatalf("SchemaVersion %d, but %d migrations", SchemaVersion, len(migrations))
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := open(ctx, path, nil, migrations)
	if err != nil {
		t.Fatal(err)
	}
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "kept", Messages: []message.Message{message.User("before")}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A later build adds a migration: it runs once, on the next open, and
	// the data stays.
	runs := 0
	next := append(migrations[:len(migrations):len(migrations)], func(ctx context.Context, tx *sql.Tx) error {
		runs++
		_, err := tx.ExecContext(ctx, `CREATE TABLE extra (x INTEGER)`)
		return err
	})
	for range 2 {
		s, err = open(ctx, path, nil, next)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if runs != 1 {
		t.Fatalf("the new migration ran %d times, want once", runs)
	}
	var v int
	if err := rawDB(t, path).QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(next) {
		t.Fatalf("user_version %d (%v), want %d", v, err, len(next))
	}
	// The older build now refuses the file.
	if _, err := open(ctx, path, nil, migrations); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("older build: %v, want ErrNewerSchema", err)
	}
	// A failing migration changes nothing.
	broken := append(next[:len(next):len(next)], func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DROP TABLE commits`); err != nil {
			return err
		}
		return errors.New("boom")
	})
	if _, err := open(ctx, path, nil, broken); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("failing migration: %v", err)
	}
	s, err = open(ctx, path, nil, next)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := thread.New(s, nil).Thread(ctx, th.ID())
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := got.Messages(ctx, thread.ReadOptions{})
	if err != nil || len(msgs) != 1 || msgs[0].Text() != "before" {
		t.Fatalf("after migrations: %v %v", msgs, err)
	}
}

func TestURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		path string
		opts Options
		err  bool
	}{
		{url: "sqlite:///abs/path.db", path: "/abs/path.db"},
		{url: "sqlite://relative/path.db", path: "relative/path.db"},
		{url: "sqlite://./loom.db", path: "./loom.db"},
		{url: "sqlite://loom.db", path: "loom.db"},
		{url: "sqlite:loom.db", path: "loom.db"},
		{url: "sqlite:///a%20b/c%3Fd.db", path: "/a b/c?d.db"},
		{url: "sqlite:///x.db?synchronous=full", path: "/x.db", opts: Options{Synchronous: SyncFull}},
		{url: "sqlite:///x.db?synchronous=FULL&busy_timeout=250ms", path: "/x.db", opts: Options{Synchronous: SyncFull, BusyTimeout: 250 * time.Millisecond}},
		{url: "sqlite:///x.db?busy_timeout=1500", path: "/x.db", opts: Options{BusyTimeout: 1500 * time.Millisecond}},
		{url: "sqlite:///x.db?cache_bytes=-1", path: "/x.db", opts: Options{CacheBytes: -1}},
		{url: "sqlite:///x.db?cache_bytes=lots", err: true},
		{url: "sqlite:///x.db?synchronous=off", err: true},
		{url: "sqlite:///x.db?busy_timeout=soon", err: true},
		{url: "sqlite:///x.db?busy_timeout=-1s", err: true},
		{url: "sqlite:///x.db?journal_mode=delete", err: true},
		{url: "sqlite://", err: true},
		{url: "sqlite://user@host/x.db", err: true},
		{url: "postgres://x", err: true},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		path, opts, err := parseURL(u)
		if c.err {
			if !errors.Is(err, thread.ErrInvalid) {
				t.Errorf("%s: error %v, want ErrInvalid", c.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if path != c.path || *opts != c.opts {
			t.Errorf("%s: path %q opts %+v, want %q %+v", c.url, path, *opts, c.path, c.opts)
		}
	}
}

func TestOpenThroughRegistry(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	t.Chdir(dir)
	db, err := thread.Open(ctx, "sqlite://./sub.db?synchronous=full", nil)
	if err != nil {
		t.Fatal(err)
	}
	th, err := db.Create(ctx, thread.CreateOptions{ID: "x", Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub.db")); err != nil {
		t.Fatalf("the relative path was not used: %v", err)
	}
	// Open takes the URL form as well as a path.
	s, err := Open(ctx, "sqlite:sub.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, err := s.Thread(ctx, th.ID()); err != nil || r.Head == "" {
		t.Fatalf("read back through Open(url): %+v %v", r, err)
	}
	for _, name := range []string{"sub.db", "sub.db-wal"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", name, fi.Mode().Perm(), err)
		}
	}
	var sync int
	if err := s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 1 {
		t.Fatalf("default synchronous %d (%v), want 1 (NORMAL)", sync, err)
	}
	var mode string
	if err := s.r.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q (%v), want wal", mode, err)
	}
	for _, bad := range []string{":memory:", "file:x.db", ""} {
		if _, err := Open(ctx, bad, nil); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := Open(ctx, "x.db", &Options{Synchronous: "sometimes"}); !errors.Is(err, thread.ErrInvalid) {
		t.Errorf("bad synchronous: %v", err)
	}
}

func TestSynchronousFull(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "full.db"), &Options{Synchronous: SyncFull})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var sync int
	if err := s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous %d (%v), want 2 (FULL)", sync, err)
	}
}

// TestGarbageCollection checks the reference counts against the tables:
// after deletes, no commit is left that nothing reaches, and every count is
// what the rows say.
func TestGarbageCollection(t *testing.T) {
	ctx := t.Context()
	s := newStore(t).(*Store)
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := a.Append(ctx, message.User("a"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	msgs, _ := a.Messages(ctx, thread.ReadOptions{})
	b, err := a.Fork(ctx, thread.ForkOptions{ID: "b", At: msgs[9].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, message.User("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.Rollback(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	if err := a.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, s)
	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, s)
	if n := count(t, s, "SELECT count(*) FROM commits"); n != 11 {
		t.Fatalf("%d commits after deleting a, want b's 11", n)
	}
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"commits", "threads", "history", "checkpoints", "labels", "search_entries"} {
		if n := count(t, s, "SELECT count(*) FROM "+table); n != 0 {
			t.Fatalf("%d rows left in %s after every thread is gone", n, table)
		}
	}
}

func count(t *testing.T, s *Store, q string) int {
	t.Helper()
	var n int
	if err := s.r.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRefs checks every commit's count against the rows that point at it
// (child commits, history entries, checkpoints), that every row points at
// a commit there is, and that no search row outlives its commit.
func checkRefs(t *testing.T, s *Store) {
	t.Helper()
	const pointers = `SELECT parent AS k FROM commits WHERE parent IS NOT NULL
		UNION ALL SELECT commit_key FROM history WHERE commit_key IS NOT NULL
		UNION ALL SELECT commit_key FROM checkpoints`
	if n := count(t, s, `SELECT count(*) FROM commits c LEFT JOIN (
			SELECT k, count(*) AS n FROM (`+pointers+`) GROUP BY k
		) r ON r.k = c.k WHERE c.refs != coalesce(r.n, 0)`); n != 0 {
		t.Fatalf("%d commits whose reference count is wrong", n)
	}
	if n := count(t, s, `SELECT count(*) FROM (`+pointers+`) p WHERE NOT EXISTS (SELECT 1 FROM commits c WHERE c.k = p.k)`); n != 0 {
		t.Fatalf("%d references to commits that are gone", n)
	}
	if n := count(t, s, `SELECT count(*) FROM commits WHERE refs <= 0`); n != 0 {
		t.Fatalf("%d unreachable commits kept", n)
	}
	if n := count(t, s, `SELECT count(*) FROM (SELECT commit_key FROM search_entries UNION ALL SELECT commit_key FROM search_pending) x
		WHERE NOT EXISTS (SELECT 1 FROM commits c WHERE c.k = x.commit_key)`); n != 0 {
		t.Fatalf("%d search rows of commits that are gone", n)
	}
}

func TestAncestorsIsOneQuery(t *testing.T) {
	ctx := t.Context()
	s := newStore(t).(*Store)
	var plan []string
	rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+qAncestors, "c_x", int64(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	text := strings.Join(plan, "\n")
	// Every step is a lookup by key: no scan of the commits table.
	if strings.Contains(text, "SCAN c") || strings.Contains(text, "SCAN commits") || strings.Contains(text, "TEMP B-TREE") {
		t.Fatalf("the ancestor walk scans or sorts:\n%s", text)
	}
}

func TestClosedStore(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Thread(ctx, "x"); err == nil {
		t.Fatal("read after close")
	}
	if err := s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: "x"}}}); err == nil {
		t.Fatal("write after close")
	}
}

// TestCacheAcrossProcesses has two stores on one file, as two processes
// would: one deletes a commit that the other has cached and writes a new
// one, which SQLite may give the same row key. The other must read the new
// commit, and not find the deleted one.
func TestCacheAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "shared.db")
	one, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	two, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	db1, db2 := thread.New(one, nil), thread.New(two, nil)
	a, err := db1.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("old")}})
	if err != nil {
		t.Fatal(err)
	}
	old := a.Record().Head
	if c, err := one.Commit(ctx, old); err != nil || c.Messages[0].Text() != "old" {
		t.Fatalf("read old: %v %v", c, err)
	}
	var oldKey int64
	if err := one.r.QueryRowContext(ctx, "SELECT k FROM commits WHERE id = ?", old).Scan(&oldKey); err != nil {
		t.Fatal(err)
	}
	if err := db2.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	b, err := db2.Create(ctx, thread.CreateOptions{ID: "b", Messages: []message.Message{message.User("new, longer")}})
	if err != nil {
		t.Fatal(err)
	}
	var newKey int64
	if err := one.r.QueryRowContext(ctx, "SELECT k FROM commits WHERE id = ?", b.Record().Head).Scan(&newKey); err != nil {
		t.Fatal(err)
	}
	if newKey != oldKey {
		t.Logf("SQLite did not reuse key %d (new key %d); the test is weaker", oldKey, newKey)
	}
	if _, err := one.Commit(ctx, old); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("the deleted commit read through the other store: %v", err)
	}
	for c, err := range one.Ancestors(ctx, b.Record().Head, -1) {
		if err != nil || c.ID != b.Record().Head || c.Messages[0].Text() != "new, longer" {
			t.Fatalf("the new commit read through the other store: %+v %v", c, err)
		}
	}
}

// TestCacheOff runs a part of the suite's ground with the cache turned off.
func TestCacheOff(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "nocache.db"), &Options{CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.cache != nil {
		t.Fatal("the cache is on")
	}
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{Messages: []message.Message{message.User("a"), message.User("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("c")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil || len(msgs) != 3 || msgs[2].Text() != "c" {
			t.Fatalf("read without a cache: %v %v", msgs, err)
		}
	}
}

// TestDamagedChain points a commit at itself and at a missing parent, as a
// damaged file might: the walk ends with an error, never loops.
func TestDamagedChain(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "damaged.db")
	s, err := Open(ctx, path, &Options{CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{Messages: []message.Message{message.User("a")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := th.Append(ctx, message.User("b"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"UPDATE commits SET parent = k WHERE id = ?", "UPDATE commits SET parent = 999999 WHERE id = ?"} {
		if _, err := s.w.ExecContext(ctx, q, c.ID); err != nil {
			t.Fatal(err)
		}
		var got []string
		var last error
		for c, err := range s.Ancestors(ctx, c.ID, -1) {
			if err != nil {
				last = err
				break
			}
			got = append(got, c.ID)
		}
		if last == nil || len(got) > 1 {
			t.Fatalf("%s: walk %v, error %v; want an error", q, got, last)
		}
	}
}

// TestOddPath opens a file whose path holds the characters that a file: URI
// gives a meaning to.
func TestOddPath(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "a b?c#d%20e")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x?mode=ro.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not where it was asked to be: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "x?mode=ro.db" {
			t.Errorf("unexpected file %q beside the database", e.Name())
		}
	}
}

// TestErrorKinds: a duplicate commit id is ErrConflict whatever its parent
// (as in thread.MemoryStore), and a failure to count the rows a checkpoint
// insert wrote is that failure, not a conflict.
func TestErrorKinds(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "kinds.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	head := th.Record().Head
	for _, m := range []store.Store{s, thread.NewMemoryStore()} {
		if m != store.Store(s) {
			if err := m.Apply(ctx, &store.Batch{Commits: []*thread.Commit{{ID: head, Depth: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		err := m.Apply(ctx, &store.Batch{Commits: []*thread.Commit{{ID: head, Parent: "c_missing", Depth: 2}}})
		if !errors.Is(err, thread.ErrConflict) {
			t.Errorf("%T: a duplicate id with a missing parent: %v, want ErrConflict", m, err)
		}
	}

	broken := errors.New("rows affected: broken")
	defer func(f func(sql.Result) (int64, error)) { rowsAffected = f }(rowsAffected)
	rowsAffected = func(sql.Result) (int64, error) { return 0, broken }
	err = s.Apply(ctx, &store.Batch{Checkpoints: []thread.Checkpoint{{Thread: "a", Name: "cp", Commit: head, Version: 1}}})
	if !errors.Is(err, broken) || errors.Is(err, thread.ErrConflict) {
		t.Fatalf("checkpoint whose row count fails: %v, want that error", err)
	}
}
