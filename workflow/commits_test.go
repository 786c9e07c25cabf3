package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// A step that does nothing is one commit of the workflow thread: the claim
// starts the first, and the commit that ends each step starts the next.
func TestAStepIsOneCommit(t *testing.T) {
	ctx := t.Context()
	const n = 5
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{ID: "wf", Input: "go"}))
	g := workflow.NewGraph()
	for i := range n {
		var next []string
		if i+1 < n {
			next = []string{fmt.Sprintf("s%d", i+1)}
		}
		g.Add(fmt.Sprintf("s%d", i), func(_ context.Context, s *workflow.Step) (any, error) { return s.Name(), nil }, next...)
	}
	ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone || ex.Version != 2+n {
		t.Fatalf("%s at version %d, want done at %d (create, claim, a commit a step)", ex.Status, ex.Version, 2+n)
	}
	var got []string
	for _, s := range ex.Steps {
		got = append(got, fmt.Sprintf("%s %s in %s out %s", s.ID, s.Status, s.Input, s.Output))
	}
	want := []string{`1/s0#1 done in "go" out "s0"`}
	for i := 1; i < n; i++ {
		want = append(want, fmt.Sprintf(`%d/s%d#1 done in {"s%d":"s%d"} out "s%d"`, i+1, i, i-1, i-1, i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("steps:\n%q\nwant\n%q", got, want)
	}
	// Every version reads back, and a step ends after it started.
	for v := int64(1); v <= ex.Version; v++ {
		at := must[*workflow.Execution](t)(w.Execution(ctx, v))
		for _, s := range at.Steps {
			if s.Status == workflow.StatusDone && s.End.Before(s.Start) {
				t.Fatalf("version %d: %s ended before it started", v, s.ID)
			}
		}
	}
}

// A run cut short as a round ends, wherever the cut lands, leaves the next
// round's step to its first attempt: a step started ahead and never called
// takes the same attempt next time, and the history shows no interrupted
// attempt.
func TestCutAsARoundEndsKeepsTheAttempt(t *testing.T) {
	for k := 1; k <= 6; k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			ctx := t.Context()
			w := must[*workflow.Workflow](t)(workflow.Create(ctx, memDB(t), workflow.CreateOptions{ID: "wf"}))
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			var armed atomic.Bool
			var calls atomic.Int32
			// The k-th reading of the runner's clock after step a's work
			// cuts the run.
			now := func() time.Time {
				if armed.Load() && calls.Add(1) == int32(k) {
					cancel()
				}
				return time.Now()
			}
			var bRuns atomic.Int32
			g := workflow.NewGraph().
				Add("a", func(context.Context, *workflow.Step) (any, error) {
					armed.Store(true)
					return nil, nil
				}, "b").
				Add("b", func(context.Context, *workflow.Step) (any, error) {
					bRuns.Add(1)
					return nil, nil
				})
			ex, err := w.Run(runCtx, g, &workflow.RunOptions{Now: now})
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			if ex.Status != workflow.StatusDone {
				if ex.Runner != nil {
					t.Fatalf("cut short, the lease stays: %+v", ex.Runner)
				}
				ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
			}
			var got []string
			for _, s := range ex.Steps {
				got = append(got, s.ID+" "+string(s.Status))
			}
			if ex.Status != workflow.StatusDone || !slices.Equal(got, []string{"1/a#1 done", "2/b#1 done"}) || bRuns.Load() != 1 {
				t.Fatalf("%s, steps %q, b ran %d times", ex.Status, got, bRuns.Load())
			}
		})
	}
}

// What Run returns is what a read of the workflow returns at that version,
// though the runner builds it from the records it wrote: outputs given as
// JSON with spaces and HTML, errors that are not UTF-8, inputs given to a
// waiting step, fan-out and fan-in, a step that chooses no successor.
func TestRunReturnsWhatAReadReturns(t *testing.T) {
	for _, store := range []string{"memory", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			ctx := t.Context()
			db := memDB(t)
			if store == "sqlite" {
				db = must[*thread.DB](t)(thread.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "wf.db"), nil))
				t.Cleanup(func() { db.Close() })
			}
			w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf", Input: map[string]any{"q": "<why?>"}}))
			var cRuns atomic.Int32
			g := workflow.NewGraph().
				Add("a", func(context.Context, *workflow.Step) (any, error) {
					return json.RawMessage(` { "x" : "<b>&</b>" , "n": [1, 2] } `), nil
				}, "b", "c").
				Add("b", appendStep("notes", "b wrote"), "d").
				Add("c", func(_ context.Context, s *workflow.Step) (any, error) {
					if cRuns.Add(1) == 1 {
						return nil, errors.New("bad bytes \xff\xfe here")
					}
					answer, err := s.Ask(map[string]string{"ask": "go on? <yes/no>"})
					if err != nil {
						return nil, err
					}
					return answer, nil
				}, "d").
				Add("d", func(_ context.Context, s *workflow.Step) (any, error) {
					return string(s.Input()), s.Goto()
				})
			same := func(what string, got *workflow.Execution) {
				t.Helper()
				other := must[*workflow.Workflow](t)(workflow.Open(ctx, db, "wf"))
				want := must[*workflow.Execution](t)(other.Execution(ctx, got.Version))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%s: Run returned what a read does not (-read +run):\n%s", what, diff)
				}
			}
			ex, err := w.Run(ctx, g, nil)
			if err == nil || ex.Status != workflow.StatusFailed {
				t.Fatalf("first run: %v, %s", err, ex.Status)
			}
			same("failed", ex)
			ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
			if ex.Status != workflow.StatusWaiting {
				t.Fatalf("second run: %s", ex.Status)
			}
			same("waiting", ex)
			must[any](t)(nil, w.Provide(ctx, "c", map[string]any{"ok": true, "why": "<because>"}))
			ex = must[*workflow.Execution](t)(w.Run(ctx, g, nil))
			if ex.Status != workflow.StatusDone {
				t.Fatalf("third run: %s", ex.Status)
			}
			same("done", ex)
		})
	}
}
