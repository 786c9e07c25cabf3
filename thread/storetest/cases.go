package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

func check(t T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantErr(t T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func texts(msgs []message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

func numbered(prefix string, n int) []message.Message {
	out := make([]message.Message, n)
	for i := range out {
		out[i] = message.User(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func encode(t T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	check(t, err, "encode")
	return string(b)
}

func read(t T, th *thread.Thread, opts thread.ReadOptions) []message.Message {
	t.Helper()
	msgs, err := th.Messages(t.Context(), opts)
	check(t, err, "read "+th.ID())
	return msgs
}

func wantTexts(t T, got []message.Message, want []string, what string) {
	t.Helper()
	if g := texts(got); !slices.Equal(g, want) {
		t.Fatalf("%s: got %d messages %q, want %d %q", what, len(g), clipList(g), len(want), clipList(want))
	}
}

func clipList(s []string) []string {
	if len(s) > 12 {
		return append(slices.Clone(s[:6]), append([]string{"…"}, s[len(s)-6:]...)...)
	}
	return s
}

func rawCommit(parent *thread.Commit, text string) *thread.Commit {
	c := &thread.Commit{ID: ids.New("c_"), Op: thread.OpAppend, Time: time.Now().UTC().Truncate(time.Microsecond),
		Messages: []message.Message{{ID: message.NewID(), Role: message.RoleUser, Contents: []message.Content{message.Text{Text: text}}}}}
	c.Depth = 1
	if parent != nil {
		c.Parent, c.Depth, c.StateFrom = parent.ID, parent.Depth+1, parent.StateFrom
	}
	return c
}

func commitsAreImmutable(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{Messages: []message.Message{message.User("original")}})
	check(t, err, "create")
	id := th.Record().Head
	c, err := s.Commit(ctx, id)
	check(t, err, "commit")
	before := encode(t, c)
	c.Messages[0].Contents[0] = message.Text{Text: "changed"}
	c.Messages = append(c.Messages, message.User("more"))
	c.Depth = 99
	again, err := s.Commit(ctx, id)
	check(t, err, "commit again")
	if after := encode(t, again); after != before {
		t.Fatalf("changing a returned commit changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// Writing the same id again is a conflict and changes nothing.
	dup := rawCommit(nil, "impostor")
	dup.ID = id
	wantErr(t, s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{dup}}), thread.ErrConflict, "rewrite commit")
	again, err = s.Commit(ctx, id)
	check(t, err, "commit after rewrite")
	if after := encode(t, again); after != before {
		t.Fatalf("a rewrite changed commit %s", id)
	}
	// Changing what was written after Apply changes nothing either.
	in := rawCommit(again, "input")
	check(t, s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{in}, Moves: []store.Move{{Thread: th.ID(), From: 1, Head: in.ID, Op: thread.OpAppend, Time: in.Time}}}), "apply")
	in.Messages[0].Contents[0] = message.Text{Text: "mutated"}
	got, err := s.Commit(ctx, in.ID)
	check(t, err, "read input commit")
	if got.Messages[0].Text() != "input" {
		t.Fatalf("the store kept a reference to the caller's commit: %q", got.Messages[0].Text())
	}
	_, err = s.Commit(ctx, "c_nope")
	wantErr(t, err, thread.ErrNotFound, "unknown commit")
	for _, err := range s.Ancestors(ctx, "c_nope", -1) {
		wantErr(t, err, thread.ErrNotFound, "ancestors of unknown commit")
	}
}

func batchIsAtomic(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: numbered("a", 1)})
	check(t, err, "create a")
	b, err := db.Create(ctx, thread.CreateOptions{ID: "b"})
	check(t, err, "create b")
	head, err := s.Commit(ctx, a.Record().Head)
	check(t, err, "head")
	c1 := rawCommit(head, "c1")
	now := time.Now().UTC()
	bad := []*store.Batch{
		// A good move on a, then a move of b from a wrong version.
		{Commits: []*thread.Commit{c1}, Moves: []store.Move{{Thread: "a", From: 1, Head: c1.ID, Op: thread.OpAppend, Time: now}, {Thread: "b", From: 7, Head: "", Op: thread.OpReset, Time: now}}},
		// A good move, then a checkpoint on a missing commit.
		{Commits: []*thread.Commit{c1}, Moves: []store.Move{{Thread: "a", From: 1, Head: c1.ID, Op: thread.OpAppend, Time: now}}, Checkpoints: []thread.Checkpoint{{Thread: "a", Name: "x", Commit: "c_missing", CreatedAt: now}}},
		// A good move, then a creation of an existing thread.
		{Commits: []*thread.Commit{c1}, Moves: []store.Move{{Thread: "a", From: 1, Head: c1.ID, Op: thread.OpAppend, Time: now}}, Create: []store.Creation{{Record: &thread.Record{ID: "b", Kind: thread.KindLocal, Version: 1, CreatedAt: now, UpdatedAt: now}, Op: thread.OpCreate}}},
		// A commit whose parent does not exist.
		{Commits: []*thread.Commit{c1, {ID: ids.New("c_"), Parent: "c_missing", Depth: 2, Op: thread.OpAppend, Time: now}}},
		// A delete at the wrong version.
		{Commits: []*thread.Commit{c1}, Moves: []store.Move{{Thread: "a", From: 1, Head: c1.ID, Op: thread.OpAppend, Time: now}}, Delete: []store.Deletion{{Thread: "b", Version: 5}}},
	}
	for i, batch := range bad {
		if err := s.Apply(ctx, batch); err == nil {
			t.Fatalf("bad batch %d was applied", i)
		}
		r, err := s.Thread(ctx, "a")
		check(t, err, "thread a")
		if r.Version != 1 || r.Head != head.ID {
			t.Fatalf("bad batch %d moved thread a to version %d head %s", i, r.Version, r.Head)
		}
		if _, err := s.Commit(ctx, c1.ID); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("bad batch %d left commit %s behind (err %v)", i, c1.ID, err)
		}
		if _, err := s.Thread(ctx, "b"); err != nil {
			t.Fatalf("bad batch %d: thread b: %v", i, err)
		}
	}
	// The same batch made good applies whole: two moves, two threads.
	check(t, s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c1}, Moves: []store.Move{
		{Thread: "a", From: 1, Head: c1.ID, Op: thread.OpAppend, Time: now},
		{Thread: "b", From: 1, Head: c1.ID, Op: thread.OpRestore, Time: now}}}), "good batch")
	check(t, a.Refresh(ctx), "refresh a")
	check(t, b.Refresh(ctx), "refresh b")
	if a.Version() != 2 || b.Version() != 2 {
		t.Fatalf("after a good batch: versions %d and %d, want 2 and 2", a.Version(), b.Version())
	}
	wantTexts(t, read(t, b, thread.ReadOptions{}), []string{"a0", "c1"}, "b after the batch")
}

func createAndRead(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "t1", Kind: thread.KindLocal, Title: "Trip to Paris ✈",
		Labels: map[string]string{"team": "travel", "env": "prod"}})
	check(t, err, "create")
	got, err := db.Thread(ctx, "t1")
	check(t, err, "get")
	want := th.Record()
	if g, w := encode(t, got.Record()), encode(t, want); g != w {
		t.Fatalf("record read back differs:\ngot  %s\nwant %s", g, w)
	}
	if want.Version != 1 || want.Head != "" || want.Kind != thread.KindLocal || want.CreatedAt.IsZero() {
		t.Fatalf("new record: %+v", want)
	}
	_, err = db.Create(ctx, thread.CreateOptions{ID: "t1"})
	wantErr(t, err, thread.ErrConflict, "create twice")
	_, err = db.Thread(ctx, "t2")
	wantErr(t, err, thread.ErrNotFound, "get unknown")
	n, err := got.Len(ctx)
	check(t, err, "len")
	if n != 0 || len(read(t, got, thread.ReadOptions{})) != 0 {
		t.Fatalf("a new thread has %d messages", n)
	}
	// Another tenant neither sees nor reaches it.
	other := db.WithTenant("other")
	_, err = other.Thread(ctx, "t1")
	wantErr(t, err, thread.ErrNotFound, "other tenant get")
	wantErr(t, other.Delete(ctx, "t1"), thread.ErrNotFound, "other tenant delete")
	for th, err := range other.Threads(ctx, thread.ListOptions{}) {
		check(t, err, "other tenant list")
		t.Fatalf("other tenant lists %s", th.ID())
	}
}

func appendAndRead(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	check(t, err, "create")
	c, err := th.Append(ctx, message.User("hello"))
	check(t, err, "append one")
	if c.Depth != 1 || len(c.Messages) != 1 || c.Messages[0].ID == "" || c.Messages[0].CreatedAt.IsZero() {
		t.Fatalf("append returned %+v", c)
	}
	_, err = th.Append(ctx, numbered("m", 5)...)
	check(t, err, "append five")
	if th.Version() != 3 {
		t.Fatalf("version %d after two appends, want 3", th.Version())
	}
	all := []string{"hello", "m0", "m1", "m2", "m3", "m4"}
	fresh, err := db.Thread(ctx, th.ID())
	check(t, err, "get")
	wantTexts(t, read(t, fresh, thread.ReadOptions{}), all, "all")
	for _, k := range []int{1, 2, 5, 6, 100} {
		wantTexts(t, read(t, fresh, thread.ReadOptions{Last: k}), all[max(0, len(all)-k):], fmt.Sprintf("last %d", k))
	}
	wantTexts(t, read(t, fresh, thread.ReadOptions{Version: 2}), all[:1], "at version 2")
	_, err = fresh.Messages(ctx, thread.ReadOptions{Version: 9})
	wantErr(t, err, thread.ErrNotFound, "read a future version")
	// A stale handle still appends: pure appends rebase.
	stale, err := db.Thread(ctx, th.ID())
	check(t, err, "stale handle")
	_, err = th.Append(ctx, message.Assistant("from th"))
	check(t, err, "append through th")
	_, err = stale.Append(ctx, message.Assistant("from stale"))
	check(t, err, "append through stale handle")
	wantTexts(t, read(t, stale, thread.ReadOptions{Last: 2}), []string{"from th", "from stale"}, "after rebase")
	// IfVersion never rebases.
	_, err = th.Commit(ctx, thread.CommitOptions{Messages: numbered("x", 1), IfVersion: 3})
	wantErr(t, err, thread.ErrConflict, "If-Match on an old version")
	_, err = th.Commit(ctx, thread.CommitOptions{Messages: numbered("x", 1), IfVersion: 5})
	check(t, err, "If-Match on the current version")
	// Invalid messages change nothing.
	v := th.Version()
	for _, bad := range []message.Message{{Role: "", Contents: []message.Content{message.Text{Text: "x"}}}, {ID: "../x", Role: "user"}, {Role: "user", Contents: []message.Content{nil}}} {
		_, err = th.Append(ctx, message.User("ok"), bad)
		wantErr(t, err, thread.ErrInvalid, "bad message")
	}
	_, err = th.Append(ctx)
	wantErr(t, err, thread.ErrInvalid, "append nothing")
	check(t, th.Refresh(ctx), "refresh")
	if th.Version() != v {
		t.Fatalf("bad appends moved the version from %d to %d", v, th.Version())
	}
}

func everyContentSurvives(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("x", 3600))
	msgs := []message.Message{
		{ID: "m1", Role: message.RoleSystem, Contents: []message.Content{message.Text{Text: "be brief"}}, CreatedAt: at},
		{ID: "m2", Role: message.RoleAssistant, AuthorName: "planner", CreatedAt: at, Contents: []message.Content{
			message.Reasoning{Text: "thinking", Protected: "sig=="},
			message.FunctionCall{CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
			message.FunctionCall{CallID: "call_2", Name: "broken", Arguments: `{"unterminated`},
			message.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
		}, Metadata: map[string]any{"run": "r1", "big": json.Number("12345678901234567890"), "nested": map[string]any{"a": []any{"x", true, nil}}}},
		{ID: "m3", Role: message.RoleTool, CreatedAt: at, Contents: []message.Content{
			message.FunctionResult{CallID: "call_1", Result: `{"temp_c":21}`},
			message.FunctionResult{CallID: "call_2", Result: "bad arguments", IsError: true},
		}},
		{ID: "m4", Role: message.RoleUser, CreatedAt: at, Contents: []message.Content{
			message.Data{MediaType: "image/png", Data: []byte{0, 1, 2, 255}, Name: "dot.png"},
			message.Data{MediaType: "application/pdf", URI: "https://example.com/a.pdf"},
			message.Error{Code: "rate_limit", Message: "slow down"},
			message.Unknown{Raw: []byte(`{"type":"citation","url":"https://x","spans":[1,2],"deep":{"k":[{"z":1e400}]}}`)},
			message.Text{Text: "unicode: ✓ \u2028 \"quotes\" \\ <tags> & \x7f"},
		}},
		{ID: "m5", Role: "critic", Contents: nil, CreatedAt: at.UTC()},
	}
	th, err := db.Create(ctx, thread.CreateOptions{Messages: msgs})
	check(t, err, "create")
	got := read(t, th, thread.ReadOptions{})
	if g, w := encode(t, got), encode(t, msgs); g != w {
		t.Fatalf("messages read back differ:\ngot  %s\nwant %s", g, w)
	}
	if u, ok := got[3].Contents[3].(message.Unknown); !ok || u.Type() != "citation" {
		t.Fatalf("unknown content came back as %#v", got[3].Contents[3])
	}
	if !got[0].CreatedAt.Equal(at) {
		t.Fatalf("created_at %v, want %v", got[0].CreatedAt, at)
	}
}

func casOneWinnerPerVersion(t T, s store.Store, o *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{Messages: numbered("start", 1)})
	check(t, err, "create")
	head, err := s.Commit(ctx, th.Record().Head)
	check(t, err, "head")
	const rounds = 8
	for round := range rounds {
		from := int64(round + 1)
		commits := make([]*thread.Commit, o.Writers)
		errs := make([]error, o.Writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range o.Writers {
			commits[w] = rawCommit(head, fmt.Sprintf("r%d-w%d", round, w))
			wg.Go(func() {
				<-start
				errs[w] = s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{commits[w]},
					Moves: []store.Move{{Thread: th.ID(), From: from, Head: commits[w].ID, Op: thread.OpAppend, Time: commits[w].Time}}})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both moved the head from version %d", round, winner, w, from)
			case err == nil:
				winner = w
			case !errors.Is(err, thread.ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want ErrConflict", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		r, err := s.Thread(ctx, th.ID())
		check(t, err, "record")
		if r.Version != from+1 || r.Head != commits[winner].ID {
			t.Fatalf("round %d: record at version %d head %s, want %d %s", round, r.Version, r.Head, from+1, commits[winner].ID)
		}
		head = commits[winner]
	}
	var versions []int64
	for e, err := range s.History(ctx, th.ID(), thread.HistoryOptions{}) {
		check(t, err, "history")
		versions = append(versions, e.Version)
	}
	for i, v := range versions {
		if v != int64(len(versions)-i) {
			t.Fatalf("history versions %v are not one per version", versions)
		}
	}
	if len(versions) != rounds+1 {
		t.Fatalf("%d history entries, want %d", len(versions), rounds+1)
	}
}

func concurrentAppendsLoseNothing(t T, s store.Store, o *Options) {
	ctx := t.Context()
	db := thread.New(s, &thread.Options{AppendRetries: 10_000})
	th, err := db.Create(ctx, thread.CreateOptions{})
	check(t, err, "create")
	const each = 8
	var wg sync.WaitGroup
	for w := range o.Writers {
		wg.Go(func() {
			h, err := db.Thread(ctx, th.ID()) // a handle each: the store arbitrates
			if err != nil {
				t.Errorf("writer %d: %v", w, err)
				return
			}
			for i := range each {
				if _, err := h.Append(ctx, message.User(fmt.Sprintf("w%d-%d", w, i))); err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	check(t, th.Refresh(ctx), "refresh")
	msgs := read(t, th, thread.ReadOptions{})
	if len(msgs) != o.Writers*each {
		t.Fatalf("%d messages after %d appends: appends were lost", len(msgs), o.Writers*each)
	}
	seen := map[string]bool{}
	next := make([]int, o.Writers)
	for _, m := range msgs {
		if seen[m.Text()] {
			t.Fatalf("message %q twice", m.Text())
		}
		seen[m.Text()] = true
		var w, i int
		fmt.Sscanf(m.Text(), "w%d-%d", &w, &i)
		if i != next[w] {
			t.Fatalf("writer %d's messages out of order: got %d, want %d", w, i, next[w])
		}
		next[w]++
	}
	if th.Version() != int64(o.Writers*each+1) {
		t.Fatalf("version %d, want %d", th.Version(), o.Writers*each+1)
	}
}

func forkAtMessage(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	src, err := db.Create(ctx, thread.CreateOptions{Title: "src", Labels: map[string]string{"k": "v"}})
	check(t, err, "create")
	_, err = src.Append(ctx, numbered("a", 2)...)
	check(t, err, "append")
	c2, err := src.Append(ctx, numbered("b", 3)...) // b0 b1 b2 in one commit
	check(t, err, "append")
	_, err = src.Append(ctx, numbered("c", 1)...)
	check(t, err, "append")

	// At the head: the same commit, no new one.
	f, err := src.Fork(ctx, thread.ForkOptions{})
	check(t, err, "fork at head")
	if f.Record().Head != src.Record().Head || f.Title() != "src" || f.Record().Labels["k"] != "v" {
		t.Fatalf("fork at head: %+v", f.Record())
	}
	if ff := f.Record().ForkedFrom; ff.Thread != src.ID() || ff.Commit != src.Record().Head {
		t.Fatalf("forked_from %+v", ff)
	}
	// At the last message of a commit: that commit.
	g, err := src.Fork(ctx, thread.ForkOptions{At: c2.Messages[2].ID, Title: "g"})
	check(t, err, "fork at end of commit")
	if g.Record().Head != c2.ID {
		t.Fatalf("fork at the end of a commit made a new commit %s, want %s", g.Record().Head, c2.ID)
	}
	wantTexts(t, read(t, g, thread.ReadOptions{}), []string{"a0", "a1", "b0", "b1", "b2"}, "fork g")
	// Inside a commit: a split commit with the prefix.
	h, err := src.Fork(ctx, thread.ForkOptions{At: c2.Messages[0].ID})
	check(t, err, "fork inside commit")
	wantTexts(t, read(t, h, thread.ReadOptions{}), []string{"a0", "a1", "b0"}, "fork h")
	wantTexts(t, read(t, h, thread.ReadOptions{Last: 2}), []string{"a1", "b0"}, "fork h last 2")
	if n, _ := h.Len(ctx); n != 3 {
		t.Fatalf("fork h has Len %d, want 3", n)
	}
	hid := read(t, h, thread.ReadOptions{})
	if hid[2].ID != c2.Messages[0].ID {
		t.Fatalf("the split commit changed message ids")
	}
	// Forks diverge; the source never changes.
	_, err = h.Append(ctx, message.User("h-only"))
	check(t, err, "append h")
	_, err = g.Append(ctx, message.User("g-only"))
	check(t, err, "append g")
	wantTexts(t, read(t, src, thread.ReadOptions{}), []string{"a0", "a1", "b0", "b1", "b2", "c0"}, "source after forks")
	wantTexts(t, read(t, h, thread.ReadOptions{}), []string{"a0", "a1", "b0", "h-only"}, "h after append")
	// At a past version, and errors.
	p, err := src.Fork(ctx, thread.ForkOptions{Version: 2})
	check(t, err, "fork at version")
	wantTexts(t, read(t, p, thread.ReadOptions{}), []string{"a0", "a1"}, "fork at version 2")
	_, err = src.Fork(ctx, thread.ForkOptions{At: "msg_nope"})
	wantErr(t, err, thread.ErrNotFound, "fork at unknown message")
	_, err = src.Fork(ctx, thread.ForkOptions{At: "h-only"})
	wantErr(t, err, thread.ErrNotFound, "fork at a message of another branch")
	_, err = src.Fork(ctx, thread.ForkOptions{ID: f.ID()})
	wantErr(t, err, thread.ErrConflict, "fork onto an existing id")
	// Copy: same messages, not a fork.
	cp, err := src.Copy(ctx, thread.ForkOptions{Title: "copy"})
	check(t, err, "copy")
	if cp.Record().ForkedFrom != (thread.ForkPoint{}) || cp.Title() != "copy" {
		t.Fatalf("copy record %+v", cp.Record())
	}
	wantTexts(t, read(t, cp, thread.ReadOptions{}), texts(read(t, src, thread.ReadOptions{})), "copy")
}

func deepForkChain(t T, s store.Store, o *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{Messages: numbered("root", 1)})
	check(t, err, "create")
	want := []string{"root0"}
	first := th
	for i := range o.ForkDepth {
		f, err := th.Fork(ctx, thread.ForkOptions{})
		check(t, err, fmt.Sprintf("fork %d", i))
		_, err = f.Append(ctx, message.User(fmt.Sprintf("level%d", i)))
		check(t, err, fmt.Sprintf("append %d", i))
		want = append(want, fmt.Sprintf("level%d", i))
		th = f
	}
	wantTexts(t, read(t, th, thread.ReadOptions{}), want, "deepest fork")
	wantTexts(t, read(t, th, thread.ReadOptions{Last: 3}), want[len(want)-3:], "deepest fork, last 3")
	wantTexts(t, read(t, first, thread.ReadOptions{}), want[:1], "first thread")
	// Fork the deepest at the root's message: one walk down the chain.
	back, err := th.Fork(ctx, thread.ForkOptions{At: read(t, first, thread.ReadOptions{})[0].ID})
	check(t, err, "fork back at the root message")
	wantTexts(t, read(t, back, thread.ReadOptions{}), want[:1], "fork back")
}

func deleteKeepsSharedPrefixes(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: numbered("shared", 2)})
	check(t, err, "create a")
	shared := a.Record().Head
	aOwn, err := a.Append(ctx, message.User("a-own"))
	check(t, err, "append a")
	b, err := a.Fork(ctx, thread.ForkOptions{ID: "b", At: read(t, a, thread.ReadOptions{})[1].ID})
	check(t, err, "fork b")
	bOwn, err := b.Append(ctx, message.User("b-own"))
	check(t, err, "append b")
	c, err := b.Fork(ctx, thread.ForkOptions{ID: "c"})
	check(t, err, "fork c")
	cOwn, err := c.Append(ctx, message.User("c-own"))
	check(t, err, "append c")
	_, err = a.Checkpoint(ctx, "a-cp")
	check(t, err, "checkpoint a")

	check(t, a.Delete(ctx), "delete a")
	_, err = db.Thread(ctx, "a")
	wantErr(t, err, thread.ErrNotFound, "deleted a")
	_, err = s.Commit(ctx, aOwn.ID)
	wantErr(t, err, thread.ErrNotFound, "a's own commit after delete")
	for _, err := range s.Checkpoints(ctx, "a") {
		wantErr(t, err, thread.ErrNotFound, "checkpoints of deleted a")
	}
	for _, err := range s.History(ctx, "a", thread.HistoryOptions{}) {
		wantErr(t, err, thread.ErrNotFound, "history of deleted a")
	}
	_, err = s.Commit(ctx, shared)
	check(t, err, "the shared commit survives a's delete")
	wantTexts(t, read(t, b, thread.ReadOptions{}), []string{"shared0", "shared1", "b-own"}, "b after a's delete")
	wantTexts(t, read(t, c, thread.ReadOptions{}), []string{"shared0", "shared1", "b-own", "c-own"}, "c after a's delete")

	check(t, b.Delete(ctx), "delete b")
	_, err = s.Commit(ctx, bOwn.ID)
	check(t, err, "b's commit survives: c reaches it")
	wantTexts(t, read(t, c, thread.ReadOptions{}), []string{"shared0", "shared1", "b-own", "c-own"}, "c after b's delete")

	check(t, db.Delete(ctx, "c"), "delete c")
	for _, id := range []string{shared, bOwn.ID, cOwn.ID} {
		_, err = s.Commit(ctx, id)
		wantErr(t, err, thread.ErrNotFound, "commit "+id+" after every thread is gone")
	}
	wantErr(t, db.Delete(ctx, "c"), thread.ErrNotFound, "delete twice")
	// A stale handle cannot delete a thread that moved.
	d, err := db.Create(ctx, thread.CreateOptions{ID: "d"})
	check(t, err, "create d")
	d2, err := db.Thread(ctx, "d")
	check(t, err, "second handle on d")
	_, err = d2.Append(ctx, message.User("new"))
	check(t, err, "append d")
	wantErr(t, d.Delete(ctx), thread.ErrConflict, "delete from a stale handle")
}

func hostileIDs(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	hostile := []string{"", "../../etc/passwd", "..", ".", "a/b", `a\b`, "a\x00b", "{slot}", "a b", "é", strings.Repeat("x", 129), "-rf", "a:b", "%2e%2e"}
	for _, id := range hostile {
		_, err := db.Create(ctx, thread.CreateOptions{ID: id})
		if id == "" {
			check(t, err, "create with an empty id makes a fresh one")
			continue
		}
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("create %q", id))
		_, err = db.Thread(ctx, id)
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("get %q", id))
		// The store itself never escapes or panics on such ids.
		if _, err := s.Thread(ctx, id); !errors.Is(err, thread.ErrNotFound) && !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("store Thread(%q): %v", id, err)
		}
		if _, err := s.Commit(ctx, id); !errors.Is(err, thread.ErrNotFound) && !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("store Commit(%q): %v", id, err)
		}
	}
	th, err := db.Create(ctx, thread.CreateOptions{ID: "ok"})
	check(t, err, "create ok")
	_, err = th.Append(ctx, message.User("x"))
	check(t, err, "append")
	for _, id := range hostile[1:] {
		_, err := th.Fork(ctx, thread.ForkOptions{ID: id})
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("fork to %q", id))
		_, err = th.Fork(ctx, thread.ForkOptions{At: id})
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("fork at %q", id))
		_, err = th.Append(ctx, message.Message{ID: id, Role: message.RoleUser})
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("message id %q", id))
		_, err = db.Create(ctx, thread.CreateOptions{Labels: map[string]string{id: "v"}})
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("label key %q", id))
	}
	for _, name := range []string{"", "a\nb", strings.Repeat("n", 129), "\x00"} {
		_, err := th.Checkpoint(ctx, name)
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("checkpoint %q", name))
	}
	_, err = th.Checkpoint(ctx, "../../ok as a name")
	check(t, err, "a checkpoint name is data, not a path")
	n := 0
	for _, err := range db.Threads(ctx, thread.ListOptions{}) {
		check(t, err, "list")
		n++
	}
	if n != 2 {
		t.Fatalf("%d threads after hostile creates, want 2", n)
	}
}

func largeMessages(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, &thread.Options{Limits: thread.Limits{MessageBytes: 1 << 20}})
	th, err := db.Create(ctx, thread.CreateOptions{})
	check(t, err, "create")
	big := strings.Repeat("loom ✓ ", (1<<20-4096)/9)
	_, err = th.Append(ctx, message.User(big))
	check(t, err, "append a message of almost 1 MiB")
	_, err = th.Append(ctx, message.User(strings.Repeat("x", 1<<20+1)))
	wantErr(t, err, thread.ErrInvalid, "append a message over 1 MiB")
	many := numbered("n", 2000)
	_, err = th.Append(ctx, many...)
	check(t, err, "append 2,000 messages in one commit")
	fresh, err := db.Thread(ctx, th.ID())
	check(t, err, "get")
	if fresh.Version() != 3 {
		t.Fatalf("version %d, want 3 (the oversized append must change nothing)", fresh.Version())
	}
	msgs := read(t, fresh, thread.ReadOptions{})
	if len(msgs) != 2001 || msgs[0].Text() != big || msgs[2000].Text() != "n1999" {
		t.Fatalf("read back %d messages; first intact: %v", len(msgs), len(msgs) > 0 && msgs[0].Text() == big)
	}
	wantTexts(t, read(t, fresh, thread.ReadOptions{Last: 3}), []string{"n1997", "n1998", "n1999"}, "last 3 inside a big commit")
	_, err = th.SetState(ctx, map[string]json.RawMessage{"big": json.RawMessage(`"` + strings.Repeat("s", 1<<20) + `"`)})
	wantErr(t, err, thread.ErrInvalid, "state over 1 MiB")
}

type step struct {
	op   string
	arg  string
	want []string // messages after the step
}

func historyAcrossRollbacks(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	check(t, err, "create")
	// Each step's resulting messages, by the version it makes.
	atVersion := map[int64][]string{1: nil}
	steps := []step{
		{"append", "a", []string{"a"}},
		{"append", "b", []string{"a", "b"}},
		{"checkpoint", "two", nil},
		{"append", "c", []string{"a", "b", "c"}},
		{"rollback", "two", []string{"a", "b"}},
		{"append", "d", []string{"a", "b", "d"}},
		{"restore", "4", []string{"a", "b", "c"}},
		{"reset", "", nil},
		{"append", "e", []string{"e"}},
		{"restore", "6", []string{"a", "b", "d"}},
		{"rollback", "two", []string{"a", "b"}},
	}
	var ops []thread.Op
	ops = append(ops, thread.OpCreate)
	for _, st := range steps {
		var err error
		switch st.op {
		case "append":
			_, err = th.Append(ctx, message.User(st.arg))
			ops = append(ops, thread.OpAppend)
		case "checkpoint":
			_, err = th.Checkpoint(ctx, st.arg)
		case "rollback":
			err = th.Rollback(ctx, st.arg)
			ops = append(ops, thread.OpRollback)
		case "restore":
			var v int64
			fmt.Sscan(st.arg, &v)
			err = th.Restore(ctx, v)
			ops = append(ops, thread.OpRestore)
		case "reset":
			err = th.Reset(ctx)
			ops = append(ops, thread.OpReset)
		}
		check(t, err, st.op+" "+st.arg)
		if st.op != "checkpoint" {
			atVersion[th.Version()] = st.want
			wantTexts(t, read(t, th, thread.ReadOptions{}), st.want, fmt.Sprintf("after %s %s", st.op, st.arg))
		}
	}
	// Time travel: every version reads as it was, through a fresh handle.
	fresh, err := db.Thread(ctx, th.ID())
	check(t, err, "get")
	for v, want := range atVersion {
		wantTexts(t, read(t, fresh, thread.ReadOptions{Version: v}), want, fmt.Sprintf("version %d", v))
	}
	var got []thread.Op
	var prev int64
	for e, err := range fresh.History(ctx, thread.HistoryOptions{}) {
		check(t, err, "history")
		if prev != 0 && e.Version != prev-1 {
			t.Fatalf("history goes from version %d to %d", prev, e.Version)
		}
		prev = e.Version
		got = append(got, e.Op)
	}
	slices.Reverse(got)
	if !slices.Equal(got, ops) {
		t.Fatalf("history ops %v, want %v", got, ops)
	}
	// Paging the history.
	var page []int64
	for e, err := range fresh.History(ctx, thread.HistoryOptions{Before: 5, Limit: 2}) {
		check(t, err, "history page")
		page = append(page, e.Version)
	}
	if !slices.Equal(page, []int64{4, 3}) {
		t.Fatalf("history page before 5, limit 2: %v", page)
	}
	// A rollback or restore from a stale handle is a conflict, never a retry.
	stale, err := db.Thread(ctx, th.ID())
	check(t, err, "stale")
	_, err = th.Append(ctx, message.User("z"))
	check(t, err, "append z")
	wantErr(t, stale.Rollback(ctx, "two"), thread.ErrConflict, "rollback from a stale handle")
	wantErr(t, stale.Restore(ctx, 2), thread.ErrConflict, "restore from a stale handle")
	wantErr(t, stale.Reset(ctx), thread.ErrConflict, "reset from a stale handle")
	wantErr(t, th.Restore(ctx, 999), thread.ErrNotFound, "restore an unknown version")
	wantErr(t, th.Rollback(ctx, "nope"), thread.ErrNotFound, "rollback to an unknown checkpoint")
	wantTexts(t, read(t, th, thread.ReadOptions{}), []string{"a", "b", "z"}, "after the refused operations")
}

func checkpoints(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	check(t, err, "create")
	_, err = th.Checkpoint(ctx, "empty")
	wantErr(t, err, thread.ErrInvalid, "checkpoint an empty thread")
	_, err = th.Append(ctx, message.User("a"))
	check(t, err, "append")
	cpB, err := th.Checkpoint(ctx, "b-first")
	check(t, err, "checkpoint b-first")
	_, err = th.Append(ctx, message.User("b"))
	check(t, err, "append")
	_, err = th.Checkpoint(ctx, "a-second")
	check(t, err, "checkpoint a-second")
	_, err = th.Checkpoint(ctx, "b-first")
	wantErr(t, err, thread.ErrConflict, "a checkpoint name twice")
	var names []string
	for cp, err := range th.Checkpoints(ctx) {
		check(t, err, "list")
		names = append(names, cp.Name)
		if cp.Name == "b-first" && (cp.Commit != cpB.Commit || cp.Version != 2 || cp.Thread != th.ID()) {
			t.Fatalf("checkpoint read back as %+v, want %+v", cp, cpB)
		}
	}
	if !slices.Equal(names, []string{"a-second", "b-first"}) {
		t.Fatalf("checkpoints %v, want name order", names)
	}
	check(t, th.DeleteCheckpoint(ctx, "a-second"), "delete checkpoint")
	wantErr(t, th.DeleteCheckpoint(ctx, "a-second"), thread.ErrNotFound, "delete it twice")
	wantErr(t, th.Rollback(ctx, "a-second"), thread.ErrNotFound, "rollback to a deleted checkpoint")
	// A checkpoint keeps a commit alive that only it reaches... in this
	// thread's history the commit is reached anyway; a checkpoint of a fork
	// keeps working when the source is deleted.
	f, err := th.Fork(ctx, thread.ForkOptions{})
	check(t, err, "fork")
	_, err = f.Checkpoint(ctx, "keep")
	check(t, err, "checkpoint on fork")
	_, err = f.Append(ctx, message.User("f"))
	check(t, err, "append fork")
	check(t, th.Delete(ctx), "delete source")
	check(t, f.Rollback(ctx, "keep"), "rollback the fork after the source is gone")
	wantTexts(t, read(t, f, thread.ReadOptions{}), []string{"a", "b"}, "fork at its checkpoint")
}

func stateIsVersioned(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{State: map[string]json.RawMessage{"ctx/memory": json.RawMessage(`{"facts": [1, 2]}`)}})
	check(t, err, "create with state")
	v1 := th.Version()
	_, err = th.Append(ctx, message.User("hi"))
	check(t, err, "append")
	_, err = th.SetState(ctx, map[string]json.RawMessage{"wf/step": json.RawMessage(`"plan"`), "ctx/memory": nil})
	check(t, err, "patch state")
	v3 := th.Version()
	_, err = th.Commit(ctx, thread.CommitOptions{Messages: numbered("m", 1), State: map[string]json.RawMessage{"wf/step": json.RawMessage(`"act"`)}, Kind: thread.KindLocal})
	check(t, err, "messages with state and kind")
	if th.Kind() != thread.KindLocal {
		t.Fatalf("kind %s after determining it", th.Kind())
	}
	_, err = th.Commit(ctx, thread.CommitOptions{State: map[string]json.RawMessage{}, Kind: thread.KindService})
	wantErr(t, err, thread.ErrInvalid, "a determined kind changes")
	state := func(v int64) string {
		st, err := th.State(ctx, v)
		check(t, err, fmt.Sprintf("state at %d", v))
		return encode(t, st)
	}
	for v, want := range map[int64]string{
		v1:     `{"ctx/memory":{"facts":[1,2]}}`,
		v1 + 1: `{"ctx/memory":{"facts":[1,2]}}`,
		v3:     `{"wf/step":"plan"}`,
		0:      `{"wf/step":"act"}`,
	} {
		if got := state(v); got != want {
			t.Fatalf("state at version %d: %s, want %s", v, got, want)
		}
	}
	f, err := th.Fork(ctx, thread.ForkOptions{})
	check(t, err, "fork")
	st, err := f.State(ctx, 0)
	check(t, err, "fork state")
	if encode(t, st) != `{"wf/step":"act"}` {
		t.Fatalf("fork state %s", encode(t, st))
	}
	check(t, th.Reset(ctx), "reset")
	if got := state(0); got != `{}` {
		t.Fatalf("state after reset: %s", got)
	}
	check(t, th.Restore(ctx, v3), "restore")
	if got := state(0); got != `{"wf/step":"plan"}` {
		t.Fatalf("state after restore: %s", got)
	}
	_, err = th.SetState(ctx, map[string]json.RawMessage{"bad": json.RawMessage(`{nope`)})
	wantErr(t, err, thread.ErrInvalid, "malformed state")
	_, err = th.SetState(ctx, map[string]json.RawMessage{"": json.RawMessage(`1`)})
	wantErr(t, err, thread.ErrInvalid, "empty state key")
}

func listFiltersAndPaging(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	var all, teamA []string
	for i := range 25 {
		team := []string{"a", "b"}[i%2]
		kind := []thread.Kind{thread.KindLocal, thread.KindService, thread.KindUndetermined}[i%3]
		id := fmt.Sprintf("t%02d", i)
		_, err := db.Create(ctx, thread.CreateOptions{ID: id, Kind: kind, Labels: map[string]string{"team": team, "n": fmt.Sprint(i)}})
		check(t, err, "create")
		all = append(all, id)
		if team == "a" {
			teamA = append(teamA, id)
		}
	}
	_, err := db.WithTenant("other").Create(ctx, thread.CreateOptions{ID: "t99"})
	check(t, err, "create in another tenant")
	list := func(o thread.ListOptions) []string {
		var out []string
		for th, err := range db.Threads(ctx, o) {
			check(t, err, "list")
			out = append(out, th.ID())
		}
		return out
	}
	if got := list(thread.ListOptions{}); !slices.Equal(got, all) {
		t.Fatalf("list all: %v", got)
	}
	if got := list(thread.ListOptions{Labels: map[string]string{"team": "a"}}); !slices.Equal(got, teamA) {
		t.Fatalf("list team=a: %v, want %v", got, teamA)
	}
	if got := list(thread.ListOptions{Labels: map[string]string{"team": "a", "n": "4"}}); !slices.Equal(got, []string{"t04"}) {
		t.Fatalf("list team=a,n=4: %v", got)
	}
	if got := list(thread.ListOptions{Labels: map[string]string{"team": "c"}}); len(got) != 0 {
		t.Fatalf("list team=c: %v", got)
	}
	if got := list(thread.ListOptions{Kind: thread.KindService}); len(got) != 8 || got[0] != "t01" {
		t.Fatalf("list kind=service: %v", got)
	}
	for _, desc := range []bool{false, true} {
		want := slices.Clone(all)
		if desc {
			slices.Reverse(want)
		}
		var paged []string
		after := ""
		for range 10 {
			page := list(thread.ListOptions{Limit: 7, After: after, Desc: desc})
			if len(page) > 7 {
				t.Fatalf("page of %d with limit 7", len(page))
			}
			paged = append(paged, page...)
			if len(page) < 7 {
				break
			}
			after = page[len(page)-1]
		}
		if !slices.Equal(paged, want) {
			t.Fatalf("paging (desc %v): %v, want %v", desc, paged, want)
		}
	}
	if got := list(thread.ListOptions{Labels: map[string]string{"team": "a"}, After: "t10", Limit: 2}); !slices.Equal(got, []string{"t12", "t14"}) {
		t.Fatalf("filtered page after t10: %v", got)
	}
	var every []string
	for r, err := range s.Threads(ctx, thread.ListOptions{AllTenants: true}) {
		check(t, err, "list all tenants")
		every = append(every, r.ID)
	}
	// The other tenant's thread is kept under its key, "other/t99".
	if len(every) != 26 || !slices.Contains(every, thread.Key("other", "t99")) {
		t.Fatalf("all tenants: %v", every)
	}
}

func saveLoadRoundTrip(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th := richThread(t, db, "rich")
	for _, hist := range []bool{false, true} {
		var first bytes.Buffer
		check(t, th.Save(ctx, &first, thread.SaveOptions{History: hist}), "save")
		loaded, err := db.Load(ctx, bytes.NewReader(first.Bytes()), thread.LoadOptions{})
		wantErr(t, err, thread.ErrConflict, "load over an existing id")
		other := thread.New(thread.NewMemoryStore(), nil)
		loaded, err = other.Load(ctx, bytes.NewReader(first.Bytes()), thread.LoadOptions{})
		check(t, err, "load into memory")
		var second bytes.Buffer
		check(t, loaded.Save(ctx, &second, thread.SaveOptions{History: hist}), "save again")
		if first.String() != second.String() {
			t.Fatalf("save → load → save (history %v) differs:\nfirst  %s\nsecond %s", hist, first.String(), second.String())
		}
		// And back into this store under another id.
		back, err := db.Load(ctx, bytes.NewReader(second.Bytes()), thread.LoadOptions{ID: fmt.Sprintf("back-%v", hist)})
		check(t, err, "load back")
		wantTexts(t, read(t, back, thread.ReadOptions{}), texts(read(t, th, thread.ReadOptions{})), "loaded messages")
		check(t, back.Rollback(ctx, "early"), "rollback a loaded thread")
		wantTexts(t, read(t, back, thread.ReadOptions{}), []string{"q1", "a1"}, "loaded checkpoint")
		if hist {
			for v := int64(1); v <= th.Version(); v++ {
				wantTexts(t, read(t, back, thread.ReadOptions{Version: v}), texts(read(t, th, thread.ReadOptions{Version: v})), fmt.Sprintf("loaded version %d", v))
			}
		}
	}
	// A long thread and a line that holds one message id twice (a compact
	// commit restates the messages it keeps) load back from a document
	// without history.
	long, err := db.Create(ctx, thread.CreateOptions{ID: "long"})
	check(t, err, "create long")
	for range 3 {
		_, err = long.Append(ctx, numbered("l", 4000)...)
		check(t, err, "append 4,000")
	}
	twice := message.User("twice")
	twice.ID = "m-twice"
	_, err = long.Append(ctx, twice)
	check(t, err, "append an id")
	_, err = long.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("summary"), twice}, Op: thread.OpCompact})
	check(t, err, "compact, keeping the id")
	var doc bytes.Buffer
	check(t, long.Save(ctx, &doc, thread.SaveOptions{}), "save long")
	back, err := db.Load(ctx, bytes.NewReader(doc.Bytes()), thread.LoadOptions{ID: "long-back"})
	check(t, err, "load a 12,003-message line")
	if n, _ := back.Len(ctx); n != 12003 {
		t.Fatalf("loaded %d messages, want 12,003", n)
	}
	// Garbage in, an error out, nothing written.
	for _, doc := range []string{"", "{", "[]", `{"format":"nope"}`, `{"format":"loom.thread/v1","thread":{"id":"../x","kind":"local"}}`,
		`{"format":"loom.thread/v1","thread":{"id":"g","kind":"local"},"messages":[{"role":"user","contents":[{"type":"text","text":"x"}]}]}`,
		`{"format":"loom.thread/v1","thread":{"id":"g","kind":"local"},"messages":[],"history":{"version":1,"head":5,"commits":[],"entries":[{"version":1,"commit":-1}]}}`,
		`{"format":"loom.thread/v1","thread":{"id":"g","kind":"local"},"messages":[],"history":{"version":1,"head":0,"commits":[{"parent":0}],"entries":[{"version":1,"commit":0}]}}`,
		// A commit that nothing reaches could never be deleted.
		`{"format":"loom.thread/v1","thread":{"id":"g","kind":"local"},"messages":[],"history":{"version":1,"head":-1,"commits":[{"parent":-1,"op":"append"}],"entries":[{"version":1,"commit":-1,"op":"create"}]}}`,
		// A checkpoint from a version the history does not have.
		`{"format":"loom.thread/v1","thread":{"id":"g","kind":"local"},"messages":[],"checkpoints":[{"name":"x","commit":0,"version":9}],"history":{"version":1,"head":-1,"commits":[{"parent":-1,"op":"append"}],"entries":[{"version":1,"commit":-1,"op":"create"}]}}`,
	} {
		_, err := db.Load(ctx, strings.NewReader(doc), thread.LoadOptions{})
		wantErr(t, err, thread.ErrInvalid, fmt.Sprintf("load %q", doc))
	}
	if _, err := db.Thread(ctx, "g"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("a refused document left thread g: %v", err)
	}
}

// richThread makes a thread with forks, checkpoints, state, a rollback, a
// reset and a restore: something of everything.
func richThread(t T, db *thread.DB, id string) *thread.Thread {
	ctx := t.Context()
	th, err := db.Create(ctx, thread.CreateOptions{ID: id, Kind: thread.KindLocal, Title: "rich", Labels: map[string]string{"l": "1"}})
	check(t, err, "create")
	_, err = th.Append(ctx, message.User("q1"), message.Assistant("a1"))
	check(t, err, "append")
	_, err = th.Checkpoint(ctx, "early")
	check(t, err, "checkpoint")
	_, err = th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.ToolCall("c1", "f", `{}`), message.ToolResult("c1", "ok")},
		State: map[string]json.RawMessage{"ctx/p": json.RawMessage(`{"n":1}`)}, Metadata: map[string]string{"run": "r1"}})
	check(t, err, "commit with state")
	_, err = th.Checkpoint(ctx, "mid")
	check(t, err, "checkpoint mid")
	_, err = th.Append(ctx, message.User("abandoned"))
	check(t, err, "append")
	_, err = th.Checkpoint(ctx, "off-line")
	check(t, err, "checkpoint off-line")
	check(t, th.Rollback(ctx, "mid"), "rollback")
	check(t, th.Reset(ctx), "reset")
	check(t, th.Restore(ctx, th.Version()-1), "restore")
	_, err = th.SetState(ctx, map[string]json.RawMessage{"ctx/p": json.RawMessage(`{"n":2}`)})
	check(t, err, "state")
	_, err = th.Append(ctx, message.User("q2"))
	check(t, err, "append")
	return th
}

// reopen fills a store, reopens it and checks that everything reads back the
// same: records, messages at every version, state, history, checkpoints.
func reopen(t T, s store.Store, o *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	th := richThread(t, db, "rich")
	f, err := th.Fork(ctx, thread.ForkOptions{ID: "fork", At: read(t, th, thread.ReadOptions{})[2].ID})
	check(t, err, "fork")
	_, err = f.Append(ctx, numbered("f", 3)...)
	check(t, err, "append fork")
	_, err = db.Create(ctx, thread.CreateOptions{ID: "empty"})
	check(t, err, "create empty")
	// Another tenant's thread of the same id comes back too, apart.
	richThread(t, db.WithTenant("alice"), "rich")
	snap1 := func(db *thread.DB) string {
		var b strings.Builder
		for th, err := range db.Threads(ctx, thread.ListOptions{}) {
			check(t, err, "list")
			fmt.Fprintf(&b, "%s\n", encode(t, th.Record()))
			fmt.Fprintf(&b, "commits %s\n", commitIDs(t, db.Store(), th.ID()))
			check(t, th.Save(ctx, &b, thread.SaveOptions{History: true}), "save")
			for v := int64(1); v <= th.Version(); v++ {
				fmt.Fprintf(&b, "v%d %s\n", v, encode(t, read(t, th, thread.ReadOptions{Version: v})))
			}
			for cp, err := range th.Checkpoints(ctx) {
				check(t, err, "checkpoints")
				fmt.Fprintf(&b, "%s\n", encode(t, cp))
			}
		}
		return b.String()
	}
	snap := func(db *thread.DB) string { return snap1(db) + "tenant alice\n" + snap1(db.WithTenant("alice")) }
	before := snap(db)
	s2, err := o.Reopen(s)
	check(t, err, "reopen")
	if c, ok := s2.(io.Closer); ok && s2 != s {
		defer c.Close()
	}
	after := snap(thread.New(s2, nil))
	if before != after {
		t.Fatalf("after reopen the store reads back differently:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// And it still works.
	db2 := thread.New(s2, nil)
	th2, err := db2.Thread(ctx, "rich")
	check(t, err, "get after reopen")
	_, err = th2.Append(ctx, message.User("after reopen"))
	check(t, err, "append after reopen")
}

// copyInAndOut copies threads with history, forks and checkpoints from a
// memory store into the store and back out, keeping every id and byte.
func copyInAndOut(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	mem := thread.NewMemoryStore()
	mdb := thread.New(mem, nil)
	rich := richThread(t, mdb, "rich")
	f, err := rich.Fork(ctx, thread.ForkOptions{ID: "fork", At: read(t, rich, thread.ReadOptions{})[1].ID})
	check(t, err, "fork")
	_, err = f.Append(ctx, message.User("fork only"))
	check(t, err, "append")
	check(t, thread.Copy(ctx, s, mem, thread.CopyOptions{}), "copy in")
	back := thread.NewMemoryStore()
	check(t, thread.Copy(ctx, back, s, thread.CopyOptions{}), "copy out")
	for _, id := range []string{"rich", "fork"} {
		docs := make([]string, 3)
		for i, st := range []store.Store{mem, s, back} {
			th, err := thread.New(st, nil).Thread(ctx, id)
			check(t, err, "get "+id)
			var b bytes.Buffer
			check(t, th.Save(ctx, &b, thread.SaveOptions{History: true}), "save")
			docs[i] = b.String()
		}
		if docs[0] != docs[1] || docs[1] != docs[2] {
			t.Fatalf("thread %s differs after copying in and out:\nsource %s\nstore  %s\nback   %s", id, docs[0], docs[1], docs[2])
		}
		if a, b, c := commitIDs(t, mem, id), commitIDs(t, s, id), commitIDs(t, back, id); a != b || b != c {
			t.Fatalf("thread %s: commit ids changed in the copy:\nsource %s\nstore  %s\nback   %s", id, a, b, c)
		}
	}
	var done thread.CopyProgress
	check(t, thread.Copy(ctx, s, mem, thread.CopyOptions{Progress: func(p thread.CopyProgress) { done = p }}), "copy again")
	if done.Skipped != 2 || done.Copied != 0 {
		t.Fatalf("copying again: %+v, want both skipped", done)
	}
}

// badBatches sends the store batches that no thread operation makes: nil
// entries, a thread deleted twice, hostile ids. The store refuses them with a
// typed error, or (for ids) takes them and reads them back exactly; it never
// panics and never applies part of a batch.
func badBatches(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	db := thread.New(s, nil)
	_, err := db.Create(ctx, thread.CreateOptions{ID: "x", Messages: numbered("x", 1)})
	check(t, err, "create")
	now := time.Now().UTC().Truncate(time.Microsecond)
	if err := s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: "x"}, {Thread: "x"}}}); !errors.Is(err, thread.ErrNotFound) && !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("deleting a thread twice in one batch: %v", err)
	}
	if _, err := s.Thread(ctx, "x"); err != nil {
		t.Fatalf("a refused batch deleted the thread: %v", err)
	}
	// Every kind of change to a thread that does not exist is ErrNotFound,
	// never a silent success.
	for name, b := range map[string]*store.Batch{
		"move":            {Moves: []store.Move{{Thread: "nosuch", From: 1, Op: thread.OpReset, Time: now}}},
		"delete":          {Delete: []store.Deletion{{Thread: "nosuch"}}},
		"drop checkpoint": {DropCheckpoints: []store.CheckpointKey{{Thread: "nosuch", Name: "cp"}}},
		"checkpoint":      {Checkpoints: []thread.Checkpoint{{Thread: "nosuch", Name: "cp", Commit: "c_nosuch", Version: 1, CreatedAt: now}}},
	} {
		if err := s.Apply(ctx, b); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("%s on a thread that does not exist: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.Thread(ctx, "nosuch"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("a refused batch made thread nosuch: %v", err)
	}
	if err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{nil}}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("a nil commit: %v, want ErrInvalid", err)
	}
	if err := s.Apply(ctx, &store.Batch{Create: []store.Creation{{}}}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("a creation without a record: %v, want ErrInvalid", err)
	}
	for _, id := range []string{"../x", "a/b", "{slot}", "a\x00b", "..", strings.Repeat("z", 300)} {
		c := rawCommit(nil, "hostile")
		r := &thread.Record{ID: id, Kind: thread.KindLocal, Head: c.ID, Version: 1, CreatedAt: now, UpdatedAt: now}
		err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}, Create: []store.Creation{{Record: r, Op: thread.OpCreate}},
			Checkpoints: []thread.Checkpoint{{Thread: id, Name: "../cp", Commit: c.ID, Version: 1, CreatedAt: now}}})
		if err != nil {
			if !errors.Is(err, thread.ErrInvalid) {
				t.Fatalf("create %q: %v, want ErrInvalid or success", id, err)
			}
			if _, err := s.Commit(ctx, c.ID); !errors.Is(err, thread.ErrNotFound) {
				t.Fatalf("a refused batch for %q left its commit behind: %v", id, err)
			}
			continue
		}
		got, err := s.Thread(ctx, id)
		if err != nil || got.ID != id || got.Head != c.ID {
			t.Fatalf("thread %q taken but read back as %+v, %v", id, got, err)
		}
		for cp, err := range s.Checkpoints(ctx, id) {
			if err != nil || cp.Name != "../cp" || cp.Commit != c.ID {
				t.Fatalf("checkpoint of %q read back as %+v, %v", id, cp, err)
			}
		}
		check(t, s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: id}}}), "delete "+id)
		if _, err := s.Commit(ctx, c.ID); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("deleting %q left its commit: %v", id, err)
		}
	}
}

// checkpointAloneKeepsCommits checks that a checkpoint is a reference of its
// own: a commit that only a checkpoint reaches survives until the checkpoint
// or its thread goes.
func checkpointAloneKeepsCommits(t T, s store.Store, _ *Options) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	base := rawCommit(nil, "base")
	x := rawCommit(base, "only a checkpoint reaches this")
	rec := func(id string) *thread.Record {
		return &thread.Record{ID: id, Kind: thread.KindLocal, Version: 1, CreatedAt: now, UpdatedAt: now}
	}
	// T's head is the empty root; its checkpoint is the only reference to
	// x, and x the only reference to base.
	check(t, s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{base, x}, Create: []store.Creation{{Record: rec("t"), Op: thread.OpCreate}},
		Checkpoints: []thread.Checkpoint{{Thread: "t", Name: "cp", Commit: x.ID, Version: 1, CreatedAt: now}}}), "create t")
	// Another thread on base comes and goes.
	other := rec("other")
	other.Head = base.ID
	check(t, s.Apply(ctx, &store.Batch{Create: []store.Creation{{Record: other, Op: thread.OpCreate}}}), "create other")
	check(t, s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: "other"}}}), "delete other")
	for _, c := range []*thread.Commit{x, base} {
		if _, err := s.Commit(ctx, c.ID); err != nil {
			t.Fatalf("commit %s, reached only through a checkpoint, is gone: %v", c.ID, err)
		}
	}
	// Replacing the checkpoint in one batch keeps x: the new one counts
	// before the old one is let go.
	check(t, s.Apply(ctx, &store.Batch{DropCheckpoints: []store.CheckpointKey{{Thread: "t", Name: "cp"}},
		Checkpoints: []thread.Checkpoint{{Thread: "t", Name: "cp2", Commit: x.ID, Version: 1, CreatedAt: now}}}), "replace checkpoint")
	if _, err := s.Commit(ctx, x.ID); err != nil {
		t.Fatalf("commit x is gone after its checkpoint was replaced: %v", err)
	}
	// Dropping the last checkpoint frees x and base.
	check(t, s.Apply(ctx, &store.Batch{DropCheckpoints: []store.CheckpointKey{{Thread: "t", Name: "cp2"}}}), "drop checkpoint")
	for _, c := range []*thread.Commit{x, base} {
		if _, err := s.Commit(ctx, c.ID); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("commit %s outlived its last reference: %v", c.ID, err)
		}
	}
}

// commitIDs lists the ids of every commit the thread's head and checkpoints
// reach, for comparing stores that must keep commit ids.
func commitIDs(t T, s store.Store, id string) string {
	ctx := t.Context()
	r, err := s.Thread(ctx, id)
	check(t, err, "record "+id)
	roots := []string{r.Head}
	for cp, err := range s.Checkpoints(ctx, id) {
		check(t, err, "checkpoints")
		roots = append(roots, cp.Commit)
	}
	var b strings.Builder
	for _, root := range roots {
		if root == "" {
			continue
		}
		for c, err := range s.Ancestors(ctx, root, -1) {
			check(t, err, "ancestors")
			b.WriteString(c.ID + " ")
		}
		b.WriteString("| ")
	}
	return b.String()
}
