package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func memDB(t testing.TB) *thread.DB {
	t.Helper()
	db, err := thread.Open(context.Background(), "memory://", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func serviceClient(steps ...scripted.Step) *scripted.Client {
	c := scripted.New(steps...)
	c.Caps.ServiceThreads = true
	c.Caps.Chaining = true
	return c
}

type weatherIn struct {
	City string `json:"city" jsonschema:"the city"`
}

func weatherTool(t testing.TB) *agent.FuncTool {
	t.Helper()
	tool, err := agent.NewFunc("weather", "Current weather of a city.", func(ctx context.Context, in weatherIn) (map[string]any, error) {
		if in.City == "Atlantis" {
			return nil, errors.New("no such city")
		}
		return map[string]any{"city": in.City, "temp_c": 21}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func call(id, name, args string) message.FunctionCall {
	return message.FunctionCall{CallID: id, Name: name, Arguments: args}
}

// messages returns the thread's messages at its head, refreshed.
func messages(t testing.TB, th *thread.Thread) []message.Message {
	t.Helper()
	if err := th.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(context.Background(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// transcript is "role:text|call name|result" per message, for comparing
// threads.
func transcript(msgs []message.Message) string {
	var parts []string
	for _, m := range msgs {
		s := string(m.Role) + ":" + m.Text()
		for _, c := range m.Calls() {
			s += "[call " + c.CallID + " " + c.Name + "]"
		}
		for _, r := range m.Results() {
			if r.IsError {
				s += "[error " + r.CallID + "]"
			} else {
				s += "[result " + r.CallID + " " + r.Result + "]"
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n")
}

// checkPaired fails unless every call in msgs has exactly one result after
// it and every result answers an earlier call (DESIGN invariant 6).
func checkPaired(t testing.TB, msgs []message.Message) {
	t.Helper()
	open := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.Calls() {
			open[c.CallID] = true
		}
		for _, r := range m.Results() {
			if !open[r.CallID] {
				t.Fatalf("result %s without a call before it:\n%s", r.CallID, transcript(msgs))
			}
			delete(open, r.CallID)
		}
	}
	if len(open) > 0 {
		t.Fatalf("calls without results %v:\n%s", open, transcript(msgs))
	}
}

// recorder is a context provider that records its hooks and counts runs in
// its state.
type recorder struct {
	name string
	mu   sync.Mutex
	log  []string
	ctx  *agent.Context
}

type counterState struct {
	Runs      int    `json:"runs"`
	ServiceID string `json:"service_id,omitempty"`
	Created   int    `json:"created,omitempty"`
	LastErr   string `json:"last_err,omitempty"`
}

func (p *recorder) Name() string { return p.name }

func (p *recorder) note(s string) {
	p.mu.Lock()
	p.log = append(p.log, s)
	p.mu.Unlock()
}

func (p *recorder) events() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func decodeState(raw json.RawMessage) counterState {
	var s counterState
	if raw != nil {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

func (p *recorder) ThreadCreated(_ context.Context, info agent.ThreadInfo, state json.RawMessage) (json.RawMessage, error) {
	p.note("created:" + string(info.Kind) + ":" + info.ServiceID)
	s := decodeState(state)
	s.Created++
	s.ServiceID = info.ServiceID
	return json.Marshal(s)
}

func (p *recorder) Invoking(_ context.Context, inv agent.Invocation) (*agent.Context, error) {
	p.note("invoking:" + string(inv.Thread.Kind))
	return p.ctx, nil
}

func (p *recorder) Invoked(_ context.Context, inv agent.Invoked) (json.RawMessage, error) {
	s := decodeState(inv.State)
	s.Runs++
	if inv.Err != nil {
		s.LastErr = inv.Err.Error()
		p.note("invoked:error")
	} else {
		p.note("invoked:" + inv.Response.Text())
	}
	return json.Marshal(s)
}

func providerState(t testing.TB, th *thread.Thread, name string) counterState {
	t.Helper()
	st, err := th.State(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return decodeState(st["ctx/"+name])
}
