package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// ticking returns a clock that moves a millisecond on each reading, so
// that every commit of a case has its own time and newest-first is one
// order in every store.
func ticking() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

type hitKey struct {
	thread, text string
}

func searchAll(t T, db *thread.DB, q string, limit int) []hitKey {
	t.Helper()
	hits, err := db.Search(t.Context(), thread.SearchQuery{Text: q, Limit: limit})
	check(t, err, "search "+q)
	var out []hitKey
	for _, h := range hits {
		if h.Message.Text() == "" && store.SearchText(h.Message) == "" {
			t.Errorf("search %q: hit %s/%d has no text", q, h.Commit, h.Index)
		}
		out = append(out, hitKey{h.Thread, store.SearchText(h.Message)})
	}
	return out
}

func wantHits(t T, got []hitKey, want []hitKey, what string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// search checks full-text search through DB.Search, which a Searcher
// answers from its index and any other store by a scan: the same hits,
// newest first, in each tenant's own threads only, whole words in any
// case, rolled back messages too (with the version that held them, when
// asked), none of a deleted thread's, and pages that follow each other.
func search(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	clock := ticking()
	for _, tenant := range []string{"", "acme"} {
		db := thread.New(s, &thread.Options{Now: clock}).WithTenant(tenant)
		a, err := db.Create(ctx, thread.CreateOptions{ID: "sa"})
		check(t, err, "create sa")
		_, err = a.Append(ctx, message.User("The quick brown fox"), message.Assistant("jumps over the lazy dog"))
		check(t, err, "append to sa")
		_, err = a.Append(ctx, message.New(message.RoleAssistant,
			message.FunctionCall{CallID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`}))
		check(t, err, "append a call")
		_, err = a.Append(ctx, message.ToolResult("c1", `{"sky":"Cloudy-ish"}`))
		check(t, err, "append a result")
		_, err = a.Append(ctx, message.User("QUICK thinking, "+tenant+"tenantword"))
		check(t, err, "append to sa")

		who := func(th, text string) hitKey { return hitKey{th, text} }
		wantHits(t, searchAll(t, db, "quick", 0), []hitKey{
			who("sa", "QUICK thinking, "+tenant+"tenantword"),
			who("sa", "The quick brown fox"),
		}, "quick, newest first, any case")
		wantHits(t, searchAll(t, db, "Fox QUICK", 0), []hitKey{who("sa", "The quick brown fox")}, "every word, any order")
		wantHits(t, searchAll(t, db, "qui", 0), nil, "whole words only")
		wantHits(t, searchAll(t, db, "paris weather", 0), []hitKey{who("sa", `weather {"city":"Paris"}`)}, "a tool call's name and arguments")
		wantHits(t, searchAll(t, db, "cloudy", 0), []hitKey{who("sa", `{"sky":"Cloudy-ish"}`)}, "a tool result")
		other := "acmetenantword"
		if tenant == "acme" {
			other = "tenantword"
		}
		wantHits(t, searchAll(t, db, other, 0), nil, "another tenant's words")

		// A rolled back message is still found; a fork adds no second hit.
		_, err = a.Checkpoint(ctx, "before")
		check(t, err, "checkpoint")
		_, err = a.Append(ctx, message.User("ephemeral zebra"))
		check(t, err, "append zebra")
		_, err = a.Fork(ctx, thread.ForkOptions{ID: "sa-fork"})
		check(t, err, "fork")
		check(t, a.Rollback(ctx, "before"), "rollback")
		wantHits(t, searchAll(t, db, "zebra", 0), []hitKey{who("sa", "ephemeral zebra")}, "a rolled back message, once")
		// With Versions, it names the version that held it; a message of
		// the head names none.
		for q, want := range map[string]int64{"zebra": a.Version() - 1, "fox": 0} {
			hits, err := db.Search(ctx, thread.SearchQuery{Text: q, Versions: true})
			check(t, err, "search with versions")
			if len(hits) != 1 || hits[0].Version != want {
				t.Errorf("%s with versions: %+v, want one hit at version %d", q, hits, want)
			}
		}

		// A thread of its own: its messages go with it.
		b, err := db.Create(ctx, thread.CreateOptions{ID: "sb"})
		check(t, err, "create sb")
		_, err = b.Append(ctx, message.User("unique walrus"), message.User("second walrus"))
		check(t, err, "append to sb")
		wantHits(t, searchAll(t, db, "walrus", 0), []hitKey{who("sb", "second walrus"), who("sb", "unique walrus")}, "two messages of one commit")
		check(t, b.Delete(ctx), "delete sb")
		wantHits(t, searchAll(t, db, "walrus", 0), nil, "a deleted thread's messages")

		// Pages follow each other with no repeat and no gap.
		p, err := db.Create(ctx, thread.CreateOptions{ID: "sp"})
		check(t, err, "create sp")
		var want []string
		for i := range 25 {
			text := fmt.Sprintf("paged item %02d", i)
			_, err := p.Append(ctx, message.User(text), message.User("noise"))
			check(t, err, "append paged")
			want = append(want, text)
		}
		slices.Reverse(want)
		var got []string
		before := ""
		for page := 0; page < 10; page++ {
			hits, err := db.Search(ctx, thread.SearchQuery{Text: "paged item", Limit: 10, Before: before})
			check(t, err, "search a page")
			for _, h := range hits {
				got = append(got, h.Message.Text())
			}
			if len(hits) < 10 {
				break
			}
			before = hits[len(hits)-1].Cursor
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages: got %v, want %v", clipList(got), clipList(want))
		}
		hits, err := db.Search(ctx, thread.SearchQuery{Text: "item 07"})
		check(t, err, "search item 07")
		if len(hits) != 1 || !strings.Contains(hits[0].Snippet, "item 07") || hits[0].Thread != "sp" || hits[0].Index != 0 || hits[0].Time.IsZero() {
			t.Errorf("hit of item 07: %+v", hits)
		}
	}

	db := thread.New(s, nil)
	var many []string
	for i := range thread.MaxSearchWords + 1 {
		many = append(many, fmt.Sprintf("w%d", i))
	}
	for _, q := range []string{"", "  !!! ", strings.Join(many, " ")} {
		_, err := db.Search(ctx, thread.SearchQuery{Text: q})
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("search %q", clip(q)))
	}
	_, err := db.Search(ctx, thread.SearchQuery{Text: "quick", Limit: -1})
	wantErr(t, err, thread.ErrInvalid, "a negative limit")
}

func clip(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

// watch checks the change feed through DB.Watch: a listener hears its own
// tenant's changes, in order and with their versions, made through any DB
// on the store; nothing of another tenant's; nothing after it stops.
func watch(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	type heard struct {
		mu  sync.Mutex
		got []thread.Change
	}
	listen := func(db *thread.DB) (*heard, context.CancelFunc) {
		h := &heard{}
		lctx, cancel := context.WithCancel(ctx)
		err := db.Watch(lctx, func(c thread.Change) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if c.Kind != thread.ChangeGap {
				h.got = append(h.got, c)
			}
		})
		check(t, err, "watch")
		return h, cancel
	}
	wait := func(h *heard, n int, what string) []thread.Change {
		t.Helper()
		var got []thread.Change
		testwait.Within(10*time.Second, func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			got = slices.Clone(h.got)
			return len(got) >= n
		})
		if len(got) != n {
			t.Fatalf("%s: heard %d changes, want %d: %+v", what, len(got), n, got)
		}
		return got
	}

	// One DB, opened once and shared: its tenants' copies hear what is
	// written through any of them (and a store that is a Watcher, what
	// every process writes).
	db := thread.New(s, nil)
	def, stopDef := listen(db)
	acme, stopAcme := listen(db.WithTenant("acme"))
	defer stopAcme()

	// Written through another copy than the listener's.
	w := db.WithTenant("acme")
	th, err := w.Create(ctx, thread.CreateOptions{ID: "w1"})
	check(t, err, "create")
	_, err = th.Append(ctx, message.User("one"))
	check(t, err, "append")
	_, err = th.Checkpoint(ctx, "cp")
	check(t, err, "checkpoint")
	f, err := th.Fork(ctx, thread.ForkOptions{ID: "w2"})
	check(t, err, "fork")
	check(t, f.Delete(ctx), "delete the fork")

	got := wait(acme, 5, "acme's listener")
	type brief struct {
		kind    thread.ChangeKind
		thread  string
		version int64
		op      thread.Op
	}
	var briefs []brief
	for _, c := range got {
		briefs = append(briefs, brief{c.Kind, c.Thread, c.Version, c.Op})
		if c.Time.IsZero() {
			t.Errorf("change %+v has no time", c)
		}
	}
	want := []brief{
		{thread.ChangeCreate, "w1", 1, thread.OpCreate},
		{thread.ChangeMove, "w1", 2, thread.OpAppend},
		{thread.ChangeCheckpoint, "w1", 0, ""},
		{thread.ChangeCreate, "w2", 1, thread.OpFork},
		{thread.ChangeDelete, "w2", 0, ""},
	}
	if !slices.Equal(briefs, want) {
		t.Errorf("acme heard %+v, want %+v", briefs, want)
	}
	if got[1].Head == "" || got[1].Head != th.Record().Head {
		t.Errorf("the append's head is %q, want %q", got[1].Head, th.Record().Head)
	}
	if got[2].Checkpoint != "cp" {
		t.Errorf("the checkpoint change names %q", got[2].Checkpoint)
	}

	// The default tenant heard none of it; then hears its own.
	d, err := db.Create(ctx, thread.CreateOptions{ID: "w1"})
	check(t, err, "create in the default tenant")
	if got := wait(def, 1, "the default tenant's listener"); got[0].Thread != "w1" || got[0].Kind != thread.ChangeCreate {
		t.Errorf("default tenant heard %+v", got)
	}
	// A listener that stopped hears nothing more: once one that still
	// listens has heard the append, the stopped one has not.
	live, stopLive := listen(db)
	defer stopLive()
	stopDef()
	_, err = d.Append(ctx, message.User("unheard"))
	check(t, err, "append after the listener stopped")
	if !testwait.Within(10*time.Second, func() bool {
		live.mu.Lock()
		defer live.mu.Unlock()
		return slices.ContainsFunc(live.got, func(c thread.Change) bool { return c.Thread == "w1" && c.Op == thread.OpAppend })
	}) {
		t.Fatalf("a listener never heard the append")
	}
	def.mu.Lock()
	n := len(def.got)
	def.mu.Unlock()
	if n != 1 {
		t.Errorf("a stopped listener heard %d changes, want 1", n)
	}

	// A tenant that is not an id cannot listen.
	err = thread.New(s, nil).WithTenant("bad/tenant").Watch(ctx, func(thread.Change) {})
	if !errors.Is(err, thread.ErrInvalid) {
		t.Errorf("watch by a bad tenant: %v, want ErrInvalid", err)
	}
}
