package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/internal/oaiitem"
	"github.com/loomthreads/loom/message"
)

// events writes a response's server-sent events: "event: <type>" and
// "data: <json>", the JSON with its type and a sequence number counted
// from 0, each flushed as it is written. A write that fails (the client
// went away) ends the writing; the response is still made.
type events struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	seq int
	err error
}

func (e *events) send(typ string, fields map[string]any) {
	if e.err != nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = e.seq
	e.seq++
	data, err := json.Marshal(fields)
	if err != nil {
		e.err = err
		return
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", typ, data); err != nil {
		e.err = err
		return
	}
	if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		e.err = err
	}
}

// liveItem is an output item as the stream announced it.
type liveItem struct {
	id, typ string // message, function_call or reasoning
	index   int    // output_index
	text    []byte // the text, arguments or summary so far
	callID  string
	name    string
	call    int // the call's index among the model's calls
	open    bool
}

// message is the item as a loom message, with what was streamed.
func (it *liveItem) message() message.Message {
	m := message.Message{ID: it.id, Role: message.RoleAssistant}
	switch it.typ {
	case "function_call":
		m.Contents = []message.Content{message.FunctionCall{CallID: it.callID, Name: it.name, Arguments: string(it.text)}}
	case "reasoning":
		m.Contents = []message.Content{message.Reasoning{Text: string(it.text)}}
	default:
		m.Contents = []message.Content{message.Text{Text: string(it.text)}}
	}
	return m
}

// streamer turns a model's updates into the events of the output items.
type streamer struct {
	ev    *events
	items []*liveItem
	cur   *liveItem
}

// start announces a new item of typ, closing the one before.
func (st *streamer) start(typ, id string) *liveItem {
	st.close()
	it := &liveItem{id: id, typ: typ, index: len(st.items), open: true}
	st.items = append(st.items, it)
	st.cur = it
	return it
}

func (st *streamer) startMessage(id string) {
	it := st.start("message", id)
	st.ev.send("response.output_item.added", map[string]any{"output_index": it.index,
		"item": map[string]any{"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
	st.ev.send("response.content_part.added", map[string]any{"item_id": id, "output_index": it.index, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})
}

func (st *streamer) startCall(id, callID, name string, index int) {
	it := st.start("function_call", id)
	it.callID, it.name, it.call = callID, name, index
	st.ev.send("response.output_item.added", map[string]any{"output_index": it.index,
		"item": map[string]any{"id": id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": callID, "name": name}})
}

func (st *streamer) startReasoning(id string) {
	it := st.start("reasoning", id)
	st.ev.send("response.output_item.added", map[string]any{"output_index": it.index,
		"item": map[string]any{"id": id, "type": "reasoning", "summary": []any{}}})
	st.ev.send("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": it.index, "summary_index": 0,
		"part": map[string]any{"type": "summary_text", "text": ""}})
}

// delta adds a piece to the open item.
func (st *streamer) delta(s string) {
	it := st.cur
	if s == "" || it == nil {
		return
	}
	it.text = append(it.text, s...)
	switch it.typ {
	case "message":
		st.ev.send("response.output_text.delta", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "delta": s, "logprobs": []any{}})
	case "function_call":
		st.ev.send("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.index, "delta": s})
	case "reasoning":
		st.ev.send("response.reasoning_summary_text.delta", map[string]any{"item_id": it.id, "output_index": it.index, "summary_index": 0, "delta": s})
	}
}

// update streams one update of the model.
func (st *streamer) update(u agent.Update) {
	switch {
	case u.Reasoning != "":
		if st.cur == nil || st.cur.typ != "reasoning" {
			st.startReasoning(oaiitem.NewID("reasoning"))
		}
		st.delta(u.Reasoning)
	case u.Text != "":
		if st.cur == nil || st.cur.typ != "message" {
			st.startMessage(oaiitem.NewID("message"))
		}
		st.delta(u.Text)
	case u.Call != nil:
		if st.cur == nil || st.cur.typ != "function_call" || st.cur.call != u.Call.Index {
			st.startCall(oaiitem.NewID("function_call"), u.Call.CallID, u.Call.Name, u.Call.Index)
		}
		st.delta(u.Call.Arguments)
	}
}

// close ends the open item, if any, with its done events.
func (st *streamer) close() {
	it := st.cur
	if it == nil || !it.open {
		return
	}
	it.open, st.cur = false, nil
	text := string(it.text)
	switch it.typ {
	case "message":
		st.ev.send("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "text": text, "logprobs": []any{}})
		st.ev.send("response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}})
	case "function_call":
		st.ev.send("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.index, "arguments": text, "name": it.name})
	case "reasoning":
		st.ev.send("response.reasoning_summary_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "summary_index": 0, "text": text})
		st.ev.send("response.reasoning_summary_part.done", map[string]any{"item_id": it.id, "output_index": it.index, "summary_index": 0,
			"part": map[string]any{"type": "summary_text", "text": text}})
	}
	st.ev.send("response.output_item.done", map[string]any{"output_index": it.index, "item": itemJSON(it.message())})
}

// itemJSON is the (first) item of m.
func itemJSON(m message.Message) json.RawMessage {
	items := oaiitem.Items([]message.Message{m})
	if len(items) == 0 {
		return json.RawMessage(`{}`)
	}
	return items[0].JSON
}

// typeOfItem is the type of m's (first) item.
func typeOfItem(m message.Message) string {
	var head struct {
		Type string `json:"type"`
	}
	json.Unmarshal(itemJSON(m), &head)
	return head.Type
}

// finish matches the model's final answer, one message per item, to the
// items streamed: each streamed item gives its id to the answer's next
// item of its type (a function call to the one with its call id), so
// that the response's output is the items the events announced, in their
// order. Items the stream did not show are announced now, whole, after
// them. It returns the output messages in order.
func (st *streamer) finish(answer []message.Message) []message.Message {
	st.close()
	used := make([]bool, len(answer))
	types := make([]string, len(answer))
	for i, m := range answer {
		types[i] = typeOfItem(m)
	}
	var out []message.Message
	for _, it := range st.items {
		match := -1
		for i, m := range answer {
			if used[i] || types[i] != it.typ {
				continue
			}
			if it.typ == "function_call" {
				if calls := m.Calls(); len(calls) == 0 || calls[0].CallID != it.callID {
					continue
				}
			}
			match = i
			break
		}
		if match < 0 {
			continue // streamed, then not in the answer: the answer rules
		}
		used[match] = true
		m := answer[match]
		m.ID = it.id
		out = append(out, m)
	}
	for i, m := range answer {
		if used[i] {
			continue
		}
		switch types[i] {
		case "message":
			st.startMessage(m.ID)
			st.delta(m.Text())
		case "function_call":
			fc := m.Calls()[0]
			st.startCall(m.ID, fc.CallID, fc.Name, -1)
			st.delta(fc.Arguments)
		case "reasoning":
			st.startReasoning(m.ID)
			for _, c := range m.Contents {
				if r, ok := c.(message.Reasoning); ok {
					st.delta(r.Text)
				}
			}
		case "":
			out = append(out, m) // no item (usage alone): stored, not shown
			continue
		default:
			st.close()
			index := len(st.items)
			st.items = append(st.items, &liveItem{id: m.ID, typ: types[i], index: index})
			st.ev.send("response.output_item.added", map[string]any{"output_index": index, "item": itemJSON(m)})
			st.ev.send("response.output_item.done", map[string]any{"output_index": index, "item": itemJSON(m)})
			out = append(out, m)
			continue
		}
		st.close()
		out = append(out, m)
	}
	return out
}

// streamResponse answers p with server-sent events: response.created and
// response.in_progress, the output items as the model makes them, then —
// once the response is committed — response.completed (or
// response.incomplete). A model that fails, or a commit refused, ends the
// stream with response.failed and an error event, and nothing is written.
// Everything that could be refused was before: from here the answer is
// 200.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, p *pending, msgs []message.Message, opts *agent.ChatOptions) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ev := &events{w: w, rc: http.NewResponseController(w)}
	p.announced = true
	ev.send("response.created", map[string]any{"response": p.obj})
	ev.send("response.in_progress", map[string]any{"response": p.obj})

	ctx := r.Context()
	st := &streamer{ev: ev}
	var final *agent.ChatResponse
	var failed error
	for u, err := range s.chat.Stream(ctx, msgs, opts) {
		if err != nil {
			failed = err
			break
		}
		if u.Response != nil {
			final = u.Response
			break
		}
		st.update(u)
	}
	if failed == nil && final == nil {
		failed = errors.New("the model's stream ended without a response")
	}
	if failed != nil {
		s.failStream(r, ev, p, s.modelError(r, failed))
		return nil
	}
	output := st.finish(splitOutput(final.Messages))
	p.complete(final, output)
	if err := s.save(ctx, p, output); err != nil {
		s.failStream(r, ev, p, err)
		return nil
	}
	done := "response.completed"
	if p.obj.Status == "incomplete" {
		done = "response.incomplete"
	}
	ev.send(done, map[string]any{"response": p.obj})
	return nil
}

// failStream ends a stream with response.failed and an error event that
// say what went wrong, as writeError would have.
func (s *Server) failStream(r *http.Request, ev *events, p *pending, err error) {
	e := s.openAIError(r, err)
	code := e.Code
	if code == "" {
		code = e.Type
	}
	p.obj.Status = "failed"
	p.obj.Error = &responseError{Code: code, Message: e.Message}
	p.obj.Output = []json.RawMessage{}
	p.obj.Usage = nil
	ev.send("response.failed", map[string]any{"response": p.obj})
	ev.send("error", map[string]any{"code": code, "message": e.Message, "param": orNull(e.Param)})
}

// openAIError is err as writeError answers it.
func (s *Server) openAIError(r *http.Request, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	status, code, msg := apierr.Classify(err, false)
	if status == http.StatusInternalServerError {
		id := httpapi.RequestID(r.Context())
		s.log.ErrorContext(r.Context(), "openai api: internal error", "method", r.Method, "path", r.URL.Path, "request_id", id, "err", err)
		msg = "The server had an error while processing your request (request id " + id + ")."
	}
	if errors.Is(err, context.Canceled) {
		msg = "The request was canceled."
	}
	return &Error{Status: status, Type: typeOf(status), Code: code, Message: msg}
}
