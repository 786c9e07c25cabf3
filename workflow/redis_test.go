package workflow_test

import (
	"slices"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// On a Redis store in cluster mode, which refuses a batch that spans
// thread families, every batch of a workflow stays in its family: runs,
// checkpoints, restores, forks and deletion.
func TestRedisClusterMode(t *testing.T) {
	ctx := t.Context()
	s, err := redis.Open(ctx, testserver.Redis(t), &redis.Options{Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db := thread.New(s, nil).WithTenant("acme")
	w := must[*workflow.Workflow](t)(workflow.Create(ctx, db, workflow.CreateOptions{ID: "trip"}))
	if ex, err := w.Run(ctx, tripGraph(), nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run: %v", err)
	}
	must[thread.Checkpoint](t)(w.Checkpoint(ctx, "done"))
	f := must[*workflow.Workflow](t)(w.Fork(ctx, workflow.Point{Version: 5}, workflow.ForkOptions{ID: "trip-b"}))
	if ex, err := f.Run(ctx, tripGraph(), nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run the fork: %v", err)
	}
	must[any](t)(nil, w.Restore(ctx, workflow.Point{Version: 3}))
	if got := subTexts(t, w, "main"); len(got) != 0 {
		t.Fatalf("main after the restore: %q", got)
	}
	must[any](t)(nil, w.Restore(ctx, workflow.Point{Checkpoint: "done"}))
	if got := subTexts(t, w, "main"); !slices.Contains(got, "signed") {
		t.Fatalf("main after the restore: %q", got)
	}
	must[any](t)(nil, f.Delete(ctx))
	if got := subTexts(t, w, "hotels"); len(got) != 2 {
		t.Fatalf("hotels after the fork's deletion: %q", got)
	}
}
