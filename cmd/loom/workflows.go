package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// workflowArgs parses a workflows command's arguments: the workflow's id
// first, then up to more.
func (b *base) workflowArgs(args []string, more int) ([]string, error) {
	pos, err := b.positional(args, 0, 1+more)
	if err != nil {
		return nil, err
	}
	if len(pos) == 0 {
		return nil, b.usage("missing the workflow ID")
	}
	return pos, nil
}

// openWorkflow opens the store and the workflow id in it. The caller
// closes db.
func (b *base) openWorkflow(ctx context.Context, id string) (*thread.DB, *workflow.Workflow, error) {
	db, err := b.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	w, err := workflow.Open(ctx, db, id)
	if errors.Is(err, thread.ErrNotFound) {
		err = errorOf(thread.ErrNotFound, "workflow %q not found in %s", id, storeName(b.Store, db.Tenant()))
	}
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, w, nil
}

// workflowLine is a workflow in a listing, for --json.
type workflowLine struct {
	ID         string          `json:"id"`
	Title      string          `json:"title"`
	Status     workflow.Status `json:"status"`
	Round      int             `json:"round"`
	Version    int64           `json:"version"`
	SubThreads []string        `json:"sub_threads"`
	// Stalled is set when the workflow is stalled, as the HTTP API says it.
	Stalled *stalledJSON `json:"stalled,omitzero"`
}

// lineOf is w as a workflowLine, as its handle has it.
func lineOf(w *workflow.Workflow) workflowLine {
	return workflowLine{ID: w.ID(), Title: w.Title(), Status: w.Status(), Round: w.Round(), Version: w.Version(), SubThreads: w.SubThreadKeys()}
}

// stalledJSON is the "stalled" object of a workflow whose status says
// running but that no live runner holds (workflow.Workflow.Stalled), as
// the HTTP API has it: Since is the time of its last commit, which a live
// runner renews.
type stalledJSON struct {
	Since time.Time `json:"since"`
}

// stalledOf is w's stalled object when stalled, else nil: the time of its
// last commit.
func stalledOf(w *workflow.Workflow, stalled bool) *stalledJSON {
	if !stalled {
		return nil
	}
	return &stalledJSON{Since: w.Thread().Record().UpdatedAt}
}

// statusText is a workflow's status for people: "running, stalled since
// <time>" when it is stalled.
func statusText(status workflow.Status, st *stalledJSON) string {
	if st == nil {
		return string(status)
	}
	return fmt.Sprintf("%s, stalled since %s", status, formatTime(st.Since))
}

// WorkflowsListCommand lists workflows.
type WorkflowsListCommand struct {
	base
	Limit int
}

// Flags implements Command.
func (c *WorkflowsListCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.IntVar(&c.Limit, "limit", 0, "list at most `N` workflows (0: all)")
	return fs
}

// Run implements Command.
func (c *WorkflowsListCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	if c.Limit < 0 {
		return c.usage("--limit must not be negative")
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	var t *table
	if !c.JSON {
		t = newTable(c.Stdout, "ID", "TITLE", "STATUS", "ROUND", "VERSION", "UPDATED", "SUB-THREADS")
	}
	for w, err := range workflow.List(ctx, db, thread.ListOptions{Limit: c.Limit}) {
		if err != nil {
			return fmt.Errorf("list workflows: %w", err)
		}
		// The handle holds status and round: no step record is read.
		r := w.Thread().Record()
		stalled := stalledOf(w, w.Stalled(time.Now()))
		if c.JSON {
			if err := writeJSONLine(c.Stdout, workflowLine{r.ID, r.Title, w.Status(), w.Round(), r.Version, w.SubThreadKeys(), stalled}); err != nil {
				return err
			}
			continue
		}
		t.row(r.ID, clip(r.Title, 40), statusText(w.Status(), stalled), strconv.Itoa(w.Round()), strconv.FormatInt(r.Version, 10), formatTime(r.UpdatedAt), strings.Join(w.SubThreadKeys(), ","))
	}
	if t != nil {
		return t.flush()
	}
	return nil
}

// WorkflowsShowCommand shows a workflow's execution state.
type WorkflowsShowCommand struct {
	base
	Version    int64
	Checkpoint string
	Last       int
}

// Flags implements Command.
func (c *WorkflowsShowCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.Int64Var(&c.Version, "version", 0, "show the workflow as it was at version `V`")
	fs.StringVar(&c.Checkpoint, "checkpoint", "", "show the workflow as it was at checkpoint `NAME`")
	fs.IntVar(&c.Last, "last", 0, "show each sub-thread's newest `N` messages as the workflow recorded them")
	return fs
}

// Run implements Command.
func (c *WorkflowsShowCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 0)
	if err != nil {
		return err
	}
	switch {
	case c.Version < 0 || c.Last < 0:
		return c.usage("--version and --last must not be negative")
	case c.Version != 0 && c.Checkpoint != "":
		return c.usage("--version and --checkpoint do not go together")
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	snap, err := w.At(ctx, workflow.Point{Checkpoint: c.Checkpoint, Version: c.Version}, workflow.AtOptions{Last: max(c.Last, 1)})
	if err != nil {
		return err
	}
	if c.Last == 0 {
		snap.Messages = nil
	}
	// Only the newest version can be stalled: a past one is what it was.
	stalled := stalledOf(w, snap.Version == w.Version() && snap.Execution.Stalled(time.Now()))
	if c.JSON {
		return writeJSON(c.Stdout, struct {
			*workflow.Snapshot
			Stalled *stalledJSON `json:"stalled,omitzero"`
		}{snap, stalled})
	}
	printExecution(c.Stdout, w, snap, stalled)
	return nil
}

// printExecution writes a workflow's execution state for people; stalled
// is set when it is stalled.
func printExecution(out io.Writer, w *workflow.Workflow, s *workflow.Snapshot, stalled *stalledJSON) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workflow\t%s\n", w.ID())
	if t := w.Title(); t != "" {
		fmt.Fprintf(tw, "title\t%s\n", oneLine(t))
	}
	fmt.Fprintf(tw, "version\t%d", s.Version)
	if s.Version != w.Version() {
		fmt.Fprintf(tw, " (of %d)", w.Version())
	}
	fmt.Fprintf(tw, "\nstatus\t%s\n", statusText(s.Status, stalled))
	if stalled != nil {
		fmt.Fprintf(tw, "\tno live runner holds it: it goes on from its last committed step when its program runs it again\n")
	}
	fmt.Fprintf(tw, "round\t%d: %s (done: %s; next: %s)\n", s.Round, orDash(s.Current), orDash(s.Completed), orDash(s.Next))
	for _, wt := range s.Waiting {
		fmt.Fprintf(tw, "waiting\t%s asks %s\n", wt.Step, clip(oneLine(string(wt.Prompt)), 120))
	}
	if s.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", oneLine(s.Error))
	}
	if s.Runner != nil {
		fmt.Fprintf(tw, "runner\t%s on %s (pid %d) until %s\n", s.Runner.ID, s.Runner.Host, s.Runner.PID, formatTime(s.Runner.Until))
	}
	tw.Flush()
	fmt.Fprintln(out)
	t := newTable(out, "STEP", "STATUS", "START", "OUTPUT", "NEXT")
	for _, st := range s.Steps {
		result := string(st.Output)
		if st.Error != "" {
			result = "error: " + st.Error
		}
		t.row(st.ID, string(st.Status), formatTime(st.Start), clip(oneLine(result), 60), strings.Join(st.Next, ","))
	}
	t.flush()
	fmt.Fprintln(out)
	t = newTable(out, "SUB-THREAD", "THREAD", "VERSION")
	for _, st := range s.SubThreads {
		t.row(st.Key, st.Thread, strconv.FormatInt(st.Version, 10))
	}
	t.flush()
	for _, st := range s.SubThreads {
		msgs, ok := s.Messages[st.Key]
		if !ok {
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", st.Key)
		for _, m := range msgs {
			fmt.Fprintf(out, "  %s: %s\n", m.Role, clip(oneLine(m.Text()), 200))
		}
	}
}

func orDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

// WorkflowsHistoryCommand lists a workflow's versions: each step's start
// and end, each checkpoint, restore and input.
type WorkflowsHistoryCommand struct {
	base
	Limit int
}

// Flags implements Command.
func (c *WorkflowsHistoryCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.IntVar(&c.Limit, "limit", 0, "list at most `N` versions, newest first (0: all)")
	return fs
}

// Run implements Command.
func (c *WorkflowsHistoryCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 0)
	if err != nil {
		return err
	}
	if c.Limit < 0 {
		return c.usage("--limit must not be negative")
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	return c.printHistory(w.ID(), w.History(ctx, thread.HistoryOptions{Limit: c.Limit}), "WHAT", func(e thread.HistoryEntry) string {
		// What the workflow did: its commits say it in their metadata.
		if e.Commit != "" {
			if cm, err := db.Store().Commit(ctx, e.Commit); err == nil && cm.Metadata["workflow"] != "" {
				return cm.Metadata["workflow"]
			}
		}
		return "-"
	})
}

// WorkflowsCheckpointCommand checkpoints a whole workflow, or lists its
// checkpoints.
type WorkflowsCheckpointCommand struct {
	base
	List bool
}

// Flags implements Command.
func (c *WorkflowsCheckpointCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.BoolVar(&c.List, "list", false, "list the workflow's checkpoints")
	return fs
}

// Run implements Command.
func (c *WorkflowsCheckpointCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 1)
	if err != nil {
		return err
	}
	switch {
	case c.List && len(pos) == 2:
		return c.usage("unexpected argument %q", pos[1])
	case !c.List && len(pos) == 1:
		return c.usage("missing the checkpoint NAME (or --list)")
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	if c.List {
		var t *table
		if !c.JSON {
			t = newTable(c.Stdout, "NAME", "VERSION", "CREATED")
		}
		for cp, err := range w.Checkpoints(ctx) {
			if err != nil {
				return err
			}
			if c.JSON {
				if err := writeJSONLine(c.Stdout, toCheckpointJSON(cp)); err != nil {
					return err
				}
				continue
			}
			t.row(cp.Name, strconv.FormatInt(cp.Version, 10), formatTime(cp.CreatedAt))
		}
		if t != nil {
			return t.flush()
		}
		return nil
	}
	cp, err := w.Checkpoint(ctx, pos[1])
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(c.Stdout, toCheckpointJSON(cp))
	}
	fmt.Fprintf(c.Stdout, "checkpoint %q of workflow %s and its %d sub-threads at version %d\n", cp.Name, w.ID(), len(w.SubThreadKeys()), cp.Version)
	return nil
}

// pointArgs reads a checkpoint NAME argument or --version.
func (b *base) pointArgs(pos []string, version int64) (workflow.Point, error) {
	switch {
	case version < 0:
		return workflow.Point{}, b.usage("--version must be at least 1")
	case len(pos) == 2 && version != 0:
		return workflow.Point{}, b.usage("a checkpoint NAME or --version, not both")
	case len(pos) == 2:
		return workflow.Point{Checkpoint: pos[1]}, nil
	case version != 0:
		return workflow.Point{Version: version}, nil
	}
	return workflow.Point{}, b.usage("missing the checkpoint NAME (or --version V)")
}

// WorkflowsRestoreCommand moves a whole workflow back to a checkpoint or
// version.
type WorkflowsRestoreCommand struct {
	base
	Version int64
}

// Flags implements Command.
func (c *WorkflowsRestoreCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.Int64Var(&c.Version, "version", 0, "restore to where the workflow was at version `V`")
	return fs
}

// Run implements Command.
func (c *WorkflowsRestoreCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 1)
	if err != nil {
		return err
	}
	p, err := c.pointArgs(pos, c.Version)
	if err != nil {
		return err
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	if err := w.Restore(ctx, p); err != nil {
		return err
	}
	return c.printWorkflow(ctx, w, "restored workflow %s to %s", w.ID(), p)
}

// WorkflowsForkCommand forks a whole workflow at a checkpoint or version.
type WorkflowsForkCommand struct {
	base
	Version int64
	ID      string
	Title   string
}

// Flags implements Command.
func (c *WorkflowsForkCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.Int64Var(&c.Version, "version", 0, "fork the workflow as it was at version `V`")
	fs.StringVar(&c.ID, "id", "", "the new workflow's `ID` (default: a fresh one)")
	fs.StringVar(&c.Title, "title", "", "the new workflow's `TITLE` (default: the source's)")
	return fs
}

// Run implements Command.
func (c *WorkflowsForkCommand) Run(ctx context.Context, args []string) error {
	pos, err := c.workflowArgs(args, 1)
	if err != nil {
		return err
	}
	p, err := c.pointArgs(pos, c.Version)
	if err != nil {
		return err
	}
	db, w, err := c.openWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	defer db.Close()
	f, err := w.Fork(ctx, p, workflow.ForkOptions{ID: c.ID, Title: c.Title})
	if err != nil {
		return err
	}
	return c.printWorkflow(ctx, f, "forked workflow %s at %s into %s", w.ID(), p, f.ID())
}

// printWorkflow writes a sentence, or with --json the workflow's execution
// state.
func (b *base) printWorkflow(ctx context.Context, w *workflow.Workflow, format string, args ...any) error {
	ex, err := w.Execution(ctx, 0)
	if err != nil {
		return err
	}
	stalled := stalledOf(w, ex.Version == w.Version() && ex.Stalled(time.Now()))
	if b.JSON {
		return writeJSON(b.Stdout, struct {
			*workflow.Execution
			Stalled *stalledJSON `json:"stalled,omitzero"`
		}{ex, stalled})
	}
	fmt.Fprintf(b.Stdout, format+": %s, round %d, version %d\n", append(args, statusText(ex.Status, stalled), ex.Round, ex.Version)...)
	return nil
}
