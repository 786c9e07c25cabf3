package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func TestMain(m *testing.M) { testserver.Main(m) }

func TestChildProcess(t *testing.T) { proctest.Child(t) }

func open(t testing.TB, url string, opts *redis.Options) *redis.Store {
	t.Helper()
	s, err := redis.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	urls := map[store.Store]string{}
	storetest.Run(t, func(t *testing.T) store.Store {
		url := testserver.Redis(t)
		s := open(t, url, nil)
		urls[s] = url
		return s
	}, &storetest.Options{
		Reopen: func(s store.Store) (store.Store, error) {
			if err := s.(*redis.Store).Close(); err != nil {
				return nil, err
			}
			return redis.Open(context.Background(), urls[s], nil)
		},
	})
}

func TestConcurrentProcesses(t *testing.T) {
	proctest.Concurrent(t, testserver.Redis(t), 3, 50)
}

func TestCrash(t *testing.T) {
	// The writer is killed, not the server: what a script applied is in
	// Redis, and what it did not is not there at all.
	proctest.Crash(t, testserver.Redis(t), 3)
}

func TestNewerSchemaRefused(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url, nil)
	if err := s.Client().Set(t.Context(), "loom:schema", redis.SchemaVersion+1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := redis.Open(t.Context(), url, nil)
	if !errors.Is(err, thread.ErrUnsupported) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open a store of a newer schema: %v", err)
	}
	// Another prefix in the same database is another store.
	other := open(t, url+"?prefix=other", nil)
	if v, err := other.Client().Get(t.Context(), "other:schema").Int(); err != nil || v != redis.SchemaVersion {
		t.Fatalf("schema of a fresh store: %d, %v", v, err)
	}
}

func TestMigrationFromEmpty(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url, nil)
	v, err := s.Client().Get(t.Context(), "loom:schema").Int()
	if err != nil || v != redis.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, redis.SchemaVersion)
	}
	// Reopening leaves it alone.
	open(t, url, nil)
	if v2, _ := s.Client().Get(t.Context(), "loom:schema").Int(); v2 != v {
		t.Fatalf("reopen changed the schema version to %d", v2)
	}
	if err := s.Client().Set(t.Context(), "loom:schema", "-3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redis.Open(t.Context(), url, nil); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("open with a negative schema version: %v", err)
	}
}

func TestURL(t *testing.T) {
	url := testserver.Redis(t)
	for _, bad := range []string{url + "?ttl=nope", url + "?ttl=-1h", url + "?cluster=maybe", url + "?prefix=a{b}", url + "?prefix=a:b", url + "?bogus=1", "::"} {
		if s, err := redis.Open(t.Context(), bad, nil); err == nil {
			s.Close()
			t.Errorf("open %q: no error", bad)
		} else if !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("open %q: %v, want ErrInvalid", bad, err)
		}
	}
	s := open(t, url+"?prefix=app1&ttl=1h&sweep=-1s", nil)
	if s.Prefix() != "app1" {
		t.Fatalf("prefix %q", s.Prefix())
	}
	// Options win over the URL.
	s2 := open(t, url+"?prefix=app1", &redis.Options{Prefix: "app2"})
	if s2.Prefix() != "app2" {
		t.Fatalf("prefix %q, want the option's", s2.Prefix())
	}
	// thread.Open knows the scheme.
	db, err := thread.Open(t.Context(), url+"?prefix=via-open", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Create(t.Context(), thread.CreateOptions{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Client().Exists(t.Context(), "via-open:t:x").Result(); n != 1 {
		t.Fatal("thread.Open did not write under the URL's prefix")
	}
	// A client of one's own is used and left open.
	rdb := goredis.NewClient(&goredis.Options{Addr: strings.TrimPrefix(strings.Split(url, "/")[2], "")})
	defer rdb.Close()
	s3, err := redis.Open(t.Context(), "", &redis.Options{Client: rdb, Prefix: "own"})
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("Close closed the caller's client: %v", err)
	}
}

// TestKeysStayInside checks that hostile ids given straight to the store
// never make a key outside the prefix, and that every key of a family
// carries its hash tag.
func TestKeysStayInside(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url, &redis.Options{Prefix: "p"})
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "fam", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := th.Fork(ctx, thread.ForkOptions{ID: "child"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Append(ctx, message.User("y")); err != nil {
		t.Fatal(err)
	}
	hostile := []string{"../../etc", "a\x00b", "{x}", "}{", "a:b", "p:{fam}:r:fam", strings.Repeat("z", 10<<10), "*", "", " "}
	now := time.Now().UTC()
	for _, id := range hostile {
		if _, err := s.Thread(ctx, id); !errors.Is(err, thread.ErrNotFound) && !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("Thread(%q): %v", id, err)
		}
		if _, err := s.Commit(ctx, id); !errors.Is(err, thread.ErrNotFound) && !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("Commit(%q): %v", id, err)
		}
		// Exactly one ErrNotFound each: an empty iterator is a failure.
		if e := errs(s.History(ctx, id, thread.HistoryOptions{})); len(e) != 1 || !errors.Is(e[0], thread.ErrNotFound) {
			t.Errorf("History(%q): %v", id, e)
		}
		if e := errs(s.Checkpoints(ctx, id)); len(e) != 1 || !errors.Is(e[0], thread.ErrNotFound) {
			t.Errorf("Checkpoints(%q): %v", id, e)
		}
		if e := errs(s.Ancestors(ctx, id, -1)); len(e) != 1 || !errors.Is(e[0], thread.ErrNotFound) {
			t.Errorf("Ancestors(%q): %v", id, e)
		}
		batches := []*store.Batch{
			{Create: []store.Creation{{Record: &thread.Record{ID: id, Version: 1, CreatedAt: now, UpdatedAt: now}, Op: thread.OpCreate}}},
			{Commits: []*thread.Commit{{ID: id, Depth: 1, Op: thread.OpAppend, Time: now}}},
			{Moves: []store.Move{{Thread: id, From: 1, Op: thread.OpReset, Time: now}}},
			{Moves: []store.Move{{Thread: "fam", From: 2, Head: id, Op: thread.OpReset, Time: now}}},
			{Checkpoints: []thread.Checkpoint{{Thread: "fam", Name: id, Commit: id, CreatedAt: now}}},
			{DropCheckpoints: []store.CheckpointKey{{Thread: id, Name: id}}},
			{Delete: []store.Deletion{{Thread: id}}},
		}
		for i, b := range batches {
			if id == "" && i == 3 {
				continue // a reset: "" is the empty root
			}
			if err := s.Apply(ctx, b); !errors.Is(err, thread.ErrNotFound) && !errors.Is(err, thread.ErrInvalid) {
				t.Errorf("batch %d with %q: %v", i, id, err)
			}
		}
		// A tenant follows the id rules: a DB of any other refuses
		// everything, so such a tenant never reaches a key.
		if id == "" {
			continue
		}
		tdb := db.WithTenant(id)
		if _, err := tdb.Create(ctx, thread.CreateOptions{}); !ids.Valid(id) {
			if !errors.Is(err, thread.ErrInvalid) {
				t.Errorf("create for tenant %q: %v, want ErrInvalid", id, err)
			}
			continue
		} else if err != nil {
			t.Errorf("create for tenant %q: %v", id, err)
		}
		n := 0
		for _, err := range tdb.Threads(ctx, thread.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 1 {
			t.Errorf("tenant %q lists %d threads, want 1", id, n)
		}
	}
	keys, err := s.Client().Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		k := clip(k)
		if !strings.HasPrefix(k, "p:") {
			t.Errorf("key %q is outside the prefix", k)
		}
		if strings.ContainsAny(k, "\x00 *") || strings.Count(k, "{") > 1 || strings.Count(k, "}") > 1 || len(k) > 200 {
			t.Errorf("key %q holds a hostile id", k)
		}
		if i := strings.Index(k, "{"); i >= 0 {
			tag := k[i+1 : strings.Index(k, "}")]
			if i != 2 || strings.Trim(tag, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
				t.Errorf("key %q has hash tag %q", k, tag)
			}
		}
	}
}

// TestClusterFamilies checks that in cluster mode a batch is refused when
// it spans families, and that forks and copies join their source's.
func TestClusterFamilies(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url+"?prefix=cl", &redis.Options{Cluster: true})
	ctx := t.Context()
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("a0")}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Create(ctx, thread.CreateOptions{ID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	// Fork at a message inside the root commit: a split commit with no
	// parent still joins a's family through ForkedFrom.
	a.Append(ctx, message.User("a1"), message.User("a2"))
	msgs, _ := a.Messages(ctx, thread.ReadOptions{})
	f, err := a.Fork(ctx, thread.ForkOptions{ID: "f", At: msgs[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Append(ctx, message.User("f")); err != nil {
		t.Fatal(err)
	}
	c, err := f.Copy(ctx, thread.ForkOptions{ID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, message.User("c")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "f", "c"} {
		if fam, _ := s.Client().Get(ctx, "cl:t:"+id).Result(); fam != "a" {
			t.Errorf("thread %s is in family %q, want a", id, fam)
		}
	}
	if fam, _ := s.Client().Get(ctx, "cl:t:"+b.ID()).Result(); fam != "b" {
		t.Errorf("thread b is in family %q", fam)
	}
	now := time.Now().UTC()
	err = s.Apply(ctx, &store.Batch{Moves: []store.Move{
		{Thread: "a", From: a.Version(), Head: a.Record().Head, Op: thread.OpRestore, Time: now},
		{Thread: "b", From: 1, Head: "", Op: thread.OpReset, Time: now}}})
	if !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("a batch over two families: %v", err)
	}
	err = s.Apply(ctx, &store.Batch{Moves: []store.Move{{Thread: "b", From: 1, Head: a.Record().Head, Op: thread.OpRestore, Time: now}}})
	if !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("a move onto another family's commit: %v", err)
	}
	// Deleting the founder keeps the family working.
	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Messages(ctx, thread.ReadOptions{})
	if err != nil || len(got) != 4 {
		t.Fatalf("copy after the founder's delete: %d messages, %v", len(got), err)
	}
	// Every key of a family holds its tag; no other key has a brace.
	keys, _ := s.Client().Keys(ctx, "cl:*").Result()
	for _, k := range keys {
		if strings.Contains(k, "{") && !strings.HasPrefix(k, "cl:{a}:") && !strings.HasPrefix(k, "cl:{b}:") {
			t.Errorf("key %q", k)
		}
	}
}

func TestTTL(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url+"?ttl=1h&sweep=-1s", nil)
	ctx := t.Context()
	clock := time.Now()
	redis.SetClock(s, func() time.Time { return clock })
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("shared")}})
	if err != nil {
		t.Fatal(err)
	}
	shared := a.Record().Head
	clock = clock.Add(30 * time.Minute)
	f, err := a.Fork(ctx, thread.ForkOptions{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(45 * time.Minute) // a is 75 minutes old, f 45
	if _, err := db.Thread(ctx, "a"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("an expired thread reads back: %v", err)
	}
	n, err := s.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	// The shared commit lives on in the fork.
	if _, err := s.Commit(ctx, shared); err != nil {
		t.Fatalf("shared commit after the sweep: %v", err)
	}
	// A move pushes the deadline.
	clock = clock.Add(10 * time.Minute)
	if _, err := f.Append(ctx, message.User("later")); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(55 * time.Minute)
	if n, _ := s.Sweep(ctx); n != 0 {
		t.Fatalf("swept a thread that moved %d", n)
	}
	clock = clock.Add(10 * time.Minute)
	if n, _ := s.Sweep(ctx); n != 1 {
		t.Fatalf("sweep after the deadline: %d", n)
	}
	if _, err := s.Commit(ctx, shared); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("shared commit after both expired: %v", err)
	}
	keys, _ := s.Client().Keys(ctx, "*").Result()
	if len(keys) != 1 || keys[0] != "loom:schema" {
		t.Fatalf("keys left after everything expired: %q", keys)
	}
}

func clip(s string) string {
	if len(s) > 201 {
		return s[:201] + "…"
	}
	return s
}

// TestClusterGroups runs the suite's group case on a store in cluster
// mode, which refuses a batch that spans thread families: a workflow's
// groups stay within its family.
func TestClusterGroups(t *testing.T) {
	storetest.Groups(t, open(t, testserver.Redis(t)+"?prefix=cg", &redis.Options{Cluster: true}))
}

// errs collects the errors an iterator yields.
func errs[T any](seq func(func(T, error) bool)) []error {
	var out []error
	for _, err := range seq {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// TestExpiredWrites checks that an expired thread is missing to writes and
// to every read, and that creating its id again frees what it held.
func TestExpiredWrites(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url+"?ttl=1h&sweep=-1s", nil)
	ctx := t.Context()
	clock := time.Now()
	redis.SetClock(s, func() time.Time { return clock })
	db := thread.New(s, &thread.Options{Now: func() time.Time { return clock }})
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("only a's")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	head := a.Record().Head
	clock = clock.Add(2 * time.Hour)
	now := clock.UTC()

	if e := errs(s.History(ctx, "a", thread.HistoryOptions{})); len(e) != 1 || !errors.Is(e[0], thread.ErrNotFound) {
		t.Errorf("history of an expired thread: %v", e)
	}
	if e := errs(s.Checkpoints(ctx, "a")); len(e) != 1 || !errors.Is(e[0], thread.ErrNotFound) {
		t.Errorf("checkpoints of an expired thread: %v", e)
	}
	for name, b := range map[string]*store.Batch{
		"move":            {Moves: []store.Move{{Thread: "a", From: a.Version(), Head: head, Op: thread.OpRestore, Time: now}}},
		"delete":          {Delete: []store.Deletion{{Thread: "a"}}},
		"drop checkpoint": {DropCheckpoints: []store.CheckpointKey{{Thread: "a", Name: "cp"}}},
		"checkpoint":      {Checkpoints: []thread.Checkpoint{{Thread: "a", Name: "cp2", Commit: head, Version: 1, CreatedAt: now}}},
	} {
		if err := s.Apply(ctx, b); !errors.Is(err, thread.ErrNotFound) {
			t.Errorf("%s on an expired thread: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := a.Append(ctx, message.User("revive")); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("append through an old handle: %v, want ErrNotFound", err)
	}
	// The id is free; the old thread's commits, reached by nothing else,
	// go with it.
	a2, err := db.Create(ctx, thread.CreateOptions{ID: "a"})
	if err != nil {
		t.Fatalf("create over an expired thread: %v", err)
	}
	if _, err := s.Commit(ctx, head); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("the expired thread's commit after its id was taken: %v", err)
	}
	if cps := errs(s.Checkpoints(ctx, "a")); len(cps) != 0 {
		t.Errorf("checkpoints of the new thread: %v", cps)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("sweep after the re-create: %d, %v", n, err)
	}
	if r, err := s.Thread(ctx, "a"); err != nil || r.Version != a2.Version() {
		t.Errorf("the new thread after the sweep: %v, %v", r, err)
	}
}

// TestRefusedBatchLeavesNothing checks that a refused batch leaves no listing entry and
// no deadline behind.
func TestRefusedBatchLeavesNothing(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url+"?ttl=1h&sweep=-1s", nil)
	ctx := t.Context()
	clock := time.Now()
	redis.SetClock(s, func() time.Time { return clock })
	db := thread.New(s, nil)
	x, err := db.Create(ctx, thread.CreateOptions{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	err = s.Apply(ctx, &store.Batch{Create: []store.Creation{{
		Record: &thread.Record{ID: "x", Tenant: "acme", Version: 1, CreatedAt: now, UpdatedAt: now}, Op: thread.OpCreate}}})
	if !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("create of an existing id: %v", err)
	}
	if ids, _ := s.Client().ZRange(ctx, "loom:l:=acme", 0, -1).Result(); len(ids) != 0 {
		t.Errorf("a refused create listed %q for its tenant", ids)
	}
	before, err := s.Client().ZScore(ctx, "loom:x", "x").Result()
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(30 * time.Minute)
	err = s.Apply(ctx, &store.Batch{Moves: []store.Move{{Thread: "x", From: x.Version() + 5, Op: thread.OpReset, Time: now}}})
	if !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("a move from the wrong version: %v", err)
	}
	if after, _ := s.Client().ZScore(ctx, "loom:x", "x").Result(); after != before {
		t.Errorf("a refused move moved the deadline from %v to %v", before, after)
	}
}

// TestGCCrash kills DB.GC at random moments while it prunes a long thread
// and deletes expired ones: each batch's script is atomic, so the threads
// stay whole, the reference counts match the references, and a later GC
// ends where one uninterrupted GC does.
func TestGCCrash(t *testing.T) {
	url := testserver.Redis(t)
	s := open(t, url, nil)
	proctest.GCCrash(t, url, proctest.GCOptions{Rounds: 4, Check: func(t *testing.T) {
		if err := redis.Consistent(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}})
}

// TestClusterPrune prunes a thread of a family with a fork in cluster mode
// (index keys written outside the script), on one server and on a real
// three-node cluster (the script touches only the family's slot): the
// versions go, the commits only they reached are freed with their index
// keys, the fork keeps what it shares, and the counts match the
// references.
func TestClusterPrune(t *testing.T) {
	t.Run("OneServer", func(t *testing.T) {
		clusterPrune(t, open(t, testserver.Redis(t)+"?prefix=cp", &redis.Options{Cluster: true}))
	})
	t.Run("Cluster", func(t *testing.T) {
		clusterPrune(t, open(t, startCluster(t, 3)+"&prefix=cp", nil))
	})
}

func clusterPrune(t *testing.T, s *redis.Store) {
	ctx := t.Context()
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("a0")}})
	if err != nil {
		t.Fatal(err)
	}
	start := a.Version()
	lost, err := a.Append(ctx, message.User("lost"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := a.Fork(ctx, thread.ForkOptions{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	abandoned, err := a.Append(ctx, message.User("abandoned"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(ctx, start); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := a.Append(ctx, message.User(fmt.Sprint("a", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.SetRetention(ctx, thread.Retention{KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	rep, err := db.GC(ctx, thread.GCOptions{})
	if err != nil || rep.Pruned != 1 {
		t.Fatalf("gc: %+v, %v", rep, err)
	}
	var vs []int64
	for e, err := range s.History(ctx, "a", thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, e.Version)
	}
	if want := []int64{a.Version(), a.Version() - 1}; !slices.Equal(vs, want) {
		t.Fatalf("history after gc: %v; want %v", vs, want)
	}
	if _, err := s.Commit(ctx, abandoned.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("the abandoned commit after gc: %v", err)
	}
	if n, _ := s.Client().Exists(ctx, "cp:c:"+abandoned.ID).Result(); n != 0 {
		t.Fatalf("the index key of the freed commit is left")
	}
	if _, err := s.Commit(ctx, lost.ID); err != nil {
		t.Fatalf("the commit the fork shares: %v", err)
	}
	if err := redis.Consistent(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, lost.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("the commit only the fork kept, after its delete: %v", err)
	}
	if err := redis.Consistent(ctx, s); err != nil {
		t.Fatal(err)
	}
	// Deleting the pruned thread lets go of what its kept versions and
	// checkpoints held: nothing of the family is left.
	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := redis.Consistent(ctx, s); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Client().Exists(ctx, "cp:{a}:m", "cp:{a}:n", "cp:{a}:c").Result(); err != nil || n != 0 {
		t.Fatalf("%d keys of the family's commits left after every thread is deleted (%v)", n, err)
	}
}
