package sqlite

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// TestRelabelMovesListings relabels a thread through the public API and
// lists it by its old and new labels, down every path a listing of labels
// takes: label_index (a tenant's listing, in id and update order), the
// labels table behind it (a second label), and the labels table alone
// (every tenant's). A move that did not rebuild the thread's labels rows
// would leave it under its old labels and not under its new ones.
func TestRelabelMovesListings(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	x, err := db.Create(ctx, thread.CreateOptions{ID: "x", Labels: map[string]string{"team": "red", "env": "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "y", Labels: map[string]string{"team": "blue"}}); err != nil {
		t.Fatal(err)
	}
	// listed checks the threads listed by each label filter.
	listed := func(when string, want map[string][]string) {
		t.Helper()
		for _, tc := range []struct {
			name   string
			labels map[string]string
		}{
			{"team=red", map[string]string{"team": "red"}},
			{"team=blue", map[string]string{"team": "blue"}},
			{"env=prod", map[string]string{"env": "prod"}},
			{"env=dev", map[string]string{"env": "dev"}},
			// env comes first: label_index finds the thread by it, the
			// labels table must then hold its team.
			{"env=dev,team=red", map[string]string{"env": "dev", "team": "red"}},
			{"env=dev,team=blue", map[string]string{"env": "dev", "team": "blue"}},
		} {
			w := want[tc.name]
			for _, order := range []thread.Order{thread.OrderID, thread.OrderUpdated} {
				got := labelled(t, db, tc.labels, order)
				slices.Sort(got)
				if !slices.Equal(got, w) {
					t.Errorf("%s: threads with %s (order %d): %v, want %v", when, tc.name, order, got, w)
				}
			}
			// Every tenant's listing reads the labels table alone.
			var all []string
			for r, err := range s.Threads(ctx, thread.ListOptions{AllTenants: true, Labels: tc.labels}) {
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, r.ID)
			}
			if !slices.Equal(all, w) {
				t.Errorf("%s: every tenant's threads with %s: %v, want %v", when, tc.name, all, w)
			}
		}
		checkLabelIndex(t, s.r)
	}
	listed("created", map[string][]string{
		"team=red": {"x"}, "team=blue": {"y"}, "env=prod": {"x"},
	})
	if err := x.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"team": "blue", "env": "dev"}}); err != nil {
		t.Fatal(err)
	}
	listed("relabelled", map[string][]string{
		"team=blue": {"x", "y"}, "env=dev": {"x"}, "env=dev,team=blue": {"x"},
	})
	if err := x.Update(ctx, thread.UpdateOptions{Labels: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	listed("cleared", map[string][]string{"team=blue": {"y"}})
	if r, err := s.Thread(ctx, "x"); err != nil || len(r.Labels) != 0 {
		t.Fatalf("x after its labels were cleared: %+v %v", r, err)
	}
}

// TestMoveTitleDurable sets a thread's title with a move and reads it from
// the file, reopened: a move that sets the title keeps it, one that sets
// only the labels leaves it.
func TestMoveTitleDurable(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "title.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	x, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "x", Title: "old", Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	title := "new"
	if err := x.Update(ctx, thread.UpdateOptions{Title: &title}); err != nil {
		t.Fatal(err)
	}
	reopen := func() *store.Record {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err = Open(ctx, path, nil); err != nil {
			t.Fatal(err)
		}
		r, err := s.Thread(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := reopen(); r.Title != "new" || r.Version != 2 {
		t.Fatalf("after the move that set it: title %q at version %d, want \"new\" at 2", r.Title, r.Version)
	}
	x, err = thread.New(s, nil).Thread(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Update(ctx, thread.UpdateOptions{Labels: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if r := reopen(); r.Title != "new" || r.Labels["k"] != "v" {
		t.Fatalf("after a move of the labels only: title %q labels %v, want \"new\" and k=v", r.Title, r.Labels)
	}
}

// lineIDs returns the ids of the commits from head down to the root.
func lineIDs(t *testing.T, s *Store, head string) []string {
	t.Helper()
	var ids []string
	for c, err := range s.Ancestors(t.Context(), head, 0) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	return ids
}

// commitRows counts the rows of the commits table, on the write
// connection: what is stored, whatever the read pool's snapshot.
func commitRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.w.QueryRowContext(t.Context(), "SELECT count(*) FROM commits").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkFreed fails unless every commit of ids is gone from the file and
// from the commit cache.
func checkFreed(t *testing.T, s *Store, when string, ids []string) {
	t.Helper()
	for _, id := range ids {
		if c := s.CachedCommit(id); c != nil {
			t.Errorf("%s: freed commit %s is still in the cache", when, id)
		}
		if _, err := s.Commit(t.Context(), id); !errors.Is(err, thread.ErrNotFound) {
			t.Errorf("%s: freed commit %s: %v, want ErrNotFound", when, id, err)
		}
	}
}

// checkCached fails unless every commit of ids is in the commit cache: a
// test that it is forgotten needs it there first.
func checkCached(t *testing.T, s *Store, ids []string) {
	t.Helper()
	for _, id := range ids {
		if s.CachedCommit(id) == nil {
			t.Fatalf("commit %s was not cached when written", id)
		}
	}
}

// TestFreedCommitsLeaveCache deletes threads and drops a checkpoint so
// that commits are freed: each freed commit leaves the commit cache as it
// leaves the file, and so do the ancestors that only it kept; those that
// another thread keeps stay.
func TestFreedCommitsLeaveCache(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("a0")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"a1", "a2", "a3", "a4", "a5"} {
		if _, err := a.Append(ctx, message.User(text)); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := a.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// b shares a's first three commits.
	b, err := a.Fork(ctx, thread.ForkOptions{ID: "b", At: msgs[2].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, message.User("b3")); err != nil {
		t.Fatal(err)
	}
	aLine := lineIDs(t, s, a.Record().Head)
	bLine := lineIDs(t, s, b.Record().Head)
	if len(aLine) != 6 || len(bLine) != 4 || aLine[3] != bLine[1] {
		t.Fatalf("lines: a %v, b %v; want b to share a's first three commits", aLine, bLine)
	}
	checkCached(t, s, aLine)
	checkCached(t, s, bLine)
	if n := commitRows(t, s); n != 7 {
		t.Fatalf("%d commits stored, want 7", n)
	}

	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	// a's last three commits were a's alone; the head only was left
	// without references by the delete, its two parents by it.
	checkFreed(t, s, "a deleted", aLine[:3])
	if n := commitRows(t, s); n != 4 {
		t.Errorf("%d commits stored after a was deleted, want b's 4", n)
	}
	for _, id := range bLine {
		if _, err := s.Commit(ctx, id); err != nil {
			t.Errorf("b's commit %s after a was deleted: %v", id, err)
		}
	}

	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	checkFreed(t, s, "b deleted", bLine)
	if n := commitRows(t, s); n != 0 {
		t.Errorf("%d commits stored after every thread was deleted, want 0", n)
	}

	// A checkpoint that alone keeps a line of commits: dropping it frees
	// them all.
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "k"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var line []*store.Commit
	parent := ""
	for i, id := range []string{"k1", "k2", "k3"} {
		line = append(line, &store.Commit{ID: id, Parent: parent, Depth: int64(i + 1), Op: store.OpAppend, Time: now,
			Messages: []message.Message{message.User(id)}})
		parent = id
	}
	err = s.Apply(ctx, &store.Batch{Commits: line,
		Checkpoints: []store.Checkpoint{{Thread: "k", Name: "cp", Commit: "k3", Version: 1, CreatedAt: now}}})
	if err != nil {
		t.Fatal(err)
	}
	kLine := []string{"k3", "k2", "k1"}
	if got := lineIDs(t, s, "k3"); !cmp.Equal(got, kLine) {
		t.Fatalf("checkpoint's line %v, want %v", got, kLine)
	}
	checkCached(t, s, kLine)
	if err := s.Apply(ctx, &store.Batch{DropCheckpoints: []store.CheckpointKey{{Thread: "k", Name: "cp"}}}); err != nil {
		t.Fatal(err)
	}
	checkFreed(t, s, "checkpoint dropped", kLine)
	if n := commitRows(t, s); n != 0 {
		t.Errorf("%d commits stored after the checkpoint was dropped, want 0", n)
	}
	checkRefs(t, s)
}
