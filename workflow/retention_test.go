package workflow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// TestRetentionKeepsWhatKeptVersionsName: under a store-wide history
// limit, every version of a workflow that GC keeps still reads, forks and
// restores whole, its sub-threads included. A sub-thread moves several
// versions a step, so its own last N versions are fewer steps than the
// workflow's last N: pruned on its own count, it lost the versions the
// workflow's oldest kept versions name.
func TestRetentionKeepsWhatKeptVersionsName(t *testing.T) {
	for _, url := range []string{"memory://", "sqlite://" + t.TempDir() + "/wf.db"} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			retentionKeepsWhatKeptVersionsName(t, openDB(t, url).WithRetention(thread.Retention{KeepLast: 4}))
		})
	}
}

func retentionKeepsWhatKeptVersionsName(t *testing.T, db *thread.DB) {
	ctx := t.Context()
	const rounds = 8
	g := workflow.NewGraph().Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
		th, err := s.SubThread(ctx, "writer")
		if err != nil {
			return nil, err
		}
		for i := range 3 {
			if _, err := th.Append(ctx, message.Assistant(fmt.Sprintf("round %d line %d", s.Round(), i))); err != nil {
				return nil, err
			}
		}
		if s.Round() < rounds {
			return s.Round(), nil
		}
		// A sub-thread made on first use in the last round: the oldest
		// kept versions do not name it, the newest name its first
		// version.
		late, err := s.SubThread(ctx, "late")
		if err != nil {
			return nil, err
		}
		for i := range 10 {
			if _, err := late.Append(ctx, message.Assistant(fmt.Sprintf("late %d", i))); err != nil {
				return nil, err
			}
		}
		return s.Round(), s.Goto()
	}, "write").Start("write")
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "loop"}))
	ex := must[*workflow.Execution](t)(w.Run(ctx, g, nil))
	if ex.Status != workflow.StatusDone {
		t.Fatalf("run: %+v", ex)
	}
	head := ex.Version
	kept := keptWriters(t, w, head)
	// A fork from the middle of the run, run to its end: its sub-threads
	// are forks of the source's, which only its state links to it.
	f := must[*workflow.Workflow](t)(w.Fork(ctx, workflow.Point{Version: head / 2}, workflow.ForkOptions{ID: "loop-fork"}))
	fex := must[*workflow.Execution](t)(f.Run(ctx, g, nil))
	if fex.Status != workflow.StatusDone || fex.Version < 8 {
		t.Fatalf("the fork's run: %+v", fex)
	}
	fkept := keptWriters(t, f, fex.Version)
	rep := must[thread.GCReport](t)(db.GC(ctx, thread.GCOptions{}))
	if rep.Versions == 0 {
		t.Fatalf("GC dropped nothing: %+v", rep)
	}
	if _, err := w.At(ctx, workflow.Point{Version: head - 4}, workflow.AtOptions{}); err == nil {
		t.Fatalf("version %d is still readable: the workflow kept more than its last 4", head-4)
	}
	checkKept(t, f, fex.Version, fkept)
	checkKept(t, w, head, kept)
	for v := head - 3; v <= head; v++ {
		f, err := w.Fork(ctx, workflow.Point{Version: v}, workflow.ForkOptions{ID: fmt.Sprintf("fork%d", v)})
		if err != nil {
			t.Fatalf("fork at kept version %d: %v", v, err)
		}
		if got := subTexts(t, f, "writer"); !slices.Equal(got, kept[v]) {
			t.Fatalf("fork at %d: writer %q, want %q", v, got, kept[v])
		}
	}
	// The sub-thread is still bounded: what no kept version names went.
	writer := must[*thread.Thread](t)(w.SubThread(ctx, "writer"))
	var oldest int64
	for e, err := range writer.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		oldest = e.Version
	}
	if oldest <= 1 {
		t.Fatalf("the writer keeps its whole history (%d versions): GC kept more than the kept versions name", writer.Version())
	}
	must[any](t)(nil, w.Restore(ctx, workflow.Point{Version: head - 3}))
	if got := subTexts(t, w, "writer"); !slices.Equal(got, kept[head-3]) {
		t.Fatalf("restored to %d: writer %q, want %q", head-3, got, kept[head-3])
	}
}

// keptWriters returns the writer sub-thread's messages at each of the last
// four versions of w, up to head.
func keptWriters(t *testing.T, w *workflow.Workflow, head int64) map[int64][]string {
	t.Helper()
	kept := map[int64][]string{}
	for v := head - 3; v <= head; v++ {
		at := must[*workflow.Snapshot](t)(w.At(t.Context(), workflow.Point{Version: v}, workflow.AtOptions{}))
		kept[v] = texts(at.Messages["writer"])
		kept[-v] = texts(at.Messages["late"])
	}
	return kept
}

// checkKept checks that each version of kept still reads as it did.
func checkKept(t *testing.T, w *workflow.Workflow, head int64, kept map[int64][]string) {
	t.Helper()
	for v := head - 3; v <= head; v++ {
		at, err := w.At(t.Context(), workflow.Point{Version: v}, workflow.AtOptions{})
		if err != nil {
			t.Fatalf("%s: kept version %d: %v", w.ID(), v, err)
		}
		if got := texts(at.Messages["writer"]); !slices.Equal(got, kept[v]) {
			t.Fatalf("%s: kept version %d: writer %q, want %q", w.ID(), v, got, kept[v])
		}
		if got := texts(at.Messages["late"]); !slices.Equal(got, kept[-v]) {
			t.Fatalf("%s: kept version %d: late %q, want %q", w.ID(), v, got, kept[-v])
		}
	}
}
