package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// queued waits until n batches wait in s's group queue.
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	var got int
	if !testwait.Within(10*time.Second, func() bool {
		s.group.mu.Lock()
		defer s.group.mu.Unlock()
		got = len(s.group.pending)
		return got >= n
	}) {
		t.Fatalf("%d batches queued, want %d", got, n)
	}
}

// TestGroupCommitFailsAlone holds the writer's turn while batches queue, so
// that they are written in one transaction, and checks that each gets its
// own answer: a conflict, a missing parent and an ended context fail
// alone, the batches around them land, and the batch after a failed one
// sees the store as if the failed one had never been tried.
func TestGroupCommitFailsAlone(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "group.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := thread.New(s, nil)
	var heads []string
	for i := range 4 {
		th, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("t%d", i), Messages: []message.Message{message.User("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, th.Record().Head)
	}
	now := time.Now()
	turn := func(th int, id, parent string, from int64) *store.Batch {
		return &store.Batch{
			Commits: []*store.Commit{{ID: id, Parent: parent, Depth: 2, Time: now, Op: store.OpAppend, Messages: []message.Message{message.User(id)}}},
			Moves:   []store.Move{{Thread: fmt.Sprintf("t%d", th), From: from, Head: id, Op: store.OpAppend, Time: now}},
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	type try struct {
		ctx  context.Context
		b    *store.Batch
		want error
	}
	tries := []try{
		{ctx, turn(0, "c_a", heads[0], 1), nil},
		// t0 is at version 2 once c_a lands: from 1 is a conflict.
		{ctx, turn(0, "c_b", heads[0], 1), store.ErrConflict},
		{ctx, turn(1, "c_c", "c_missing", 1), store.ErrNotFound},
		// c_c failed: its id is free for the next batch.
		{ctx, turn(2, "c_c", heads[2], 1), nil},
		{cancelled, turn(3, "c_d", heads[3], 1), context.Canceled},
		// c_f is written before c_a's insert finds the id taken: the
		// savepoint takes c_f back.
		{ctx, &store.Batch{Commits: []*store.Commit{
			{ID: "c_f", Parent: heads[1], Depth: 2, Time: now, Op: store.OpAppend},
			{ID: "c_a", Parent: "c_f", Depth: 3, Time: now, Op: store.OpAppend},
		}}, store.ErrConflict},
		// c_a landed earlier in the same transaction: a child of it.
		{ctx, &store.Batch{
			Commits: []*store.Commit{{ID: "c_e", Parent: "c_a", Depth: 3, Time: now, Op: store.OpAppend}},
			Moves:   []store.Move{{Thread: "t0", From: 2, Head: "c_e", Op: store.OpAppend, Time: now}},
		}, nil},
	}
	// The turn is taken, as by a writer in its transaction, while the
	// batches queue.
	s.group.mu.Lock()
	s.group.busy = true
	s.group.mu.Unlock()
	errs := make([]error, len(tries))
	var wg sync.WaitGroup
	for i, tr := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Apply(tr.ctx, tr.b)
		}()
		// One at a time, so that the queue keeps the order above.
		queued(t, s, i+1)
	}
	cancel()
	s.group.mu.Lock()
	s.group.handOff()
	s.group.mu.Unlock()
	wg.Wait()
	for i, tr := range tries {
		if tr.want == nil && errs[i] != nil || tr.want != nil && !errors.Is(errs[i], tr.want) {
			t.Errorf("batch %d: %v, want %v", i, errs[i], tr.want)
		}
	}
	s.Close()

	s, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, want := range []struct {
		version int64
		head    string
	}{{3, "c_e"}, {1, heads[1]}, {2, "c_c"}, {1, heads[3]}} {
		r, err := s.Thread(ctx, fmt.Sprintf("t%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if r.Version != want.version || r.Head != want.head {
			t.Errorf("t%d after reopen: version %d head %s, want %d %s", i, r.Version, r.Head, want.version, want.head)
		}
	}
	for _, id := range []string{"c_b", "c_d", "c_f"} {
		if _, err := s.Commit(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("commit %s of a failed batch: %v, want ErrNotFound", id, err)
		}
	}
}

// TestGroupCommitManyWriters has 32 writers on threads of their own and 8
// on one shared thread, all at once, and checks after reopening that every
// acknowledged append is there once and in its writer's order.
func TestGroupCommitManyWriters(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "many.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := thread.New(s, nil)
	const own, shared, each = 32, 8, 25
	for i := range own {
		if _, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("own%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "shared"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, own+shared)
	for w := range own + shared {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "shared"
			if w < own {
				id = fmt.Sprintf("own%02d", w)
			}
			for i := range each {
				text := fmt.Sprintf("w%02d-%03d", w, i)
				if _, _, err := db.Append(ctx, id, thread.CommitOptions{Messages: []message.Message{message.User(text)}}); err != nil {
					errs <- fmt.Errorf("writer %d append %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db = thread.New(s, nil)
	check := func(id string, writers []int) {
		th, err := db.Thread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		next := map[int]int{}
		n := 0
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			var w, i int
			if _, err := fmt.Sscanf(m.Text(), "w%02d-%03d", &w, &i); err != nil {
				t.Fatalf("%s: message %q: %v", id, m.Text(), err)
			}
			if next[w] != i {
				t.Fatalf("%s: writer %d's message %d where %d was due", id, w, i, next[w])
			}
			next[w]++
			n++
		}
		if n != each*len(writers) {
			t.Errorf("%s: %d messages, want %d", id, n, each*len(writers))
		}
	}
	for w := range own {
		check(fmt.Sprintf("own%02d", w), []int{w})
	}
	var ws []int
	for w := own; w < own+shared; w++ {
		ws = append(ws, w)
	}
	check("shared", ws)
}

// TestAppendAt checks the store's queued append: build sees the head as
// the writers before it left it, its error comes back as it is with
// nothing written, and an unknown thread is ErrNotFound.
func TestAppendAt(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "at.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	head := th.Record().Head
	next := func(id string) func(r *store.Record, h *store.Commit) (*store.Batch, error) {
		return func(r *store.Record, h *store.Commit) (*store.Batch, error) {
			return &store.Batch{
				Commits: []*store.Commit{{ID: id, Parent: h.ID, Depth: h.Depth + 1, Time: time.Now(), Op: store.OpAppend}},
				Moves:   []store.Move{{Thread: r.ID, From: r.Version, Head: id, Op: store.OpAppend, Time: time.Now()}},
			}, nil
		}
	}
	if err := s.AppendAt(ctx, "a", next("c_1")); err != nil {
		t.Fatal(err)
	}
	var saw *store.Commit
	boom := errors.New("boom")
	err = s.AppendAt(ctx, "a", func(r *store.Record, h *store.Commit) (*store.Batch, error) {
		saw = h
		if r.Version != 2 || r.Head != "c_1" {
			t.Errorf("record at version %d head %s, want 2 c_1", r.Version, r.Head)
		}
		return nil, boom
	})
	if err != boom {
		t.Errorf("build's error: %v, want it as it is", err)
	}
	if saw == nil || saw.ID != "c_1" || saw.Depth != 2 {
		t.Errorf("build saw head %+v, want c_1 at depth 2", saw)
	}
	if err := s.AppendAt(ctx, "nope", next("c_2")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown thread: %v, want ErrNotFound", err)
	}
	r, err := s.Thread(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 2 || r.Head != "c_1" {
		t.Errorf("after: version %d head %s, want 2 c_1 (parent %s)", r.Version, r.Head, head)
	}
}
