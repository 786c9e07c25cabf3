package mcpserver

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
// Every tool gets one, those of AddTools (the work log's) included.
func traceTools(tp trace.TracerProvider) mcp.Middleware {
	tr := tp.Tracer(tracerName)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			name := ""
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
				name = p.Name
			}
			// The span is named once the SDK has found the tool: a name a
			// client invents must not become a span name.
			ctx, span := tr.Start(ctx, "execute_tool", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				semconv.GenAIOperationNameExecuteTool,
				semconv.GenAIToolType("function"),
			))
			defer span.End()
			res, err := next(ctx, method, req)
			var werr *jsonrpc.Error
			if !(errors.As(err, &werr) && werr.Code == jsonrpc.CodeInvalidParams && strings.HasPrefix(werr.Message, "unknown tool")) {
				span.SetName("execute_tool " + name)
				span.SetAttributes(semconv.GenAIToolName(name))
			}
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
