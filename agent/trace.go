package agent

import (
	"context"
	"reflect"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

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

// providerName names client's provider for its spans.
func providerName(client ChatClient) string {
	if p, ok := client.(ProviderNamer); ok {
		return p.ProviderName()
	}
	t := reflect.TypeOf(client)
	if t == nil {
		return ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := t.PkgPath()
	return p[strings.LastIndexByte(p, '/')+1:]
}

// startRun starts the span of a run on the thread id: "invoke_agent" and
// the agent's name. Without a tracer it returns ctx and a nil span.
func (a *Agent) startRun(ctx context.Context, threadID string) (context.Context, trace.Span) {
	if a.tracer == nil {
		return ctx, nil
	}
	name := "invoke_agent"
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIProviderNameKey.String(a.provider),
		semconv.GenAIConversationID(threadID),
	}
	if a.opts.Name != "" {
		name += " " + a.opts.Name
		attrs = append(attrs, semconv.GenAIAgentName(a.opts.Name))
	}
	if a.opts.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(a.opts.Model))
	}
	return a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endRun ends a run's span with what the run did.
func endRun(span trace.Span, res *Result, err error) {
	if span == nil {
		return
	}
	if res != nil {
		span.SetAttributes(AttrRunID.String(res.RunID))
		setUsage(span, res.Usage)
	}
	endSpan(span, err)
}

// startChat starts the span of one model request: "chat" and the model.
func (r *run) startChat(ctx context.Context, opts *ChatOptions) (context.Context, trace.Span) {
	a := r.a
	if a.tracer == nil {
		return ctx, nil
	}
	name := "chat"
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(a.provider),
		semconv.GenAIConversationID(r.th.ID()),
	}
	if opts != nil && opts.Model != "" {
		name += " " + opts.Model
		attrs = append(attrs, semconv.GenAIRequestModel(opts.Model))
	}
	return a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endChat ends a model request's span with what the response says.
func endChat(span trace.Span, resp *ChatResponse, err error) {
	if span == nil {
		return
	}
	if resp != nil {
		if resp.Model != "" {
			span.SetAttributes(semconv.GenAIResponseModel(resp.Model))
		}
		if resp.ResponseID != "" {
			span.SetAttributes(semconv.GenAIResponseID(resp.ResponseID))
		}
		if resp.FinishReason != "" {
			span.SetAttributes(semconv.GenAIResponseFinishReasons(string(resp.FinishReason)))
		}
		setUsage(span, resp.Usage)
	}
	endSpan(span, err)
}

func setUsage(span trace.Span, u message.Usage) {
	span.SetAttributes(semconv.GenAIUsageInputTokens(int(u.InputTokens)), semconv.GenAIUsageOutputTokens(int(u.OutputTokens)))
}

// startTool starts the span of one tool call: "execute_tool" and the
// tool's name.
func (r *run) startTool(ctx context.Context, c message.FunctionCall) (context.Context, trace.Span) {
	if r.a.tracer == nil {
		return ctx, nil
	}
	return r.a.tracer.Start(ctx, "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(c.Name),
		semconv.GenAIToolCallID(c.CallID),
		semconv.GenAIToolType("function"),
	))
}

// endTool ends a tool call's span; a result that is an error is one.
func endTool(span trace.Span, res message.FunctionResult) {
	if span == nil {
		return
	}
	if res.IsError {
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "the tool returned an error")
	}
	span.End()
}

// endSpan ends span, recording err when it is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// errorType names err for the error.type attribute: its Go type.
func errorType(err error) string {
	return reflect.TypeOf(err).String()
}
