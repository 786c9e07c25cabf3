package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// The workflow routes: /v1/workflows/… reads a tenant's workflows (package
// workflow) and moves them through time; their steps run in the Go program
// that declares them, and their sub-threads are threads of /v1/threads.

type workflowJSON struct {
	ID         string            `json:"id"`
	Title      string            `json:"title"`
	Labels     map[string]string `json:"labels"`
	Version    int64             `json:"version"`
	Status     workflow.Status   `json:"status"`
	Round      int               `json:"round"`
	SubThreads []string          `json:"sub_threads"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	// Stalled is set when the status says running but no runner holds the
	// workflow (workflow.Workflow.Stalled): nothing will move it until its
	// program runs it again.
	Stalled *stalledJSON `json:"stalled,omitzero"`
}

// stalledJSON says since when a stalled workflow has not moved: the time
// of its last commit, which a live runner renews.
type stalledJSON struct {
	Since time.Time `json:"since"`
}

// workflowOf is the workflow's JSON with status and round; stalled is
// whether its newest version is stalled (false for a past version).
func workflowOf(w *workflow.Workflow, status workflow.Status, round int, stalled bool) workflowJSON {
	r := w.Thread().Record()
	labels := r.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	out := workflowJSON{ID: r.ID, Title: r.Title, Labels: labels, Version: r.Version, Status: status, Round: round,
		SubThreads: w.SubThreadKeys(), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if stalled {
		out.Stalled = &stalledJSON{Since: r.UpdatedAt}
	}
	return out
}

type workflowsResponse struct {
	Workflows  []workflowJSON `json:"workflows"`
	NextCursor string         `json:"next_cursor,omitzero"`
}

type pointRequest struct {
	Checkpoint string `json:"checkpoint"`
	Version    int64  `json:"version"`
}

func (p pointRequest) point(what string) (workflow.Point, error) {
	if (p.Checkpoint == "") == (p.Version == 0) || p.Version < 0 {
		return workflow.Point{}, invalidf("%s: either checkpoint (a name) or version (at least 1)", what)
	}
	return workflow.Point{Checkpoint: p.Checkpoint, Version: p.Version}, nil
}

type workflowForkRequest struct {
	Checkpoint string            `json:"checkpoint"`
	Version    int64             `json:"version"`
	ID         string            `json:"id"`
	Title      string            `json:"title"`
	Labels     map[string]string `json:"labels"`
}

type workflowInputRequest struct {
	Step  string          `json:"step"`
	Input json.RawMessage `json:"input"`
}

// workflowEditRequest is an Update: at a point (none: the head), by whom,
// and what it sets. Next absent leaves the next steps; [] ends the
// workflow.
type workflowEditRequest struct {
	By         string                     `json:"by"`
	Checkpoint string                     `json:"checkpoint"`
	Version    int64                      `json:"version"`
	Input      json.RawMessage            `json:"input"`
	Outputs    map[string]json.RawMessage `json:"outputs"`
	Next       *[]string                  `json:"next"`
}

// editWorkflow: POST /v1/workflows/{id}/edits {by, checkpoint|version,
// input, outputs, next} — a person's edit of the execution (Update,
// LangGraph's update_state): recorded with its author, and the workflow's
// next run goes on from it.
func (s *Server) editWorkflow(w http.ResponseWriter, r *http.Request) error {
	var req workflowEditRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	var p workflow.Point
	if req.Checkpoint != "" || req.Version != 0 {
		var err error
		if p, err = (pointRequest{Checkpoint: req.Checkpoint, Version: req.Version}).point("edit"); err != nil {
			return err
		}
	}
	u := workflow.Update{By: req.By}
	if req.Input != nil {
		u.Input = req.Input
	}
	if len(req.Outputs) > 0 {
		u.Outputs = make(map[string]any, len(req.Outputs))
		for name, out := range req.Outputs {
			u.Outputs[name] = out
		}
	}
	if req.Next != nil {
		u.Next = append([]string{}, *req.Next...) // [] ends the workflow: never nil
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	if s.workflows != nil {
		// A run of this server that left the workflow waiting may hold it
		// a moment longer: the edit waits for it to let go.
		wf, err = s.workflows.Update(r.Context(), s.tenantDB(r), wf.ID(), p, u)
	} else {
		err = wf.Update(write(r), p, u)
	}
	if err != nil {
		return err
	}
	return s.answerWorkflow(w, r, http.StatusOK, wf, 0)
}

// workflow opens the workflow of the path's {id}.
func (s *Server) workflow(r *http.Request) (*workflow.Workflow, error) {
	id := r.PathValue("id")
	if !ids.Valid(id) {
		return nil, invalidf("workflow id %q: 1 to %d letters, digits, '_', '-' or '.', not starting with '.' or '-'", clip(id), ids.MaxLen)
	}
	s.metrics.StoreOp("workflow")
	return workflow.Open(r.Context(), s.tenantDB(r), id)
}

func workflowLocation(id string) string { return "/v1/workflows/" + url.PathEscape(id) }

// listWorkflows: GET /v1/workflows?limit=&cursor=
func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	opts := thread.ListOptions{Limit: limit + 1}
	if c := q.Get("cursor"); c != "" {
		after, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !ids.Valid(string(after)) {
			return invalidf("query parameter cursor=%q: not a cursor this server gave", clip(c))
		}
		opts.After = string(after)
	}
	resp := workflowsResponse{Workflows: []workflowJSON{}}
	s.metrics.StoreOp("list_workflows")
	for wf, err := range workflow.List(r.Context(), s.tenantDB(r), opts) {
		if err != nil {
			return err
		}
		if len(resp.Workflows) == limit {
			resp.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(resp.Workflows[limit-1].ID))
			break
		}
		// The handle holds status and round: no step record is read.
		resp.Workflows = append(resp.Workflows, workflowOf(wf, wf.Status(), wf.Round(), wf.Stalled(time.Now())))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// getWorkflow: GET /v1/workflows/{id}?version= — the execution state
// (steps, current and next, sub-threads) at a version, the newest by
// default.
func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	v, err := intParam(r.URL.Query(), "version", 0)
	if err != nil {
		return err
	}
	if v < 0 {
		return invalidf("query parameter version=%d: at least 1", v)
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	return s.answerWorkflow(w, r, http.StatusOK, wf, v)
}

// deleteWorkflow: DELETE /v1/workflows/{id}
func (s *Server) deleteWorkflow(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	if err := wf.Delete(write(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// workflowHistory: GET /v1/workflows/{id}/history?before=&limit=
func (s *Server) workflowHistory(w http.ResponseWriter, r *http.Request) error {
	return historyPage(w, r, func() (historyFunc, error) {
		wf, err := s.workflow(r)
		if err != nil {
			return nil, err
		}
		return wf.History, nil
	})
}

// workflowCheckpoints: GET /v1/workflows/{id}/checkpoints
func (s *Server) workflowCheckpoints(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	return writeCheckpoints(w, wf.Checkpoints(r.Context()))
}

// checkpointWorkflow: POST /v1/workflows/{id}/checkpoints {name}
func (s *Server) checkpointWorkflow(w http.ResponseWriter, r *http.Request) error {
	var req checkpointRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	cp, err := wf.Checkpoint(write(r), req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", workflowLocation(wf.ID())+"/checkpoints")
	writeJSON(w, http.StatusCreated, checkpointOf(cp))
	return nil
}

// restoreWorkflow: POST /v1/workflows/{id}/restore {checkpoint} or {version}
func (s *Server) restoreWorkflow(w http.ResponseWriter, r *http.Request) error {
	var req pointRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	p, err := req.point("restore")
	if err != nil {
		return err
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	if err := wf.Restore(write(r), p); err != nil {
		return err
	}
	return s.answerWorkflow(w, r, http.StatusOK, wf, 0)
}

// forkWorkflow: POST /v1/workflows/{id}/fork {checkpoint|version, id, title, labels}
func (s *Server) forkWorkflow(w http.ResponseWriter, r *http.Request) error {
	var req workflowForkRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	p, err := pointRequest{Checkpoint: req.Checkpoint, Version: req.Version}.point("fork")
	if err != nil {
		return err
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	f, err := wf.Fork(write(r), p, workflow.ForkOptions{ID: req.ID, Title: req.Title, Labels: req.Labels})
	if err != nil {
		return err
	}
	w.Header().Set("Location", workflowLocation(f.ID()))
	return s.answerWorkflow(w, r, http.StatusCreated, f, 0)
}

// workflowInput: POST /v1/workflows/{id}/input {step, input} — the input a
// waiting step asked for; the program that runs the workflow goes on.
func (s *Server) workflowInput(w http.ResponseWriter, r *http.Request) error {
	var req workflowInputRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if req.Step == "" || len(req.Input) == 0 {
		return invalidf("input: step (a name) and input (any JSON value)")
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	if s.workflows != nil {
		// A run of this server that left the workflow waiting may hold it
		// a moment longer: the input waits for it to let go.
		wf, err = s.workflows.Provide(r.Context(), s.tenantDB(r), wf.ID(), req.Step, req.Input)
	} else {
		err = wf.Provide(write(r), req.Step, req.Input)
	}
	if err != nil {
		return err
	}
	return s.answerWorkflow(w, r, http.StatusOK, wf, 0)
}

// workflowAt: GET /v1/workflows/{id}/at?checkpoint=|version=&last= — the
// whole workflow at a point: its execution state and each sub-thread's
// messages as it recorded them.
func (s *Server) workflowAt(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	v, err := intParam(q, "version", 0)
	if err != nil {
		return err
	}
	last, err := intParam(q, "last", 0)
	if err != nil {
		return err
	}
	if last < 0 || last > maxLimit {
		return invalidf("query parameter last=%d: 0 (all) to %d", last, maxLimit)
	}
	p, err := pointRequest{Checkpoint: q.Get("checkpoint"), Version: v}.point("at")
	if err != nil {
		return err
	}
	wf, err := s.workflow(r)
	if err != nil {
		return err
	}
	snap, err := wf.At(r.Context(), p, workflow.AtOptions{Last: int(last)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

// answerWorkflow answers with the workflow and its execution state at
// version (0: now); only the newest version can be stalled.
func (s *Server) answerWorkflow(w http.ResponseWriter, r *http.Request, status int, wf *workflow.Workflow, version int64) error {
	ex, err := wf.Execution(r.Context(), version)
	if err != nil {
		return err
	}
	stalled := ex.Version == wf.Version() && ex.Stalled(time.Now())
	writeJSON(w, status, struct {
		workflowJSON
		Execution *workflow.Execution `json:"execution"`
	}{workflowOf(wf, ex.Status, ex.Round, stalled), ex})
	return nil
}
