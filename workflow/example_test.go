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
