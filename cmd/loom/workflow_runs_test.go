package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/examples/workflow/trip"
	"github.com/loomthreads/loom/workflow"
)

// TestWorkflowsStartInputResume starts the example workflow that waits for
// approval by name, gives it the input and resumes it, from the command
// line.
func TestWorkflowsStartInputResume(t *testing.T) {
	st := sqliteStore(t)
	out := loom(t, "workflows", "start", trip.ApprovalName, "--id", "weekend", "--input", `{"city":"Porto"}`, "--store", st).ok(t).stdout
	for _, want := range []string{"started workflow weekend (trip-approval)", "done             1/plan#1 → \"Porto\"", "waiting          4/approve#1", "workflow waiting", "weekend: waiting", "loom workflows input weekend approve JSON"} {
		if !strings.Contains(out, want) {
			t.Fatalf("start lacks %q:\n%s", want, out)
		}
	}
	if r := loom(t, "workflows", "resume", "weekend", "--store", st).ok(t); !strings.Contains(r.stdout, "weekend: waiting") {
		t.Fatalf("resume before the input:\n%s", r.stdout)
	}
	out = loom(t, "workflows", "input", "weekend", "approve", `{"approved":true}`, "--store", st).ok(t).stdout
	if !strings.Contains(out, "input given to approve") {
		t.Fatalf("input:\n%s", out)
	}
	evs := lines[workflow.Event](t, loom(t, "workflows", "resume", "weekend", "--store", st, "--json").ok(t))
	kinds := eventKinds(evs)
	if want := "step_started 4/approve#2,step_done 4/approve#2,step_started 5/book#1,step_done 5/book#1,workflow_done"; strings.Join(kinds, ",") != want {
		t.Fatalf("resume's events: %q", kinds)
	}
	if out := loom(t, "workflows", "resume", "weekend", "--store", st).ok(t).stdout; !strings.Contains(out, "nothing to run") {
		t.Fatalf("resume of a done workflow:\n%s", out)
	}
	if out := loom(t, "workflows", "show", "weekend", "--store", st).ok(t).stdout; !strings.Contains(out, "status    done") {
		t.Fatalf("show:\n%s", out)
	}
	waitingWorkflow(t, st, "post")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"workflows", "start"}, 2, "missing the workflow's NAME: trip, trip-approval"},
		{[]string{"workflows", "start", "nope"}, 1, `no workflow named "nope"`},
		{[]string{"workflows", "start", "trip", "--input", "{"}, 2, "not JSON"},
		{[]string{"workflows", "start", "trip", "--id", "weekend"}, 1, "conflict"},
		{[]string{"workflows", "resume", "nope"}, 1, `workflow "nope" not found`},
		{[]string{"workflows", "resume", "post"}, 1, "not started by name"},
		{[]string{"workflows", "input", "weekend", "approve"}, 2, "want ID STEP JSON"},
		{[]string{"workflows", "input", "weekend", "approve", "true"}, 1, "not waiting"},
		{[]string{"workflows", "input", "post", "review", "nope"}, 2, "not JSON"},
	} {
		r := loom(t, append(c.args, "--store", st)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("loom %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.msg)
		}
	}
}

// followWorkflow reads a workflow's event stream from a server until an
// event of kind, and returns the events' ids and kinds.
func followWorkflow(t *testing.T, url, key, last string, kind workflow.EventKind) (ids, kinds []string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	id := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var ev workflow.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Fatal(err)
			}
			k := string(ev.Kind)
			if ev.Step != nil {
				k += " " + ev.Step.ID
			}
			if id != ev.Cursor {
				t.Fatalf("event id %q, cursor %q", id, ev.Cursor)
			}
			ids, kinds = append(ids, id), append(kinds, k)
			if ev.Kind == kind {
				return ids, kinds
			}
		}
	}
	t.Fatalf("the stream ended after %q: %v", kinds, sc.Err())
	return nil, nil
}

// TestEndToEndWorkflowRuns starts the examples' workflows on a real `loom
// serve --example-workflows` over HTTP, MCP and the command line (on the
// server's store), follows them by their event streams, gives the waiting
// step its input, and resumes them to their end.
func TestEndToEndWorkflowRuns(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "loom.db")
	s := startServer(t, store, "--keys", keysFile(t), "--example-workflows")

	var defs struct {
		Definitions []struct{ Name string } `json:"definitions"`
	}
	if code, _ := call(t, "GET", s.url+"/v1/workflow-definitions", keyAcme, nil, &defs); code != 200 || len(defs.Definitions) != 2 || defs.Definitions[1].Name != trip.ApprovalName {
		t.Fatalf("definitions: %d %+v", code, defs)
	}

	// HTTP.
	code, h := call(t, "POST", s.url+"/v1/workflows", keyAcme, map[string]any{"name": trip.ApprovalName, "id": "h1", "input": map[string]any{"city": "Porto"}}, nil)
	if code != 202 || h.Get("Location") != "/v1/workflows/h1" {
		t.Fatalf("start: %d %v", code, h)
	}
	if code, _ := call(t, "POST", s.url+"/v1/workflows", keyAcme, map[string]any{"name": "nope"}, nil); code != 404 {
		t.Fatalf("start of an unknown name: %d", code)
	}
	if code, _ := call(t, "POST", s.url+"/v1/workflows", keyAcme, map[string]any{"name": trip.Name, "input": "{"}, nil); code != 400 {
		t.Fatalf("start with input that is not JSON: %d", code)
	}
	ids, kinds := followWorkflow(t, s.url+"/v1/workflows/h1/events", keyAcme, "", workflow.EventWaiting)
	if kinds[len(kinds)-2] != "step_waiting 4/approve#1" {
		t.Fatalf("events to the waiting step: %q", kinds)
	}
	if code, _ := call(t, "POST", s.url+"/v1/workflows/h1/input", keyAcme, map[string]any{"step": "approve", "input": map[string]any{"approved": true}}, nil); code != 200 {
		t.Fatalf("input: %d", code)
	}
	if code, _ := call(t, "POST", s.url+"/v1/workflows/h1/resume", keyAcme, nil, nil); code != 202 {
		t.Fatalf("resume: %d", code)
	}
	_, rest := followWorkflow(t, s.url+"/v1/workflows/h1/events", keyAcme, ids[len(ids)-1], workflow.EventDone)
	if strings.Join(rest, ",") != "step_started 4/approve#2,step_done 4/approve#2,step_started 5/book#1,step_done 5/book#1,workflow_done" {
		t.Fatalf("events after the input: %q", rest)
	}
	if code, _ := call(t, "POST", s.url+"/v1/workflows/h1/resume", keyOther, nil, nil); code != 404 {
		t.Fatalf("another tenant resumes: %d", code)
	}

	// MCP.
	cs := mcpSession(t, s.url, keyAcme)
	mcpCall := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		return res
	}
	mcpCall("workflow_start", map[string]any{"name": trip.ApprovalName, "id": "m1"})
	followWorkflow(t, s.url+"/v1/workflows/m1/events", keyAcme, "", workflow.EventWaiting)
	mcpCall("workflow_input", map[string]any{"id": "m1", "step": "approve", "input": map[string]any{"approved": false}})
	mcpCall("workflow_resume", map[string]any{"id": "m1"})
	_, kinds = followWorkflow(t, s.url+"/v1/workflows/m1/events", keyAcme, "", workflow.EventDone)
	if got := strings.Join(kinds, ","); !strings.Contains(got, "step_done 4/approve#2,workflow_done") || strings.Contains(got, "book") {
		t.Fatalf("refused, it does not book: %q", kinds)
	}

	// The command line, on the server's store: started there, resumed by
	// the server after the input.
	if out := cli(t, "workflows", "start", trip.ApprovalName, "--id", "c1", "--store", store, "--tenant", "acme"); !strings.Contains(out, "c1: waiting") {
		t.Fatalf("loom workflows start:\n%s", out)
	}
	cli(t, "workflows", "input", "c1", "approve", `{"approved": true}`, "--store", store, "--tenant", "acme")
	if code, _ := call(t, "POST", s.url+"/v1/workflows/c1/resume", keyAcme, nil, nil); code != 202 {
		t.Fatalf("resume over HTTP of a workflow the CLI started: %d", code)
	}
	followWorkflow(t, s.url+"/v1/workflows/c1/events", keyAcme, "", workflow.EventDone)
	s.stop(t)
}

// TestWorkflowsEdit answers for the waiting approval from the command line
// (loom workflows edit --output): the step ends with that output, and the
// resume books without asking again. Bad edits change nothing.
func TestWorkflowsEdit(t *testing.T) {
	st := sqliteStore(t)
	loom(t, "workflows", "start", trip.ApprovalName, "--id", "trip", "--input", `{"city":"Porto"}`, "--store", st).ok(t)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--output", `approve={"approved":true}`}, 1, "by"},
		{[]string{"--by", "ann"}, 1, "nothing to set"},
		{[]string{"--by", "ann", "--output", "approve"}, 2, "want STEP=JSON"},
		{[]string{"--by", "ann", "--output", "approve={"}, 2, "not JSON"},
		{[]string{"--by", "ann", "--next", "plan", "--end"}, 2, "not both"},
		{[]string{"--by", "ann", "--version", "1", "--checkpoint", "x", "--end"}, 2, "not both"},
	} {
		r := loom(t, append(append([]string{"workflows", "edit", "trip"}, c.args...), "--store", st)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("loom workflows edit %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.msg)
		}
	}
	out := loom(t, "workflows", "edit", "trip", "--by", "ann", "--output", `approve={"approved":true}`, "--store", st).ok(t).stdout
	if !strings.Contains(out, "edited workflow trip by ann (now running") {
		t.Fatalf("edit:\n%s", out)
	}
	evs := lines[workflow.Event](t, loom(t, "workflows", "resume", "trip", "--store", st, "--json").ok(t))
	kinds := eventKinds(evs)
	if want := "step_started 5/book#1,step_done 5/book#1,workflow_done"; strings.Join(kinds, ",") != want {
		t.Fatalf("resume after the edit: %q", kinds)
	}
}

// eventKinds is each event's kind, and its step's attempt if it has one.
func eventKinds(evs []workflow.Event) []string {
	var kinds []string
	for _, ev := range evs {
		k := string(ev.Kind)
		if ev.Step != nil {
			k += " " + ev.Step.ID
		}
		kinds = append(kinds, k)
	}
	return kinds
}
