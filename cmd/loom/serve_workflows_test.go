package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// TestShutdownCancelsWorkflowRuns shuts a server down while a workflow it
// started runs: the run is cancelled cleanly (its lease let go, the step
// cut short not recorded as failed), and the next server resumes it to its
// end, running only that step again.
func TestShutdownCancelsWorkflowRuns(t *testing.T) {
	db, err := thread.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var attempts atomic.Int32
	entered := make(chan struct{}, 2)
	g := workflow.NewGraph().
		Add("first", func(context.Context, *workflow.Step) (any, error) { return "ok", nil }, "slow").
		Add("slow", func(ctx context.Context, s *workflow.Step) (any, error) {
			if attempts.Add(1) == 1 {
				entered <- struct{}{}
				<-ctx.Done() // until the shutdown
				return nil, ctx.Err()
			}
			return "done at last", nil
		})
	cfg := serveConfig{maxBody: 1 << 20, shutdown: 10 * time.Second, workflows: func(r *workflow.Registry) error {
		return r.Register("slow", g, nil)
	}}
	serve := func() (string, func()) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- serveOn(ctx, l, db, nil, new(auth.Keys), cfg, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		return "http://" + l.Addr().String(), func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	}

	url, shutdown := serve()
	if code, _ := call(t, "POST", url+"/v1/workflows", "", map[string]any{"name": "slow", "id": "s1"}, nil); code != 202 {
		t.Fatalf("start: %d", code)
	}
	<-entered
	shutdown()
	w, err := workflow.Open(t.Context(), db, "s1")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := w.Execution(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != workflow.StatusRunning || ex.Runner != nil || !w.Stalled(time.Now()) {
		t.Fatalf("after the shutdown: %s, runner %+v", ex.Status, ex.Runner)
	}
	for _, s := range ex.Steps {
		if s.Status == workflow.StatusFailed {
			t.Fatalf("a step cut short by the shutdown was recorded failed: %+v", s)
		}
	}

	url, shutdown = serve()
	defer shutdown()
	if code, _ := call(t, "POST", url+"/v1/workflows/s1/resume", "", nil, nil); code != 202 {
		t.Fatalf("resume: %d", code)
	}
	_, kinds := followWorkflow(t, url+"/v1/workflows/s1/events", "", "", workflow.EventDone)
	want := []string{"step_started 1/first#1", "step_done 1/first#1", "step_started 2/slow#1",
		"step_interrupted 2/slow#1", "step_started 2/slow#2", "step_done 2/slow#2", "workflow_done"}
	if len(kinds) != len(want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %q, want %q", kinds, want)
		}
	}
}
