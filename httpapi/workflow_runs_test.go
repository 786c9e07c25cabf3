package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

func isWorkflowRunRoute(pattern string) bool {
	switch pattern {
	case "POST /v1/workflows", "POST /v1/workflows/{id}/resume", "GET /v1/workflows/{id}/events", "GET /v1/workflow-definitions":
		return true
	}
	return false
}

// approvalFlow is draft → review, which asks for approval, → publish; hold,
// when not nil, blocks draft until it is closed.
func approvalFlow(hold chan struct{}) *workflow.Graph {
	return workflow.NewGraph().
		Add("draft", func(ctx context.Context, s *workflow.Step) (any, error) {
			if hold != nil {
				select {
				case <-hold:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return "a draft", nil
		}, "review").
		Add("review", func(_ context.Context, s *workflow.Step) (any, error) {
			ok, err := s.Ask("publish?")
			if err != nil {
				return nil, err
			}
			return json.RawMessage(ok), nil
		}, "publish").
		Add("publish", func(context.Context, *workflow.Step) (any, error) { return "published", nil })
}

// progress is an event of a workflow's stream.
type progress struct {
	id, name string
	ev       workflow.Event
}

// nextProgress returns the next event of a workflow's stream.
func nextProgress(t *testing.T, ch <-chan sseEvent) progress {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		out := progress{id: ev.id, name: ev.name}
		if err := json.Unmarshal(ev.data, &out.ev); err != nil {
			t.Fatalf("event %s: %v", ev.name, err)
		}
		return out
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// progressUntil reads events until one of kind, and returns them all.
func progressUntil(t *testing.T, ch <-chan sseEvent, kind workflow.EventKind) []progress {
	t.Helper()
	var out []progress
	for {
		p := nextProgress(t, ch)
		if p.name != "progress" || p.id != p.ev.Cursor {
			t.Fatalf("event %s, id %q: %+v", p.name, p.id, p.ev)
		}
		out = append(out, p)
		if p.ev.Kind == kind {
			return out
		}
	}
}

func kinds(ps []progress) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.ev.Kind)
		if p.ev.Step != nil {
			out[i] += " " + p.ev.Step.ID
		}
	}
	return out
}

// TestWorkflowRunRoutes starts a registered workflow over HTTP, follows
// it by its event stream to its waiting step, gives the input, resumes it
// and follows it, reconnected with Last-Event-ID, to its end.
func TestWorkflowRunRoutes(t *testing.T) {
	reg := workflow.NewRegistry()
	hold := make(chan struct{})
	if err := reg.Register("approval", approvalFlow(nil), &workflow.RegisterOptions{Title: "an approval", Description: "waits for a yes"}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("held", approvalFlow(hold), nil); err != nil {
		t.Fatal(err)
	}
	rn := workflow.NewRunner(reg, &workflow.RunnerOptions{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { rn.Close() })
	s := newServer(t, Options{Keys: twoTenants(t), Workflows: rn, WorkflowPoll: 10 * time.Millisecond})
	ts := httptest.NewServer(s)
	defer ts.Close()

	var defs definitionsResponse
	must(t, s, req{method: "GET", path: "/v1/workflow-definitions", key: keyA}, http.StatusOK, &defs)
	if want := []definitionJSON{{Name: "approval", Title: "an approval", Description: "waits for a yes"}, {Name: "held"}}; !cmp.Equal(defs.Definitions, want) {
		t.Fatalf("definitions: %+v", defs.Definitions)
	}

	var got workflowResponse
	w := must(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"name": "approval", "id": "post", "input": map[string]any{"topic": "loom"}}}, http.StatusAccepted, &got)
	if w.Header().Get("Location") != "/v1/workflows/post" || got.ID != "post" || got.Title != "an approval" || got.Labels[workflow.LabelName] != "approval" {
		t.Fatalf("start: %s %+v", w.Header().Get("Location"), got.workflowJSON)
	}
	wantError(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"name": "approval", "id": "post"}}, http.StatusConflict, "conflict")
	wantError(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"name": "nobody"}}, http.StatusNotFound, "unknown_workflow")
	wantError(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"id": "x"}}, http.StatusBadRequest, "invalid")
	wantError(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"name": "approval", "colour": "blue"}}, http.StatusBadRequest, "invalid_json")
	wantError(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"name": "approval", "id": "bad id"}}, http.StatusBadRequest, "invalid")
	// Another tenant sees none of it.
	wantError(t, s, req{method: "POST", path: "/v1/workflows/post/resume", key: keyB}, http.StatusNotFound, "not_found")
	wantError(t, s, req{method: "GET", path: "/v1/workflows/post/events", key: keyA, header: map[string]string{"Last-Event-ID": "nope"}}, http.StatusBadRequest, "invalid")
	wantError(t, s, req{method: "GET", path: "/v1/workflows/nobody/events", key: keyA}, http.StatusNotFound, "not_found")

	evs, stop := streamEvents(t, ts.URL+"/v1/workflows/post/events", keyA, "")
	first := progressUntil(t, evs, workflow.EventWaiting)
	stop()
	want := []string{"step_started 1/draft#1", "step_done 1/draft#1", "step_started 2/review#1", "step_waiting 2/review#1", "workflow_waiting"}
	if diff := cmp.Diff(want, kinds(first)); diff != "" {
		t.Fatalf("events to the waiting step (-want +got):\n%s", diff)
	}

	must(t, s, req{method: "POST", path: "/v1/workflows/post/input", key: keyA, body: map[string]any{"step": "review", "input": true}}, http.StatusOK, nil)
	got = workflowResponse{}
	must(t, s, req{method: "POST", path: "/v1/workflows/post/resume", key: keyA}, http.StatusAccepted, &got)
	// Reconnected after the last event seen: the rest, none twice; the
	// query parameter says the same as the header.
	last := first[len(first)-1].id
	evs, stop = streamEvents(t, ts.URL+"/v1/workflows/post/events", keyA, last)
	rest := progressUntil(t, evs, workflow.EventDone)
	stop()
	want = []string{"step_started 2/review#2", "step_done 2/review#2", "step_started 3/publish#1", "step_done 3/publish#1", "workflow_done"}
	if diff := cmp.Diff(want, kinds(rest)); diff != "" {
		t.Fatalf("events after %s (-want +got):\n%s", last, diff)
	}
	evs, stop = streamEvents(t, ts.URL+"/v1/workflows/post/events?after="+last, keyA, "")
	if again := progressUntil(t, evs, workflow.EventDone); !cmp.Equal(kinds(again), kinds(rest)) {
		t.Fatalf("after=%s: %q", last, kinds(again))
	}
	stop()
	// Done: a resume runs nothing, and says so with 200.
	got = workflowResponse{}
	must(t, s, req{method: "POST", path: "/v1/workflows/post/resume", key: keyA}, http.StatusOK, &got)
	if got.Status != workflow.StatusDone {
		t.Fatalf("resume of a done workflow: %s", got.Status)
	}
	// A cursor past the workflow's version: a reset, then all of it.
	evs, stop = streamEvents(t, ts.URL+"/v1/workflows/post/events", keyA, "999.0")
	if ev := <-evs; ev.name != "reset" {
		t.Fatalf("first event %s, want reset", ev.name)
	}
	if all := progressUntil(t, evs, workflow.EventDone); len(all) != len(first)+len(rest) {
		t.Fatalf("after a reset: %q", kinds(all))
	}
	stop()

	// A workflow being run is busy; one not started by name is unknown.
	must(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"name": "held", "id": "held"}}, http.StatusAccepted, nil)
	// Once its runner has claimed it (its first step started): busy. (A
	// resume before the claim makes the run go once more instead.)
	evs, stop = streamEvents(t, ts.URL+"/v1/workflows/held/events", keyA, "")
	progressUntil(t, evs, workflow.EventStepStarted)
	stop()
	wantError(t, s, req{method: "POST", path: "/v1/workflows/held/resume", key: keyA}, http.StatusConflict, "busy")
	close(hold)
	if _, err := workflow.Create(t.Context(), s.db.WithTenant("a"), workflow.CreateOptions{ID: "plain"}); err != nil {
		t.Fatal(err)
	}
	wantError(t, s, req{method: "POST", path: "/v1/workflows/plain/resume", key: keyA}, http.StatusNotFound, "unknown_workflow")

	// A server without workflows lists none, and runs none.
	bare := newServer(t, Options{})
	defs = definitionsResponse{}
	must(t, bare, req{method: "GET", path: "/v1/workflow-definitions"}, http.StatusOK, &defs)
	if len(defs.Definitions) != 0 {
		t.Fatalf("definitions of a server without workflows: %+v", defs)
	}
	wantError(t, bare, req{method: "POST", path: "/v1/workflows", body: map[string]any{"name": "approval"}}, http.StatusNotImplemented, "unsupported")

	// Once the runner is closed (the server shutting down), 503.
	rn.Close()
	wantError(t, s, req{method: "POST", path: "/v1/workflows", key: keyA, body: map[string]any{"name": "approval"}}, http.StatusServiceUnavailable, "shutting_down")

	var out strings.Builder
	s.Metrics().WriteTo(&out)
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		if isWorkflowRunRoute(rt.pattern) && !answered2xx(out.String(), rt.pattern, method) {
			t.Errorf("route %s never answered a 2xx", rt.pattern)
		}
	}
}

const envRunChild = "LOOM_HTTPAPI_WORKFLOW_RUN_CHILD"

type runChildSpec struct {
	URL      string `json:"url"`
	Workflow string `json:"workflow"`
	// Kill makes the child kill itself (SIGKILL) in step b.
	Kill bool `json:"kill"`
}

// crashFlow is a → b → c; with kill, b kills its process once started.
func crashFlow(kill bool) *workflow.Graph {
	step := func(name string) workflow.StepFunc {
		return func(context.Context, *workflow.Step) (any, error) {
			if name == "b" && kill {
				fmt.Println("killing")
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return name, nil
		}
	}
	return workflow.NewGraph().Add("a", step("a"), "b").Add("b", step("b"), "c").Add("c", step("c"))
}

// TestWorkflowRunChild is the runner TestWorkflowEventsAcrossACrash starts
// in a process of its own: it runs the workflow of its spec.
func TestWorkflowRunChild(t *testing.T) {
	var spec runChildSpec
	w := childWorkflow(t, envRunChild, "TestWorkflowEventsAcrossACrash", &spec)
	// Wait: the killed runner's lease is free at once on this host.
	if _, err := w.Run(context.Background(), crashFlow(spec.Kill), &workflow.RunOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
}

// runChild runs TestWorkflowRunChild with spec to its end (or its kill),
// and returns its output.
func runChild(t *testing.T, spec runChildSpec) string {
	t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkflowRunChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envRunChild+"="+string(raw))
	out, err := cmd.CombinedOutput()
	killed := false
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	if killed != spec.Kill || !killed && err != nil {
		t.Fatalf("child (kill %v): %v\n%s", spec.Kill, err, out)
	}
	return string(out)
}

// TestWorkflowEventsAcrossACrash streams the events of a workflow that a
// process runs on SQLite and is killed in the middle of (SIGKILL), and
// that a second process resumes: the client, which reconnects with
// Last-Event-ID in between, sees every step's events, in order, none lost
// and none twice, the killed attempt's interruption among them.
func TestWorkflowEventsAcrossACrash(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "loom.db")
	db, err := thread.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := newServer(t, Options{DB: db, WorkflowPoll: 10 * time.Millisecond})
	ts := httptest.NewServer(s)
	defer ts.Close()
	if _, err := workflow.Create(t.Context(), db, workflow.CreateOptions{ID: "crashy"}); err != nil {
		t.Fatal(err)
	}

	evs, stop := streamEvents(t, ts.URL+"/v1/workflows/crashy/events", "", "")
	if out := runChild(t, runChildSpec{URL: url, Workflow: "crashy", Kill: true}); !strings.Contains(out, "killing") {
		t.Fatalf("the child was not killed in step b:\n%s", out)
	}
	// What the killed process committed: a's start and end, b's start.
	seen := progressUntil(t, evs, workflow.EventStepStarted)
	seen = append(seen, progressUntil(t, evs, workflow.EventStepStarted)...)
	if kinds(seen)[len(seen)-1] != "step_started 2/b#1" {
		t.Fatalf("before the kill: %q", kinds(seen))
	}
	stop()

	runChild(t, runChildSpec{URL: url, Workflow: "crashy"})
	evs, stop = streamEvents(t, ts.URL+"/v1/workflows/crashy/events", "", seen[len(seen)-1].id)
	defer stop()
	seen = append(seen, progressUntil(t, evs, workflow.EventDone)...)
	want := []string{
		"step_started 1/a#1", "step_done 1/a#1", "step_started 2/b#1",
		"step_interrupted 2/b#1", "step_started 2/b#2", "step_done 2/b#2", "step_started 3/c#1", "step_done 3/c#1", "workflow_done",
	}
	if diff := cmp.Diff(want, kinds(seen)); diff != "" {
		t.Fatalf("events across the crash (-want +got):\n%s", diff)
	}
	ids := map[string]bool{}
	for _, p := range seen {
		if ids[p.id] {
			t.Fatalf("event %s seen twice", p.id)
		}
		ids[p.id] = true
	}
	// And nothing more: the stream waits, with heartbeats only.
	select {
	case ev, ok := <-evs:
		if ok {
			t.Fatalf("an event after the workflow's end: %s %s", ev.name, ev.data)
		}
	default:
	}
}
