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

// TestApplyPlansAgain has another process change a thread between the
// read of a batch's facts and its script: the script writes nothing on
// the old facts, and the batch is planned again on the new ones, whose
// verdict decides (a move from the old version is a conflict; a
// checkpoint, which no version decides, is written).
func TestApplyPlansAgain(t *testing.T) {
	url := testserver.Redis(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := t.Context()
	dbB := thread.New(b, nil)
	th, err := thread.New(a, nil).Create(ctx, thread.CreateOptions{ID: "t", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	meddle := func() {
		redis.SetHook(a, func(stage string) {
			if stage == "script" {
				redis.SetHook(a, nil)
				other, err := dbB.Thread(ctx, "t")
				if err == nil {
					_, err = other.Append(ctx, message.User("meanwhile"))
				}
				if err != nil {
					t.Errorf("the other writer: %v", err)
				}
			}
		})
	}
	now := time.Now().UTC()
	meddle()
	err = a.Apply(ctx, &store.Batch{Moves: []store.Move{{Thread: "t", From: th.Version(), Head: th.Record().Head, Op: thread.OpRestore, Time: now}}})
	if !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("a move from a version that moved on: %v, want ErrConflict", err)
	}
	meddle()
	err = a.Apply(ctx, &store.Batch{Checkpoints: []thread.Checkpoint{{Thread: "t", Name: "cp", Commit: th.Record().Head, Version: th.Version(), CreatedAt: now}}})
	if err != nil {
		t.Fatalf("a checkpoint while the thread moved: %v", err)
	}
	r, err := a.Thread(ctx, "t")
	if err != nil || r.Version != th.Version()+2 {
		t.Fatalf("thread after the other writer's two appends: %+v, %v", r, err)
	}
	n := 0
	for cp, err := range a.Checkpoints(ctx, "t") {
		if err != nil || cp.Name != "cp" || cp.Commit != th.Record().Head {
			t.Fatalf("checkpoint %+v, %v", cp, err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d checkpoints, want 1", n)
	}
	// The references the plans counted add up: once the thread is reset
	// and deleted, nothing keeps its commits.
	other, err := dbB.Thread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dbB.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, th.Record().Head); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("a commit nothing keeps after the delete: %v", err)
	}
}

// recordKeys returns the record keys of thread id in every family.
func recordKeys(t *testing.T, s *redis.Store, id string) []string {
	t.Helper()
	keys, err := s.Client().Keys(t.Context(), s.Prefix()+":{*}:r:"+id).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
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
