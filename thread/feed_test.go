package thread

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread/store"
)

// TestWatchGap checks that a listener that falls behind is told so by a
// ChangeGap after what it had, and then hears changes again.
func TestWatchGap(t *testing.T) {
	ctx := t.Context()
	s := NewMemoryStore()
	db := New(s, nil)
	release := make(chan struct{})
	var mu sync.Mutex
	var got []Change
	first := true
	err := db.Watch(ctx, func(c Change) {
		if first {
			first = false
			<-release // stuck while the writer runs ahead
		}
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	th, err := db.Create(ctx, CreateOptions{ID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	n := feedBuffer + 100
	for i := range n {
		if _, err := th.Append(ctx, message.User("m")); err != nil {
			t.Fatal(i, err)
		}
	}
	close(release)
	testwait.Until(t, 10*time.Second, "a gap", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1].Kind == ChangeGap
	})
	// After the gap, changes flow again.
	if _, err := th.Append(ctx, message.User("after")); err != nil {
		t.Fatal(err)
	}
	var snapshot []Change
	if !testwait.Within(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		snapshot = append([]Change(nil), got...)
		return len(got) > 0 && got[len(got)-1].Version == int64(n+2)
	}) {
		t.Fatalf("the last change never came; heard %d", len(snapshot))
	}
	gaps := 0
	for i, c := range snapshot {
		if c.Kind == ChangeGap {
			gaps++
			if i == 0 || snapshot[i-1].Kind == ChangeGap {
				t.Errorf("gap at %d", i)
			}
		}
	}
	if gaps != 1 || len(snapshot) >= n+2 {
		t.Errorf("%d gaps in %d changes; want 1 gap and fewer than %d changes", gaps, len(snapshot), n+2)
	}
}

func TestBatchChanges(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &store.Batch{
		Create:          []store.Creation{{Record: &Record{ID: "n", Head: "h1", Version: 3, UpdatedAt: now}, History: []HistoryEntry{{Version: 3, Op: OpLoad}}}},
		Moves:           []store.Move{{Thread: "m", From: 4, Head: "h2", Op: OpAppend, Time: now}},
		DropCheckpoints: []store.CheckpointKey{{Thread: "m", Name: "old"}},
		Checkpoints:     []Checkpoint{{Thread: "m", Name: "new", CreatedAt: now}},
		Delete:          []store.Deletion{{Thread: "d"}},
	}
	got := b.Changes(now)
	want := []Change{
		{Kind: ChangeCreate, Thread: "n", Version: 3, Head: "h1", Op: OpLoad, Time: now},
		{Kind: ChangeMove, Thread: "m", Version: 5, Head: "h2", Op: OpAppend, Time: now},
		{Kind: ChangeCheckpoint, Thread: "m", Checkpoint: "old", Time: now},
		{Kind: ChangeCheckpoint, Thread: "m", Checkpoint: "new", Time: now},
		{Kind: ChangeDelete, Thread: "d", Time: now},
	}
	if len(got) != len(want) {
		t.Fatalf("Changes = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestWatchEndsWithContext checks that a listener's goroutine ends with
// its context and that the hub forgets it.
func TestWatchEndsWithContext(t *testing.T) {
	s := NewMemoryStore()
	db := New(s, nil)
	ctx, cancel := context.WithCancel(t.Context())
	if err := db.Watch(ctx, func(Change) {}); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The last listener takes the hub with it.
	testwait.Until(t, 5*time.Second, "the listener goes", func() bool { return db.hub(false) == nil })
}

// valueStore is a store that is a struct value holding a slice: not
// comparable, so no map may be keyed by it.
type valueStore struct {
	*MemoryStore
	tags []string
}

// TestWatchValueStore checks that a store of any type can be written and
// watched: a DB keeps the hub of a store that is no pointer itself.
func TestWatchValueStore(t *testing.T) {
	ctx := t.Context()
	db := New(valueStore{MemoryStore: NewMemoryStore(), tags: []string{"x"}}, nil)
	th, err := db.Create(ctx, CreateOptions{ID: "v"})
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan Change, 10)
	if err := db.WithTenant("").Watch(ctx, func(c Change) { heard <- c }); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-heard:
		if c.Version != 2 || c.Thread != "v" {
			t.Fatalf("heard %+v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing heard")
	}
}
