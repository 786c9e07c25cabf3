package thread_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

// BenchmarkAppendOwnID appends messages that come with ids of their own
// (as agents and clients send them) to threads of growing length: the
// check that the thread does not hold the id yet costs what is appended,
// not the thread's length, once the DB has met the thread.
func BenchmarkAppendOwnID(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := b.Context()
			db := thread.New(thread.NewMemoryStore(), nil)
			th, err := db.Create(ctx, thread.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i += 1000 {
				msgs := make([]message.Message, 1000)
				for j := range msgs {
					msgs[j] = message.User("x")
				}
				if _, err := th.Append(ctx, msgs...); err != nil {
					b.Fatal(err)
				}
			}
			// The first append with an id of its own reads the thread.
			warm := message.User("y")
			warm.ID = "warm"
			if _, err := th.Append(ctx, warm); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				m := message.User("y")
				m.ID = fmt.Sprint("own-", i)
				i++
				if _, err := th.Append(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ownIDs returns n messages with ids of their own, made with prefix.
func ownIDs(prefix string, n int) []message.Message {
	msgs := make([]message.Message, n)
	for i := range msgs {
		msgs[i] = message.User("x")
		msgs[i].ID = fmt.Sprint(prefix, i)
	}
	return msgs
}

// TestFreshIDsAreNotLookedUp checks that a commit whose ids are new by
// construction (CommitOptions.FreshIDs: an agent's, a work log's) costs no
// walk of the thread's line, where a client's ids are looked up.
func TestFreshIDsAreNotLookedUp(t *testing.T) {
	ctx := t.Context()
	st := storetest.NewCountingStore()
	th, err := thread.New(st, nil).Create(ctx, thread.CreateOptions{Messages: ownIDs("m", 10)})
	must(t, err)

	fresh := message.User("fresh")
	fresh.ID = message.NewID()
	st.Walks.Store(0)
	_, err = th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{fresh}, FreshIDs: true})
	must(t, err)
	if n := st.Walks.Load(); n != 0 {
		t.Errorf("a commit of fresh ids walked the line %d times", n)
	}

	// The same commit with a client's id reads the line, which a new DB
	// does not remember: the counter counts.
	h, err := thread.New(st, nil).Thread(ctx, th.ID())
	must(t, err)
	_, err = h.Append(ctx, ownIDs("client", 1)...)
	must(t, err)
	if st.Walks.Load() == 0 {
		t.Errorf("a client's id was not looked up")
	}
}

// TestMessageIDCacheBudget checks Options.MessageIDCache: appends with ids
// of their own, round-robin over threads, read no line once each thread's
// line is remembered, when the budget holds them all; a budget that holds
// none makes every append read its line.
func TestMessageIDCacheBudget(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		budget   int
		walkless bool
	}{{budget: 1000, walkless: true}, {budget: -1}} {
		st := storetest.NewCountingStore()
		db := thread.New(st, &thread.Options{MessageIDCache: tc.budget})
		var ths []*thread.Thread
		for i := range 5 {
			th, err := db.Create(ctx, thread.CreateOptions{Messages: ownIDs(fmt.Sprint("t", i, "-"), 20)})
			must(t, err)
			ths = append(ths, th)
		}
		for round := range 3 {
			if round == 1 {
				st.Walks.Store(0)
			}
			for i, th := range ths {
				_, err := th.Append(ctx, ownIDs(fmt.Sprint("r", round, "-", i, "-"), 1)...)
				must(t, err)
			}
		}
		if n := st.Walks.Load(); (n == 0) != tc.walkless {
			t.Errorf("budget %d: %d walks in two rounds of appends", tc.budget, n)
		}
	}
}

// TestRacingOwnIDAppendsTakeTurns checks that appends of messages with ids
// of their own that lose a race wait their turn in the store's queue
// (Appender), as other appends do, instead of rebasing and backing off:
// with a single retry allowed, none is lost, and each id is checked all
// the same.
func TestRacingOwnIDAppendsTakeTurns(t *testing.T) {
	ctx := t.Context()
	st := storetest.NewCountingStore()
	db := thread.New(st, &thread.Options{AppendRetries: 1})
	th, err := db.Create(ctx, thread.CreateOptions{ID: "hot", Messages: ownIDs("seed-", 3)})
	must(t, err)
	const writers, each = 16, 20
	handles := make([]*thread.Thread, writers)
	for w := range handles {
		handles[w], err = db.Thread(ctx, "hot")
		must(t, err)
	}
	var wg sync.WaitGroup
	for w, h := range handles {
		wg.Go(func() {
			for i := range each {
				m := message.User("x")
				m.ID = fmt.Sprint("w", w, "-", i)
				if _, err := h.Append(ctx, m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	must(t, th.Refresh(ctx))
	if n, _ := th.Len(ctx); n != 3+writers*each {
		t.Fatalf("%d messages after the race, want %d", n, 3+writers*each)
	}
	if n := st.Queued.Load(); n < writers-1 {
		t.Errorf("%d appends went through the store's queue, want at least %d", n, writers-1)
	}
	// The queue checks ids too.
	_, err = handles[0].Append(ctx, ownIDs("seed-", 1)...)
	if !errors.Is(err, thread.ErrDuplicateID) {
		t.Fatalf("an id the thread holds, appended after the race: %v", err)
	}
}

// TestGroupCommitOnThreadItCreates checks that a group that creates a
// thread with messages can commit on it messages with ids of their own:
// their ids are looked up on the line the group builds, not in the store.
func TestGroupCommitOnThreadItCreates(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	g := db.Group()
	y, err := g.Create(ctx, thread.CreateOptions{ID: "y", Messages: ownIDs("m", 2)})
	must(t, err)
	_, err = g.Commit(ctx, y, thread.CommitOptions{Messages: ownIDs("n", 1)})
	must(t, err)
	must(t, g.Apply(ctx))
	if n, _ := y.Len(ctx); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}

	g = db.Group()
	z, err := g.Create(ctx, thread.CreateOptions{ID: "z", Messages: ownIDs("m", 2)})
	must(t, err)
	_, err = g.Commit(ctx, z, thread.CommitOptions{Messages: ownIDs("m", 1)})
	if !errors.Is(err, thread.ErrDuplicateID) {
		t.Fatalf("an id the group's new thread holds: %v", err)
	}
}

// BenchmarkAppendRoundRobin appends one message at a time to 700 threads
// of 500 messages in turn, more ids than a DB remembers by default:
// "generated" lets the thread give the id, "fresh" brings an id made with
// message.NewID and says so (FreshIDs, as agents and work logs do), and
// "client" brings an id chosen elsewhere, which is looked up on the line
// (with the default memory of ids, and with one that holds every line).
func BenchmarkAppendRoundRobin(b *testing.B) {
	const threads, length = 700, 500
	for _, bc := range []struct {
		name  string
		cache int
		id    func(i int) string
		fresh bool
	}{
		{name: "generated", id: func(int) string { return "" }},
		{name: "fresh", id: func(int) string { return message.NewID() }, fresh: true},
		{name: "client", id: func(i int) string { return fmt.Sprint("client-", i) }},
		{name: "client/cache=all", cache: 1 << 20, id: func(i int) string { return fmt.Sprint("client-", i) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := b.Context()
			db := thread.New(thread.NewMemoryStore(), &thread.Options{MessageIDCache: bc.cache})
			ths := make([]*thread.Thread, threads)
			for i := range ths {
				th, err := db.Create(ctx, thread.CreateOptions{Messages: ownIDs(fmt.Sprint("t", i, "-"), length)})
				if err != nil {
					b.Fatal(err)
				}
				ths[i] = th
			}
			i := 0
			appendNext := func() {
				m := message.User("y")
				m.ID = bc.id(i)
				if _, err := ths[i%threads].Commit(ctx, thread.CommitOptions{Messages: []message.Message{m}, FreshIDs: bc.fresh}); err != nil {
					b.Fatal(err)
				}
				i++
			}
			for range threads { // the DB meets each thread
				appendNext()
			}
			b.ReportAllocs()
			for b.Loop() {
				appendNext()
			}
		})
	}
}
