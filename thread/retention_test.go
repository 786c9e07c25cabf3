package thread_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// prunes records the prunes a store is asked for.
type prunes struct {
	store.Store
	befores []int64
}

func (p *prunes) Apply(ctx context.Context, b *store.Batch) error {
	for _, pr := range b.Prune {
		p.befores = append(p.befores, pr.Before)
	}
	return p.Store.Apply(ctx, b)
}

// TestGCPrunesLongHistoriesInSteps: GC drops a long history oldest first,
// at most 10,000 versions a batch, so that no one transaction holds a
// store for the whole of it, and ends at the same history as one batch.
func TestGCPrunesLongHistoriesInSteps(t *testing.T) {
	ctx := context.Background()
	s := &prunes{Store: thread.NewMemoryStore()}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &thread.Record{ID: "long", Kind: thread.KindLocal, Version: 1, CreatedAt: at, UpdatedAt: at,
		Labels: thread.Retention{KeepLast: 100}.Labels()}
	if err := s.Apply(ctx, &store.Batch{Create: []store.Creation{{Record: rec, Op: thread.OpCreate}}}); err != nil {
		t.Fatal(err)
	}
	parent := ""
	for v := int64(1); v < 25_001; {
		var b store.Batch
		for range 1000 {
			id := fmt.Sprintf("c%06d", v)
			b.Commits = append(b.Commits, &thread.Commit{ID: id, Parent: parent, Depth: v, Op: thread.OpAppend, Time: at,
				Messages: []message.Message{message.User(id)}})
			b.Moves = append(b.Moves, store.Move{Thread: "long", From: v, Head: id, Op: thread.OpAppend, Time: at})
			parent = id
			v++
		}
		if err := s.Apply(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := thread.New(s, nil).GC(ctx, thread.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pruned != 1 || rep.Versions != 24_901 {
		t.Errorf("gc: %+v; want 24,901 versions of one thread", rep)
	}
	if want := []int64{10_001, 20_001, 24_902}; !slices.Equal(s.befores, want) {
		t.Errorf("prunes below %v; want %v", s.befores, want)
	}
	var vs []int64
	for e, err := range s.History(ctx, "long", thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, e.Version)
	}
	if len(vs) != 100 || vs[0] != 25_001 || vs[99] != 24_902 {
		t.Errorf("history after gc: %d versions, %v … %v; want 25001 down to 24902", len(vs), vs[0], vs[len(vs)-1])
	}
}
