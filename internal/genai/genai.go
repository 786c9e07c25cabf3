// Package genai holds the span vocabulary that package agent and package
// conversation share: the OpenTelemetry GenAI semantic conventions
// (gen_ai.operation.name, gen_ai.usage.input_tokens, …) for a run, a model
// request and a tool call, so that both name and mark them alike.
package genai

import (
	"reflect"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/message"
)

// ProviderName names client's provider for gen_ai.provider.name: what its
// ProviderName method says (agent.ProviderNamer), else the last element of
// its type's package path ("openai", "anthropic", "scripted").
func ProviderName(client any) string {
	if p, ok := client.(interface{ ProviderName() string }); ok {
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

// InvokeAgent returns the name and attributes of a run's span:
// "invoke_agent" and the agent's name, when it has one.
func InvokeAgent(provider, conversationID, agent, model string) (string, []attribute.KeyValue) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIProviderNameKey.String(provider),
		semconv.GenAIConversationID(conversationID),
	}
	name := "invoke_agent"
	if agent != "" {
		name += " " + agent
		attrs = append(attrs, semconv.GenAIAgentName(agent))
	}
	if model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(model))
	}
	return name, attrs
}

// Chat returns the name and attributes of a model request's span: "chat"
// and the model, when there is one.
func Chat(provider, conversationID, model string) (string, []attribute.KeyValue) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(provider),
		semconv.GenAIConversationID(conversationID),
	}
	name := "chat"
	if model != "" {
		name += " " + model
		attrs = append(attrs, semconv.GenAIRequestModel(model))
	}
	return name, attrs
}

// Response sets on a model request's span what its response says: the
// model that answered, the response's id, why it finished, and the usage.
func Response(span trace.Span, model, id, finish string, u message.Usage) {
	if model != "" {
		span.SetAttributes(semconv.GenAIResponseModel(model))
	}
	if id != "" {
		span.SetAttributes(semconv.GenAIResponseID(id))
	}
	if finish != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(finish))
	}
	Usage(span, u)
}

// Usage sets the input and output tokens of u on span.
func Usage(span trace.Span, u message.Usage) {
	span.SetAttributes(semconv.GenAIUsageInputTokens(int(u.InputTokens)), semconv.GenAIUsageOutputTokens(int(u.OutputTokens)))
}

// Tool returns the name and attributes of a tool call's span:
// "execute_tool" and the tool's name.
func Tool(name, callID string) (string, []attribute.KeyValue) {
	return "execute_tool " + name, []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(name),
		semconv.GenAIToolCallID(callID),
		semconv.GenAIToolType("function"),
	}
}

// ToolFailed marks a tool call's span as one whose result is an error.
func ToolFailed(span trace.Span) {
	span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
	span.SetStatus(codes.Error, "the tool returned an error")
}

// Fail records err on span as its error, with its Go type as error.type.
func Fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetAttributes(semconv.ErrorTypeKey.String(reflect.TypeOf(err).String()))
	span.SetStatus(codes.Error, err.Error())
}
