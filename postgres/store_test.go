package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func TestMain(m *testing.M) { testserver.Main(m) }

func TestChildProcess(t *testing.T) { proctest.Child(t) }

// open opens a store on dsn and closes it when the test ends.
func open(t testing.TB, dsn string, opts *Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	dsns := map[store.Store]string{}
	var mu sync.Mutex
	storetest.Run(t, func(t *testing.T) store.Store {
		dsn := testserver.Postgres(t)
		s := open(t, dsn, nil)
		mu.Lock()
		dsns[s] = dsn
		mu.Unlock()
		return s
	}, &storetest.Options{
		Reopen: func(s store.Store) (store.Store, error) {
			mu.Lock()
			dsn := dsns[s]
			mu.Unlock()
			if err := s.(*Store).Close(); err != nil {
				return nil, err
			}
			return Open(context.Background(), dsn, nil)
		},
	})
}

func TestOpenURL(t *testing.T) {
	dsn := testserver.Postgres(t)
	ctx := t.Context()
	for _, scheme := range []string{"postgres", "postgresql"} {
		u := scheme + strings.TrimPrefix(dsn, "postgres")
		db, err := thread.Open(ctx, u, nil)
		if err != nil {
			t.Fatalf("thread.Open(%s): %v", u, err)
		}
		if _, ok := db.Store().(*Store); !ok {
			t.Fatalf("thread.Open(%s) made a %T", u, db.Store())
		}
		th, err := db.Create(ctx, thread.CreateOptions{ID: "via-" + scheme})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := th.Append(ctx, message.User("hi")); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A DSN pgx cannot parse is invalid, and its text (a password) is not
	// repeated in the error.
	_, err := Open(ctx, "postgres://u:sekrit@host:notaport/db", nil)
	if !errors.Is(err, thread.ErrInvalid) || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("bad dsn: %v", err)
	}
	// Options apply.
	s := open(t, dsn, &Options{MaxConns: 3, Retries: -1})
	if got := s.pool.Config().MaxConns; got != 3 {
		t.Fatalf("MaxConns %d, want 3", got)
	}
}

func schemaVersion(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	if err := s.pool.QueryRow(t.Context(), "SELECT max(version) FROM loom_schema").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNewerSchemaRefused(t *testing.T) {
	dsn := testserver.Postgres(t)
	ctx := t.Context()
	s := open(t, dsn, nil)
	if v := schemaVersion(t, s); v != latestVersion() {
		t.Fatalf("schema version %d after open, want %d", v, latestVersion())
	}
	if _, err := s.pool.Exec(ctx, "INSERT INTO loom_schema (version) VALUES ($1)", latestVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, dsn, nil)
	if !errors.Is(err, ErrNewerSchema) || !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("open a newer schema: %v, want ErrNewerSchema", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("version %d", latestVersion()+1)) {
		t.Fatalf("the error does not say which version: %v", err)
	}
	t.Log(err)
}

// TestMigrations opens one fresh database from several stores at once (the
// advisory lock makes them take turns), then adds a migration and checks it
// runs once, on the next open, and keeps the data.
func TestMigrations(t *testing.T) {
	dsn := testserver.Postgres(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(ctx, dsn, nil)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent open %d: %v", i, err)
		}
	}
	s := open(t, dsn, nil)
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM loom_schema").Scan(&n); err != nil || n != len(migrations) {
		t.Fatalf("%d schema rows (%v), want %d", n, err, len(migrations))
	}
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("before the migration")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	saved := migrations
	t.Cleanup(func() { migrations = saved })
	next := latestVersion() + 1
	migrations = append(append([]migration(nil), saved...), migration{next, `ALTER TABLE loom_threads ADD COLUMN archived boolean NOT NULL DEFAULT false`, nil})
	for range 2 { // the second open finds nothing to do
		s = open(t, dsn, nil)
		if v := schemaVersion(t, s); v != next {
			t.Fatalf("schema version %d, want %d", v, next)
		}
		s.Close()
	}
	s = open(t, dsn, nil)
	var archived bool
	if err := s.pool.QueryRow(ctx, "SELECT archived FROM loom_threads WHERE id = 'kept'").Scan(&archived); err != nil {
		t.Fatalf("the migration did not run: %v", err)
	}
	th, err = thread.New(s, nil).Thread(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("after the migration: %d messages, %v", len(msgs), err)
	}
}

// TestTwoStoresOneDatabase races two stores (two pools, as two servers
// would have) on one thread: one winner per version, nothing lost.
func TestTwoStoresOneDatabase(t *testing.T) {
	dsn := testserver.Postgres(t)
	ctx := t.Context()
	stores := []*Store{open(t, dsn, nil), open(t, dsn, nil)}
	th, err := thread.New(stores[0], nil).Create(ctx, thread.CreateOptions{ID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	// Compare-and-swap: 16 writers, 8 per store, all from the same version.
	for round := range 5 {
		from := int64(round + 1)
		head, err := stores[1].Thread(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		var parent *thread.Commit
		if head.Head != "" {
			if parent, err = stores[0].Commit(ctx, head.Head); err != nil {
				t.Fatal(err)
			}
		}
		const writers = 16
		errs := make([]error, writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range writers {
			c := &thread.Commit{ID: fmt.Sprintf("c-%d-%d", round, w), Op: thread.OpAppend, Depth: 1,
				Time: time.Now().UTC().Truncate(time.Microsecond), Messages: []message.Message{message.User(fmt.Sprintf("r%d-w%d", round, w))}}
			if parent != nil {
				c.Parent, c.Depth = parent.ID, parent.Depth+1
			}
			wg.Go(func() {
				<-start
				errs[w] = stores[w%2].Apply(ctx, &store.Batch{Commits: []*thread.Commit{c},
					Moves: []store.Move{{Thread: "shared", From: from, Head: c.ID, Op: thread.OpAppend, Time: c.Time}}})
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for w, err := range errs {
			switch {
			case err == nil:
				winners++
			case !errors.Is(err, thread.ErrConflict):
				t.Fatalf("round %d writer %d: %v, want ErrConflict", round, w, err)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d writers moved the head from version %d", round, winners, from)
		}
		// Every loser's commit was rolled back with its move.
		for w, err := range errs {
			if err != nil {
				if _, err := stores[0].Commit(ctx, fmt.Sprintf("c-%d-%d", round, w)); !errors.Is(err, thread.ErrNotFound) {
					t.Fatalf("round %d: the losing writer %d left its commit: %v", round, w, err)
				}
			}
		}
	}
	// Appends through both stores, with rebasing: nothing lost.
	const each = 20
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			h, err := thread.New(stores[w%2], &thread.Options{AppendRetries: 10_000}).Thread(ctx, "shared")
			if err != nil {
				t.Error(err)
				return
			}
			for i := range each {
				if _, err := h.Append(ctx, message.User(fmt.Sprintf("w%d-%d", w, i))); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := th.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := 5 + 8*each; len(msgs) != want || th.Version() != int64(want+1) {
		t.Fatalf("%d messages at version %d, want %d at %d", len(msgs), th.Version(), want, want+1)
	}
	// A delete through one store and a fork through the other, racing:
	// whichever wins, the fork either has all its messages or does not exist.
	for i := range 5 {
		id := fmt.Sprintf("src%d", i)
		src, err := thread.New(stores[0], nil).Create(ctx, thread.CreateOptions{ID: id, Messages: []message.Message{message.User("a"), message.User("b")}})
		if err != nil {
			t.Fatal(err)
		}
		other, err := thread.New(stores[1], nil).Thread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var fork *thread.Thread
		var forkErr, delErr error
		var wg sync.WaitGroup
		wg.Go(func() { fork, forkErr = other.Fork(ctx, thread.ForkOptions{ID: id + "-fork"}) })
		wg.Go(func() { delErr = src.Delete(ctx) })
		wg.Wait()
		if delErr != nil {
			t.Fatalf("delete: %v", delErr)
		}
		if forkErr != nil {
			if !errors.Is(forkErr, thread.ErrNotFound) {
				t.Fatalf("fork: %v", forkErr)
			}
			continue
		}
		msgs, err := fork.Messages(ctx, thread.ReadOptions{})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("fork %d after its source's delete: %d messages, %v", i, len(msgs), err)
		}
	}
}

// TestRefcounts checks the reference counts in the tables against the
// graph after a mix of operations, and that deleting everything leaves no
// commit behind.
func TestRefcounts(t *testing.T) {
	dsn := testserver.Postgres(t)
	ctx := t.Context()
	s := open(t, dsn, nil)
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("1"), message.User("2")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := a.Append(ctx, message.User(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	b, err := a.Fork(ctx, thread.ForkOptions{ID: "b", At: mustMessages(t, a)[3].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, message.User("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Rollback(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, s)
	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, s)
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, s)
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM loom_commits").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d commits left after every thread was deleted (%v)", n, err)
	}
}

func mustMessages(t *testing.T, th *thread.Thread) []message.Message {
	t.Helper()
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// checkRefs recounts every commit's references from the tables (its
// children, history entries and checkpoints), and looks for references to
// commits that are gone.
func checkRefs(t *testing.T, s *Store) {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `WITH r AS (
			SELECT parent AS seq FROM loom_commits WHERE parent IS NOT NULL
			UNION ALL SELECT commit_seq FROM loom_history WHERE commit_seq IS NOT NULL
			UNION ALL SELECT commit_seq FROM loom_checkpoints),
		n AS (SELECT seq, count(*) AS n FROM r GROUP BY seq)
		SELECT coalesce(c.seq, n.seq), c.id, coalesce(c.refs, 0), coalesce(n.n, 0)
		FROM loom_commits c FULL JOIN n ON n.seq = c.seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, refs, want int64
		var id *string
		if err := rows.Scan(&seq, &id, &refs, &want); err != nil {
			t.Fatal(err)
		}
		switch {
		case id == nil:
			t.Errorf("commit seq %d is gone; %d references to it are left", seq, want)
		case refs != want || refs == 0:
			t.Errorf("commit %s has refs %d, its references count %d", *id, refs, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var orphans int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM loom_search s
		WHERE NOT EXISTS (SELECT 1 FROM loom_commits c WHERE c.seq = s.commit_seq)`).Scan(&orphans); err != nil || orphans != 0 {
		t.Errorf("%d index entries of freed commits (%v)", orphans, err)
	}
}

// TestHostileInput gives the store itself values PostgreSQL text cannot
// hold, or that no index can: a typed error, nothing written.
func TestHostileInput(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, id := range []string{"a\x00b", "\xff", strings.Repeat("x", 10<<10)} {
		if _, err := s.Thread(ctx, id); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("Thread(%q): %v", clip(id), err)
		}
		if _, err := s.Commit(ctx, id); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("Commit(%q): %v", clip(id), err)
		}
		oneError(t, fmt.Sprintf("Ancestors(%q)", clip(id)), s.Ancestors(ctx, id, -1), thread.ErrNotFound)
		oneError(t, fmt.Sprintf("History(%q)", clip(id)), s.History(ctx, id, thread.HistoryOptions{}), thread.ErrNotFound)
		oneError(t, fmt.Sprintf("Checkpoints(%q)", clip(id)), s.Checkpoints(ctx, id), thread.ErrNotFound)
		if validText(id) {
			// Too long to be a key, so no thread has it as its tenant.
			oneError(t, fmt.Sprintf("Threads(tenant %q)", clip(id)), s.Threads(ctx, thread.ListOptions{Tenant: id}), nil)
		} else {
			oneError(t, fmt.Sprintf("Threads(tenant %q)", clip(id)), s.Threads(ctx, thread.ListOptions{Tenant: id}), thread.ErrInvalid)
		}
		rec := &thread.Record{ID: id, Kind: thread.KindLocal, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := s.Apply(ctx, &store.Batch{Create: []store.Creation{{Record: rec, Op: thread.OpCreate}}}); !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("create %q: %v", clip(id), err)
		}
		c := &thread.Commit{ID: id, Depth: 1, Op: thread.OpAppend, Time: now}
		if err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}}); !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("commit %q: %v", clip(id), err)
		}
		rec = &thread.Record{ID: "ok", Title: id, Kind: thread.KindLocal, Version: 1, CreatedAt: now, UpdatedAt: now}
		if len(id) < 100 {
			if err := s.Apply(ctx, &store.Batch{Create: []store.Creation{{Record: rec, Op: thread.OpCreate}}}); !errors.Is(err, thread.ErrInvalid) {
				t.Fatalf("title %q: %v", clip(id), err)
			}
		}
		if err := s.Apply(ctx, &store.Batch{Moves: []store.Move{{Thread: id, From: 1, Op: thread.OpReset, Time: now}}}); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("move %q: %v", clip(id), err)
		}
		if err := s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: id}}}); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("delete %q: %v", clip(id), err)
		}
	}
	// State that is not JSON cannot be stored as the object it is kept in.
	c := &thread.Commit{ID: "c1", Depth: 0, Op: thread.OpState, Time: now, StateFrom: "c1", State: map[string]json.RawMessage{"k": json.RawMessage("{nope")}}
	if err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("state that is not JSON: %v", err)
	}
	// Nothing was written.
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM loom_threads) + (SELECT count(*) FROM loom_commits)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after refused writes (%v)", n, err)
	}
}

// oneError checks that seq yields exactly one error, and it target, or
// with target nil that it yields nothing at all.
func oneError[T any](t *testing.T, what string, seq iter.Seq2[T, error], target error) {
	t.Helper()
	var (
		values int
		errs   []error
	)
	for _, err := range seq {
		if err != nil {
			errs = append(errs, err)
		} else {
			values++
		}
	}
	switch {
	case target == nil && (values > 0 || len(errs) > 0):
		t.Fatalf("%s: %d values and errors %v, want nothing", what, values, errs)
	case target != nil && (values > 0 || len(errs) != 1 || !errors.Is(errs[0], target)):
		t.Fatalf("%s: %d values and errors %v, want one error, %v", what, values, errs, target)
	}
}

// TestNilAndEmptyMaps: a nil state, metadata or message list reads back
// nil, an empty one empty.
func TestNilAndEmptyMaps(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	ctx := t.Context()
	at := time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)
	commits := []*thread.Commit{
		{ID: "nil", Op: thread.OpAppend, Time: at},
		{ID: "empty", Parent: "nil", Op: thread.OpState, Time: at, StateFrom: "empty", State: map[string]json.RawMessage{}, Metadata: map[string]string{}},
		{ID: "full", Parent: "empty", Op: thread.OpState, Time: at, StateFrom: "full",
			State:    map[string]json.RawMessage{"b": json.RawMessage(`{"z":1,"a":[1e400, 0.10]}`), "a": json.RawMessage(`"<&>"`)},
			Metadata: map[string]string{"run": "r<1>"}},
	}
	if err := s.Apply(ctx, &store.Batch{Commits: commits}); err != nil {
		t.Fatal(err)
	}
	for _, want := range commits {
		got, err := s.Commit(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (got.State == nil) != (want.State == nil) || (got.Metadata == nil) != (want.Metadata == nil) || got.Messages != nil {
			t.Fatalf("commit %s: state %#v metadata %#v messages %#v", want.ID, got.State, got.Metadata, got.Messages)
		}
		for k, v := range want.State {
			if string(got.State[k]) != string(v) {
				t.Fatalf("commit %s: state %s = %s, want %s", want.ID, k, got.State[k], v)
			}
		}
		if !got.Time.Equal(at) || got.Time.Location() != time.UTC {
			t.Fatalf("time %v", got.Time)
		}
	}
}

func TestCrash(t *testing.T) {
	proctest.Crash(t, testserver.Postgres(t), 3)
}

func TestConcurrentProcesses(t *testing.T) {
	proctest.Concurrent(t, testserver.Postgres(t), 3, 50)
}

// line applies a thread id whose head is the last of n commits in a line,
// each with a message, and whose history has an entry per commit: longer
// than a page of Ancestors and History when n is.
func line(t *testing.T, s *Store, id string, n int) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var b store.Batch
	hist := []thread.HistoryEntry{{Version: 1, Op: thread.OpCreate, Time: now}}
	parent := ""
	for i := range n {
		c := &thread.Commit{ID: fmt.Sprintf("%s-%05d", id, i), Parent: parent, Depth: int64(i + 1), Op: thread.OpAppend, Time: now,
			Messages: []message.Message{message.User(fmt.Sprint(i))}}
		b.Commits = append(b.Commits, c)
		hist = append(hist, thread.HistoryEntry{Version: int64(len(hist) + 1), Commit: c.ID, Op: c.Op, Time: now})
		parent = c.ID
	}
	rec := &thread.Record{ID: id, Kind: thread.KindLocal, Head: parent, Version: int64(len(hist)), CreatedAt: now, UpdatedAt: now}
	b.Create = []store.Creation{{Record: rec, Op: thread.OpLoad, History: hist}}
	if err := s.Apply(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
}

// walk runs seq, calling during once, after the first value, and counts
// the values and collects the errors it yields.
func walk[T any](seq iter.Seq2[T, error], during func()) (values int, errs []error) {
	for _, err := range seq {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if values++; values == 1 {
			during()
		}
	}
	return values, errs
}

// TestDeleteDuringWalk deletes a thread while its ancestors or history are
// read, a page at a time: the walk ends with ErrNotFound, never as if the
// pages read were the whole of it.
func TestDeleteDuringWalk(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	ctx := t.Context()
	const n = 1500 // over firstAncestorPage and historyPage
	del := func(id string) {
		if err := s.Apply(ctx, &store.Batch{Delete: []store.Deletion{{Thread: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, values int, errs []error) {
		t.Helper()
		if values >= n || len(errs) != 1 || !errors.Is(errs[0], thread.ErrNotFound) {
			t.Errorf("%s: %d of %d values, errors %v; want fewer and one ErrNotFound", what, values, n, errs)
		}
	}

	line(t, s, "a", n)
	head, err := s.Thread(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	values, errs := walk(s.Ancestors(ctx, head.Head, -1), func() { del("a") })
	check("ancestors", values, errs)

	line(t, s, "h", n)
	values, errs = walk(s.History(ctx, "h", thread.HistoryOptions{}), func() { del("h") })
	check("history", values, errs)

	// A thread of the same id, made while the first one's history was read,
	// is another thread: none of its entries are the first one's.
	line(t, s, "r", n)
	values, errs = walk(s.History(ctx, "r", thread.HistoryOptions{}), func() {
		del("r")
		line(t, s, "r", 3)
	})
	check("history of a thread deleted and made again", values, errs)
}

// TestStaleBatchLocksNoCommit: a batch that lost the version check fails at
// once, without waiting for the locks of the commits it refers to (nor
// taking them, so that the other losers do not queue behind it).
func TestStaleBatchLocksNoCommit(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	ctx := t.Context()
	line(t, s, "t", 2)
	head, err := s.Thread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	// Another writer holds the head commit's lock, as the winner of the
	// version does until it commits.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT 1 FROM loom_commits WHERE id = $1 FOR NO KEY UPDATE", head.Head); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	c := &thread.Commit{ID: "late", Parent: head.Head, Depth: 3, Op: thread.OpAppend, Time: now,
		Messages: []message.Message{message.User("late")}}
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err = s.Apply(actx, &store.Batch{Commits: []*thread.Commit{c},
		Moves: []store.Move{{Thread: "t", From: head.Version - 1, Head: c.ID, Op: thread.OpAppend, Time: now}}})
	if !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("a move from a stale version while the parent is locked: %v, want ErrConflict at once", err)
	}
}
