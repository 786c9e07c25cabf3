package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// logLines is a JSON slog handler's output, one map per line.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// requests returns the "http request" lines of route, and resets.
func (l *logLines) requests(tb testing.TB, route string) []map[string]any {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			tb.Fatalf("not a JSON line: %q", line)
		}
		if m["msg"] == "http request" && m["route"] == route {
			out = append(out, m)
		}
	}
	l.buf.Reset()
	return out
}

// loggedServer returns a server logging JSON at level into the result.
func loggedServer(tb testing.TB, level slog.Level, opts Options) (*Server, *logLines) {
	tb.Helper()
	lines := new(logLines)
	opts.Logger = slog.New(slog.NewJSONHandler(lines, &slog.HandlerOptions{Level: level}))
	return newServer(tb, opts), lines
}

// TestProbesLoggedAtDebug: a health check or a metrics scrape is a DEBUG
// line, which the default level (INFO) leaves out; other requests are INFO;
// a failing health check is a WARN.
func TestProbesLoggedAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		s, lines := loggedServer(t, level, Options{})
		for _, route := range []string{"/healthz", "/metrics"} {
			must(t, s, req{method: "GET", path: route}, http.StatusOK, nil)
			got := lines.requests(t, "GET "+route)
			switch {
			case level == slog.LevelInfo && len(got) != 0:
				t.Errorf("at INFO, %s was logged: %v", route, got)
			case level == slog.LevelDebug && (len(got) != 1 || got[0]["level"] != "DEBUG"):
				t.Errorf("at DEBUG, %s logged %v, want one DEBUG line", route, got)
			}
		}
		must(t, s, req{method: "GET", path: "/v1/threads"}, http.StatusOK, nil)
		if got := lines.requests(t, "GET /v1/threads"); len(got) != 1 || got[0]["level"] != "INFO" {
			t.Errorf("at %v, GET /v1/threads logged %v, want one INFO line", level, got)
		}
	}
	// A health check that fails is worth a look whatever the level.
	st := &failingStore{MemoryStore: thread.NewMemoryStore(), err: errors.New("disk on fire")}
	s, lines := loggedServer(t, slog.LevelWarn, Options{DB: thread.New(st, nil)})
	do(t, s, req{method: "GET", path: "/healthz"})
	if got := lines.requests(t, "GET /healthz"); len(got) != 1 || got[0]["level"] != "WARN" || got[0]["status"] != 503.0 {
		t.Errorf("failed /healthz logged %v, want one WARN line with status 503", got)
	}
}

// TestRequestLogTraceIDs: a request line carries the trace_id and span_id
// of the request's span when the server traces, and those of the client's
// traceparent when it does not; none without either.
func TestRequestLogTraceIDs(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00f067aa0ba902b7"
	)
	traceparent := map[string]string{"traceparent": "00-" + traceID + "-" + parent + "-01"}

	tp, exp := recordSpans(t)
	traced, lines := loggedServer(t, slog.LevelInfo, Options{TracerProvider: tp})
	must(t, traced, req{method: "GET", path: "/v1/threads", header: traceparent}, http.StatusOK, nil)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	own := spans[0].SpanContext.SpanID().String()
	got := lines.requests(t, "GET /v1/threads")
	if len(got) != 1 || got[0]["trace_id"] != traceID || got[0]["span_id"] != own {
		t.Errorf("traced: %v, want trace_id %s and the request's span %s", got, traceID, own)
	}
	// Traced, a request without a traceparent starts a trace of its own.
	must(t, traced, req{method: "GET", path: "/v1/threads"}, http.StatusOK, nil)
	got = lines.requests(t, "GET /v1/threads")
	if len(got) != 1 || len(got[0]["trace_id"].(string)) != 32 || got[0]["trace_id"] == traceID || len(got[0]["span_id"].(string)) != 16 {
		t.Errorf("traced, no traceparent: %v, want a new trace's ids", got)
	}

	plain, lines := loggedServer(t, slog.LevelInfo, Options{})
	must(t, plain, req{method: "GET", path: "/v1/threads", header: traceparent}, http.StatusOK, nil)
	got = lines.requests(t, "GET /v1/threads")
	if len(got) != 1 || got[0]["trace_id"] != traceID || got[0]["span_id"] != parent {
		t.Errorf("untraced: %v, want the traceparent's trace_id %s and span_id %s", got, traceID, parent)
	}
	for _, h := range []map[string]string{nil, {"traceparent": "00-garbage"}} {
		must(t, plain, req{method: "GET", path: "/v1/threads", header: h}, http.StatusOK, nil)
		got = lines.requests(t, "GET /v1/threads")
		if _, ok := got[0]["trace_id"]; len(got) != 1 || ok {
			t.Errorf("untraced, traceparent %v: %v, want no trace_id", h, got)
		}
	}
}

// TestInternalErrorLogTraceIDs: the line of a 500 carries the request's
// trace ids too.
func TestInternalErrorLogTraceIDs(t *testing.T) {
	st := &failingStore{MemoryStore: thread.NewMemoryStore(), err: errors.New("disk on fire")}
	var out bytes.Buffer
	s := newServer(t, Options{DB: thread.New(st, nil), Logger: slog.New(slog.NewJSONHandler(&out, nil))})
	wantError(t, s, req{method: "GET", path: "/v1/threads/th",
		header: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, http.StatusInternalServerError, "internal")
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || m["span_id"] != "00f067aa0ba902b7" {
			t.Errorf("line without the trace ids: %s", line)
		}
	}
	if !strings.Contains(out.String(), `"msg":"internal error"`) {
		t.Errorf("no internal error line:\n%s", out.String())
	}
}

// TestRouteOfEveryAnswer checks the answer and the logged route of each
// way a request is answered: by its route's handler, by the middleware
// before it (401, 413), and by the mux when no route matches (404, 405,
// and the redirect of an unclean path, to the route it cleans to).
func TestRouteOfEveryAnswer(t *testing.T) {
	s, lines := loggedServer(t, slog.LevelInfo, Options{Keys: twoTenants(t), MaxBodyBytes: 256})
	createThread(t, s, keyA, "t1", "hi")
	lines.requests(t, "")
	for _, tc := range []struct {
		rq          req
		status      int
		route       string
		contentType string
		header      map[string]string
	}{
		{req{method: "GET", path: "/v1/threads/t1", key: keyA}, http.StatusOK, "GET /v1/threads/{id}", "application/json", nil},
		{req{method: "GET", path: "/v1/threads/t1"}, http.StatusUnauthorized, "GET /v1/threads/{id}", "application/json", nil},
		{req{method: "POST", path: "/v1/threads/t1/messages", key: keyA, body: strings.Repeat(" ", 257)}, http.StatusRequestEntityTooLarge, "POST /v1/threads/{id}/messages", "application/json", nil},
		{req{method: "GET", path: "/v1/nothing", key: keyA}, http.StatusNotFound, "unmatched", "application/json", nil},
		{req{method: "PUT", path: "/v1/threads/t1", key: keyA}, http.StatusMethodNotAllowed, "unmatched", "application/json", map[string]string{"Allow": "DELETE, GET, HEAD, PATCH"}},
		{req{method: "GET", path: "/v1/threads/x/../t1", key: keyA}, http.StatusTemporaryRedirect, "GET /v1/threads/{id}", "text/html; charset=utf-8", map[string]string{"Location": "/v1/threads/t1"}},
	} {
		w := do(t, s, tc.rq)
		if w.Code != tc.status || w.Header().Get("Content-Type") != tc.contentType {
			t.Errorf("%s %s: %d %q, want %d %q: %s", tc.rq.method, tc.rq.path, w.Code, w.Header().Get("Content-Type"), tc.status, tc.contentType, w.Body)
		}
		for k, v := range tc.header {
			if got := w.Header().Get(k); got != v {
				t.Errorf("%s %s: %s %q, want %q", tc.rq.method, tc.rq.path, k, got, v)
			}
		}
		if got := lines.requests(t, tc.route); len(got) != 1 || got[0]["status"] != float64(tc.status) {
			t.Errorf("%s %s: logged %v under route %q", tc.rq.method, tc.rq.path, got, tc.route)
		}
	}
}
