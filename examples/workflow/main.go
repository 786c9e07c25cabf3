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

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
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

// researcher is a step that runs an agent on its own sub-thread.
func researcher(out io.Writer, key, topic, finding string) workflow.StepFunc {
	return func(ctx context.Context, s *workflow.Step) (any, error) {
		th, err := s.SubThread(ctx, key)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%s researches %s (attempt %d)\n", key, topic, s.Attempt())
		a := agent.New(scripted.New(scripted.Text(finding)), &agent.Options{Instructions: "You research " + topic + "."})
		res, err := a.Run(ctx, th, message.User("What should a visitor to Lisbon know about "+topic+"?"))
		if err != nil {
			return nil, err
		}
		return res.Text(), nil
	}
}

func graph(out io.Writer, crash bool) *workflow.Graph {
	return workflow.NewGraph().
		Add("plan", func(ctx context.Context, s *workflow.Step) (any, error) {
			main, err := s.SubThread(ctx, workflow.MainKey)
			if err != nil {
				return nil, err
			}
			fmt.Fprintln(out, "plan: a weekend in Lisbon")
			_, err = main.Append(ctx, message.User("Plan a weekend in Lisbon."))
			return "Lisbon", err
		}, "hotels", "food").
		Add("hotels", researcher(out, "hotels", "hotels", "Stay in Alfama: small hotels, views over the river."), "write").
		Add("food", researcher(out, "food", "food", "Eat pastéis de nata in Belém, grilled sardines in June."), "write").
		Add("write", func(ctx context.Context, s *workflow.Step) (any, error) {
			var found map[string]string
			if err := s.DecodeInput(&found); err != nil {
				return nil, err
			}
			main, err := s.SubThread(ctx, workflow.MainKey)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "writer writes from %d findings (attempt %d)\n", len(found), s.Attempt())
			if crash {
				// The writer's step has started (and is committed) but not
				// ended: the next run runs it again, and only it.
				fmt.Fprintln(out, "crashing now, in the middle of the writer's step")
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			a := agent.New(scripted.New(scripted.Text("Your weekend: "+found["hotels"]+" "+found["food"])), nil)
			res, err := a.Run(ctx, main, message.User("Write the plan from the findings."))
			if err != nil {
				return nil, err
			}
			return res.Text(), nil
		})
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
