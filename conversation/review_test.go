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
)

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
	c.Send("compact")
	idle(t, c)
	got := texts(c.Agent().Messages())
	if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "compact failed") }) || got[len(got)-1] != "assistant: sorry, no summary" {
		t.Fatalf("%q", got)
	}
	if err := c.Send("and now?"); errors.Is(err, ErrState) {
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
	c.Send("first")
	if err := c.Send("@async queued one"); err != nil {
		t.Fatal(err)
	}
	g.release(4) // each stream: its chunk, then its end
	idle(t, c)
	want := []string{"user: Summary of the conversation so far:\nshort", "user: queued one", "assistant: after the summary"}
	if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
		t.Fatalf("after the compaction: %q", got)
	}
	g.add(textScript("never ", "finished"))
	c.Send("second")
	g.release(1)
	eventually(t, "streaming", func() bool { return c.Agent().Partial() != "" })
	c.Send("@async queued two")
	c.Abort()
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
	c.Send("start")
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
	c.Close()
	if err := kids[0].Continue(); err == nil || !strings.Contains(err.Error(), "closed") {
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
	defer c.Close()
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
	c.Send("start")
	idle(t, c)
	kids := c.Children()
	if len(kids) != 1 {
		t.Fatalf("%d children", len(kids))
	}
	c.Close()
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
	defer again.Close()
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
