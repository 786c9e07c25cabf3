package jsonfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// TestGroupCommit: batches that wait for the lock together are written
// with one intent, each planned after the ones before it: appends to
// several threads and to one hot thread (AppendAt) all land, and of two
// creations of one id the second fails alone.
func TestGroupCommit(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, t.TempDir(), nil)
	db := thread.New(s, nil)
	var threads []*thread.Thread
	for i := range 6 {
		th, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("t%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		threads = append(threads, th)
	}
	hot, err := db.Create(ctx, thread.CreateOptions{ID: "hot"})
	if err != nil {
		t.Fatal(err)
	}
	var intents atomic.Int64
	s.testHooks.sync = func(name string) error {
		if filepath.Base(name) == "intent.json" {
			intents.Add(1)
		}
		return nil
	}

	if err := s.lock(ctx); err != nil { // the requests queue up behind it
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for _, th := range threads {
		wg.Go(func() {
			_, err := th.Append(ctx, message.User("to "+th.ID()))
			errs <- err
		})
	}
	var dups atomic.Int64
	for range 2 {
		wg.Go(func() {
			_, err := db.Create(ctx, thread.CreateOptions{ID: "dup"})
			if errors.Is(err, thread.ErrConflict) {
				dups.Add(1)
				err = nil
			}
			errs <- err
		})
	}
	const hotAppends = 4
	for i := range hotAppends {
		wg.Go(func() {
			errs <- s.AppendAt(ctx, hot.ID(), func(r *thread.Record, head *thread.Commit) (*store.Batch, error) {
				depth := int64(1)
				if head != nil {
					depth = head.Depth + 1
				}
				c := &thread.Commit{ID: fmt.Sprintf("c_hot%d", i), Parent: r.Head, Depth: depth, Op: thread.OpAppend,
					Messages: []message.Message{message.User(fmt.Sprint(i))}}
				return &store.Batch{Commits: []*thread.Commit{c},
					Moves: []store.Move{{Thread: r.ID, From: r.Version, Head: c.ID, Op: thread.OpAppend, Time: time.Now()}}}, nil
			})
		})
	}
	want := len(threads) + 2 + hotAppends
	testwait.Until(t, 10*time.Second, "the goroutines queue", func() bool {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return len(s.w.queue) >= want
	})
	s.unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if dups.Load() != 1 {
		t.Errorf("%d creations of one id failed, want 1", dups.Load())
	}
	if n := intents.Load(); n != 1 {
		t.Errorf("%d intents for one group, want 1", n)
	}
	for _, th := range threads {
		if r, err := s.Thread(ctx, th.ID()); err != nil || r.Version != 2 {
			t.Errorf("thread %s: %+v %v", th.ID(), r, err)
		}
	}
	r, err := s.Thread(ctx, "hot")
	if err != nil || r.Version != 1+hotAppends {
		t.Fatalf("hot thread: %+v %v", r, err)
	}
	var depth int64 = hotAppends
	for c, err := range s.Ancestors(ctx, r.Head, -1) {
		if err != nil || c.Depth != depth {
			t.Fatalf("hot thread's commit %v at depth %d: %v", c, depth, err)
		}
		depth--
	}
	if depth != 0 {
		t.Errorf("hot thread's chain stops at depth %d", depth)
	}
	v := r.Version
	for e, err := range s.History(ctx, "hot", thread.HistoryOptions{}) {
		if err != nil || e.Version != v {
			t.Fatalf("history entry %+v, want version %d: %v", e, v, err)
		}
		v--
	}
	// The store reopens to what the group wrote.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, s.Dir(), nil)
	if r2, err := s2.Thread(ctx, "hot"); err != nil || r2.Version != r.Version || r2.Head != r.Head {
		t.Fatalf("hot after reopen: %+v %v", r2, err)
	}
}

// TestGroupSpoiltBatchFailsAlone: a batch whose plan cannot be written
// (here, a delete that finds its thread's sealed history damaged) fails
// alone; the batches grouped with it, before and after, are applied.
func TestGroupSpoiltBatchFailsAlone(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, &Options{NoSync: true})
	db := thread.New(s, nil)
	long, err := db.Create(ctx, thread.CreateOptions{ID: "long"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range historyChunk {
		if _, err := long.Append(ctx, message.User(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "history", "long", "0.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Create(ctx, thread.CreateOptions{ID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.lock(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var errA, errB, errDel error
	wg.Go(func() { _, errA = a.Append(ctx, message.User("a")) })
	wg.Go(func() { errDel = s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: "long"}}}) })
	wg.Go(func() { _, errB = b.Append(ctx, message.User("b")) })
	testwait.Until(t, 10*time.Second, "the goroutines queue", func() bool {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return len(s.w.queue) >= 3
	})
	s.unlock()
	wg.Wait()
	if errA != nil || errB != nil || errDel == nil {
		t.Fatalf("append a: %v, append b: %v, delete with damaged history: %v", errA, errB, errDel)
	}
	for _, id := range []string{"a", "b"} {
		if r, err := s.Thread(ctx, id); err != nil || r.Version != 2 {
			t.Errorf("thread %s: %+v %v", id, r, err)
		}
	}
	if _, err := s.Thread(ctx, "long"); err != nil {
		t.Errorf("the thread whose delete failed: %v", err)
	}
}
