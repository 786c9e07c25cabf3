package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/internal/wftest"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

func TestRegistry(t *testing.T) {
	r := workflow.NewRegistry()
	if err := r.Register("approval", approvalGraph(), &workflow.RegisterOptions{Title: "an approval", SubThreads: []string{"notes"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("approval", approvalGraph(), nil); !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("a name registered twice: %v", err)
	}
	for _, bad := range []string{"", "a b", "-x", "a/b", string(make([]byte, 33))} {
		if err := r.Register(bad, approvalGraph(), nil); !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("name %q: %v", bad, err)
		}
	}
	if err := r.Register("nil", nil, nil); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("no graph: %v", err)
	}
	if err := r.Register("broken", workflow.NewGraph().Add("a", nil, "nowhere"), nil); err == nil {
		t.Fatal("a graph that fails its check was registered")
	}
	if err := r.Register("b-2", workflow.NewGraph().Add("a", func(context.Context, *workflow.Step) (any, error) { return nil, nil }), nil); err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"approval", "b-2"}) {
		t.Fatalf("names: %q", got)
	}
	if _, err := r.Lookup("nobody"); !errors.Is(err, workflow.ErrUnknown) || !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("lookup of an unknown name: %v", err)
	}
	ctx := t.Context()
	db := openDB(t, "memory://")
	w, err := r.Create(ctx, db, "approval", workflow.CreateOptions{ID: "a1", Labels: map[string]string{"team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := w.Thread().Record()
	if rec.Title != "an approval" || rec.Labels[workflow.LabelName] != "approval" || rec.Labels["team"] != "x" || !slices.Equal(w.SubThreadKeys(), []string{"main", "notes"}) {
		t.Fatalf("created: %+v %q", rec, w.SubThreadKeys())
	}
	if d, err := r.Of(w); err != nil || d.Name != "approval" {
		t.Fatalf("of: %+v %v", d, err)
	}
	plain, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Of(plain); !errors.Is(err, workflow.ErrUnknown) {
		t.Fatalf("of a workflow not started by name: %v", err)
	}
	if _, err := workflow.NewRegistry().Of(w); !errors.Is(err, workflow.ErrUnknown) {
		t.Fatalf("of a name another registry has: %v", err)
	}
}

func TestRunnerStartsAndResumes(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, "memory://")
	reg := workflow.NewRegistry()
	if err := reg.Register("approval", approvalGraph(), nil); err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	entered := make(chan struct{}, 1)
	blocking := workflow.NewGraph().Add("wait", func(ctx context.Context, s *workflow.Step) (any, error) {
		entered <- struct{}{}
		select {
		case <-block:
			return "ok", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	if err := reg.Register("blocking", blocking, nil); err != nil {
		t.Fatal(err)
	}
	rn := workflow.NewRunner(reg, nil)
	t.Cleanup(func() { rn.Close() })

	if _, err := rn.Start(ctx, db, "nobody", workflow.CreateOptions{}); !errors.Is(err, workflow.ErrUnknown) {
		t.Fatalf("start of an unknown name: %v", err)
	}
	w, err := rn.Start(ctx, db, "approval", workflow.CreateOptions{ID: "post", Input: map[string]string{"topic": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rn.Start(ctx, db, "approval", workflow.CreateOptions{ID: "post"}); !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("an id taken: %v", err)
	}
	if st := wftest.Settle(t, db, w.ID()); st != workflow.StatusWaiting {
		t.Fatalf("status %s, want waiting", st)
	}
	if err := w.Provide(ctx, "review", true); err != nil {
		t.Fatal(err)
	}
	if _, err := rn.Resume(ctx, db, "post"); err != nil {
		t.Fatal(err)
	}
	if st := wftest.Settle(t, db, w.ID()); st != workflow.StatusDone {
		t.Fatalf("status %s, want done", st)
	}
	// Done: a resume runs nothing.
	if w, err := rn.Resume(ctx, db, "post"); err != nil || w.Status() != workflow.StatusDone {
		t.Fatalf("resume of a done workflow: %v", err)
	}
	if _, err := rn.Resume(ctx, db, "nobody"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("resume of a missing workflow: %v", err)
	}
	if _, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: "plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rn.Resume(ctx, db, "plain"); !errors.Is(err, workflow.ErrUnknown) {
		t.Fatalf("resume of a workflow not started by name: %v", err)
	}

	// A run under way is busy; Close cancels it and lets its lease go; a
	// new runner resumes it.
	if _, err := rn.Start(ctx, db, "blocking", workflow.CreateOptions{ID: "long"}); err != nil {
		t.Fatal(err)
	}
	<-entered
	if _, err := rn.Resume(ctx, db, "long"); !errors.Is(err, workflow.ErrBusy) {
		t.Fatalf("resume of a workflow being run: %v", err)
	}
	other := workflow.NewRunner(reg, nil)
	t.Cleanup(func() { other.Close() })
	if _, err := other.Resume(ctx, db, "long"); !errors.Is(err, workflow.ErrBusy) {
		t.Fatalf("resume by another runner of a workflow being run: %v", err)
	}
	rn.Close()
	if rn.Running(db, "long") {
		t.Fatal("still running after Close")
	}
	if _, err := rn.Start(ctx, db, "approval", workflow.CreateOptions{}); !errors.Is(err, workflow.ErrClosed) {
		t.Fatalf("start after close: %v", err)
	}
	if _, err := other.Resume(ctx, db, "long"); err != nil {
		t.Fatalf("resume after the first runner closed: %v", err)
	}
	<-entered
	close(block)
	if st := wftest.Settle(t, db, "long"); st != workflow.StatusDone {
		t.Fatalf("status %s, want done", st)
	}
}

// An edit through the Runner answers for a step its run just left
// waiting, as soon as the workflow says so, and a resume runs on from it.
// (Runner.Update waits for its own run to let the workflow go rather than
// answer ErrBusy; that window is too short for this test to hit at will.)
func TestRunnerUpdateAnswersAWaitingStep(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, "memory://")
	reg := workflow.NewRegistry()
	if err := reg.Register("approval", approvalGraph(), nil); err != nil {
		t.Fatal(err)
	}
	rn := workflow.NewRunner(reg, nil)
	t.Cleanup(func() { rn.Close() })
	for i := range 10 {
		id := fmt.Sprintf("post%d", i)
		if _, err := rn.Start(ctx, db, "approval", workflow.CreateOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 10*time.Second, "the review waits", func() bool {
			w, err := workflow.Open(ctx, db, id)
			return err == nil && w.Status() == workflow.StatusWaiting
		})
		w, err := rn.Update(ctx, db, id, workflow.Point{}, workflow.Update{By: "ann", Outputs: map[string]any{"review": "yes"}})
		if err != nil {
			t.Fatalf("%s: the edit: %v", id, err)
		}
		if w.Status() != workflow.StatusRunning {
			t.Fatalf("%s after the edit: %s", id, w.Status())
		}
		if _, err := rn.Resume(ctx, db, id); err != nil {
			t.Fatal(err)
		}
		if st := wftest.Settle(t, db, id); st != workflow.StatusDone {
			t.Fatalf("%s: status %s, want done", id, st)
		}
	}
}
