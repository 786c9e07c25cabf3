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
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// fanOutGraph splits the workflow's input, a number n, into n parts sent
// to "summarize" (each on a sub-thread of its own), and fans them in to
// "combine"; with no part, split goes to combine itself. fail, when not
// nil, may fail an instance's attempt.
func fanOutGraph(fail func(instance, attempt int) error) *workflow.Graph {
	return workflow.NewGraph().
		Add("split", func(ctx context.Context, s *workflow.Step) (any, error) {
			var n int
			if err := s.DecodeInput(&n); err != nil {
				return nil, err
			}
			for i := range n {
				if err := s.Send("summarize", fmt.Sprintf("part %d", i)); err != nil {
					return nil, err
				}
			}
			if n == 0 {
				return "no parts", s.Goto("combine")
			}
			return fmt.Sprintf("%d parts", n), nil
		}, "summarize", "combine").
		Add("summarize", func(ctx context.Context, s *workflow.Step) (any, error) {
			i, ok := s.Instance()
			if !ok {
				return nil, errors.New("summarize runs only as an instance")
			}
			if fail != nil {
				if err := fail(i, s.Attempt()); err != nil {
					return nil, err
				}
			}
			var part string
			if err := s.DecodeInput(&part); err != nil {
				return nil, err
			}
			th, err := s.SubThread(ctx, fmt.Sprintf("sum-%d", i))
			if err != nil {
				return nil, err
			}
			if _, err := th.Append(ctx, message.Assistant("summary of "+part)); err != nil {
				return nil, err
			}
			return "summary of " + part, nil
		}, "combine").
		Add("combine", func(ctx context.Context, s *workflow.Step) (any, error) {
			var in struct{ Summarize []string }
			if err := s.DecodeInput(&in); err != nil {
				return nil, err
			}
			return len(in.Summarize), nil
		})
}

// A step sends 0, 1, 50 or 300 instances; they run, and the fan-in step
// runs once after them with all their outputs, in order. (300: the
// commit that ends the sender starts them all, and its metadata once
// named every start, past the 4 KB a metadata value may hold; a fan-out
// of more than about 150 failed.)
func TestSendFansOutAndIn(t *testing.T) {
	for _, n := range []int{0, 1, 50, 300} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := t.Context()
			w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{Input: n}))
			ex, err := w.Run(ctx, fanOutGraph(nil), nil)
			if err != nil || ex.Status != workflow.StatusDone {
				t.Fatalf("run: %v %+v", err, ex)
			}
			var combines []workflow.StepRun
			instances := 0
			for _, s := range ex.Steps {
				switch {
				case s.Name == "combine":
					combines = append(combines, s)
				case s.Name != "split":
					if want := fmt.Sprintf("2/summarize[%d]#1", instances); s.ID != want || s.Round != 2 || s.Status != workflow.StatusDone {
						t.Fatalf("instance %s %s, want %s", s.ID, s.Status, want)
					}
					instances++
				}
			}
			if instances != n || len(combines) != 1 {
				t.Fatalf("%d instances, %d combines", instances, len(combines))
			}
			c := combines[0]
			var want any = map[string]any{"split": "no parts"}
			if n > 0 {
				var outs []string
				for i := range n {
					outs = append(outs, fmt.Sprintf("summary of part %d", i))
				}
				want = map[string]any{"summarize": outs}
			}
			if wb, _ := json.Marshal(want); string(c.Input) != string(wb) || string(c.Output) != fmt.Sprint(n) {
				t.Fatalf("combine got %s, output %s; want %s", c.Input, c.Output, wb)
			}
			if n > 0 {
				split := ex.Steps[0]
				if len(split.Sends) != n || split.Sends[n-1].Task != fmt.Sprintf("summarize[%d]", n-1) || string(split.Sends[0].Input) != `"part 0"` {
					t.Fatalf("split's sends %+v", split.Sends)
				}
				if got := subTexts(t, w, fmt.Sprintf("sum-%d", n-1)); !slices.Equal(got, []string{fmt.Sprintf("summary of part %d", n-1)}) {
					t.Fatalf("the last instance's sub-thread: %q", got)
				}
			}
		})
	}
}

// Instances run concurrently.
func TestSendInstancesRunConcurrently(t *testing.T) {
	ctx := t.Context()
	var started sync.WaitGroup
	started.Add(3)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	g := fanOutGraph(func(int, int) error {
		started.Done()
		select {
		case <-all:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the other instances never ran beside this one")
		}
	})
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{Input: 3}))
	if ex, err := w.Run(ctx, g, nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run: %v", err)
	}
}

// An instance that failed runs again at the next Run, alone: the instances
// that ended are not run again.
func TestSendRunsAgainOnlyWhatDidNotEnd(t *testing.T) {
	ctx := t.Context()
	var calls atomic.Int32
	g := fanOutGraph(func(i, attempt int) error {
		calls.Add(1)
		if i == 7 && attempt == 1 {
			return errors.New("flaky")
		}
		return nil
	})
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{Input: 10}))
	_, err := w.Run(ctx, g, nil)
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "summarize[7]" {
		t.Fatalf("first run: %v", err)
	}
	ex, err := w.Run(ctx, g, nil)
	if err != nil || ex.Status != workflow.StatusDone || calls.Load() != 11 {
		t.Fatalf("second run: %v, %d calls", err, calls.Load())
	}
	if c := ex.Steps[len(ex.Steps)-1]; c.Name != "combine" || string(c.Output) != "10" {
		t.Fatalf("combine: %+v", c)
	}
	if ex.Steps[8].ID != "2/summarize[7]#1" || ex.Steps[8].Status != workflow.StatusFailed {
		t.Fatalf("steps %+v", ex.Steps[8])
	}
}

// A send to a step that is not a successor, or of an input that is not
// JSON, fails the sender.
func TestSendRefusals(t *testing.T) {
	ctx := t.Context()
	nop := func(context.Context, *workflow.Step) (any, error) { return nil, nil }
	for name, send := range map[string]func(*workflow.Step) error{
		"not a successor": func(s *workflow.Step) error { return s.Send("other", 1) },
		"not JSON":        func(s *workflow.Step) error { return s.Send("b", func() {}) },
	} {
		w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
		var sendErr error
		g := workflow.NewGraph().Add("a", func(ctx context.Context, s *workflow.Step) (any, error) {
			sendErr = send(s)
			return nil, nil
		}, "b").Add("b", nop).Add("other", nop).Start("a")
		ex, err := w.Run(ctx, g, nil)
		var se *workflow.StepError
		if !errors.Is(sendErr, thread.ErrInvalid) || !errors.As(err, &se) || se.Step != "a" || ex.Status != workflow.StatusFailed {
			t.Errorf("%s: send %v, run %v", name, sendErr, err)
		}
	}
}

// A step both chosen and sent to in one round runs as itself and as each
// instance; the fan-in gets its own output first, then the instances'.
func TestSendBesideGoto(t *testing.T) {
	ctx := t.Context()
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	g := workflow.NewGraph().
		Add("a", func(ctx context.Context, s *workflow.Step) (any, error) {
			s.Send("b", "x")
			s.Send("b", "y")
			return nil, s.Goto("b")
		}, "b").
		Add("b", func(ctx context.Context, s *workflow.Step) (any, error) {
			if _, ok := s.Instance(); !ok {
				return "as itself", nil
			}
			return s.Input(), nil
		}, "c").
		Add("c", func(ctx context.Context, s *workflow.Step) (any, error) { return s.Input(), nil })
	ex, err := w.Run(ctx, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ended(ex); !slices.Equal(got, []string{"1/a", "2/b", "2/b[0]", "2/b[1]", "3/c"}) {
		t.Fatalf("steps %v", got)
	}
	if c := ex.Steps[len(ex.Steps)-1]; string(c.Output) != `{"b":["as itself","x","y"]}` {
		t.Fatalf("c got %s", c.Output)
	}
}

// A fan-out of more instances than one commit starts ahead of their calls
// (1,000): the rest start by commits of their own, and all fan in.
func TestSendMoreThanOneCommitStarts(t *testing.T) {
	const n = 1001
	ctx := t.Context()
	g := workflow.NewGraph().
		Add("split", func(ctx context.Context, s *workflow.Step) (any, error) {
			for i := range n {
				if err := s.Send("part", i); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}, "part").
		Add("part", func(ctx context.Context, s *workflow.Step) (any, error) { return s.Input(), nil }, "join").
		Add("join", func(ctx context.Context, s *workflow.Step) (any, error) {
			var in struct{ Part []int }
			if err := s.DecodeInput(&in); err != nil {
				return nil, err
			}
			sum := 0
			for _, v := range in.Part {
				sum += v
			}
			return sum, nil
		})
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{}))
	ex, err := w.Run(ctx, g, nil)
	if err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run: %v %+v", err, ex)
	}
	if out := lastRun(ex, "join").Output; string(out) != fmt.Sprint(n*(n-1)/2) {
		t.Fatalf("join's output %s, want the sum of 0..%d", out, n-1)
	}
	if len(ex.Steps) != n+2 {
		t.Fatalf("%d step records, want %d", len(ex.Steps), n+2)
	}
}
