package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// registerWorkflowRuns adds the tools that run the workflows of rn's
// registry: start one by name, give input to a waiting step, resume one.
// The runs go on in the server's background, after the call.
func registerWorkflowRuns(s *mcp.Server, t *threadTools, rn *workflow.Runner, logger *slog.Logger) {
	no := new(bool)
	write := &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no}
	var names []string
	for _, d := range rn.Registry().Definitions() {
		line := d.Name
		if d.Description != "" {
			line += " (" + d.Description + ")"
		}
		names = append(names, line)
	}
	known := "none"
	if len(names) > 0 {
		known = strings.Join(names, "; ")
	}
	r := &runTools{threadTools: t, rn: rn}
	AddTool(s, &mcp.Tool{
		Name:        "workflow_start",
		Title:       "Workflows: start",
		Description: "Workflows: start a workflow this server has registered, by name, with an input: it is made (id given or a fresh one) and runs in the server's background; the call returns at once. Follow it with workflow_get; a step that asks for input waits for workflow_input, then workflow_resume. Registered: " + known + ".",
		Annotations: write,
	}, logger, r.start)
	AddTool(s, &mcp.Tool{
		Name:        "workflow_input",
		Title:       "Workflows: give input",
		Description: "Workflows: give the input a waiting step asked for (workflow_get shows what it asks); then workflow_resume runs the workflow on.",
		Annotations: write,
	}, logger, r.input)
	AddTool(s, &mcp.Tool{
		Name:        "workflow_resume",
		Title:       "Workflows: resume",
		Description: "Workflows: run a workflow that was started by name again, in the server's background, from where it stands: after input was given, after its runner crashed or the server restarted, after a step failed. A done workflow is left as it is; one being run is refused (busy).",
		Annotations: write,
	}, logger, r.resume)
}

type runTools struct {
	*threadTools
	rn *workflow.Runner
}

type workflowStartIn struct {
	Name  string            `json:"name" jsonschema:"the registered workflow's name"`
	ID    string            `json:"id,omitzero" jsonschema:"the new workflow's id; a fresh one when left out"`
	Title string            `json:"title,omitzero" jsonschema:"its title; the registered one's when left out"`
	Input any               `json:"input,omitzero" jsonschema:"its input, any JSON value, given to its first steps"`
	Label map[string]string `json:"labels,omitzero" jsonschema:"labels of the workflow's thread"`
}

type workflowRunOut struct {
	Workflow workflowInfo `json:"workflow"`
	Running  bool         `json:"running" jsonschema:"whether a run was started in the background (false: nothing to run)"`
}

func (o workflowRunOut) Summary() string {
	if o.Running {
		return "running in the background: workflow " + o.Workflow.line()
	}
	return "nothing to run: workflow " + o.Workflow.line()
}

func (r *runTools) start(ctx context.Context, in workflowStartIn) (workflowRunOut, error) {
	if in.Name == "" {
		return workflowRunOut{}, fmt.Errorf("name is required: %w", thread.ErrInvalid)
	}
	w, err := r.rn.Start(context.WithoutCancel(ctx), r.scoped(ctx), in.Name, workflow.CreateOptions{ID: in.ID, Title: in.Title, Labels: in.Label, Input: in.Input})
	if err != nil {
		return workflowRunOut{}, err
	}
	return workflowRunOut{Workflow: workflowOf(w), Running: true}, nil
}

type workflowResumeIn struct {
	ID string `json:"id" jsonschema:"the workflow's id"`
}

func (r *runTools) resume(ctx context.Context, in workflowResumeIn) (workflowRunOut, error) {
	if in.ID == "" {
		return workflowRunOut{}, fmt.Errorf("id is required: %w", thread.ErrInvalid)
	}
	w, err := r.rn.Resume(context.WithoutCancel(ctx), r.scoped(ctx), in.ID)
	if err != nil {
		return workflowRunOut{}, err
	}
	return workflowRunOut{Workflow: workflowOf(w), Running: w.Status() != workflow.StatusDone}, nil
}

type workflowInputIn struct {
	ID    string `json:"id" jsonschema:"the workflow's id"`
	Step  string `json:"step" jsonschema:"the waiting step's name"`
	Input any    `json:"input" jsonschema:"the input, any JSON value, that the step's question asks for"`
}

type workflowInputOut struct {
	Workflow workflowInfo `json:"workflow" jsonschema:"the workflow after the input"`
}

func (o workflowInputOut) Summary() string {
	return "input given; workflow_resume runs it on: workflow " + o.Workflow.line()
}

func (r *runTools) input(ctx context.Context, in workflowInputIn) (workflowInputOut, error) {
	if in.Step == "" || in.Input == nil {
		return workflowInputOut{}, fmt.Errorf("step and input are required: %w", thread.ErrInvalid)
	}
	if in.ID == "" {
		return workflowInputOut{}, fmt.Errorf("id is required: %w", thread.ErrInvalid)
	}
	// A run of this server that left the workflow waiting may hold it a
	// moment longer: the input waits for it to let go.
	w, err := r.rn.Provide(ctx, r.scoped(ctx), in.ID, in.Step, in.Input)
	if err != nil {
		return workflowInputOut{}, err
	}
	return workflowInputOut{Workflow: workflowOf(w)}, nil
}
