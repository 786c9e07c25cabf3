package mcpserver

// Found by the review of issue 17: each test failed before its fix.

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomthreads/loom/thread"
)

// Only the server's own tools name spans: a client calling tools that do
// not exist must not mint a span name (and gen_ai.tool.name value) per
// name it invents.
func TestReviewUnknownToolNamesNoSpan(t *testing.T) {
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
