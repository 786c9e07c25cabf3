package postgres

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// scanning hides the store's Searcher, so that DB.Search scans it.
type scanning struct{ store.Store }

type located struct {
	commit string
	index  int
}

// hits returns what a search of db finds, as a set, and the threads named.
func hits(t *testing.T, db *thread.DB, q string) (map[located]bool, map[string]bool) {
	t.Helper()
	got, err := db.Search(t.Context(), thread.SearchQuery{Text: q, Limit: 1000})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	set, threads := map[located]bool{}, map[string]bool{}
	for _, h := range got {
		set[located{h.Commit, h.Index}] = true
		threads[h.Thread] = true
	}
	return set, threads
}

// TestSearchBackfill opens the release's database, which had no index:
// the migration indexed what its threads reach, and the index finds, for
// every word of every tenant, what a scan finds. Indexing again adds
// nothing.
func TestSearchBackfill(t *testing.T) {
	dsn := restoreFixture(t)
	s := open(t, dsn, nil)
	ctx := t.Context()
	// The session threads Open carried in are pending (schemaV6).
	if err := s.foldPending(ctx); err != nil {
		t.Fatal(err)
	}
	var entries int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom_search`).Scan(&entries); err != nil || entries == 0 {
		t.Fatalf("%d index entries after the migration (%v)", entries, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT tenant FROM loom_threads`)
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	words := 0
	for _, tenant := range tenants {
		indexed := thread.New(s, nil).WithTenant(tenant)
		scanned := thread.New(scanning{s}, nil).WithTenant(tenant)
		// Every word of every message the tenant's threads reach.
		vocabulary := map[string]bool{}
		for r, err := range s.Threads(ctx, thread.ListOptions{Tenant: tenant}) {
			if err != nil {
				t.Fatal(err)
			}
			_, id := thread.SplitKey(r.ID)
			th, err := scanned.Thread(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for e, err := range th.History(ctx, thread.HistoryOptions{}) {
				if err != nil {
					t.Fatal(err)
				}
				msgs, err := th.Messages(ctx, thread.ReadOptions{Version: e.Version})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range msgs {
					for _, w := range store.SearchTokens(store.SearchText(m)) {
						vocabulary[w] = true
					}
				}
			}
		}
		for _, w := range slices.Sorted(maps.Keys(vocabulary)) {
			want, _ := hits(t, scanned, w)
			got, threads := hits(t, indexed, w)
			if !maps.Equal(got, want) {
				t.Errorf("tenant %q, word %q: the index finds %v, a scan %v", tenant, w, got, want)
			}
			for id := range threads {
				if _, err := indexed.Thread(ctx, id); err != nil {
					t.Errorf("tenant %q, word %q: hit of thread %q: %v", tenant, w, id, err)
				}
			}
			words++
		}
	}
	if words < 10 {
		t.Fatalf("only %d words compared", words)
	}
	err = withSchemaLock(ctx, s.pool, func(tx pgx.Tx) error { return backfillSearch(ctx, tx) })
	if err != nil {
		t.Fatal(err)
	}
	var again int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom_search`).Scan(&again); err != nil || again != entries {
		t.Fatalf("%d index entries after indexing again (%v), want %d", again, err, entries)
	}
	checkRefs(t, s)
}

// TestSearchQuoting: a tenant of quotes and backslashes is matched as it
// is, and a malformed cursor is invalid.
func TestSearchQuoting(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	ctx := t.Context()
	for _, tenant := range []string{"", `o'brien`, `back\slash`, `''`, `\'`, "sp ace & | !"} {
		var match bool
		q := tsquery(tenant, []string{"word", "ünïcödé"})
		err := s.pool.QueryRow(ctx, `SELECT array_to_tsvector(ARRAY['@' || $1, 'word', 'ünïcödé', 'other']) @@ $2::tsquery`, tenant, q).Scan(&match)
		if err != nil || !match {
			t.Errorf("tenant %q: query %s matches %v (%v)", tenant, q, match, err)
		}
		err = s.pool.QueryRow(ctx, `SELECT array_to_tsvector(ARRAY['@' || $1 || 'x', 'word', 'ünïcödé']) @@ $2::tsquery`, tenant, q).Scan(&match)
		if err != nil || match {
			t.Errorf("tenant %q: query %s matches another tenant (%v)", tenant, q, err)
		}
	}
	for _, cursor := range []string{"x", "-1", "0", "1.5", "99999999999999999999"} {
		// Exactly one yield, the error: a cursor taken would yield
		// nothing on an empty store.
		var errs []error
		for _, err := range s.Search(ctx, store.SearchOptions{Words: []string{"a"}, Before: cursor}) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], thread.ErrInvalid) {
			t.Errorf("cursor %q: %v, want one ErrInvalid", cursor, errs)
		}
	}
}

// TestSearchIndexes checks the entries each way of writing makes (Apply,
// its one-statement append, AppendAt), a message too big for a tsvector,
// and entries going with the commits freed.
func TestSearchIndexes(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	ctx := t.Context()
	db := thread.New(s, nil).WithTenant("acme")
	th, err := db.Create(ctx, thread.CreateOptions{ID: "t", Messages: []message.Message{message.User("created apple"), message.User("!!!")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("appended apple")); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; b.Len() < 900<<10; i++ {
		fmt.Fprintf(&b, "w%d ", i*7919)
	}
	b.WriteString("lastword")
	if _, err := th.Append(ctx, message.User("huge apple "+b.String())); err != nil {
		t.Fatalf("append a message of 900 KB of words: %v", err)
	}
	// Through AppendAt, which the memory store does not have.
	err = s.AppendAt(ctx, "acme/t", func(r *thread.Record, head *thread.Commit) (*store.Batch, error) {
		c := &thread.Commit{ID: "at-1", Parent: head.ID, Depth: head.Depth + 1, Op: thread.OpAppend, Time: r.UpdatedAt,
			StateFrom: head.StateFrom, Messages: []message.Message{message.User("appendat apple")}}
		return &store.Batch{Commits: []*thread.Commit{c}, Moves: []store.Move{{Thread: r.ID, From: r.Version, Head: c.ID, Op: thread.OpAppend, Time: r.UpdatedAt}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Search(ctx, thread.SearchQuery{Text: "apple"})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, h := range got {
		if h.Thread != "t" {
			t.Errorf("hit of thread %q", h.Thread)
		}
		texts = append(texts, h.Message.Text()[:min(len(h.Message.Text()), 14)])
	}
	if want := []string{"appendat apple", "huge apple w0 ", "appended apple", "created apple"}; !slices.Equal(texts, want) {
		t.Errorf("apple: %q, want %q", texts, want)
	}
	if got, _ := hits(t, db, "w7919"); len(got) != 1 {
		t.Errorf("an early word of the huge message: %d hits", len(got))
	}
	if got, _ := hits(t, db, "lastword"); len(got) != 0 {
		t.Errorf("a word past the cap: %d hits", len(got))
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom_search WHERE tenant = 'acme' AND thread = 'acme/t'`).Scan(&n); err != nil || n != 4 {
		t.Errorf("%d entries (%v), want 4 (none for a message without words)", n, err)
	}
	if err := db.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom_search`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d entries after the thread was deleted (%v)", n, err)
	}
}

// TestFoldRacesDelete folds while threads are deleted: no entry is left
// of a freed commit, nothing stays pending, and every message of the
// threads kept is found.
func TestFoldRacesDelete(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	s.stopFolding() // the test folds
	ctx := t.Context()
	db := thread.New(s, nil)
	const n = 40
	for i := range n {
		th, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("t%d", i), Messages: []message.Message{message.User("pear")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := th.Append(ctx, message.User("pear again")); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < n; i += 2 {
			if err := db.Delete(ctx, fmt.Sprintf("t%d", i)); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for range 5 {
			if err := s.retry(ctx, "fold", s.foldAll); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	got, threads := hits(t, db, "pear")
	if len(got) != n || len(threads) != n/2 {
		t.Errorf("%d hits in %d threads, want %d in %d", len(got), len(threads), n, n/2)
	}
	var pending int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loom_search_pending`).Scan(&pending); err != nil || pending != 0 {
		t.Errorf("%d commits pending after a search (%v)", pending, err)
	}
	checkRefs(t, s)
}

// TestSearchAfterAppend: a search right after an append finds it, the
// background fold stopped (the search folds).
func TestSearchAfterAppend(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	s.stopFolding()
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		word := fmt.Sprintf("plum%d", i)
		if _, err := th.Append(ctx, message.User(word)); err != nil {
			t.Fatal(err)
		}
		if got, _ := hits(t, db, word); len(got) != 1 {
			t.Errorf("%s: %d hits right after its append, want 1", word, len(got))
		}
	}
}
