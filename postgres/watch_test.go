package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// heard collects what a listener hears.
type heard struct {
	mu  sync.Mutex
	got []thread.Change
}

func (h *heard) add(c ...thread.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, c...)
}

func (h *heard) snapshot() []thread.Change {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// wait waits until h heard n changes, and fails if it heard another number.
func (h *heard) wait(t *testing.T, n int, what string) []thread.Change {
	t.Helper()
	var got []thread.Change
	testwait.Within(10*time.Second, func() bool {
		got = h.snapshot()
		return len(got) >= n
	})
	if len(got) != n {
		t.Fatalf("%s: heard %d changes, want %d: %+v", what, len(got), n, got)
	}
	return got
}

type brief struct {
	kind    thread.ChangeKind
	thread  string
	version int64
}

func briefs(cs []thread.Change) []brief {
	var out []brief
	for _, c := range cs {
		out = append(out, brief{c.Kind, c.Thread, c.Version})
	}
	return out
}

// listening counts the connections of the database that listen.
func listening(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN loom_changes' AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitListening(t *testing.T, s *Store, want int) {
	t.Helper()
	if !testwait.Within(10*time.Second, func() bool { return listening(t, s) == want }) {
		t.Fatalf("%d connections listen, want %d", listening(t, s), want)
	}
}

// goroutines counts the goroutines in the function fn (as a stack names
// it), once their number is at most want (one that Close waited for may
// still be returning from fn for a moment), or after two seconds.
func goroutines(fn string, want ...int) int {
	var n int
	testwait.Within(2*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		n = strings.Count(string(buf), fn+"(")
		return len(want) == 0 || n <= want[0]
	})
	return n
}

// The functions of Watch's and the notifier's goroutines, for goroutines.
const (
	watchFn    = "postgres.(*Store).watch"
	notifierFn = "postgres.(*notifier).run"
)

// TestWatchTwoStores is two servers on one database: what one writes,
// the other's listeners hear, in order, each tenant its own; once a
// listener stops, nothing more, and its connection is gone.
func TestWatchTwoStores(t *testing.T) {
	dsn := testserver.Postgres(t)
	a, b := open(t, dsn, nil), open(t, dsn, nil)
	ctx := t.Context()

	var def, acme heard
	r := thread.New(a, nil)
	dctx, stopDef := context.WithCancel(ctx)
	if err := r.Watch(dctx, func(c thread.Change) { def.add(c) }); err != nil {
		t.Fatal(err)
	}
	actx, stopAcme := context.WithCancel(ctx)
	defer stopAcme()
	if err := r.WithTenant("acme").Watch(actx, func(c thread.Change) { acme.add(c) }); err != nil {
		t.Fatal(err)
	}
	waitListening(t, a, 1) // a DB and its copies (WithTenant) share its watch

	w := thread.New(b, nil)
	th, err := w.Create(ctx, thread.CreateOptions{ID: "one"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := th.Append(ctx, message.User(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	f, err := th.Fork(ctx, thread.ForkOptions{ID: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	at, err := w.WithTenant("acme").Create(ctx, thread.CreateOptions{ID: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := at.Append(ctx, message.User("acme's")); err != nil {
		t.Fatal(err)
	}

	got := def.wait(t, 7, "the default tenant")
	want := []brief{
		{thread.ChangeCreate, "one", 1}, {thread.ChangeMove, "one", 2}, {thread.ChangeMove, "one", 3}, {thread.ChangeMove, "one", 4},
		{thread.ChangeCheckpoint, "one", 0}, {thread.ChangeCreate, "two", 1}, {thread.ChangeDelete, "two", 0},
	}
	if b := briefs(got); !slices.Equal(b, want) {
		t.Errorf("the default tenant heard %+v, want %+v", b, want)
	}
	if got[3].Head != th.Record().Head || got[3].Op != thread.OpAppend || got[3].Time.IsZero() {
		t.Errorf("the last append: %+v, head %s", got[3], th.Record().Head)
	}
	got = acme.wait(t, 2, "acme")
	if b := briefs(got); !slices.Equal(b, []brief{{thread.ChangeCreate, "one", 1}, {thread.ChangeMove, "one", 2}}) {
		t.Errorf("acme heard %+v", b)
	}

	// The last listener of the store stops: its connection goes.
	stopDef()
	stopAcme()
	waitListening(t, a, 0)
	// A listener of the other store, which listens still, hears the
	// append: by then the database has told every connection that
	// listens, and none of a's does.
	var live heard
	if err := w.Watch(ctx, func(c thread.Change) { live.add(c) }); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("unheard")); err != nil {
		t.Fatal(err)
	}
	live.wait(t, 1, "a listener that listens")
	def.wait(t, 7, "the default tenant, stopped")
	acme.wait(t, 2, "acme, stopped")
}

// TestWatchReconnect kills the listening connection on the server: the
// listener hears a gap, and then changes again.
func TestWatchReconnect(t *testing.T) {
	dsn := testserver.Postgres(t)
	a, b := open(t, dsn, nil), open(t, dsn, nil)
	ctx := t.Context()
	var h heard
	if err := a.Watch(ctx, func(cs []thread.Change) { h.add(cs...) }); err != nil {
		t.Fatal(err)
	}
	th, err := thread.New(b, nil).Create(ctx, thread.CreateOptions{ID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	h.wait(t, 1, "before")
	var killed bool
	err = b.pool.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN loom_changes'`).Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("terminate the listening connection: %v, %v", killed, err)
	}
	got := h.wait(t, 2, "the gap")
	if got[1].Kind != thread.ChangeGap || got[1].Thread != "" {
		t.Fatalf("after the kill: %+v, want a gap", got[1])
	}
	if _, err := th.Append(ctx, message.User("again")); err != nil {
		t.Fatal(err)
	}
	got = h.wait(t, 3, "after")
	if c := got[2]; c.Kind != thread.ChangeMove || c.Thread != "r" || c.Version != 2 {
		t.Fatalf("after the gap: %+v", c)
	}
}

// TestWatchBigBatch: a batch whose changes need several notifications is
// heard at once, whole, between the batches around it.
func TestWatchBigBatch(t *testing.T) {
	dsn := testserver.Postgres(t)
	a, b := open(t, dsn, nil), open(t, dsn, nil)
	ctx := t.Context()
	var (
		mu    sync.Mutex
		calls [][]thread.Change
	)
	if err := a.Watch(ctx, func(cs []thread.Change) {
		mu.Lock()
		calls = append(calls, cs)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	create := func(ids ...string) *store.Batch {
		var batch store.Batch
		for _, id := range ids {
			batch.Create = append(batch.Create, store.Creation{Op: thread.OpCreate,
				Record: &thread.Record{ID: id, Version: 1, CreatedAt: now, UpdatedAt: now}})
		}
		return &batch
	}
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 200)))
	}
	if n := notes(create(many...).Changes(now)); len(n) < 3 {
		t.Fatalf("the big batch makes %d notifications", len(n))
	}
	for _, batch := range []*store.Batch{create("first"), create(many...), create("last")} {
		if err := b.Apply(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Within(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 3
	})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 || len(calls[0]) != 1 || len(calls[1]) != 100 || len(calls[2]) != 1 {
		t.Fatalf("heard %d calls: %v", len(calls), calls)
	}
	for i, c := range calls[1] {
		if c.Kind != thread.ChangeCreate || c.Thread != many[i] {
			t.Fatalf("change %d of the big batch: %+v", i, c)
		}
	}
}

// TestNotes: notifications fit, and put back together are the changes;
// a change too big for one goes without its op, or as a gap.
func TestNotes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	var changes []thread.Change
	for i := range 300 {
		changes = append(changes, thread.Change{Kind: thread.ChangeMove, Thread: fmt.Sprint(i, strings.Repeat("é\"", 40)),
			Version: int64(i), Head: "c", Op: thread.OpAppend, Time: at})
	}
	changes = append(changes,
		thread.Change{Kind: thread.ChangeMove, Thread: "bigop", Op: thread.Op(strings.Repeat("o", 9000)), Time: at},
		thread.Change{Kind: thread.ChangeCheckpoint, Thread: strings.Repeat("\x01", 1024), Checkpoint: strings.Repeat("\x02", 1024), Time: at},
		thread.Change{Kind: thread.ChangeDelete, Thread: "end", Time: at})
	ns := notes(changes)
	var got []thread.Change
	for i, n := range ns {
		if len(n) >= 8000 {
			t.Errorf("notification %d is %d bytes", i, len(n))
		}
		var nt note
		if err := json.Unmarshal([]byte(n), &nt); err != nil {
			t.Fatal(err)
		}
		if nt.Part != i+1 || nt.Parts != len(ns) {
			t.Errorf("notification %d is part %d of %d", i, nt.Part, nt.Parts)
		}
		got = append(got, nt.Changes...)
	}
	want := slices.Clone(changes)
	want[300].Op = ""
	want[301] = thread.Change{Kind: thread.ChangeGap, Time: at}
	if len(got) != len(want) {
		t.Fatalf("%d changes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if ns := notes(changes[:2]); len(ns) != 1 || strings.Contains(ns[0], "part") {
		t.Errorf("a small batch: %q", ns)
	}
}

// TestWatchEnds: a watch ends with its context, or when its store is
// closed, and leaves no goroutine.
func TestWatchEnds(t *testing.T) {
	dsn := testserver.Postgres(t)
	before := goroutines(watchFn)
	s, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	for range 2 {
		if err := s.Watch(ctx, func([]thread.Change) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Watch(t.Context(), func([]thread.Change) {}); err != nil {
		t.Fatal(err)
	}
	waitListening(t, s, 3)
	cancel()
	waitListening(t, s, 1)
	s.Close() // ends the third
	if n := goroutines(watchFn, before); n > before {
		t.Fatalf("%d watch goroutines after Close, want %d", n, before)
	}
	if err := s.Watch(t.Context(), func([]thread.Change) {}); err == nil {
		t.Fatal("a closed store watches")
	}
	cctx, cancel := context.WithCancel(t.Context())
	cancel()
	s2 := open(t, dsn, nil)
	if err := s2.Watch(cctx, func([]thread.Change) {}); err == nil {
		t.Fatal("a watch with a context done returned nil")
	}
}

// BenchmarkChangeFeedLatency measures how long a change takes to reach a
// listener of another server: stores A and B on one database, a DB on B
// watching, appends on A one after another. It reports the time from the
// start of an append (and from its return, which the notification can
// beat) to the listener hearing it, in ms.
func BenchmarkChangeFeedLatency(b *testing.B) {
	dsn := testserver.Postgres(b)
	sa, sb := open(b, dsn, nil), open(b, dsn, nil)
	ctx := b.Context()
	heardAt := make(chan time.Time, 1)
	if err := thread.New(sb, nil).Watch(ctx, func(c thread.Change) {
		if c.Kind == thread.ChangeMove {
			heardAt <- time.Now()
		}
	}); err != nil {
		b.Fatal(err)
	}
	th, err := thread.New(sa, nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	msg := message.User("the quick brown fox jumps over the lazy dog")
	var fromStart, fromReturn []float64
	for b.Loop() {
		start := time.Now()
		if _, err := th.Append(ctx, msg); err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		select {
		case at := <-heardAt:
			fromStart = append(fromStart, float64(at.Sub(start))/1e6)
			fromReturn = append(fromReturn, max(0, float64(at.Sub(returned))/1e6))
		case <-time.After(5 * time.Second):
			b.Fatal("the change was not heard in 5 s")
		}
	}
	b.StopTimer()
	pct := func(xs []float64, p float64) float64 {
		sort.Float64s(xs)
		return xs[min(len(xs)-1, int(p*float64(len(xs))))]
	}
	b.ReportMetric(pct(fromStart, 0.50), "p50-ms")
	b.ReportMetric(pct(fromStart, 0.99), "p99-ms")
	b.ReportMetric(pct(fromReturn, 0.50), "p50-after-return-ms")
	b.ReportMetric(pct(fromReturn, 0.99), "p99-after-return-ms")
}

// TestNoNotify: a store that does not notify cannot watch, and what it
// writes is not heard.
func TestNoNotify(t *testing.T) {
	dsn := testserver.Postgres(t)
	quiet, s := open(t, dsn, &Options{NoNotify: true}), open(t, dsn, nil)
	ctx := t.Context()
	if err := quiet.Watch(ctx, func([]thread.Change) {}); !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("watch a store that does not notify: %v, want ErrUnsupported", err)
	}
	var h heard
	if err := s.Watch(ctx, func(cs []thread.Change) { h.add(cs...) }); err != nil {
		t.Fatal(err)
	}
	th, err := thread.New(quiet, nil).Create(ctx, thread.CreateOptions{ID: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("hush")); err != nil {
		t.Fatal(err)
	}
	if _, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{ID: "loud"}); err != nil {
		t.Fatal(err)
	}
	if got := h.wait(t, 1, "a store that does not notify"); got[0].Thread != "loud" {
		t.Fatalf("heard %+v", got)
	}
}

// TestWatchCloseFlushes: the notifications still queued when a store is
// closed are sent before Close returns; its notifier is gone after.
func TestWatchCloseFlushes(t *testing.T) {
	dsn := testserver.Postgres(t)
	before := goroutines(notifierFn)
	b := open(t, dsn, nil)
	ctx := t.Context()
	var h heard
	if err := b.Watch(ctx, func(cs []thread.Change) { h.add(cs...) }); err != nil {
		t.Fatal(err)
	}
	a, err := Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	th, err := thread.New(a, nil).Create(ctx, thread.CreateOptions{ID: "last"})
	if err != nil {
		t.Fatal(err)
	}
	const appends = 20
	for i := range appends {
		if _, err := th.Append(ctx, message.User(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	if n := goroutines(notifierFn, before); n > before {
		t.Fatalf("%d notifier goroutines after Close, want %d", n, before)
	}
	got := h.wait(t, 1+appends, "the writes made before Close")
	if c := got[len(got)-1]; c.Kind != thread.ChangeMove || c.Thread != "last" || c.Version != 1+appends {
		t.Fatalf("the last heard: %+v", c)
	}
	// A store that never wrote starts no notifier; closing it waits for none.
	c, err := Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := thread.New(c, nil).Thread(ctx, "last"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := goroutines(notifierFn, before); n > before {
		t.Fatalf("%d notifier goroutines after a reader's Close, want %d", n, before)
	}
}

// TestWatchManyWriters: many writers of two stores append to many threads
// at once (several writers to each): their notifications, queued and sent
// in batches, all arrive, each thread's versions in order, none missing,
// and no gap.
func TestWatchManyWriters(t *testing.T) {
	holdLong(t)
	dsn := testserver.Postgres(t)
	a, b, l := open(t, dsn, &Options{MaxConns: 8}), open(t, dsn, &Options{MaxConns: 8}), open(t, dsn, nil)
	ctx := t.Context()
	var h heard
	if err := l.Watch(ctx, func(cs []thread.Change) { h.add(cs...) }); err != nil {
		t.Fatal(err)
	}
	const writers, threads, each = 48, 12, 10
	dbs := writingDBs(a, b)
	for i := range threads {
		if _, err := dbs[i%2].Create(ctx, thread.CreateOptions{ID: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	appendAtOnce(t, dbs, writers, each, func(i int) string { return fmt.Sprint("t", i%threads) })
	got := h.wait(t, threads+writers*each, "many writers")
	last := map[string]int64{}
	for _, c := range got {
		switch c.Kind {
		case thread.ChangeCreate:
			if _, ok := last[c.Thread]; ok || c.Version != 1 {
				t.Fatalf("heard %+v after version %d", c, last[c.Thread])
			}
		case thread.ChangeMove:
			if c.Version != last[c.Thread]+1 {
				t.Fatalf("heard %+v after version %d", c, last[c.Thread])
			}
		default:
			t.Fatalf("heard %+v", c)
		}
		last[c.Thread] = c.Version
	}
	for i := range threads {
		if v := last[fmt.Sprint("t", i)]; v != 1+writers/threads*each {
			t.Fatalf("thread t%d: heard up to version %d, want %d", i, v, 1+writers/threads*each)
		}
	}
}

// holdLong makes Watch hold a batch that skips a version for 10 s, for
// the test: a slow machine must not make a gap.
func holdLong(t *testing.T) {
	hold := watchHold
	watchHold = 10 * time.Second
	t.Cleanup(func() { watchHold = hold })
}

// writingDBs returns a DB on each store that retries appends long enough
// for many writers of one thread.
func writingDBs(stores ...*Store) []*thread.DB {
	var dbs []*thread.DB
	for _, s := range stores {
		dbs = append(dbs, thread.New(s, &thread.Options{AppendRetries: 1000}))
	}
	return dbs
}

// appendAtOnce runs writers goroutines at once, each appending each
// messages, one by one, to the thread id(i) through dbs[i%len(dbs)], and
// fails t if any of them fails.
func appendAtOnce(t *testing.T, dbs []*thread.DB, writers, each int, id func(i int) string) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			th, err := dbs[i%len(dbs)].Thread(ctx, id(i))
			if err != nil {
				errs <- err
				return
			}
			for j := range each {
				if _, err := th.Append(context.Background(), message.User(fmt.Sprint(i, "/", j))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
