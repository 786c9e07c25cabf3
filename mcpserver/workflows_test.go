package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/wftest"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/workflow"
)

func TestWorkflowTools(t *testing.T) {
	ctx := t.Context()
	db := newDB(t)
	srv := httpServer(t, db, nil)
	alpha, beta := connectHTTP(t, srv, keyAlpha), connectHTTP(t, srv, keyBeta)

	w, err := workflow.Create(ctx, db.WithTenant("alpha"), workflow.CreateOptions{ID: "post", Title: "a post"})
	if err != nil {
		t.Fatal(err)
	}
	g := workflow.NewGraph().
		Add("draft", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "writer")
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant("a draft"))
			return map[string]int{"words": 2}, err
		}, "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			_, err := s.Ask(map[string]string{"question": "publish?"})
			return nil, err
		})
	if _, err := w.Run(ctx, g, nil); err != nil {
		t.Fatal(err)
	}

	list := ok[workflowListOut](t, alpha, "workflow_list", map[string]any{})
	if len(list.Workflows) != 1 || list.Workflows[0].ID != "post" || list.Workflows[0].Status != workflow.StatusWaiting {
		t.Fatalf("list: %+v", list)
	}
	if list := ok[workflowListOut](t, beta, "workflow_list", map[string]any{}); len(list.Workflows) != 0 {
		t.Fatalf("beta lists %+v", list)
	}
	if msg := fails(t, beta, "workflow_get", map[string]any{"id": "post"}); !strings.HasPrefix(msg, "not_found") {
		t.Fatalf("beta gets alpha's workflow: %s", msg)
	}

	cp := ok[workflowCheckpointOut](t, alpha, "workflow_checkpoint", map[string]any{"id": "post", "name": "drafted"})
	if cp.Checkpoint.Name != "drafted" {
		t.Fatalf("checkpoint %+v", cp)
	}
	if msg := fails(t, alpha, "workflow_checkpoint", map[string]any{"id": "post", "name": "drafted"}); !strings.HasPrefix(msg, "conflict") {
		t.Fatalf("a checkpoint twice: %s", msg)
	}
	res := call(t, alpha, "workflow_get", map[string]any{"id": "post", "messages": 10})
	if res.IsError || !strings.Contains(text(res), "waiting for input: step review asks {\"question\":\"publish?\"}") {
		t.Fatalf("get: %s", text(res))
	}
	got := ok[workflowGetOut](t, alpha, "workflow_get", map[string]any{"id": "post", "messages": 10})
	if got.Execution.Status != workflow.StatusWaiting || len(got.Execution.Steps) != 2 || string(got.Execution.Steps[0].Output) != `{"words":2}` ||
		len(got.Messages["writer"]) != 1 || len(got.Checkpoints) != 1 {
		t.Fatalf("get: %+v", got)
	}

	// Move on, then back to the checkpoint.
	if err := w.Provide(ctx, "review", true); err != nil {
		t.Fatal(err)
	}
	ex, err := w.Run(ctx, g, nil)
	if err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run: %v", err)
	}
	hist := ok[historyOut](t, alpha, "workflow_history", map[string]any{"id": "post", "limit": 2})
	if len(hist.Entries) != 2 || hist.NextBefore == 0 {
		t.Fatalf("history %+v", hist)
	}
	old := ok[workflowGetOut](t, alpha, "workflow_get", map[string]any{"id": "post", "version": cp.Checkpoint.Version})
	if old.Execution.Status != workflow.StatusWaiting || old.Workflow.Status != workflow.StatusDone {
		t.Fatalf("get at the checkpoint's version: %s, now %s", old.Execution.Status, old.Workflow.Status)
	}
	if old.Execution.Version != cp.Checkpoint.Version || old.Workflow.Version != w.Version() || old.Workflow.Round != ex.Round {
		t.Fatalf("get at version %d: read at %d, now version %d round %d; want now %d round %d",
			cp.Checkpoint.Version, old.Execution.Version, old.Workflow.Version, old.Workflow.Round, w.Version(), ex.Round)
	}
	for _, bad := range []map[string]any{{"id": "post"}, {"id": "post", "checkpoint": "drafted", "version": 1}, {"id": "post", "version": -1}} {
		if msg := fails(t, alpha, "workflow_restore", bad); !strings.HasPrefix(msg, "invalid") {
			t.Fatalf("restore %v: %s", bad, msg)
		}
	}
	if msg := fails(t, alpha, "workflow_restore", map[string]any{"id": "post", "checkpoint": "nope"}); !strings.HasPrefix(msg, "not_found") {
		t.Fatalf("restore to nothing: %s", msg)
	}
	if msg := fails(t, beta, "workflow_restore", map[string]any{"id": "post", "checkpoint": "drafted"}); !strings.HasPrefix(msg, "not_found") {
		t.Fatalf("beta restores alpha's workflow: %s", msg)
	}
	back := ok[workflowRestoreOut](t, alpha, "workflow_restore", map[string]any{"id": "post", "checkpoint": "drafted"})
	if back.Workflow.Status != workflow.StatusWaiting {
		t.Fatalf("restored: %+v", back)
	}
	if err := w.Refresh(ctx); err != nil || w.Status() != workflow.StatusWaiting {
		t.Fatalf("the workflow after the restore: %s, %v", w.Status(), err)
	}
	// What the restore reports is the workflow after it, as a fresh read has it.
	if ex, err := w.Execution(ctx, 0); err != nil || back.Workflow.Version != ex.Version || back.Workflow.Round != ex.Round {
		t.Fatalf("restored %+v; the workflow is at version %d, round %d (%v)", back.Workflow, ex.Version, ex.Round, err)
	}

	// An edit answers for the waiting review (as_node): it ends, and the
	// next run ends the workflow without asking again.
	for _, bad := range []map[string]any{{"id": "post", "outputs": map[string]any{"review": true}}, {"id": "post", "by": "ann"},
		{"id": "post", "by": "ann", "checkpoint": "drafted", "version": 1, "input": 1}} {
		if msg := fails(t, alpha, "workflow_edit", bad); !strings.HasPrefix(msg, "invalid") {
			t.Fatalf("edit %v: %s", bad, msg)
		}
	}
	if msg := fails(t, beta, "workflow_edit", map[string]any{"id": "post", "by": "ann", "input": 1}); !strings.HasPrefix(msg, "not_found") {
		t.Fatalf("beta edits alpha's workflow: %s", msg)
	}
	edited := ok[workflowEditOut](t, alpha, "workflow_edit", map[string]any{"id": "post", "by": "ann", "outputs": map[string]any{"review": "approved"}})
	if edited.Workflow.Status != workflow.StatusRunning || edited.Workflow.Version != back.Workflow.Version+1 {
		t.Fatalf("edited: %+v after %+v", edited.Workflow, back.Workflow)
	}
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ex, err = w.Run(ctx, g, nil)
	if err != nil || ex.Status != workflow.StatusDone || len(ex.Edits) != 1 || ex.Edits[0].By != "ann" {
		t.Fatalf("run after the edit: %+v, %v", ex, err)
	}
}

// TestWorkflowToolsStalled: workflow_list and workflow_get say a workflow
// whose runner's lease ran out is stalled since its last commit, in their
// structured result and their text, and a workflow whose runner lives is
// not.
func TestWorkflowToolsStalled(t *testing.T) {
	db := newDB(t)
	alpha := connectHTTP(t, httpServer(t, db, nil), keyAlpha)
	wftest.Hold(t, db.WithTenant("alpha"), "live", nil)
	wftest.Hold(t, db.WithTenant("alpha"), "expired", wftest.HourBehind)

	list := ok[workflowListOut](t, alpha, "workflow_list", map[string]any{})
	if len(list.Workflows) != 2 {
		t.Fatalf("list: %+v", list)
	}
	for _, w := range list.Workflows {
		if w.Status != workflow.StatusRunning || (w.Stalled != nil) != (w.ID == "expired") {
			t.Errorf("listed %s: status %s, stalled %+v", w.ID, w.Status, w.Stalled)
		}
	}
	got := ok[workflowGetOut](t, alpha, "workflow_get", map[string]any{"id": "expired"})
	if got.Workflow.Stalled == nil || got.Workflow.Stalled.Since.IsZero() || !got.Workflow.Stalled.Since.Equal(got.Workflow.UpdatedAt) {
		t.Fatalf("get expired: stalled %+v, want since its last commit %v", got.Workflow.Stalled, got.Workflow.UpdatedAt)
	}
	if live := ok[workflowGetOut](t, alpha, "workflow_get", map[string]any{"id": "live"}); live.Workflow.Stalled != nil {
		t.Fatalf("get live: stalled %+v", live.Workflow.Stalled)
	}

	since := "running, stalled since " + got.Workflow.Stalled.Since.UTC().Format(time.RFC3339)
	res := call(t, alpha, "workflow_get", map[string]any{"id": "expired"})
	if out := text(res); !strings.Contains(out, since) || !strings.Contains(out, "when its program runs it again") {
		t.Errorf("get's text lacks %q:\n%s", since, out)
	}
	// The JSON has it as the HTTP API does.
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"stalled":{"since":"` + got.Workflow.Stalled.Since.Format(time.RFC3339Nano) + `"}`; !strings.Contains(string(raw), want) {
		t.Errorf("the result has no %s: %s", want, raw)
	}
	res = call(t, alpha, "workflow_list", map[string]any{})
	if out := text(res); !strings.Contains(out, `expired "": `+since) || strings.Contains(out, `live "": running, stalled`) {
		t.Errorf("list's text:\n%s", out)
	}
}
