package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

func memDB(t *testing.T) *thread.DB {
	t.Helper()
	db, err := thread.Open(t.Context(), "memory://", nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func texts(msgs []message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

func subTexts(t *testing.T, w *workflow.Workflow, key string) []string {
	t.Helper()
	sub, err := w.SubThread(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sub.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return texts(msgs)
}

// appendStep is a step that appends a line to its own sub-thread and
// outputs it.
func appendStep(key, line string) workflow.StepFunc {
	return func(ctx context.Context, s *workflow.Step) (any, error) {
		th, err := s.SubThread(ctx, key)
		if err != nil {
			return nil, err
		}
		if _, err := th.Append(ctx, message.Assistant(line)); err != nil {
			return nil, err
		}
		return line, nil
	}
}

// names returns the steps that ended, as round/name.
func ended(ex *workflow.Execution) []string {
	var out []string
	for _, s := range ex.Steps {
		if s.Status == workflow.StatusDone {
			out = append(out, fmt.Sprintf("%d/%s", s.Round, s.Name))
		}
	}
	return out
}

// A sequence, a fan-out whose steps run at the same time on their own
// sub-threads, and a fan-in that gets both outputs.
func TestSequenceFanOutFanIn(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "trip", Title: "trip", Input: map[string]string{"city": "Paris"}}))
	// a and b each wait until the other has started: they run concurrently
	// or the test times out.
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	meet := func(key string) workflow.StepFunc {
		return func(ctx context.Context, s *workflow.Step) (any, error) {
			started.Done()
			select {
			case <-both:
			case <-time.After(10 * time.Second):
				return nil, errors.New("the other branch never ran beside this one")
			}
			return appendStep(key, key+" found "+string(s.Input()))(ctx, s)
		}
	}
	var writerInput json.RawMessage
	g := workflow.NewGraph().
		Add("plan", func(ctx context.Context, s *workflow.Step) (any, error) {
			var in struct{ City string }
			if err := s.DecodeInput(&in); err != nil || in.City != "Paris" {
				return nil, fmt.Errorf("the workflow's input: %s, %v", s.Input(), err)
			}
			return appendStep(workflow.MainKey, "plan")(ctx, s)
		}, "a", "b").
		Add("a", meet("a"), "write").
		Add("b", meet("b"), "write").
		Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
			writerInput = s.Input()
			out, _ := s.Output("a")
			return appendStep(workflow.MainKey, "wrote from "+string(out))(ctx, s)
		})
	ex, err := w.Run(ctx, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != workflow.StatusDone || ex.Runner != nil {
		t.Fatalf("status %s, runner %v", ex.Status, ex.Runner)
	}
	if got, want := ended(ex), []string{"1/plan", "2/a", "2/b", "3/write"}; !slices.Equal(sortedTail(got, 1, 3), want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	var in map[string]string
	if err := json.Unmarshal(writerInput, &in); err != nil || in["a"] != `a found {"plan":"plan"}` || in["b"] != `b found {"plan":"plan"}` {
		t.Fatalf("writer's input %s (%v)", writerInput, err)
	}
	if got := subTexts(t, w, workflow.MainKey); !slices.Equal(got, []string{"plan", `wrote from "a found {\"plan\":\"plan\"}"`}) {
		t.Fatalf("main: %q", got)
	}
	if got := subTexts(t, w, "a"); len(got) != 1 {
		t.Fatalf("a: %q", got)
	}
	if keys := w.SubThreadKeys(); !slices.Equal(keys, []string{"a", "b", "main"}) {
		t.Fatalf("sub-threads %v", keys)
	}
	// Each sub-thread is recorded at its head.
	for _, st := range ex.SubThreads {
		sub := must[*thread.Thread](t)(w.SubThread(ctx, st.Key))
		if sub.Version() != st.Version || sub.Record().Head != st.Head {
			t.Fatalf("sub-thread %s recorded at %d/%s, is at %d/%s", st.Key, st.Version, st.Head, sub.Version(), sub.Record().Head)
		}
	}
	// A done workflow runs nothing more.
	again, err := w.Run(ctx, g, nil)
	if err != nil || again.Version != ex.Version {
		t.Fatalf("run of a done workflow: version %d → %d, %v", ex.Version, again.Version, err)
	}
}

// sortedTail sorts s[i:j] (steps of one round end in any order).
func sortedTail(s []string, i, j int) []string {
	s = slices.Clone(s)
	if j <= len(s) {
		slices.Sort(s[i:j])
	}
	return s
}

// A step chooses which of its successors runs.
func TestConditionalNext(t *testing.T) {
	ctx := t.Context()
	for _, pick := range []string{"left", "right"} {
		w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{Input: pick}))
		g := workflow.NewGraph().
			Add("route", func(ctx context.Context, s *workflow.Step) (any, error) {
				var p string
				if err := s.DecodeInput(&p); err != nil {
					return nil, err
				}
				return nil, s.Goto(p)
			}, "left", "right").
			Add("left", appendStep("main", "left")).
			Add("right", appendStep("main", "right"))
		ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil))
		if got := ended(ex); !slices.Equal(got, []string{"1/route", "2/" + pick}) {
			t.Fatalf("picked %s: ran %v", pick, got)
		}
	}
	// A successor that was not declared fails the step.
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	g := workflow.NewGraph().Add("route", func(ctx context.Context, s *workflow.Step) (any, error) {
		s.Goto("nowhere")
		return nil, nil
	}, "left").Add("left", appendStep("main", "left"))
	ex, err := w.Run(ctx, g, nil)
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "route" || !errors.Is(err, thread.ErrInvalid) && !strings.Contains(err.Error(), "nowhere") || ex.Status != workflow.StatusFailed {
		t.Fatalf("goto nowhere: %v, %+v", err, ex)
	}
}

// Declarations that cannot run are refused, and change nothing.
func TestGraphErrors(t *testing.T) {
	ctx := t.Context()
	nop := func(context.Context, *workflow.Step) (any, error) { return nil, nil }
	for name, g := range map[string]*workflow.Graph{
		"empty":              workflow.NewGraph(),
		"unknown successor":  workflow.NewGraph().Add("a", nop, "b"),
		"twice":              workflow.NewGraph().Add("a", nop).Add("a", nop),
		"bad name":           workflow.NewGraph().Add("a b", nop),
		"nil func":           workflow.NewGraph().Add("a", nil),
		"unknown start":      workflow.NewGraph().Add("a", nop).Start("z"),
		"no start (a cycle)": workflow.NewGraph().Add("a", nop, "b").Add("b", nop, "a"),
	} {
		w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
		v := w.Version()
		_, err := w.Run(ctx, g, nil)
		if !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if w.Refresh(ctx); w.Version() != v {
			t.Errorf("%s: the workflow moved", name)
		}
	}
	// Cycles are loops, which a Run bounds (see loop_test.go).
	if err := workflow.NewGraph().Add("a", nop, "b").Add("b", nop, "c").Add("c", nop, "a").Add("s", nop, "a").Check(); err != nil {
		t.Errorf("a cycle: %v", err)
	}
	if err := workflow.NewGraph().Add("a", nop, "a").Check(); !errors.Is(err, thread.ErrInvalid) || !strings.Contains(err.Error(), "Start") {
		t.Errorf("a loop without a start: %v", err)
	}
	// A graph that lacks a step the workflow is at.
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	if _, err := w.Run(ctx, workflow.NewGraph().Add("a", func(ctx context.Context, s *workflow.Step) (any, error) {
		_, err := s.Ask("ok?")
		return nil, err
	}, "b").Add("b", nop), nil); err != nil {
		t.Fatal(err)
	}
	v := w.Version()
	if _, err := w.Run(ctx, workflow.NewGraph().Add("x", nop), nil); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("a graph without the workflow's steps: %v", err)
	}
	if w.Refresh(ctx); w.Version() != v {
		t.Fatal("the workflow moved")
	}
}

func TestSubThreads(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf", SubThreads: []string{"researcher"}}))
	if keys := w.SubThreadKeys(); !slices.Equal(keys, []string{"main", "researcher"}) {
		t.Fatalf("keys %v", keys)
	}
	sub := must[*thread.Thread](t)(w.CreateSubThread(ctx, "writer", workflow.SubThreadOptions{}))
	if sub.ID() != "wf.writer" || sub.Record().ForkedFrom.Thread != "wf" || sub.Record().Labels[workflow.LabelWorkflow] != "wf" {
		t.Fatalf("sub-thread %s: %+v", sub.ID(), sub.Record())
	}
	v := w.Version()
	for key, want := range map[string]error{"writer": thread.ErrConflict, "main": thread.ErrConflict, "a.b": thread.ErrInvalid, "": thread.ErrInvalid, strings.Repeat("k", 33): thread.ErrInvalid, "a/b": thread.ErrInvalid} {
		if _, err := w.CreateSubThread(ctx, key, workflow.SubThreadOptions{}); !errors.Is(err, want) {
			t.Errorf("create sub-thread %q: %v, want %v", key, err, want)
		}
	}
	if err := w.DeleteSubThread(ctx, "main"); !errors.Is(err, thread.ErrInvalid) {
		t.Errorf("delete main: %v", err)
	}
	if err := w.DeleteSubThread(ctx, "nobody"); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("delete nobody: %v", err)
	}
	if w.Version() != v {
		t.Fatal("refused calls moved the workflow")
	}
	// Agents use a sub-thread as any thread.
	a := agent.New(scripted.New(scripted.Text("hello")), nil)
	if _, err := a.Run(ctx, sub, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteSubThread(ctx, "writer"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Thread(ctx, "wf.writer"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("deleted sub-thread: %v", err)
	}
	if _, err := w.SubThread(ctx, "writer"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("deleted sub-thread's key: %v", err)
	}
	// Open, list, delete.
	if _, err := workflow.Open(ctx, db, "wf.main"); !errors.Is(err, workflow.ErrNotWorkflow) {
		t.Fatalf("open a sub-thread as a workflow: %v", err)
	}
	must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf2"}))
	if _, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf2"}); !errors.Is(err, thread.ErrConflict) {
		t.Fatalf("create a workflow twice: %v", err)
	}
	var ids []string
	for w, err := range workflow.List(ctx, db, thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID())
	}
	if !slices.Equal(ids, []string{"wf", "wf2"}) {
		t.Fatalf("list: %v", ids)
	}
	if err := workflow.Delete(ctx, db, "wf"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wf", "wf.main", "wf.researcher"} {
		if _, err := db.Thread(ctx, id); !errors.Is(err, thread.ErrNotFound) {
			t.Errorf("%s after delete: %v", id, err)
		}
	}
}

// A run cut short in the middle of a step (here by its context) runs the
// step again at the next Run, from its sub-thread as it was before.
func TestResumeRunsAnUnfinishedStepAgain(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf"}))
	var firstRuns, slowRuns atomic.Int32
	runCtx, cancel := context.WithCancel(ctx)
	g := workflow.NewGraph().
		Add("first", func(ctx context.Context, s *workflow.Step) (any, error) {
			firstRuns.Add(1)
			return appendStep("main", "first")(ctx, s)
		}, "slow").
		Add("slow", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "main")
			if err != nil {
				return nil, err
			}
			if _, err := th.Append(ctx, message.Assistant(fmt.Sprintf("slow, attempt %d", s.Attempt()))); err != nil {
				return nil, err
			}
			if slowRuns.Add(1) == 1 {
				cancel()
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return "slow done", nil
		})
	_, err := w.Run(runCtx, g, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cut short: %v", err)
	}
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	if ex.Status != workflow.StatusRunning || ex.Runner != nil || !slices.Equal(ex.Current, []string{"slow"}) {
		t.Fatalf("after the cut: %+v", ex)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"first", "slow, attempt 1"}) {
		t.Fatalf("main after the cut: %q", got)
	}
	ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone || firstRuns.Load() != 1 || slowRuns.Load() != 2 {
		t.Fatalf("resumed: %s, first ran %d, slow ran %d", ex.Status, firstRuns.Load(), slowRuns.Load())
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"first", "slow, attempt 2"}) {
		t.Fatalf("main after the resume: %q", got)
	}
	var statuses []string
	for _, s := range ex.Steps {
		statuses = append(statuses, s.ID+" "+string(s.Status))
	}
	if !slices.Equal(statuses, []string{"1/first#1 done", "2/slow#1 interrupted", "2/slow#2 done"}) {
		t.Fatalf("steps: %v", statuses)
	}
}

// A failed step fails the workflow; the next Run runs it again.
func TestFailedStepRunsAgain(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	var n atomic.Int32
	g := workflow.NewGraph().Add("flaky", func(ctx context.Context, s *workflow.Step) (any, error) {
		if n.Add(1) == 1 {
			return nil, errors.New("the service is down")
		}
		return "ok", nil
	})
	ex, err := w.Run(ctx, g, nil)
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "flaky" || ex.Status != workflow.StatusFailed || !strings.Contains(ex.Error, "the service is down") {
		t.Fatalf("failed run: %v, %+v", err, ex)
	}
	ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone || ex.Error != "" || len(ex.Steps) != 2 || ex.Steps[0].Status != workflow.StatusFailed {
		t.Fatalf("second run: %+v", ex)
	}
	// A panic is a failure too.
	w = must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	_, err = w.Run(ctx, workflow.NewGraph().Add("boom", func(context.Context, *workflow.Step) (any, error) { panic("boom") }), nil)
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "panic: boom") {
		t.Fatalf("panic: %v", err)
	}
}
