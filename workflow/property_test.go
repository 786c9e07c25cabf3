package workflow_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// randomGraph is a random DAG of n steps (edges go from lower to higher
// numbers), whose steps each write to their own sub-thread and choose their
// successors by a hash of their input: deterministic, so that two runs of
// it agree. cut, when it returns true for a step's first attempt, cancels
// the run in the middle of that step, after it wrote.
func randomGraph(r *rand.Rand, n int, cut func(name string) bool, cancel func()) *workflow.Graph {
	g := workflow.NewGraph()
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		var next []string
		for j := i + 1; j < n; j++ {
			if r.IntN(10) < 4 {
				next = append(next, fmt.Sprintf("s%d", j))
			}
		}
		g.Add(name, func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, name)
			if err != nil {
				return nil, err
			}
			if _, err := th.Append(ctx, message.Assistant(name+" saw "+string(s.Input()))); err != nil {
				return nil, err
			}
			if s.Attempt() == 1 && cut(name) {
				cancel()
				<-ctx.Done()
				return nil, ctx.Err()
			}
			h := fnv.New32a()
			h.Write(s.Input())
			var chosen []string
			for k, nx := range next {
				if (h.Sum32()>>k)&1 == 1 || k == 0 {
					chosen = append(chosen, nx)
				}
			}
			if err := s.Goto(chosen...); err != nil {
				return nil, err
			}
			return fmt.Sprintf("%s:%d", name, h.Sum32()%1000), nil
		}, next...)
	}
	return g
}

// Any graph, cut short at any steps, ends as the same graph run at once:
// the same steps ended, with the same inputs and outputs, and the same
// messages in every sub-thread.
func TestPropertyInterruptedRunsEndAlike(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := t.Context()
			db := memDB(t)
			n := 2 + int(seed%6)
			ref := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "ref", Input: seed}))
			never := func(string) bool { return false }
			if _, err := ref.Run(ctx, randomGraph(rand.New(rand.NewPCG(seed, 1)), n, never, func() {}), nil); err != nil {
				t.Fatal(err)
			}
			w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "cut", Input: seed}))
			// Steps of a round run at once: the choice of where to cut is
			// made under a lock.
			var mu sync.Mutex
			pick := rand.New(rand.NewPCG(seed, 2))
			cuts := 0
			for run := 0; ; run++ {
				if run > 4*n {
					t.Fatal("the workflow never ended")
				}
				runCtx, cancel := context.WithCancel(ctx)
				ex, err := w.Run(runCtx, randomGraph(rand.New(rand.NewPCG(seed, 1)), n, func(string) bool {
					mu.Lock()
					defer mu.Unlock()
					if pick.IntN(3) == 0 {
						cuts++
						return true
					}
					return false
				}, cancel), nil)
				cancel()
				if err == nil && ex.Status == workflow.StatusDone {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if got, want := outcome(t, w), outcome(t, ref); got != want {
				t.Fatalf("after %d cuts:\n%s\nwant:\n%s", cuts, got, want)
			}
			var all []thread.HistoryEntry
			for e, err := range w.History(ctx, thread.HistoryOptions{}) {
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, e)
			}
			// Every version reads back.
			for _, e := range all {
				if _, err := w.At(ctx, workflow.Point{Version: e.Version}, workflow.AtOptions{}); err != nil {
					t.Fatalf("at version %d: %v", e.Version, err)
				}
			}
		})
	}
}
