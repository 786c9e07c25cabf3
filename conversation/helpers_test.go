package conversation

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// gated is a chat client whose streams hand out their updates only when
// the test says so (release), so that a test can act in the middle of a
// stream. Each request takes the next script; a script's updates end
// with its Response (or Err).
type gated struct {
	mu      sync.Mutex
	scripts []gatedScript
	gate    chan struct{}
	reqs    [][]message.Message
}

type gatedScript struct {
	updates []agent.Update
	resp    *agent.ChatResponse
	err     error
}

func newGated() *gated { return &gated{gate: make(chan struct{}, 100)} }

func (g *gated) add(s gatedScript) { g.mu.Lock(); g.scripts = append(g.scripts, s); g.mu.Unlock() }

// release lets n updates (or the end) of streams through.
func (g *gated) release(n int) {
	for range n {
		g.gate <- struct{}{}
	}
}

func (g *gated) Capabilities() agent.Capabilities {
	return agent.Capabilities{Streaming: true, Tools: true}
}

func (g *gated) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	return nil, errors.New("gated streams only")
}

func (g *gated) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		g.mu.Lock()
		g.reqs = append(g.reqs, msgs)
		if len(g.scripts) == 0 {
			g.mu.Unlock()
			yield(agent.Update{}, errors.New("gated: no script"))
			return
		}
		s := g.scripts[0]
		g.scripts = g.scripts[1:]
		g.mu.Unlock()
		wait := func() bool {
			select {
			case <-g.gate:
				return true
			case <-ctx.Done():
				yield(agent.Update{}, ctx.Err())
				return false
			}
		}
		for _, u := range s.updates {
			if !wait() || !yield(u, nil) {
				return
			}
		}
		if !wait() {
			return
		}
		if s.err != nil {
			yield(agent.Update{}, s.err)
			return
		}
		yield(agent.Update{Response: s.resp}, nil)
	}
}

func (g *gated) requests() [][]message.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]message.Message(nil), g.reqs...)
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

// textScript streams s in pieces, then answers it.
func textScript(parts ...string) gatedScript {
	var us []agent.Update
	all := ""
	for _, p := range parts {
		us = append(us, agent.Update{Text: p})
		all += p
	}
	return gatedScript{updates: us, resp: textResp(all)}
}

func callScript(calls ...message.FunctionCall) gatedScript {
	var us []agent.Update
	for i, c := range calls {
		us = append(us, agent.Update{Call: &agent.CallDelta{Index: i, CallID: c.CallID, Name: c.Name, Arguments: c.Arguments}})
	}
	return gatedScript{updates: us, resp: callsResp(calls...)}
}

func memDB(t testing.TB) *thread.DB {
	t.Helper()
	return thread.New(thread.NewMemoryStore(), nil)
}

// eventually waits for cond, up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
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
