package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/wftest"
	"github.com/loomthreads/loom/workflow"
)

// TestWorkflowRunTools starts a registered workflow by MCP, gives its
// waiting step the input it asks for and resumes it to its end.
func TestWorkflowRunTools(t *testing.T) {
	db := newDB(t)
	reg := workflow.NewRegistry()
	g := workflow.NewGraph().
		Add("draft", func(_ context.Context, s *workflow.Step) (any, error) { return s.Input(), nil }, "review").
		Add("review", func(_ context.Context, s *workflow.Step) (any, error) {
			ok, err := s.Ask("publish?")
			if err != nil {
				return nil, err
			}
			return json.RawMessage(ok), nil
		})
	if err := reg.Register("approval", g, &workflow.RegisterOptions{Description: "waits for a yes"}); err != nil {
		t.Fatal(err)
	}
	rn := workflow.NewRunner(reg, &workflow.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { rn.Close() })
	srv := httpServer(t, db, &Options{Workflows: rn})
	alpha, beta := connectHTTP(t, srv, keyAlpha), connectHTTP(t, srv, keyBeta)

	tools, err := alpha.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	described := false
	for _, tool := range tools.Tools {
		if tool.Name == "workflow_start" {
			described = strings.Contains(tool.Description, "approval (waits for a yes)")
		}
	}
	if !described {
		t.Fatal("workflow_start does not name the registered workflows")
	}

	started := ok[workflowRunOut](t, alpha, "workflow_start", map[string]any{"name": "approval", "id": "post", "input": map[string]any{"words": 2}})
	if started.Workflow.ID != "post" || !started.Running {
		t.Fatalf("start: %+v", started)
	}
	if msg := fails(t, alpha, "workflow_start", map[string]any{"name": "nobody"}); !strings.HasPrefix(msg, "unknown_workflow") {
		t.Fatalf("start of an unknown name: %s", msg)
	}
	if msg := fails(t, alpha, "workflow_start", map[string]any{"name": "approval", "id": "post"}); !strings.HasPrefix(msg, "conflict") {
		t.Fatalf("start with an id taken: %s", msg)
	}
	alphaDB := db.WithTenant("alpha")
	if st := wftest.Settle(t, alphaDB, "post"); st != workflow.StatusWaiting {
		t.Fatalf("status %s, want waiting", st)
	}
	if msg := fails(t, beta, "workflow_input", map[string]any{"id": "post", "step": "review", "input": true}); !strings.HasPrefix(msg, "not_found") {
		t.Fatalf("beta gives input to alpha's workflow: %s", msg)
	}
	if msg := fails(t, alpha, "workflow_input", map[string]any{"id": "post", "step": "draft", "input": true}); !strings.HasPrefix(msg, "conflict") {
		t.Fatalf("input for a step that does not wait: %s", msg)
	}
	ok[workflowInputOut](t, alpha, "workflow_input", map[string]any{"id": "post", "step": "review", "input": map[string]any{"approved": true}})
	if res := ok[workflowRunOut](t, alpha, "workflow_resume", map[string]any{"id": "post"}); !res.Running {
		t.Fatalf("resume: %+v", res)
	}
	if st := wftest.Settle(t, alphaDB, "post"); st != workflow.StatusDone {
		t.Fatalf("status %s, want done", st)
	}
	got := ok[workflowGetOut](t, alpha, "workflow_get", map[string]any{"id": "post"})
	if n := len(got.Execution.Steps); n != 3 || string(got.Execution.Steps[2].Output) != `{"approved":true}` || string(got.Execution.Steps[0].Output) != `{"words":2}` {
		t.Fatalf("steps: %+v", got.Execution.Steps)
	}
	if res := ok[workflowRunOut](t, alpha, "workflow_resume", map[string]any{"id": "post"}); res.Running || res.Workflow.Status != workflow.StatusDone {
		t.Fatalf("resume of a done workflow: %+v", res)
	}
	if msg := fails(t, beta, "workflow_resume", map[string]any{"id": "post"}); !strings.HasPrefix(msg, "not_found") {
		t.Fatalf("beta resumes alpha's workflow: %s", msg)
	}
}
