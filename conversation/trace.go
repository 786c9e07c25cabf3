package conversation

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/genai"
	"github.com/loomthreads/loom/message"
)

// tracerName names the instrumentation scope of a conversation's spans.
const tracerName = "github.com/loomthreads/loom/conversation"

// AttrAborted is true on the span of a turn, a model stream or a tool call
// that the user aborted. An abort is not an error: such a span has no
// error status.
const AttrAborted = attribute.Key("loom.aborted")

// opTool names the tool of a control flow operation, for its span.
func opTool(op string) string {
	switch op {
	case OpCompact:
		return ToolCompact
	case OpFork:
		return ToolFork
	case OpYield:
		return ToolYield
	}
	return ""
}

// tracing is what a conversation and its agent make spans with: nil makes
// none, at no cost.
type tracing struct {
	tracer   trace.Tracer
	provider string // gen_ai.provider.name
	convID   string // gen_ai.conversation.id: the thread's id
	// tools names the tools the agent is offered, the user's and the
	// conversation's own: a call of any other gets no span.
	tools map[string]bool
}

func newTracing(tp trace.TracerProvider, client agent.ChatClient, convID string, tools []agent.ToolSpec) *tracing {
	if tp == nil {
		return nil
	}
	t := &tracing{tracer: tp.Tracer(tracerName), provider: genai.ProviderName(client), convID: convID, tools: map[string]bool{}}
	for _, s := range tools {
		t.tools[s.Name] = true
	}
	return t
}

// ctx returns the context of the turn in flight: its span, without
// deadline or cancellation (a turn outlives the command that began it).
// Without one it is the background context.
func (c *Conversation) ctx() context.Context {
	if c.turn == nil {
		return context.Background()
	}
	return trace.ContextWithSpan(context.Background(), c.turn)
}

// beginTurn begins the span of a turn, "invoke_agent" and the
// conversation's name, unless one is open; its parent is the span in
// parent.
//
// A turn is what an operator thinks of as one exchange: it begins with what
// sets the agent going (a message of the user's, Continue, a conversation
// resumed in tool use) and lasts while the conversation goes on by itself —
// streams, tool rounds, a compact or fork the agent asked for and the
// stream after it — until it comes to rest: an answer without calls, an
// error, an abort, a yield. Messages queued (Send with queued) and sent after
// the answer begin a turn of their own; sent with tool results, they join
// the turn in flight.
func (c *Conversation) beginTurn(parent context.Context) {
	if c.trc == nil || c.turn != nil {
		return
	}
	name, attrs := genai.InvokeAgent(c.trc.provider, c.trc.convID, c.name, c.opts.Model)
	_, c.turn = c.trc.tracer.Start(trace.ContextWithSpan(context.Background(), trace.SpanFromContext(parent)), name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	c.turnUsage = message.Usage{}
}

// endTurn ends the turn's span, if one is open, with its usage.
func (c *Conversation) endTurn(aborted bool, err error) {
	if c.turn == nil {
		return
	}
	span := c.turn
	c.turn = nil
	genai.Usage(span, c.turnUsage)
	endSpan(span, aborted, err)
}

// startChat starts the span of one model stream: "chat" and the model.
func (a *Agent) startChat(ctx context.Context) (context.Context, trace.Span) {
	if a.trc == nil {
		return ctx, nil
	}
	name, attrs := genai.Chat(a.trc.provider, a.trc.convID, a.opts.Model)
	return a.trc.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endChat ends a model stream's span with what its response says.
func endChat(span trace.Span, resp *agent.ChatResponse, aborted bool, err error) {
	if span == nil {
		return
	}
	if resp != nil {
		genai.Response(span, resp.Model, resp.ResponseID, string(resp.FinishReason), resp.Usage)
	}
	endSpan(span, aborted, err)
}

// startTool starts the span of one tool call, the user's or the
// conversation's own: "execute_tool" and the tool's name. A call of a tool
// the agent is not offered gets none, as in package agent: the model may
// invent any name, and span names must stay few.
func (c *Conversation) startTool(ctx context.Context, call message.FunctionCall) (context.Context, trace.Span) {
	if c.trc == nil {
		return ctx, nil
	}
	if !c.trc.tools[call.Name] {
		return ctx, nil
	}
	name, attrs := genai.Tool(call.Name, call.CallID)
	return c.trc.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endSpan ends span (nil is none): aborted, failed with err, or well.
func endSpan(span trace.Span, aborted bool, err error) {
	if span == nil {
		return
	}
	switch {
	case aborted:
		span.SetAttributes(AttrAborted.Bool(true))
	case err != nil:
		genai.Fail(span, err)
	}
	span.End()
}

// endTool ends a tool call's span (nil is none): a result that is an
// error is one, as package agent has it, unless the user aborted the call.
func endTool(span trace.Span, res message.FunctionResult, aborted bool) {
	if span == nil {
		return
	}
	switch {
	case aborted:
		span.SetAttributes(AttrAborted.Bool(true))
	case res.IsError:
		genai.ToolFailed(span)
	}
	span.End()
}
