package jsonfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// copyDir copies the store in src to dst as a process killed at this
// moment would leave it (writes are not lost by a kill).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUncommittedCommitsInvisible: the commit files of a batch that never
// reached its commit point (a kill just before the intent, a failed intent
// sync) are never readable, and leave no file behind.
func TestUncommittedCommitsInvisible(t *testing.T) {
	ctx := t.Context()
	for _, when := range []string{"killed", "intent fails"} {
		t.Run(when, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, nil)
			th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("x")}})
			if err != nil {
				t.Fatal(err)
			}
			snap := filepath.Join(t.TempDir(), "snap")
			copied := false
			s.testHooks.sync = func(name string) error {
				switch {
				case when == "killed" && filepath.Base(name) == "commits" && !copied:
					// Step 1 is done, the intent is not written: a kill
					// now leaves the directory as it is.
					copyDir(t, dir, snap)
					copied = true
				case when == "intent fails" && strings.Contains(name, "intent"):
					return errors.New("EIO")
				}
				return nil
			}
			c := &thread.Commit{ID: "c_new", Parent: th.Record().Head, Depth: 2, Op: thread.OpAppend, Messages: []message.Message{message.User("y")}}
			err = s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}, Moves: []store.Move{{Thread: "a", From: 1, Head: "c_new", Op: thread.OpAppend}}})
			s.testHooks.sync = nil
			if when == "killed" {
				if err != nil || !copied {
					t.Fatalf("apply: %v; snapshot taken: %v", err, copied)
				}
				s.Close()
				dir = snap
				s = openTest(t, dir, nil)
			} else {
				if err == nil {
					t.Fatal("apply with a failing intent sync succeeded")
				}
				if _, err := s.Commit(ctx, "c_new"); !errors.Is(err, thread.ErrNotFound) {
					t.Fatalf("commit of the failed batch: %v, want ErrNotFound", err)
				}
				s.Close()
				s = openTest(t, dir, nil)
			}
			if _, err := s.Commit(ctx, "c_new"); !errors.Is(err, thread.ErrNotFound) {
				t.Fatalf("after reopen, commit of the uncommitted batch: %v, want ErrNotFound", err)
			}
			if r, err := s.Thread(ctx, "a"); err != nil || r.Version != 1 {
				t.Fatalf("thread after the uncommitted batch: %+v %v", r, err)
			}
			if n := count(t, dir, "commits"); n != 1 {
				t.Fatalf("%d files in commits/, want 1", n)
			}
			// The id is free.
			if err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOrphansMigrated: a schema 1 directory may hold commit files that a
// failed batch left without a refs file; opening it removes them.
func TestOrphansMigrated(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	orphan := `{"id":"c_orphan","depth":1,"messages":[]}`
	if err := os.WriteFile(filepath.Join(dir, "commits", "c_orphan.json"), []byte(orphan), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "loom.json"), []byte(`{"format":"loom.jsonfile","schema":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, nil)
	if _, err := s.Commit(ctx, "c_orphan"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("orphan after migration: %v", err)
	}
	if _, err := s.Commit(ctx, th.Record().Head); err != nil {
		t.Fatalf("a stored commit after migration: %v", err)
	}
}

// twoThreads makes threads a (one message) and b (empty) and returns the
// batch that resets a and restores b to a's head: two thread files.
func twoThreads(t *testing.T, s *Store) *store.Batch {
	t.Helper()
	ctx := t.Context()
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	return &store.Batch{Moves: []store.Move{
		{Thread: "a", From: 1, Head: "", Op: thread.OpReset},
		{Thread: "b", From: 1, Head: a.Record().Head, Op: thread.OpRestore},
	}}
}

func versions(t *testing.T, s *Store) (a, b int64, err error) {
	t.Helper()
	ra, err := s.Thread(t.Context(), "a")
	if err != nil {
		return 0, 0, err
	}
	rb, err := s.Thread(t.Context(), "b")
	if err != nil {
		return 0, 0, err
	}
	return ra.Version, rb.Version, nil
}

// TestCommittedBatchFinishes: once its intent is durable a batch is
// committed. A failure while doing it is tried again; if the disk keeps
// failing, Apply succeeds all the same (the batch is committed: an error
// would have it retried), readers see it whole (never half of it),
// and the first read that tries once the disk is back finishes it.
func TestCommittedBatchFinishes(t *testing.T) {
	ctx := t.Context()
	t.Run("transient", func(t *testing.T) {
		s := openTest(t, t.TempDir(), nil)
		b := twoThreads(t, s)
		failures := 1
		s.testHooks.sync = func(name string) error {
			if strings.HasSuffix(name, "-b.json") && failures > 0 {
				failures--
				return errors.New("ENOSPC")
			}
			return nil
		}
		if err := s.Apply(ctx, b); err != nil {
			t.Fatalf("apply with one failed write: %v", err)
		}
		if va, vb, err := versions(t, s); err != nil || va != 2 || vb != 2 {
			t.Fatalf("a v%d, b v%d, %v; want both at 2", va, vb, err)
		}
	})
	t.Run("lasting", func(t *testing.T) {
		dir := t.TempDir()
		s := openTest(t, dir, nil)
		b := twoThreads(t, s)
		s.testHooks.sync = func(name string) error {
			if strings.HasSuffix(name, "-b.json") {
				return errors.New("ENOSPC")
			}
			return nil
		}
		if err := s.Apply(ctx, b); err != nil {
			t.Fatalf("apply with a lasting failure after the commit point: %v, want success", err)
		}
		// Readers read through the committed batch: whole, never half.
		if va, vb, err := versions(t, s); err != nil || va != 2 || vb != 2 {
			t.Fatalf("read while the batch cannot be finished: a v%d, b v%d, %v; want both at 2", va, vb, err)
		}
		s.testHooks.sync = nil
		s.pending.Load().tried = time.Time{} // a reader tries again
		if va, vb, err := versions(t, s); err != nil || va != 2 || vb != 2 {
			t.Fatalf("a v%d, b v%d, %v; want both at 2", va, vb, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "intent.json")); err != nil || fi.Size() != 0 {
			t.Fatalf("the reader left the intent: %v", err)
		}
		// A retry of the committed batch is a conflict: it happened.
		if err := s.Apply(ctx, b); !errors.Is(err, thread.ErrConflict) {
			t.Fatalf("apply again: %v", err)
		}
	})
}

// editCommit rewrites a commit file's parent, as a damaged or hand-edited
// file might.
func editCommit(t *testing.T, dir, id, parent string) {
	t.Helper()
	p := filepath.Join(dir, "commits", id+".json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeCommit(b)
	if err != nil {
		t.Fatal(err)
	}
	c.Parent = parent
	f, err := toCommitFile(c)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nb, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLoopingParents: a chain of parents that loops ends the walk with
// ErrInvalid instead of yielding forever.
func TestLoopingParents(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, &Options{NoSync: true})
	th, err := thread.New(s, nil).Create(t.Context(), thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("1")}})
	if err != nil {
		t.Fatal(err)
	}
	c1 := th.Record().Head
	c2, err := th.Append(t.Context(), message.User("2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		edit     func()
		start    string
		maxYield int
	}{
		{"self", func() { editCommit(t, dir, c1, c1) }, c1, 1},
		{"two", func() { editCommit(t, dir, c1, c2.ID) }, c2.ID, 3},
	} {
		tc.edit()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		n := 0
		var last error
		for _, err := range s.Ancestors(ctx, tc.start, -1) {
			if err != nil {
				last = err
				break
			}
			n++
		}
		cancel()
		if !errors.Is(last, thread.ErrInvalid) || n > tc.maxYield {
			t.Errorf("%s: %d commits, then %v; want at most %d, then ErrInvalid", tc.name, n, last, tc.maxYield)
		}
	}
}

// TestLockTimeout: a lock that another store holds (as a stopped process
// would) makes Open, Apply and a read that must finish a batch fail after
// Options.LockTimeout or when the context ends, instead of waiting
// forever; so does the lock of this store's own goroutines.
func TestLockTimeout(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	holder := openTest(t, dir, nil)
	if err := holder.lock(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := Open(ctx, dir, &Options{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("open while another store holds the lock: %v, want ErrLockTimeout", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := Open(short, dir, &Options{LockTimeout: -1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open with a context that ends: %v", err)
	}
	// The same store: its own lock is held by "another goroutine".
	if err := holder.Apply(short, &store.Batch{Commits: []*thread.Commit{{ID: "c1"}}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("apply while a goroutine holds the lock: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the waits took %v", d)
	}
	holder.unlock()
	// A second store waits its turn and gets the lock once it is free.
	other, err := Open(ctx, dir, &Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := holder.lock(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		// Release the lock once other's Apply waits for it: other holds
		// its own semaphore and tries the file lock. (Not in time, it
		// simply finds the lock free.)
		testwait.Within(10*time.Second, func() bool { return len(other.sem) == 1 })
		holder.unlock()
	}()
	if err := other.Apply(ctx, &store.Batch{Commits: []*thread.Commit{{ID: "c1"}}}); err != nil {
		t.Fatalf("apply once the lock is released: %v", err)
	}
}

// TestPermissions: the store's files and directories are its owner's only.
func TestPermissions(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "store")
	s := openTest(t, dir, &Options{NoSync: true})
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range historyChunk {
		if _, err := th.Append(ctx, message.User(string(rune('a'+i%26)))); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want no access for group and others", p, fi.Mode().Perm())
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "history", "a", "0.json")); err != nil || n < 10 {
		t.Fatalf("%d files, sealed chunk %v", n, err)
	}
}

// TestEmptyCommitID: a commit without an id is a conflict, as in
// thread.MemoryStore ("" is the empty root, which exists); a nil commit or
// an id that is no file name is invalid.
func TestEmptyCommitID(t *testing.T) {
	s := openTest(t, t.TempDir(), &Options{NoSync: true})
	for _, tc := range []struct {
		c    *thread.Commit
		want error
	}{
		{&thread.Commit{ID: ""}, thread.ErrConflict},
		{nil, thread.ErrInvalid},
		{&thread.Commit{ID: "../x"}, thread.ErrInvalid},
	} {
		if err := s.Apply(t.Context(), &store.Batch{Commits: []*thread.Commit{tc.c}}); !errors.Is(err, tc.want) {
			t.Errorf("commit %+v: %v, want %v", tc.c, err, tc.want)
		}
	}
	if err := (thread.NewMemoryStore()).Apply(t.Context(), &store.Batch{Commits: []*thread.Commit{{ID: ""}}}); !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("memory store: %v", err)
	}
}

// TestIgnoredCase: on a file system that ignores case, "Foo" and "foo"
// would be one file: ids with upper-case letters are refused there, and
// never read. Everywhere, a file read under a name that is not its id's
// (another case of it) is not found.
func TestIgnoredCase(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, &Options{NoSync: true})
	if s.foldCase {
		t.Skip("this file system ignores case")
	}
	db := thread.New(s, nil)
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "Foo"}); err != nil {
		t.Fatalf("an upper-case id where case counts: %v", err)
	}
	foo, err := db.Create(ctx, thread.CreateOptions{ID: "foo", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	// A file under a name of another case, as a case-insensitive file
	// system would show it.
	for _, p := range [][2]string{
		{"threads/foo.json", "threads/FOO.json"},
		{"commits/" + foo.Record().Head + ".json", "commits/" + strings.ToUpper(foo.Record().Head) + ".json"},
	} {
		copyDir(t, filepath.Join(dir, p[0]), filepath.Join(dir, p[1]))
	}
	if _, err := s.Thread(ctx, "FOO"); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("thread FOO read from foo's file: %v", err)
	}
	if _, err := s.Commit(ctx, strings.ToUpper(foo.Record().Head)); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("a commit read from another's file: %v", err)
	}

	s.foldCase = true // as Open finds it on such a file system
	for _, b := range []*store.Batch{
		{Create: []store.Creation{{Record: &thread.Record{ID: "Bar", Kind: thread.KindLocal, Version: 1}, Op: thread.OpCreate}}},
		{Commits: []*thread.Commit{{ID: "C_Upper", Depth: 1}}},
	} {
		if err := s.Apply(ctx, b); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("an upper-case id where case is ignored: %v, want ErrInvalid", err)
		}
	}
	if _, err := s.Thread(ctx, "Foo"); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("thread Foo where case is ignored: %v", err)
	}
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "bar"}); err != nil {
		t.Fatal(err)
	}
}
