package thread_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// A group that only drops a checkpoint drops it, and a name dropped and
// added in one group moves to the head as one change.
func TestGroupDropCheckpoint(t *testing.T) {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := th.Append(ctx, message.User("one"))
	if _, err := th.Checkpoint(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	second, _ := th.Append(ctx, message.User("two"))

	g := db.Group()
	if err := g.DropCheckpoint(ctx, th, "a"); err != nil {
		t.Fatal(err)
	}
	if err := g.Checkpoint(ctx, th, "a"); err != nil {
		t.Fatal(err)
	}
	if err := g.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	cps := checkpoints(t, th)
	if len(cps) != 1 || cps[0].Commit != second.ID || cps[0].Commit == first.ID {
		t.Fatalf("checkpoints %+v, want a at %s", cps, second.ID)
	}

	g = db.Group()
	if err := g.DropCheckpoint(ctx, th, "a"); err != nil {
		t.Fatal(err)
	}
	if err := g.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if cps := checkpoints(t, th); len(cps) != 0 {
		t.Fatalf("checkpoints after the drop: %+v", cps)
	}
	g = db.Group()
	g.DropCheckpoint(ctx, th, "a")
	if err := g.Apply(ctx); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("dropping a missing checkpoint: %v", err)
	}
}

// A Reset and a commit in one group start the thread again from the empty
// root, in one history entry.
func TestGroupResetThenCommit(t *testing.T) {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{ID: "t", State: map[string]json.RawMessage{"k": json.RawMessage(`1`)}})
	th.Append(ctx, message.User("old"))
	v := th.Version()
	g := db.Group()
	if err := g.Reset(ctx, th); err != nil {
		t.Fatal(err)
	}
	c, err := g.Commit(ctx, th, thread.CommitOptions{Messages: []message.Message{message.User("new")}, State: map[string]json.RawMessage{"j": json.RawMessage(`2`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Parent != "" || th.Version() != v+1 {
		t.Fatalf("commit parent %q, version %d after %d", c.Parent, th.Version(), v)
	}
	msgs, _ := th.Messages(ctx, thread.ReadOptions{})
	st, _ := th.State(ctx, 0)
	if len(msgs) != 1 || msgs[0].Text() != "new" || len(st) != 1 || string(st["j"]) != "2" {
		t.Fatalf("messages %v, state %v", msgs, st)
	}
}

// Copy with Checkpoints takes the source's checkpoint names, and the copy
// rolls back to them after the source is gone.
func TestCopyWithCheckpoints(t *testing.T) {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{ID: "src"})
	th.Append(ctx, message.User("one"))
	th.Checkpoint(ctx, "first")
	th.Append(ctx, message.User("two"))
	cp, err := th.Copy(ctx, thread.ForkOptions{ID: "dst", Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cp.Rollback(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	msgs, _ := cp.Messages(ctx, thread.ReadOptions{})
	if len(msgs) != 1 || msgs[0].Text() != "one" {
		t.Fatalf("the copy rolled back holds %v", msgs)
	}
	plain, _ := cp.Copy(ctx, thread.ForkOptions{ID: "plain"})
	if cps := checkpoints(t, plain); len(cps) != 0 {
		t.Fatalf("a copy without Checkpoints has %v", cps)
	}
}

func checkpoints(t *testing.T, th *thread.Thread) []thread.Checkpoint {
	t.Helper()
	var out []thread.Checkpoint
	for cp, err := range th.Checkpoints(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cp)
	}
	return out
}
