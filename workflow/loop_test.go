package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// loopGraph is a writer and a reviewer passing a draft back and forth on
// the writer's sub-thread: the reviewer approves the draft approve says
// (0: none yet), and the approved draft goes to "final". seen gets each
// input the writer got.
func loopGraph(approve *atomic.Int32, seen func(json.RawMessage)) *workflow.Graph {
	return workflow.NewGraph().
		Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
			if seen != nil {
				seen(s.Input())
			}
			th, err := s.SubThread(ctx, "writer")
			if err != nil {
				return nil, err
			}
			n := (s.Round() + 1) / 2
			draft := fmt.Sprintf("draft %d", n)
			if _, err := th.Append(ctx, message.Assistant(draft)); err != nil {
				return nil, err
			}
			return draft, nil
		}, "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			var in struct{ Write string }
			if err := s.DecodeInput(&in); err != nil {
				return nil, err
			}
			if a := approve.Load(); a > 0 && in.Write == fmt.Sprintf("draft %d", a) {
				return "approved " + in.Write, s.Goto("final")
			}
			return "notes on " + in.Write, s.Goto("write")
		}, "write", "final").
		Add("final", appendStep(workflow.MainKey, "published")).
		Start("write")
}

// A writer ↔ reviewer loop runs until the reviewer approves the third
// draft; each round the writer gets the reviewer's latest notes.
func TestLoopEndsByCondition(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{ID: "essay", Input: "a topic"}))
	var approve atomic.Int32
	approve.Store(3)
	var mu sync.Mutex
	var inputs []string
	ex, err := w.Run(ctx, loopGraph(&approve, func(in json.RawMessage) {
		mu.Lock()
		inputs = append(inputs, string(in))
		mu.Unlock()
	}), nil)
	if err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run: %v, %+v", err, ex)
	}
	want := []string{"1/write", "2/review", "3/write", "4/review", "5/write", "6/review", "7/final"}
	if got := ended(ex); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if want := []string{`"a topic"`, `{"review":"notes on draft 1"}`, `{"review":"notes on draft 2"}`}; !slices.Equal(inputs, want) {
		t.Fatalf("the writer's inputs %q, want %q", inputs, want)
	}
	if got := subTexts(t, w, "writer"); !slices.Equal(got, []string{"draft 1", "draft 2", "draft 3"}) {
		t.Fatalf("writer: %q", got)
	}
	if got := ex.Steps[len(ex.Steps)-1].Input; string(got) != `{"review":"approved draft 3"}` {
		t.Fatalf("final's input %s", got)
	}
}

// A loop that never ends stops at the run's limit, resumably: a later Run
// goes on from where it stopped, nothing run twice, and ends once the
// condition can be met.
func TestLoopStopsAtTheStepLimit(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{ID: "essay"}))
	var approve atomic.Int32 // never, for now
	g := loopGraph(&approve, nil)
	ex, err := w.Run(ctx, g, &workflow.RunOptions{MaxRounds: 5})
	var le *workflow.StepLimitError
	if !errors.As(err, &le) || !errors.Is(err, workflow.ErrStepLimit) || !errors.Is(err, thread.ErrConflict) || le.Limit != 5 || le.Round != 6 {
		t.Fatalf("run: %v", err)
	}
	if ex.Status != workflow.StatusRunning || ex.Runner != nil || ex.Round != 6 || !slices.Equal(ex.Current, []string{"review"}) || len(ex.Steps) != 5 {
		t.Fatalf("stopped at %+v", ex)
	}
	if got := ended(ex); !slices.Equal(got, []string{"1/write", "2/review", "3/write", "4/review", "5/write"}) {
		t.Fatalf("steps %v", got)
	}
	// The lease went: another handle runs it at once, and again stops.
	other := must[*workflow.Workflow](t)(workflow.Open(ctx, w.DB(), "essay"))
	if _, err := other.Run(ctx, g, &workflow.RunOptions{MaxRounds: 2}); !errors.As(err, &le) || le.Round != 8 {
		t.Fatalf("second run: %v", err)
	}
	approve.Store(5)
	ex, err = w.Run(ctx, g, &workflow.RunOptions{MaxRounds: 50})
	if err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("third run: %v %+v", err, ex)
	}
	want := []string{"1/write", "2/review", "3/write", "4/review", "5/write", "6/review", "7/write", "8/review", "9/write", "10/review", "11/final"}
	if got := ended(ex); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	for _, s := range ex.Steps {
		if s.Status != workflow.StatusDone || s.Attempt != 1 {
			t.Fatalf("step %s %s: nothing runs twice", s.ID, s.Status)
		}
	}
	if got := subTexts(t, w, "writer"); len(got) != 5 {
		t.Fatalf("writer: %q", got)
	}
}

// Without MaxRounds a Run stops after DefaultMaxRounds; a negative limit is
// refused.
func TestDefaultStepLimit(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	nop := func(context.Context, *workflow.Step) (any, error) { return nil, nil }
	g := workflow.NewGraph().Add("a", nop, "a").Start("a")
	if _, err := w.Run(ctx, g, &workflow.RunOptions{MaxRounds: -1}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("negative limit: %v", err)
	}
	ex, err := w.Run(ctx, g, nil)
	var le *workflow.StepLimitError
	if !errors.As(err, &le) || le.Limit != workflow.DefaultMaxRounds || ex.Round != workflow.DefaultMaxRounds+1 {
		t.Fatalf("run: %v, round %d", err, ex.Round)
	}
}
