package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traced returns a tracer provider that exports into an in-memory
// exporter, and a memory DB whose operations it traces too.
func traced(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter, *thread.DB) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp, thread.New(thread.NewMemoryStore(), &thread.Options{TracerProvider: tp})
}

// spanTree is the ended spans of an exporter, to look them up by name
// and parent.
type spanTree struct {
	t     *testing.T
	spans tracetest.SpanStubs
	byID  map[trace.SpanID]tracetest.SpanStub
}

func treeOf(t *testing.T, exp *tracetest.InMemoryExporter) spanTree {
	t.Helper()
	st := spanTree{t: t, spans: exp.GetSpans(), byID: map[trace.SpanID]tracetest.SpanStub{}}
	for _, sp := range st.spans {
		st.byID[sp.SpanContext.SpanID()] = sp
	}
	return st
}

func (st spanTree) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range st.spans {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

func (st spanTree) names() string {
	var all []string
	for _, sp := range st.spans {
		all = append(all, sp.Name+" < "+st.parent(sp))
	}
	return strings.Join(all, "\n\t")
}

func (st spanTree) one(name string) tracetest.SpanStub {
	st.t.Helper()
	got := st.named(name)
	if len(got) != 1 {
		st.t.Fatalf("%d spans %q, want 1; spans:\n\t%s", len(got), name, st.names())
	}
	return got[0]
}

// parent names sp's parent: "" for a root, "?" for one not exported.
func (st spanTree) parent(sp tracetest.SpanStub) string {
	if !sp.Parent.IsValid() {
		return ""
	}
	if p, ok := st.byID[sp.Parent.SpanID()]; ok {
		return p.Name
	}
	return "?"
}

// isChild reports whether sp's parent is p.
func isChild(sp, p tracetest.SpanStub) bool {
	return sp.Parent.SpanID() == p.SpanContext.SpanID() && sp.SpanContext.TraceID() == p.SpanContext.TraceID()
}

func attrOf(sp tracetest.SpanStub, key string) any {
	for _, kv := range sp.Attributes {
		if kv.Key == attribute.Key(key) {
			return kv.Value.AsInterface()
		}
	}
	return nil
}

func (st spanTree) wantAttrs(sp tracetest.SpanStub, want map[string]any) {
	st.t.Helper()
	for k, v := range want {
		got := attrOf(sp, k)
		if s, ok := got.([]string); ok {
			got = strings.Join(s, ",")
		}
		if got != v {
			st.t.Errorf("span %q: %s = %v (%T), want %v (%T)", sp.Name, k, got, got, v, v)
		}
	}
}

// A turn with tool calls, traced: the turn's invoke_agent span is the
// parent of both streams, of each tool call, and of the thread operations
// of the turn; a tool's own store operations are under its call.
func TestTurnSpans(t *testing.T) {
	tp, exp, db := traced(t)
	var convID string
	weather := mustTool(t, "weather", func(ctx context.Context, in struct{ City string }) (string, error) {
		if _, err := db.Thread(ctx, convID); err != nil { // a store operation in the call's context
			return "", err
		}
		return "sunny in " + in.City, nil
	})
	broken := mustTool(t, "broken", func(context.Context, struct{}) (string, error) { return "", errors.New("out of order") })
	client := scripted.New(
		scripted.Calls(message.FunctionCall{CallID: "c1", Name: "weather", Arguments: `{"City":"Paris"}`},
			message.FunctionCall{CallID: "c2", Name: "broken", Arguments: `{}`}),
		scripted.Step{Text: "Sunny.", Usage: message.Usage{InputTokens: 10, OutputTokens: 5}})
	c, err := New(t.Context(), db, Options{Client: client, Model: "test-model", Title: "weatherbot", Tools: []agent.Tool{weather, broken}, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	convID = c.ID()
	exp.Reset() // the thread's creation
	if err := c.Send(context.Background(), message.User("Weather in Paris?"), false); err != nil {
		t.Fatal(err)
	}
	idle(t, c)

	st := treeOf(t, exp)
	turn := st.one("invoke_agent weatherbot")
	if p := st.parent(turn); p != "" || turn.SpanKind != trace.SpanKindInternal || turn.Status.Code != codes.Unset {
		t.Errorf("the turn's span: parent %q, kind %v, status %v", p, turn.SpanKind, turn.Status)
	}
	st.wantAttrs(turn, map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weatherbot",
		"gen_ai.conversation.id": c.ID(), "gen_ai.provider.name": "scripted", "gen_ai.request.model": "test-model",
		"gen_ai.usage.input_tokens": int64(10), "gen_ai.usage.output_tokens": int64(5), string(AttrAborted): nil})

	chats := st.named("chat test-model")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2; spans:\n\t%s", len(chats), st.names())
	}
	slices.SortFunc(chats, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	for i, ch := range chats {
		if !isChild(ch, turn) || ch.SpanKind != trace.SpanKindClient || ch.Status.Code != codes.Unset {
			t.Errorf("chat %d: parent %q, kind %v, status %v", i, st.parent(ch), ch.SpanKind, ch.Status)
		}
		st.wantAttrs(ch, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
			"gen_ai.conversation.id": c.ID(), "gen_ai.request.model": "test-model", "gen_ai.response.model": "scripted"})
	}
	st.wantAttrs(chats[0], map[string]any{"gen_ai.response.id": "resp_1", "gen_ai.response.finish_reasons": "tool_calls"})
	st.wantAttrs(chats[1], map[string]any{"gen_ai.response.id": "resp_2", "gen_ai.response.finish_reasons": "stop",
		"gen_ai.usage.input_tokens": int64(10), "gen_ai.usage.output_tokens": int64(5)})

	w := st.one("execute_tool weather")
	if !isChild(w, turn) || w.Status.Code != codes.Unset {
		t.Errorf("weather: parent %q, status %v", st.parent(w), w.Status)
	}
	st.wantAttrs(w, map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather", "gen_ai.tool.call.id": "c1"})
	if !chats[0].EndTime.Before(w.StartTime) && !chats[0].EndTime.Equal(w.StartTime) || w.EndTime.After(chats[1].StartTime) {
		t.Errorf("the tool ran from %v to %v; the streams %v–%v and %v–%v", w.StartTime, w.EndTime, chats[0].StartTime, chats[0].EndTime, chats[1].StartTime, chats[1].EndTime)
	}
	b := st.one("execute_tool broken")
	if !isChild(b, turn) || b.Status.Code != codes.Error {
		t.Errorf("broken: parent %q, status %v", st.parent(b), b.Status)
	}
	st.wantAttrs(b, map[string]any{"gen_ai.tool.name": "broken", "gen_ai.tool.call.id": "c2", "error.type": "tool_error"})

	// The thread: the question, the stop on tool use, the results (kept
	// before the answer to them streams), the answer.
	commits := st.named("thread.commit")
	if len(commits) != 4 {
		t.Errorf("%d commits, want 4; spans:\n\t%s", len(commits), st.names())
	}
	for _, sp := range commits {
		if !isChild(sp, turn) {
			t.Errorf("a commit's parent %q", st.parent(sp))
		}
		st.wantAttrs(sp, map[string]any{"loom.thread.id": c.ID(), "loom.store": "memory"})
	}
	if open := st.one("thread.open"); !isChild(open, w) {
		t.Errorf("the tool's store operation's parent %q", st.parent(open))
	}
	if len(st.spans) != 1+2+2+4+1 {
		t.Errorf("%d spans, want 10:\n\t%s", len(st.spans), st.names())
	}
}

// An aborted turn: its span, and those of the stream or tool call it
// stopped, say so and are not errors; a stream that fails is an error of
// the stream and of the turn.
func TestAbortedTurnSpans(t *testing.T) {
	t.Run("while streaming", func(t *testing.T) {
		tp, exp, db := traced(t)
		g := newGated()
		g.add(textScript("Hel", "lo", " there"))
		c, err := New(t.Context(), db, Options{Client: g, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		c.Send(context.Background(), message.User("hi"), false)
		g.release(1)
		eventually(t, "the first delta", func() bool { return c.Agent().Partial() == "Hel" })
		c.Abort(context.Background())
		idle(t, c)

		st := treeOf(t, exp)
		turn, chat := st.one("invoke_agent conversation"), st.one("chat")
		if !isChild(chat, turn) {
			t.Errorf("chat's parent %q", st.parent(chat))
		}
		for _, sp := range []tracetest.SpanStub{turn, chat} {
			if sp.Status.Code != codes.Unset || len(sp.Events) != 0 {
				t.Errorf("%s: status %v, events %v", sp.Name, sp.Status, sp.Events)
			}
			st.wantAttrs(sp, map[string]any{string(AttrAborted): true})
		}
		st.wantAttrs(chat, map[string]any{"gen_ai.response.id": nil, "gen_ai.request.model": nil})
		// The question, then the abort's stop.
		if n := len(st.named("thread.commit")); n != 2 {
			t.Errorf("%d commits, want 2:\n\t%s", n, st.names())
		}
	})

	t.Run("while a tool runs", func(t *testing.T) {
		tp, exp, db := traced(t)
		started := make(chan struct{})
		block := mustTool(t, "block", func(ctx context.Context, _ struct{}) (string, error) {
			close(started)
			<-ctx.Done()
			return "", ctx.Err()
		})
		client := scripted.New(scripted.Calls(message.FunctionCall{CallID: "b1", Name: "block", Arguments: "{}"}), scripted.Text("never"))
		c, err := New(t.Context(), db, Options{Client: client, Tools: []agent.Tool{block}, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		c.Send(context.Background(), message.User("go"), false)
		<-started
		c.Abort(context.Background())
		idle(t, c)

		st := treeOf(t, exp)
		turn, tool := st.one("invoke_agent conversation"), st.one("execute_tool block")
		if !isChild(tool, turn) || !isChild(st.one("chat"), turn) {
			t.Errorf("spans:\n\t%s", st.names())
		}
		for _, sp := range []tracetest.SpanStub{turn, tool} {
			if sp.Status.Code != codes.Unset {
				t.Errorf("%s: status %v", sp.Name, sp.Status)
			}
			st.wantAttrs(sp, map[string]any{string(AttrAborted): true})
		}
	})

	t.Run("a stream error", func(t *testing.T) {
		tp, exp, db := traced(t)
		c, err := New(t.Context(), db, Options{Client: scripted.New(scripted.Fail(errors.New("the model is down"))), TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		c.Send(context.Background(), message.User("hi"), false)
		idle(t, c)

		st := treeOf(t, exp)
		turn, chat := st.one("invoke_agent conversation"), st.one("chat")
		for _, sp := range []tracetest.SpanStub{turn, chat} {
			if sp.Status.Code != codes.Error || !strings.Contains(sp.Status.Description, "the model is down") {
				t.Errorf("%s: status %v", sp.Name, sp.Status)
			}
			st.wantAttrs(sp, map[string]any{string(AttrAborted): nil})
		}
	})
}

// The conversation's own tools have spans too: a compact the agent asks
// for is a call in the turn, which goes on with its next prompt; a
// sub-agent's turn is a child of the call that spawned it.
func TestOwnToolSpans(t *testing.T) {
	tp, exp, db := traced(t)
	client := router(func(ctx context.Context, last message.Message, all []message.Message) (*agent.ChatResponse, error) {
		switch {
		case last.Text() == "squeeze":
			return call("k1", ToolCompact, map[string]string{"summary": "we talked", "next_prompt": "go on"}), nil
		case last.Text() == "go on":
			return textResp("went on"), nil
		case last.Text() == "delegate":
			return call("s1", ToolSpawn, map[string]string{"prompt": "research", "title": "researcher"}), nil
		case last.Text() == "research":
			return call("y1", ToolYield, map[string]string{"result": "found it"}), nil
		case strings.Contains(resultOf(last), `"id"`):
			var r struct{ ID string }
			json.Unmarshal([]byte(resultOf(last)), &r)
			return call("w1", ToolWaitSubs, map[string]any{"ids": []string{r.ID}}), nil
		case strings.Contains(resultOf(last), "found it"):
			return textResp("done"), nil
		}
		return nil, errors.New("unexpected: " + last.Text())
	})
	c, err := New(t.Context(), db, Options{Client: client, Title: "boss", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })

	exp.Reset()
	c.Send(context.Background(), message.User("squeeze"), false)
	idle(t, c)
	st := treeOf(t, exp)
	turn := st.one("invoke_agent boss") // one turn: the compact, and the stream after it
	k := st.one("execute_tool compact")
	if !isChild(k, turn) || k.Status.Code != codes.Unset {
		t.Errorf("compact: parent %q, status %v", st.parent(k), k.Status)
	}
	st.wantAttrs(k, map[string]any{"gen_ai.tool.name": "compact", "gen_ai.tool.call.id": "k1"})
	var compacted bool
	for _, sp := range st.named("thread.commit") {
		switch {
		case attrOf(sp, "loom.thread.op") == "compact":
			compacted = isChild(sp, k)
		case !isChild(sp, turn):
			t.Errorf("a commit's parent %q", st.parent(sp))
		}
	}
	if !compacted || len(st.named("chat")) != 2 {
		t.Errorf("the compact commit is not the call's, or not 2 streams:\n\t%s", st.names())
	}

	exp.Reset()
	c.Send(context.Background(), message.User("delegate"), false)
	idle(t, c)
	eventually(t, "the sub-agent's spans", func() bool {
		return len(exp.GetSpans()) > 0 && len(treeOf(t, exp).named("execute_tool yield_to_parent")) == 1
	})
	st = treeOf(t, exp)
	turn = st.one("invoke_agent boss")
	spawn, wait := st.one("execute_tool spawn_subagent"), st.one("execute_tool wait_for_subagents")
	if !isChild(spawn, turn) || !isChild(wait, turn) {
		t.Errorf("spans:\n\t%s", st.names())
	}
	sub := st.one("invoke_agent researcher")
	if !isChild(sub, spawn) {
		t.Errorf("the sub-agent's turn's parent %q", st.parent(sub))
	}
	kid := attrOf(sub, "gen_ai.conversation.id")
	if kid == c.ID() || !isChild(st.one("execute_tool yield_to_parent"), sub) {
		t.Errorf("the sub-agent's turn: conversation %v; spans:\n\t%s", kid, st.names())
	}
	if create := st.one("thread.create"); !isChild(create, spawn) {
		t.Errorf("the sub-agent's thread's creation's parent %q", st.parent(create))
	}
	for _, ch := range st.named("chat") {
		if id := attrOf(ch, "gen_ai.conversation.id"); !isChild(ch, turn) && !(isChild(ch, sub) && id == kid) {
			t.Errorf("a chat of %v: parent %q", id, st.parent(ch))
		}
	}
}

// A call of a tool the conversation does not have gets no span, as in
// package agent: the name is the model's invention, and a span per
// invented name would let a model mint span names.
func TestInventedToolNamesMakeNoSpan(t *testing.T) {
	tp, exp, db := traced(t)
	client := scripted.New(
		scripted.Calls(message.FunctionCall{CallID: "c1", Name: "invented_by_the_model_42", Arguments: `{}`}),
		scripted.Step{Text: "Done."})
	c, err := New(t.Context(), db, Options{Client: client, Model: "m", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if err := c.Send(context.Background(), message.User("go"), false); err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	for _, sp := range exp.GetSpans() {
		if strings.Contains(sp.Name, "invented_by_the_model_42") {
			t.Errorf("a call of a tool the conversation does not have made the span %q", sp.Name)
		}
	}
}
