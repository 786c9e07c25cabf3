package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// TestLongWalkCachesItsStart reads a thread longer than the cache, on a
// cold cache: the walk caches the commits nearest the head, no more than
// its share of the cache, and not the older ones, so that a second read
// finds the same ones and the rest of the cache is not pushed out. An
// agent's turn after it still reads its view from the cache.
func TestLongWalkCachesItsStart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "long.db")
	const cacheBytes = 256 << 10
	const depth = 2000 // about 700 bytes each: 1.4 MB, five times the cache
	opts := &Options{CacheBytes: cacheBytes}
	w, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var chain []*thread.Commit
	for len(chain) < depth {
		var b store.Batch
		for range 500 {
			c := &thread.Commit{ID: ids.New("c_"), Depth: int64(len(chain) + 1), Op: thread.OpAppend, Time: now,
				Messages: []message.Message{{ID: message.NewID(), Role: message.RoleUser, CreatedAt: now,
					Contents: []message.Content{message.Text{Text: strings.Repeat("m", 400)}}}}}
			if len(chain) > 0 {
				c.Parent = chain[len(chain)-1].ID
			}
			b.Commits = append(b.Commits, c)
			chain = append(chain, c)
		}
		if len(chain) == depth {
			b.Create = []store.Creation{{Record: &thread.Record{ID: "long", Kind: thread.KindLocal,
				Head: chain[depth-1].ID, Version: 1, CreatedAt: now, UpdatedAt: now}, Op: thread.OpLoad}}
		}
		if err := w.Apply(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}

	// A second store on the file, as after a restart: a cold cache.
	s, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cached := func() (n int, first int) {
		first = -1
		for i, c := range chain {
			if s.cache.getID(c.ID) != nil {
				n++
				if first < 0 {
					first = i
				}
			}
		}
		return n, first
	}
	th, err := thread.New(s, nil).Thread(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	for read := range 2 {
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil || len(msgs) != depth {
			t.Fatalf("read %d: %d messages, %v", read, len(msgs), err)
		}
		if s.cache.size > s.cache.walkBudget() {
			t.Fatalf("read %d: a walk cached %d bytes, more than its share %d", read, s.cache.size, s.cache.walkBudget())
		}
		n, first := cached()
		if n == 0 || first+n != depth {
			t.Fatalf("read %d: %d commits cached from %d of %d: want the ones nearest the head", read, n, first, depth)
		}
	}

	// The agent's turn: a write, then its view of the last messages.
	if _, err := th.Append(ctx, message.User("next")); err != nil {
		t.Fatal(err)
	}
	head := th.Record().Head
	if s.cache.getID(head) == nil {
		t.Fatal("the commit just written is not cached")
	}
	n := 0
	for c, err := range s.Ancestors(ctx, head, depth-20) {
		if err != nil {
			t.Fatal(err)
		}
		if s.cache.getID(c.ID) == nil {
			t.Fatalf("commit at depth %d of the view is not cached", c.Depth)
		}
		n++
	}
	if n != 21 {
		t.Fatalf("the view walked %d commits, want 21", n)
	}
}
