package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/proctest"
	"github.com/loomthreads/loom/message"
	_ "github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
)

const envKilled = "LOOM_CONVERSATION_KILLED"

// killedSpec tells TestKilledMidTurnChild where, and in which turn, to
// kill itself.
type killedSpec struct {
	Store string
	// Case is send (the user's message), tool (the stream after a tool
	// round) or continue (a Continue after an answer).
	Case string
}

// noteTool counts its calls.
func noteTool(calls *atomic.Int32) agent.Tool {
	return agent.MustFunc("note", "Write a note down.", func(context.Context, struct{}) (string, error) {
		calls.Add(1)
		return "noted", nil
	})
}

// TestKilledMidTurnChild is a conversation killed (SIGKILL, by itself) in
// the middle of a streaming answer, when the test binary is run again by
// TestOpenResumesATurnInFlight; it skips otherwise.
func TestKilledMidTurnChild(t *testing.T) {
	raw := os.Getenv(envKilled)
	if raw == "" {
		t.Skip("runs only as a child of TestOpenResumesATurnInFlight")
	}
	var spec killedSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	db, err := thread.Open(context.Background(), spec.Store, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := newGated()
	var calls atomic.Int32
	c, err := New(context.Background(), db, Options{Client: g, ID: "cv", Tools: []agent.Tool{noteTool(&calls)}})
	if err != nil {
		t.Fatal(err)
	}
	switch spec.Case {
	case "send":
		g.add(textScript("half an ", "answer"))
	case "tool":
		g.add(callScript(message.FunctionCall{CallID: "n1", Name: "note", Arguments: `{}`}))
		g.release(2)
		g.add(textScript("half an ", "answer"))
	case "continue":
		g.add(textScript("a whole answer"))
		g.release(2)
		if err := c.Send(context.Background(), message.User("say it"), false); err != nil {
			t.Fatal(err)
		}
		idle(t, c)
		g.add(textScript("half an ", "answer"))
		if err := c.Continue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if spec.Case != "continue" {
		if err := c.Send(context.Background(), message.User("where was I?"), false); err != nil {
			t.Fatal(err)
		}
	}
	g.release(1)
	eventually(t, "half an answer streams", func() bool { return c.Agent().Partial() == "half an " })
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// A conversation killed in the middle of a turn resumes it: Open asks the
// model again (with what the thread holds: the user's message, the tool
// results), and the answer is saved; a tool that ended does not run again.
// With StopInterrupted it opens stopped/interrupted instead, asking
// nothing, and Continue asks.
func TestOpenResumesATurnInFlight(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stop       bool
		before     []string // what the thread holds after the kill
		lastAsked  string   // the last message of the request made again
		afterwards []string // after it is answered
	}{
		{name: "send", before: []string{"user: where was I?"}, lastAsked: "where was I?",
			afterwards: []string{"user: where was I?", "assistant: again"}},
		{name: "send", stop: true, before: []string{"user: where was I?"}, lastAsked: "where was I?",
			afterwards: []string{"user: where was I?", "assistant: again"}},
		{name: "tool", before: []string{"user: where was I?", "assistant:  call note({})", "tool:  result noted"}, lastAsked: "",
			afterwards: []string{"user: where was I?", "assistant:  call note({})", "tool:  result noted", "assistant: again"}},
		{name: "continue", before: []string{"user: say it", "assistant: a whole answer"}, lastAsked: "a whole answer",
			afterwards: []string{"user: say it", "assistant: a whole answer", "assistant: again"}},
	} {
		name := tc.name
		if tc.stop {
			name += "/stop"
		}
		t.Run(name, func(t *testing.T) {
			store := "sqlite://" + filepath.Join(t.TempDir(), "conv.db")
			spec, _ := json.Marshal(killedSpec{Store: store, Case: tc.name})
			proctest.Killed(t, "TestKilledMidTurnChild", envKilled, string(spec))

			db, err := thread.Open(t.Context(), store, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := savedTexts(t, db, "cv"); !slices.Equal(got, tc.before) {
				t.Fatalf("after the kill the thread holds %q, want %q", got, tc.before)
			}
			client := scripted.New(scripted.Text("again"))
			var calls atomic.Int32
			c, err := Open(t.Context(), db, "cv", Options{Client: client, Tools: []agent.Tool{noteTool(&calls)}, StopInterrupted: tc.stop})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if tc.stop {
				idle(t, c)
				if st := c.Agent().Status(); st != (Status{Kind: Stopped, Reason: Interrupted}) || len(client.Requests()) != 0 {
					t.Fatalf("opened with StopInterrupted: %s, %d requests", st, len(client.Requests()))
				}
				if got := savedTexts(t, db, "cv"); !slices.Equal(got, tc.before) {
					t.Fatalf("opened with StopInterrupted, the thread holds %q", got)
				}
				if err := c.Continue(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the turn is answered", func() bool {
				return c.Agent().Status() == Status{Kind: Stopped, Reason: EndTurn} && len(client.Requests()) == 1
			})
			idle(t, c)
			if got := savedTexts(t, db, "cv"); !slices.Equal(got, tc.afterwards) {
				t.Fatalf("saved %q, want %q", got, tc.afterwards)
			}
			asked := client.Requests()[0].Messages
			if tc.lastAsked != "" && asked[len(asked)-1].Text() != tc.lastAsked {
				t.Fatalf("asked again with %q", texts(asked))
			}
			if calls.Load() != 0 {
				t.Fatalf("the tool that ended ran again, %d times", calls.Load())
			}
		})
	}
}

// Suspend stops a conversation without aborting it: the turn in flight —
// a stream, or tools that run — is taken up by the next Open, as after a
// crash.
func TestSuspendLeavesTheTurnInFlight(t *testing.T) {
	db := memDB(t)
	g := newGated()
	g.add(textScript("half an ", "answer"))
	c, err := New(t.Context(), db, Options{Client: g, ID: "streaming"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(context.Background(), message.User("where was I?"), false); err != nil {
		t.Fatal(err)
	}
	g.release(1)
	eventually(t, "half an answer streams", func() bool { return c.Agent().Partial() == "half an " })
	c.Suspend(context.Background())
	c.Close(context.Background()) // after Suspend, it aborts and commits nothing
	client := scripted.New(scripted.Text("again"))
	c, err = Open(t.Context(), db, "streaming", Options{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	c.Close(context.Background())
	if got, want := savedTexts(t, db, "streaming"), []string{"user: where was I?", "assistant: again"}; !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}

	// Tools that run when it is suspended run again.
	started := make(chan struct{}, 1)
	slow := agent.MustFunc("slow", "Take your time.", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	})
	c, err = New(t.Context(), db, Options{Client: scripted.New(scripted.Calls(message.FunctionCall{CallID: "s1", Name: "slow", Arguments: `{}`})),
		ID: "tools", Tools: []agent.Tool{slow}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(context.Background(), message.User("go"), false); err != nil {
		t.Fatal(err)
	}
	<-started
	c.Suspend(context.Background())
	if got := savedTexts(t, db, "tools"); len(got) != 2 {
		t.Fatalf("after Suspend the thread holds %q", got)
	}
	fast := agent.MustFunc("slow", "Quick now.", func(context.Context, struct{}) (string, error) { return "done", nil })
	c, err = Open(t.Context(), db, "tools", Options{Client: scripted.New(scripted.Text("all done")), Tools: []agent.Tool{fast}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	idle(t, c)
	if got, want := savedTexts(t, db, "tools"), []string{"user: go", "assistant:  call slow({})", "tool:  result done", "assistant: all done"}; !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
}

// Suspend may be called more than once, and with Close, at the same time
// (a server that shuts down while a client closes the conversation): each
// returns once it is suspended, and what the ended loop owned — the turn's
// span, the tools — is put away once (run with -race).
func TestSuspendOverlapsSuspendAndClose(t *testing.T) {
	tp, exp, db := traced(t)
	started := make(chan struct{}, 1)
	slow := agent.MustFunc("slow", "Take your time.", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	})
	c, err := New(t.Context(), db, Options{Client: scripted.New(scripted.Calls(message.FunctionCall{CallID: "s1", Name: "slow", Arguments: `{}`})),
		ID: "overlap", Tools: []agent.Tool{slow}, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(context.Background(), message.User("go"), false); err != nil {
		t.Fatal(err)
	}
	<-started
	var wg sync.WaitGroup
	wg.Go(func() { c.Suspend(context.Background()) })
	wg.Go(func() { c.Suspend(context.Background()) })
	wg.Go(func() { c.Close(context.Background()) })
	wg.Wait()
	turns := 0
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, "invoke_agent") {
			turns++
		}
	}
	if turns != 1 {
		t.Fatalf("%d turn spans ended, want 1", turns)
	}
}

// A thread whose state holds a mode this package does not make, or no
// conversation state at all, is refused by Open, with no panic.
func TestOpenRefusesBadState(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	plain, _ := db.Create(ctx, thread.CreateOptions{ID: "plain"})
	plain.Append(ctx, message.User("hi"))
	if _, err := Open(ctx, db, "plain", Options{Client: scripted.New()}); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("a plain thread: %v", err)
	}
	for i, bad := range []map[string]string{
		{stateMode: `{"kind":"control_flow"}`},
		{stateMode: `{"kind":"control_flow","op":{"kind":"dance"}}`},
		{stateMode: `{"kind":"sleeping"}`},
		{stateMode: `7`},
		{stateMode: `{"kind":"normal"}`, stateQueued: `{"not":"messages"}`},
	} {
		th, _ := db.Create(ctx, thread.CreateOptions{})
		st := map[string]json.RawMessage{}
		for k, v := range bad {
			st[k] = json.RawMessage(v)
		}
		if _, err := th.SetState(ctx, st); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, db, th.ID(), Options{Client: scripted.New()}); !errors.Is(err, thread.ErrInvalid) {
			t.Fatalf("bad state %d: %v", i, err)
		}
	}
}

// A compact call the conversation cannot carry out (no summary) is
// answered with its error, and the model goes on (to try again).
func TestCompactFailureIsAnswered(t *testing.T) {
	c, _ := newConv(t, scripted.New(
		scripted.Calls(message.FunctionCall{CallID: "k1", Name: ToolCompact, Arguments: `{}`}),
		scripted.Text("sorry, no summary")))
	c.Send(context.Background(), message.User("compact"), false)
	idle(t, c)
	got := texts(c.Agent().Messages())
	if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "compact failed") }) || got[len(got)-1] != "assistant: sorry, no summary" {
		t.Fatalf("%q", got)
	}
	if err := c.Send(context.Background(), message.User("and now?"), false); errors.Is(err, ErrState) {
		t.Fatalf("stuck after a failed compact: %v", err)
	}
}

// A message queued while a turn that ends in a compaction runs is sent
// after it; one queued when the turn is aborted is kept, in order, for the
// next turn.
func TestQueuedAroundCompactAndAbort(t *testing.T) {
	g := newGated()
	c, _ := newConv(t, g)
	g.add(callScript(message.FunctionCall{CallID: "k1", Name: ToolCompact, Arguments: `{"summary":"short"}`}))
	g.add(textScript("after the summary"))
	c.Send(context.Background(), message.User("first"), false)
	if err := c.Send(context.Background(), message.User("queued one"), true); err != nil {
		t.Fatal(err)
	}
	g.release(4) // each stream: its chunk, then its end
	idle(t, c)
	want := []string{"user: Summary of the conversation so far:\nshort", "user: queued one", "assistant: after the summary"}
	if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
		t.Fatalf("after the compaction: %q", got)
	}
	g.add(textScript("never ", "finished"))
	c.Send(context.Background(), message.User("second"), false)
	g.release(1)
	eventually(t, "streaming", func() bool { return c.Agent().Partial() != "" })
	c.Send(context.Background(), message.User("queued two"), true)
	c.Abort(context.Background())
	got := texts(c.Agent().Messages())
	if got[len(got)-1] != "user: queued two" || got[len(got)-2] != "user: second" {
		t.Fatalf("after the abort: %q", got)
	}
}

// A sub-agent that stops for another reason than a tool (here the token
// limit) has finished: its parent's wait ends with its last answer.
func TestSubAgentStoppedByTheLimitFinishes(t *testing.T) {
	client := router(func(ctx context.Context, last message.Message, all []message.Message) (*agent.ChatResponse, error) {
		switch {
		case last.Text() == "start":
			return call("s1", ToolSpawn, map[string]string{"prompt": "write a lot"}), nil
		case last.Text() == "write a lot":
			return &agent.ChatResponse{Messages: []message.Message{message.Assistant("as much as fits")}, FinishReason: agent.FinishLength}, nil
		case strings.Contains(resultOf(last), `"id"`):
			var r struct{ ID string }
			json.Unmarshal([]byte(resultOf(last)), &r)
			return call("w1", ToolWaitSubs, map[string]any{"ids": []string{r.ID}}), nil
		}
		return textResp("got " + resultOf(last)), nil
	})
	c, rec := newConv(t, client)
	c.Send(context.Background(), message.User("start"), false)
	idle(t, c)
	got := texts(c.Agent().Messages())
	if last := got[len(got)-1]; !strings.Contains(last, "as much as fits") {
		t.Fatalf("%q", got)
	}
	// The child's notices name the child.
	rec.mu.Lock()
	ids := map[string]bool{}
	for _, n := range rec.ns {
		ids[n.Conversation] = true
	}
	rec.mu.Unlock()
	if len(ids) != 2 || !ids[c.ID()] {
		t.Fatalf("notices from %v", ids)
	}
	// Closing the parent closes the child.
	kids := c.Children()
	c.Close(context.Background())
	if err := kids[0].Continue(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("the child after its parent closed: %v", err)
	}
}

// A conversation read back in tool use with calls its mode does not name
// runs them all.
func TestResumedToolUseRunsEveryOpenCall(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	th, _ := db.Create(ctx, thread.CreateOptions{ID: "c", State: initialState()})
	th.Append(ctx, message.User("q"), message.New(message.RoleAssistant, message.FunctionCall{CallID: "x1", Name: "echo", Arguments: `{"S":"one"}`}))
	th.SetState(ctx, map[string]json.RawMessage{stateMode: json.RawMessage(`{"kind":"tool_use"}`), stateStatus: json.RawMessage(`{"kind":"stopped","reason":"tool_use"}`)})
	echo := mustTool(t, "echo", func(ctx context.Context, in struct{ S string }) (string, error) { return in.S, nil })
	c, err := Open(ctx, db, "c", Options{Client: scripted.New(scripted.Text("done")), Tools: []agent.Tool{echo}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	idle(t, c)
	if got := texts(c.Agent().Messages()); !slices.Equal(got, []string{"user: q", "assistant:  call echo({\"S\":\"one\"})", "tool:  result one", "assistant: done"}) {
		t.Fatalf("%q", got)
	}
}

// A conversation resumed in tool use runs its spawn_subagent call again,
// and takes up the sub-agent that call had made, rather than make another.
func TestResumedSpawnTakesUpItsChild(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	spawns := 0
	client := router(func(ctx context.Context, last message.Message, all []message.Message) (*agent.ChatResponse, error) {
		switch {
		case last.Text() == "start":
			spawns++
			return call("s1", ToolSpawn, map[string]string{"prompt": "research"}), nil
		case last.Text() == "research":
			return textResp("found it"), nil
		}
		return textResp("parent done"), nil
	})
	c, err := New(ctx, db, Options{Client: client, ID: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	c.Send(context.Background(), message.User("start"), false)
	idle(t, c)
	kids := c.Children()
	if len(kids) != 1 {
		t.Fatalf("%d children", len(kids))
	}
	c.Close(context.Background())
	// As if the process had stopped while the spawn ran: back to that stop.
	th, _ := db.Thread(ctx, "parent")
	var toolUse int64
	for e, err := range th.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		st, _ := th.State(ctx, e.Version)
		if strings.Contains(string(st[stateMode]), "tool_use") {
			toolUse = e.Version
			break
		}
	}
	if toolUse == 0 {
		t.Fatal("no stop in tool use")
	}
	if err := th.Restore(ctx, toolUse); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, db, "parent", Options{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	idle(t, again)
	n := 0
	for th, err := range db.Threads(ctx, thread.ListOptions{Labels: map[string]string{LabelParent: "parent"}}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		_ = th
	}
	if n != 1 || len(again.Children()) != 1 || again.Children()[0].ID() != kids[0].ID() {
		t.Fatalf("%d sub-agent threads after the resume", n)
	}
}
