package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/loomthreads/loom/workflow"
)

// The routes that run workflows: a server built with Options.Workflows
// starts the workflows its registry names (POST /v1/workflows), resumes
// them (POST /v1/workflows/{id}/resume), lists the names
// (GET /v1/workflow-definitions), and any server streams a workflow's
// progress (GET /v1/workflows/{id}/events).

type definitionJSON struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

type definitionsResponse struct {
	Definitions []definitionJSON `json:"definitions"`
}

// workflowDefinitions: GET /v1/workflow-definitions — the workflows this
// server can start, by name; none without Options.Workflows.
func (s *Server) workflowDefinitions(w http.ResponseWriter, r *http.Request) error {
	resp := definitionsResponse{Definitions: []definitionJSON{}}
	if s.workflows != nil {
		for _, d := range s.workflows.Registry().Definitions() {
			resp.Definitions = append(resp.Definitions, definitionJSON{Name: d.Name, Title: d.Title, Description: d.Description})
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

type workflowStartRequest struct {
	Name   string            `json:"name"`
	ID     string            `json:"id"`
	Title  string            `json:"title"`
	Labels map[string]string `json:"labels"`
	Input  json.RawMessage   `json:"input"`
}

// runner returns the server's workflow runner, or the error that says it
// has none.
func (s *Server) runner() (*workflow.Runner, error) {
	if s.workflows == nil {
		return nil, errf(http.StatusNotImplemented, "unsupported", "this server runs no workflows: it was started without a registry of them (loom serve --example-workflows, or httpapi.Options.Workflows)")
	}
	return s.workflows, nil
}

// startWorkflow: POST /v1/workflows {name, id, title, labels, input} —
// makes a workflow of the one registered under name and runs it in the
// background: 202 with the workflow, and its Location.
func (s *Server) startWorkflow(w http.ResponseWriter, r *http.Request) error {
	var req workflowStartRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if req.Name == "" {
		return invalidf("start: name (a registered workflow, see GET /v1/workflow-definitions)")
	}
	rn, err := s.runner()
	if err != nil {
		return err
	}
	opts := workflow.CreateOptions{ID: req.ID, Title: req.Title, Labels: req.Labels}
	if len(req.Input) > 0 {
		opts.Input = req.Input
	}
	s.metrics.StoreOp("workflow")
	wf, err := rn.Start(write(r), s.tenantDB(r), req.Name, opts)
	if err != nil {
		return err
	}
	w.Header().Set("Location", workflowLocation(wf.ID()))
	return s.answerWorkflow(w, r, http.StatusAccepted, wf, 0)
}

// resumeWorkflow: POST /v1/workflows/{id}/resume — runs the workflow again
// in the background from where it stands (after input, a crash, a
// failure): 202, or 200 with a done workflow, which has nothing to run.
func (s *Server) resumeWorkflow(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	rn, err := s.runner()
	if err != nil {
		return err
	}
	wf, err = rn.Resume(write(r), s.tenantDB(r), wf.ID())
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if wf.Status() == workflow.StatusDone {
		status = http.StatusOK
	}
	w.Header().Set("Location", workflowLocation(wf.ID()))
	return s.answerWorkflow(w, r, status, wf, 0)
}

// resetEvent is the data of an event named reset: the cursor the client
// resumed after is not one of this workflow's (it was deleted and made
// again), and its events follow from the start.
type resetEvent struct {
	Kind string `json:"kind"`
}

// workflowEvents: GET /v1/workflows/{id}/events?after= — the workflow's
// progress (workflow.Workflow.Events) as Server-Sent Events named
// progress, each with its cursor as id; Last-Event-ID (or after) resumes
// after a cursor.
func (s *Server) workflowEvents(w http.ResponseWriter, r *http.Request) error {
	after := r.URL.Query().Get("after")
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		after = h
	}
	c, err := workflow.ParseCursor(after)
	if err != nil {
		return invalidf("Last-Event-ID or after %q: a cursor this feed sent (\"<version>.<index>\")", clip(after))
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	release, err := s.feedSlot(r)
	if err != nil {
		return err
	}
	defer release()
	reset := c.Version > wf.Version()
	if reset {
		after = ""
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	sse := &sseWriter{w: w, rc: http.NewResponseController(w)}
	if err := sse.open(); err != nil {
		return nil
	}
	defer sse.heartbeat(s.heartbeat)()
	if reset && sse.event("reset", resetEvent{Kind: "reset"}) != nil {
		return nil
	}
	for ev, err := range wf.Events(ctx, workflow.EventsOptions{After: after, PollInterval: s.wfPoll}) {
		if err != nil {
			_, code, msg := s.reportError(r, err)
			sse.event("error", errorJSON{Code: code, Message: msg})
			return nil
		}
		if sse.eventID("progress", ev.Cursor, ev) != nil {
			return nil
		}
	}
	return nil
}

// defaultWorkflowPoll is how often a workflow's event stream reads its
// version on a store that does not tell of other processes' writes.
const defaultWorkflowPoll = 200 * time.Millisecond
