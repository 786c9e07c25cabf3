package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/examples/workflow/trip"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// cliWorkflows returns the workflows this loom runs by name: the
// examples' (examples/workflow/trip), which `loom serve
// --example-workflows` serves too. A program with workflows of its own
// serves them with httpapi.Options.Workflows.
func cliWorkflows() *workflow.Registry {
	reg := workflow.NewRegistry()
	if err := trip.Register(reg); err != nil {
		panic(err) // the examples' names and graphs are fixed
	}
	return reg
}

// parseInput returns the JSON of --input, nil when empty.
func (b *base) parseInput(flag, s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, b.usage("%s %q: not JSON (quote a string: '\"text\"')", flag, clip(s, 60))
	}
	return json.RawMessage(s), nil
}

// runWorkflow runs w on d's graph in this process until it is done, waits
// for input or fails, printing its events as they come (JSON lines with
// --json), and then where it stands.
func (b *base) runWorkflow(ctx context.Context, w *workflow.Workflow, d workflow.Definition) error {
	if w.Status() == workflow.StatusDone {
		if !b.JSON {
			fmt.Fprintf(b.Stdout, "workflow %s is done: nothing to run\n", w.ID())
		}
		return nil
	}
	// Events from the workflow's version now: what this run does.
	after := ""
	if ev, err := lastEvent(ctx, w); err != nil {
		return err
	} else if ev != nil {
		after = ev.Cursor
	}
	fctx, stop := context.WithCancel(ctx)
	followed := make(chan string, 1)
	go func() {
		last := after
		for ev, err := range w.Events(fctx, workflow.EventsOptions{After: after}) {
			if err != nil {
				break
			}
			b.printEvent(ev)
			last = ev.Cursor
		}
		followed <- last
	}()
	ex, runErr := w.Run(ctx, d.Graph, nil)
	stop()
	last := <-followed
	// What the follower had not heard when it stopped.
	for ev, err := range w.Events(context.WithoutCancel(ctx), workflow.EventsOptions{After: last, NoFollow: true}) {
		if err != nil {
			return errors.Join(runErr, err)
		}
		b.printEvent(ev)
	}
	var se *workflow.StepError
	if runErr != nil && !errors.As(runErr, &se) {
		return runErr
	}
	if ex != nil && !b.JSON {
		fmt.Fprintf(b.Stdout, "workflow %s: %s at version %d\n", w.ID(), ex.Status, ex.Version)
		for _, wt := range ex.Waiting {
			fmt.Fprintf(b.Stdout, "  %s asks %s: loom workflows input %s %s JSON, then loom workflows resume %s\n", wt.Step, clip(oneLine(string(wt.Prompt)), 120), w.ID(), wt.Step, w.ID())
		}
	}
	return runErr
}

// lastEvent returns the workflow's last event so far, nil when none.
func lastEvent(ctx context.Context, w *workflow.Workflow) (*workflow.Event, error) {
	var last *workflow.Event
	for ev, err := range w.Events(ctx, workflow.EventsOptions{NoFollow: true}) {
		if err != nil {
			return nil, err
		}
		last = &ev
	}
	return last, nil
}

func (b *base) printEvent(ev workflow.Event) {
	if b.JSON {
		writeJSONLine(b.Stdout, ev)
		return
	}
	fmt.Fprintln(b.Stdout, eventLine(ev))
}

// eventLine is an event for people.
func eventLine(ev workflow.Event) string {
	if s := ev.Step; s != nil {
		line := fmt.Sprintf("%-16s %s", strings.TrimPrefix(string(ev.Kind), "step_"), s.ID)
		switch {
		case s.Error != "":
			line += ": " + clip(oneLine(s.Error), 120)
		case ev.Kind == workflow.EventStepDone && len(s.Output) > 0:
			line += " → " + clip(oneLine(string(s.Output)), 80)
		}
		return line
	}
	line := "workflow " + strings.TrimPrefix(string(ev.Kind), "workflow_")
	if ev.Error != "" {
		line += ": " + clip(oneLine(ev.Error), 120)
	}
	return line
}

// WorkflowsStartCommand starts a workflow this loom knows by name and runs
// it in the foreground.
type WorkflowsStartCommand struct {
	base
	Input, ID, Title string
}

// Flags implements Command.
func (c *WorkflowsStartCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.Input, "input", "", "the workflow's input, as `JSON`")
	fs.StringVar(&c.ID, "id", "", "the new workflow's `ID` (a fresh one by default)")
	fs.StringVar(&c.Title, "title", "", "its `TITLE` (the registered one's by default)")
	return fs
}

// Run implements Command.
func (c *WorkflowsStartCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.positional(args, 0, 1)
	if err != nil {
		return err
	}
	reg := cliWorkflows()
	if len(pos) == 0 {
		return c.usage("missing the workflow's NAME: %s", strings.Join(reg.Names(), ", "))
	}
	d, err := reg.Lookup(pos[0])
	if err != nil {
		return errorOf(thread.ErrNotFound, "no workflow named %q: this loom runs %s", clip(pos[0], 40), strings.Join(reg.Names(), ", "))
	}
	input, err := c.parseInput("--input", c.Input)
	if err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := workflow.CreateOptions{ID: c.ID, Title: c.Title}
	if input != nil {
		opts.Input = input
	}
	w, err := reg.Create(ctx, db, d.Name, opts)
	if err != nil {
		return err
	}
	if !c.JSON {
		fmt.Fprintf(c.Stdout, "started workflow %s (%s)\n", w.ID(), d.Name)
	}
	return c.runWorkflow(ctx, w, d)
}

// WorkflowsResumeCommand runs a workflow started by name again, in the
// foreground, from where it stands.
type WorkflowsResumeCommand struct{ base }

// Flags implements Command.
func (c *WorkflowsResumeCommand) Flags() *pflag.FlagSet { return c.flagSet() }

// Run implements Command.
func (c *WorkflowsResumeCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 0)
	if err != nil {
		return err
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	d, err := cliWorkflows().Of(w)
	if err != nil {
		return err
	}
	return c.runWorkflow(ctx, w, d)
}

// WorkflowsInputCommand gives a waiting step its input.
type WorkflowsInputCommand struct{ base }

// Flags implements Command.
func (c *WorkflowsInputCommand) Flags() *pflag.FlagSet { return c.flagSet() }

// Run implements Command.
func (c *WorkflowsInputCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 2)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return c.usage("want ID STEP JSON")
	}
	input, err := c.parseInput("JSON", pos[2])
	if err != nil {
		return err
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	if err := w.Provide(ctx, pos[1], input); err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(c.Stdout, lineOf(w))
	}
	fmt.Fprintf(c.Stdout, "input given to %s of workflow %s (now %s): loom workflows resume %s runs it on\n", pos[1], w.ID(), w.Status(), w.ID())
	return nil
}

// WorkflowsEditCommand is a person's edit of a workflow's execution
// (workflow.Update): its input, steps' outputs, the steps that run next.
type WorkflowsEditCommand struct {
	base
	By, Checkpoint, Input string
	Version               int64
	Outputs, Next         []string
	End                   bool
}

// Flags implements Command.
func (c *WorkflowsEditCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.By, "by", "", "who edits: a person's `NAME`, recorded with the edit (required)")
	fs.StringVar(&c.Checkpoint, "checkpoint", "", "edit at this checkpoint `NAME` (default: the head)")
	fs.Int64Var(&c.Version, "version", 0, "edit at this `VERSION` (default: the head)")
	fs.StringVar(&c.Input, "input", "", "the workflow's new input, as `JSON`")
	fs.StringArrayVar(&c.Outputs, "output", nil, "a step's output, as `STEP=JSON` (repeatable); a step that waits, failed or has not ended ends with it")
	fs.StringSliceVar(&c.Next, "next", nil, "the `STEPS` that run next, comma-separated")
	fs.BoolVar(&c.End, "end", false, "end the workflow (no step runs next)")
	return fs
}

// Run implements Command.
func (c *WorkflowsEditCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 0)
	if err != nil {
		return err
	}
	if c.Checkpoint != "" && c.Version != 0 {
		return c.usage("--checkpoint or --version, not both")
	}
	if c.End && len(c.Next) > 0 {
		return c.usage("--next or --end, not both")
	}
	u := workflow.Update{By: c.By}
	input, err := c.parseInput("--input", c.Input)
	if err != nil {
		return err
	}
	if input != nil {
		u.Input = input
	}
	for _, o := range c.Outputs {
		step, raw, ok := strings.Cut(o, "=")
		if !ok || step == "" {
			return c.usage("--output %q: want STEP=JSON", clip(o, 60))
		}
		out, err := c.parseInput("--output "+step, raw)
		if err != nil {
			return err
		}
		if out == nil {
			return c.usage("--output %q: want STEP=JSON", clip(o, 60))
		}
		if u.Outputs == nil {
			u.Outputs = map[string]any{}
		}
		u.Outputs[step] = out
	}
	switch {
	case c.End:
		u.Next = []string{}
	case len(c.Next) > 0:
		u.Next = c.Next
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	if err := w.Update(ctx, workflow.Point{Checkpoint: c.Checkpoint, Version: c.Version}, u); err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(c.Stdout, lineOf(w))
	}
	fmt.Fprintf(c.Stdout, "edited workflow %s by %s (now %s at version %d): loom workflows resume %s runs it on\n", w.ID(), c.By, w.Status(), w.Version(), w.ID())
	return nil
}
