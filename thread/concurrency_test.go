package thread_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// One handle shared by writers, readers, forkers and checkpointers: the race
// detector watches, and nothing may be lost.
func TestSharedHandleUnderLoad(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	const writers, each = 16, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := th.Append(ctx, message.User(fmt.Sprintf("w%d-%d", w, i))); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range 50 {
				msgs, err := th.Messages(ctx, thread.ReadOptions{Last: 10})
				if err != nil || len(msgs) > 10 {
					t.Errorf("read: %d messages, %v", len(msgs), err)
					return
				}
				if _, err := th.Fork(ctx, thread.ForkOptions{}); err != nil {
					t.Errorf("fork: %v", err)
					return
				}
				_ = th.Record()
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			if _, err := th.Checkpoint(ctx, fmt.Sprint("cp", i)); err != nil && !errors.Is(err, thread.ErrInvalid) {
				t.Errorf("checkpoint: %v", err)
			}
		}
	})
	wg.Wait()
	n, err := th.Len(ctx)
	must(t, err)
	if n != writers*each || th.Version() != writers*each+1 {
		t.Fatalf("after %d appends: %d messages at version %d", writers*each, n, th.Version())
	}
}

// Forks and deletes racing on shared commits never leave a thread that
// cannot be read.
func TestForkDeleteRace(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	root, err := db.Create(ctx, thread.CreateOptions{Messages: []message.Message{message.User("root")}})
	must(t, err)
	var mu sync.Mutex
	live := []*thread.Thread{root}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				mu.Lock()
				src := live[(w*7+i)%len(live)]
				mu.Unlock()
				switch i % 3 {
				case 0, 1:
					f, err := src.Fork(ctx, thread.ForkOptions{})
					if err != nil {
						if !errors.Is(err, thread.ErrNotFound) { // src was deleted meanwhile
							t.Errorf("fork: %v", err)
						}
						continue
					}
					if _, err := f.Append(ctx, message.User(fmt.Sprint(w, i))); err != nil && !errors.Is(err, thread.ErrNotFound) {
						t.Errorf("append: %v", err)
					}
					mu.Lock()
					live = append(live, f)
					mu.Unlock()
				case 2:
					if err := db.Delete(ctx, src.ID()); err != nil && !errors.Is(err, thread.ErrNotFound) {
						t.Errorf("delete: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	for th, err := range db.Threads(ctx, thread.ListOptions{}) {
		must(t, err)
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil || len(msgs) == 0 || msgs[0].Text() != "root" {
			t.Fatalf("thread %s after the race: %d messages, %v", th.ID(), len(msgs), err)
		}
	}
}

// countingAppender is a memory store that counts the appends that went
// through AppendAt, the path a pure append takes after losing a race.
type countingAppender struct {
	*thread.MemoryStore
	n atomic.Int64
}

func (c *countingAppender) AppendAt(ctx context.Context, id string, build func(r *thread.Record, head *thread.Commit) (*store.Batch, error)) error {
	c.n.Add(1)
	return c.MemoryStore.AppendAt(ctx, id, build)
}

// Writers racing on one thread of a tenant: the losers append under the
// store's lock (Appender), through the tenant's namespace, and nothing is
// lost or out of order.
func TestRacingAppendsTakeTurnsThroughAppender(t *testing.T) {
	st := &countingAppender{MemoryStore: thread.NewMemoryStore()}
	db := thread.New(st, &thread.Options{Tenant: "acme"})
	th, err := db.Create(t.Context(), thread.CreateOptions{ID: "hot"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 20
	// Every handle reads version 1 before anyone appends: every writer but
	// the first to append loses its first race.
	handles := make([]*thread.Thread, writers)
	for w := range handles {
		if handles[w], err = db.Thread(t.Context(), "hot"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w, h := range handles {
		wg.Go(func() {
			for i := range each {
				if _, err := h.Append(t.Context(), message.User(fmt.Sprintf("%d-%d", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := th.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil || len(msgs) != writers*each || th.Version() != writers*each+1 {
		t.Fatalf("%d messages, version %d, %v", len(msgs), th.Version(), err)
	}
	last := map[string]int{}
	for _, m := range msgs {
		var w, i int
		fmt.Sscanf(m.Text(), "%d-%d", &w, &i)
		if prev, ok := last[fmt.Sprint(w)]; ok && i != prev+1 {
			t.Fatalf("writer %d's appends out of order: %d after %d", w, i, prev)
		}
		last[fmt.Sprint(w)] = i
	}
	if n := st.n.Load(); n < writers-1 {
		t.Errorf("%d appends went through AppendAt, want at least %d", n, writers-1)
	}
	if _, err := st.Thread(t.Context(), thread.Key("acme", "hot")); err != nil {
		t.Errorf("the store's key: %v", err)
	}
}
