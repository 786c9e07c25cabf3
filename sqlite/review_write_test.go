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

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

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

// TestReviewRandomBatches applies random raw batches — new commits that are
// each other's parents, commits that exist, creations with a head or a
// history on new or stored commits, moves, checkpoints dropped and made,
// deletions — to a MemoryStore and, alternately, to two Stores on one file
// (so that each one's cached row keys go stale under the other's deletions
// and reused keys). The error kinds must match, every reference count must
// match the rows that point at the commit, and the same commits must be
// kept.
func TestReviewRandomBatches(t *testing.T) {
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

// TestReviewCopyOntoStoredCommits copies a thread and then its fork, whose
// shared prefix the destination holds already (the fork's creation points
// its history at stored commits, some in the cache), then deletes both:
// the counts match the rows at every step and nothing is left at the end.
func TestReviewCopyOntoStoredCommits(t *testing.T) {
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
