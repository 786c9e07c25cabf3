package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/thread"
)

// TestRunSpans runs an agent with a tool through the server, traced into
// an in-memory exporter, under an incoming traceparent, and checks the
// span tree: request → run → model calls, tool call and store operations,
// with the GenAI attributes, all in the incoming trace.
func TestRunSpans(t *testing.T) {
	tp, exp := recordSpans(t)
	db := thread.New(thread.NewMemoryStore(), &thread.Options{TracerProvider: tp})
	ag := agent.New(weatherScript(), &agent.Options{Name: "weatherbot", Model: "test-model", Tools: []agent.Tool{weatherTool()}, TracerProvider: tp})
	s := newServer(t, Options{DB: db, Agent: ag, TracerProvider: tp})
	createThread(t, s, "", "th")
	exp.Reset()

	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00f067aa0ba902b7"
	)
	var res runResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "Weather in Paris?"},
		header: map[string]string{"traceparent": "00-" + traceID + "-" + parent + "-01"}}, http.StatusOK, &res)

	spans := exp.GetSpans()
	parentOf := spanTree(t, spans, traceID)
	named := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, sp := range spans {
			if sp.Name == name {
				out = append(out, sp)
			}
		}
		return out
	}
	one := func(name string) tracetest.SpanStub {
		t.Helper()
		got := named(name)
		if len(got) != 1 {
			t.Fatalf("%d spans %q, want 1; spans: %s", len(got), name, spanNames(spans))
		}
		return got[0]
	}
	wantAttrs := func(sp tracetest.SpanStub, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if got := attr(sp, k); got != v {
				t.Errorf("span %q: %s = %v, want %v", sp.Name, k, got, v)
			}
		}
	}

	req := one("POST /v1/threads/{id}/runs")
	if p := parentOf(req); p != "remote "+parent || req.SpanKind != trace.SpanKindServer {
		t.Errorf("request span: parent %s, kind %v", p, req.SpanKind)
	}
	wantAttrs(req, map[string]any{"http.route": "/v1/threads/{id}/runs"})
	run := one("invoke_agent weatherbot")
	if p := parentOf(run); p != req.Name {
		t.Errorf("run's parent %q", p)
	}
	wantAttrs(run, map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weatherbot",
		"gen_ai.conversation.id": "th", "gen_ai.provider.name": "scripted", "gen_ai.usage.input_tokens": int64(10),
		"gen_ai.usage.output_tokens": int64(5), "loom.run.id": res.RunID})
	chats := named("chat test-model")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2", len(chats))
	}
	for _, c := range chats {
		if p := parentOf(c); p != run.Name || c.SpanKind != trace.SpanKindClient {
			t.Errorf("chat span: parent %q, kind %v", p, c.SpanKind)
		}
		wantAttrs(c, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "test-model", "gen_ai.provider.name": "scripted"})
	}
	wantAttrs(chats[1], map[string]any{"gen_ai.usage.input_tokens": int64(10), "gen_ai.usage.output_tokens": int64(5)})
	tool := one("execute_tool weather")
	if p := parentOf(tool); p != run.Name {
		t.Errorf("tool's parent %q", p)
	}
	wantAttrs(tool, map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather", "gen_ai.tool.call.id": "c1"})

	// Store operations: the handler opens the thread; the run refreshes,
	// reads its state and view and commits each step.
	wantAttrs(one("thread.open"), map[string]any{"loom.store": "memory", "loom.thread.id": "th"})
	if p := parentOf(one("thread.open")); p != req.Name {
		t.Errorf("open's parent %q", p)
	}
	for _, name := range []string{"thread.refresh", "thread.state", "thread.commit", "thread.view"} {
		got := named(name)
		if len(got) == 0 {
			t.Errorf("no span %q", name)
		}
		for _, sp := range got {
			if p := parentOf(sp); p != run.Name {
				t.Errorf("%s's parent %q", name, p)
			}
			wantAttrs(sp, map[string]any{"loom.store": "memory", "loom.thread.id": "th"})
		}
	}
	if n := len(named("thread.commit")); n != 3 {
		t.Errorf("%d commits, want 3 (input, tools, answer)", n)
	}
}

// TestRouteSpans checks the names and http.route of request spans: a
// route of the server's, a handler mounted with Protect (the pattern of
// the mux that calls it), and a request that matches no route.
func TestRouteSpans(t *testing.T) {
	tp, exp := recordSpans(t)
	s := newServer(t, Options{TracerProvider: tp})
	mux := http.NewServeMux()
	mux.Handle("/hook", s.Protect(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.Handle("/", s)
	do(t, mux, req{method: "GET", path: "/v1/threads"})
	do(t, mux, req{method: "POST", path: "/hook"})
	do(t, mux, req{method: "GET", path: "/v1/nowhere"})
	got := map[string]any{}
	var listed string // the trace of GET /v1/threads
	for _, sp := range exp.GetSpans() {
		got[sp.Name] = attr(sp, "http.route")
		if sp.Name == "GET /v1/threads" {
			listed = sp.SpanContext.TraceID().String()
		}
	}
	want := map[string]any{"GET /v1/threads": "/v1/threads", "POST /hook": "/hook", "GET unmatched": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans' http.route (-want +got):\n%s", diff)
	}
	// The request's span is the exemplar of its duration.
	w := do(t, s, req{method: "GET", path: "/metrics", header: map[string]string{"Accept": "application/openmetrics-text; version=1.0.0"}})
	if !strings.Contains(w.Body.String(), `loom_http_request_duration_seconds_bucket{route="GET /v1/threads",le="0.0005"}`) ||
		!strings.Contains(w.Body.String(), `# {trace_id="`+listed+`"}`) {
		t.Errorf("no exemplar of trace %s:\n%s", listed, grepLines(w.Body.String(), "GET /v1/threads"))
	}
}

// recordSpans returns a tracer provider that records every span, as it
// ends, in exp.
func recordSpans(tb testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	tb.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tb.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp
}

// spanTree checks that every span is in the trace traceID, and returns
// parentOf, which names a span's parent: the parent's name, or "remote
// <span id>" for a parent outside spans.
func spanTree(t *testing.T, spans tracetest.SpanStubs, traceID string) (parentOf func(tracetest.SpanStub) string) {
	t.Helper()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, sp := range spans {
		if got := sp.SpanContext.TraceID().String(); got != traceID {
			t.Errorf("span %q in trace %s, want the incoming %s", sp.Name, got, traceID)
		}
		byID[sp.SpanContext.SpanID()] = sp
	}
	return func(sp tracetest.SpanStub) string {
		if p, ok := byID[sp.Parent.SpanID()]; ok {
			return p.Name
		}
		return "remote " + sp.Parent.SpanID().String()
	}
}

func spanNames(spans tracetest.SpanStubs) string {
	var all []string
	for _, sp := range spans {
		all = append(all, sp.Name)
	}
	return strings.Join(all, ", ")
}

// attr returns the value of sp's attribute key, nil when it has none.
func attr(sp tracetest.SpanStub, key string) any {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsInterface()
		}
	}
	return nil
}

// A request's span name built from r.Method as the client sent it would
// let any client mint span names without bound ("BREW1 unmatched",
// "BREW2 unmatched", …): an unknown method is OTHER, as in the metrics.
func TestSpanNameOfAnUnknownMethodIsBounded(t *testing.T) {
	tp, exp := recordSpans(t)
	s := newServer(t, Options{TracerProvider: tp})
	for _, m := range []string{"BREW1", "BREW2", "X-ANYTHING-THE-CLIENT-WANTS"} {
		do(t, s, req{method: m, path: "/v1/threads"})
	}
	names := map[string]bool{}
	for _, sp := range exp.GetSpans() {
		names[sp.Name] = true
	}
	if len(names) != 1 {
		t.Errorf("three unknown methods made %d span names: %v", len(names), names)
	}
}
