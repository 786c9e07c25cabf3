package redis_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// recordKeys returns the record keys of thread id in every family.
func recordKeys(t *testing.T, s *redis.Store, id string) []string {
	t.Helper()
	keys, err := s.Client().Keys(t.Context(), s.Prefix()+":{*}:r:"+id).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
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

// TestCreateRace has another process create thread X while a fork named X
// waits to run its script in another family: exactly one of them may win.
func TestCreateRace(t *testing.T) {
	url := testserver.Redis(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := t.Context()
	dbA, dbB := thread.New(a, nil), thread.New(b, nil)
	src, err := dbA.Create(ctx, thread.CreateOptions{ID: "src", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	var errB error
	redis.SetHook(a, func(stage string) {
		if stage == "script" {
			redis.SetHook(a, nil)
			_, errB = dbB.Create(ctx, thread.CreateOptions{ID: "X"})
		}
	})
	_, errA := src.Fork(ctx, thread.ForkOptions{ID: "X"})
	if errB != nil {
		t.Fatalf("the create that ran first: %v", errB)
	}
	if !errors.Is(errA, thread.ErrConflict) {
		t.Fatalf("the fork that ran second: %v, want ErrConflict", errA)
	}
	if keys := recordKeys(t, a, "X"); len(keys) != 1 || keys[0] != "loom:{X}:r:X" {
		t.Fatalf("records of X: %q", keys)
	}
}

// TestDeleteRecreateRace re-creates a thread between a delete's script and
// its cleanup: the new thread stays findable and listed.
func TestDeleteRecreateRace(t *testing.T) {
	url := testserver.Redis(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := t.Context()
	dbA, dbB := thread.New(a, nil), thread.New(b, nil)
	if _, err := dbA.Create(ctx, thread.CreateOptions{ID: "X"}); err != nil {
		t.Fatal(err)
	}
	redis.SetHook(a, func(stage string) {
		if stage == "cleanup" {
			redis.SetHook(a, nil)
			if _, err := dbB.Create(ctx, thread.CreateOptions{ID: "X"}); err != nil {
				t.Errorf("create X again: %v", err)
			}
		}
	})
	if err := dbA.Delete(ctx, "X"); err != nil {
		t.Fatal(err)
	}
	c := open(t, url, nil) // no cached families
	if _, err := c.Thread(ctx, "X"); err != nil {
		t.Fatalf("the re-created thread after the delete's cleanup: %v", err)
	}
	var listed []string
	for r, err := range c.Threads(ctx, thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, r.ID)
	}
	if !slices.Equal(listed, []string{"X"}) {
		t.Fatalf("listed %q, want [X]", listed)
	}
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

// TestNoLeftovers checks that a refused batch leaves no listing entry and
// no deadline behind.
func TestNoLeftovers(t *testing.T) {
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
