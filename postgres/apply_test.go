package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// TestAppendShapeErrors: a batch of loom_append's shape (one commit, the
// move to it) fails as the planner says, as it does on the memory store,
// whatever the facts it assumed: a stale, future or zero version, no such
// thread, no such parent, a commit that exists. Nothing is written.
func TestAppendShapeErrors(t *testing.T) {
	pg := open(t, testserver.Postgres(t), nil)
	mem := thread.NewMemoryStore()
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	heads, firsts := map[store.Store]string{}, map[store.Store]string{}
	for _, s := range []store.Store{pg, mem} {
		th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "t", Messages: []message.Message{message.User("one")}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Thread(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		firsts[s] = r.Head
		c, err := th.Append(ctx, message.User("two"))
		if err != nil {
			t.Fatal(err)
		}
		heads[s] = c.ID
	}
	r, err := pg.Thread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const head, first = "HEAD", "FIRST"
	batch := func(id, thr, parent string, from int64) *store.Batch {
		c := &thread.Commit{ID: id, Parent: parent, Depth: 3, Op: thread.OpAppend, Time: now,
			Messages: []message.Message{message.User("three")}}
		return &store.Batch{Commits: []*thread.Commit{c},
			Moves: []store.Move{{Thread: thr, From: from, Head: id, Op: thread.OpAppend, Time: now}}}
	}
	for _, tc := range []struct {
		name string
		b    *store.Batch
		want error
	}{
		{"stale", batch("n1", "t", head, r.Version-1), thread.ErrConflict},
		{"future", batch("n2", "t", head, r.Version+1), thread.ErrConflict},
		{"zero", batch("n3", "t", head, 0), thread.ErrConflict},
		{"no thread", batch("n4", "nosuch", head, 1), thread.ErrNotFound},
		{"no parent", batch("n5", "t", "nosuch", r.Version), thread.ErrNotFound},
		{"stale, no parent", batch("n6", "t", "nosuch", r.Version-1), thread.ErrNotFound},
		{"commit exists", batch(first, "t", head, r.Version), thread.ErrConflict},
		{"its own parent", batch(head, "t", head, r.Version), thread.ErrConflict},
		{"stale, commit exists", batch(first, "t", head, r.Version-1), thread.ErrConflict},
	} {
		for name, s := range map[string]store.Store{"postgres": pg, "memory": mem} {
			b := *tc.b
			c := *b.Commits[0]
			if c.Parent == head {
				c.Parent = heads[s]
			}
			if c.ID == head || c.ID == first {
				c.ID = map[string]string{head: heads[s], first: firsts[s]}[c.ID]
				b.Moves = []store.Move{b.Moves[0]}
				b.Moves[0].Head = c.ID
			}
			b.Commits = []*thread.Commit{&c}
			if err := s.Apply(ctx, &b); !errors.Is(err, tc.want) {
				t.Errorf("%s: %s: %v, want %v", tc.name, name, err, tc.want)
			}
		}
	}
	if got, err := pg.Thread(ctx, "t"); err != nil || got.Version != r.Version || got.Head != r.Head {
		t.Errorf("after the failed batches: %+v (%v), want version %d at %s", got, err, r.Version, r.Head)
	}
	checkRefs(t, pg)
}
