package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

func isWorkflowRoute(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	return strings.HasPrefix(path, "/v1/workflow")
}

type workflowResponse struct {
	workflowJSON
	Execution workflow.Execution `json:"execution"`
}

// runReview makes, in tenant's DB, a workflow id that drafts on its
// sub-thread "writer" and waits for a review, as a Go program would.
func runReview(t *testing.T, db *thread.DB, id string) *workflow.Graph {
	t.Helper()
	ctx := t.Context()
	g := workflow.NewGraph().
		Add("draft", func(ctx context.Context, s *workflow.Step) (any, error) {
			th, err := s.SubThread(ctx, "writer")
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant("a draft"))
			return "a draft", err
		}, "review").
		Add("review", func(ctx context.Context, s *workflow.Step) (any, error) {
			answer, err := s.Ask("publish?")
			if err != nil {
				return nil, err
			}
			th, err := s.SubThread(ctx, "main")
			if err != nil {
				return nil, err
			}
			_, err = th.Append(ctx, message.Assistant("reviewed: "+string(answer)))
			return nil, err
		})
	w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: id, Title: "a post"})
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := w.Run(ctx, g, nil); err != nil || ex.Status != workflow.StatusWaiting {
		t.Fatalf("run: %v", err)
	}
	return g
}

func TestWorkflowRoutes(t *testing.T) {
	keys := twoTenants(t)
	db := thread.New(thread.NewMemoryStore(), nil)
	s := newServer(t, Options{DB: db, Keys: keys})
	ctx := t.Context()
	g := runReview(t, db.WithTenant("a"), "post")
	runReview(t, db.WithTenant("a"), "post2")

	var list workflowsResponse
	must(t, s, req{method: "GET", path: "/v1/workflows?limit=1", key: keyA}, http.StatusOK, &list)
	if len(list.Workflows) != 1 || list.Workflows[0].ID != "post" || list.Workflows[0].Status != workflow.StatusWaiting || list.NextCursor == "" {
		t.Fatalf("list: %+v", list)
	}
	if got := strings.Join(list.Workflows[0].SubThreads, ","); got != "main,writer" {
		t.Fatalf("sub-threads %s", got)
	}
	if cursor, _ := base64.RawURLEncoding.DecodeString(list.NextCursor); string(cursor) != "post" {
		t.Fatalf("cursor %q", cursor)
	}
	cursor := list.NextCursor
	list = workflowsResponse{}
	must(t, s, req{method: "GET", path: "/v1/workflows?cursor=" + cursor, key: keyA}, http.StatusOK, &list)
	if len(list.Workflows) != 1 || list.Workflows[0].ID != "post2" {
		t.Fatalf("second page: %+v", list)
	}
	// Another tenant sees none of them.
	list = workflowsResponse{}
	must(t, s, req{method: "GET", path: "/v1/workflows", key: keyB}, http.StatusOK, &list)
	if len(list.Workflows) != 0 {
		t.Fatalf("b lists %+v", list)
	}
	for _, path := range []string{"/v1/workflows/post", "/v1/workflows/post/history", "/v1/workflows/post/checkpoints", "/v1/workflows/post/at?version=1"} {
		wantError(t, s, req{method: "GET", path: path, key: keyB}, http.StatusNotFound, "not_found")
	}
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/input", key: keyB, body: map[string]any{"step": "review", "input": true}}, http.StatusNotFound, "not_found")
	// A thread that is not a workflow is not one here.
	wantError(t, s, req{method: "GET", path: "/v1/workflows/post.main", key: keyA}, http.StatusNotFound, "not_found")

	var got workflowResponse
	must(t, s, req{method: "GET", path: "/v1/workflows/post", key: keyA}, http.StatusOK, &got)
	ex := got.Execution
	if ex.Status != workflow.StatusWaiting || len(ex.Waiting) != 1 || ex.Waiting[0].Step != "review" || len(ex.Steps) != 2 || len(ex.SubThreads) != 2 {
		t.Fatalf("get: %+v", ex)
	}
	var cp checkpointJSON
	must(t, s, req{method: "POST", path: "/v1/workflows/post/checkpoints", key: keyA, body: map[string]any{"name": "waiting"}}, http.StatusCreated, &cp)
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/checkpoints", key: keyA, body: map[string]any{"name": "waiting"}}, http.StatusConflict, "conflict")
	var cps checkpointsResponse
	must(t, s, req{method: "GET", path: "/v1/workflows/post/checkpoints", key: keyA}, http.StatusOK, &cps)
	if len(cps.Checkpoints) != 1 || cps.Checkpoints[0].Version != cp.Version {
		t.Fatalf("checkpoints %+v", cps)
	}

	// Input: refused for a step that is not waiting, then given.
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/input", key: keyA, body: map[string]any{"step": "draft", "input": true}}, http.StatusConflict, "conflict")
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/input", key: keyA, body: map[string]any{"step": "review"}}, http.StatusBadRequest, "invalid")
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/input", key: keyA, body: map[string]any{"step": "review", "input": true, "extra": 1}}, http.StatusBadRequest, "invalid_json")
	got = workflowResponse{}
	must(t, s, req{method: "POST", path: "/v1/workflows/post/input", key: keyA, body: map[string]any{"step": "review", "input": "yes"}}, http.StatusOK, &got)
	if got.Execution.Status != workflow.StatusRunning || len(got.Execution.Waiting) != 0 {
		t.Fatalf("after input: %+v", got.Execution)
	}
	w, err := workflow.Open(ctx, db.WithTenant("a"), "post")
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := w.Run(ctx, g, nil); err != nil || ex.Status != workflow.StatusDone {
		t.Fatalf("run after the input: %v", err)
	}

	// Time travel: the history, the workflow at the checkpoint, a fork
	// there, a restore.
	var hist historyResponse
	must(t, s, req{method: "GET", path: "/v1/workflows/post/history?limit=3", key: keyA}, http.StatusOK, &hist)
	if len(hist.Entries) != 3 || hist.NextBefore == 0 {
		t.Fatalf("history %+v", hist)
	}
	var snap struct {
		workflow.Execution
		Messages map[string][]json.RawMessage `json:"messages"`
	}
	must(t, s, req{method: "GET", path: "/v1/workflows/post/at?checkpoint=waiting", key: keyA}, http.StatusOK, &snap)
	if snap.Status != workflow.StatusWaiting || len(snap.Messages["writer"]) != 1 || len(snap.Messages["main"]) != 0 {
		t.Fatalf("at the checkpoint: %s, %d/%d messages", snap.Status, len(snap.Messages["writer"]), len(snap.Messages["main"]))
	}
	for _, bad := range []string{"", "?version=1&checkpoint=waiting", "?version=-1", "?checkpoint=waiting&last=-1"} {
		wantError(t, s, req{method: "GET", path: "/v1/workflows/post/at" + bad, key: keyA}, http.StatusBadRequest, "invalid")
	}
	wantError(t, s, req{method: "GET", path: "/v1/workflows/post/at?checkpoint=nope", key: keyA}, http.StatusNotFound, "not_found")
	got = workflowResponse{}
	must(t, s, req{method: "POST", path: "/v1/workflows/post/fork", key: keyA, body: map[string]any{"checkpoint": "waiting", "id": "post-b"}}, http.StatusCreated, &got)
	if got.ID != "post-b" || got.Execution.Status != workflow.StatusWaiting {
		t.Fatalf("fork: %+v", got)
	}
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/fork", key: keyA, body: map[string]any{"checkpoint": "waiting", "id": "post-b"}}, http.StatusConflict, "conflict")
	got = workflowResponse{}
	must(t, s, req{method: "POST", path: "/v1/workflows/post/restore", key: keyA, body: map[string]any{"checkpoint": "waiting"}}, http.StatusOK, &got)
	if got.Execution.Status != workflow.StatusWaiting {
		t.Fatalf("restore: %+v", got.Execution)
	}
	var msgs messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/post.main/messages", key: keyA}, http.StatusOK, &msgs)
	if len(msgs.Messages) != 0 {
		t.Fatalf("main after the restore: %d messages", len(msgs.Messages))
	}
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/restore", key: keyA, body: map[string]any{"checkpoint": "waiting", "version": 2}}, http.StatusBadRequest, "invalid")
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/restore", key: keyA, body: map[string]any{"version": 999}}, http.StatusNotFound, "not_found")
	got = workflowResponse{}
	must(t, s, req{method: "GET", path: fmt.Sprintf("/v1/workflows/post?version=%d", cp.Version), key: keyA}, http.StatusOK, &got)
	if got.Execution.Version != cp.Version || got.Execution.Status != workflow.StatusWaiting {
		t.Fatalf("get at a version: %+v", got.Execution)
	}

	must(t, s, req{method: "POST", path: "/v1/workflows/post/edits", key: keyA, body: map[string]any{"by": "ann", "input": "new"}}, http.StatusOK, nil) // TestWorkflowEdits for more
	must(t, s, req{method: "DELETE", path: "/v1/workflows/post-b", key: keyA}, http.StatusNoContent, nil)
	wantError(t, s, req{method: "GET", path: "/v1/threads/post-b.writer", key: keyA}, http.StatusNotFound, "not_found")

	// Every workflow route answered a 2xx.
	var out strings.Builder
	s.Metrics().WriteTo(&out)
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		if isWorkflowRoute(rt.pattern) && !isWorkflowRunRoute(rt.pattern) && !answered2xx(out.String(), rt.pattern, method) {
			t.Errorf("route %s never answered a 2xx", rt.pattern)
		}
	}
}

// TestWorkflowEdits: POST /v1/workflows/{id}/edits ends a waiting step
// with the output a person gives (as_node), recorded with its author, and
// the next run goes on from it; refusals change nothing.
func TestWorkflowEdits(t *testing.T) {
	keys := twoTenants(t)
	db := thread.New(thread.NewMemoryStore(), nil)
	s := newServer(t, Options{DB: db, Keys: keys})
	ctx := t.Context()
	g := runReview(t, db.WithTenant("a"), "post")
	var before workflowResponse
	must(t, s, req{method: "GET", path: "/v1/workflows/post", key: keyA}, http.StatusOK, &before)
	for _, body := range []map[string]any{
		{"outputs": map[string]any{"review": "yes"}}, // no author
		{"by": "ann"}, // nothing to set
		{"by": "ann", "outputs": map[string]any{"nope": 1}},        // a step that never began
		{"by": "ann", "version": 1, "checkpoint": "x", "input": 1}, // two points
	} {
		wantError(t, s, req{method: "POST", path: "/v1/workflows/post/edits", key: keyA, body: body}, http.StatusBadRequest, "invalid")
	}
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/edits", key: keyA, body: map[string]any{"by": "ann", "input": 1, "extra": 1}}, http.StatusBadRequest, "invalid_json")
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/edits", key: keyB, body: map[string]any{"by": "ann", "input": 1}}, http.StatusNotFound, "not_found")
	var same workflowResponse
	must(t, s, req{method: "GET", path: "/v1/workflows/post", key: keyA}, http.StatusOK, &same)
	if same.Execution.Version != before.Execution.Version {
		t.Fatalf("a refused edit moved the workflow: %d → %d", before.Execution.Version, same.Execution.Version)
	}

	var got workflowResponse
	must(t, s, req{method: "POST", path: "/v1/workflows/post/edits", key: keyA,
		body: map[string]any{"by": "ann", "outputs": map[string]any{"review": map[string]any{"ok": true}}}}, http.StatusOK, &got)
	ex := got.Execution
	if ex.Status != workflow.StatusRunning || len(ex.Waiting) != 0 || len(ex.Edits) != 1 || ex.Edits[0].By != "ann" {
		t.Fatalf("after the edit: %+v", ex)
	}
	var review workflow.StepRun
	for _, st := range ex.Steps {
		if st.Name == "review" && st.Status == workflow.StatusDone {
			review = st
		}
	}
	if review.EditedBy != "ann" || string(review.Output) != `{"ok":true}` {
		t.Fatalf("review as edited: %+v", review)
	}
	w, err := workflow.Open(ctx, db.WithTenant("a"), "post")
	if err != nil {
		t.Fatal(err)
	}
	done, err := w.Run(ctx, g, nil)
	if err != nil || done.Status != workflow.StatusDone {
		t.Fatalf("run after the edit: %+v, %v", done, err)
	}
	// The review never ran: nothing says "reviewed" on main.
	sub, err := w.SubThread(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if msgs, err := sub.Messages(ctx, thread.ReadOptions{}); err != nil || len(msgs) != 0 {
		t.Fatalf("main after the run: %d messages, %v", len(msgs), err)
	}
	// At a past version, with next: [] — the workflow ends there.
	got = workflowResponse{}
	must(t, s, req{method: "POST", path: "/v1/workflows/post/edits", key: keyA,
		body: map[string]any{"by": "bob", "version": 2, "next": []string{}}}, http.StatusOK, &got)
	if got.Execution.Status != workflow.StatusDone || len(got.Execution.Edits) != 1 || !got.Execution.Edits[0].Ended {
		t.Fatalf("an edit that ends the workflow at version 2: %+v", got.Execution)
	}
}
