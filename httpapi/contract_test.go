package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// contract checks answers against openapi.json: the status is one the
// operation documents, the content type one that response documents, and
// a JSON body valid against its schema (JSON Schema 2020-12, with the
// document's component schemas as $defs).
type contract struct {
	doc     map[string]any
	mu      sync.Mutex
	schemas map[string]*jsonschema.Resolved // by the JSON of the schema
}

func newContract(t *testing.T) *contract {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	return &contract{doc: doc, schemas: map[string]*jsonschema.Resolved{}}
}

// ref follows a local $ref.
func (c *contract) ref(v map[string]any) map[string]any {
	for {
		r, ok := v["$ref"].(string)
		if !ok {
			return v
		}
		var cur any = c.doc
		for part := range strings.SplitSeq(strings.TrimPrefix(r, "#/"), "/") {
			cur = cur.(map[string]any)[part]
		}
		v = cur.(map[string]any)
	}
}

// schema resolves s, a schema of the document, with the component schemas
// as its $defs.
func (c *contract) schema(s map[string]any) (*jsonschema.Resolved, error) {
	raw, _ := json.Marshal(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if rs := c.schemas[string(raw)]; rs != nil {
		return rs, nil
	}
	defs, _ := json.Marshal(c.doc["components"].(map[string]any)["schemas"])
	root := fmt.Sprintf(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":%s,"allOf":[%s]}`, defs, raw)
	root = strings.ReplaceAll(root, `"#/components/schemas/`, `"#/$defs/`)
	var js jsonschema.Schema
	if err := json.Unmarshal([]byte(root), &js); err != nil {
		return nil, err
	}
	rs, err := js.Resolve(nil)
	if err != nil {
		return nil, err
	}
	c.schemas[string(raw)] = rs
	return rs, nil
}

// check returns what in the answer w to method and pattern (a route's
// path pattern) the document does not allow.
func (c *contract) check(pattern, method string, status int, header http.Header, body []byte) error {
	item, ok := c.doc["paths"].(map[string]any)[pattern].(map[string]any)
	if !ok {
		return fmt.Errorf("no path %s in the document", pattern)
	}
	op, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		return fmt.Errorf("no operation %s %s in the document", method, pattern)
	}
	resp, ok := op["responses"].(map[string]any)[strconv.Itoa(status)].(map[string]any)
	if !ok {
		return fmt.Errorf("status %d is not documented (body %.300s)", status, body)
	}
	resp = c.ref(resp)
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("status %d has no body in the document, and the answer has %.200q", status, body)
		}
		return nil
	}
	ct, _, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("status %d: content type %q: %v", status, header.Get("Content-Type"), err)
	}
	media, ok := content[ct].(map[string]any)
	if !ok {
		return fmt.Errorf("status %d: content type %s is not documented (body %.200s)", status, ct, body)
	}
	if ct != "application/json" {
		return nil
	}
	s, _ := media["schema"].(map[string]any)
	rs, err := c.schema(s)
	if err != nil {
		return fmt.Errorf("status %d: the document's schema: %v", status, err)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("status %d: the body is not JSON: %v: %.200s", status, err, body)
	}
	if err := rs.Validate(v); err != nil {
		return fmt.Errorf("status %d: the body does not match the document: %v: %.300s", status, err, body)
	}
	if errBody, ok := v.(map[string]any)["error"].(map[string]any); ok && status >= 400 {
		// An error's code is told by its response's description, which
		// names the codes of its status.
		code, _ := errBody["code"].(string)
		if desc, _ := resp["description"].(string); !strings.Contains(desc, code) {
			return fmt.Errorf("status %d: code %s is not in the response's description %q", status, code, desc)
		}
	}
	return nil
}

// TestAnswersMatchTheDocument sends every route answers of each kind it
// gives — success and its error paths: bad query, bad body, unknown ids,
// conflicts, preconditions, a body too large, no key, a refused origin,
// busy and unsupported — and checks each answer against openapi.json.
func TestAnswersMatchTheDocument(t *testing.T) {
	c := newContract(t)
	db := thread.New(thread.NewMemoryStore(), nil)
	release, started := make(chan struct{}), make(chan struct{}, 1)
	client := scripted.New(scripted.Step{Func: func(ctx context.Context, r scripted.Request) (*agent.ChatResponse, error) {
		if strings.Contains(r.Messages[len(r.Messages)-1].Text(), "slow") {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &agent.ChatResponse{Messages: []message.Message{message.Assistant("ok")}, FinishReason: agent.FinishStop}, nil
	}})
	client.Repeat = true
	full := newServer(t, Options{DB: db, Keys: twoTenants(t), Agent: agent.New(client, nil), Chat: client,
		Worklog: worklog.NewLogs(db, nil), MaxBodyBytes: 1 << 16})
	bare := newServer(t, Options{Keys: twoTenants(t)}) // no agent, no work log: 501s
	srv := httptest.NewServer(full)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	var seen []string // "pattern status" of each answer
	checkOne := func(t *testing.T, h http.Handler, pattern string, rq req) *httptest.ResponseRecorder {
		t.Helper()
		if rq.key == "" && !strings.HasPrefix(pattern, "GET /healthz") && !strings.HasPrefix(pattern, "GET /metrics") {
			rq.key = keyA
		}
		if rq.key == "-" {
			rq.key = ""
		}
		w := do(t, h, rq)
		method, path, _ := strings.Cut(pattern, " ")
		if err := c.check(path, method, w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Errorf("%s %s → %v", rq.method, rq.path, err)
		}
		seen = append(seen, fmt.Sprintf("%s %d", pattern, w.Code))
		return w
	}

	// The contract refuses what the document does not allow.
	for _, bad := range []struct {
		status int
		body   string
	}{
		{http.StatusBadRequest, `{"error":{"code":"no_such_code","message":"x"}}`},
		{http.StatusBadRequest, `{"error":{"code":"invalid"}}`},
		{http.StatusTeapot, `{"error":{"code":"invalid","message":"x"}}`},
		{http.StatusNotFound, `{"error":{"code":"invalid","message":"x"}}`},
	} {
		h := http.Header{"Content-Type": {"application/json"}}
		if err := c.check("/v1/threads", "POST", bad.status, h, []byte(bad.body)); err == nil {
			t.Errorf("the contract takes %d %s", bad.status, bad.body)
		}
	}

	// Fixtures: a thread with a checkpoint, a thread for a run that
	// others find busy, and a body over the server's limit.
	createThread(t, full, keyA, "t1", "hi", "hello")
	must(t, full, req{method: "POST", path: "/v1/threads/t1/checkpoints", key: keyA, body: `{"name":"c1"}`}, http.StatusCreated, nil)
	createThread(t, full, keyA, "busy", "hi")
	big := `{"messages":[{"role":"user","contents":[{"type":"text","text":"` + strings.Repeat("x", 1<<16) + `"}]}]}`

	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		at := strings.NewReplacer("{id}", "t1", "{name}", "c1", "{thread_id}", "t1").Replace(path)
		missing := strings.NewReplacer("{id}", "nope", "{name}", "nope", "{thread_id}", "nope").Replace(path)
		t.Run(rt.pattern, func(t *testing.T) {
			// Every route: an unknown query parameter, no key, a
			// refused origin, an unknown id.
			checkOne(t, full, rt.pattern, req{method: method, path: at + "?colour=blue"})
			checkOne(t, full, rt.pattern, req{method: method, path: at, key: "-"})
			checkOne(t, full, rt.pattern, req{method: method, path: at, header: map[string]string{"Origin": "https://evil.example"}})
			if strings.HasSuffix(path, "/events") {
				// A feed that opens streams until the client goes
				// away: its success is checked below.
				if strings.Contains(path, "{id}") {
					checkOne(t, full, rt.pattern, req{method: method, path: missing})
				}
				return
			}
			checkOne(t, full, rt.pattern, req{method: method, path: missing, body: `{}`})
			checkOne(t, bare, rt.pattern, req{method: method, path: at, body: `{}`})
			if method == "POST" || method == "PATCH" {
				checkOne(t, full, rt.pattern, req{method: method, path: at, body: `[`})
				checkOne(t, full, rt.pattern, req{method: method, path: at, body: `{"unknown":1}`})
				checkOne(t, full, rt.pattern, req{method: method, path: at, body: "{\"title\":\"\xff\"}"})
				checkOne(t, full, rt.pattern, req{method: method, path: at, body: big})
			}
		})
	}
	// Success and the routes' own error paths.
	for _, tc := range []struct {
		pattern string
		rq      req
	}{
		{"GET /v1/threads", req{method: "GET", path: "/v1/threads?limit=1&label=a:b&order=newest"}},
		{"GET /v1/threads", req{method: "GET", path: "/v1/threads?cursor=!"}},
		{"POST /v1/threads", req{method: "POST", path: "/v1/threads", body: `{"id":"t2","messages":[{"role":"user","contents":[]}]}`}},
		{"POST /v1/threads", req{method: "POST", path: "/v1/threads", body: `{"id":"t1"}`}},
		{"POST /v1/threads", req{method: "POST", path: "/v1/threads", body: `{"messages":[{"role":"user","content":"hi"}]}`}},
		{"GET /v1/threads/{id}", req{method: "GET", path: "/v1/threads/t1"}},
		{"GET /v1/threads/{id}", req{method: "GET", path: "/v1/threads/t1", header: map[string]string{"If-None-Match": "*"}}},
		{"GET /v1/threads/{id}", req{method: "GET", path: "/v1/threads/..bad"}},
		{"PATCH /v1/threads/{id}", req{method: "PATCH", path: "/v1/threads/t1", body: `{"title":"x"}`}},
		{"PATCH /v1/threads/{id}", req{method: "PATCH", path: "/v1/threads/t1", body: `{"title":"y"}`, header: map[string]string{"If-Match": `"1"`}}},
		{"PATCH /v1/threads/{id}", req{method: "PATCH", path: "/v1/threads/t1", body: `{"title":"y"}`, header: map[string]string{"If-Match": `nonsense`}}},
		{"GET /v1/threads/{id}/messages", req{method: "GET", path: "/v1/threads/t1/messages?limit=1&version=1"}},
		{"GET /v1/threads/{id}/messages", req{method: "GET", path: "/v1/threads/t1/messages?version=99"}},
		{"POST /v1/threads/{id}/messages", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":"user","contents":[{"type":"text","text":"x"}]}]}`}},
		{"POST /v1/threads/{id}/messages", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":"user","contents":[]}]}`, header: map[string]string{"If-Match": `"1"`}}},
		{"POST /v1/threads/{id}/messages", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[]}`}},
		{"POST /v1/threads/{id}/view", req{method: "POST", path: "/v1/threads/t1/view", body: `{"budget":100,"strategies":[{"type":"drop_oldest"}]}`}},
		{"POST /v1/threads/{id}/view", req{method: "POST", path: "/v1/threads/t1/view", body: `{"strategies":[{"type":"nope"}]}`}},
		{"POST /v1/threads/{id}/fork", req{method: "POST", path: "/v1/threads/t1/fork", body: `{"id":"f1"}`}},
		{"POST /v1/threads/{id}/fork", req{method: "POST", path: "/v1/threads/t1/fork", body: `{"id":"f1"}`}},
		{"POST /v1/threads/{id}/copy", req{method: "POST", path: "/v1/threads/t1/copy", body: `{"id":"k1"}`}},
		{"GET /v1/threads/{id}/history", req{method: "GET", path: "/v1/threads/t1/history?limit=1"}},
		{"GET /v1/threads/{id}/family", req{method: "GET", path: "/v1/threads/t1/family"}},
		{"GET /v1/search", req{method: "GET", path: "/v1/search?q=hi"}},
		{"GET /v1/search", req{method: "GET", path: "/v1/search"}},
		{"GET /v1/threads/{id}/checkpoints", req{method: "GET", path: "/v1/threads/t1/checkpoints"}},
		{"POST /v1/threads/{id}/checkpoints", req{method: "POST", path: "/v1/threads/t1/checkpoints", body: `{"name":"c2"}`}},
		{"POST /v1/threads/{id}/checkpoints", req{method: "POST", path: "/v1/threads/t1/checkpoints", body: `{"name":""}`}},
		{"POST /v1/threads/{id}/rollback", req{method: "POST", path: "/v1/threads/t1/rollback", body: `{"checkpoint":"c1"}`}},
		{"POST /v1/threads/{id}/rollback", req{method: "POST", path: "/v1/threads/t1/rollback", body: `{"checkpoint":"nope"}`}},
		{"POST /v1/threads/{id}/rollback", req{method: "POST", path: "/v1/threads/t1/rollback", body: `{"version":1}`, header: map[string]string{"If-Match": `"1"`}}},
		{"GET /v1/threads/{id}/export", req{method: "GET", path: "/v1/threads/t1/export?history=true"}},
		{"GET /v1/threads/{id}/export", req{method: "GET", path: "/v1/threads/t1/export?history=maybe"}},
		{"POST /v1/threads/import", req{method: "POST", path: "/v1/threads/import", body: `{"nope":1}`}},
		{"POST /v1/threads/{id}/runs", req{method: "POST", path: "/v1/threads/t1/runs", body: `{"input":"hi"}`}},
		{"POST /v1/threads/{id}/runs", req{method: "POST", path: "/v1/threads/t1/runs", body: `{"input":"hi","on_busy":"sometimes"}`}},
		{"POST /v1/threads/{id}/runs", req{method: "POST", path: "/v1/threads/t1/runs", body: `{"input":"hi","stream":true}`}},
		{"POST /v1/threads/{id}/runs", req{method: "POST", path: "/v1/threads/t1/runs", body: `{"approvals":[{"call_id":"x","approved":true}]}`}},
		{"POST /v1/threads/{id}/reset", req{method: "POST", path: "/v1/threads/f1/reset"}},
		{"DELETE /v1/threads/{id}/checkpoints/{name}", req{method: "DELETE", path: "/v1/threads/t1/checkpoints/c2"}},
		{"DELETE /v1/threads/{id}", req{method: "DELETE", path: "/v1/threads/k1", header: map[string]string{"If-Match": `"9"`}}},
		{"DELETE /v1/threads/{id}", req{method: "DELETE", path: "/v1/threads/k1"}},
		{"POST /v1/conversations", req{method: "POST", path: "/v1/conversations", body: `{"id":"cv1"}`}},
		{"GET /v1/conversations", req{method: "GET", path: "/v1/conversations?limit=5"}},
		{"GET /v1/conversations", req{method: "GET", path: "/v1/conversations?cursor=!"}},
		{"GET /v1/conversations/{id}", req{method: "GET", path: "/v1/conversations/cv1"}},
		{"POST /v1/conversations/{id}/commands", req{method: "POST", path: "/v1/conversations/cv1/commands", body: `{"command":"nope"}`}},
		{"GET /v1/workflows", req{method: "GET", path: "/v1/workflows"}},
		{"POST /v1/items", req{method: "POST", path: "/v1/items", body: `{"text":"fix the roof"}`}},
		{"POST /v1/items", req{method: "POST", path: "/v1/items", body: `{"text":""}`}},
		{"GET /v1/items", req{method: "GET", path: "/v1/items?status=open"}},
		{"GET /v1/items", req{method: "GET", path: "/v1/items?include_resolved=maybe"}},
		{"POST /v1/items/resolve", req{method: "POST", path: "/v1/items/resolve", body: `{"text_match":"roof"}`}},
		{"POST /v1/items/resolve", req{method: "POST", path: "/v1/items/resolve", body: `{"text_match":"nothing like it"}`}},
		{"POST /v1/sessions", req{method: "POST", path: "/v1/sessions", body: `{}`}},
		{"GET /v1/sessions", req{method: "GET", path: "/v1/sessions"}},
		{"GET /v1/openapi.json", req{method: "GET", path: "/v1/openapi.json"}},
		{"GET /v1/server", req{method: "GET", path: "/v1/server"}},
		{"GET /healthz", req{method: "GET", path: "/healthz"}},
		{"GET /metrics", req{method: "GET", path: "/metrics"}},
	} {
		checkOne(t, full, tc.pattern, tc.rq)
	}

	// The feeds: their headers, then the client goes away.
	for _, f := range []struct{ pattern, path string }{
		{"GET /v1/events", "/v1/events"},
		{"GET /v1/threads/{id}/events", "/v1/threads/t1/events"},
		{"GET /v1/conversations/{id}/events", "/v1/conversations/cv1/events"},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		r, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+f.path, nil)
		r.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, path, _ := strings.Cut(f.pattern, " ")
		if err := c.check(path, "GET", resp.StatusCode, resp.Header, nil); err != nil && !strings.Contains(err.Error(), "event-stream") {
			t.Errorf("%s: %v", f.path, err)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
			t.Errorf("%s: %d %s", f.path, resp.StatusCode, ct)
		}
		cancel()
		resp.Body.Close()
	}

	// A run on a busy thread: 409 busy; interrupted: 409 interrupted.
	slow := make(chan *http.Response, 1)
	go func() {
		r, _ := http.NewRequest("POST", srv.URL+"/v1/threads/busy/runs", strings.NewReader(`{"input":"slow"}`))
		r.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Error(err)
		}
		slow <- resp
	}()
	<-started
	checkOne(t, full, "POST /v1/threads/{id}/runs", req{method: "POST", path: "/v1/threads/busy/runs", body: `{"input":"again"}`})
	checkOne(t, full, "POST /v1/threads/{id}/runs", req{method: "POST", path: "/v1/threads/busy/runs", body: `{"input":"now","on_busy":"interrupt"}`})
	if resp := <-slow; resp != nil {
		body := new(bytes.Buffer)
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if err := c.check("/v1/threads/{id}/runs", "POST", resp.StatusCode, resp.Header, body.Bytes()); err != nil {
			t.Errorf("interrupted run: %v", err)
		}
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body.String(), `"interrupted"`) {
			t.Errorf("interrupted run: %d %s", resp.StatusCode, body)
		}
	}
	// Each status the walk met, for the log.
	slices.Sort(seen)
	t.Logf("%d answers checked: %v", len(seen), slices.Compact(seen))
}

// TestErrorCodesDocumented checks that each code the error table and this
// package's own errors give is in ErrorDetail.code's enum.
func TestErrorCodesDocumented(t *testing.T) {
	c := newContract(t)
	enum := c.doc["components"].(map[string]any)["schemas"].(map[string]any)["ErrorDetail"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	documented := map[string]bool{}
	for _, e := range enum {
		documented[e.(string)] = true
	}
	codes := map[string]bool{}
	for _, err := range []error{
		agent.ErrBusy, agent.ErrInterrupted, agent.ErrMaxRounds, agent.ErrNoConversationID, agent.ErrApprovalRequired,
		worklog.ErrAmbiguous, &agent.ProviderError{StatusCode: 429}, &agent.ProviderError{StatusCode: 500},
		thread.ErrNotFound, thread.ErrConflict, thread.ErrInvalid, thread.ErrUnsupported,
		context.DeadlineExceeded, context.Canceled, &http.MaxBytesError{Limit: 1}, errors.New("internal"),
	} {
		_, code, _ := apierr.Classify(err, false)
		codes[code] = true
		_, code, _ = apierr.Classify(err, true)
		codes[code] = true
	}
	// This package's own errors: errf(status, "code", …).
	own := regexp.MustCompile(`errf\(http\.Status\w+, "(\w+)"`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range own.FindAllSubmatch(src, -1) {
			codes[string(m[1])] = true
		}
	}
	for code := range codes {
		if !documented[code] {
			t.Errorf("code %s is not in ErrorDetail.code", code)
		}
	}
	for _, code := range []string{"canceled", "interrupted", "too_many_feeds", "unavailable", "insufficient_storage"} {
		if !documented[code] {
			t.Errorf("code %s is not in ErrorDetail.code", code)
		}
	}
}
