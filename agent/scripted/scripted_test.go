package scripted_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
)

func TestReplaysInOrderAndRecords(t *testing.T) {
	ctx := t.Context()
	c := scripted.New(
		scripted.Text("one"),
		scripted.Step{Calls: []message.FunctionCall{{CallID: "c", Name: "f", Arguments: "{}"}}, ConversationID: "auto", Usage: message.Usage{InputTokens: 3}},
	)
	in := []message.Message{message.User("hi")}
	r1, err := c.Response(ctx, in, &agent.ChatOptions{Model: "m", Instructions: "be"})
	if err != nil || r1.Text() != "one" || r1.FinishReason != agent.FinishStop || r1.ConversationID != "" {
		t.Fatalf("first: %+v %v", r1, err)
	}
	in[0].Contents[0] = message.Text{Text: "changed"} // the record is a copy
	r2, err := c.Response(ctx, in, nil)
	if err != nil || len(r2.Calls()) != 1 || r2.FinishReason != agent.FinishToolCalls || r2.ConversationID != r2.ResponseID || r2.ResponseID != "resp_2" || r2.Usage.InputTokens != 3 {
		t.Fatalf("second: %+v %v", r2, err)
	}
	if _, err := c.Response(ctx, in, nil); !errors.Is(err, scripted.ErrExhausted) {
		t.Fatalf("past the end: %v", err)
	}
	reqs := c.Requests()
	if len(reqs) != 3 || reqs[0].Messages[0].Text() != "hi" || reqs[0].Options.Model != "m" || reqs[0].Stream {
		t.Fatalf("requests %+v", reqs)
	}
	if !strings.Contains(reqs[1].Transcript(), "user: changed") {
		t.Fatalf("transcript %q", reqs[1].Transcript())
	}
}

func TestRepeat(t *testing.T) {
	c := scripted.New(scripted.Text("a"), scripted.Text("b"))
	c.Repeat = true
	var got []string
	for range 5 {
		r, err := c.Response(t.Context(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Text())
	}
	if strings.Join(got, "") != "ababa" {
		t.Fatalf("%v", got)
	}
}

func TestStreamChunksThenResponseOrError(t *testing.T) {
	boom := errors.New("boom")
	c := scripted.New(scripted.Text("héllo wörld"), scripted.Step{Text: "part", Err: boom})
	c.ChunkSize = 3
	var text []string
	var final *agent.ChatResponse
	for u, err := range c.Stream(t.Context(), nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Response != nil {
			final = u.Response
		} else {
			text = append(text, u.Text)
		}
	}
	if strings.Join(text, "|") != "hél|lo |wör|ld" || final == nil || final.Text() != "héllo wörld" {
		t.Fatalf("chunks %q final %+v", text, final)
	}
	var err error
	n := 0
	for u, e := range c.Stream(t.Context(), nil, nil) {
		if e != nil {
			err = e
			break
		}
		if u.Response != nil {
			t.Fatal("a failing step yielded a response")
		}
		n++
	}
	if !errors.Is(err, boom) || n != 2 {
		t.Fatalf("err %v after %d chunks", err, n)
	}
}

func TestDelayRespectsContext(t *testing.T) {
	c := scripted.New(scripted.Step{Text: "late", Delay: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer cancel()
	if _, err := c.Response(ctx, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestFuncStep(t *testing.T) {
	c := scripted.New(scripted.Step{Func: func(_ context.Context, r scripted.Request) (*agent.ChatResponse, error) {
		return &agent.ChatResponse{Messages: []message.Message{message.Assistant("echo: " + r.Messages[0].Text())}}, nil
	}})
	r, err := c.Response(t.Context(), []message.Message{message.User("x")}, nil)
	if err != nil || r.Text() != "echo: x" {
		t.Fatalf("%+v %v", r, err)
	}
}

// A gated step streams an update per value of its gate, and ends after
// one more; ChunkDelay paces a stream.
func TestGateAndChunkDelay(t *testing.T) {
	gate := make(chan struct{})
	c := scripted.New(scripted.Step{Text: "abcdefgh", Gate: gate}, scripted.Step{Text: "xy", ChunkDelay: 30 * time.Millisecond})
	c.ChunkSize = 4
	got := make(chan string, 10)
	go func() {
		for u, err := range c.Stream(t.Context(), nil, nil) {
			if err != nil {
				got <- "error " + err.Error()
				return
			}
			if u.Response != nil {
				got <- "end"
				return
			}
			got <- u.Text
		}
	}()
	for _, want := range []string{"abcd", "efgh", "end"} {
		select {
		case g := <-got:
			t.Fatalf("%q before the gate opened", g)
		case <-time.After(20 * time.Millisecond):
		}
		gate <- struct{}{}
		if g := <-got; g != want {
			t.Fatalf("got %q, want %q", g, want)
		}
	}
	start := time.Now()
	for range c.Stream(t.Context(), nil, nil) {
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("a paced stream of one chunk took %v, want two delays", d)
	}
}
