package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/jsonerr"
	"github.com/loomthreads/loom/message"
)

// The events of a streamed run.

type updateJSON struct {
	Text      string         `json:"text,omitzero"`
	Reasoning string         `json:"reasoning,omitzero"`
	Call      *callDeltaJSON `json:"call,omitzero"`
	Usage     *message.Usage `json:"usage,omitzero"`
}

type callDeltaJSON struct {
	Index     int    `json:"index"`
	CallID    string `json:"call_id,omitzero"`
	Name      string `json:"name,omitzero"`
	Arguments string `json:"arguments,omitzero"`
}

type stepJSON struct {
	Kind     agent.StepKind    `json:"kind"`
	Commit   string            `json:"commit"`
	Version  int64             `json:"version"`
	Messages []message.Message `json:"messages"`
}

func resultJSON(res *agent.Result) runResponse {
	out := runResponse{RunID: res.RunID, Version: res.Version, Messages: orEmpty(res.Messages), Text: res.Text(),
		Pending: orEmpty(res.Pending), Usage: res.Usage, Requests: res.Requests}
	if res.Response != nil {
		out.Finish = res.Response.FinishReason
	}
	return out
}

// runInput reads a run's input: a list of messages, or a string that is
// the text of one user message.
func runInput(raw json.RawMessage) ([]message.Message, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, errBadJSON("input: " + jsonerr.Describe(nil, err))
		}
		return []message.Message{message.User(text)}, nil
	case '[':
		return decodeMessages(raw, "input")
	}
	return nil, errBadJSON("input: expected a string, the text of one user message, or an array of messages")
}

func onBusy(s string) (agent.OnBusy, error) {
	switch s {
	case "", "reject":
		return agent.Reject, nil
	case "queue":
		return agent.Queue, nil
	case "interrupt":
		return agent.Interrupt, nil
	}
	return 0, invalidf("on_busy %q: reject, queue or interrupt", clip(s))
}

// wantsStream reports whether the client asked for Server-Sent Events.
func wantsStream(r *http.Request, asked bool) bool {
	if asked {
		return true
	}
	for _, a := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(a), "text/event-stream") {
			return true
		}
	}
	return false
}

// run: POST /v1/threads/{id}/runs
func (s *Server) run(w http.ResponseWriter, r *http.Request) error {
	if _, err := threadID(r); err != nil {
		return err
	}
	if s.agent == nil {
		return errNoModel("runs need a model")
	}
	var req runRequest
	if err := decode(r, &req, false); err != nil {
		return err
	}
	input, err := runInput(req.Input)
	if err != nil {
		return err
	}
	how, err := onBusy(req.OnBusy)
	if err != nil {
		return err
	}
	areq := agent.Request{Input: input, OnBusy: how, Metadata: map[string]string{"request_id": RequestID(r.Context())}}
	for _, a := range req.Approvals {
		areq.Approvals = append(areq.Approvals, agent.Approval{CallID: a.CallID, Approved: a.Approved, Reason: a.Reason})
	}
	th, err := s.thread(r)
	if err != nil {
		return err
	}
	s.metrics.StoreOp("run")
	// A run may take longer than the server's write timeout.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	// The run follows the client: if it goes away the run is cancelled,
	// and commits what it completed.
	start := time.Now()
	if !wantsStream(r, req.Stream) {
		res, err := s.agent.Invoke(r.Context(), th, areq)
		s.metrics.runDone(start, res, err)
		_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		if err != nil {
			return err
		}
		setETag(w, th.Record(), res.Version)
		writeJSON(w, http.StatusOK, resultJSON(res))
		return nil
	}
	sse := &sseWriter{w: w, rc: rc}
	defer sse.heartbeat(s.heartbeat)()
	ended := false // recorded in the metrics
	defer func() {
		if !ended { // the client went away: the run was cancelled
			s.metrics.runDone(start, nil, context.Canceled)
		}
	}()
	for ev, err := range s.agent.InvokeStream(r.Context(), th, areq) {
		if err != nil {
			ended = true
			s.metrics.runDone(start, nil, err)
			if !sse.started {
				// Nothing was sent yet (busy, approvals missing): an
				// ordinary error response.
				return err
			}
			_, code, msg := s.reportError(r, err)
			sse.event("error", errorJSON{Code: code, Message: msg})
			return nil
		}
		var werr error
		switch {
		case ev.Update != nil:
			u := ev.Update
			out := updateJSON{Text: u.Text, Reasoning: u.Reasoning, Usage: u.Usage}
			if c := u.Call; c != nil {
				out.Call = &callDeltaJSON{Index: c.Index, CallID: c.CallID, Name: c.Name, Arguments: c.Arguments}
			}
			if out == (updateJSON{}) {
				continue // the final update: the step and the result carry it
			}
			werr = sse.event("update", out)
		case ev.Step != nil:
			st := ev.Step
			werr = sse.event("step", stepJSON{Kind: st.Kind, Commit: st.Commit, Version: st.Version, Messages: orEmpty(st.Messages)})
		case ev.Result != nil:
			ended = true
			s.metrics.runDone(start, ev.Result, nil)
			werr = sse.event("result", resultJSON(ev.Result))
		}
		if werr != nil {
			// The client is gone: stopping the iteration cancels the run,
			// which commits what it completed.
			return nil
		}
	}
	return nil
}

// sseWriter writes Server-Sent Events, flushing each one. The response's
// headers go with the first event. Its methods may be called from two
// goroutines: the run's and the heartbeat's.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

// DefaultHeartbeat is how often a streamed run that has nothing to send
// sends a comment line, when Options.Heartbeat is zero: proxies and load
// balancers close connections idle for longer (often 30 or 60 s), and a
// model may think for minutes.
const DefaultHeartbeat = 15 * time.Second

// heartbeat writes a comment (": ping") every interval once the stream
// has started, until the returned function is called, which waits for it
// to stop. interval <= 0 sends none.
func (s *sseWriter) heartbeat(interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if s.ping() != nil {
					return // the client is gone; the run's next write sees it
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

func (s *sseWriter) ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil // headers go with the first event, errors may still be plain
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if _, err := io.WriteString(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// sseWriteTimeout is how long one event of a streamed run may take to
// write.
const sseWriteTimeout = 30 * time.Second

func (s *sseWriter) event(name string, v any) error { return s.eventID(name, "", v) }
