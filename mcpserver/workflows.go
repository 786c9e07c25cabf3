package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// registerWorkflows adds the workflow tools: read a tenant's workflows
// (package workflow), checkpoint them and move them back in time. Their
// steps run in the programs that declare them.
func registerWorkflows(s *mcp.Server, t *threadTools, logger *slog.Logger) {
	no := new(bool)
	read := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: no}
	write := &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no}
	AddTool(s, &mcp.Tool{
		Name:        "workflow_list",
		Title:       "Workflows: list",
		Description: "Workflows: list the workflows, with their status (pending, running, waiting, done, failed), a page at a time: pass next_cursor back as cursor for the next page.",
		Annotations: read,
	}, logger, t.workflowList)
	AddTool(s, &mcp.Tool{
		Name:        "workflow_get",
		Title:       "Workflows: get",
		Description: "Workflows: get a workflow's execution state — every step attempt with its input, output and error, the current and next steps, the steps waiting for input, its sub-threads — and its checkpoints, now or at an earlier version; with messages, each sub-thread's newest messages as the workflow recorded them there.",
		Annotations: read,
	}, logger, t.workflowGet)
	AddTool(s, &mcp.Tool{
		Name:        "workflow_history",
		Title:       "Workflows: history",
		Description: "Workflows: a workflow's versions, newest first: each step's start and end, each checkpoint, restore and input. workflow_get reads the workflow at any of them. Page with before.",
		Annotations: read,
	}, logger, t.workflowHistory)
	AddTool(s, &mcp.Tool{
		Name:        "workflow_checkpoint",
		Title:       "Workflows: checkpoint",
		Description: "Workflows: checkpoint a whole workflow: its execution state and the head of every sub-thread, under a name unique to it, so that workflow_restore can return to it.",
		Annotations: write,
	}, logger, t.workflowCheckpoint)
	AddTool(s, &mcp.Tool{
		Name:        "workflow_restore",
		Title:       "Workflows: restore",
		Description: "Workflows: move a whole workflow — its execution state and every sub-thread — back to a checkpoint or a version, at once. It is a new version: nothing is lost, and a later restore can go forward again. Refused while the workflow runs.",
		Annotations: write,
	}, logger, t.workflowRestore)
	AddTool(s, &mcp.Tool{
		Name:        "workflow_edit",
		Title:       "Workflows: edit",
		Description: "Workflows: a person's edit of a workflow's execution (LangGraph's update_state), recorded with who made it (by): set its input, a step's output (a step that waits, failed or has not ended ends with it and does not run, as as_node; an ended step's output is replaced), or the steps that run next ([] ends it), at its head or at a checkpoint or version (moved back there at once). Its next run goes on from the edit. Refused while the workflow runs.",
		Annotations: write,
	}, logger, t.workflowEdit)
}

func (t *threadTools) workflow(ctx context.Context, id string) (*workflow.Workflow, error) {
	if id == "" {
		return nil, fmt.Errorf("id is required: %w", thread.ErrInvalid)
	}
	return workflow.Open(ctx, t.scoped(ctx), id)
}

type workflowInfo struct {
	ID         string          `json:"id"`
	Title      string          `json:"title,omitzero"`
	Version    int64           `json:"version"`
	Status     workflow.Status `json:"status"`
	Round      int             `json:"round"`
	SubThreads []string        `json:"sub_threads" jsonschema:"the keys of its sub-threads; the thread of key k is <id>.k"`
	UpdatedAt  time.Time       `json:"updated_at"`
	Stalled    *stalledInfo    `json:"stalled,omitzero" jsonschema:"set when its status says running but no live runner holds it: nothing moves it until its program runs it again"`
}

// stalledInfo says since when a stalled workflow has not moved, as the
// HTTP API does: the time of its last commit, which a live runner renews.
type stalledInfo struct {
	Since time.Time `json:"since" jsonschema:"the time of its last commit"`
}

func (w workflowInfo) line() string {
	status := string(w.Status)
	if w.Stalled != nil {
		status += ", stalled since " + w.Stalled.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s %q: %s, round %d, version %d, sub-threads %s", w.ID, w.Title, status, w.Round, w.Version, strings.Join(w.SubThreads, ", "))
}

// workflowOf describes w as of its handle's version, from what the handle
// holds: no step record is read. It is stalled when its handle's version,
// the newest it read, is (workflow.Workflow.Stalled).
func workflowOf(w *workflow.Workflow) workflowInfo {
	r := w.Thread().Record()
	info := workflowInfo{ID: r.ID, Title: r.Title, Version: w.Version(), Status: w.Status(), Round: w.Round(), SubThreads: w.SubThreadKeys(), UpdatedAt: r.UpdatedAt}
	if w.Stalled(time.Now()) {
		info.Stalled = &stalledInfo{Since: r.UpdatedAt}
	}
	return info
}

// --- workflow_list

type workflowListIn struct {
	Limit  int    `json:"limit,omitzero" jsonschema:"the most workflows to return: 50 when left out, at most 1000"`
	Cursor string `json:"cursor,omitzero" jsonschema:"next_cursor of the previous page"`
}

type workflowListOut struct {
	Workflows  []workflowInfo `json:"workflows"`
	NextCursor string         `json:"next_cursor,omitzero" jsonschema:"set when there are more workflows: pass it as cursor"`
}

func (o workflowListOut) Summary() string {
	var b strings.Builder
	b.WriteString(count(len(o.Workflows), "workflow"))
	if o.NextCursor != "" {
		fmt.Fprintf(&b, " (more: cursor %s)", o.NextCursor)
	}
	for _, w := range o.Workflows {
		b.WriteString("\n" + w.line())
	}
	return b.String()
}

func (t *threadTools) workflowList(ctx context.Context, in workflowListIn) (workflowListOut, error) {
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return workflowListOut{}, err
	}
	out := workflowListOut{Workflows: []workflowInfo{}}
	for w, err := range workflow.List(ctx, t.scoped(ctx), thread.ListOptions{After: in.Cursor, Limit: limit + 1}) {
		if err != nil {
			return workflowListOut{}, err
		}
		if len(out.Workflows) == limit {
			out.NextCursor = out.Workflows[limit-1].ID
			break
		}
		out.Workflows = append(out.Workflows, workflowOf(w))
	}
	return out, nil
}

// --- workflow_get

type workflowGetIn struct {
	ID       string `json:"id" jsonschema:"the workflow's id"`
	Version  int64  `json:"version,omitzero" jsonschema:"read the workflow as it was at this version (see workflow_history); the current version when left out"`
	Messages int    `json:"messages,omitzero" jsonschema:"how many of each sub-thread's newest messages to return: none when left out, at most 1000"`
}

type workflowGetOut struct {
	Workflow    workflowInfo                 `json:"workflow"`
	Execution   *workflow.Execution          `json:"execution"`
	Checkpoints []checkpointInfo             `json:"checkpoints"`
	Messages    map[string][]message.Message `json:"messages,omitzero" jsonschema:"each sub-thread's newest messages, by key, as the workflow recorded it at the version read"`
}

func (o workflowGetOut) Summary() string {
	var b strings.Builder
	ex := o.Execution
	b.WriteString("workflow " + o.Workflow.line())
	if ex.Version != o.Workflow.Version {
		fmt.Fprintf(&b, " (read at version %d)", ex.Version)
	}
	if o.Workflow.Stalled != nil {
		b.WriteString("\nstalled: no live runner holds it; it goes on from its last committed step when its program runs it again")
	}
	for _, s := range ex.Steps {
		fmt.Fprintf(&b, "\nstep %s: %s", s.ID, s.Status)
		if s.Error != "" {
			b.WriteString(": " + s.Error)
		}
	}
	if len(ex.Current) > 0 {
		fmt.Fprintf(&b, "\ncurrent: %s; completed: %s; next: %s", strings.Join(ex.Current, ", "), strings.Join(ex.Completed, ", "), strings.Join(ex.Next, ", "))
	}
	for _, w := range ex.Waiting {
		fmt.Fprintf(&b, "\nwaiting for input: step %s asks %s", w.Step, w.Prompt)
	}
	for _, cp := range o.Checkpoints {
		fmt.Fprintf(&b, "\ncheckpoint %q at version %d", cp.Name, cp.Version)
	}
	for key, msgs := range o.Messages {
		fmt.Fprintf(&b, "\nsub-thread %s: %s", key, count(len(msgs), "message"))
	}
	return b.String()
}

func (t *threadTools) workflowGet(ctx context.Context, in workflowGetIn) (workflowGetOut, error) {
	if in.Version < 0 || in.Messages < 0 || in.Messages > maxLimit {
		return workflowGetOut{}, fmt.Errorf("version must not be negative, messages 0 to %d: %w", maxLimit, thread.ErrInvalid)
	}
	w, err := t.workflow(ctx, in.ID)
	if err != nil {
		return workflowGetOut{}, err
	}
	out := workflowGetOut{Checkpoints: []checkpointInfo{}}
	if in.Messages > 0 {
		snap, err := w.At(ctx, workflow.Point{Version: in.Version}, workflow.AtOptions{Last: in.Messages})
		if err != nil {
			return workflowGetOut{}, err
		}
		out.Execution, out.Messages = snap.Execution, snap.Messages
	} else if out.Execution, err = w.Execution(ctx, in.Version); err != nil {
		return workflowGetOut{}, err
	}
	out.Workflow = workflowOf(w)
	for cp, err := range w.Checkpoints(ctx) {
		if err != nil {
			return workflowGetOut{}, err
		}
		out.Checkpoints = append(out.Checkpoints, checkpoint(cp))
	}
	return out, nil
}

// --- workflow_history

func (t *threadTools) workflowHistory(ctx context.Context, in historyIn) (historyOut, error) {
	return historyPage(ctx, in, func() (string, historyFunc, error) {
		w, err := t.workflow(ctx, in.ID)
		if err != nil {
			return "", nil, err
		}
		return w.ID(), w.History, nil
	})
}

// --- workflow_checkpoint

type workflowCheckpointIn struct {
	ID   string `json:"id" jsonschema:"the workflow's id"`
	Name string `json:"name" jsonschema:"the checkpoint's name, unique to the workflow"`
}

type workflowCheckpointOut struct {
	Workflow   string         `json:"workflow"`
	Checkpoint checkpointInfo `json:"checkpoint"`
}

func (o workflowCheckpointOut) Summary() string {
	return fmt.Sprintf("checkpoint %q of workflow %s at version %d", o.Checkpoint.Name, o.Workflow, o.Checkpoint.Version)
}

func (t *threadTools) workflowCheckpoint(ctx context.Context, in workflowCheckpointIn) (workflowCheckpointOut, error) {
	w, err := t.workflow(ctx, in.ID)
	if err != nil {
		return workflowCheckpointOut{}, err
	}
	cp, err := w.Checkpoint(ctx, in.Name)
	if err != nil {
		return workflowCheckpointOut{}, err
	}
	return workflowCheckpointOut{Workflow: w.ID(), Checkpoint: checkpoint(cp)}, nil
}

// --- workflow_restore

type workflowRestoreOut struct {
	Workflow workflowInfo `json:"workflow" jsonschema:"the workflow after the restore"`
}

func (o workflowRestoreOut) Summary() string { return "restored workflow " + o.Workflow.line() }

func (t *threadTools) workflowRestore(ctx context.Context, in rollbackIn) (workflowRestoreOut, error) {
	if (in.Checkpoint == "") == (in.Version == 0) || in.Version < 0 {
		return workflowRestoreOut{}, fmt.Errorf("give checkpoint or version (at least 1), not both nor neither: %w", thread.ErrInvalid)
	}
	w, err := t.workflow(ctx, in.ID)
	if err != nil {
		return workflowRestoreOut{}, err
	}
	if err := w.Restore(ctx, workflow.Point{Checkpoint: in.Checkpoint, Version: in.Version}); err != nil {
		return workflowRestoreOut{}, err
	}
	return workflowRestoreOut{Workflow: workflowOf(w)}, nil
}

// --- workflow_edit

type workflowEditIn struct {
	ID         string         `json:"id" jsonschema:"the workflow's id"`
	By         string         `json:"by" jsonschema:"who edits: a person's name"`
	Checkpoint string         `json:"checkpoint,omitzero" jsonschema:"edit at this checkpoint; with no checkpoint or version, at the head"`
	Version    int64          `json:"version,omitzero" jsonschema:"edit at this version of the workflow"`
	Input      any            `json:"input,omitzero" jsonschema:"the workflow's new input, any JSON value"`
	Outputs    map[string]any `json:"outputs,omitzero" jsonschema:"steps' outputs by step name, each any JSON value"`
	Next       *[]string      `json:"next,omitzero" jsonschema:"the steps that run next; [] ends the workflow"`
}

type workflowEditOut struct {
	Workflow workflowInfo `json:"workflow" jsonschema:"the workflow after the edit"`
}

func (o workflowEditOut) Summary() string { return "edited workflow " + o.Workflow.line() }

func (t *threadTools) workflowEdit(ctx context.Context, in workflowEditIn) (workflowEditOut, error) {
	if in.Version < 0 || in.Checkpoint != "" && in.Version != 0 {
		return workflowEditOut{}, fmt.Errorf("give checkpoint or version (at least 1), or neither for the head: %w", thread.ErrInvalid)
	}
	u := workflow.Update{By: in.By, Input: in.Input, Outputs: in.Outputs}
	if in.Next != nil {
		u.Next = append([]string{}, *in.Next...)
	}
	w, err := t.workflow(ctx, in.ID)
	if err != nil {
		return workflowEditOut{}, err
	}
	if err := w.Update(ctx, workflow.Point{Checkpoint: in.Checkpoint, Version: in.Version}, u); err != nil {
		return workflowEditOut{}, err
	}
	return workflowEditOut{Workflow: workflowOf(w)}, nil
}
