package workflow_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// A fan-out of two steps on their own sub-threads, fanned in by a third
// that gets both outputs.
func Example() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	w, _ := workflow.Create(ctx, db, workflow.CreateOptions{ID: "trip", Input: "Lisbon"})

	research := func(topic string) workflow.StepFunc {
		return func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, topic) // made on first use
			if err != nil {
				return nil, err
			}
			var city string
			s.DecodeInput(&city)
			_, err = th.Append(ctx, message.Assistant(topic+" in "+city+": found"))
			return topic + " found", err
		}
	}
	g := workflow.NewGraph().
		Add("hotels", research("hotels"), "write").
		Add("food", research("food"), "write").
		Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
			return "written from " + string(s.Input()), nil
		})
	ex, err := w.Run(ctx, g, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ex.Status, strings.Join(w.SubThreadKeys(), ","))
	fmt.Println(string(ex.Steps[len(ex.Steps)-1].Output))
	// Output:
	// done food,hotels,main
	// "written from {\"food\":\"food found\",\"hotels\":\"hotels found\"}"
}

// A step asks for input; the workflow waits, durably, until it is given.
func ExampleStep_Ask() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	w, _ := workflow.Create(ctx, db, workflow.CreateOptions{ID: "refund"})
	g := workflow.NewGraph().Add("approve", func(ctx context.Context, s *workflow.Step) (any, error) {
		answer, err := s.Ask("refund 40 EUR?")
		if err != nil {
			return nil, err // workflow.ErrWaiting: the workflow waits
		}
		return "approved: " + string(answer), nil
	})
	ex, _ := w.Run(ctx, g, nil)
	fmt.Println(ex.Status, ex.Waiting[0].Step, string(ex.Waiting[0].Prompt))

	w.Provide(ctx, "approve", "yes") // from any process
	ex, _ = w.Run(ctx, g, nil)
	fmt.Println(ex.Status, string(ex.Steps[len(ex.Steps)-1].Output))
	// Output:
	// waiting approve "refund 40 EUR?"
	// done "approved: \"yes\""
}

// Checkpoint a whole workflow, let it move on, and restore it: every
// sub-thread goes back at once.
func ExampleWorkflow_Restore() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	w, _ := workflow.Create(ctx, db, workflow.CreateOptions{ID: "essay", SubThreads: []string{"writer"}})
	writer, _ := w.SubThread(ctx, "writer")
	writer.Append(ctx, message.Assistant("first draft"))
	w.Checkpoint(ctx, "draft")

	writer.Append(ctx, message.Assistant("a rewrite nobody liked"))
	w.Restore(ctx, workflow.Point{Checkpoint: "draft"})

	writer.Refresh(ctx)
	msgs, _ := writer.Messages(ctx, thread.ReadOptions{})
	fmt.Println(len(msgs), msgs[0].Text())
	// Output:
	// 1 first draft
}

// A writer and a reviewer pass a draft back and forth until the reviewer
// approves; the loop is bounded by the run's MaxRounds.
func ExampleGraph_loop() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	w, _ := workflow.Create(ctx, db, workflow.CreateOptions{ID: "essay"})
	drafts := 0
	g := workflow.NewGraph().
		Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
			drafts++
			return fmt.Sprintf("draft %d (after %s)", drafts, s.Input()), nil
		}, "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			if drafts < 3 {
				return "more detail", s.Goto("write") // around again
			}
			return "approved", s.Goto() // leaves the loop: nothing follows
		}, "write").
		Start("write")
	ex, err := w.Run(ctx, g, &workflow.RunOptions{MaxRounds: 10})
	fmt.Println(ex.Status, ex.Round, err)
	fmt.Println(string(ex.Steps[4].Output))
	// Output:
	// done 7 <nil>
	// "draft 3 (after {\"review\":\"more detail\"})"
}

// A step sends one instance of "summarize" per chapter, decided at run
// time; they run concurrently, and "combine" runs once after all of them
// with their outputs in order.
func ExampleStep_Send() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	w, _ := workflow.Create(ctx, db, workflow.CreateOptions{ID: "book", Input: []string{"one", "two", "three"}})
	g := workflow.NewGraph().
		Add("split", func(ctx context.Context, s *workflow.Step) (any, error) {
			var chapters []string
			s.DecodeInput(&chapters)
			for _, c := range chapters {
				if err := s.Send("summarize", c); err != nil {
					return nil, err
				}
			}
			return len(chapters), nil
		}, "summarize").
		Add("summarize", func(ctx context.Context, s *workflow.Step) (any, error) {
			var chapter string
			s.DecodeInput(&chapter)
			i, _ := s.Instance()
			return fmt.Sprintf("%d: %s, summed up", i, chapter), nil
		}, "combine").
		Add("combine", func(ctx context.Context, s *workflow.Step) (any, error) {
			return s.Input(), nil
		})
	ex, _ := w.Run(ctx, g, nil)
	fmt.Println(ex.Status, ex.Steps[3].ID)
	fmt.Println(string(ex.Steps[len(ex.Steps)-1].Output))
	// Output:
	// done 2/summarize[2]#1
	// {"summarize":["0: one, summed up","1: two, summed up","2: three, summed up"]}
}

// A person sets a step's output in the workflow's past, and the run goes
// on from there with it.
func ExampleWorkflow_Update() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	w, _ := workflow.Create(ctx, db, workflow.CreateOptions{ID: "trip"})
	g := workflow.NewGraph().
		Add("plan", func(context.Context, *workflow.Step) (any, error) { return "Paris", nil }, "book").
		Add("book", func(ctx context.Context, s *workflow.Step) (any, error) {
			return "booked from " + string(s.Input()), nil
		})
	w.Run(ctx, g, nil)

	// The version at which plan had ended, and book not yet.
	var at int64
	for v := int64(1); v <= w.Version() && at == 0; v++ {
		if ex, _ := w.Execution(ctx, v); len(ex.Steps) > 0 && ex.Steps[0].Status == workflow.StatusDone {
			at = v
		}
	}
	err := w.Update(ctx, workflow.Point{Version: at}, workflow.Update{By: "alice", Outputs: map[string]any{"plan": "Rome"}})
	fmt.Println(err)
	ex, _ := w.Run(ctx, g, nil)
	for _, s := range ex.Steps {
		fmt.Println(strings.TrimSpace(fmt.Sprint(s.ID, " ", s.Status, " ", string(s.Output), " ", s.EditedBy)))
	}
	// Output:
	// <nil>
	// 1/plan#1 done "Paris"
	// 2/book#1 interrupted
	// 1/plan#1/edit1 done "Rome" alice
	// 2/book#2 done "booked from {\"plan\":\"Rome\"}"
}
