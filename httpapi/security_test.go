package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/langgraph"
	"github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
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
	// B that A has it, and A keeps it (TestTenantCannotReachAnotherTenantsIDs
	// tries every route).
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

// The tenants of the attack: the victim (tenant "a", keyA) and the
// attacker (tenant "b", keyB).
const victimProject = "victim"

// victimWorld is what the victim can see of its own data, as bytes: every
// thread's export with history, its listing, its items and the sessions a
// new session would carry forward. The attack must leave it as it was.
func victimWorld(tb testing.TB, h http.Handler) string {
	tb.Helper()
	var b strings.Builder
	var list listResponse
	must(tb, h, req{method: "GET", path: "/v1/threads?internal=include", key: keyA}, http.StatusOK, &list)
	for _, th := range list.Threads {
		// The work log's own threads change only when the victim writes.
		fmt.Fprintf(&b, "thread %s v%d %q\n", th.ID, th.Version, th.Title)
		b.Write(must(tb, h, req{method: "GET", path: "/v1/threads/" + th.ID + "/export?history=true", key: keyA}, http.StatusOK, nil).Body.Bytes())
		b.Write(must(tb, h, req{method: "GET", path: "/v1/threads/" + th.ID + "/checkpoints", key: keyA}, http.StatusOK, nil).Body.Bytes())
		b.Write(must(tb, h, req{method: "GET", path: "/v1/threads/" + th.ID + "/history", key: keyA}, http.StatusOK, nil).Body.Bytes())
	}
	// Its LangGraph checkpoints, with their values and writes.
	b.Write(must(tb, h, req{method: "POST", path: "/v1/langgraph/checkpoints/search", key: keyA, body: map[string]any{}}, http.StatusOK, nil).Body.Bytes())
	for _, it := range allItems(tb, h, keyA, victimProject) {
		fmt.Fprintf(&b, "item %s %s %q\n", it.ID, it.Status, it.Text)
	}
	return b.String()
}

// TestTenantCannotReachAnotherTenantsIDs has tenant b try every route on
// tenant a's ids — the threads a has, a's work log's thread id, a's item
// and session ids — and checks that nothing of a's is read, changed,
// blocked or revealed: b's answers for an id a has are the answers for an
// id nobody has, b can use every one of those ids in its own namespace, and
// a's world reads back byte for byte. It runs on the memory store and on
// SQLite.
func TestTenantCannotReachAnotherTenantsIDs(t *testing.T) {
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			var db *thread.DB
			switch backend {
			case "memory":
				db = thread.New(thread.NewMemoryStore(), nil)
			case "sqlite":
				s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				db = thread.New(s, nil)
				t.Cleanup(func() { db.Close() })
			}
			client := scripted.New(scripted.Text("hello"))
			client.Repeat = true
			srv := newServer(t, Options{DB: db, Keys: twoTenants(t), Agent: agent.New(client, nil), Worklog: worklog.NewLogs(db, nil)})
			tryAnotherTenantsIDs(t, srv)
		})
	}
}

// tryAnotherTenantsIDs is TestTenantCannotReachAnotherTenantsIDs on one
// server.
func tryAnotherTenantsIDs(t *testing.T, h http.Handler) {
	// The victim's world: threads, a fork, a checkpoint, work items and a
	// closed session.
	createThread(t, h, keyA, "secret", "the launch date is", "the 9th")
	must(t, h, req{method: "POST", path: "/v1/threads/secret/checkpoints", key: keyA, body: map[string]any{"name": "cp"}}, http.StatusCreated, nil)
	must(t, h, req{method: "POST", path: "/v1/threads/secret/fork", key: keyA, body: map[string]any{"id": "secret-fork"}}, http.StatusCreated, nil)
	q := "?project=" + victimProject
	item := createItem(t, h, keyA, victimProject, "rotate the victim's keys")
	must(t, h, req{method: "POST", path: "/v1/sessions" + q, key: keyA, body: map[string]any{"session_id": "s-victim"}}, http.StatusCreated, nil)
	must(t, h, req{method: "POST", path: "/v1/sessions/s-victim/close" + q, key: keyA, body: map[string]any{"open_threads": []string{"carried by the victim"}}}, http.StatusOK, nil)
	wl := worklog.ThreadID("a", victimProject)
	// A LangGraph thread with a checkpoint, its child and a task's writes.
	lgPut := func(key, thread, parent, id, text string) {
		t.Helper()
		body := lgCheckpoint{thread: thread, parent: parent, id: id, versions: map[string]int{"messages": 1}, moved: map[string]int{"messages": 1},
			values:   map[string]langgraph.Value{"messages": messages(lcMessage("human", id, text))},
			metadata: map[string]any{"run_id": "run-" + thread}}.body()
		must(t, h, req{method: "POST", path: "/v1/langgraph/checkpoints", key: key, body: body}, http.StatusOK, nil)
	}
	lgPut(keyA, "secret-lg", "", "c01", "the launch date is")
	lgPut(keyA, "secret-lg", "c01", "c02", "the 9th")
	must(t, h, req{method: "POST", path: "/v1/langgraph/writes", key: keyA, body: langgraph.WritesRequest{
		Config: langgraph.Config{ThreadID: "secret-lg", CheckpointID: "c02"}, TaskID: "task",
		Writes: []langgraph.Write{{Idx: 0, Channel: "messages", Value: messages(lcMessage("ai", "w1", "the launch date is the 9th"))}},
	}}, http.StatusNoContent, nil)
	before := victimWorld(t, h)
	if !strings.Contains(before, "thread "+wl) {
		t.Fatalf("the victim's work log is not thread %s:\n%s", wl, before)
	}
	secrets := []string{"launch date", "the 9th", "rotate the victim", "carried by the victim"}

	// answer is what b learns from a request: its status and error code,
	// with a's id replaced by a placeholder so that two answers compare.
	answer := func(rq req, id string) string {
		t.Helper()
		rq.key = keyB
		rq.path = strings.ReplaceAll(rq.path, "{id}", id)
		w := do(t, h, rq)
		body := w.Body.String()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s %s revealed %q: %s", rq.method, rq.path, s, body)
			}
		}
		code := ""
		if w.Code >= 400 {
			code = errorCode(t, w)
		}
		return fmt.Sprintf("%d %s", w.Code, code)
	}
	// Every route on a's ids answers as on an id nobody has: 404.
	reads := []req{
		{method: "GET", path: "/v1/threads/{id}"},
		{method: "PATCH", path: "/v1/threads/{id}", body: map[string]any{"title": "pwned"}},
		{method: "GET", path: "/v1/threads/{id}/messages"},
		{method: "GET", path: "/v1/threads/{id}/messages?version=1"},
		{method: "POST", path: "/v1/threads/{id}/messages", body: map[string]any{"messages": []any{textMsg("user", "x")}}},
		{method: "POST", path: "/v1/threads/{id}/messages", header: map[string]string{"If-Match": `"2"`}, body: map[string]any{"messages": []any{textMsg("user", "x")}}},
		{method: "POST", path: "/v1/threads/{id}/view", body: map[string]any{}},
		{method: "POST", path: "/v1/threads/{id}/fork", body: map[string]any{}},
		{method: "POST", path: "/v1/threads/{id}/copy", body: map[string]any{}},
		{method: "GET", path: "/v1/threads/{id}/history"},
		{method: "GET", path: "/v1/threads/{id}/checkpoints"},
		{method: "POST", path: "/v1/threads/{id}/checkpoints", body: map[string]any{"name": "b"}},
		{method: "DELETE", path: "/v1/threads/{id}/checkpoints/cp"},
		{method: "POST", path: "/v1/threads/{id}/rollback", body: map[string]any{"checkpoint": "cp"}},
		{method: "POST", path: "/v1/threads/{id}/rollback", body: map[string]any{"version": 1}},
		{method: "POST", path: "/v1/threads/{id}/reset"},
		{method: "GET", path: "/v1/threads/{id}/export"},
		{method: "GET", path: "/v1/threads/{id}/export?history=true"},
		{method: "POST", path: "/v1/threads/{id}/runs", body: map[string]any{"input": "hi"}},
		{method: "DELETE", path: "/v1/threads/{id}"},
		{method: "DELETE", path: "/v1/threads/{id}", header: map[string]string{"If-Match": `"1"`}},
	}
	for _, id := range []string{"secret", "secret-fork", wl} {
		for _, rq := range reads {
			got, want := answer(rq, id), answer(rq, "nobody-has-this")
			if got != want || !strings.HasPrefix(got, "404") {
				t.Errorf("b: %s %s on a's id %s answers %q, on an unknown id %q", rq.method, rq.path, id, got, want)
			}
		}
	}
	// LangGraph: b's answers for a's LangGraph thread (and a's loom
	// threads' ids) are those for a thread nobody has, and b's writes,
	// deletes and prunes of them change nothing of a's.
	lgReads := func(id string) []req {
		q := url.Values{"thread_id": {id}}.Encode()
		return []req{
			{method: "GET", path: "/v1/langgraph/checkpoint?" + q},
			{method: "GET", path: "/v1/langgraph/checkpoint?" + q + "&checkpoint_id=c01"},
			{method: "POST", path: "/v1/langgraph/checkpoints/search", body: map[string]any{"thread_id": id}},
			{method: "POST", path: "/v1/langgraph/delta-history", body: map[string]any{"config": map[string]any{"thread_id": id, "checkpoint_id": "c02"}, "channels": []string{"messages"}}},
			{method: "POST", path: "/v1/langgraph/threads/" + url.PathEscape(id) + "/copy", body: map[string]any{"target_thread_id": id + "-copy"}},
			{method: "POST", path: "/v1/langgraph/writes", body: map[string]any{"config": map[string]any{"thread_id": id, "checkpoint_id": "c02"}, "task_id": "b-task",
				"writes": []any{map[string]any{"idx": -1, "channel": "__error__", "value": blob("pwned")}}}},
			{method: "POST", path: "/v1/langgraph/prune", body: map[string]any{"thread_ids": []string{id}, "strategy": "delete"}},
			{method: "POST", path: "/v1/langgraph/runs/delete", body: map[string]any{"run_ids": []string{"run-" + id}}},
			{method: "DELETE", path: "/v1/langgraph/threads/" + url.PathEscape(id)},
		}
	}
	for _, id := range []string{"secret-lg", "secret", wl} {
		theirs, nobody := lgReads(id), lgReads("nobody-has-this")
		for i := range theirs {
			if got, want := answer(theirs[i], ""), answer(nobody[i], ""); got != want || strings.HasPrefix(got, "5") {
				t.Errorf("b: %s %s on a's id %s answers %q, on an unknown id %q", theirs[i].method, theirs[i].path, id, got, want)
			}
		}
	}
	var lgList langgraph.ListResponse
	must(t, h, req{method: "POST", path: "/v1/langgraph/checkpoints/search", key: keyB, body: map[string]any{}}, http.StatusOK, &lgList)
	if len(lgList.Checkpoints) != 0 {
		t.Errorf("b lists LangGraph checkpoints: %+v", lgList.Checkpoints)
	}
	// b's LangGraph thread of the same id is b's own.
	lgPut(keyB, "secret-lg", "", "c01", "b's own")
	must(t, h, req{method: "GET", path: "/v1/langgraph/checkpoint?thread_id=secret-lg", key: keyB}, http.StatusOK, nil)

	// Items and sessions: a's item id, text and session are nowhere for b.
	for _, rq := range []req{
		{method: "GET", path: "/v1/items/" + item.ID + q},
		{method: "POST", path: "/v1/items/resolve" + q, body: map[string]any{"thread_id": item.ID}},
		{method: "POST", path: "/v1/items/resolve" + q, body: map[string]any{"text_match": "rotate"}},
		{method: "POST", path: "/v1/items/resolve" + q, body: map[string]any{"thread_id": "#1"}},
	} {
		got := answer(rq, "")
		if !strings.HasPrefix(got, "404") {
			t.Errorf("b: %s %s answers %q, want 404", rq.method, rq.path, got)
		}
	}
	var list struct {
		Threads []struct{ ID, Text string } `json:"threads"`
	}
	must(t, h, req{method: "GET", path: "/v1/items" + q + "&include_resolved=true", key: keyB}, http.StatusOK, &list)
	if len(list.Threads) != 0 {
		t.Errorf("b lists a's items: %+v", list.Threads)
	}
	var start struct {
		Threads []struct{ Text string } `json:"open_threads"`
	}
	must(t, h, req{method: "POST", path: "/v1/sessions" + q, key: keyB, body: map[string]any{"session_id": "s-b"}}, http.StatusCreated, &start)
	if len(start.Threads) != 0 {
		t.Errorf("b's session start carries a's items: %+v", start.Threads)
	}

	// b takes every one of a's ids in its own namespace — as any fresh id —
	// including the id of a's work log (defect 1 of issue 12) and a's
	// session id.
	doc := must(t, h, req{method: "GET", path: "/v1/threads/secret/export", key: keyA}, http.StatusOK, nil).Body.Bytes()
	doc = bytes.ReplaceAll(doc, []byte("the 9th"), []byte("the 1st"))
	doc = bytes.ReplaceAll(doc, []byte("launch date"), []byte("b's own date"))
	createThread(t, h, keyB, "b-own", "mine")
	for _, id := range []string{"secret", "secret-fork", wl, "fresh"} {
		for i, rq := range []req{
			{method: "POST", path: "/v1/threads", body: map[string]any{"id": id}},
			{method: "POST", path: "/v1/threads/b-own/fork", body: map[string]any{"id": id + "-f"}},
			{method: "POST", path: "/v1/threads/b-own/copy", body: map[string]any{"id": id + "-c"}},
			{method: "POST", path: "/v1/threads/import?id=" + id + "-i", body: doc},
		} {
			if got := answer(rq, id); got != "201 " {
				t.Errorf("b: request %d with a's id %s answers %q, want 201", i, id, got)
			}
		}
		// And b's thread of that id is b's: a second create conflicts in b's
		// namespace only.
		if got := answer(req{method: "POST", path: "/v1/threads", body: map[string]any{"id": id}}, id); got != "409 conflict" {
			t.Errorf("b: second create of %s answers %q", id, got)
		}
	}
	// b works its own copies of the ids: checkpoints, rollback, delete.
	must(t, h, req{method: "POST", path: "/v1/threads/secret/messages", key: keyB, body: map[string]any{"messages": []any{textMsg("user", "b's")}}}, http.StatusCreated, nil)
	must(t, h, req{method: "POST", path: "/v1/threads/secret/checkpoints", key: keyB, body: map[string]any{"name": "cp"}}, http.StatusCreated, nil)
	must(t, h, req{method: "POST", path: "/v1/threads/secret/rollback", key: keyB, body: map[string]any{"version": 1}}, http.StatusOK, nil)
	must(t, h, req{method: "DELETE", path: "/v1/threads/secret/checkpoints/cp", key: keyB}, http.StatusNoContent, nil)
	must(t, h, req{method: "DELETE", path: "/v1/threads/secret-fork", key: keyB}, http.StatusNoContent, nil)
	must(t, h, req{method: "POST", path: "/v1/threads/secret/runs", key: keyB, body: map[string]any{"input": "hi"}}, http.StatusOK, nil)
	// b's items and sessions in the project of the same name.
	createItem(t, h, keyB, victimProject, "b's item")
	must(t, h, req{method: "POST", path: "/v1/sessions" + q, key: keyB, body: map[string]any{"session_id": "s-victim"}}, http.StatusCreated, nil)
	must(t, h, req{method: "POST", path: "/v1/sessions/s-victim/close" + q, key: keyB, body: map[string]any{"open_threads": []string{"b's carried item"}}}, http.StatusOK, nil)

	// a's world is as it was, byte for byte.
	if after := victimWorld(t, h); after != before {
		t.Fatalf("the attack changed a's world:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// And a is blocked from nothing: its work log takes items, its session
	// start carries only its own, its ids still work.
	createItem(t, h, keyA, victimProject, "after the attack")
	must(t, h, req{method: "POST", path: "/v1/sessions" + q, key: keyA, body: map[string]any{"session_id": "s-victim-2"}}, http.StatusCreated, &start)
	var texts []string
	for _, it := range start.Threads {
		texts = append(texts, it.Text)
	}
	if got := strings.Join(texts, "|"); strings.Contains(got, "b's") || !strings.Contains(got, "carried by the victim") {
		t.Errorf("a's session start carries %q", got)
	}
	must(t, h, req{method: "POST", path: "/v1/threads/secret/fork", key: keyA, body: map[string]any{"id": "fresh"}}, http.StatusCreated, nil)
	must(t, h, req{method: "POST", path: "/v1/threads", key: keyA, body: map[string]any{"id": "secret-f"}}, http.StatusCreated, nil)
}
