package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
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

func kind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, thread.ErrConflict):
		return "conflict"
	case errors.Is(err, thread.ErrNotFound):
		return "notfound"
	case errors.Is(err, thread.ErrInvalid):
		return "invalid"
	}
	return "other: " + err.Error()
}

// TestRandomBatchesMatchTheMemoryStore applies random raw batches — new commits that are
// each other's parents, commits that exist, creations with a head or a
// history on new or stored commits, moves, checkpoints dropped and made,
// deletions — to a MemoryStore and, alternately, to two Stores on one file
// (so that each one's cached row keys go stale under the other's deletions
// and reused keys). The error kinds must match, every reference count must
// match the rows that point at the commit, and the same commits must be
// kept.
func TestRandomBatchesMatchTheMemoryStore(t *testing.T) {
	ctx := t.Context()
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("r%d.db", seed))
		s1, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		m := thread.NewMemoryStore()
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		now := time.Now().UTC().Truncate(time.Microsecond)
		nc := 0
		var commits []string // every id ever made
		depth := map[string]int64{"": 0}
		threads := []string{"ta", "tb", "tc", "td"}
		pickCommit := func() string {
			if len(commits) == 0 || rng.IntN(8) == 0 {
				return ""
			}
			return commits[rng.IntN(len(commits))]
		}
		for step := range 200 {
			b := &store.Batch{}
			var fresh []string
			for range rng.IntN(4) {
				var parent string
				if len(fresh) > 0 && rng.IntN(2) == 0 {
					parent = fresh[rng.IntN(len(fresh))]
				} else {
					parent = pickCommit()
				}
				id := fmt.Sprintf("c%d", nc)
				if rng.IntN(15) == 0 && len(commits) > 0 {
					id = commits[rng.IntN(len(commits))] // exists maybe
				} else {
					nc++
				}
				depth[id] = depth[parent] + 1
				b.Commits = append(b.Commits, &thread.Commit{ID: id, Parent: parent, Depth: depth[id], Op: thread.OpAppend, Time: now})
				fresh = append(fresh, id)
			}
			all := append(append([]string{}, commits...), fresh...)
			pick := func() string {
				if rng.IntN(8) == 0 || len(all) == 0 {
					return ""
				}
				if len(fresh) > 0 && rng.IntN(2) == 0 {
					return fresh[rng.IntN(len(fresh))]
				}
				return all[rng.IntN(len(all))]
			}
			th := func() string { return threads[rng.IntN(len(threads))] }
			version := func(id string) int64 {
				r, err := m.Thread(ctx, id)
				if err != nil {
					return 1
				}
				if rng.IntN(10) == 0 {
					return r.Version + 1
				}
				return r.Version
			}
			if rng.IntN(3) == 0 {
				id := th()
				r := &thread.Record{ID: id, Kind: "chat", CreatedAt: now, UpdatedAt: now}
				cr := store.Creation{Record: r, Op: thread.OpCreate}
				if rng.IntN(2) == 0 {
					r.Head, r.Version = pick(), 1
				} else {
					n := 1 + rng.IntN(3)
					for i := range n {
						cr.History = append(cr.History, thread.HistoryEntry{Version: int64(i + 1), Commit: pick(), Op: thread.OpAppend, Time: now})
					}
					r.Head, r.Version = cr.History[n-1].Commit, int64(n)
				}
				b.Create = append(b.Create, cr)
			}
			for range rng.IntN(3) {
				id := th()
				b.Moves = append(b.Moves, store.Move{Thread: id, From: version(id), Head: pick(), Op: thread.OpAppend, Time: now})
			}
			if rng.IntN(3) == 0 {
				b.DropCheckpoints = append(b.DropCheckpoints, store.CheckpointKey{Thread: th(), Name: fmt.Sprintf("cp%d", rng.IntN(3))})
			}
			for range rng.IntN(3) {
				c := pick()
				if c == "" {
					continue
				}
				b.Checkpoints = append(b.Checkpoints, thread.Checkpoint{Thread: th(), Name: fmt.Sprintf("cp%d", rng.IntN(3)), Commit: c, Version: 1, CreatedAt: now})
			}
			if rng.IntN(5) == 0 {
				id := th()
				b.Delete = append(b.Delete, store.Deletion{Thread: id})
			}
			s := s1
			if rng.IntN(2) == 0 {
				s = s2
			}
			e1, e2 := m.Apply(ctx, b), s.Apply(ctx, b)
			if kind(e1) != kind(e2) {
				t.Fatalf("seed %d step %d: memory %v, sqlite %v", seed, step, e1, e2)
			}
			if e1 == nil {
				ok++
				commits = append(commits, fresh...)
			}
			if n := count(t, s, refsWrong); n != 0 {
				t.Fatalf("seed %d step %d: %d commits whose reference count is wrong", seed, step, n)
			}
			for _, c := range commits {
				_, e1 := m.Commit(ctx, c)
				_, e2 := s.Commit(ctx, c)
				_, e3 := s1.Commit(ctx, c)
				_, e4 := s2.Commit(ctx, c)
				if kind(e1) != kind(e2) || kind(e3) != kind(e2) || kind(e4) != kind(e2) {
					t.Fatalf("seed %d step %d: commit %s: memory %v, sqlite %v", seed, step, c, e1, e2)
				}
			}
		}
		if ok == 0 {
			t.Fatalf("seed %d: no batch applied", seed)
		}
		s1.Close()
		s2.Close()
	}
}

const refsWrong = `SELECT count(*) FROM commits c WHERE c.refs !=
	(SELECT count(*) FROM commits x WHERE x.parent = c.k) +
	(SELECT count(*) FROM history h WHERE h.commit_key = c.k) +
	(SELECT count(*) FROM checkpoints p WHERE p.commit_key = c.k)`

// TestCopyOntoStoredCommits copies a thread and then its fork, whose
// shared prefix the destination holds already (the fork's creation points
// its history at stored commits, some in the cache), then deletes both:
// the counts match the rows at every step and nothing is left at the end.
func TestCopyOntoStoredCommits(t *testing.T) {
	ctx := t.Context()
	src := thread.NewMemoryStore()
	sdb := thread.New(src, nil)
	a, err := sdb.Create(ctx, thread.CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := a.Append(ctx, message.User(fmt.Sprint("a", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	msgs, err := a.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Fork(ctx, thread.ForkOptions{ID: "b", At: msgs[4].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, message.User("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}

	s := newStore(t).(*Store)
	// a alone first (ids sort: a, b), then both: a is skipped and b's
	// shared prefix is in s already.
	for i, limit := range []int{1, 0} {
		id := []string{"a", "b"}[i]
		if err := thread.Copy(ctx, s, src, thread.CopyOptions{Filter: thread.ListOptions{AllTenants: true, Limit: limit}}); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, refsWrong); n != 0 {
			t.Fatalf("after copying %s: %d commits whose reference count is wrong", id, n)
		}
	}
	if n, want := count(t, s, "SELECT count(*) FROM threads"), 2; n != want {
		t.Fatalf("%d threads copied, want %d", n, want)
	}
	if got, want := commitIDs(t, s), commitIDs(t, src); got != want {
		t.Fatalf("commits after the copy: %s, want %s", got, want)
	}
	if n, want := count(t, s, "SELECT count(*) FROM commits"), len(strings.Fields(commitIDs(t, src))); n != want {
		t.Fatalf("%d commits stored, want the %d the threads reach", n, want)
	}
	ddb := thread.New(s, nil)
	for _, id := range []string{"a", "b"} {
		if err := ddb.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		checkRefs(t, s)
	}
	for _, table := range []string{"commits", "threads", "history", "checkpoints", "labels"} {
		if n := count(t, s, "SELECT count(*) FROM "+table); n != 0 {
			t.Fatalf("%d rows left in %s after every thread is gone", n, table)
		}
	}
}

// commitIDs lists the commits a store keeps that the threads a and b reach.
func commitIDs(t *testing.T, s store.Store) string {
	t.Helper()
	ctx := t.Context()
	var ids []string
	seen := map[string]bool{}
	for _, id := range []string{"a", "b"} {
		for e, err := range s.History(ctx, id, thread.HistoryOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			if e.Commit == "" {
				continue
			}
			for c, err := range s.Ancestors(ctx, e.Commit, -1) {
				if err != nil {
					t.Fatal(err)
				}
				if !seen[c.ID] {
					seen[c.ID] = true
					ids = append(ids, c.ID)
				}
			}
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}
