package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// StatusKind is what an Agent is doing.
type StatusKind string

// The agent's statuses.
const (
	Streaming StatusKind = "streaming"
	Stopped   StatusKind = "stopped"
	Errored   StatusKind = "error"
)

// StopReason says why an agent stopped.
type StopReason string

// The stop reasons; a provider's others are kept as it names them.
const (
	EndTurn   StopReason = "end_turn"
	ToolUse   StopReason = "tool_use"
	MaxTokens StopReason = "max_tokens"
	Aborted   StopReason = "aborted"
	// Interrupted is the stop of a turn that was in flight when the
	// conversation's process was killed or crashed, as Open finds it with
	// Options.StopInterrupted.
	Interrupted StopReason = "interrupted"
)

// Status is an agent's status: streaming, stopped for a reason, or failed
// with an error.
type Status struct {
	Kind   StatusKind `json:"kind"`
	Reason StopReason `json:"reason,omitzero"`
	Err    string     `json:"error,omitzero"`
}

// String writes s as loom chat shows it: "streaming", "stopped/end_turn",
// "error: …".
func (s Status) String() string {
	switch s.Kind {
	case Stopped:
		return "stopped/" + string(s.Reason)
	case Errored:
		return "error: " + s.Err
	}
	return string(s.Kind)
}

// Event is what an Agent tells its conversation, asynchronously:
// ContentUpdated, AgentStopped or AgentError.
type Event interface{ event() }

// ContentUpdated says the agent's messages or its streaming block changed.
type ContentUpdated struct{ Turn int }

// AgentStopped says the agent stopped, why, and the usage of the turn.
// Turn numbers the stream it ends (Agent.Turn).
type AgentStopped struct {
	Turn   int
	Reason StopReason
	Usage  message.Usage
}

// AgentError says the agent's stream failed.
type AgentError struct {
	Turn int
	Err  error
}

func (ContentUpdated) event() {}
func (AgentStopped) event()   {}
func (AgentError) event()     {}

// The results a tool call gets when it never ran.
const (
	resultAborted = "aborted by the user before the tool ran"
	resultForked  = "forked before the tool ran"
)

// ErrState is returned by a command that the agent's state forbids (a
// tool result when it is not stopped on tool use, or for a call it did
// not make; a message while it streams); it changes nothing.
var ErrState = fmt.Errorf("not now: %w", thread.ErrConflict)

// ErrNotSaved is returned (wrapped, with the cause) by a command whose
// commit failed, and is the Err of the error notice that tells of a stop
// that could not be saved. The conversation is then stopped with the
// status error, and its agent knows what the thread holds: the messages
// the commit did not save are dropped, and the next commit saves what
// comes next.
var ErrNotSaved = errors.New("not saved")

// Agent is the actor that streams from a model. Its conversation commands
// it synchronously — after a command returns, its state reflects it — and
// it tells the conversation what happens by events, through the dispatch
// function it was made with, never by calling into the conversation's
// state. It is safe for concurrent use.
type Agent struct {
	client   agent.ChatClient
	opts     *agent.ChatOptions
	dispatch func(Event)

	mu     sync.Mutex
	msgs   []message.Message
	status Status
	usage  message.Usage // of the last turn that ended well
	// The stream in flight: its message index in msgs (-1 until its first
	// block completes), the block being made, and how to stop it. gen
	// counts streams, so that an aborted one's late updates are dropped.
	asst    int
	partial *block
	cancel  context.CancelFunc
	turn    int
	done    chan struct{}

	// trc makes the spans of the agent's streams; nil makes none. Set
	// before the agent's first stream.
	trc *tracing
}

// block is a content block being streamed.
type block struct {
	text, reasoning bool
	content         []byte
	call            *message.FunctionCall
	index           int
}

// NewAgent returns an agent on client that knows msgs, stopped/end_turn.
func NewAgent(client agent.ChatClient, opts *agent.ChatOptions, msgs []message.Message, dispatch func(Event)) *Agent {
	if opts == nil {
		opts = &agent.ChatOptions{}
	}
	return &Agent{client: client, opts: opts, dispatch: dispatch, msgs: slices.Clone(msgs),
		status: Status{Kind: Stopped, Reason: EndTurn}, asst: -1}
}

// Turn returns the number of the agent's latest stream (0 before any).
func (a *Agent) Turn() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.turn
}

// Status returns the agent's status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

// Usage returns the usage of the last turn that ended well.
func (a *Agent) Usage() message.Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage
}

// Messages returns a copy of the messages the agent knows, the completed
// blocks of a streaming answer included.
func (a *Agent) Messages() []message.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.msgs)
}

// since returns a copy of the messages from the i-th on, and how many
// there are in all.
func (a *Agent) since(i int) ([]message.Message, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i = min(i, len(a.msgs))
	return slices.Clone(a.msgs[i:]), len(a.msgs)
}

// Partial returns the text of the block being streamed, if any.
func (a *Agent) Partial() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.partial == nil {
		return ""
	}
	return string(a.partial.content)
}

// AppendUserMessage adds a message from the user. While the agent streams,
// or with calls of its last answer unanswered, it is ErrState.
func (a *Agent) AppendUserMessage(m message.Message) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status.Kind == Streaming {
		return fmt.Errorf("append a message while streaming: %w", ErrState)
	}
	if open := a.openCalls(); len(open) > 0 {
		return fmt.Errorf("append a message with %d tool calls unanswered: %w", len(open), ErrState)
	}
	a.msgs = append(a.msgs, m)
	return nil
}

// openCalls returns the calls of the last assistant message that have no
// result after it. Callers hold mu.
func (a *Agent) openCalls() []message.FunctionCall {
	last := -1
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].Role == message.RoleAssistant {
			last = i
			break
		}
	}
	if last < 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range a.msgs[last+1:] {
		for _, r := range m.Results() {
			answered[r.CallID] = true
		}
	}
	var open []message.FunctionCall
	for _, c := range a.msgs[last].Calls() {
		if !answered[c.CallID] {
			open = append(open, c)
		}
	}
	return open
}

// OpenCalls returns the calls of the last answer that have no result.
func (a *Agent) OpenCalls() []message.FunctionCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.openCalls()
}

// ToolResult answers the call id of the last answer. When the agent is not
// stopped on tool use, or id is not an unanswered call of its last answer,
// it is ErrState and changes nothing.
func (a *Agent) ToolResult(id string, result message.FunctionResult) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status.Kind != Stopped || a.status.Reason != ToolUse {
		return fmt.Errorf("tool result for %q while %s: %w", id, a.status, ErrState)
	}
	if !slices.ContainsFunc(a.openCalls(), func(c message.FunctionCall) bool { return c.CallID == id }) {
		return fmt.Errorf("tool result for %q: no such unanswered call: %w", id, ErrState)
	}
	result.CallID = id
	a.msgs = append(a.msgs, message.New(message.RoleTool, result))
	return nil
}

// answer records the result of the open call id, whatever the status: the
// conversation's own record of its tools' results.
func (a *Agent) answer(id string, result message.FunctionResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.ContainsFunc(a.openCalls(), func(c message.FunctionCall) bool { return c.CallID == id }) {
		result.CallID = id
		a.msgs = append(a.msgs, message.New(message.RoleTool, result))
	}
}

// reset makes the agent know msgs, with status: the conversation's
// messages as its thread holds them after a commit failed. The agent is
// not streaming.
func (a *Agent) reset(msgs []message.Message, status Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.msgs, a.status, a.partial, a.asst = slices.Clone(msgs), status, nil, -1
}

// answerOpen answers every open call with an error result. Callers hold
// mu.
func (a *Agent) answerOpen(why string) {
	for _, c := range a.openCalls() {
		a.msgs = append(a.msgs, message.New(message.RoleTool, message.FunctionResult{CallID: c.CallID, Result: why, IsError: true}))
	}
}

// Truncate keeps the first n messages. While streaming it is ErrState.
func (a *Agent) Truncate(n int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status.Kind == Streaming {
		return fmt.Errorf("truncate while streaming: %w", ErrState)
	}
	if n < 0 || n > len(a.msgs) {
		return fmt.Errorf("truncate to %d of %d messages: %w", n, len(a.msgs), thread.ErrInvalid)
	}
	a.msgs = slices.Clip(a.msgs[:n])
	return nil
}

// Compact replaces the first n messages with replacements (a summary).
// While streaming it is ErrState.
func (a *Agent) Compact(n int, replacements []message.Message) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status.Kind == Streaming {
		return fmt.Errorf("compact while streaming: %w", ErrState)
	}
	if n < 0 || n > len(a.msgs) {
		return fmt.Errorf("compact %d of %d messages: %w", n, len(a.msgs), thread.ErrInvalid)
	}
	a.msgs = append(slices.Clone(replacements), a.msgs[n:]...)
	return nil
}

// Continue starts streaming the model's answer to the messages. Streaming
// already, or with calls unanswered, it is ErrState. The stream's span is a
// child of the span in ctx; ctx does not bound the stream, which outlives
// the call (Abort ends it).
func (a *Agent) Continue(ctx context.Context) error { return a.continueIn(context.WithoutCancel(ctx)) }

// continueIn is Continue with the stream's span a child of the span in
// parent, which must not end before the stream does (a context without
// cancellation, such as Conversation.ctx).
func (a *Agent) continueIn(parent context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status.Kind == Streaming {
		return fmt.Errorf("continue while streaming: %w", ErrState)
	}
	if open := a.openCalls(); len(open) > 0 {
		return fmt.Errorf("continue with %d tool calls unanswered: %w", len(open), ErrState)
	}
	ctx, cancel := context.WithCancel(parent)
	a.turn++
	a.status, a.asst, a.partial, a.cancel = Status{Kind: Streaming}, -1, nil, cancel
	done := make(chan struct{})
	a.done = done
	go a.stream(ctx, a.turn, slices.Clone(a.msgs), done)
	return nil
}

// Abort stops the stream in flight: the agent is stopped/aborted, the
// block being made is dropped, a call that completed (and so never ran)
// is answered "aborted by the user before the tool ran", and an
// AgentStopped(aborted) event follows. With nothing in flight it does
// nothing and tells nothing.
func (a *Agent) Abort() {
	a.mu.Lock()
	if a.status.Kind != Streaming {
		a.mu.Unlock()
		return
	}
	a.cancel()
	a.partial, a.asst = nil, -1
	a.status = Status{Kind: Stopped, Reason: Aborted}
	a.answerOpen(resultAborted)
	done, turn := a.done, a.turn
	a.mu.Unlock()
	<-done // the stream's goroutine sends nothing more
	a.dispatch(AgentStopped{Turn: turn, Reason: Aborted})
}

// stream runs one streamed request, applying its updates while it is the
// agent's current stream.
func (a *Agent) stream(ctx context.Context, turn int, msgs []message.Message, done chan struct{}) {
	defer close(done)
	ctx, span := a.startChat(ctx)
	// current reports whether this stream is still the agent's, not
	// aborted. Callers hold mu.
	current := func() bool { return a.turn == turn && a.status.Kind == Streaming }
	for u, err := range a.client.Stream(ctx, msgs, a.opts) {
		a.mu.Lock()
		if !current() {
			a.mu.Unlock()
			endChat(span, nil, true, nil)
			return
		}
		// The span ends before the event is sent: a conversation that
		// handled the event finds it ended.
		if err != nil {
			a.fail(err)
			a.mu.Unlock()
			endChat(span, nil, false, err)
			a.dispatch(AgentError{Turn: turn, Err: err})
			return
		}
		if u.Response != nil {
			reason := a.finish(u.Response)
			usage := a.usage
			a.mu.Unlock()
			endChat(span, u.Response, false, nil)
			a.dispatch(AgentStopped{Turn: turn, Reason: reason, Usage: usage})
			return
		}
		changed := a.apply(u)
		a.mu.Unlock()
		if changed {
			a.dispatch(ContentUpdated{Turn: turn})
		}
	}
	// A stream that ends without its response failed.
	a.mu.Lock()
	if !current() {
		a.mu.Unlock()
		endChat(span, nil, true, nil)
		return
	}
	err := errors.New("the stream ended without a response")
	a.fail(err)
	a.mu.Unlock()
	endChat(span, nil, false, err)
	a.dispatch(AgentError{Turn: turn, Err: err})
}

// apply applies one delta. It reports whether anything a viewer sees
// changed. Callers hold mu.
func (a *Agent) apply(u agent.Update) bool {
	switch {
	case u.Text != "":
		if a.partial == nil || !a.partial.text {
			a.complete()
			a.partial = &block{text: true}
		}
		a.partial.content = append(a.partial.content, u.Text...)
		return true
	case u.Reasoning != "":
		if a.partial == nil || !a.partial.reasoning {
			a.complete()
			a.partial = &block{reasoning: true}
		}
		a.partial.content = append(a.partial.content, u.Reasoning...)
		return true
	case u.Call != nil:
		if a.partial == nil || a.partial.call == nil || a.partial.index != u.Call.Index {
			a.complete()
			a.partial = &block{call: &message.FunctionCall{CallID: u.Call.CallID, Name: u.Call.Name}, index: u.Call.Index}
		}
		a.partial.call.Arguments += u.Call.Arguments
		return true
	}
	return false
}

// complete moves the block being made into the answer, creating the
// answer's message with its first completed block. Callers hold mu.
func (a *Agent) complete() {
	b := a.partial
	if b == nil {
		return
	}
	a.partial = nil
	var c message.Content
	switch {
	case b.call != nil:
		c = *b.call
	case b.reasoning:
		c = message.Reasoning{Text: string(b.content)}
	default:
		c = message.Text{Text: string(b.content)}
	}
	if a.asst < 0 {
		a.asst = len(a.msgs)
		a.msgs = append(a.msgs, message.New(message.RoleAssistant))
	}
	m := &a.msgs[a.asst]
	m.Contents = append(slices.Clip(m.Contents), c)
}

// finish ends a stream with its response: the answer is the response's
// message. Callers hold mu.
func (a *Agent) finish(r *agent.ChatResponse) StopReason {
	a.partial = nil
	var answer []message.Message
	for _, m := range r.Messages {
		if m.Role == message.RoleAssistant || len(answer) > 0 {
			answer = append(answer, m)
		}
	}
	if a.asst >= 0 {
		a.msgs = a.msgs[:a.asst]
	}
	a.msgs = append(a.msgs, answer...)
	a.asst = -1
	a.usage = r.Usage
	reason := stopReason(r)
	a.status = Status{Kind: Stopped, Reason: reason}
	return reason
}

func stopReason(r *agent.ChatResponse) StopReason {
	switch r.FinishReason {
	case agent.FinishToolCalls:
		return ToolUse
	case agent.FinishLength:
		return MaxTokens
	case agent.FinishStop, "":
		if len(r.Calls()) > 0 {
			return ToolUse
		}
		return EndTurn
	}
	return StopReason(r.FinishReason)
}

// fail ends a stream with an error: a call that completed is answered
// with the error, and the block being made is dropped. The usage of the
// last turn that ended well stays. Callers hold mu.
func (a *Agent) fail(err error) {
	a.partial = nil
	a.asst = -1
	a.status = Status{Kind: Errored, Err: err.Error()}
	a.answerOpen("the model's stream failed before the tool ran: " + err.Error())
}
