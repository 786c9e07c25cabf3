// Package wftest helps the tests of the packages that show workflows
// (httpapi, mcpserver, cmd/loom) and of workflow make one in a given state
// and wait for it.
package wftest

import (
	"context"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// Hold creates the workflow id in db and runs it, blocked in its one step
// until the test ends; now is the runner's clock (nil: the real one). A
// clock an hour behind takes a lease that has run out already: a runner
// gone silent, whose workflow is stalled.
func Hold(t testing.TB, db *thread.DB, id string, now func() time.Time) {
	t.Helper()
	w, err := workflow.Create(t.Context(), db, workflow.CreateOptions{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g := workflow.NewGraph().Add("work", func(ctx context.Context, s *workflow.Step) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	go func() {
		defer close(done)
		w.Run(ctx, g, &workflow.RunOptions{Now: now})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-started
}

// HourBehind is a runner's clock an hour behind: the lease it takes has
// run out already.
func HourBehind() time.Time { return time.Now().Add(-time.Hour) }

// Settle waits, by its events, until the workflow id of db is done,
// waiting or failed, and returns its status then.
func Settle(t testing.TB, db *thread.DB, id string) workflow.Status {
	t.Helper()
	w, err := workflow.Open(t.Context(), db, id)
	if err != nil {
		t.Fatal(err)
	}
	var last workflow.Event
	for ev, err := range w.Events(t.Context(), workflow.EventsOptions{UntilSettled: true}) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	return last.Status
}
