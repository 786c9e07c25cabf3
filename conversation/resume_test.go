package conversation

import (
	"context"
	"encoding/json"
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
	"github.com/loomthreads/loom/thread"

	_ "github.com/loomthreads/loom/sqlite"
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
		if err := c.Send("say it"); err != nil {
			t.Fatal(err)
		}
		idle(t, c)
		g.add(textScript("half an ", "answer"))
		if err := c.Continue(); err != nil {
			t.Fatal(err)
		}
	}
	if spec.Case != "continue" {
		if err := c.Send("where was I?"); err != nil {
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
			defer c.Close()
			if tc.stop {
				idle(t, c)
				if st := c.Agent().Status(); st != (Status{Kind: Stopped, Reason: Interrupted}) || len(client.Requests()) != 0 {
					t.Fatalf("opened with StopInterrupted: %s, %d requests", st, len(client.Requests()))
				}
				if got := savedTexts(t, db, "cv"); !slices.Equal(got, tc.before) {
					t.Fatalf("opened with StopInterrupted, the thread holds %q", got)
				}
				if err := c.Continue(); err != nil {
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
	if err := c.Send("where was I?"); err != nil {
		t.Fatal(err)
	}
	g.release(1)
	eventually(t, "half an answer streams", func() bool { return c.Agent().Partial() == "half an " })
	c.Suspend()
	c.Close() // after Suspend, it aborts and commits nothing
	client := scripted.New(scripted.Text("again"))
	c, err = Open(t.Context(), db, "streaming", Options{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	idle(t, c)
	c.Close()
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
	if err := c.Send("go"); err != nil {
		t.Fatal(err)
	}
	<-started
	c.Suspend()
	if got := savedTexts(t, db, "tools"); len(got) != 2 {
		t.Fatalf("after Suspend the thread holds %q", got)
	}
	fast := agent.MustFunc("slow", "Quick now.", func(context.Context, struct{}) (string, error) { return "done", nil })
	c, err = Open(t.Context(), db, "tools", Options{Client: scripted.New(scripted.Text("all done")), Tools: []agent.Tool{fast}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	if err := c.Send("go"); err != nil {
		t.Fatal(err)
	}
	<-started
	var wg sync.WaitGroup
	wg.Go(c.Suspend)
	wg.Go(c.Suspend)
	wg.Go(func() { c.Close() })
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
