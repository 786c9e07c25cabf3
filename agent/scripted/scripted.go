// Package scripted is a deterministic chat client that replays a script of
// responses and records the requests it was sent. Tests, examples and the
// demo server use it where a real model would need a key and the network.
//
//	client := scripted.New(
//		scripted.Calls(message.FunctionCall{CallID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`}),
//		scripted.Text("It is 21 °C in Paris."),
//	)
//	a := agent.New(client, &agent.Options{Tools: []agent.Tool{weather}})
//
// Each request takes the next step of the script; a request past its end is
// an error (ErrExhausted), unless the client repeats the script.
package scripted

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// ErrExhausted is returned by a request past the end of a script that does
// not repeat.
var ErrExhausted = errors.New("scripted: no steps left")

// Step is one scripted response.
type Step struct {
	// Messages are the response's messages. Text and Calls are shorthands
	// that append one assistant message.
	Messages []message.Message
	// Text, when not "", is an assistant message's text.
	Text string
	// Calls are function calls of the assistant message.
	Calls []message.FunctionCall
	// ConversationID is returned as the response's conversation id.
	// "auto" makes a fresh one per response ("resp_N"), as a service that
	// chains responses does.
	ConversationID string
	// ResponseID is the response's id; "" makes "resp_N".
	ResponseID string
	// Usage is the response's usage.
	Usage message.Usage
	// Finish is the finish reason; "" means tool_calls when there are
	// calls, stop otherwise.
	Finish agent.FinishReason
	// Err, when not nil, is returned instead of a response. With Chunks
	// or a streamed Text, a stream yields them first and then fails.
	Err error
	// Chunks are the updates a stream yields before the final one; nil
	// streams Text in pieces of ChunkSize runes and each call whole.
	Chunks []agent.Update
	// Delay is waited (or the context's end) before responding.
	Delay time.Duration
	// ChunkDelay is waited before each update of a stream, and before its
	// end, as a model takes its time.
	ChunkDelay time.Duration
	// Gate, when not nil, makes a stream take a value from it (or see the
	// context end) before each update and before its end: a test lets a
	// stream go on a step at a time, and acts in the middle of it.
	Gate <-chan struct{}
	// Func, when not nil, makes the response from the request instead of
	// the fields above.
	Func func(ctx context.Context, r Request) (*agent.ChatResponse, error)

	// pieces makes a stream of Func's response yield its text in pieces
	// of ChunkSize runes and each call whole, as a Text step's; without
	// it the text comes in one update (agent.StreamOf).
	pieces bool
}

// Text returns a step that answers with text.
func Text(s string) Step { return Step{Text: s} }

// Calls returns a step that calls tools.
func Calls(calls ...message.FunctionCall) Step { return Step{Calls: calls} }

// Fail returns a step that fails with err.
func Fail(err error) Step { return Step{Err: err} }

// Request is a request the client got.
type Request struct {
	// Messages are the messages sent, as the client got them.
	Messages []message.Message
	// Options are the options sent.
	Options agent.ChatOptions
	// Stream says whether the request was streamed.
	Stream bool
}

// Client replays a script. It is safe for concurrent use: concurrent
// requests take steps in the order they arrive.
type Client struct {
	// Caps are the capabilities the client reports. New sets Streaming
	// and Tools.
	Caps agent.Capabilities
	// Repeat makes the script start over at its end.
	Repeat bool
	// ChunkSize is how many runes of Text each streamed update carries; 0
	// means 4.
	ChunkSize int
	// Record, when false, keeps no requests (for benchmarks).
	Record bool

	mu    sync.Mutex
	steps []Step
	next  int
	n     int
	reqs  []Request
}

var _ agent.ChatClient = (*Client)(nil)

// New returns a client that replays steps in order and records requests.
func New(steps ...Step) *Client {
	return &Client{Caps: agent.Capabilities{Streaming: true, Tools: true}, Record: true, steps: steps}
}

// Add appends steps to the script.
func (c *Client) Add(steps ...Step) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, steps...)
}

// Requests returns the requests received so far, oldest first.
func (c *Client) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.reqs...)
}

// Remaining returns how many steps are left before the script's end.
func (c *Client) Remaining() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.steps) - c.next
}

// Capabilities returns c.Caps.
func (c *Client) Capabilities() agent.Capabilities { return c.Caps }

func (c *Client) take(msgs []message.Message, opts *agent.ChatOptions, stream bool) (Step, int, Request, error) {
	req := Request{Stream: stream}
	if opts != nil {
		req.Options = *opts.Clone()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Record {
		req.Messages = make([]message.Message, len(msgs))
		for i, m := range msgs {
			req.Messages[i] = m.Clone()
		}
		c.reqs = append(c.reqs, req)
	} else {
		req.Messages = msgs
	}
	if c.next >= len(c.steps) {
		if !c.Repeat || len(c.steps) == 0 {
			return Step{}, 0, req, ErrExhausted
		}
		c.next = 0
	}
	s := c.steps[c.next]
	c.next++
	c.n++
	return s, c.n, req, nil
}

// pace waits before a stream's next update: ChunkDelay, then a value of
// Gate.
func (s Step) pace(ctx context.Context) error {
	if err := wait(ctx, s.ChunkDelay); err != nil {
		return err
	}
	if s.Gate == nil {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.Gate:
		return nil
	}
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s Step) response(n int) *agent.ChatResponse {
	r := &agent.ChatResponse{
		ConversationID: s.ConversationID,
		ResponseID:     s.ResponseID,
		Model:          "scripted",
		Usage:          s.Usage,
		FinishReason:   s.Finish,
	}
	if r.ResponseID == "" {
		r.ResponseID = fmt.Sprintf("resp_%d", n)
	}
	if r.ConversationID == "auto" {
		r.ConversationID = r.ResponseID
	}
	for _, m := range s.Messages {
		r.Messages = append(r.Messages, m.Clone())
	}
	if s.Text != "" || len(s.Calls) > 0 {
		m := message.Message{Role: message.RoleAssistant}
		if s.Text != "" {
			m.Contents = append(m.Contents, message.Text{Text: s.Text})
		}
		for _, fc := range s.Calls {
			m.Contents = append(m.Contents, fc)
		}
		r.Messages = append(r.Messages, m)
	}
	if r.FinishReason == "" {
		r.FinishReason = agent.FinishStop
		if len(r.Calls()) > 0 {
			r.FinishReason = agent.FinishToolCalls
		}
	}
	return r
}

// Response returns the next step's response.
func (c *Client) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	s, n, req, err := c.take(msgs, opts, false)
	if err != nil {
		return nil, err
	}
	if err := wait(ctx, s.Delay); err != nil {
		return nil, err
	}
	if s.Func != nil {
		return s.Func(ctx, req)
	}
	if s.Err != nil {
		return nil, s.Err
	}
	return s.response(n), nil
}

// Stream streams the next step's response: its Chunks (or its text in
// pieces and each call whole), then the whole response, or Err after the
// chunks.
func (c *Client) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		s, n, req, err := c.take(msgs, opts, true)
		if err != nil {
			yield(agent.Update{}, err)
			return
		}
		if err := wait(ctx, s.Delay); err != nil {
			yield(agent.Update{}, err)
			return
		}
		if s.Func != nil {
			r, err := s.Func(ctx, req)
			if err != nil {
				yield(agent.Update{}, err)
				return
			}
			if s.pieces && r != nil {
				for _, u := range c.piecesOf(r.Text(), r.Calls(), r.Usage) {
					if err := s.pace(ctx); err != nil {
						yield(agent.Update{}, err)
						return
					}
					if !yield(u, nil) {
						return
					}
				}
				yield(agent.Update{Response: r}, nil)
				return
			}
			for u := range agent.StreamOf(r, nil) {
				if !yield(u, nil) {
					return
				}
			}
			return
		}
		chunks := s.Chunks
		if chunks == nil {
			chunks = c.chunks(s)
		}
		for _, u := range chunks {
			if err := s.pace(ctx); err != nil {
				yield(agent.Update{}, err)
				return
			}
			if !yield(u, nil) {
				return
			}
		}
		if err := s.pace(ctx); err != nil {
			yield(agent.Update{}, err)
			return
		}
		if s.Err != nil {
			yield(agent.Update{}, s.Err)
			return
		}
		yield(agent.Update{Response: s.response(n)}, nil)
	}
}

func (c *Client) chunks(s Step) []agent.Update {
	return c.piecesOf(s.Text, s.Calls, s.Usage)
}

// piecesOf are the updates of a stream of text, calls and usage: the text
// in pieces of ChunkSize runes, each call whole, then the usage if any.
func (c *Client) piecesOf(text string, calls []message.FunctionCall, usage message.Usage) []agent.Update {
	size := c.ChunkSize
	if size <= 0 {
		size = 4
	}
	var us []agent.Update
	for t := text; t != ""; {
		i, runes := 0, 0
		for i < len(t) && runes < size {
			_, w := utf8.DecodeRuneInString(t[i:])
			i += w
			runes++
		}
		us = append(us, agent.Update{Text: t[:i]})
		t = t[i:]
	}
	for i, fc := range calls {
		us = append(us, agent.Update{Call: &agent.CallDelta{Index: i, CallID: fc.CallID, Name: fc.Name, Arguments: fc.Arguments}})
	}
	if usage != (message.Usage{}) {
		u := usage
		us = append(us, agent.Update{Usage: &u})
	}
	return us
}

// Transcript returns the text of every message of a request, one line each,
// as "role: text" — handy in tests and examples.
func (r Request) Transcript() string {
	var b strings.Builder
	for _, m := range r.Messages {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Text())
	}
	return b.String()
}
