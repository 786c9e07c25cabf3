package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"

	_ "github.com/loomthreads/loom/sqlite"
)

// router answers each request by what it holds, so that a parent and its
// sub-agents can share one scripted client whatever order their requests
// come in.
func router(route func(ctx context.Context, last message.Message, all []message.Message) (*agent.ChatResponse, error)) *scripted.Client {
	c := scripted.New(scripted.Step{Func: func(ctx context.Context, r scripted.Request) (*agent.ChatResponse, error) {
		return route(ctx, r.Messages[len(r.Messages)-1], r.Messages)
	}})
	c.Repeat = true
	return c
}

func call(id, name string, args any) *agent.ChatResponse {
	b, _ := json.Marshal(args)
	return callsResp(message.FunctionCall{CallID: id, Name: name, Arguments: string(b)})
}

func resultOf(m message.Message) string {
	if rs := m.Results(); len(rs) > 0 {
		return rs[0].Result
	}
	return ""
}

// 10 and 11. Sub-agents: spawned on threads of their own, linked to the
// parent's; wait_for_subagents ends when each has yielded (its result),
// failed (its error) or been aborted.
func TestB10B11SubAgentsYieldFailAbort(t *testing.T) {
	spawned := make(chan string, 3)
	client := router(func(ctx context.Context, last message.Message, all []message.Message) (*agent.ChatResponse, error) {
		switch {
		case last.Text() == "start":
			m := message.New(message.RoleAssistant,
				message.FunctionCall{CallID: "s1", Name: ToolSpawn, Arguments: `{"prompt":"research A"}`},
				message.FunctionCall{CallID: "s2", Name: ToolSpawn, Arguments: `{"prompt":"research B"}`},
				message.FunctionCall{CallID: "s3", Name: ToolSpawn, Arguments: `{"prompt":"research C"}`})
			return &agent.ChatResponse{Messages: []message.Message{m}, FinishReason: agent.FinishToolCalls}, nil
		case last.Text() == "research A":
			return call("y1", ToolYield, map[string]string{"result": "A is fine"}), nil
		case last.Text() == "research B":
			return nil, errors.New("B's model is down")
		case last.Text() == "research C":
			<-ctx.Done() // until aborted
			return nil, ctx.Err()
		case strings.Contains(resultOf(last), `"id"`):
			var ids []string
			for _, m := range all[len(all)-3:] {
				var r struct{ ID string }
				json.Unmarshal([]byte(resultOf(m)), &r)
				ids = append(ids, r.ID)
				spawned <- r.ID
			}
			return call("w1", ToolWaitSubs, map[string]any{"ids": ids}), nil
		case resultOf(last) != "":
			return textResp("children said " + resultOf(last)), nil
		}
		return nil, fmt.Errorf("unexpected request ending %q", last.Text())
	})
	c, rec := newConv(t, client)
	c.Send(context.Background(), message.User("start"), false)
	ids := []string{<-spawned, <-spawned, <-spawned}
	kids := c.Children()
	if len(kids) != 3 {
		t.Fatalf("%d children", len(kids))
	}
	for _, k := range kids {
		if k.Thread().Record().ForkedFrom.Thread != c.ID() || k.Thread().Record().Labels[LabelParent] != c.ID() {
			t.Fatalf("child %s not linked: %+v", k.ID(), k.Thread().Record())
		}
	}
	// C streams until aborted.
	eventually(t, "C streaming", func() bool {
		return kids[2].Agent().Status().Kind == Streaming || kidsByID(kids)[ids[2]].Agent().Status().Kind == Streaming
	})
	kidsByID(kids)[ids[2]].Abort(context.Background())
	idle(t, c)
	got := texts(c.Agent().Messages())
	last := got[len(got)-1]
	var outcome map[string]any
	json.Unmarshal([]byte(strings.TrimPrefix(last, "assistant: children said ")), &outcome)
	a, _ := outcome[ids[0]].(map[string]any)
	b, _ := outcome[ids[1]].(map[string]any)
	if a["result"] != "A is fine" || !strings.Contains(fmt.Sprint(b["error"]), "B's model is down") || outcome[ids[2]] != "aborted" {
		t.Fatalf("outcomes %s", last)
	}
	// A yielded: control_flow/yield, stopped, not going on.
	ka := kidsByID(kids)[ids[0]]
	if m := ka.Mode(); m.Kind != ModeControlFlow || m.Op.Kind != OpYield || ka.Agent().Status().Kind != Stopped {
		t.Fatalf("the yielded child: %v, %v", m, ka.Agent().Status())
	}
	if !slices.Contains(rec.kinds(), "spawned") {
		t.Fatalf("notices %v", rec.kinds())
	}
}

func kidsByID(kids []*Conversation) map[string]*Conversation {
	m := map[string]*Conversation{}
	for _, k := range kids {
		m[k.ID()] = k
	}
	return m
}

// Aborting a parent aborts its children.
func TestB11AbortCascades(t *testing.T) {
	client := router(func(ctx context.Context, last message.Message, all []message.Message) (*agent.ChatResponse, error) {
		switch {
		case last.Text() == "start":
			return call("s1", ToolSpawn, map[string]string{"prompt": "work forever"}), nil
		case last.Text() == "work forever":
			<-ctx.Done()
			return nil, ctx.Err()
		case strings.Contains(resultOf(last), `"id"`):
			var r struct{ ID string }
			json.Unmarshal([]byte(resultOf(last)), &r)
			return call("w1", ToolWaitSubs, map[string]any{"ids": []string{r.ID}}), nil
		}
		return textResp("over"), nil
	})
	c, _ := newConv(t, client)
	c.Send(context.Background(), message.User("start"), false)
	eventually(t, "the parent waiting", func() bool {
		m := c.Mode()
		return m.Kind == ModeToolUse && slices.Contains(slices.Collect(mapsValues(m.ActiveTools)), ToolWaitSubs)
	})
	kids := c.Children()
	eventually(t, "the child streaming", func() bool { return kids[0].Agent().Status().Kind == Streaming })
	c.Abort(context.Background())
	if st := kids[0].Agent().Status(); st.Reason != Aborted {
		t.Fatalf("child after the parent's abort: %v", st)
	}
	if c.Mode().Kind != ModeNormal || c.Agent().Status().Kind == Streaming {
		t.Fatalf("parent after abort: %v %v", c.Mode(), c.Agent().Status())
	}
}

func mapsValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// 12. Every stop is committed: a conversation resumes after a restart in
// the mode of its last stop — here a process killed while its tool ran,
// whose tool runs again in the next one.
func TestB12ResumeAfterAKill(t *testing.T) {
	if os.Getenv("LOOM_CONV_CHILD") != "" {
		child(t)
		return
	}
	url := "sqlite://" + filepath.Join(t.TempDir(), "conv.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestB12ResumeAfterAKill$", "-test.v")
	cmd.Env = append(os.Environ(), "LOOM_CONV_CHILD="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got string
	for !strings.Contains(got, "in the tool ") {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatalf("child: %v: %s", err, got)
		}
		got += string(buf[:n])
	}
	id := strings.Fields(got[strings.Index(got, "in the tool ")+len("in the tool "):])[0]
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	db, err := thread.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ran := make(chan struct{}, 1)
	lookup := mustTool(t, "lookup", func(ctx context.Context, in struct{}) (string, error) {
		ran <- struct{}{}
		return "found it", nil
	})
	c, err := Open(t.Context(), db, id, Options{Client: scripted.New(scripted.Text("Here it is.")), Tools: []agent.Tool{lookup}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool did not run again after the restart")
	}
	idle(t, c)
	want := []string{"user: look it up", "assistant:  call lookup({})", "tool:  result found it", "assistant: Here it is."}
	if got := texts(c.Agent().Messages()); !slices.Equal(got, want) {
		t.Fatalf("resumed: %q", got)
	}
	if got := threadTexts(t, c); !slices.Equal(got, want) {
		t.Fatalf("thread: %q", got)
	}
	// And once more: a conversation that stopped at the end of its turn
	// resumes stopped, in normal mode.
	c.Close(context.Background())
	again, err := Open(t.Context(), db, id, Options{Client: scripted.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	if again.Mode().Kind != ModeNormal || again.Agent().Status() != (Status{Kind: Stopped, Reason: EndTurn}) || len(again.Agent().Messages()) != 4 {
		t.Fatalf("reopened: %v %v %d", again.Mode(), again.Agent().Status(), len(again.Agent().Messages()))
	}
}

func child(t *testing.T) {
	db, err := thread.Open(context.Background(), os.Getenv("LOOM_CONV_CHILD"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	lookup := mustTool(t, "lookup", func(ctx context.Context, in struct{}) (string, error) {
		fmt.Printf("in the tool %s\n", id)
		select {} // killed here
	})
	c, err := New(context.Background(), db, Options{Client: scripted.New(scripted.Calls(message.FunctionCall{CallID: "l1", Name: "lookup", Arguments: "{}"})), Tools: []agent.Tool{lookup}})
	if err != nil {
		t.Fatal(err)
	}
	id = c.ID()
	c.Send(context.Background(), message.User("look it up"), false)
	select {}
}

// 13. Abort is safe in every (status, mode) pair: afterwards nothing
// streams, no tool runs, every call has a result, the thread holds the
// stop, and a second abort changes nothing.
func TestB13AbortTable(t *testing.T) {
	statuses := []Status{{Kind: Streaming}, {Kind: Stopped, Reason: EndTurn}, {Kind: Stopped, Reason: ToolUse}, {Kind: Stopped, Reason: Aborted}, {Kind: Stopped, Reason: MaxTokens}, {Kind: Errored, Err: "boom"}}
	modes := []Mode{{Kind: ModeNormal}, {Kind: ModeToolUse, ActiveTools: map[string]string{"c1": "block"}},
		{Kind: ModeControlFlow, Op: &ControlFlowOp{Kind: OpCompact, CallID: "c1", Summary: "s"}},
		{Kind: ModeControlFlow, Op: &ControlFlowOp{Kind: OpFork, CallID: "c1", NextPrompt: "p"}},
		{Kind: ModeControlFlow, Op: &ControlFlowOp{Kind: OpYield, CallID: "c1", Response: "r"}}}
	for _, st := range statuses {
		for _, mode := range modes {
			t.Run(st.String()+"/"+mode.String(), func(t *testing.T) {
				g := newGated()
				block := mustTool(t, "block", func(ctx context.Context, in struct{}) (string, error) {
					<-ctx.Done()
					return "", ctx.Err()
				})
				c, _ := newConv(t, g, block)
				// A history to stand on: a question and a call.
				c.do(func() error {
					c.agent.msgs = []message.Message{message.User("q"),
						message.New(message.RoleAssistant, message.FunctionCall{CallID: "c1", Name: "block", Arguments: "{}"})}
					if st.Reason != ToolUse && mode.Kind != ModeToolUse && mode.Kind != ModeControlFlow {
						c.agent.msgs = append(c.agent.msgs, message.ToolResult("c1", "done"))
					}
					c.commitStop(context.Background())
					return nil
				})
				if st.Kind == Streaming {
					g.add(textScript("never ", "ends"))
					c.do(func() error {
						c.agent.mu.Lock()
						c.agent.answerOpen("answered to stream")
						c.agent.mu.Unlock()
						return c.agent.Continue(context.Background())
					})
					g.release(1)
					eventually(t, "streaming", func() bool { return c.Agent().Partial() != "" })
				} else {
					c.do(func() error {
						c.agent.mu.Lock()
						c.agent.status = st
						c.agent.mu.Unlock()
						return nil
					})
				}
				c.do(func() error {
					if mode.Kind == ModeToolUse && c.agent.Status().Kind != Streaming {
						c.setMode(mode)
						c.runTools(mode)
					} else if c.agent.Status().Kind != Streaming {
						c.setMode(mode)
					}
					return nil
				})
				c.Abort(context.Background())
				if s := c.Agent().Status(); s.Kind == Streaming {
					t.Fatalf("still streaming: %v", s)
				}
				m := c.Mode()
				if m.Kind == ModeToolUse || m.Kind == ModeControlFlow && m.Op.Kind != OpYield {
					t.Fatalf("mode after abort: %v", m)
				}
				if open := c.Agent().OpenCalls(); len(open) > 0 && !(m.Kind == ModeControlFlow && m.Op.Kind == OpYield) {
					t.Fatalf("calls without results after abort: %v", open)
				}
				msgs := c.Agent().Messages()
				if got := threadTexts(t, c); !slices.Equal(got, texts(msgs)) {
					t.Fatalf("thread %q\nagent %q", got, texts(msgs))
				}
				v := c.Thread().Version()
				c.Abort(context.Background())
				if c.Thread().Version() != v || len(c.Agent().Messages()) != len(msgs) {
					t.Fatal("a second abort changed something")
				}
			})
		}
	}
}
