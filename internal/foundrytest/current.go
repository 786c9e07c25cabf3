package foundrytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Current speaks the current protocol of Foundry agents: the OpenAI
// Responses and Conversations APIs under a project endpoint (/openai/…),
// with the api-version parameter and an agent reference in each request
// for a response, in the shapes of the OpenAI API reference. Its agent
// says back what it is told, and calls get_weather when asked about the
// weather.
type Current struct {
	mu            sync.Mutex
	n             int
	conversations map[string][]map[string]any
	APIKey        string
	Cred          *Credential
	throttle
	// OpenAI serves OpenAI's own API: a model and no agent, a bearer key,
	// no api-version.
	OpenAI bool
}

func NewCurrent(t testing.TB) (*Current, *httptest.Server) {
	s := &Current{conversations: map[string][]map[string]any{}}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func (s *Current) id(p string) string { s.n++; return fmt.Sprintf("%s_%03d", p, s.n) }

func (s *Current) fail(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg, "param": nil}})
}

func (s *Current) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("x-request-id", s.id("req"))
	if r.URL.Query().Get("api-version") == "" && !s.OpenAI {
		s.fail(w, 400, "invalid_request_error", "BadRequest", "Missing api-version.")
		return
	}
	auth := r.Header.Get("Authorization")
	switch {
	case s.OpenAI && auth == "Bearer "+s.APIKey:
	case s.APIKey != "" && r.Header.Get("api-key") == s.APIKey && auth == "":
	case s.Cred != nil && strings.HasPrefix(auth, "Bearer ") && s.Cred.Valid(strings.TrimPrefix(auth, "Bearer ")):
	default:
		s.fail(w, 401, "invalid_request_error", "PermissionDenied", "Access token is missing, invalid or expired.")
		return
	}
	if ms, ok := s.refuse(); ok {
		w.Header().Set("retry-after-ms", strconv.Itoa(ms))
		s.fail(w, 429, "rate_limit_error", "TooManyRequests", "Rate limit is exceeded.")
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	switch {
	case r.Method == "POST" && r.URL.Path == "/openai/conversations":
		id := s.id("conv")
		s.conversations[id] = nil
		writeJSON(w, map[string]any{"id": id, "object": "conversation", "created_at": time.Now().Unix(), "metadata": map[string]any{}})
	case r.Method == "POST" && r.URL.Path == "/openai/responses":
		s.respond(w, body)
	case strings.HasPrefix(r.URL.Path, "/openai/conversations/"):
		rest := strings.TrimPrefix(r.URL.Path, "/openai/conversations/")
		id, sub, _ := strings.Cut(rest, "/")
		items, ok := s.conversations[id]
		if !ok {
			s.fail(w, 404, "invalid_request_error", "not_found", fmt.Sprintf("Conversation with id '%s' not found.", id))
			return
		}
		switch {
		case r.Method == "DELETE" && sub == "":
			delete(s.conversations, id)
			writeJSON(w, map[string]any{"id": id, "object": "conversation.deleted", "deleted": true})
		case r.Method == "GET" && sub == "items":
			s.items(w, r, items)
		default:
			s.fail(w, 404, "invalid_request_error", "not_found", "No such route.")
		}
	default:
		s.fail(w, 404, "invalid_request_error", "not_found", "No such route.")
	}
}

// items answers a page of a conversation's items: order, limit, after.
func (s *Current) items(w http.ResponseWriter, r *http.Request, items []map[string]any) {
	q := r.URL.Query()
	var all []map[string]any
	for i, it := range items {
		out := map[string]any{}
		for k, v := range it {
			out[k] = v
		}
		if out["id"] == nil {
			out["id"] = fmt.Sprintf("item_%03d", i)
		}
		if out["type"] == nil {
			out["type"] = "message"
		}
		if text, ok := out["content"].(string); ok {
			out["content"] = []any{map[string]any{"type": "input_text", "text": text}}
		}
		all = append(all, out)
	}
	writePage(w, q, all)
}

func (s *Current) respond(w http.ResponseWriter, body map[string]any) {
	ref, _ := body["agent"].(map[string]any)
	if s.OpenAI && (body["model"] == nil || ref != nil) {
		s.fail(w, 400, "invalid_request_error", "invalid_model", "A model is required.")
		return
	}
	if !s.OpenAI && (ref["type"] != "agent_reference" || ref["name"] == "" || body["model"] != nil) {
		s.fail(w, 400, "invalid_request_error", "invalid_agent", "A request names its agent by reference, and no model.")
		return
	}
	conv := ""
	switch c := body["conversation"].(type) {
	case string:
		conv = c
	case map[string]any:
		conv, _ = c["id"].(string)
	}
	items, ok := s.conversations[conv]
	if !ok && conv != "" {
		s.fail(w, 404, "invalid_request_error", "not_found", fmt.Sprintf("Conversation with id '%s' not found.", conv))
		return
	}
	var tools []string
	for _, t := range anySlice(body["tools"]) {
		name, _ := t.(map[string]any)["name"].(string)
		tools = append(tools, name)
	}
	last, output := "", ""
	for _, in := range anySlice(body["input"]) {
		item := in.(map[string]any)
		items = append(items, item)
		switch item["type"] {
		case "function_call_output":
			output = fmt.Sprint(item["output"])
		default:
			if item["role"] == "user" {
				switch c := item["content"].(type) {
				case string:
					last = c
				case []any:
					for _, p := range c {
						if t, ok := p.(map[string]any)["text"].(string); ok {
							last = t
						}
					}
				}
			}
		}
	}
	var out map[string]any
	switch {
	case output != "":
		out = map[string]any{"type": "message", "id": s.id("msg"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": "The weather: " + output, "annotations": []any{}}}}
	case strings.Contains(last, "weather") && slices.Contains(tools, "get_weather"):
		out = map[string]any{"type": "function_call", "id": s.id("fc"), "call_id": s.id("call"), "name": "get_weather", "arguments": `{"city":"Paris"}`, "status": "completed"}
	default:
		out = map[string]any{"type": "message", "id": s.id("msg"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": "You said: " + last, "annotations": []any{}}}}
	}
	items = append(items, out)
	if conv != "" { // without one, a request keeps nothing
		s.conversations[conv] = items
	}
	resp := map[string]any{"id": s.id("resp"), "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"model": "gpt-4.1", "output": []any{out}, "conversation": map[string]any{"id": conv},
		"usage": map[string]any{"input_tokens": 12, "output_tokens": 5, "total_tokens": 17, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}
	if body["stream"] != true {
		writeJSON(w, resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	send := func(typ string, ev map[string]any) {
		ev["type"], ev["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	inProgress := map[string]any{}
	for k, v := range resp {
		inProgress[k] = v
	}
	inProgress["status"], inProgress["output"] = "in_progress", []any{}
	send("response.created", map[string]any{"response": inProgress})
	empty := map[string]any{}
	for k, v := range out {
		empty[k] = v
	}
	if out["type"] == "message" {
		empty["content"], empty["status"] = []any{}, "in_progress"
	} else {
		empty["arguments"], empty["status"] = "", "in_progress"
	}
	send("response.output_item.added", map[string]any{"output_index": 0, "item": empty})
	if out["type"] == "message" {
		text := out["content"].([]any)[0].(map[string]any)["text"].(string)
		for i := 0; i < len(text); i += 5 {
			send("response.output_text.delta", map[string]any{"item_id": out["id"], "output_index": 0, "content_index": 0, "delta": text[i:min(i+5, len(text))], "logprobs": []any{}})
		}
	} else {
		send("response.function_call_arguments.delta", map[string]any{"item_id": out["id"], "output_index": 0, "delta": out["arguments"]})
	}
	send("response.output_item.done", map[string]any{"output_index": 0, "item": out})
	send("response.completed", map[string]any{"response": resp})
}

// CreateConversation makes an empty conversation and returns its id.
func (s *Current) CreateConversation() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id("conv")
	s.conversations[id] = nil
	return id
}
