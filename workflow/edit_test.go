package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// threeSteps is a → b → c, each appending a line to main; b and c output
// their input with a mark.
func threeSteps() *workflow.Graph {
	pass := func(mark string) workflow.StepFunc {
		return func(ctx context.Context, s *workflow.Step) (any, error) {
			if _, err := appendStep(workflow.MainKey, mark)(ctx, s); err != nil {
				return nil, err
			}
			return mark + " of " + string(s.Input()), nil
		}
	}
	return workflow.NewGraph().Add("a", pass("a"), "b").Add("b", pass("b"), "c").Add("c", pass("c"))
}

// versionWhere returns the first version of w at which cond holds.
func versionWhere(t *testing.T, w *workflow.Workflow, cond func(*workflow.Execution) bool) int64 {
	t.Helper()
	for v := int64(1); v <= w.Version(); v++ {
		if cond(must[*workflow.Execution](t)(w.Execution(t.Context(), v))) {
			return v
		}
	}
	t.Fatal("no such version")
	return 0
}

func stepDone(name string) func(*workflow.Execution) bool {
	return func(ex *workflow.Execution) bool {
		return slices.ContainsFunc(ex.Steps, func(s workflow.StepRun) bool { return s.Name == name && s.Status == workflow.StatusDone })
	}
}

func lastRun(ex *workflow.Execution, name string) workflow.StepRun {
	for i := len(ex.Steps) - 1; i >= 0; i-- {
		if s := ex.Steps[i]; s.Name == name && s.Status == workflow.StatusDone {
			return s
		}
	}
	return workflow.StepRun{}
}

// A person sets step b's output at the version after b ended, in the
// past of a workflow that is done; the next Run goes on from there, and c
// gets the edited output.
func TestUpdateOutputInThePast(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf", Input: "in"}))
	if _, err := w.Run(ctx, threeSteps(), nil); err != nil {
		t.Fatal(err)
	}
	done := w.Version()
	at := versionWhere(t, w, stepDone("b"))
	u := workflow.Update{By: "alice", Outputs: map[string]any{"b": "b, edited"}}
	must[any](t)(nil, w.Update(ctx, workflow.Point{Version: at}, u))
	if w.Version() != done+1 {
		t.Fatalf("the edit is one version: %d after %d", w.Version(), done)
	}
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	if ex.Status != workflow.StatusRunning || ex.Round != 3 || len(ex.Edits) != 1 || ex.Edits[0].By != "alice" || !slices.Equal(ex.Edits[0].Outputs, []string{"b"}) || ex.Edits[0].Version != w.Version() {
		t.Fatalf("after the edit: %+v", ex)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("main moved back to b's end: %q", got)
	}
	cm, err := db.Store().Commit(ctx, w.Thread().Record().Head)
	if err != nil || cm.Metadata["author"] != "alice" {
		t.Fatalf("the edit's commit: %+v, %v", cm, err)
	}
	ex, err = w.Run(ctx, threeSteps(), nil)
	if err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run after the edit: %v", err)
	}
	// What Run returns is what a read returns, edits and all.
	if got, want := must[[]byte](t)(json.Marshal(ex)), must[[]byte](t)(json.Marshal(must[*workflow.Execution](t)(w.Execution(ctx, 0)))); string(got) != string(want) {
		t.Fatalf("Run returned\n%s\na read returns\n%s", got, want)
	}
	c := lastRun(ex, "c")
	if string(c.Input) != `{"b":"b, edited"}` || string(c.Output) != `"c of {\"b\":\"b, edited\"}"` {
		t.Fatalf("c got %s, output %s", c.Input, c.Output)
	}
	b := lastRun(ex, "b")
	if b.ID != "2/b#1/edit1" || b.EditedBy != "alice" || string(b.Output) != `"b, edited"` {
		t.Fatalf("b as edited: %+v", b)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("main: %q", got)
	}
	// Nothing before the edit ran again: a and b ended once.
	if got := ended(ex); !slices.Equal(got, []string{"1/a", "2/b", "2/b", "3/c"}) {
		t.Fatalf("steps %v", got)
	}
}

// The same edit on a fork leaves the original as it was.
func TestUpdateAFork(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{ID: "wf", Input: "in"}))
	if _, err := w.Run(ctx, threeSteps(), nil); err != nil {
		t.Fatal(err)
	}
	before, v := outcome(t, w), w.Version()
	f := must[*workflow.Workflow](t)(w.Fork(ctx, workflow.Point{Version: versionWhere(t, w, stepDone("b"))}, workflow.ForkOptions{ID: "wf2"}))
	must[any](t)(nil, f.Update(ctx, workflow.Point{}, workflow.Update{By: "bob", Outputs: map[string]any{"b": "forked b"}}))
	ex, err := f.Run(ctx, threeSteps(), nil)
	if err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run the fork: %v", err)
	}
	if c := lastRun(ex, "c"); string(c.Input) != `{"b":"forked b"}` {
		t.Fatalf("c in the fork got %s", c.Input)
	}
	if after := outcome(t, w); after != before || w.Version() != v {
		t.Fatalf("the original changed:\n%s\nwas:\n%s", after, before)
	}
}

// An edit sets the input of a workflow that has not run, or which steps
// run next (skipping one, or ending the workflow).
func TestUpdateInputAndNext(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf", Input: "in"}))
	must[any](t)(nil, w.Update(ctx, workflow.Point{}, workflow.Update{By: "carol", Input: "other"}))
	ex := must[*workflow.Execution](t)(w.Run(ctx, threeSteps(), nil))
	if a := lastRun(ex, "a"); string(a.Input) != `"other"` {
		t.Fatalf("a got %s", a.Input)
	}
	// After a: skip b.
	must[any](t)(nil, w.Update(ctx, workflow.Point{Version: versionWhere(t, w, stepDone("a"))}, workflow.Update{By: "carol", Next: []string{"c"}}))
	ex = must[*workflow.Execution](t)(w.Run(ctx, threeSteps(), nil))
	if got := ended(ex); !slices.Equal(got, []string{"1/a", "3/c"}) || string(lastRun(ex, "c").Input) != `{"a":"a of \"other\""}` {
		t.Fatalf("skipping b: %v, c got %s", got, lastRun(ex, "c").Input)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("main: %q", got)
	}
	// After a again: end there.
	must[any](t)(nil, w.Update(ctx, workflow.Point{Version: versionWhere(t, w, stepDone("a"))}, workflow.Update{By: "carol", Next: []string{}}))
	if ex := must[*workflow.Execution](t)(w.Execution(ctx, 0)); ex.Status != workflow.StatusDone || !ex.Edits[len(ex.Edits)-1].Ended {
		t.Fatalf("ended: %+v", ex)
	}
	// A step the graph does not declare is refused by the run.
	must[any](t)(nil, w.Update(ctx, workflow.Point{}, workflow.Update{By: "carol", Next: []string{"zz"}}))
	if _, err := w.Run(ctx, threeSteps(), nil); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("run at an undeclared step: %v", err)
	}
}

// Edits that cannot be made are refused and change nothing: without an
// author, with nothing to set, of a step that has not ended, with a value
// that is not JSON, or while a runner holds the workflow.
func TestUpdateRefusals(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf"}))
	for name, u := range map[string]workflow.Update{
		"no author":      {Outputs: map[string]any{"a": 1}},
		"nothing":        {By: "x"},
		"not ended":      {By: "x", Outputs: map[string]any{"a": 1}},
		"not JSON":       {By: "x", Input: func() {}},
		"bad next":       {By: "x", Next: []string{"a b"}},
		"bad next index": {By: "x", Next: []string{"a[01]"}},
	} {
		v := w.Version()
		if err := w.Update(ctx, workflow.Point{}, u); !errors.Is(err, thread.ErrInvalid) || w.Version() != v {
			t.Errorf("%s: %v", name, err)
		}
	}
	in, out := make(chan struct{}), make(chan struct{})
	g := workflow.NewGraph().Add("a", func(ctx context.Context, s *workflow.Step) (any, error) {
		close(in)
		<-out
		return nil, nil
	})
	errs := make(chan error, 1)
	go func() { _, err := w.Run(ctx, g, nil); errs <- err }()
	<-in
	other := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "wf"))
	if err := other.Update(ctx, workflow.Point{}, workflow.Update{By: "x", Input: 1}); !errors.Is(err, workflow.ErrBusy) {
		t.Errorf("under a runner: %v", err)
	}
	close(out)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// A person answers for a step that waits (LangGraph's update_state with
// as_node): the step ends with that output, never runs, and the next Run
// goes on to its declared successor, which gets it as input.
func TestUpdateEndsAWaitingStep(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "post"}))
	var gotInput json.RawMessage
	g := workflow.NewGraph().
		Add("draft", appendStep("writer", "draft"), "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "writer")
			if err != nil {
				return nil, err
			}
			if _, err := th.Append(ctx, message.Assistant("asking for review")); err != nil {
				return nil, err
			}
			return s.Ask("publish the draft?")
		}, "publish").
		Add("publish", func(ctx context.Context, s *workflow.Step) (any, error) {
			gotInput = s.Input()
			if s.Attempt() == 1 {
				// Its input is made again, by a Run that has only the
				// records to go on.
				return nil, errors.New("not yet")
			}
			return appendStep("main", "published")(ctx, s)
		})
	if ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil)); ex.Status != workflow.StatusWaiting {
		t.Fatalf("before the edit: %+v", ex)
	}
	must[any](t)(nil, w.Update(ctx, workflow.Point{}, workflow.Update{By: "ann", Outputs: map[string]any{"review": "approved by ann"}}))
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	if ex.Status != workflow.StatusRunning || len(ex.Waiting) != 0 || !slices.Equal(ex.Completed, []string{"review"}) {
		t.Fatalf("after the edit: %+v", ex)
	}
	rec := lastRun(ex, "review")
	if rec.EditedBy != "ann" || string(rec.Output) != `"approved by ann"` {
		t.Fatalf("review's record: %+v", rec)
	}
	if _, err := w.Run(ctx, g, nil); err == nil || string(gotInput) != `{"review":"approved by ann"}` {
		t.Fatalf("publish's first attempt: %v, input %s", err, gotInput)
	}
	gotInput = nil
	w = must[*workflow.Workflow](t)(workflow.Open(ctx, db, "post"))
	ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone {
		t.Fatalf("after the run: %+v", ex)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"published"}) {
		t.Fatalf("main: %q", got)
	}
	if string(gotInput) != `{"review":"approved by ann"}` {
		t.Fatalf("publish got %s, want review's edited output", gotInput)
	}
	// The waiting step never ran again, and what it wrote before asking
	// is not there.
	if got := subTexts(t, w, "writer"); !slices.Equal(got, []string{"draft"}) {
		t.Fatalf("writer: %q", got)
	}
	for _, s := range ex.Steps {
		if s.Name == "review" && s.Status == workflow.StatusRunning {
			t.Fatalf("review ran after the edit: %+v", s)
		}
	}
	// One event says the review ended, though the run restated its record
	// with the successors it follows.
	var reviewDone int
	for _, ev := range collect(t, w, workflow.EventsOptions{NoFollow: true}) {
		if ev.Kind == workflow.EventStepDone && ev.Step.Name == "review" {
			reviewDone++
			if ev.Step.EditedBy != "ann" {
				t.Errorf("review's done event: %+v", ev.Step)
			}
		}
	}
	if reviewDone != 1 {
		t.Fatalf("%d step_done events for review, want 1", reviewDone)
	}
}

// A step that failed is ended by an edit of its output: the failure is
// cleared, and the next Run goes on to its successor with that output.
func TestUpdateEndsAFailedStep(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf", Input: "in"}))
	var calls atomic.Int32
	pass := func(mark string) workflow.StepFunc {
		return func(ctx context.Context, s *workflow.Step) (any, error) {
			if _, err := appendStep(workflow.MainKey, mark)(ctx, s); err != nil {
				return nil, err
			}
			return mark + " of " + string(s.Input()), nil
		}
	}
	g := workflow.NewGraph().Add("a", pass("a"), "b").Add("b", func(ctx context.Context, s *workflow.Step) (any, error) {
		calls.Add(1)
		if _, err := appendStep(workflow.MainKey, "b half")(ctx, s); err != nil {
			return nil, err
		}
		return nil, errors.New("the service is down")
	}, "c").Add("c", pass("c"))
	if _, err := w.Run(ctx, g, nil); err == nil {
		t.Fatal("b did not fail")
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"a", "b half"}) {
		t.Fatalf("main after the failure: %q", got)
	}
	must[any](t)(nil, w.Update(ctx, workflow.Point{}, workflow.Update{By: "bob", Outputs: map[string]any{"b": "b by hand"}}))
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	if ex.Status != workflow.StatusRunning || ex.Error != "" {
		t.Fatalf("after the edit: %+v", ex)
	}
	if got := subTexts(t, w, "main"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("main after the edit (what the failed step wrote moves back): %q", got)
	}
	ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone || calls.Load() != 1 {
		t.Fatalf("after the run: %+v, b called %d times", ex, calls.Load())
	}
	if out := lastRun(ex, "c").Output; string(out) != `"c of {\"b\":\"b by hand\"}"` {
		t.Fatalf("c's output %s, want made of b's edited output", out)
	}
}

// Two steps of a round failed; an edit ends the one the workflow's error
// names: the error is now the other's, which still failed.
func TestUpdateEndsOneOfTwoFailedSteps(t *testing.T) {
	ctx := t.Context()
	fail := func(ctx context.Context, s *workflow.Step) (any, error) {
		return nil, errors.New(s.Name() + " is broken")
	}
	g := workflow.NewGraph().Add("a", fail).Add("b", fail).Start("a", "b")
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	if _, err := w.Run(ctx, g, nil); err == nil {
		t.Fatal("the steps did not fail")
	}
	ex := must[*workflow.Execution](t)(w.Execution(ctx, 0))
	named, other := "a", "b"
	if strings.HasPrefix(ex.Error, "step b: ") {
		named, other = "b", "a"
	}
	must[any](t)(nil, w.Update(ctx, workflow.Point{}, workflow.Update{By: "ann", Outputs: map[string]any{named: "fixed"}}))
	ex = must[*workflow.Execution](t)(w.Execution(ctx, 0))
	if want := "step " + other + ": " + other + " is broken"; ex.Status != workflow.StatusFailed || ex.Error != want {
		t.Fatalf("after ending %s: %s %q, want failed %q", named, ex.Status, ex.Error, want)
	}
}
