package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/auth"
)

// TestTenantIsolation checks that tenant B can do nothing to tenant A's
// thread: every route answers 404, as for a thread that does not exist,
// and B's fork, copy, import or new thread of A's id is B's own.
func TestTenantIsolation(t *testing.T) {
	client := scripted.New(scripted.Text("hello"))
	client.Repeat = true
	s := newServer(t, Options{Keys: twoTenants(t), Agent: agent.New(client, nil)})
	a := createThread(t, s, keyA, "secret-plan", "hi", "hello")
	must(t, s, req{method: "POST", path: "/v1/threads/secret-plan/checkpoints", key: keyA, body: map[string]any{"name": "cp"}}, http.StatusCreated, nil)
	createThread(t, s, keyB, "b-own", "mine")

	for _, rq := range []req{
		{method: "GET", path: "/v1/threads/secret-plan"},
		{method: "PATCH", path: "/v1/threads/secret-plan", body: map[string]any{"title": "pwned"}},
		{method: "GET", path: "/v1/threads/secret-plan/messages"},
		{method: "POST", path: "/v1/threads/secret-plan/messages", body: map[string]any{"messages": []any{textMsg("user", "x")}}},
		{method: "POST", path: "/v1/threads/secret-plan/view", body: map[string]any{}},
		{method: "POST", path: "/v1/threads/secret-plan/fork", body: map[string]any{}},
		{method: "POST", path: "/v1/threads/secret-plan/copy", body: map[string]any{}},
		{method: "GET", path: "/v1/threads/secret-plan/history"},
		{method: "GET", path: "/v1/threads/secret-plan/checkpoints"},
		{method: "POST", path: "/v1/threads/secret-plan/checkpoints", body: map[string]any{"name": "b"}},
		{method: "DELETE", path: "/v1/threads/secret-plan/checkpoints/cp"},
		{method: "POST", path: "/v1/threads/secret-plan/rollback", body: map[string]any{"checkpoint": "cp"}},
		{method: "POST", path: "/v1/threads/secret-plan/rollback", body: map[string]any{"version": 1}},
		{method: "POST", path: "/v1/threads/secret-plan/reset"},
		{method: "GET", path: "/v1/threads/secret-plan/export"},
		{method: "POST", path: "/v1/threads/secret-plan/runs", body: map[string]any{"input": "hi"}},
		{method: "DELETE", path: "/v1/threads/secret-plan"},
	} {
		rq.key = keyB
		w := wantError(t, s, rq, http.StatusNotFound, "not_found")
		if strings.Contains(w.Body.String(), "hello") {
			t.Errorf("%s %s leaked content: %s", rq.method, rq.path, w.Body.String())
		}
	}
	// B's listing holds only B's thread.
	var list listResponse
	must(t, s, req{method: "GET", path: "/v1/threads", key: keyB}, http.StatusOK, &list)
	if len(list.Threads) != 1 || list.Threads[0].ID != "b-own" {
		t.Errorf("B lists %+v", list.Threads)
	}
	// B uses A's id in its own namespace, as any fresh id: nothing tells
	// B that A has it, and A keeps it (TestTenantAttack tries every route).
	for _, rq := range []req{
		{method: "POST", path: "/v1/threads/b-own/fork", body: map[string]any{"id": "secret-plan"}},
		{method: "POST", path: "/v1/threads/b-own/copy", body: map[string]any{"id": "secret-plan-copy"}},
		{method: "POST", path: "/v1/threads", body: map[string]any{"id": "secret-plan-new"}},
	} {
		rq.key = keyB
		must(t, s, rq, http.StatusCreated, nil)
	}
	doc := must(t, s, req{method: "GET", path: "/v1/threads/b-own/export", key: keyB}, http.StatusOK, nil).Body.Bytes()
	wantError(t, s, req{method: "POST", path: "/v1/threads/import?id=secret-plan", key: keyB, body: doc}, http.StatusConflict, "conflict")
	// An import lands in the importer's tenant.
	must(t, s, req{method: "POST", path: "/v1/threads/import?id=b-imported", key: keyB, body: doc}, http.StatusCreated, nil)
	wantError(t, s, req{method: "GET", path: "/v1/threads/b-imported", key: keyA}, http.StatusNotFound, "not_found")

	// A's thread is untouched.
	var got threadJSON
	must(t, s, req{method: "GET", path: "/v1/threads/secret-plan", key: keyA}, http.StatusOK, &got)
	if got.Version != a.Version || got.Title != a.Title {
		t.Errorf("A's thread changed: %+v", got)
	}
	var cks checkpointsResponse
	must(t, s, req{method: "GET", path: "/v1/threads/secret-plan/checkpoints", key: keyA}, http.StatusOK, &cks)
	if len(cks.Checkpoints) != 1 {
		t.Errorf("A's checkpoints: %+v", cks)
	}
}

// TestUnauthenticated checks that a server with keys refuses requests
// without a valid key (401), except /healthz and /metrics.
func TestUnauthenticated(t *testing.T) {
	s := newServer(t, Options{Keys: twoTenants(t)})
	wantError(t, s, req{method: "GET", path: "/v1/threads"}, http.StatusUnauthorized, "unauthorized")
	wantError(t, s, req{method: "GET", path: "/v1/threads", key: "not-a-key-at-all-0123456789"}, http.StatusUnauthorized, "unauthorized")
	wantError(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{}}, http.StatusUnauthorized, "unauthorized")
	wantError(t, s, req{method: "GET", path: "/v1/openapi.json"}, http.StatusUnauthorized, "unauthorized")
	must(t, s, req{method: "GET", path: "/v1/threads", header: map[string]string{"X-API-Key": keyA}}, http.StatusOK, nil)
	must(t, s, req{method: "GET", path: "/healthz"}, http.StatusOK, nil)
	must(t, s, req{method: "GET", path: "/metrics"}, http.StatusOK, nil)
	// Protect applies the same check, and tells the handler the tenant.
	h := s.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := auth.Tenant(r.Context())
		fmt.Fprint(w, "tenant=", t)
	}))
	wantError(t, h, req{method: "POST", path: "/mcp"}, http.StatusUnauthorized, "unauthorized")
	if w := must(t, h, req{method: "POST", path: "/mcp", key: keyB}, http.StatusOK, nil); w.Body.String() != "tenant=b" {
		t.Errorf("protected handler saw %q", w.Body.String())
	}
	// Mounted as the command mounts them, the route of a protected handler
	// is its pattern in the outer mux, and the server's are its own.
	mux := http.NewServeMux()
	mux.Handle("/", s)
	mux.Handle("/mcp", h)
	must(t, mux, req{method: "POST", path: "/mcp", key: keyA}, http.StatusOK, nil)
	must(t, mux, req{method: "GET", path: "/v1/threads", key: keyA}, http.StatusOK, nil)
	wantError(t, mux, req{method: "GET", path: "/v2/nothing", key: keyA}, http.StatusNotFound, "not_found")
	var metrics strings.Builder
	s.Metrics().WriteTo(&metrics)
	for _, want := range []string{
		`loom_http_requests_total{code="200",method="POST",route="/mcp"} 1`,
		`loom_http_requests_total{code="200",method="GET",route="GET /v1/threads"} 2`,
		`loom_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`loom_http_requests_total{code="401",method="GET",route="GET /v1/threads"} 2`,
	} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics.String())
		}
	}
}

// TestBodyLimit checks that a body over MaxBodyBytes is a 413 that changes
// nothing, whether its length is announced or not.
func TestBodyLimit(t *testing.T) {
	s := newServer(t, Options{MaxBodyBytes: 1024})
	createThread(t, s, "", "th", "one")
	big := fmt.Sprintf(`{"messages":[{"role":"user","contents":[{"type":"text","text":%q}]}]}`, strings.Repeat("x", 2000))
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/messages", body: big}, http.StatusRequestEntityTooLarge, "too_large")
	// Without Content-Length, the limit is met while reading.
	r := httptest.NewRequest("POST", "/v1/threads/th/messages", struct{ *strings.Reader }{strings.NewReader(big)})
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("streamed body: %d %s", w.Code, w.Body.String())
	}
	wantError(t, s, req{method: "POST", path: "/v1/threads/import", body: strings.Repeat(" ", 2000)}, http.StatusRequestEntityTooLarge, "too_large")
	wantError(t, s, req{method: "POST", path: "/v1/threads", body: big}, http.StatusRequestEntityTooLarge, "too_large")
	var th threadJSON
	must(t, s, req{method: "GET", path: "/v1/threads/th"}, http.StatusOK, &th)
	var list listResponse
	must(t, s, req{method: "GET", path: "/v1/threads"}, http.StatusOK, &list)
	if th.Version != 1 || len(list.Threads) != 1 {
		t.Errorf("a refused body changed something: %+v, %d threads", th, len(list.Threads))
	}
}

// TestCORS checks that cross-origin requests from origins not allowed are
// refused, that allowed ones get CORS headers and preflights, and that the
// server's own origin passes.
func TestCORS(t *testing.T) {
	s := newServer(t, Options{AllowOrigins: []string{"https://app.example"}})
	wantError(t, s, req{method: "GET", path: "/v1/threads", header: map[string]string{"Origin": "https://evil.example"}}, http.StatusForbidden, "forbidden")
	wantError(t, s, req{method: "POST", path: "/v1/threads", body: "{}", header: map[string]string{"Origin": "null"}}, http.StatusForbidden, "forbidden")
	wantError(t, s, req{method: "OPTIONS", path: "/v1/threads", header: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}}, http.StatusForbidden, "forbidden")

	w := must(t, s, req{method: "GET", path: "/v1/threads", header: map[string]string{"Origin": "https://app.example"}}, http.StatusOK, nil)
	if w.Header().Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "ETag") {
		t.Errorf("allowed origin's headers: %v", w.Header())
	}
	w = must(t, s, req{method: "OPTIONS", path: "/v1/threads/x/messages", header: map[string]string{
		"Origin": "https://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, if-match"}}, http.StatusNoContent, nil)
	if !strings.Contains(w.Header().Get("Access-Control-Allow-Methods"), "POST") || !strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "If-Match") {
		t.Errorf("preflight headers: %v", w.Header())
	}
	// A page the server itself served (the web UI) is not cross-origin.
	w = must(t, s, req{method: "POST", path: "/v1/threads", body: "{}", header: map[string]string{"Origin": "http://example.com"}}, http.StatusCreated, nil)
	if w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS headers on a same-origin request")
	}

	// Without AllowOrigins every cross-origin request is refused, with no
	// CORS headers.
	closed := newServer(t, Options{})
	w = wantError(t, closed, req{method: "GET", path: "/v1/threads", header: map[string]string{"Origin": "https://app.example"}}, http.StatusForbidden, "forbidden")
	if w.Header().Get("Access-Control-Allow-Origin") != "" || w.Header().Get("Vary") != "" {
		t.Errorf("CORS headers without AllowOrigins: %v", w.Header())
	}
	must(t, closed, req{method: "GET", path: "/v1/threads"}, http.StatusOK, nil)
}

// TestRequestID checks that every response has an X-Request-Id: the
// request's own when it is a sane token, a new one otherwise, and that the
// access log carries it.
func TestRequestID(t *testing.T) {
	var logs bytes.Buffer
	s := newServer(t, Options{Keys: twoTenants(t), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	w := do(t, s, req{method: "GET", path: "/v1/threads", key: keyA, header: map[string]string{"X-Request-Id": "client-trace.7"}})
	if got := w.Header().Get("X-Request-Id"); got != "client-trace.7" {
		t.Errorf("echoed %q", got)
	}
	line := logs.String()
	for _, want := range []string{`"request_id":"client-trace.7"`, `"route":"GET /v1/threads"`, `"tenant":"a"`, `"status":200`, `"method":"GET"`, `"duration"`} {
		if !strings.Contains(line, want) {
			t.Errorf("access log lacks %s: %s", want, line)
		}
	}
	for _, hostile := range []string{"", "a b", "x\x00y", strings.Repeat("r", 500), "<script>"} {
		w := do(t, s, req{method: "GET", path: "/v1/threads", header: map[string]string{"X-Request-Id": hostile}})
		got := w.Header().Get("X-Request-Id")
		if got == "" || got == hostile || !strings.HasPrefix(got, "req_") {
			t.Errorf("request id for %q: %q", hostile, got)
		}
	}
	// Errors and unmatched routes have one too.
	if w := do(t, s, req{method: "GET", path: "/nowhere"}); w.Header().Get("X-Request-Id") == "" {
		t.Error("no request id on a 404")
	}
}

// TestMetricsText checks the Prometheus text after some requests.
func TestMetricsText(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "one")
	appendV1 := req{method: "POST", path: "/v1/threads/th/messages", header: map[string]string{"If-Match": `"1"`}, body: map[string]any{"messages": []any{textMsg("user", "x")}}}
	must(t, s, appendV1, http.StatusCreated, nil)
	wantError(t, s, appendV1, http.StatusPreconditionFailed, "precondition_failed")
	wantError(t, s, req{method: "GET", path: "/v1/threads/none"}, http.StatusNotFound, "not_found")
	do(t, s, req{method: "GET", path: "/elsewhere"})
	w := must(t, s, req{method: "GET", path: "/metrics"}, http.StatusOK, nil)
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	text := w.Body.String()
	for _, want := range []string{
		`# TYPE loom_http_requests_total counter`,
		`loom_http_requests_total{code="201",method="POST",route="POST /v1/threads"} 1`,
		`loom_http_requests_total{code="201",method="POST",route="POST /v1/threads/{id}/messages"} 1`,
		`loom_http_requests_total{code="412",method="POST",route="POST /v1/threads/{id}/messages"} 1`,
		`loom_http_requests_total{code="404",method="GET",route="GET /v1/threads/{id}"} 1`,
		`loom_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`# TYPE loom_http_request_duration_seconds histogram`,
		`loom_http_request_duration_seconds_bucket{route="POST /v1/threads/{id}/messages",le="+Inf"} 2`,
		`loom_http_request_duration_seconds_count{route="POST /v1/threads/{id}/messages"} 2`,
		`loom_http_request_duration_seconds_sum{route="POST /v1/threads/{id}/messages"} `,
		`loom_store_operations_total{op="append"} 2`,
		`loom_store_operations_total{op="create"} 1`,
		`loom_store_operations_total{op="get"} 3`,
		`loom_conflicts_total 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s\n%s", want, text)
		}
	}
	// Every line is a comment or "name{labels} value".
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "# ") && !strings.HasPrefix(line, "loom_") && !strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") {
			t.Errorf("bad line %q", line)
		}
	}
}
