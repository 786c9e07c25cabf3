package workflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/cputime"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

func sqliteDB(b *testing.B) *thread.DB {
	b.Helper()
	db, err := thread.Open(b.Context(), "sqlite://"+filepath.Join(b.TempDir(), "wf.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// storeDB is a database on store: "memory", or SQLite in a temporary file.
func storeDB(b *testing.B, store string) *thread.DB {
	b.Helper()
	if store == "memory" {
		return thread.New(thread.NewMemoryStore(), nil)
	}
	return sqliteDB(b)
}

// runEach runs g on a new workflow of db each iteration, the workflow
// created off the clock, fails unless ok holds of the execution, and
// reports the time per unit, per units of a run.
func runEach(b *testing.B, db *thread.DB, g *workflow.Graph, per int, unit string, ok func(*workflow.Execution) bool) {
	b.Helper()
	ctx := b.Context()
	n := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: fmt.Sprintf("wf%d", n)})
		n++
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ex, err := w.Run(ctx, g, nil)
		if err != nil {
			b.Fatal(err)
		}
		if !ok(ex) {
			b.Fatalf("run: %+v", ex)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*per), unit)
}

// tenSubs makes a workflow with 10 sub-threads of msgs messages each, two
// to a commit.
func tenSubs(b *testing.B, db *thread.DB, msgs int) *workflow.Workflow {
	b.Helper()
	ctx := b.Context()
	keys := make([]string, 9)
	for i := range keys {
		keys[i] = fmt.Sprintf("agent%d", i)
	}
	w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: "wf", SubThreads: keys})
	if err != nil {
		b.Fatal(err)
	}
	for _, key := range w.SubThreadKeys() {
		sub, err := w.SubThread(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		// A conversation: a question and an answer a commit.
		for i := 0; i < msgs; i += 2 {
			if _, err := sub.Append(ctx, message.User(fmt.Sprintf("%s asks %d", key, i)), message.Assistant(fmt.Sprintf("%s answers %d", key, i))); err != nil {
				b.Fatal(err)
			}
		}
	}
	return w
}

// BenchmarkCheckpoint is a checkpoint of a workflow with 10 sub-threads:
// one commit and 11 checkpoints in one transaction.
func BenchmarkCheckpoint(b *testing.B) {
	for _, msgs := range []int{10, 1000} {
		b.Run(fmt.Sprintf("subs=10/msgs=%d", msgs), func(b *testing.B) {
			w := tenSubs(b, sqliteDB(b), msgs)
			i := 0
			for b.Loop() {
				i++
				if _, err := w.Checkpoint(b.Context(), fmt.Sprintf("cp%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRestore moves a workflow with 10 sub-threads back and forth
// between two checkpoints: 11 head moves in one transaction.
func BenchmarkRestore(b *testing.B) {
	for _, msgs := range []int{10, 1000} {
		b.Run(fmt.Sprintf("subs=10/msgs=%d", msgs), func(b *testing.B) {
			ctx := b.Context()
			w := tenSubs(b, sqliteDB(b), msgs)
			if _, err := w.Checkpoint(ctx, "one"); err != nil {
				b.Fatal(err)
			}
			for _, key := range w.SubThreadKeys() {
				sub, _ := w.SubThread(ctx, key)
				if _, err := sub.Append(ctx, message.User("more")); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := w.Checkpoint(ctx, "two"); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				if err := w.Restore(ctx, workflow.Point{Checkpoint: []string{"one", "two"}[i%2]}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFork forks a workflow with 10 sub-threads at a checkpoint: 11
// threads and one commit in one transaction, no message copied.
func BenchmarkFork(b *testing.B) {
	for _, msgs := range []int{10, 1000} {
		b.Run(fmt.Sprintf("subs=10/msgs=%d", msgs), func(b *testing.B) {
			ctx := b.Context()
			w := tenSubs(b, sqliteDB(b), msgs)
			if _, err := w.Checkpoint(ctx, "cp"); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				if _, err := w.Fork(ctx, workflow.Point{Checkpoint: "cp"}, workflow.ForkOptions{ID: fmt.Sprintf("f%d", i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStep is the runner's own cost per step: a sequence of 100 steps
// that do nothing, each recorded as it starts and as it ends. With a
// sub-thread, each step also appends one message to a sub-thread (whose
// length does not matter) and records its head. On the memory store, the
// runner's own work without a disk.
func BenchmarkStep(b *testing.B) {
	const steps = 100
	for _, c := range []struct {
		store string
		use   bool
	}{{"sqlite", false}, {"sqlite", true}, {"memory", false}} {
		use := c.use
		name := c.store + "/nothing"
		if use {
			name = c.store + "/append-to-a-sub-thread"
		}
		b.Run(name, func(b *testing.B) {
			g := workflow.NewGraph()
			for i := range steps {
				var next []string
				if i+1 < steps {
					next = []string{fmt.Sprintf("s%d", i+1)}
				}
				g.Add(fmt.Sprintf("s%d", i), func(ctx context.Context, s *workflow.Step) (any, error) {
					if !use {
						return nil, nil
					}
					th, err := s.SubThread(ctx, workflow.MainKey)
					if err != nil {
						return nil, err
					}
					_, err = th.Append(ctx, message.Assistant("step"))
					return nil, err
				}, next...)
			}
			runEach(b, storeDB(b, c.store), g, steps, "ns/step", func(*workflow.Execution) bool { return true })
		})
	}
}

// BenchmarkStepBesideTurn is a step that does nothing on SQLite measured
// side by side with its floor, in one run: each iteration runs a workflow
// of 100 such steps and then appends 100 chat turns (a 200-byte question
// and a 600-byte answer, one commit each) to a thread of the same
// database. It reports µs/step, µs/turn and their ratio, and the CPU time
// the process spent in each phase (cpu-µs/step, cpu-µs/turn: work done in
// the background, such as the search fold, counts where it runs); each
// workflow is created off the clock, as is the floor's thread, which is
// replaced every 1,000 turns.
func BenchmarkStepBesideTurn(b *testing.B) {
	const steps = 100
	ctx := b.Context()
	db := sqliteDB(b)
	g := workflow.NewGraph()
	for i := range steps {
		var next []string
		if i+1 < steps {
			next = []string{fmt.Sprintf("s%d", i+1)}
		}
		g.Add(fmt.Sprintf("s%d", i), func(context.Context, *workflow.Step) (any, error) { return nil, nil }, next...)
	}
	user, assistant := message.User(strings.Repeat("u", 200)), message.Assistant(strings.Repeat("a", 600))
	floor, err := db.Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var stepTime, turnTime, stepCPU, turnCPU time.Duration
	runs, turns := 0, 0
	for b.Loop() {
		b.StopTimer()
		w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: fmt.Sprintf("wf%d", runs)})
		if err != nil {
			b.Fatal(err)
		}
		if turns > 0 && turns%1000 == 0 {
			if err := floor.Delete(ctx); err != nil {
				b.Fatal(err)
			}
			if floor, err = db.Create(ctx, thread.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start, cpu := time.Now(), cputime.Process()
		if _, err := w.Run(ctx, g, nil); err != nil {
			b.Fatal(err)
		}
		stepTime += time.Since(start)
		stepCPU += cputime.Process() - cpu
		runs++
		start, cpu = time.Now(), cputime.Process()
		for range steps {
			if _, err := floor.Append(ctx, user, assistant); err != nil {
				b.Fatal(err)
			}
		}
		turnTime += time.Since(start)
		turnCPU += cputime.Process() - cpu
		turns += steps
	}
	step := float64(stepTime.Microseconds()) / float64(runs*steps)
	turn := float64(turnTime.Microseconds()) / float64(turns)
	b.ReportMetric(step, "µs/step")
	b.ReportMetric(turn, "µs/turn")
	b.ReportMetric(step/turn, "step/turn")
	b.ReportMetric(float64(stepCPU.Microseconds())/float64(runs*steps), "cpu-µs/step")
	b.ReportMetric(float64(turnCPU.Microseconds())/float64(turns), "cpu-µs/turn")
}

// BenchmarkLoop is a round of a writer ↔ reviewer loop whose steps do
// nothing: a Run of 100 rounds (50 drafts), the last leaving the loop.
// It reports ns/round; each workflow is created off the clock.
func BenchmarkLoop(b *testing.B) {
	const rounds = 100
	for _, store := range []string{"sqlite", "memory"} {
		b.Run(store, func(b *testing.B) {
			g := workflow.NewGraph().
				Add("write", func(context.Context, *workflow.Step) (any, error) { return nil, nil }, "review").
				Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
					if s.Round() == rounds {
						return nil, s.Goto()
					}
					return nil, nil
				}, "write").
				Start("write")
			runEach(b, storeDB(b, store), g, rounds, "ns/round", func(ex *workflow.Execution) bool { return ex.Round == rounds+1 })
		})
	}
}

// BenchmarkSend is a fan-out of 50 instances that do nothing, fanned in:
// a Run of three rounds (the sender, the 50 instances, the fan-in). It
// reports ns/instance; each workflow is created off the clock.
func BenchmarkSend(b *testing.B) {
	instances := benchInstances()
	for _, store := range []string{"sqlite", "memory"} {
		b.Run(store, func(b *testing.B) {
			g := workflow.NewGraph().
				Add("split", func(ctx context.Context, s *workflow.Step) (any, error) {
					for i := range instances {
						if err := s.Send("part", i); err != nil {
							return nil, err
						}
					}
					return nil, nil
				}, "part").
				Add("part", func(context.Context, *workflow.Step) (any, error) { return "done", nil }, "join").
				Add("join", func(context.Context, *workflow.Step) (any, error) { return nil, nil })
			runEach(b, storeDB(b, store), g, instances, "ns/instance", func(ex *workflow.Execution) bool { return len(ex.Steps) == instances+2 })
		})
	}
}

func benchInstances() int {
	if n, err := strconv.Atoi(os.Getenv("LOOM_BENCH_INSTANCES")); err == nil && n > 0 {
		return n
	}
	return 50
}
