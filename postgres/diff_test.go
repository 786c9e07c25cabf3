package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// tee is a store that applies every batch to the memory store (the
// reference) and to the store under test, and reads from the reference.
type tee struct {
	*thread.MemoryStore
	pg *Store
	t  *testing.T
}

func (s *tee) Apply(ctx context.Context, b *store.Batch) error {
	want := s.MemoryStore.Apply(ctx, b)
	got := s.pg.Apply(ctx, b)
	for _, e := range []error{thread.ErrNotFound, thread.ErrConflict, thread.ErrInvalid} {
		if errors.Is(got, e) != errors.Is(want, e) || (got == nil) != (want == nil) {
			s.t.Errorf("apply: got %v, the memory store %v", got, want)
			break
		}
	}
	return want
}

// TestSameAsMemory runs a random mix of operations, big enough to cross
// every page of every read, on the memory store and on PostgreSQL, and
// checks that every read gives the same answer.
func TestSameAsMemory(t *testing.T) {
	ctx := t.Context()
	pg := open(t, testserver.Postgres(t), nil)
	s := &tee{MemoryStore: thread.NewMemoryStore(), pg: pg, t: t}
	db := thread.New(s, &thread.Options{Now: func() time.Time { return time.Unix(1700000000, 123456789) }})
	r := rand.New(rand.NewPCG(7, 11))

	// A long thread, made in few batches: a history and a line longer than
	// a page, commits without messages on the way.
	long, err := db.Create(ctx, thread.CreateOptions{ID: "long"})
	if err != nil {
		t.Fatal(err)
	}
	var b store.Batch
	parent := (*thread.Commit)(nil)
	now := time.Unix(1700000000, 0).UTC()
	var hist []thread.HistoryEntry
	hist = append(hist, thread.HistoryEntry{Version: 1, Op: thread.OpCreate, Time: now})
	for i := range 2600 {
		c := &thread.Commit{ID: fmt.Sprintf("c%05d", i), Op: thread.OpAppend, Time: now.Add(time.Duration(i) * time.Microsecond)}
		if parent != nil {
			c.Parent, c.Depth, c.StateFrom = parent.ID, parent.Depth, parent.StateFrom
		}
		if i%7 == 3 {
			c.Op, c.StateFrom, c.State = thread.OpState, c.ID, map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(i))}
		} else {
			n := 1 + r.IntN(3)
			for j := range n {
				c.Messages = append(c.Messages, message.User(fmt.Sprintf("m%d.%d", i, j)))
			}
			c.Depth += int64(n)
		}
		b.Commits = append(b.Commits, c)
		hist = append(hist, thread.HistoryEntry{Version: int64(len(hist) + 1), Commit: c.ID, Op: c.Op, Time: c.Time})
		parent = c
	}
	rec := long.Record()
	rec.ID, rec.Head, rec.Version = "long2", parent.ID, int64(len(hist))
	b.Create = []store.Creation{{Record: &rec, Op: thread.OpLoad, History: hist}}
	if err := s.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	// Many threads: more than a page of listing, in two tenants, with labels.
	for i := range 300 {
		o := thread.CreateOptions{ID: fmt.Sprintf("t%04d", r.IntN(100000)), Kind: []thread.Kind{thread.KindLocal, thread.KindService, ""}[i%3],
			Labels: map[string]string{"team": fmt.Sprint(i % 4), "odd": fmt.Sprint(i%2 == 1)}}
		d := db
		if i%5 == 0 {
			d = db.WithTenant("other")
		}
		th, err := d.Create(ctx, o)
		if errors.Is(err, thread.ErrConflict) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := th.Append(ctx, message.User("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Forks, checkpoints, rollbacks and deletions on the long thread.
	src, err := db.Thread(ctx, "long2")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := src.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		f, err := src.Fork(ctx, thread.ForkOptions{ID: fmt.Sprintf("fork%02d", i), At: msgs[r.IntN(len(msgs))].ID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Append(ctx, message.User("f")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Checkpoint(ctx, fmt.Sprintf("cp%d", i)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := f.Reset(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if i%4 == 1 {
			if err := f.Rollback(ctx, fmt.Sprintf("cp%d", i)); err != nil {
				t.Fatal(err)
			}
			if err := f.DeleteCheckpoint(ctx, fmt.Sprintf("cp%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 10 {
		if i%3 == 1 {
			if err := db.Delete(ctx, fmt.Sprintf("fork%02d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Delete(ctx, "long"); err != nil {
		t.Fatal(err)
	}

	// Every read, both ways.
	same := func(what string, want, got any) {
		t.Helper()
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if string(w) != string(g) {
			t.Fatalf("%s:\npostgres %.600s\nmemory   %.600s", what, g, w)
		}
	}
	for _, o := range []thread.ListOptions{{}, {AllTenants: true}, {Tenant: "other"}, {Desc: true, AllTenants: true}, {Kind: thread.KindService},
		{Labels: map[string]string{"team": "1"}}, {Labels: map[string]string{"team": "2", "odd": "false"}, Desc: true},
		{After: "t5", Limit: 300}, {After: "t5", Desc: true, Limit: 3}, {Limit: 257}, {After: "zz", Desc: true}} {
		same(fmt.Sprintf("threads %+v", o), collect(t, s.MemoryStore.Threads(ctx, o)), collect(t, pg.Threads(ctx, o)))
	}
	for i, rec := range collect(t, s.MemoryStore.Threads(ctx, thread.ListOptions{AllTenants: true})) {
		id := rec.ID
		if i%3 != 0 && id[0] == 't' {
			continue // a third of the short threads is enough
		}
		got, err := pg.Thread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		same("thread "+id, rec, got)
		for _, o := range []thread.HistoryOptions{{}, {Limit: 1}, {Before: 2000, Limit: 1500}, {Before: 3}} {
			same(fmt.Sprintf("history %s %+v", id, o), collect(t, s.MemoryStore.History(ctx, id, o)), collect(t, pg.History(ctx, id, o)))
		}
		same("checkpoints "+id, collect(t, s.MemoryStore.Checkpoints(ctx, id)), collect(t, pg.Checkpoints(ctx, id)))
		if rec.Head == "" {
			continue
		}
		head, err := s.MemoryStore.Commit(ctx, rec.Head)
		if err != nil {
			t.Fatal(err)
		}
		for _, floor := range []int64{-1, head.Depth / 2, head.Depth - 50, head.Depth} {
			same(fmt.Sprintf("ancestors %s floor %d", id, floor), collect(t, s.MemoryStore.Ancestors(ctx, rec.Head, floor)), collect(t, pg.Ancestors(ctx, rec.Head, floor)))
		}
	}
	// Every commit the memory store keeps, and no other.
	if diff := cmp.Diff(memoryCommits(t, s.MemoryStore), postgresCommits(t, pg)); diff != "" {
		t.Fatalf("commits (-memory +postgres):\n%s", diff)
	}
	checkRefs(t, pg)
}

// memoryCommits lists the ids of the commits the memory store keeps: those
// its threads reach through their heads, history entries and checkpoints,
// the only ones it does not free.
func memoryCommits(t *testing.T, m *thread.MemoryStore) []string {
	t.Helper()
	ctx := t.Context()
	kept := map[string]bool{}
	walk := func(id string) {
		if id == "" || kept[id] {
			return
		}
		for c, err := range m.Ancestors(ctx, id, -1) {
			if err != nil {
				t.Fatal(err)
			}
			if kept[c.ID] {
				break
			}
			kept[c.ID] = true
		}
	}
	for _, rec := range collect(t, m.Threads(ctx, thread.ListOptions{AllTenants: true})) {
		walk(rec.Head)
		for _, e := range collect(t, m.History(ctx, rec.ID, thread.HistoryOptions{})) {
			walk(e.Commit)
		}
		for _, cp := range collect(t, m.Checkpoints(ctx, rec.ID)) {
			walk(cp.Commit)
		}
	}
	return slices.Sorted(maps.Keys(kept))
}

// postgresCommits lists the ids of the commits in the table.
func postgresCommits(t *testing.T, pg *Store) []string {
	t.Helper()
	rows, err := pg.pool.Query(t.Context(), "SELECT id FROM loom_commits ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func collect[T any](t *testing.T, seq iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}
