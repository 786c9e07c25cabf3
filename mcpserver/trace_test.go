package mcpserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// TestToolSpans calls thread tools and a work-log tool on a traced server
// and checks that each call is an execute_tool span with the tool's name,
// that the store operations it made are its children, and that a tool
// error marks its span.
func TestToolSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	db := thread.New(thread.NewMemoryStore(), &thread.Options{TracerProvider: tp})
	logs := worklog.NewLogs(db, nil)
	s := New(db, &Options{TracerProvider: tp, AddTools: func(s *mcp.Server) {
		AddWorklogToolsFrom(s, func(_ context.Context, project string) (*worklog.Log, error) {
			return logs.Log("", project)
		}, nil)
	}})
	cs := wlConnect(t, s)

	ok[map[string]any](t, cs, "thread_create", map[string]any{"id": "th"})
	ok[map[string]any](t, cs, "thread_append", map[string]any{"id": "th", "messages": []map[string]any{{"role": "user", "text": "hi"}}})
	wlCall[worklog.CreateResult](t, cs, "create_thread", map[string]any{"text": "Release notes", "project": "loom"})
	fails(t, cs, "thread_get", map[string]any{"id": "nope"})

	spans := exp.GetSpans()
	tools := map[string]tracetest.SpanStub{}
	for _, sp := range spans {
		if sp.InstrumentationScope.Name != tracerName {
			continue
		}
		attrs := map[attribute.Key]string{}
		for _, kv := range sp.Attributes {
			attrs[kv.Key] = kv.Value.Emit()
		}
		name := attrs["gen_ai.tool.name"]
		if sp.Name != "execute_tool "+name || attrs["gen_ai.operation.name"] != "execute_tool" {
			t.Errorf("span %q has attributes %v", sp.Name, attrs)
		}
		tools[name] = sp
	}
	for _, name := range []string{"thread_create", "thread_append", "create_thread", "thread_get"} {
		if _, ok := tools[name]; !ok {
			t.Fatalf("no span for the tool %s; spans: %v", name, spanNames(spans))
		}
	}
	// Each tool's store operations are its children.
	for _, name := range []string{"thread_create", "thread_append", "create_thread"} {
		tool := tools[name]
		n := 0
		for _, sp := range spans {
			if sp.Parent.SpanID() == tool.SpanContext.SpanID() && sp.InstrumentationScope.Name == "github.com/loomthreads/loom/thread" {
				n++
				if sp.SpanContext.TraceID() != tool.SpanContext.TraceID() {
					t.Errorf("%s under %s is in another trace", sp.Name, name)
				}
			}
		}
		if n == 0 {
			t.Errorf("the tool %s has no store operation spans under it; spans: %v", name, spanNames(spans))
		}
	}
	if got := tools["thread_get"].Status.Code; got != codes.Error {
		t.Errorf("a failed tool's span has status %v, want Error", got)
	}
	if got := tools["thread_append"].Status.Code; got == codes.Error {
		t.Errorf("a tool that worked has status %v", got)
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Name
	}
	return out
}

// Only the server's own tools name spans: a client calling tools that do
// not exist must not mint a span name (and gen_ai.tool.name value) per
// name it invents.
func TestUnknownToolNamesNoSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	s := New(thread.New(thread.NewMemoryStore(), nil), &Options{TracerProvider: tp})
	cs := wlConnect(t, s)
	for _, name := range []string{"invented_1", "invented_2", "invented_3"} {
		cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name}) // fails: no such tool
	}
	unnamed := 0
	for _, sp := range exp.GetSpans() {
		switch sp.Name {
		case "execute_tool invented_1", "execute_tool invented_2", "execute_tool invented_3":
			t.Errorf("a call of a tool the server does not have made the span %q", sp.Name)
		case "execute_tool":
			unnamed++
			for _, kv := range sp.Attributes {
				if kv.Key == "gen_ai.tool.name" {
					t.Errorf("the span of a call of a tool the server does not have has %s=%q", kv.Key, kv.Value.Emit())
				}
			}
			if sp.Status.Code != codes.Error {
				t.Errorf("the span of a call of a tool the server does not have has status %v, want Error", sp.Status.Code)
			}
		}
	}
	// Each call still has its span, unnamed.
	if unnamed != 3 {
		t.Errorf("%d unnamed execute_tool spans, want 3", unnamed)
	}
}
