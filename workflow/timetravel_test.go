package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// reviewGraph drafts on sub-thread "writer", asks a person to approve, and
// publishes on main.
func reviewGraph(drafts *atomic.Int32) *workflow.Graph {
	return workflow.NewGraph().
		Add("draft", func(ctx context.Context, s *workflow.Step) (any, error) {
			drafts.Add(1)
			return appendStep("writer", "draft")(ctx, s)
		}, "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "writer")
			if err != nil {
				return nil, err
			}
			// Written before asking: undone while the step waits, and
			// written again when it runs with the answer.
			if _, err := th.Append(ctx, message.Assistant("asking for review")); err != nil {
				return nil, err
			}
			answer, err := s.Ask(map[string]string{"question": "publish the draft?"})
			if err != nil {
				return nil, err
			}
			var ok bool
			if err := json.Unmarshal(answer, &ok); err != nil {
				return nil, err
			}
			if !ok {
				return nil, s.Goto()
			}
			return "approved", nil
		}, "publish").
		Add("publish", appendStep("main", "published"))
}

func TestHumanInTheLoop(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "post"}))
	var drafts atomic.Int32
	g := reviewGraph(&drafts)
	ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusWaiting || len(ex.Waiting) != 1 || ex.Waiting[0].Step != "review" || string(ex.Waiting[0].Prompt) != `{"question":"publish the draft?"}` || ex.Runner != nil {
		t.Fatalf("waiting: %+v", ex)
	}
	// Run again before the input: nothing to do, nothing written.
	v := w.Version()
	if ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil)); ex.Status != workflow.StatusWaiting || ex.Version != v {
		t.Fatalf("run while waiting: %s at %d, was %d", ex.Status, ex.Version, v)
	}
	// Input for a step that is not waiting changes nothing.
	for _, step := range []string{"draft", "publish", "nobody"} {
		if err := w.Provide(ctx, step, true); !errors.Is(err, workflow.ErrNotWaiting) || !errors.Is(err, thread.ErrConflict) {
			t.Fatalf("input for %s: %v", step, err)
		}
	}
	if err := w.Provide(ctx, "review", func() {}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("input that is not JSON: %v", err)
	}
	if w.Refresh(ctx); w.Version() != v {
		t.Fatal("refused input moved the workflow")
	}
	// Another handle (another process would do the same) gives the input.
	other := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "post"))
	if err := other.Provide(ctx, "review", true); err != nil {
		t.Fatal(err)
	}
	if err := other.Provide(ctx, "review", true); !errors.Is(err, workflow.ErrNotWaiting) {
		t.Fatalf("input given twice: %v", err)
	}
	ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone || drafts.Load() != 1 {
		t.Fatalf("after the input: %s, %d drafts", ex.Status, drafts.Load())
	}
	if got := subTexts(t, w, "writer"); !slices.Equal(got, []string{"draft", "asking for review"}) {
		t.Fatalf("writer: %q", got)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"published"}) {
		t.Fatalf("main: %q", got)
	}
	last := ex.Steps[len(ex.Steps)-2]
	if last.Name != "review" || string(last.Answer) != "true" || last.Attempt != 2 {
		t.Fatalf("the review's second attempt: %+v", last)
	}
}

func TestCheckpointRestoreFork(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "post"}))
	var drafts atomic.Int32
	g := reviewGraph(&drafts)
	must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	cp := must[thread.Checkpoint](t)(w.Checkpoint(ctx, "before-review"))
	if _, err := w.Checkpoint(ctx, "before-review"); !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("a checkpoint name taken: %v", err)
	}
	atCP := must[*workflow.Snapshot](t)(w.At(ctx, workflow.Point{Checkpoint: "before-review"}, workflow.AtOptions{}))
	// The checkpoint holds a sub-thread that the waiting step wrote to as
	// it was before the step, where the step starts again from.
	if atCP.Status != workflow.StatusWaiting || !slices.Equal(texts(atCP.Messages["writer"]), []string{"draft"}) || atCP.Version != cp.Version {
		t.Fatalf("at the checkpoint: %+v %q", atCP.Execution, texts(atCP.Messages["writer"]))
	}
	// and gives it no checkpoint of its own.
	writer := must[*thread.Thread](t)(w.SubThread(ctx, "writer"))
	if err := writer.Rollback(ctx, "before-review"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("the sub-thread's own checkpoint: %v", err)
	}

	must[any](t)(nil, w.Provide(ctx, "review", true))
	must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if _, err := w.SubThread(ctx, "extra"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatal(err)
	}
	extra := must[*thread.Thread](t)(w.CreateSubThread(ctx, "extra", workflow.SubThreadOptions{}))
	must[*thread.Commit](t)(extra.Append(ctx, message.User("made after the checkpoint")))
	done := must[*workflow.Execution](t)(w.Execution(ctx, 0))

	// A fork at the checkpoint, taken on with another answer.
	f := must[*workflow.Workflow](t)(w.Fork(ctx, workflow.Point{Checkpoint: "before-review"}, workflow.ForkOptions{ID: "post-rejected"}))
	if keys := f.SubThreadKeys(); !slices.Equal(keys, []string{"main", "writer"}) {
		t.Fatalf("fork's sub-threads: %v", keys)
	}
	fw := must[*thread.Thread](t)(f.SubThread(ctx, "writer"))
	if fw.ID() != "post-rejected.writer" || fw.Record().ForkedFrom.Thread != "post.writer" {
		t.Fatalf("fork's writer: %+v", fw.Record())
	}
	must[any](t)(nil, f.Provide(ctx, "review", false))
	fex := must[*workflow.Execution](t)(f.Run(ctx, g, nil))
	if fex.Status != workflow.StatusDone || slices.Contains(ended(fex), "4/publish") {
		t.Fatalf("the fork: %+v", ended(fex))
	}
	if got := subTexts(t, f, "main"); len(got) != 0 {
		t.Fatalf("the fork published: %q", got)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"published"}) {
		t.Fatalf("the source after the fork ran: %q", got)
	}
	if ex := must[*workflow.Execution](t)(w.Execution(ctx, 0)); ex.Version != done.Version {
		t.Fatal("the fork's run moved the source")
	}

	// Restore the source to the checkpoint: every sub-thread goes back, and
	// the one made after it is emptied.
	must[any](t)(nil, w.Restore(ctx, workflow.Point{Checkpoint: "before-review"}))
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	if ex.Status != workflow.StatusWaiting || !slices.Equal(ex.Current, []string{"review"}) {
		t.Fatalf("restored: %+v", ex)
	}
	for key, want := range map[string][]string{"main": {}, "writer": {"draft"}, "extra": {}} {
		th := must[*thread.Thread](t)(db.Thread(ctx, "post."+key))
		if got := texts(must[[]message.Message](t)(th.Messages(ctx, thread.ReadOptions{}))); !slices.Equal(got, want) {
			t.Fatalf("%s after restore: %q, want %q", key, got, want)
		}
	}
	// The fork is untouched by the restore.
	if got := subTexts(t, f, "writer"); !slices.Equal(got, []string{"draft", "asking for review"}) {
		t.Fatalf("fork's writer after the source's restore: %q", got)
	}
	// And forward again to where it was done, by version.
	must[any](t)(nil, w.Restore(ctx, workflow.Point{Version: done.Version}))
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"published"}) {
		t.Fatalf("main restored forward: %q", got)
	}
	if ex := must[*workflow.Execution](t)(w.Execution(ctx, 0)); ex.Status != workflow.StatusDone {
		t.Fatalf("restored forward: %s", ex.Status)
	}
	// With no step writing, a checkpoint gives each sub-thread with
	// messages a checkpoint of its own.
	must[thread.Checkpoint](t)(w.Checkpoint(ctx, "final"))
	for _, key := range []string{"writer", "main"} {
		sub := must[*thread.Thread](t)(w.SubThread(ctx, key))
		if err := sub.Rollback(ctx, "final"); err != nil {
			t.Fatalf("%s's own checkpoint: %v", key, err)
		}
	}
	// Time travel reads every version.
	var versions []int64
	for e, err := range w.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, e.Version)
	}
	for _, v := range versions {
		s, err := w.At(ctx, workflow.Point{Version: v}, workflow.AtOptions{Last: 10})
		if err != nil {
			t.Fatalf("at version %d: %v", v, err)
		}
		if s.Version != v || len(s.Messages) != len(s.SubThreads) {
			t.Fatalf("at version %d: %+v", v, s.Execution)
		}
	}

	// Restores that cannot be: a checkpoint or version that does not
	// exist, another workflow's checkpoint name, a deleted sub-thread.
	v := w.Version()
	for _, p := range []workflow.Point{{Checkpoint: "nope"}, {Version: 999}, {Checkpoint: "x", Version: 1}} {
		if err := w.Restore(ctx, p); !errors.Is(err, thread.ErrNotFound) && !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("restore to %v: %v", p, err)
		}
	}
	must[thread.Checkpoint](t)(f.Checkpoint(ctx, "only-in-the-fork"))
	if err := w.Restore(ctx, workflow.Point{Checkpoint: "only-in-the-fork"}); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("restore to another workflow's checkpoint: %v", err)
	}
	must[any](t)(nil, w.DeleteSubThread(ctx, "extra"))
	v = w.Version()
	if err := w.Restore(ctx, workflow.Point{Version: v - 1}); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("restore to a point with a deleted sub-thread: %v", err)
	}
	if w.Refresh(ctx); w.Version() != v {
		t.Fatal("refused restores moved the workflow")
	}
}

// Two runners on one workflow: one runs it, the other is refused (or, with
// Wait, waits), and no step ends twice.
func TestTwoRunners(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf"}))
	var runs sync.Map
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	count := func(name string) workflow.StepFunc {
		return func(ctx context.Context, s *workflow.Step) (any, error) {
			n, _ := runs.LoadOrStore(name, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			if name == "a" {
				entered <- struct{}{}
				<-release
			}
			return name, nil
		}
	}
	g := workflow.NewGraph().Add("a", count("a"), "b").Add("b", count("b"))
	first := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "wf"))
	second := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "wf"))
	errs := make(chan error, 1)
	go func() { _, err := first.Run(ctx, g, nil); errs <- err }()
	<-entered
	if _, err := second.Run(ctx, g, nil); !errors.Is(err, workflow.ErrBusy) || !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("a second runner: %v", err)
	}
	if err := second.Restore(ctx, workflow.Point{Version: 1}); !errors.Is(err, workflow.ErrBusy) {
		t.Fatalf("restore under a runner: %v", err)
	}
	waited := make(chan *workflow.Execution, 1)
	go func() {
		ex, err := second.Run(ctx, g, &workflow.RunOptions{Wait: true})
		if err != nil {
			t.Error(err)
		}
		waited <- ex
	}()
	close(release)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if ex := <-waited; ex == nil || ex.Status != workflow.StatusDone {
		t.Fatalf("the waiting runner: %+v", ex)
	}
	for _, name := range []string{"a", "b"} {
		if n, _ := runs.Load(name); n.(*atomic.Int32).Load() != 1 {
			t.Fatalf("%s ran %d times", name, n.(*atomic.Int32).Load())
		}
	}
}

// A runner whose workflow is restored under it (its lease had run out)
// stops with ErrConflict, without recording the step it was in.
func TestRunnerStopsWhenTheWorkflowMoves(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf"}))
	in, out := make(chan struct{}), make(chan struct{})
	g := workflow.NewGraph().Add("a", func(ctx context.Context, s *workflow.Step) (any, error) {
		close(in)
		<-out
		return "a", nil
	})
	errs := make(chan error, 1)
	// A lease that has run out as soon as it is taken.
	go func() {
		_, err := w.Run(ctx, g, &workflow.RunOptions{LeaseTTL: 1, Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		errs <- err
	}()
	<-in
	other := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "wf"))
	must[any](t)(nil, other.Restore(ctx, workflow.Point{Version: 1}))
	close(out)
	if err := <-errs; !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("the runner under a restore: %v", err)
	}
	ex := must[*workflow.Execution](t)(other.Execution(ctx, 0))
	if ex.Status != workflow.StatusPending || len(ex.Steps) != 0 {
		t.Fatalf("after the restore: %+v", ex)
	}
}

// Agents run at once on their own sub-threads of one workflow, and never
// conflict: each sub-thread holds exactly its agent's conversation.
func TestConcurrentAgentsOnSubThreads(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "team"}))
	const n = 8
	g := workflow.NewGraph()
	var names []string
	for i := range n {
		name := fmt.Sprintf("agent%d", i)
		names = append(names, name)
		a := agent.New(scripted.New(scripted.Text(name+" answers")), nil)
		g.Add(name, func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, name)
			if err != nil {
				return nil, err
			}
			res, err := a.Run(ctx, th, message.User("question for "+name))
			if err != nil {
				return nil, err
			}
			return res.Text(), nil
		})
	}
	g.Add("start", func(context.Context, *workflow.Step) (any, error) { return nil, nil }, names...)
	ex, err := w.Run(ctx, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != workflow.StatusDone || len(ended(ex)) != n+1 {
		t.Fatalf("%s, ended %v", ex.Status, ended(ex))
	}
	for _, name := range names {
		if got := subTexts(t, w, name); !slices.Equal(got, []string{"question for " + name, name + " answers"}) {
			t.Fatalf("%s: %q", name, got)
		}
	}
}

// A step of a round waits while another of the round runs on: the
// workflow waits once that one has ended, and goes on when the input is
// given.
func TestWaitingBesideARunningStep(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	asked := make(chan struct{})
	g := workflow.NewGraph().
		Add("start", func(context.Context, *workflow.Step) (any, error) { return nil, nil }, "ask", "slow").
		Add("ask", func(ctx context.Context, s *workflow.Step) (any, error) {
			answer, err := s.Ask("ok?")
			if err != nil {
				close(asked)
				return nil, err
			}
			return answer, nil
		}, "end").
		Add("slow", func(ctx context.Context, s *workflow.Step) (any, error) {
			<-asked // ends after ask has asked
			return "slow", nil
		}, "end").
		Add("end", func(ctx context.Context, s *workflow.Step) (any, error) { return s.Input(), nil })
	ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusWaiting || !slices.Equal(ex.Completed, []string{"slow"}) || ex.Runner != nil {
		t.Fatalf("after the round: %+v", ex)
	}
	must[any](t)(nil, w.Provide(ctx, "ask", "yes"))
	ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone {
		t.Fatalf("after the input: %+v", ex)
	}
	last := ex.Steps[len(ex.Steps)-1]
	if last.Name != "end" || string(last.Output) != `{"ask":"yes","slow":"slow"}` {
		t.Fatalf("end: %+v", last)
	}
}

// Two steps of a round share a sub-thread: one ends, the other is cut
// short and runs again; what the ended one wrote stays.
func TestSharedSubThreadKeepsWhatEnded(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	runCtx, cancel := context.WithCancel(ctx)
	bEnded := make(chan struct{})
	var aRuns atomic.Int32
	g := workflow.NewGraph().
		Add("start", func(context.Context, *workflow.Step) (any, error) { return nil, nil }, "a", "b").
		Add("a", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "main")
			if err != nil {
				return nil, err
			}
			if aRuns.Add(1) == 1 {
				<-bEnded
				if !testwait.Within(10*time.Second, func() bool {
					s.Workflow().Refresh(ctx)
					ex, _ := s.Workflow().Execution(ctx, 0)
					return slices.Contains(ex.Completed, "b")
				}) {
					return nil, errors.New("b never completed")
				}
				if _, err := th.Append(ctx, message.Assistant("a, cut short")); err != nil {
					return nil, err
				}
				cancel()
				<-ctx.Done()
				return nil, ctx.Err()
			}
			_, err = th.Append(ctx, message.Assistant("a"))
			return "a", err
		}).
		Add("b", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "main")
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant("b"))
			close(bEnded)
			return "b", err
		})
	if _, err := w.Run(runCtx, g, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut short: %v", err)
	}
	ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone {
		t.Fatalf("%+v", ex)
	}
	got := subTexts(t, w, "main")
	if !slices.Contains(got, "b") || slices.Contains(got, "a, cut short") || !slices.Contains(got, "a") {
		t.Fatalf("main: %q", got)
	}
}

// A restore to a version made while a runner ran brings back no lease:
// the workflow runs on from there at once, from any handle.
func TestRestoreBringsBackNoLease(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf"}))
	g := workflow.NewGraph().Add("a", appendStep("main", "a"), "b").Add("b", appendStep("main", "b"))
	must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	mid := must[*workflow.Execution](t)(w.Execution(ctx, 4))
	if mid.Runner == nil {
		t.Fatalf("version 4 was made by the runner: %+v", mid)
	}
	must[any](t)(nil, w.Restore(ctx, workflow.Point{Version: 4}))
	if ex := must[*workflow.Execution](t)(w.Execution(ctx, 0)); ex.Runner != nil {
		t.Fatalf("a lease came back: %+v", ex.Runner)
	}
	must[thread.Checkpoint](t)(w.Checkpoint(ctx, "after-restore"))
	other := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "wf"))
	if ex, err := other.Run(ctx, g, nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run after the restore: %v", err)
	}
	if got := subTexts(t, other, "main"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("main: %q", got)
	}
}

// A checkpoint taken from another handle while a runner works succeeds
// without moving the workflow under the runner; it records the workflow
// as of its last step end, and restoring it and running again ends as the
// first run did.
func TestCheckpointBesideARunner(t *testing.T) {
	for _, store := range []string{"memory", "sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			url := "memory://"
			switch store {
			case "sqlite":
				url = "sqlite://" + filepath.Join(t.TempDir(), "wf.db")
			case "postgres":
				url = testserver.Postgres(t)
			}
			db, err := thread.Open(t.Context(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			checkpointBesideARunner(t, db)
		})
	}
}

func checkpointBesideARunner(t *testing.T, db *thread.DB) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf"}))
	inB, outB := make(chan struct{}), make(chan struct{})
	blocked := true
	g := workflow.NewGraph().
		Add("a", appendStep(workflow.MainKey, "a on main"), "b").
		Add("b", func(ctx context.Context, s *workflow.Step) (any, error) {
			out, err := appendStep("writer", "b on writer")(ctx, s)
			if blocked {
				// Written, not yet ended: the checkpoint is taken now.
				blocked = false
				close(inB)
				<-outB
			}
			return out, err
		}, "c").
		Add("c", appendStep(workflow.MainKey, "c on main"))
	errs := make(chan error, 1)
	go func() { _, err := w.Run(ctx, g, nil); errs <- err }()
	<-inB
	other := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "wf"))
	cp, err := other.Checkpoint(ctx, "mid-run")
	if err != nil {
		t.Fatalf("checkpoint beside the runner: %v", err)
	}
	if _, err := other.Checkpoint(ctx, "mid-run"); !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("a name taken: %v", err)
	}
	close(outB)
	if err := <-errs; err != nil {
		t.Fatalf("the runner: %v", err)
	}
	first := outcome(t, w)
	if cp.Version >= w.Version() {
		t.Fatalf("checkpoint at version %d, the run ended at %d", cp.Version, w.Version())
	}
	// Each sub-thread at its version as of a's end: main holds a's line,
	// writer nothing (b had not ended); only main has a checkpoint.
	ex := must[*workflow.Execution](t)(w.Execution(ctx, cp.Version))
	if len(ex.Completed) != 0 || ex.Round != 2 || ex.Runner == nil {
		t.Fatalf("the checkpoint's execution: %+v", ex)
	}
	for _, key := range []string{"main", "writer"} {
		sub := must[*thread.Thread](t)(w.SubThread(ctx, key))
		has := false
		for c, err := range sub.Checkpoints(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			has = has || c.Name == "mid-run"
		}
		if has != (key == "main") {
			t.Fatalf("sub-thread %s has a checkpoint: %v", key, has)
		}
	}
	must[any](t)(nil, w.Restore(ctx, workflow.Point{Checkpoint: "mid-run"}))
	if got := subTexts(t, w, "writer"); len(got) != 0 {
		t.Fatalf("writer after the restore: %q", got)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"a on main"}) {
		t.Fatalf("main after the restore: %q", got)
	}
	if ex, err := w.Run(ctx, g, nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run again: %v", err)
	}
	if again := outcome(t, w); again != first {
		t.Fatalf("after restore and run:\n%s\nwant, as the first run:\n%s", again, first)
	}
}
