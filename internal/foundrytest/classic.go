package foundrytest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Classic speaks the classic Foundry agents protocol (threads,
// messages, runs, run steps' tool calls, tool outputs, the api-version
// parameter), with the shapes of the service's REST reference, over an
// in-memory state. Its agent says back what it is told, and asks for the
// get_weather tool when asked about the weather.
type Classic struct {
	mu      sync.Mutex
	n       int
	threads map[string]*fakeThread
	runs    map[string]*fakeRun
	// auth
	APIKey string
	Cred   *Credential
	// failures to inject
	throttle
	fails        int
	failStatus   int
	retryAfterS  int
	requests     []string
	apiVersions  map[string]bool
	pollsPerStep int
}

type fakeThread struct {
	id   string
	msgs []map[string]any
}

type fakeRun struct {
	id, thread, status string
	polls              int
	calls              []map[string]any
	outputs            []map[string]string
	tools              []string
}

func NewClassic(t testing.TB) (*Classic, *httptest.Server) {
	s := &Classic{threads: map[string]*fakeThread{}, runs: map[string]*fakeRun{}, apiVersions: map[string]bool{}, pollsPerStep: 1}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func (s *Classic) id(prefix string) string { s.n++; return fmt.Sprintf("%s_%03d", prefix, s.n) }

func (s *Classic) fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (s *Classic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rid := s.id("req")
	w.Header().Set("x-ms-request-id", rid)
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.apiVersions[r.URL.Query().Get("api-version")] = true
	if r.URL.Query().Get("api-version") == "" {
		s.fail(w, 400, "BadRequest", "The api-version query parameter is required.")
		return
	}
	switch {
	case s.APIKey != "" && r.Header.Get("api-key") == s.APIKey:
	case s.Cred != nil && strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") && s.Cred.Valid(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")):
	default:
		s.fail(w, 401, "PermissionDenied", "Access token is missing, invalid or expired.")
		return
	}
	if s.fails > 0 {
		s.fails--
		s.fail(w, s.failStatus, "ServiceUnavailable", "The service is busy.")
		return
	}
	if ms, ok := s.refuse(); ok {
		if s.retryAfterS > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterS))
		} else {
			w.Header().Set("retry-after-ms", strconv.Itoa(ms))
			w.Header().Set("Retry-After", "1")
		}
		s.fail(w, 429, "TooManyRequests", "Rate limit is exceeded.")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var body map[string]any
	if r.Body != nil {
		json.NewDecoder(r.Body).Decode(&body)
	}
	switch {
	case r.Method == "POST" && len(parts) == 1 && parts[0] == "threads":
		th := &fakeThread{id: s.id("thread")}
		s.threads[th.id] = th
		writeJSON(w, map[string]any{"id": th.id, "object": "thread", "created_at": time.Now().Unix(), "metadata": map[string]any{}})
	case len(parts) >= 2 && parts[0] == "threads":
		th := s.threads[parts[1]]
		if th == nil {
			s.fail(w, 404, "not_found", fmt.Sprintf("No thread found with id '%s'.", parts[1]))
			return
		}
		switch {
		case r.Method == "DELETE" && len(parts) == 2:
			delete(s.threads, th.id)
			writeJSON(w, map[string]any{"id": th.id, "object": "thread.deleted", "deleted": true})
		case r.Method == "POST" && len(parts) == 3 && parts[2] == "messages":
			for _, run := range s.runs {
				if run.thread == th.id && (run.status == "queued" || run.status == "in_progress" || run.status == "requires_action") {
					s.fail(w, 400, "invalid_request_error", fmt.Sprintf("Can't add messages to %s while a run %s is active.", th.id, run.id))
					return
				}
			}
			text, _ := body["content"].(string)
			role, _ := body["role"].(string)
			m := s.message(th, role, text, "")
			writeJSON(w, m)
		case r.Method == "GET" && len(parts) == 3 && parts[2] == "messages":
			s.list(w, r, th)
		case r.Method == "POST" && len(parts) == 3 && parts[2] == "runs":
			run := &fakeRun{id: s.id("run"), thread: th.id, status: "queued"}
			for _, t := range anySlice(body["tools"]) {
				fn, _ := t.(map[string]any)["function"].(map[string]any)
				name, _ := fn["name"].(string)
				run.tools = append(run.tools, name)
			}
			s.runs[run.id] = run
			s.respondRun(w, th, run, body["stream"] == true)
		case r.Method == "GET" && len(parts) == 4 && parts[2] == "runs":
			run := s.runs[parts[3]]
			if run == nil || run.thread != th.id {
				s.fail(w, 404, "not_found", fmt.Sprintf("No run found with id '%s'.", parts[3]))
				return
			}
			run.polls++
			if run.polls >= s.pollsPerStep {
				s.advance(th, run)
			}
			writeJSON(w, s.runJSON(run))
		case r.Method == "POST" && len(parts) == 5 && parts[4] == "cancel":
			run := s.runs[parts[3]]
			if run == nil {
				s.fail(w, 404, "not_found", fmt.Sprintf("No run found with id '%s'.", parts[3]))
				return
			}
			if run.status != "completed" && run.status != "failed" && run.status != "expired" {
				run.status = "cancelled"
			}
			writeJSON(w, s.runJSON(run))
		case r.Method == "POST" && len(parts) == 5 && parts[4] == "submit_tool_outputs":
			run := s.runs[parts[3]]
			if run == nil || run.status != "requires_action" {
				s.fail(w, 400, "invalid_request_error", "Runs in status other than requires_action do not accept tool outputs.")
				return
			}
			for _, o := range anySlice(body["tool_outputs"]) {
				om := o.(map[string]any)
				run.outputs = append(run.outputs, map[string]string{"tool_call_id": fmt.Sprint(om["tool_call_id"]), "output": fmt.Sprint(om["output"])})
			}
			run.status, run.polls = "queued", 0
			s.respondRun(w, th, run, body["stream"] == true)
		default:
			s.fail(w, 404, "not_found", "No such route.")
		}
	default:
		s.fail(w, 404, "not_found", "No such route.")
	}
}

func anySlice(v any) []any { s, _ := v.([]any); return s }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Classic) message(th *fakeThread, role, text, run string) map[string]any {
	m := map[string]any{"id": s.id("msg"), "object": "thread.message", "thread_id": th.id, "role": role, "created_at": time.Now().Unix(),
		"content": []any{map[string]any{"type": "text", "text": map[string]any{"value": text, "annotations": []any{}}}}, "run_id": nil}
	if run != "" {
		m["run_id"] = run
	}
	th.msgs = append(th.msgs, m)
	return m
}

// list answers a page of messages: order, limit, after, run_id.
func (s *Classic) list(w http.ResponseWriter, r *http.Request, th *fakeThread) {
	q := r.URL.Query()
	var all []map[string]any
	for _, m := range th.msgs {
		if q.Get("run_id") == "" || m["run_id"] == q.Get("run_id") {
			all = append(all, m)
		}
	}
	writePage(w, q, all)
}

// writePage answers a page of a list, as the services do: order (desc
// unless asc), after (a cursor), limit (20 by default, at most 100), and
// has_more, first_id, last_id.
func writePage(w http.ResponseWriter, q url.Values, all []map[string]any) {
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	if q.Get("order") != "asc" {
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
	}
	if after := q.Get("after"); after != "" {
		for i, m := range all {
			if m["id"] == after {
				all = all[i+1:]
				break
			}
		}
	}
	more := len(all) > limit
	if more {
		all = all[:limit]
	}
	page := map[string]any{"object": "list", "data": all, "has_more": more, "first_id": nil, "last_id": nil}
	if len(all) > 0 {
		page["first_id"], page["last_id"] = all[0]["id"], all[len(all)-1]["id"]
	}
	writeJSON(w, page)
}

// advance moves a run on: queued → in_progress → its end (the agent's
// answer, or a call of get_weather).
func (s *Classic) advance(th *fakeThread, run *fakeRun) {
	switch run.status {
	case "queued":
		run.status = "in_progress"
	case "in_progress":
		last := ""
		for _, m := range th.msgs {
			if m["role"] == "user" {
				last = textOf(m)
			}
		}
		switch {
		case len(run.outputs) > 0:
			s.message(th, "assistant", "The weather: "+run.outputs[0]["output"], run.id)
			run.status = "completed"
		case strings.Contains(last, "weather") && slices.Contains(run.tools, "get_weather"):
			s.message(th, "assistant", "Let me look.", run.id)
			run.calls = []map[string]any{{"id": s.id("call"), "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}}}
			run.status = "requires_action"
		case strings.Contains(last, "fail"):
			run.status = "failed"
		default:
			s.message(th, "assistant", "You said: "+last, run.id)
			run.status = "completed"
		}
	}
}

// textOf is the text of a message of a thread, as message makes it.
func textOf(m map[string]any) string {
	return m["content"].([]any)[0].(map[string]any)["text"].(map[string]any)["value"].(string)
}

func (s *Classic) runJSON(run *fakeRun) map[string]any {
	out := map[string]any{"id": run.id, "object": "thread.run", "thread_id": run.thread, "assistant_id": "asst_1", "status": run.status,
		"required_action": nil, "last_error": nil, "usage": nil}
	if run.status == "requires_action" {
		out["required_action"] = map[string]any{"type": "submit_tool_outputs", "submit_tool_outputs": map[string]any{"tool_calls": run.calls}}
	}
	if run.status == "failed" {
		out["last_error"] = map[string]any{"code": "server_error", "message": "Sorry, something went wrong."}
	}
	if run.status == "completed" {
		out["usage"] = map[string]any{"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
	}
	return out
}

// respondRun answers a created (or resumed) run: as it is, or, streamed,
// as the service's events until it ends or asks for tools.
func (s *Classic) respondRun(w http.ResponseWriter, th *fakeThread, run *fakeRun, stream bool) {
	if !stream {
		writeJSON(w, s.runJSON(run))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		w.(http.Flusher).Flush()
	}
	send("thread.run.created", s.runJSON(run))
	s.advance(th, run)
	send("thread.run.in_progress", s.runJSON(run))
	before := len(th.msgs)
	s.advance(th, run)
	if len(th.msgs) > before {
		m := th.msgs[len(th.msgs)-1]
		send("thread.message.created", m)
		text := textOf(m)
		for i := 0; i < len(text); i += 5 {
			chunk := text[i:min(i+5, len(text))]
			send("thread.message.delta", map[string]any{"id": m["id"], "object": "thread.message.delta",
				"delta": map[string]any{"content": []any{map[string]any{"index": 0, "type": "text", "text": map[string]any{"value": chunk}}}}})
		}
		send("thread.message.completed", m)
	}
	send("thread.run."+run.status, s.runJSON(run))
	fmt.Fprint(w, "event: done\ndata: [DONE]\n\n")
}

// Credential issues tokens that live for ttl, and is asked how many.
type Credential struct {
	mu     sync.Mutex
	TTL    time.Duration
	Now    func() time.Time
	issued map[string]time.Time
	calls  int
}

// GetToken implements azcore.TokenCredential: a token for Foundry's scope
// that lives for TTL.
func (c *Credential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(o.Scopes) != 1 || o.Scopes[0] != "https://ai.azure.com/.default" {
		return azcore.AccessToken{}, fmt.Errorf("scopes %v", o.Scopes)
	}
	if c.issued == nil {
		c.issued = map[string]time.Time{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.calls++
	tok := fmt.Sprintf("tok-%d", c.calls)
	exp := c.Now().Add(c.TTL)
	c.issued[tok] = exp
	return azcore.AccessToken{Token: tok, ExpiresOn: exp}, nil
}

// Valid reports whether tok is a token it issued that has not expired and
// was not revoked.
func (c *Credential) Valid(tok string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.issued[tok]
	return ok && c.Now().Before(exp)
}

// Calls returns how many tokens it issued.
func (c *Credential) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// Revoke makes every token it issued invalid.
func (c *Credential) Revoke() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tok := range c.issued {
		c.issued[tok] = time.Time{}
	}
}

// CreateThread makes a thread on the server with the user messages texts
// and returns its id.
func (s *Classic) CreateThread(texts ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	th := &fakeThread{id: s.id("thread")}
	s.threads[th.id] = th
	for _, t := range texts {
		s.message(th, "user", t, "")
	}
	return th.id
}

// ThreadLen returns how many messages the thread id holds, -1 when there
// is no such thread.
func (s *Classic) ThreadLen(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	th := s.threads[id]
	if th == nil {
		return -1
	}
	return len(th.msgs)
}

// Requests returns the requests it got, as "METHOD /path".
func (s *Classic) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// APIVersions returns the api-version values it was sent.
func (s *Classic) APIVersions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for v := range s.apiVersions {
		out = append(out, v)
	}
	return out
}

// throttle refuses requests with 429 when it is told to, and keeps when
// it did; both servers embed it.
type throttle struct {
	mu sync.Mutex
	n  int
	ms int
	at []time.Time
}

// Throttle makes the next n requests fail with 429, asking to retry after
// ms milliseconds.
func (t *throttle) Throttle(n, ms int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n, t.ms = n, ms
}

// ThrottledAt returns when it refused requests with 429.
func (t *throttle) ThrottledAt() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Time(nil), t.at...)
}

// refuse reports whether this request is to be refused with 429, and the
// milliseconds after which to retry it.
func (t *throttle) refuse() (ms int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n <= 0 {
		return 0, false
	}
	t.n--
	t.at = append(t.at, time.Now())
	return t.ms, true
}

// Fail makes the next n requests fail with status (a 5xx).
func (s *Classic) Fail(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails, s.failStatus = n, status
}

// ExpireRuns ends every run that waits, as the service does with runs
// that wait too long for their tool outputs.
func (s *Classic) ExpireRuns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, run := range s.runs {
		if run.status == "requires_action" {
			run.status = "expired"
		}
	}
}

// RetryAfter sets the Retry-After (in seconds) of the 429 answers.
func (s *Classic) RetryAfter(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfterS = seconds
}
