package jsonfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// versionsOf returns the versions a thread's history lists, oldest first.
func versionsOf(t *testing.T, s store.Store, id string) []int64 {
	t.Helper()
	var out []int64
	for e, err := range s.History(t.Context(), id, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		out = append(out, e.Version)
	}
	slices.Reverse(out)
	return out
}

func versionRange(from, to int64) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// TestPruneChunks prunes a thread whose history spans sealed chunks: in
// the middle of a chunk (the chunks below go, that one stays and is read
// from the first kept version), then into the thread file's entries; then
// loads the pruned thread as a new one whose history starts within a
// chunk, appends past the end of that chunk (a partial chunk is sealed),
// prunes it within that partial chunk, reopens, and deletes both: the
// reference counts match the references throughout, and nothing is left.
func TestPruneChunks(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, &Options{NoSync: true})
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "long"})
	if err != nil {
		t.Fatal(err)
	}
	texts := map[int64][]string{1: nil} // what each version reads
	var cur []string
	for th.Version() < 300 {
		if v := th.Version(); v%50 == 25 {
			// Abandon the last few versions: their commits are reached by
			// history only.
			if err := th.Restore(ctx, v-4); err != nil {
				t.Fatal(err)
			}
			cur = slices.Clone(texts[v-4])
		} else {
			text := fmt.Sprint("m", v)
			if _, err := th.Append(ctx, message.User(text)); err != nil {
				t.Fatal(err)
			}
			cur = append(slices.Clone(cur), text)
		}
		texts[th.Version()] = cur
		if th.Version() == 150 {
			if _, err := th.Checkpoint(ctx, "mid"); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string, id string, want []int64) {
		t.Helper()
		if got := versionsOf(t, s, id); !slices.Equal(got, want) {
			t.Fatalf("%s: history %v; want %v", what, got, want)
		}
		if err := consistent(s); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	reads := func(what string, th *thread.Thread, v int64, want []string) {
		t.Helper()
		msgs, err := th.Messages(ctx, thread.ReadOptions{Version: v})
		if err != nil {
			t.Fatalf("%s: version %d: %v", what, v, err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.Text())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: version %d reads %q; want %q", what, v, got, want)
		}
	}
	check("before any prune", "long", versionRange(1, 300))
	chunkGone := func(n int64, gone bool) {
		t.Helper()
		_, err := s.root.Lstat(chunkPath("long", n))
		if gone != errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("chunk %d: %v; want it gone: %v", n, err, gone)
		}
	}

	// Within chunk 1 (versions 65 to 128): chunk 0 goes, chunk 1 stays.
	prune := func(id string, before int64) {
		t.Helper()
		if err := s.Apply(ctx, &store.Batch{Prune: []store.Prune{{Thread: id, Before: before}}}); err != nil {
			t.Fatalf("prune %s below %d: %v", id, before, err)
		}
	}
	prune("long", 100)
	check("pruned below 100", "long", versionRange(100, 300))
	chunkGone(0, true)
	chunkGone(1, false)
	reads("pruned below 100", th, 100, texts[100])
	if _, err := th.Messages(ctx, thread.ReadOptions{Version: 99}); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("a pruned version reads: %v", err)
	}
	// Paging stops at the first kept version.
	var page []int64
	for e, err := range s.History(ctx, "long", thread.HistoryOptions{Before: 103, Limit: 10}) {
		if err != nil {
			t.Fatal(err)
		}
		page = append(page, e.Version)
	}
	if want := []int64{102, 101, 100}; !slices.Equal(page, want) {
		t.Fatalf("the last page of history: %v; want %v", page, want)
	}
	prune("long", 50) // gone already: no error, nothing changes
	check("pruned again below 50", "long", versionRange(100, 300))

	// Into the thread file (chunks 0 to 3 hold versions 1 to 256).
	prune("long", 290)
	check("pruned below 290", "long", versionRange(290, 300))
	for n := range int64(4) {
		chunkGone(n, true)
	}
	reads("pruned below 290", th, 290, texts[290])
	reads("pruned below 290", th, 0, texts[300])

	// A load of the pruned thread starts within chunk 4 (257 to 320).
	var buf bytes.Buffer
	if err := th.Save(ctx, &buf, thread.SaveOptions{History: true}); err != nil {
		t.Fatal(err)
	}
	loaded, err := db.Load(ctx, &buf, thread.LoadOptions{ID: "loaded"})
	if err != nil {
		t.Fatal(err)
	}
	check("loaded", "loaded", versionRange(290, 300))
	for loaded.Version() < 340 {
		if _, err := loaded.Append(ctx, message.User(fmt.Sprint("l", loaded.Version()))); err != nil {
			t.Fatal(err)
		}
	}
	check("loaded, and appended past its first chunk", "loaded", versionRange(290, 340))
	if _, err := s.root.Lstat(chunkPath("loaded", 4)); err != nil {
		t.Fatalf("the partial chunk the loaded thread sealed: %v", err)
	}
	reads("loaded", loaded, 295, texts[295])
	prune("loaded", 300) // within its partial chunk
	check("loaded and pruned", "loaded", versionRange(300, 340))
	reads("loaded and pruned", loaded, 300, texts[300])

	// Reopen: the same.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, &Options{NoSync: true})
	db = thread.New(s, nil)
	check("reopened", "long", versionRange(290, 300))
	check("reopened", "loaded", versionRange(300, 340))
	th, err = db.Thread(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Rollback(ctx, "mid"); err != nil {
		t.Fatalf("rollback to a checkpoint of a pruned version: %v", err)
	}
	reads("rolled back", th, 0, texts[150])

	for _, id := range []string{"long", "loaded"} {
		if err := s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: id}}}); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
		if err := consistent(s); err != nil {
			t.Fatalf("after deleting %s: %v", id, err)
		}
	}
	for _, d := range []string{"commits", "refs", "threads"} {
		if n := entries(t, s, d); n != 0 {
			t.Errorf("%d files left in %s after every thread is deleted", n, d)
		}
	}
}

func entries(t *testing.T, s *Store, dir string) int {
	t.Helper()
	d, err := s.root.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// TestGCCrash kills DB.GC at random moments while it prunes a long thread
// and deletes expired ones: a batch is committed by its intent, so the
// threads stay whole, the reference counts match the references, and a
// later GC ends where one uninterrupted GC does.
func TestGCCrash(t *testing.T) {
	dir := t.TempDir()
	proctest.GCCrash(t, "file://"+dir, proctest.GCOptions{Rounds: 4, Check: func(t *testing.T) {
		s := openTest(t, dir, nil)
		if err := consistent(s); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}})
}

// TestGroupPrune: prunes grouped with appends to the same thread (one
// intent) as its history crosses a chunk boundary, in both orders: a
// prune after the appends reads the chunk the group seals; appends after
// a prune seal a chunk that starts where the prune left the history.
// Either way the history is whole from the highest Before on, chunk 0
// (wholly pruned) is gone, and the counts match the references.
func TestGroupPrune(t *testing.T) {
	for _, prunesFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("PrunesFirst=%v", prunesFirst), func(t *testing.T) { groupPrune(t, prunesFirst) })
	}
}

func groupPrune(t *testing.T, prunesFirst bool) {
	ctx := t.Context()
	s := openTest(t, t.TempDir(), &Options{NoSync: true})
	db := thread.New(s, nil)
	hot, err := db.Create(ctx, thread.CreateOptions{ID: "hot"})
	if err != nil {
		t.Fatal(err)
	}
	for hot.Version() < 120 {
		if _, err := hot.Append(ctx, message.User(fmt.Sprint(hot.Version()))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.lock(ctx); err != nil { // the requests queue up behind it
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	queued := 0
	// queue starts f and waits until its request is in the queue, so that
	// the group takes them in this order.
	queue := func(f func() error) {
		wg.Go(func() { errs <- f() })
		queued++
		testwait.Until(t, 10*time.Second, "the request queues", func() bool {
			s.wmu.Lock()
			defer s.wmu.Unlock()
			return len(s.w.queue) >= queued
		})
	}
	appends := func() {
		for i := range 10 {
			queue(func() error {
				return s.AppendAt(ctx, "hot", func(r *thread.Record, head *thread.Commit) (*store.Batch, error) {
					c := &thread.Commit{ID: fmt.Sprintf("c_hot%d", i), Parent: r.Head, Depth: head.Depth + 1, Op: thread.OpAppend,
						Messages: []message.Message{message.User(fmt.Sprint("hot", i))}}
					return &store.Batch{Commits: []*thread.Commit{c},
						Moves: []store.Move{{Thread: r.ID, From: r.Version, Head: c.ID, Op: thread.OpAppend, Time: time.Now()}}}, nil
				})
			})
		}
	}
	prunes := func() {
		for _, before := range []int64{30, 110} {
			queue(func() error { return s.Apply(ctx, &store.Batch{Prune: []store.Prune{{Thread: "hot", Before: before}}}) })
		}
	}
	if prunesFirst {
		prunes()
		appends()
	} else {
		appends()
		prunes()
	}
	s.unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got, want := versionsOf(t, s, "hot"), versionRange(110, 130); !slices.Equal(got, want) {
		t.Fatalf("history after the group: %v; want %v", got, want)
	}
	if err := consistent(s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.root.Lstat(chunkPath("hot", 0)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("chunk 0, wholly pruned: %v", err)
	}
	// Sealed whole by the appends, or from where the prune left it.
	chunk, err := s.readChunk("hot", 1)
	if want := map[bool]int64{false: 65, true: 110}[prunesFirst]; err != nil || chunk[0].Version != want {
		t.Fatalf("chunk 1 starts at version %v (%v); want %d", chunk, err, want)
	}
	// The messages of the kept versions read whole.
	th, err := db.Thread(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{110, 128, 130} {
		msgs, err := th.Messages(ctx, thread.ReadOptions{Version: v})
		if err != nil || int64(len(msgs)) != v-1 {
			t.Fatalf("version %d: %d messages, %v; want %d", v, len(msgs), err, v-1)
		}
	}
}
