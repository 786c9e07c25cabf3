package agent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/internal/genai"
	"github.com/loomthreads/loom/message"
)

// tracerName names the instrumentation scope of an agent's spans.
const tracerName = "github.com/loomthreads/loom/agent"

// AttrRunID is the run's id (Result.RunID) on its invoke_agent span.
const AttrRunID = attribute.Key("loom.run.id")

// ProviderNamer is an optional upgrade of a ChatClient that names its
// provider for the gen_ai.provider.name attribute of spans ("openai",
// "anthropic", …). Without it, the provider is the last element of the
// client type's package path.
type ProviderNamer interface {
	ProviderName() string
}

// startRun starts the span of a run on the thread id: "invoke_agent" and
// the agent's name. Without a tracer it returns ctx and a nil span.
func (a *Agent) startRun(ctx context.Context, threadID string) (context.Context, trace.Span) {
	if a.tracer == nil {
		return ctx, nil
	}
	name, attrs := genai.InvokeAgent(a.provider, threadID, a.opts.Name, a.opts.Model)
	return a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endRun ends a run's span with what the run did.
func endRun(span trace.Span, res *Result, err error) {
	if span == nil {
		return
	}
	if res != nil {
		span.SetAttributes(AttrRunID.String(res.RunID))
		genai.Usage(span, res.Usage)
	}
	endSpan(span, err)
}

// startChat starts the span of one model request: "chat" and the model.
func (r *run) startChat(ctx context.Context, opts *ChatOptions) (context.Context, trace.Span) {
	a := r.a
	if a.tracer == nil {
		return ctx, nil
	}
	model := ""
	if opts != nil {
		model = opts.Model
	}
	name, attrs := genai.Chat(a.provider, r.th.ID(), model)
	return a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endChat ends a model request's span with what the response says.
func endChat(span trace.Span, resp *ChatResponse, err error) {
	if span == nil {
		return
	}
	if resp != nil {
		genai.Response(span, resp.Model, resp.ResponseID, string(resp.FinishReason), resp.Usage)
	}
	endSpan(span, err)
}

// startTool starts the span of one tool call: "execute_tool" and the
// tool's name.
func (r *run) startTool(ctx context.Context, c message.FunctionCall) (context.Context, trace.Span) {
	if r.a.tracer == nil {
		return ctx, nil
	}
	name, attrs := genai.Tool(c.Name, c.CallID)
	return r.a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endTool ends a tool call's span; a result that is an error is one.
func endTool(span trace.Span, res message.FunctionResult) {
	if span == nil {
		return
	}
	if res.IsError {
		genai.ToolFailed(span)
	}
	span.End()
}

// endSpan ends span, recording err when it is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		genai.Fail(span, err)
	}
	span.End()
}
