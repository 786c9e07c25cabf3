package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// pending counts the commits waiting for the search index, without
// folding them.
func pending(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.r.QueryRowContext(t.Context(), `SELECT count(*) FROM search_pending`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An append queues its commit for the index and writes no entry; a commit
// without words is not queued; a search folds what is pending first; a
// freed commit leaves the queue with its pending row.
func TestSearchPending(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	s.stopFolding()
	db := thread.New(s, nil)
	a := create(t, db, "a", message.User("alpha one"))
	appendTo(t, a, message.User("... !!"))
	if n := pending(t, s); n != 1 {
		t.Errorf("%d pending, want 1 (the commit without words is not queued)", n)
	}
	var entries int
	if err := s.r.QueryRow(`SELECT count(*) FROM search_entries`).Scan(&entries); err != nil || entries != 0 {
		t.Errorf("%d entries before a fold (%v)", entries, err)
	}
	if diff := cmp.Diff([]hit{{"a", "alpha one"}}, search(t, db, "alpha")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := pending(t, s); n != 0 {
		t.Errorf("%d pending after a search", n)
	}
	b := create(t, db, "b", message.User("beta"))
	if n := pending(t, s); n != 1 {
		t.Fatalf("%d pending, want 1", n)
	}
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pending(t, s); n != 0 {
		t.Errorf("%d pending after the commit was freed", n)
	}
}

// What is committed is found after a close without any fold, and a
// reopened store's background folder indexes it.
func TestSearchPendingDurable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.stopFolding()
	db := thread.New(s, nil)
	for _, w := range []string{"first", "second", "third"} {
		create(t, db, w, message.User("durable "+w))
	}
	s.Close()
	s, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testwait.Until(t, 10*time.Second, "the background folder folds", func() bool { return pending(t, s) == 0 })
	want := []hit{{"third", "durable third"}, {"second", "durable second"}, {"first", "durable first"}}
	if diff := cmp.Diff(want, search(t, thread.New(s, nil), "durable")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A search that cannot fold, because another process holds the write
// lock, matches the pending commits itself and puts them first; its pages
// follow each other, before and after the fold.
func TestSearchLockedOut(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := Open(ctx, path, &Options{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.stopFolding()
	db := thread.New(s, nil)
	a := create(t, db, "a", message.User("alpha one"), message.User("beta"))
	countRows(t, s, `SELECT 1`) // folds
	appendTo(t, a, message.User("alpha two"), message.User("alpha three"))
	create(t, db.WithTenant("acme"), "x", message.User("alpha elsewhere"))
	appendTo(t, a, message.User("alpha four"))

	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	want := []hit{{"a", "alpha four"}, {"a", "alpha three"}, {"a", "alpha two"}, {"a", "alpha one"}}
	if diff := cmp.Diff(want, search(t, db, "alpha")); diff != "" {
		t.Errorf("locked out (-want +got):\n%s", diff)
	}
	var got []hit
	before := ""
	for i := 0; ; i++ {
		if i == 2 {
			if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
				t.Fatal(err)
			}
		}
		hits, err := db.Search(ctx, thread.SearchQuery{Text: "alpha", Limit: 1, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			break
		}
		if i < 2 && hits[0].Cursor[0] != 'p' {
			t.Errorf("page %d: cursor %q, want a pending commit's", i, hits[0].Cursor)
		}
		got = append(got, hit{hits[0].Thread, store.SearchText(hits[0].Message)})
		before = hits[0].Cursor
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	if n := pending(t, s); n != 0 {
		t.Errorf("%d pending after the lock was released", n)
	}
	if _, err := db.Search(ctx, thread.SearchQuery{Text: "alpha", Before: "p1"}); err == nil {
		t.Error("a bad cursor was taken")
	}
}
