package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the instrumentation scope of the server's spans.
const tracerName = "github.com/loomthreads/loom/mcpserver"

// traceTools is a receiving middleware that wraps each tools/call in an
// "execute_tool <name>" span with the GenAI attributes, so that a tool's
// store operations (thread.<op> spans, when the DB traces) hang under it.
// Every call gets one; the handler of a tool added with AddTool (each of
// loom's, the work log's included) names it, so only a tool the server has
// names a span: a name a client invents reaches no handler, and its span
// stays "execute_tool".
func traceTools(tp trace.TracerProvider) mcp.Middleware {
	tr := tp.Tracer(tracerName)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			ctx, span := tr.Start(ctx, "execute_tool", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				semconv.GenAIOperationNameExecuteTool,
				semconv.GenAIToolType("function"),
			))
			defer span.End()
			res, err := next(context.WithValue(ctx, toolSpanKey{}, span), method, req)
			switch r, _ := res.(*mcp.CallToolResult); {
			case err != nil:
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			case r != nil && r.IsError:
				span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
				span.SetStatus(codes.Error, "the tool returned an error")
			}
			return res, err
		}
	}
}

// toolSpanKey is the context key of the span traceTools made for a tool
// call, for the tool's handler to name (nameToolSpan).
type toolSpanKey struct{}

// nameToolSpan names the span of the tool call in ctx after the tool, if
// traceTools made one.
func nameToolSpan(ctx context.Context, tool string) {
	if span, ok := ctx.Value(toolSpanKey{}).(trace.Span); ok {
		span.SetName("execute_tool " + tool)
		span.SetAttributes(semconv.GenAIToolName(tool))
	}
}
