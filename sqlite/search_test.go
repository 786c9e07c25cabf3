package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hit is what the tests compare of a search hit.
type hit struct {
	Thread, Text string
}

func search(t *testing.T, db *thread.DB, q string) []hit {
	t.Helper()
	hits, err := db.Search(t.Context(), thread.SearchQuery{Text: q, Limit: 1000})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	var out []hit
	for _, h := range hits {
		out = append(out, hit{h.Thread, store.SearchText(h.Message)})
	}
	return out
}

// countRows runs a query of one number, once every pending commit is in
// the search index.
func countRows(t *testing.T, s *Store, q string, args ...any) int {
	t.Helper()
	if err := s.foldAll(t.Context()); err != nil {
		t.Fatalf("fold: %v", err)
	}
	var n int
	if err := s.r.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func create(t *testing.T, db *thread.DB, id string, msgs ...message.Message) *thread.Thread {
	t.Helper()
	th, err := db.Create(t.Context(), thread.CreateOptions{ID: id, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func appendTo(t *testing.T, th *thread.Thread, msgs ...message.Message) {
	t.Helper()
	if _, err := th.Append(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
}

func TestSearchTenants(t *testing.T) {
	s := openStore(t)
	def := thread.New(s, nil)
	acme := def.WithTenant("acme")
	// A tenant whose token would be another's if tokens were not whole.
	acme2 := def.WithTenant("acme2")

	a := create(t, def, "a", message.User("The quick brown fox"), message.Assistant("jumps over the lazy dog"))
	appendTo(t, a, message.ToolCall("c1", "weather_lookup", `{"city":"Paris"}`), message.ToolResult("c1", "Sunny in PARIS, 21°C"))
	appendTo(t, a, message.User("   ,,, !!! "))
	b := create(t, acme, "b", message.User("A quick fox in Paris"))
	create(t, acme2, "c", message.User("Quick quick FOX"))

	for _, c := range []struct {
		db   *thread.DB
		q    string
		want []hit
	}{
		{def, "quick fox", []hit{{"a", "The quick brown fox"}}},
		{def, "FOX Quick", []hit{{"a", "The quick brown fox"}}},
		{def, "paris", []hit{{"a", "Sunny in PARIS, 21°C"}, {"a", `weather_lookup {"city":"Paris"}`}}},
		{def, "weather_lookup", []hit{{"a", `weather_lookup {"city":"Paris"}`}}},
		{def, "21", []hit{{"a", "Sunny in PARIS, 21°C"}}},
		{def, "fox dog", nil},
		{def, "qui", nil},
		{acme, "quick fox", []hit{{"b", "A quick fox in Paris"}}},
		{acme, "paris", []hit{{"b", "A quick fox in Paris"}}},
		{acme, "dog", nil},
		{acme2, "quick fox", []hit{{"c", "Quick quick FOX"}}},
		{def.WithTenant("nobody"), "quick", nil},
	} {
		if diff := cmp.Diff(c.want, search(t, c.db, c.q)); diff != "" {
			t.Errorf("tenant %q, search %q (-want +got):\n%s", c.db.Tenant(), c.q, diff)
		}
	}
	// The message of punctuation alone has no entry.
	if n := countRows(t, s, `SELECT count(*) FROM search_entries`); n != 6 {
		t.Errorf("%d entries, want 6", n)
	}
	_ = b
}

// A message that a word search finds is the message at the entry's commit
// and index, and its hit says when it was committed.
func TestSearchHit(t *testing.T) {
	s := openStore(t)
	db := thread.New(s, nil)
	th := create(t, db, "a", message.User("one"), message.User("two needle"), message.User("three"))
	hits, err := db.Search(t.Context(), thread.SearchQuery{Text: "needle"})
	if err != nil || len(hits) != 1 {
		t.Fatalf("%v, %v", hits, err)
	}
	h := hits[0]
	c, err := s.Commit(t.Context(), h.Commit)
	if err != nil {
		t.Fatal(err)
	}
	if h.Index != 1 || h.Thread != "a" || h.Message.Text() != "two needle" || !h.Time.Equal(c.Time) || h.Cursor == "" {
		t.Errorf("hit %+v", h)
	}
	_ = th
}

// Deleting threads drops the entries of the commits they freed, and only
// those; deleting them all leaves the index empty.
func TestSearchDelete(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	acme := db.WithTenant("acme")
	a := create(t, db, "a", message.User("alpha shared"))
	appendTo(t, a, message.User("alpha later"))
	f, err := a.Fork(ctx, thread.ForkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendTo(t, f, message.User("fork only"))
	b := create(t, acme, "b", message.User("beta shared"))
	if _, err := b.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, b, message.User("beta later"))

	// The fork keeps a's commits: they stay found, under a.
	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	want := []hit{{"a", "alpha later"}, {"a", "alpha shared"}}
	if diff := cmp.Diff(want, search(t, db, "alpha")); diff != "" {
		t.Errorf("after deleting a (-want +got):\n%s", diff)
	}
	if err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if got := search(t, db, "alpha"); got != nil {
		t.Errorf("after deleting the fork: %v", got)
	}
	if got := search(t, db, "fork"); got != nil {
		t.Errorf("after deleting the fork: %v", got)
	}
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM search_entries`); n != 0 {
		t.Errorf("%d entries left", n)
	}
	for _, q := range []struct{ tenant, word string }{{"", "alpha"}, {"", "fork"}, {"acme", "beta"}, {"acme", "shared"}} {
		m := searchMatch(store.SearchOptions{Tenant: q.tenant, Words: []string{q.word}})
		if n := countRows(t, s, `SELECT count(*) FROM search WHERE search MATCH ?`, m); n != 0 {
			t.Errorf("tenant %q: %d FTS rows of %q left", q.tenant, n, q.word)
		}
	}
}

// A fork shares its source's commits, and their entries: it adds none
// until it commits, and a hit in a shared message names the source.
func TestSearchFork(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	a := create(t, db, "a", message.User("first words"), message.Assistant("more words"))
	appendTo(t, a, message.User("last words"))
	before := countRows(t, s, `SELECT count(*) FROM search_entries`)
	f, err := a.Fork(ctx, thread.ForkOptions{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Fork(ctx, thread.ForkOptions{ID: "g", Version: 1}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM search_entries`); n != before {
		t.Errorf("%d entries after forking, want %d", n, before)
	}
	appendTo(t, f, message.User("fork words"))
	want := []hit{{"f", "fork words"}, {"a", "last words"}, {"a", "more words"}, {"a", "first words"}}
	if diff := cmp.Diff(want, search(t, db, "words")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A version that is rolled back stays found while the history reaches it.
func TestSearchRolledBack(t *testing.T) {
	ctx := t.Context()
	db := thread.New(openStore(t), nil)
	a := create(t, db, "a", message.User("kept"))
	appendTo(t, a, message.User("replaced soon"))
	if err := a.Restore(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := search(t, db, "replaced"); len(got) != 1 {
		t.Errorf("rolled back message: %v", got)
	}
}

// Pages of a search follow each other with their cursors, newest first,
// and together find every match once.
func TestSearchPages(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	a := create(t, db, "a")
	b := create(t, db, "b")
	var want []string
	for i := range 45 {
		th := a
		if i%3 == 0 {
			th = b
		}
		msgs := []message.Message{message.User(fmt.Sprintf("match number %d", i)), message.User("no hit here")}
		if i%5 == 0 {
			msgs = append(msgs, message.Assistant(fmt.Sprintf("another match %d", i)))
		}
		appendTo(t, th, msgs...)
		for _, m := range msgs {
			if strings.Contains(m.Text(), "match") {
				want = append(want, m.Text())
			}
		}
	}
	slices.Reverse(want)
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		hits, err := db.Search(ctx, thread.SearchQuery{Text: "match", Before: cursor, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			got = append(got, h.Message.Text())
		}
		if len(hits) < 10 {
			break
		}
		cursor = hits[len(hits)-1].Cursor
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"x", "-1", "0", "01", "1.5", "99999999999999999999"} {
		_, err := db.Search(ctx, thread.SearchQuery{Text: "match", Before: bad})
		if !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("cursor %q: %v, want ErrInvalid", bad, err)
		}
	}
	// Straight to the store: no cap, and a word that is no token (a
	// quote, upper case) finds nothing.
	n := 0
	for _, err := range s.Search(ctx, store.SearchOptions{Words: []string{"match"}}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != len(want) {
		t.Errorf("%d entries with no limit, want %d", n, len(want))
	}
	for _, err := range s.Search(ctx, store.SearchOptions{Words: []string{`a"b`, "match"}}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Error("a word with quotes found something")
	}
	for _, err := range s.Search(ctx, store.SearchOptions{Words: []string{"MATCH"}}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Error("an upper-case word found something")
	}
}

// A batch that fails indexes nothing.
func TestSearchFailedBatch(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	create(t, db, "a", message.User("first"))
	c := &thread.Commit{ID: "c_x", Depth: 1, Op: thread.OpAppend, Messages: []message.Message{message.User("orphan words")}}
	err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}, Moves: []store.Move{{Thread: "a", From: 7, Head: "c_x", Op: thread.OpAppend}}})
	if !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("apply: %v, want ErrConflict", err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM search_entries`); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
	if got := search(t, db, "orphan"); got != nil {
		t.Errorf("found %v", got)
	}
}

// The search query reads the FTS index backwards by rowid, with the bound
// and limit, and sorts nothing.
func TestSearchPlan(t *testing.T) {
	s := openStore(t)
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+qSearch,
		searchMatch(store.SearchOptions{Words: []string{"x", "y"}}), 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	text := strings.Join(plan, "\n")
	// FTS5's index 192 is ORDER BY rowid DESC consumed; "<" the rowid bound.
	if len(plan) != 3 || !strings.HasPrefix(plan[0], "SCAN search VIRTUAL TABLE INDEX 192:") || !strings.Contains(plan[0], "<") ||
		strings.Contains(text, "TEMP B-TREE") || strings.Contains(text, "SCAN e") || strings.Contains(text, "SCAN c") {
		t.Errorf("plan:\n%s", text)
	}
}

// TestMigrateSearch opens a database of schema version 2 with threads,
// forks, checkpoints and rolled-back versions in two tenants: the
// migration indexes what Apply would have, in the same order.
func TestMigrateSearch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := thread.New(s, nil)
	acme := db.WithTenant("acme")
	a := create(t, db, "a", message.User("apple banana"), message.Assistant("cherry apple"))
	appendTo(t, a, message.User("banana split"))
	if _, err := a.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, a, message.User("apple pie"))
	if err := a.Rollback(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	f, err := a.Fork(ctx, thread.ForkOptions{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	appendTo(t, f, message.User("apple of the fork"))
	b := create(t, acme, "b", message.User("apple in acme"))
	appendTo(t, b, message.ToolCall("c1", "apple_tool", "{}"), message.ToolResult("c1", "no words? apple"))
	create(t, db, "empty")
	queries := []string{"apple", "banana", "apple banana", "fork", "apple_tool", "words"}
	type result struct {
		Tenant, Query string
		Hits          []thread.SearchHit
	}
	results := func(s *Store) []result {
		var out []result
		for _, d := range []*thread.DB{thread.New(s, nil), thread.New(s, nil).WithTenant("acme")} {
			for _, q := range queries {
				hits, err := d.Search(ctx, thread.SearchQuery{Text: q})
				if err != nil {
					t.Fatal(err)
				}
				for i := range hits {
					hits[i].Cursor = ""
				}
				out = append(out, result{d.Tenant(), q, hits})
			}
		}
		return out
	}
	want := results(s)
	if len(want[0].Hits) != 4 || len(want[len(queries)].Hits) != 3 {
		t.Fatalf("apple: %d hits in the default tenant, %d in acme; want 4 and 3", len(want[0].Hits), len(want[len(queries)].Hits))
	}
	entries := countRows(t, s, `SELECT count(*) FROM search_entries`)
	s.Close()

	// Take the database back to version 2.
	raw := rawDB(t, path)
	for _, q := range []string{
		`DROP TRIGGER label_index_insert`, `DROP TRIGGER label_index_update`, `DROP TRIGGER label_index_delete`,
		`DROP TRIGGER label_index_updated`, `DROP TRIGGER label_index_thread`,
		`DROP TRIGGER label_index_thread_delete`, `DROP TABLE label_index`,
		`DROP INDEX threads_by_fork`, `CREATE INDEX labels_by_value ON labels (key, value, thread)`,
		`DROP INDEX threads_by_updated`, `DROP TRIGGER search_entries_unindex`, `DROP TRIGGER commits_unindex`,
		`DROP TABLE search_entries`, `DROP TABLE search`, `DROP TABLE search_pending`, `PRAGMA user_version = 2`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	s, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := countRows(t, s, `SELECT count(*) FROM search_entries`); n != entries {
		t.Errorf("%d entries after the migration, want %d", n, entries)
	}
	if diff := cmp.Diff(want, results(s)); diff != "" {
		t.Errorf("search after the migration (-before +after):\n%s", diff)
	}
	// And it is the index that Apply keeps up.
	appendTo(t, get(t, thread.New(s, nil), "f"), message.User("apple again"))
	if got := search(t, thread.New(s, nil), "again"); len(got) != 1 {
		t.Errorf("after the migration: %v", got)
	}
}

func get(t *testing.T, db *thread.DB, id string) *thread.Thread {
	t.Helper()
	th, err := db.Thread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// The release's database, migrated from schema version 1, finds its
// messages.
func TestMigrateReleaseSearch(t *testing.T) {
	s, err := Open(t.Context(), copyFixture(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := countRows(t, s, `SELECT count(*) FROM search_entries`)
	if n == 0 {
		t.Fatal("no entries")
	}
	// Every entry's message has the words it is indexed with.
	rows, err := s.r.QueryContext(t.Context(), `SELECT c.id, e.idx, e.thread FROM search_entries e JOIN commits c ON c.k = e.commit_key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, key string
		var idx int
		if err := rows.Scan(&id, &idx, &key); err != nil {
			t.Fatal(err)
		}
		c, err := s.Commit(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		words := store.SearchTokens(store.SearchText(c.Messages[idx]))
		tenant, _ := thread.SplitKey(key)
		hits, err := thread.New(s, nil).WithTenant(tenant).Search(t.Context(), thread.SearchQuery{Text: strings.Join(words[:min(3, len(words))], " "), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(hits, func(h thread.SearchHit) bool { return h.Commit == id && h.Index == idx }) {
			t.Errorf("commit %s message %d (%q) not found by its words", id, idx, words)
		}
	}
}

// Deleting the newest thread frees the largest rowids, which the next
// entries take again: the search finds the new messages, not the old
// ones, in order.
func TestSearchRowidReused(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	a := create(t, db, "a", message.User("old kept"))
	b := create(t, db, "b", message.User("old gone"), message.User("old gone too"))
	maxRowid := func() int {
		return countRows(t, s, `SELECT coalesce(max(rowid), 0) FROM search_entries`)
	}
	top := maxRowid()
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		appendTo(t, a, message.User(fmt.Sprintf("new %d", i)))
		// In one batch with a delete too.
		c := create(t, db, fmt.Sprintf("c%d", i), message.User("old gone again"))
		if err := c.Delete(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The rowids of b's entries, and then of each c's, were taken again.
	if got := maxRowid(); got != top+1 {
		t.Errorf("max rowid %d, want %d", got, top+1)
	}
	want := []hit{{"a", "new 2"}, {"a", "new 1"}, {"a", "new 0"}}
	if diff := cmp.Diff(want, search(t, db, "new")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]hit{{"a", "old kept"}}, search(t, db, "old")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := search(t, db, "gone"); got != nil {
		t.Errorf("deleted messages found: %v", got)
	}
}

// hasWords, which Apply asks instead of building a message's search text,
// agrees with store.SearchTokens(store.SearchText(m)) for every kind of
// content, so that no commit with words goes unqueued.
func TestHasWords(t *testing.T) {
	for _, m := range []message.Message{
		message.User("words"), message.User(" ,.!? "), message.User(""),
		message.New(message.RoleAssistant, message.Reasoning{Text: "thinking"}),
		message.New(message.RoleAssistant, message.Reasoning{Text: "…"}),
		message.ToolCall("c1", "lookup", "{}"), message.ToolCall("c1", "", `{"q":1}`), message.ToolCall("c1", "", "{}"),
		message.ToolResult("c1", "found"), message.ToolResult("c1", "[]"),
		message.New(message.RoleAssistant, message.Error{Message: "oops"}),
		message.New(message.RoleAssistant, message.Error{Message: "!"}),
		message.New(message.RoleUser, message.Data{MediaType: "text/plain", Data: []byte("binary words")}),
		message.New(message.RoleUser, message.Data{MediaType: "text/plain", Data: []byte("x")}, message.Text{Text: "e\u0301"}),
	} {
		if got, want := hasWords(m), len(store.SearchTokens(store.SearchText(m))) > 0; got != want {
			t.Errorf("hasWords(%q) = %v, want %v", store.SearchText(m), got, want)
		}
	}
}

// TestWorkflowRecordsNotQueued checks that a commit whose messages are a
// workflow's records (no search text, store.Searchable) costs no row in
// the index's queue, while a user's message does.
func TestWorkflowRecordsNotQueued(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "wf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.stopFolding()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pending := func() (n int) {
		if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM search_pending`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := pending()
	if _, err := th.Append(ctx, message.Message{Role: "workflow", Contents: []message.Content{message.Text{Text: "step a done"}}}); err != nil {
		t.Fatal(err)
	}
	if got := pending(); got != before {
		t.Errorf("a workflow record queued %d commits for the index, want 0", got-before)
	}
	if _, err := th.Append(ctx, message.User("step a done")); err != nil {
		t.Fatal(err)
	}
	if got := pending(); got != before+1 {
		t.Errorf("a user's message queued %d commits for the index, want 1", got-before)
	}
}
