package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
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
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
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
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, sp := range spans {
		if got := sp.SpanContext.TraceID().String(); got != traceID {
			t.Errorf("span %q in trace %s, want the incoming %s", sp.Name, got, traceID)
		}
		byID[sp.SpanContext.SpanID()] = sp
	}
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
			var all []string
			for _, sp := range spans {
				all = append(all, sp.Name)
			}
			t.Fatalf("%d spans %q, want 1; spans: %s", len(got), name, strings.Join(all, ", "))
		}
		return got[0]
	}
	parentOf := func(sp tracetest.SpanStub) string {
		if p, ok := byID[sp.Parent.SpanID()]; ok {
			return p.Name
		}
		return "remote " + sp.Parent.SpanID().String()
	}
	attrs := func(sp tracetest.SpanStub) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes {
			m[kv.Key] = kv.Value
		}
		return m
	}
	wantAttrs := func(sp tracetest.SpanStub, want map[string]any) {
		t.Helper()
		got := attrs(sp)
		for k, v := range want {
			g, ok := got[attribute.Key(k)]
			if !ok || g.AsInterface() != v {
				t.Errorf("span %q: %s = %v, want %v", sp.Name, k, g.AsInterface(), v)
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
