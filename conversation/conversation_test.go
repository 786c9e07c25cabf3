package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func newConv(t *testing.T, client agent.ChatClient, tools ...agent.Tool) (*Conversation, *recorder) {
	t.Helper()
	rec := &recorder{}
	c, err := New(t.Context(), memDB(t), Options{Client: client, Tools: tools, Notify: rec.notify, Title: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, rec
}

// 1. A new agent is stopped/end_turn with no assistant message; the
// assistant message is made when its first block completes.
func TestB01AssistantMessageOnFirstCompletedBlock(t *testing.T) {
	g := newGated()
	c, _ := newConv(t, g)
	a := c.Agent()
	if st := a.Status(); st != (Status{Kind: Stopped, Reason: EndTurn}) || len(a.Messages()) != 0 {
		t.Fatalf("new: %v, %d messages", st, len(a.Messages()))
	}
	call := message.FunctionCall{CallID: "c1", Name: "nothing", Arguments: "{}"}
	g.add(scripted.Step{Chunks: []agent.Update{{Text: "Hel"}, {Text: "lo"}, {Call: &agent.CallDelta{CallID: "c1", Name: "nothing", Arguments: "{}"}}},
		Messages: []message.Message{message.New(message.RoleAssistant, message.Text{Text: "Hello"}, call)}, Finish: agent.FinishToolCalls})
	g.add(textScript("done"))
	if err := c.Send(context.Background(), message.User("hi"), false); err != nil {
		t.Fatal(err)
	}
	if a.Status().Kind != Streaming {
		t.Fatalf("after send: %v", a.Status())
	}
	g.release(2)
	eventually(t, "the partial text", func() bool { return a.Partial() == "Hello" })
	if got := texts(a.Messages()); !slices.Equal(got, []string{"user: hi"}) {
		t.Fatalf("while the first block streams: %q", got)
	}
	g.release(1) // the call starts: the text block completes
	eventually(t, "the assistant message", func() bool { return len(a.Messages()) == 2 })
	if got := a.Messages()[1]; got.Role != message.RoleAssistant || got.Text() != "Hello" || len(got.Calls()) != 0 {
		t.Fatalf("the assistant message after its first block: %q", texts([]message.Message{got}))
	}
	g.release(10)
	idle(t, c)
}

// 2. A tool result is refused unless the agent is stopped on tool use and
// the id is an open call of its last answer; nothing changes.
func TestB02ToolResultRefused(t *testing.T) {
	events := make(chan Event, 10)
	a := NewAgent(scripted.New(scripted.Calls(message.FunctionCall{CallID: "c1", Name: "f", Arguments: "{}"})), nil,
		[]message.Message{message.User("hi")}, func(e Event) { events <- e })
	if err := a.ToolResult("c1", message.FunctionResult{Result: "x"}); !errors.Is(err, ErrState) {
		t.Fatalf("a result while stopped/end_turn: %v", err)
	}
	if err := a.Continue(context.Background()); err != nil {
		t.Fatal(err)
	}
	for e := range events {
		if s, ok := e.(AgentStopped); ok && s.Reason == ToolUse {
			break
		}
	}
	before := a.Messages()
	for _, id := range []string{"c2", ""} {
		if err := a.ToolResult(id, message.FunctionResult{Result: "x"}); !errors.Is(err, ErrState) {
			t.Fatalf("a result for %q: %v", id, err)
		}
	}
	if err := a.AppendUserMessage(message.User("more")); !errors.Is(err, ErrState) {
		t.Fatalf("a message with a call open: %v", err)
	}
	if err := a.Continue(context.Background()); !errors.Is(err, ErrState) {
		t.Fatalf("continue with a call open: %v", err)
	}
	if !slices.EqualFunc(before, a.Messages(), func(x, y message.Message) bool { return x.ID == y.ID && x.Text() == y.Text() }) || len(a.Messages()) != 2 {
		t.Fatalf("refused commands changed the messages: %q", texts(a.Messages()))
	}
	if err := a.ToolResult("c1", message.FunctionResult{Result: "ok"}); err != nil {
		t.Fatal(err)
	}
	if err := a.ToolResult("c1", message.FunctionResult{Result: "again"}); !errors.Is(err, ErrState) {
		t.Fatalf("a second result for c1: %v", err)
	}
}

// 3. Abort with nothing in flight does nothing and tells nothing.
func TestB03AbortIdle(t *testing.T) {
	c, rec := newConv(t, scripted.New(scripted.Text("hello")))
	if err := c.Send(context.Background(), message.User("hi"), false); err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	v, n, notices := c.Thread().Version(), len(c.Agent().Messages()), len(rec.kinds())
	c.Abort(context.Background())
	c.Agent().Abort()
	idle(t, c) // anything the aborts queued is handled by now
	if c.Thread().Version() != v || len(c.Agent().Messages()) != n || len(rec.kinds()) != notices || c.Agent().Status().Reason != EndTurn {
		t.Fatalf("an idle abort changed something: version %d→%d, %v", v, c.Thread().Version(), rec.kinds()[notices:])
	}
}

// 4. Abort while streaming: stopped/aborted with an event, the partial
// block dropped, a completed call answered "aborted by the user before the
// tool ran".
func TestB04AbortWhileStreaming(t *testing.T) {
	g := newGated()
	c, rec := newConv(t, g)
	g.add(scripted.Step{Chunks: []agent.Update{{Text: "Let me look."}, {Call: &agent.CallDelta{CallID: "c1", Name: "search", Arguments: `{"q":"x"}`}}, {Text: "and then"}}, Text: "never answered"})
	if err := c.Send(context.Background(), message.User("find x"), false); err != nil {
		t.Fatal(err)
	}
	g.release(3)
	a := c.Agent()
	eventually(t, "the partial block", func() bool { return a.Partial() == "and then" })
	c.Abort(context.Background())
	if st := a.Status(); st != (Status{Kind: Stopped, Reason: Aborted}) || a.Partial() != "" {
		t.Fatalf("after abort: %v, partial %q", st, a.Partial())
	}
	want := []string{"user: find x", "assistant: Let me look. call search({\"q\":\"x\"})", "tool:  result " + resultAborted}
	if got := texts(a.Messages()); !slices.Equal(got, want) {
		t.Fatalf("messages %q\nwant %q", got, want)
	}
	if got := threadTexts(t, c); !slices.Equal(got, want) {
		t.Fatalf("thread %q", got)
	}
	eventually(t, "the stopped notice", func() bool { return slices.Contains(rec.kinds(), "stopped") })
	// The event came too (handled once).
	if n := strings.Count(strings.Join(rec.kinds(), ","), "stopped"); n != 1 {
		t.Fatalf("%d stopped notices: %v", n, rec.kinds())
	}
}

// 5. A stream error: status error with an event; a completed call gets a
// result naming the error; the last good turn's usage stays.
func TestB05StreamError(t *testing.T) {
	g := newGated()
	c, rec := newConv(t, g)
	g.add(textScript("first answer"))
	if err := c.Send(context.Background(), message.User("one"), false); err != nil {
		t.Fatal(err)
	}
	g.release(2)
	idle(t, c)
	usage := c.Agent().Usage()
	g.add(scripted.Step{Chunks: []agent.Update{{Call: &agent.CallDelta{CallID: "c9", Name: "f", Arguments: "{}"}}, {Text: "half"}}, Err: errors.New("connection reset")})
	if err := c.Send(context.Background(), message.User("two"), false); err != nil {
		t.Fatal(err)
	}
	g.release(3)
	eventually(t, "the error", func() bool { return c.Agent().Status().Kind == Errored })
	if st := c.Agent().Status(); st.Err != "connection reset" {
		t.Fatalf("status %v", st)
	}
	if c.Agent().Usage() != usage || usage.TotalTokens == 0 {
		t.Fatalf("usage %+v, want the last good turn's %+v", c.Agent().Usage(), usage)
	}
	got := texts(c.Agent().Messages())
	if last := got[len(got)-1]; !strings.Contains(last, "connection reset") || !strings.HasPrefix(last, "tool:") {
		t.Fatalf("messages %q", got)
	}
	eventually(t, "the error notice", func() bool { return slices.Contains(rec.kinds(), "error") })
	if got := threadTexts(t, c); len(got) != 5 || !strings.Contains(got[4], "connection reset") {
		t.Fatalf("thread %q", got)
	}
}

// 6. A message while busy aborts and sends, unless queued: then it waits
// for the turn's end, and goes with the tool results or after the answer.
func TestB06SendWhileBusy(t *testing.T) {
	t.Run("aborts", func(t *testing.T) {
		g := newGated()
		c, _ := newConv(t, g)
		g.add(textScript("a long ", "answer"))
		g.add(textScript("ok"))
		c.Send(context.Background(), message.User("first"), false)
		g.release(1)
		eventually(t, "streaming", func() bool { return c.Agent().Partial() != "" })
		if err := c.Send(context.Background(), message.User("never mind"), false); err != nil {
			t.Fatal(err)
		}
		g.release(10)
		idle(t, c)
		want := []string{"user: first", "user: never mind", "assistant: ok"}
		if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
			t.Fatalf("%q", got)
		}
	})
	t.Run("queued after the answer", func(t *testing.T) {
		g := newGated()
		c, _ := newConv(t, g)
		g.add(textScript("one ", "two"))
		g.add(textScript("noted"))
		c.Send(context.Background(), message.User("first"), false)
		g.release(1)
		if err := c.Send(context.Background(), message.User("and also this"), true); err != nil {
			t.Fatal(err)
		}
		g.release(10)
		idle(t, c)
		want := []string{"user: first", "assistant: one two", "user: and also this", "assistant: noted"}
		if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
			t.Fatalf("%q", got)
		}
	})
	t.Run("queued with the tool results", func(t *testing.T) {
		release := make(chan struct{})
		slow := mustTool(t, "slow", func(ctx context.Context, in struct{}) (string, error) {
			<-release
			return "slow done", nil
		})
		c, _ := newConv(t, scripted.New(scripted.Calls(message.FunctionCall{CallID: "c1", Name: "slow", Arguments: "{}"}), scripted.Text("both seen")), slow)
		c.Send(context.Background(), message.User("go"), false)
		eventually(t, "the tool running", func() bool { return c.Mode().Kind == ModeToolUse })
		if err := c.Send(context.Background(), message.User("while you wait"), true); err != nil {
			t.Fatal(err)
		}
		close(release)
		idle(t, c)
		want := []string{"user: go", "assistant:  call slow({})", "tool:  result slow done", "user: while you wait", "assistant: both seen"}
		if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
			t.Fatalf("%q", got)
		}
	})
}

func mustTool[In any](t *testing.T, name string, fn func(context.Context, In) (string, error)) agent.Tool {
	t.Helper()
	tool, err := agent.NewFunc(name, "a test tool", fn)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// 7. Every tool asked for runs; all done, the results go back and the
// conversation goes on; if one was aborted, the results are recorded and
// it does not go on.
func TestB07ToolUse(t *testing.T) {
	var ran atomic.Int32
	add := mustTool(t, "add", func(ctx context.Context, in struct{ A, B int }) (string, error) {
		ran.Add(1)
		return fmt.Sprint(in.A + in.B), nil
	})
	c, _ := newConv(t, scripted.New(scripted.Calls(
		message.FunctionCall{CallID: "c1", Name: "add", Arguments: `{"A":1,"B":2}`},
		message.FunctionCall{CallID: "c2", Name: "add", Arguments: `{"A":3,"B":4}`},
		message.FunctionCall{CallID: "c3", Name: "nosuch", Arguments: `{}`},
	), scripted.Text("3 and 7")), add)
	c.Send(context.Background(), message.User("sums"), false)
	idle(t, c)
	got := texts(c.Agent().Messages())
	if ran.Load() != 2 || got[len(got)-1] != "assistant: 3 and 7" || !slices.Contains(got, "tool:  result 3") || !slices.Contains(got, "tool:  result 7") ||
		!slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, `no tool "nosuch"`) }) {
		t.Fatalf("%q", got)
	}

	// An aborted tool: its result is recorded, and nothing goes on.
	started := make(chan struct{})
	block := mustTool(t, "block", func(ctx context.Context, in struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	quick := mustTool(t, "quick", func(ctx context.Context, in struct{}) (string, error) { return "quick done", nil })
	sc := scripted.New(scripted.Calls(message.FunctionCall{CallID: "b1", Name: "block", Arguments: "{}"}, message.FunctionCall{CallID: "q1", Name: "quick", Arguments: "{}"}),
		scripted.Text("should not be asked"))
	c2, _ := newConv(t, sc, block, quick)
	c2.Send(context.Background(), message.User("go"), false)
	<-started
	eventually(t, "quick's result", func() bool {
		var n int
		c2.do(func() error {
			if r := c2.tools_; r != nil {
				r.mu.Lock()
				n = len(r.results)
				r.mu.Unlock()
			}
			return nil
		})
		return n == 1
	})
	c2.Abort(context.Background())
	idle(t, c2)
	got = texts(c2.Agent().Messages())
	if sc.Remaining() != 1 || c2.Mode().Kind != ModeNormal || !slices.Contains(got, "tool:  result quick done") ||
		!slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "aborted by the user while the tool ran") }) {
		t.Fatalf("after aborting a tool: %q, %d scripted answers left", got, sc.Remaining())
	}
	if tt := threadTexts(t, c2); !slices.Equal(tt, got) {
		t.Fatalf("thread %q\nwant %q", tt, got)
	}
}

// 8. compact: asked by the agent (or the user with @compact), the
// conversation is replaced by a summary — a compact commit, the originals
// still in the history — and goes on with the next prompt, if any.
func TestB08Compact(t *testing.T) {
	sc := scripted.New(scripted.Text("Paris is nice."),
		scripted.Calls(message.FunctionCall{CallID: "k1", Name: ToolCompact, Arguments: `{"summary":"We talked about Paris.","next_prompt":"Now Rome?"}`}),
		scripted.Text("Rome too."))
	c, rec := newConv(t, sc)
	c.Send(context.Background(), message.User("Tell me about Paris"), false)
	idle(t, c)
	c.Send(context.Background(), message.User("compact please"), false)
	idle(t, c)
	want := []string{"user: Summary of the conversation so far:\nWe talked about Paris.", "user: Now Rome?", "assistant: Rome too."}
	if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
		t.Fatalf("agent %q", got)
	}
	if got := threadTexts(t, c); !slices.Equal(got, want) {
		t.Fatalf("thread view %q", got)
	}
	all, _ := c.Thread().Messages(t.Context(), thread.ReadOptions{})
	if got := texts(all); !slices.Contains(got, "assistant: Paris is nice.") {
		t.Fatalf("the originals are gone from the thread: %q", got)
	}
	if !slices.Contains(rec.kinds(), "compacted") || c.Mode().Kind != ModeNormal {
		t.Fatalf("notices %v, mode %v", rec.kinds(), c.Mode())
	}
	// The user asks with @compact and a prompt to go on with.
	sc.Add(scripted.Calls(message.FunctionCall{CallID: "k2", Name: ToolCompact, Arguments: `{"summary":"Paris, then Rome."}`}), scripted.Text("Madrid is next."))
	if err := c.Compact(context.Background(), "And Madrid?"); err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	want = []string{"user: Summary of the conversation so far:\nParis, then Rome.", "user: And Madrid?", "assistant: Madrid is next."}
	if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
		t.Fatalf("after @compact: %q", got)
	}
}

// 9. fork, in any state: a new conversation on a loom fork, whose open
// calls are answered "forked before the tool ran", stopped/end_turn with
// the prompt; the source goes on.
func TestB09Fork(t *testing.T) {
	g := newGated()
	release := make(chan struct{})
	slow := mustTool(t, "slow", func(ctx context.Context, in struct{}) (string, error) {
		select {
		case <-release:
			return "slow done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	c, _ := newConv(t, g, slow)
	g.add(callScript(message.FunctionCall{CallID: "c1", Name: "slow", Arguments: "{}"}))
	c.Send(context.Background(), message.User("start"), false)
	g.release(2)
	eventually(t, "the tool use", func() bool { return c.Mode().Kind == ModeToolUse })
	g.add(textScript("source goes on"))
	f, err := c.Fork(context.Background(), "try another way")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if st := f.Agent().Status(); st != (Status{Kind: Stopped, Reason: EndTurn}) || f.Thread().Record().ForkedFrom.Thread != c.ID() {
		t.Fatalf("fork: %v, from %+v", st, f.Thread().Record().ForkedFrom)
	}
	want := []string{"user: start", "assistant:  call slow({})", "tool:  result " + resultForked, "user: try another way"}
	if got := texts(f.Agent().Messages()); !slices.Equal(got, want) {
		t.Fatalf("fork %q", got)
	}
	if got := threadTexts(t, f); !slices.Equal(got, want) {
		t.Fatalf("fork's thread %q", got)
	}
	close(release)
	g.release(10)
	idle(t, c)
	if got := texts(c.Agent().Messages()); slices.Contains(got, "user: try another way") || got[len(got)-1] != "assistant: source goes on" {
		t.Fatalf("the source got the fork's prompt: %q", got)
	}

	// The agent asks for a fork: the source is answered with the fork's
	// thread and goes on.
	sc := scripted.New(scripted.Calls(message.FunctionCall{CallID: "f1", Name: ToolFork, Arguments: `{"prompt":"explore B"}`}), scripted.Text("back on A"))
	c2, rec := newConv(t, sc)
	c2.Send(context.Background(), message.User("do A"), false)
	idle(t, c2)
	got := texts(c2.Agent().Messages())
	if got[len(got)-1] != "assistant: back on A" || !strings.Contains(got[2], `{"thread":"`) {
		t.Fatalf("source %q", got)
	}
	var forked string
	rec.mu.Lock()
	for _, n := range rec.ns {
		if n.Kind == "forked" {
			forked = n.Thread
		}
	}
	rec.mu.Unlock()
	f2, err := Open(t.Context(), c2.db, forked, Options{Client: sc})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close(context.Background())
	if got := texts(f2.Agent().Messages()); got[len(got)-1] != "user: explore B" || got[len(got)-2] != "tool:  result "+resultForked {
		t.Fatalf("the agent's fork %q", got)
	}
}

// TestCloseKeepsACompleteAnswer closes a conversation the moment its agent
// shows the answer complete, before or after the loop has handled the
// stop, many times, half of them with a context that has ended: every time, the thread holds the answer, so that a
// conversation closed then (an idle server's sweep) does not ask the
// model again when opened.
func TestCloseKeepsACompleteAnswer(t *testing.T) {
	db := memDB(t)
	for i := range 200 {
		ctx := t.Context()
		c, err := New(ctx, db, Options{Client: scripted.Echo(), Title: "close"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctx, message.User(fmt.Sprint("n", i)), false); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the answer", func() bool { return c.Agent().Status().Kind == Stopped })
		// Every other round with a context that has ended: the answer
		// is kept all the same.
		closeCtx, cancel := context.WithCancel(ctx)
		if i%2 == 1 {
			cancel()
		}
		c.Close(closeCtx)
		cancel()
		th, err := db.Thread(ctx, c.ID())
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2 || msgs[1].Role != message.RoleAssistant {
			t.Fatalf("round %d: the thread holds %d messages after Close, want the question and its answer", i, len(msgs))
		}
	}
}
