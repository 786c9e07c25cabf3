package thread_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// diffText writes a diff in a line a table can hold: "shared=N" then each
// entry as -text (removed), +text (added), =text (same) or ~old>new
// (changed), then each state change as key:-old, key:+new or
// key:old>new, and "…" when truncated.
func diffText(d *thread.Diff) string {
	parts := []string{fmt.Sprintf("shared=%d", d.Shared)}
	for _, e := range d.Entries {
		switch e.Change {
		case thread.DiffRemoved:
			parts = append(parts, "-"+e.From.Text())
		case thread.DiffAdded:
			parts = append(parts, "+"+e.To.Text())
		case thread.DiffSame:
			parts = append(parts, "="+e.From.Text())
		case thread.DiffChanged:
			parts = append(parts, "~"+e.From.Text()+">"+e.To.Text())
		}
	}
	for _, s := range d.State {
		switch s.Change {
		case thread.DiffRemoved:
			parts = append(parts, s.Key+":-"+string(s.From))
		case thread.DiffAdded:
			parts = append(parts, s.Key+":+"+string(s.To))
		case thread.DiffChanged:
			parts = append(parts, s.Key+":"+string(s.From)+">"+string(s.To))
		}
	}
	if d.Truncated {
		parts = append(parts, "…")
	}
	return strings.Join(parts, " ")
}

func users(texts ...string) []message.Message {
	var out []message.Message
	for _, s := range texts {
		out = append(out, message.User(s))
	}
	return out
}

// withID returns a user message with its own id.
func withID(id, text string) message.Message {
	m := message.User(text)
	m.ID = id
	return m
}

func appendAll(tb testing.TB, th *thread.Thread, msgs ...message.Message) *thread.Commit {
	tb.Helper()
	c, err := th.Append(tb.Context(), msgs...)
	must(tb, err)
	return c
}

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		name string
		// build makes the threads and returns the query to diff.
		build func(t *testing.T, db *thread.DB) thread.DiffQuery
		want  string
		// from and to are the sides the diff reports (thread, version,
		// messages), when the case checks them.
		from, to *thread.DiffSide
	}{
		{
			name: "one thread, an older version",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a", "b")...)
				appendAll(t, th, users("c")...)
				appendAll(t, th, users("d", "e")...)
				return thread.DiffQuery{Thread: "a", Version: 2}
			},
			want: "shared=2 +c +d +e",
			from: &thread.DiffSide{Thread: "a", Version: 2, Messages: 2},
			to:   &thread.DiffSide{Thread: "a", Version: 4, Messages: 5},
		},
		{
			name: "one thread, newer to older",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a", "b")...)
				appendAll(t, th, users("c")...)
				return thread.DiffQuery{Thread: "a", ToVersion: 2}
			},
			want: "shared=2 -c",
		},
		{
			name: "the head with itself",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a", "b")...)
				return thread.DiffQuery{Thread: "a"}
			},
			want: "shared=2",
		},
		{
			name: "a fork at the head, both went on",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a", "b")...)
				f, err := th.Fork(t.Context(), thread.ForkOptions{ID: "f"})
				must(t, err)
				appendAll(t, th, users("c")...)
				appendAll(t, f, users("x")...)
				appendAll(t, f, users("y")...)
				return thread.DiffQuery{Thread: "a", To: "f"}
			},
			want: "shared=2 -c +x +y",
			from: &thread.DiffSide{Thread: "a", Version: 3, Messages: 3},
			to:   &thread.DiffSide{Thread: "f", Version: 3, Messages: 4},
		},
		{
			name: "a fork inside a commit (split)",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a")...)
				c := appendAll(t, th, users("b", "c", "d")...)
				f, err := th.Fork(t.Context(), thread.ForkOptions{ID: "f", At: c.Messages[0].ID})
				must(t, err)
				appendAll(t, f, users("x")...)
				return thread.DiffQuery{Thread: "f", To: "a"}
			},
			want: "shared=2 -x +c +d",
		},
		{
			name: "a fork of an older version",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a")...)
				appendAll(t, th, users("b")...)
				appendAll(t, th, users("c")...)
				f, err := th.Fork(t.Context(), thread.ForkOptions{ID: "f", Version: 2})
				must(t, err)
				appendAll(t, f, users("x")...)
				return thread.DiffQuery{Thread: "a", To: "f"}
			},
			want: "shared=1 -b -c +x",
		},
		{
			name: "after a rollback",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a")...)
				_, err := th.Checkpoint(t.Context(), "cp")
				must(t, err)
				appendAll(t, th, users("b")...)
				appendAll(t, th, users("c")...)
				must(t, th.Rollback(t.Context(), "cp"))
				appendAll(t, th, users("x")...)
				return thread.DiffQuery{Thread: "a", Version: 4} // before the rollback
			},
			want: "shared=1 -b -c +x",
		},
		{
			name: "after a reset",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a", "b")...)
				must(t, th.Reset(t.Context()))
				return thread.DiffQuery{Thread: "a", Version: 2}
			},
			want: "shared=0 -a -b",
			to:   &thread.DiffSide{Thread: "a", Version: 3, Messages: 0},
		},
		{
			name: "an empty thread against a full one",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				newDiffThread(t, db, "e")
				appendAll(t, newDiffThread(t, db, "a"), users("a", "b")...)
				return thread.DiffQuery{Thread: "e", To: "a"}
			},
			want: "shared=0 +a +b",
		},
		{
			name: "threads that share no commit",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				appendAll(t, newDiffThread(t, db, "a"), users("a", "b")...)
				appendAll(t, newDiffThread(t, db, "b"), users("c")...)
				return thread.DiffQuery{Thread: "a", To: "b"}
			},
			want: "shared=0 -a -b +c",
		},
		{
			name: "equal messages in commits apart are shared",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				a := newDiffThread(t, db, "a")
				appendAll(t, a, withID("m1", "a"), withID("m2", "b"))
				appendAll(t, a, withID("m3", "c"))
				var doc bytes.Buffer
				must(t, a.Save(t.Context(), &doc, thread.SaveOptions{}))
				b, err := db.Load(t.Context(), &doc, thread.LoadOptions{ID: "b"})
				must(t, err)
				appendAll(t, b, withID("m4", "d"))
				return thread.DiffQuery{Thread: "a", To: "b"}
			},
			want: "shared=3 +d",
		},
		{
			name: "same id, other content",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				a := newDiffThread(t, db, "a")
				appendAll(t, a, withID("m1", "hi"), withID("m2", "yes"), withID("m3", "bye"))
				b := newDiffThread(t, db, "b")
				appendAll(t, b, withID("m1", "hi"), withID("m2", "no"), withID("m3", "bye"))
				return thread.DiffQuery{Thread: "a", To: "b"}
			},
			want: "shared=1 ~yes>no =bye",
		},
		{
			name: "messages kept around others, aligned",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				a := newDiffThread(t, db, "a")
				appendAll(t, a, withID("m1", "a"), withID("m2", "b"), withID("m3", "c"), withID("m4", "d"))
				b := newDiffThread(t, db, "b")
				appendAll(t, b, withID("m1", "a"), withID("x1", "x"), withID("m3", "c"), withID("m4", "D"), withID("y1", "y"))
				return thread.DiffQuery{Thread: "a", To: "b"}
			},
			want: "shared=1 -b +x =c ~d>D +y",
		},
		{
			name: "a moved message is removed and added",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				a := newDiffThread(t, db, "a")
				appendAll(t, a, withID("m1", "a"), withID("m2", "b"), withID("m3", "c"))
				b := newDiffThread(t, db, "b")
				appendAll(t, b, withID("m2", "b"), withID("m3", "c"), withID("m1", "a"))
				return thread.DiffQuery{Thread: "a", To: "b"}
			},
			want: "shared=0 -a =b =c +a",
		},
		{
			name: "state added, removed and changed",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				_, err := th.SetState(t.Context(), map[string]json.RawMessage{"keep": json.RawMessage(`1`), "old": json.RawMessage(`"x"`), "n": json.RawMessage(`1`)})
				must(t, err)
				f, err := th.Fork(t.Context(), thread.ForkOptions{ID: "f"})
				must(t, err)
				_, err = f.SetState(t.Context(), map[string]json.RawMessage{"old": nil, "n": json.RawMessage(`{"v":2}`), "new": json.RawMessage(`[true]`)})
				must(t, err)
				return thread.DiffQuery{Thread: "a", To: "f"}
			},
			want: `shared=0 n:1>{"v":2} new:+[true] old:-"x"`,
		},
		{
			name: "state only on one side, and a state commit at the same depth",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a")...)
				_, err := th.SetState(t.Context(), map[string]json.RawMessage{"k": json.RawMessage(`true`)})
				must(t, err)
				return thread.DiffQuery{Thread: "a", Version: 2}
			},
			want: "shared=1 k:+true",
		},
		{
			name: "cut at the limit",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a", "b", "c", "d")...)
				_, err := th.SetState(t.Context(), map[string]json.RawMessage{"k1": json.RawMessage(`1`), "k2": json.RawMessage(`2`), "k3": json.RawMessage(`3`)})
				must(t, err)
				return thread.DiffQuery{Thread: "a", Version: 1, Limit: 2}
			},
			want: "shared=0 +a +b k1:+1 k2:+2 …",
		},
		{
			name: "cut at an anchor",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				a := newDiffThread(t, db, "a")
				appendAll(t, a, withID("m1", "a"), withID("m2", "b"), withID("m3", "c"), withID("m4", "d"))
				b := newDiffThread(t, db, "b")
				appendAll(t, b, withID("m1", "a"), withID("x1", "x"), withID("m3", "c"), withID("m4", "D"))
				return thread.DiffQuery{Thread: "a", To: "b", Limit: 3}
			},
			want: "shared=1 -b +x =c …",
		},
		{
			name: "cut between removed and added",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				a := newDiffThread(t, db, "a")
				appendAll(t, a, withID("m1", "a"), withID("m2", "b"), withID("m3", "c"))
				b := newDiffThread(t, db, "b")
				appendAll(t, b, withID("m1", "a"), withID("x1", "x"), withID("m3", "c"))
				return thread.DiffQuery{Thread: "a", To: "b", Limit: 1}
			},
			want: "shared=1 -b …",
		},
		{
			name: "exactly at the limit is not cut",
			build: func(t *testing.T, db *thread.DB) thread.DiffQuery {
				th := newDiffThread(t, db, "a")
				appendAll(t, th, users("a", "b")...)
				return thread.DiffQuery{Thread: "a", Version: 1, Limit: 2}
			},
			want: "shared=0 +a +b",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := thread.New(thread.NewMemoryStore(), nil)
			q := c.build(t, db)
			d, err := db.Diff(t.Context(), q)
			must(t, err)
			if got := diffText(d); got != c.want {
				t.Errorf("diff = %s\nwant   %s", got, c.want)
			}
			if c.from != nil && d.From != *c.from {
				t.Errorf("from = %+v, want %+v", d.From, *c.from)
			}
			if c.to != nil && d.To != *c.to {
				t.Errorf("to = %+v, want %+v", d.To, *c.to)
			}
		})
	}
}

func newDiffThread(tb testing.TB, db *thread.DB, id string) *thread.Thread {
	tb.Helper()
	th, err := db.Create(tb.Context(), thread.CreateOptions{ID: id})
	must(tb, err)
	return th
}

func TestDiffErrors(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	appendAll(t, newDiffThread(t, db, "a"), users("a")...)
	other := db.WithTenant("other")
	appendAll(t, newDiffThread(t, other, "b"), users("b")...)
	for _, c := range []struct {
		name string
		q    thread.DiffQuery
		want error
	}{
		{"no such thread", thread.DiffQuery{Thread: "nope"}, thread.ErrNotFound},
		{"no such to thread", thread.DiffQuery{Thread: "a", To: "nope"}, thread.ErrNotFound},
		{"another tenant's thread", thread.DiffQuery{Thread: "a", To: "b"}, thread.ErrNotFound},
		{"no such version", thread.DiffQuery{Thread: "a", Version: 3}, thread.ErrNotFound},
		{"no such to version", thread.DiffQuery{Thread: "a", ToVersion: 9}, thread.ErrNotFound},
		{"a bad id", thread.DiffQuery{Thread: "../x"}, thread.ErrInvalid},
		{"a bad to id", thread.DiffQuery{Thread: "a", To: "a b"}, thread.ErrInvalid},
		{"no thread", thread.DiffQuery{}, thread.ErrInvalid},
		{"a negative version", thread.DiffQuery{Thread: "a", Version: -1}, thread.ErrInvalid},
		{"a negative to version", thread.DiffQuery{Thread: "a", ToVersion: -2}, thread.ErrInvalid},
		{"a negative limit", thread.DiffQuery{Thread: "a", Limit: -1}, thread.ErrInvalid},
		{"a limit over the cap", thread.DiffQuery{Thread: "a", Limit: thread.MaxDiffLimit + 1}, thread.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := db.Diff(ctx, c.q)
			if d != nil {
				t.Errorf("got a diff: %+v", d)
			}
			wantIs(t, err, c.want, c.name)
		})
	}
	// The other tenant sees its own thread, and not a.
	if _, err := other.Diff(ctx, thread.DiffQuery{Thread: "b"}); err != nil {
		t.Errorf("the other tenant's own diff: %v", err)
	}
	_, err := other.Diff(ctx, thread.DiffQuery{Thread: "b", To: "a"})
	wantIs(t, err, thread.ErrNotFound, "the default tenant's thread from another tenant")
}

// readCounter counts the commits a store yields or returns.
type readCounter struct {
	store.Store
	reads int
}

func (s *readCounter) Commit(ctx context.Context, id string) (*thread.Commit, error) {
	s.reads++
	return s.Store.Commit(ctx, id)
}

func (s *readCounter) Ancestors(ctx context.Context, id string, floor int64) iter.Seq2[*thread.Commit, error] {
	return func(yield func(*thread.Commit, error) bool) {
		for c, err := range s.Store.Ancestors(ctx, id, floor) {
			s.reads++
			if !yield(c, err) {
				return
			}
		}
	}
}

// TestDiffReadsWhatDiffers: a diff of a long thread and a fork of it, or
// of two near versions, reads the commits after the fork point and a few
// more, not the thread.
func TestDiffReadsWhatDiffers(t *testing.T) {
	ctx := t.Context()
	s := &readCounter{Store: thread.NewMemoryStore()}
	db := thread.New(s, nil)
	th := newDiffThread(t, db, "a")
	for i := range 2000 {
		appendAll(t, th, message.User(fmt.Sprint("m", i)))
	}
	f, err := th.Fork(ctx, thread.ForkOptions{ID: "f"})
	must(t, err)
	for i := range 10 {
		appendAll(t, f, message.User(fmt.Sprint("f", i)))
	}
	for i := range 3 {
		appendAll(t, th, message.User(fmt.Sprint("a", i)))
	}
	for _, c := range []struct {
		name string
		q    thread.DiffQuery
		want string
	}{
		{"fork", thread.DiffQuery{Thread: "a", To: "f"}, "shared=2000 -a0 -a1 -a2 +f0 +f1 +f2 +f3 +f4 +f5 +f6 +f7 +f8 +f9"},
		{"versions", thread.DiffQuery{Thread: "a", Version: 2001}, "shared=2000 +a0 +a1 +a2"},
		{"fork and an older version", thread.DiffQuery{Thread: "f", To: "a", ToVersion: 2000}, "shared=1999 -m1999 -f0 -f1 -f2 -f3 -f4 -f5 -f6 -f7 -f8 -f9"},
	} {
		s.reads = 0
		d, err := db.Diff(ctx, c.q)
		must(t, err)
		if got := diffText(d); got != c.want {
			t.Errorf("%s: diff = %s\nwant %s", c.name, got, c.want)
		}
		if s.reads > 50 {
			t.Errorf("%s: read %d commits of a 2,000-commit thread", c.name, s.reads)
		}
	}
}

// TestDiffProperty runs random histories (appends, forks at the head, at
// a message and at a version, checkpoints, rollbacks, restores, resets,
// state, and messages with ids of their own that may differ between
// branches) and checks the diff of random pairs of points against the
// messages and state read at them: the shared messages lead both sides
// and are as many as lead both equal; the from side's messages are the
// shared ones followed by the entries' From, the to side's the shared ones
// followed by the entries' To; entries are same only when equal, changed
// only with one id; and applying the state changes to from's state gives
// to's.
func TestDiffProperty(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { diffProperty(t, seed) })
	}
}

func diffProperty(t *testing.T, seed uint64) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(seed, 26))
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "t0"})
	must(t, err)
	threads := []*thread.Thread{th}
	n := 0
	next := func() string { n++; return fmt.Sprint("m", n) }
	for range 60 {
		th := threads[r.IntN(len(threads))]
		switch op := r.IntN(12); {
		case op < 4: // append 1 to 3 messages
			var msgs []message.Message
			for i := range 1 + r.IntN(3) {
				if i == 0 && r.IntN(3) == 0 {
					// An id of its own from a small pool, so that
					// branches hold one id with the same text or another.
					id := fmt.Sprint("p", r.IntN(6))
					text := "pool " + id
					if r.IntN(2) == 0 {
						text = next()
					}
					msgs = append(msgs, withID(id, text))
				} else {
					msgs = append(msgs, message.User(next()))
				}
			}
			if _, err := th.Append(ctx, msgs...); err != nil && !errors.Is(err, thread.ErrConflict) {
				t.Fatal(err)
			}
		case op < 6: // fork at the head, a version or a message
			opts := thread.ForkOptions{ID: fmt.Sprint("t", len(threads))}
			if r.IntN(2) == 0 {
				opts.Version = 1 + r.Int64N(th.Version())
			}
			if msgs, err := th.Messages(ctx, thread.ReadOptions{Version: opts.Version}); err == nil && len(msgs) > 0 && r.IntN(2) == 0 {
				opts.At = msgs[r.IntN(len(msgs))].ID
			}
			f, err := th.Fork(ctx, opts)
			must(t, err)
			threads = append(threads, f)
		case op == 6:
			_, err := th.Checkpoint(ctx, next())
			if err != nil && !errors.Is(err, thread.ErrInvalid) { // an empty head has no checkpoint
				t.Fatal(err)
			}
		case op == 7:
			var names []string
			for cp, err := range th.Checkpoints(ctx) {
				must(t, err)
				names = append(names, cp.Name)
			}
			if len(names) > 0 {
				must(t, th.Rollback(ctx, names[r.IntN(len(names))]))
			}
		case op == 8:
			must(t, th.Restore(ctx, 1+r.Int64N(th.Version())))
		case op == 9:
			if r.IntN(3) == 0 {
				must(t, th.Reset(ctx))
			}
		default: // state
			patch := map[string]json.RawMessage{}
			for range 1 + r.IntN(2) {
				k := fmt.Sprint("k", r.IntN(4))
				if r.IntN(3) == 0 {
					patch[k] = nil
				} else {
					patch[k] = json.RawMessage(fmt.Sprint(r.IntN(3)))
				}
			}
			_, err := th.SetState(ctx, patch)
			must(t, err)
		}
	}
	type point struct {
		th *thread.Thread
		v  int64
	}
	pick := func() point {
		th := threads[r.IntN(len(threads))]
		must(t, th.Refresh(ctx))
		return point{th, 1 + r.Int64N(th.Version())}
	}
	for range 40 {
		a, b := pick(), pick()
		d, err := db.Diff(ctx, thread.DiffQuery{Thread: a.th.ID(), Version: a.v, To: b.th.ID(), ToVersion: b.v, Limit: thread.MaxDiffLimit})
		must(t, err)
		what := fmt.Sprintf("diff %s@%d %s@%d", a.th.ID(), a.v, b.th.ID(), b.v)
		from, err := a.th.Messages(ctx, thread.ReadOptions{Version: a.v})
		must(t, err)
		to, err := b.th.Messages(ctx, thread.ReadOptions{Version: b.v})
		must(t, err)
		if d.Truncated {
			t.Fatalf("%s: truncated", what)
		}
		if d.From.Messages != int64(len(from)) || d.To.Messages != int64(len(to)) {
			t.Fatalf("%s: sides %+v %+v, read %d and %d messages", what, d.From, d.To, len(from), len(to))
		}
		lead := 0
		for lead < len(from) && lead < len(to) && equalMessages(from[lead], to[lead]) {
			lead++
		}
		if d.Shared != int64(lead) {
			t.Fatalf("%s: shared %d, %d lead both equal\n%s", what, d.Shared, lead, diffText(d))
		}
		gotFrom, gotTo := slices.Clone(from[:lead]), slices.Clone(to[:lead])
		for _, e := range d.Entries {
			switch {
			case e.Change == thread.DiffSame && (e.From == nil || e.To == nil || !equalMessages(*e.From, *e.To)),
				e.Change == thread.DiffChanged && (e.From == nil || e.To == nil || e.From.ID != e.To.ID || equalMessages(*e.From, *e.To)),
				e.Change == thread.DiffAdded && (e.From != nil || e.To == nil),
				e.Change == thread.DiffRemoved && (e.From == nil || e.To != nil):
				t.Fatalf("%s: a bad entry %+v", what, e)
			}
			if e.From != nil {
				gotFrom = append(gotFrom, *e.From)
			}
			if e.To != nil {
				gotTo = append(gotTo, *e.To)
			}
		}
		if diff := cmp.Diff(texts(from), texts(gotFrom)); diff != "" || !equalIDs(from, gotFrom) {
			t.Fatalf("%s: from rebuilt from the diff (-read +rebuilt):\n%s", what, diff)
		}
		if diff := cmp.Diff(texts(to), texts(gotTo)); diff != "" || !equalIDs(to, gotTo) {
			t.Fatalf("%s: to rebuilt from the diff (-read +rebuilt):\n%s", what, diff)
		}
		sa, err := a.th.State(ctx, a.v)
		must(t, err)
		sb, err := b.th.State(ctx, b.v)
		must(t, err)
		for _, c := range d.State {
			switch c.Change {
			case thread.DiffRemoved:
				delete(sa, c.Key)
			default:
				sa[c.Key] = c.To
			}
		}
		if !maps.EqualFunc(sa, sb, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) }) {
			t.Fatalf("%s: from's state with the changes is %s, to's is %s", what, sa, sb)
		}
	}
}

// equalMessages is the equality of Diff: the id and the JSON, the time
// aside.
func equalMessages(a, b message.Message) bool {
	a.CreatedAt, b.CreatedAt = time.Time{}, time.Time{}
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && a.ID == b.ID && bytes.Equal(ja, jb)
}

func equalIDs(a, b []message.Message) bool {
	return slices.EqualFunc(a, b, func(x, y message.Message) bool { return x.ID == y.ID })
}

func ExampleDB_Diff() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{ID: "trip"})
	th.Append(ctx, message.User("Plan a trip."), message.Assistant("Where to?"))
	alt, _ := th.Fork(ctx, thread.ForkOptions{ID: "trip-alt"})
	th.Append(ctx, message.User("Rome."))
	alt.Append(ctx, message.User("Lisbon."))
	alt.SetState(ctx, map[string]json.RawMessage{"city": json.RawMessage(`"Lisbon"`)})

	d, _ := db.Diff(ctx, thread.DiffQuery{Thread: "trip", To: "trip-alt"})
	fmt.Printf("%s@%d → %s@%d: %d shared\n", d.From.Thread, d.From.Version, d.To.Thread, d.To.Version, d.Shared)
	for _, e := range d.Entries {
		m := e.To
		if m == nil {
			m = e.From
		}
		fmt.Printf("%s %s: %s\n", e.Change, m.Role, m.Text())
	}
	for _, s := range d.State {
		fmt.Printf("state %s %s: %s\n", s.Change, s.Key, s.To)
	}
	// Output:
	// trip@3 → trip-alt@3: 2 shared
	// removed user: Rome.
	// added user: Lisbon.
	// state added city: "Lisbon"
}

// BenchmarkDiff diffs a 10,000-message thread (a commit a message) with a
// fork of it 10 messages on, and two versions of it 10 messages apart:
// what a diff costs when it reads only what differs. commits/op counts the
// commits one diff reads from the store, which no machine's load changes.
func BenchmarkDiff(b *testing.B) {
	ctx := b.Context()
	store := thread.NewMemoryStore()
	db := thread.New(store, nil)
	counted := &readCounter{Store: store}
	countingDB := thread.New(counted, nil)
	th := newDiffThread(b, db, "a")
	for i := range 10_000 {
		appendAll(b, th, message.User(fmt.Sprint("message ", i)))
	}
	f, err := th.Fork(ctx, thread.ForkOptions{ID: "f"})
	must(b, err)
	for i := range 10 {
		appendAll(b, f, message.User(fmt.Sprint("fork ", i)))
		appendAll(b, th, message.User(fmt.Sprint("more ", i)))
	}
	for _, c := range []struct {
		name string
		q    thread.DiffQuery
		want int
	}{
		{"fork", thread.DiffQuery{Thread: "a", To: "f"}, 20},
		{"versions", thread.DiffQuery{Thread: "a", Version: 10_001}, 10},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := db.Diff(ctx, c.q)
				if err != nil || len(d.Entries) != c.want || d.Shared != 10_000 {
					b.Fatalf("diff: %v, %d entries, %d shared", err, len(d.Entries), d.Shared)
				}
			}
			counted.reads = 0
			if _, err := countingDB.Diff(ctx, c.q); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(counted.reads), "commits/op")
		})
	}
}
