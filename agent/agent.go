package agent

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/internal/genai"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Options configure an Agent. The zero value is an agent without
// instructions or tools that sends the whole thread.
type Options struct {
	// Name names the agent: it is the author of the messages it commits and
	// is recorded on its commits.
	Name string
	// Instructions are the system instructions of every request.
	Instructions string
	// Model names the model; "" means the client's default.
	Model string
	// Tools are the tools the model may call.
	Tools []Tool
	// Providers add context to every run, in this order.
	Providers []ContextProvider
	// Chat holds the other request settings (temperature, max tokens,
	// response format, metadata). The agent sets Model, Instructions,
	// Tools, ConversationID and Store itself.
	Chat ChatOptions
	// View cuts a local thread to what the model is sent: a token budget,
	// a message limit, strategies. The agent sets its Instructions. The
	// zero value sends the whole thread.
	View thread.ViewOptions
	// MaxRounds is the most tool rounds of a run; the request after the
	// last one asks the model to answer without tools. 0 means 16.
	MaxRounds int
	// MaxConcurrency is the most tool calls of one response that run at
	// once. 0 means 8.
	MaxConcurrency int
	// Logger logs what a run cannot return, such as a context provider's
	// failed Invoked hook. nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider, when not nil, gets a span for each run
	// ("invoke_agent <Name>"), each model request ("chat <model>") and
	// each tool call ("execute_tool <tool>"), with the attributes of the
	// OpenTelemetry GenAI semantic conventions (gen_ai.operation.name,
	// gen_ai.request.model, gen_ai.usage.input_tokens, gen_ai.tool.name, …).
	// A run's spans are children of the span in its context. nil means no
	// spans, at no cost; the global provider is not used.
	TracerProvider trace.TracerProvider
	// OnToolCall, when not nil, is told of each tool call the agent ran,
	// with its result and how long it took, for metrics such as
	// httpapi.Metrics.ObserveToolCall. It runs on the call's goroutine
	// and should return quickly.
	OnToolCall func(ctx context.Context, call message.FunctionCall, result message.FunctionResult, took time.Duration)
}

// Agent runs a chat client on threads. It is safe for concurrent use, and
// holds nothing per thread: everything a run needs is in the thread.
type Agent struct {
	client    ChatClient
	opts      Options
	tools     map[string]Tool
	specs     []ToolSpec
	providers []ContextProvider
	log       *slog.Logger
	err       error
	// tracer makes the spans of Options.TracerProvider; nil makes none.
	tracer   trace.Tracer
	provider string // gen_ai.provider.name
}

// New returns an agent that runs client with opts (nil means the zero
// Options). A configuration error, such as two tools with one name, is
// returned by every run.
func New(client ChatClient, opts *Options) *Agent {
	a := &Agent{client: client}
	if opts != nil {
		a.opts = *opts
	}
	if a.opts.MaxRounds <= 0 {
		a.opts.MaxRounds = 16
	}
	if a.opts.MaxConcurrency <= 0 {
		a.opts.MaxConcurrency = 8
	}
	a.log = a.opts.Logger
	if a.log == nil {
		a.log = slog.Default()
	}
	if isNil(client) {
		a.err = fmt.Errorf("agent: no chat client: %w", thread.ErrInvalid)
	} else if a.opts.TracerProvider != nil {
		a.tracer = a.opts.TracerProvider.Tracer(tracerName)
		a.provider = genai.ProviderName(client)
	}
	a.tools = make(map[string]Tool, len(a.opts.Tools))
	for _, t := range a.opts.Tools {
		if err := addTool(a.tools, t); err != nil {
			a.err = err
		}
		if !isNil(t) {
			a.specs = append(a.specs, t.Spec())
		}
	}
	seen := make(map[string]bool)
	for _, p := range a.opts.Providers {
		if isNil(p) || !validProviderName(p.Name()) || seen[p.Name()] {
			a.err = fmt.Errorf("agent: context provider name %q: missing, repeated or not letters, digits, _, - and .: %w", nameOf(p), thread.ErrInvalid)
			continue
		}
		seen[p.Name()] = true
		a.providers = append(a.providers, p)
	}
	return a
}

// isNil reports whether v is nil or a nil pointer in an interface, whose
// methods would panic.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

func nameOf(p ContextProvider) string {
	if isNil(p) {
		return ""
	}
	return p.Name()
}

func validProviderName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func addTool(m map[string]Tool, t Tool) error {
	if isNil(t) {
		return fmt.Errorf("agent: nil tool: %w", thread.ErrInvalid)
	}
	name := t.Spec().Name
	if !toolName.MatchString(name) {
		return fmt.Errorf("agent: tool name %q: %w", name, thread.ErrInvalid)
	}
	if _, dup := m[name]; dup {
		return fmt.Errorf("agent: two tools named %q: %w", name, thread.ErrInvalid)
	}
	m[name] = t
	return nil
}

// Client returns the agent's chat client.
func (a *Agent) Client() ChatClient { return a.client }

// Request is one run's input.
type Request struct {
	// Input are the new messages, usually one user message. They may be
	// empty when the thread already ends with something to answer, or
	// when the run only decides approvals.
	Input []message.Message
	// Approvals decide the tool calls the thread waits for. A thread that
	// waits for approvals runs only with a decision for every pending
	// call (ErrApprovalRequired otherwise).
	Approvals []Approval
	// OnBusy says what happens when another run through the same
	// thread.DB is running on the thread. The zero value is Reject.
	OnBusy OnBusy
	// Metadata is recorded on each of the run's commits.
	Metadata map[string]string
}

// Approval decides one pending tool call.
type Approval struct {
	// CallID names the call.
	CallID string
	// Approved runs the call; false answers it with an error result that
	// says it was rejected, with Reason.
	Approved bool
	Reason   string
}

// PendingCall is a tool call that waits for approval.
type PendingCall struct {
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitzero"`
}

// Result is what a run did.
type Result struct {
	// RunID names the run; it is on every commit the run made.
	RunID string
	// Messages are the messages the run committed, oldest first, with
	// their ids: the input, the responses and the tool results.
	Messages []message.Message
	// Response is the last response of the model, nil if none came.
	Response *ChatResponse
	// Pending are the tool calls that wait for approval; the run stopped
	// for them.
	Pending []PendingCall
	// Usage adds up the usage of the run's responses.
	Usage message.Usage
	// Requests counts the model requests of the run.
	Requests int
	// Version is the thread's version after the run's last commit.
	Version int64
}

// Text returns the text of the run's last response.
func (r *Result) Text() string {
	if r == nil || r.Response == nil {
		return ""
	}
	return r.Response.Text()
}

// StepKind names what a committed step holds.
type StepKind string

// The steps of a run.
const (
	// StepInput holds the run's input.
	StepInput StepKind = "input"
	// StepApprovals holds the results of calls decided by approvals (and
	// the input given with them).
	StepApprovals StepKind = "approvals"
	// StepTools holds a response with tool calls and their results.
	StepTools StepKind = "tools"
	// StepAnswer holds the final response.
	StepAnswer StepKind = "answer"
	// StepState holds only state: the context providers' after a failed
	// run.
	StepState StepKind = "state"
)

// Step is a step of a run that was committed.
type Step struct {
	Kind StepKind
	// Messages are the step's messages, with their ids.
	Messages []message.Message
	// Commit is the commit's id and Version the thread's version after it.
	Commit  string
	Version int64
}

// Event is one item of a streamed run: a model update, a committed step,
// or, last, the result. One field is set.
type Event struct {
	Update *Update
	Step   *Step
	Result *Result
}

// Run runs the agent on th with input and returns when the run has ended.
// See Invoke.
func (a *Agent) Run(ctx context.Context, th *thread.Thread, input ...message.Message) (*Result, error) {
	return a.Invoke(ctx, th, Request{Input: input})
}

// RunStream is Run as a stream of events. See InvokeStream.
func (a *Agent) RunStream(ctx context.Context, th *thread.Thread, input ...message.Message) iter.Seq2[Event, error] {
	return a.InvokeStream(ctx, th, Request{Input: input})
}

// Invoke runs the agent on th:
//
//  1. It catches th up with the store and reads its state. A local or
//     undetermined thread is sent its view (Options.View); a service thread
//     is sent only what its service has not seen, with its conversation id.
//  2. The context providers' Invoking hooks run concurrently; their
//     instructions, messages and tools join the request in the providers'
//     order.
//  3. It calls the model, runs the tools it asks for (concurrently, up to
//     MaxConcurrency; SequentialTools one at a time) and calls it again,
//     for at most MaxRounds tool rounds.
//  4. Each step is committed as it completes: the input, then each response
//     with its tool calls together with all their results, then the answer.
//     A cancelled run (or an interrupted one) commits what completed, with
//     an error result for each call that did not finish; a failed request
//     commits nothing of its own. So the thread is valid for the next run
//     whatever happens.
//  5. The first response determines an undetermined thread: service-managed
//     when it carries a conversation id, local otherwise.
//  6. The providers' Invoked hooks see the outcome; their new state is
//     committed with the last step.
//
// Tools that need approval stop the run with the calls in Result.Pending,
// recorded in the thread; the next run decides them with
// Request.Approvals.
//
// Every commit is conditional on the version the run last wrote, so a
// writer in another process that moves the thread makes the run fail with
// thread.ErrConflict rather than interleave with it.
//
// On an error, Result is not nil once the run has started: its Messages
// are what was committed.
func (a *Agent) Invoke(ctx context.Context, th *thread.Thread, req Request) (*Result, error) {
	return a.invoke(ctx, th, req, nil)
}

// InvokeStream is Invoke as a stream: model updates as they arrive (when
// the client streams), each step once it is committed, and last the
// Result. A run that fails yields its error with the Result so far (nil if
// the run never started). A consumer that stops iterating cancels the run,
// which commits what completed.
//
// The run holds its thread while the consumer handles an event: starting
// another run on the same thread from the loop's body is rejected, or, with
// Queue, waits for ever.
func (a *Agent) InvokeStream(ctx context.Context, th *thread.Thread, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		stopped := false
		emit := func(e Event) bool {
			if !stopped && !yield(e, nil) {
				stopped = true
			}
			return !stopped
		}
		res, err := a.invoke(ctx, th, req, emit)
		if stopped {
			return
		}
		yield(Event{Result: res}, err)
	}
}
