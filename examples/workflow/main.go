// Workflow is three agents on one loom workflow: two researchers fanned
// out, each on its own sub-thread, and a writer fanned in on main, who
// writes from both. Every step is committed as it starts and as it ends,
// so a run killed at any moment resumes where it was, without running a
// step that ended again.
//
// It runs on the scripted model (agent/scripted), with no key:
//
//	go run ./examples/workflow -crash    # killed (SIGKILL) while the writer runs
//	go run ./examples/workflow           # resumes: the researchers are not run again
//	go run ./cmd/loom workflows show trip --store sqlite://./workflow.db --last 4
//	go run ./cmd/loom workflows checkpoint trip done --store sqlite://./workflow.db
//
// -reset deletes the workflow first, to start over.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loomthreads/loom/examples/workflow/trip"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"

	_ "github.com/loomthreads/loom/jsonfile"
	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/redis"
	_ "github.com/loomthreads/loom/sqlite"
)

func main() {
	store := flag.String("store", "sqlite://./workflow.db", "store URL")
	id := flag.String("workflow", "trip", "workflow id")
	crash := flag.Bool("crash", false, "kill this process (SIGKILL) in the middle of the writer's step")
	reset := flag.Bool("reset", false, "delete the workflow first and start over")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, options{store: *store, workflow: *id, crash: *crash, reset: *reset}); err != nil {
		fmt.Fprintln(os.Stderr, "workflow:", err)
		os.Exit(1)
	}
}

type options struct {
	store, workflow string
	crash, reset    bool
}

// graph is the trip (package trip, which `loom serve --example-workflows`
// runs by name); with crash, the process kills itself (SIGKILL) in the
// middle of the writer's step, which has started (and is committed) but
// not ended: the next run runs it again, and only it.
func graph(out io.Writer, crash bool) *workflow.Graph {
	opts := &trip.Options{Out: out}
	if crash {
		opts.BeforeWrite = func() {
			fmt.Fprintln(out, "crashing now, in the middle of the writer's step")
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	return trip.Graph(opts)
}

func run(ctx context.Context, out io.Writer, o options) error {
	db, err := thread.Open(ctx, o.store, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.reset {
		if err := workflow.Delete(ctx, db, o.workflow); err != nil && !errors.Is(err, thread.ErrNotFound) {
			return err
		}
	}
	w, err := workflow.Open(ctx, db, o.workflow)
	switch {
	case errors.Is(err, thread.ErrNotFound):
		w, err = workflow.Create(ctx, db, workflow.CreateOptions{ID: o.workflow, Title: "a weekend in Lisbon"})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "new workflow %s\n", w.ID())
	case err != nil:
		return err
	default:
		ex, err := w.Execution(ctx, 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "resuming %s at version %d: %s, round %d (%s)\n", w.ID(), w.Version(), ex.Status, ex.Round, strings.Join(ex.Current, ", "))
	}
	// Wait: a killed run's lease is taken over at once on this host.
	ex, err := w.Run(ctx, graph(out, o.crash), &workflow.RunOptions{Wait: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %s after %d step attempts\n", w.ID(), ex.Status, len(ex.Steps))
	for _, s := range ex.Steps {
		fmt.Fprintf(out, "  %-10s %s\n", s.ID, s.Status)
	}
	main, err := w.SubThread(ctx, workflow.MainKey)
	if err != nil {
		return err
	}
	msgs, err := main.Messages(ctx, thread.ReadOptions{Last: 1})
	if err != nil {
		return err
	}
	if len(msgs) == 1 {
		fmt.Fprintf(out, "main says: %s\n", msgs[0].Text())
	}
	return nil
}
