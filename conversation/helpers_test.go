package conversation

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// gated is the scripted client with a gate on every step: its streams
// hand out their updates only when the test says so (release), so that a
// test can act in the middle of a stream.
type gated struct {
	*scripted.Client
	gate chan struct{}
}

func newGated() *gated {
	return &gated{Client: scripted.New(), gate: make(chan struct{}, 100)}
}

// add adds a step of the script, gated.
func (g *gated) add(s scripted.Step) {
	s.Gate = g.gate
	g.Client.Add(s)
}

// release lets n updates (or ends) of streams through.
func (g *gated) release(n int) {
	for range n {
		g.gate <- struct{}{}
	}
}

func textResp(s string) *agent.ChatResponse {
	return &agent.ChatResponse{Messages: []message.Message{message.Assistant(s)}, FinishReason: agent.FinishStop,
		Usage: message.Usage{InputTokens: 10, OutputTokens: int64(len(s)), TotalTokens: 10 + int64(len(s))}}
}

func callsResp(calls ...message.FunctionCall) *agent.ChatResponse {
	m := message.New(message.RoleAssistant)
	for _, c := range calls {
		m.Contents = append(m.Contents, c)
	}
	return &agent.ChatResponse{Messages: []message.Message{m}, FinishReason: agent.FinishToolCalls}
}

// textScript streams parts, then answers their text.
func textScript(parts ...string) scripted.Step {
	var us []agent.Update
	for _, p := range parts {
		us = append(us, agent.Update{Text: p})
	}
	return scripted.Step{Chunks: us, Text: strings.Join(parts, ""), Usage: message.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}
}

// callScript streams calls, then answers them.
func callScript(calls ...message.FunctionCall) scripted.Step {
	var us []agent.Update
	for i, c := range calls {
		us = append(us, agent.Update{Call: &agent.CallDelta{Index: i, CallID: c.CallID, Name: c.Name, Arguments: c.Arguments}})
	}
	return scripted.Step{Chunks: us, Calls: calls}
}

func memDB(t testing.TB) *thread.DB {
	t.Helper()
	return thread.New(thread.NewMemoryStore(), nil)
}

// eventually waits for cond, up to 10 s. It calls t.Fatalf: only from
// the test's goroutine.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, cond)
}

func idle(t testing.TB, c *Conversation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("wait: %v", err)
	}
}

func texts(msgs []message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ": " + m.Text()
		for _, c := range m.Calls() {
			out[i] += " call " + c.Name + "(" + c.Arguments + ")"
		}
		for _, r := range m.Results() {
			out[i] += " result " + r.Result
		}
	}
	return out
}

func threadTexts(t testing.TB, c *Conversation) []string {
	t.Helper()
	th, err := c.db.Thread(t.Context(), c.ID())
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := load(t.Context(), th)
	if err != nil {
		t.Fatal(err)
	}
	return texts(msgs)
}

// recorder collects notices.
type recorder struct {
	mu sync.Mutex
	ns []Notice
}

func (r *recorder) notify(n Notice) { r.mu.Lock(); r.ns = append(r.ns, n); r.mu.Unlock() }

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.ns {
		if n.Kind != "content" {
			out = append(out, n.Kind)
		}
	}
	return out
}
