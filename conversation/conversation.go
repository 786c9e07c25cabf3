package conversation

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ModeKind is the conversation's own state, apart from its agent's.
type ModeKind string

// The modes.
const (
	ModeNormal      ModeKind = "normal"
	ModeToolUse     ModeKind = "tool_use"
	ModeControlFlow ModeKind = "control_flow"
)

// The control flow operations.
const (
	OpCompact = "compact"
	OpFork    = "fork"
	OpYield   = "yield"
)

// Mode is the conversation's mode: normal (it follows its agent),
// tool_use (the tools the agent asked for run), or control_flow (a
// compact, fork or yield is under way).
type Mode struct {
	Kind ModeKind `json:"kind"`
	// ActiveTools are the calls that run, by call id, with the tool's name.
	ActiveTools map[string]string `json:"active_tools,omitzero"`
	Op          *ControlFlowOp    `json:"op,omitzero"`
}

// yielded reports whether m is a sub-agent's yield, which is for good.
func (m Mode) yielded() bool {
	return m.Kind == ModeControlFlow && m.Op != nil && m.Op.Kind == OpYield
}

// valid reports whether m is a mode this package makes.
func (m Mode) valid() bool {
	switch m.Kind {
	case ModeNormal, ModeToolUse:
		return m.Op == nil
	case ModeControlFlow:
		return m.Op != nil && (m.Op.Kind == OpCompact || m.Op.Kind == OpFork || m.Op.Kind == OpYield)
	}
	return false
}

// String writes m as loom chat shows it: "normal", "tool_use",
// "control_flow/fork".
func (m Mode) String() string {
	if m.Op != nil {
		return string(m.Kind) + "/" + m.Op.Kind
	}
	return string(m.Kind)
}

// ControlFlowOp is a compact, fork or yield under way.
type ControlFlowOp struct {
	Kind string `json:"kind"`
	// CallID is the call that asked for it; "" when the user did.
	CallID string `json:"call_id,omitzero"`
	// Summary replaces the conversation so far (compact).
	Summary string `json:"summary,omitzero"`
	// NextPrompt is sent after a compact, and starts a fork.
	NextPrompt string `json:"next_prompt,omitzero"`
	// Response is what a sub-agent yields to its parent.
	Response string `json:"response,omitzero"`
}

// Notice tells a front end that the conversation changed, on the
// conversation's event loop: it must not block, and must not call the
// conversation back.
type Notice struct {
	// Kind is content (the streaming answer grew), stopped, error, mode,
	// compacted, forked, spawned or yielded.
	Kind string
	// Conversation is the id of the conversation that changed: a
	// conversation's sub-agents tell the same Notify as it does.
	Conversation string
	// Thread is the thread a fork or a sub-agent got.
	Thread string
	// Partial is the text of the block being streamed (content).
	Partial string
	Err     error
}

// Options configure a Conversation. Client is required.
type Options struct {
	// Client is the model the agent streams from.
	Client agent.ChatClient
	// Model names the model; "" means the client's default.
	Model string
	// Instructions are the system instructions.
	Instructions string
	// Tools are the agent's tools, besides the conversation's own.
	Tools []agent.Tool
	// Notify is told of every change, on the event loop; nil tells none.
	Notify func(Notice)
	// Title names the threads of new conversations and sub-agents.
	Title string
	// ID names the thread New makes; "" means a fresh id.
	ID string
	// TracerProvider, when not nil, gets a span for each turn
	// ("invoke_agent" and the thread's title, or "conversation"), each
	// model stream ("chat <model>") and each tool call, the
	// conversation's own included ("execute_tool <tool>"), with the
	// attributes of the OpenTelemetry GenAI semantic conventions, as
	// package agent makes them; gen_ai.conversation.id is the thread's
	// id. A turn's streams and tool calls are children of its span, and so
	// are the thread operations it does when the DB traces too
	// (thread.Options.TracerProvider). A span of something the user
	// aborted has AttrAborted, and no error status. Sub-agents and forks
	// inherit it. nil means no spans, at no cost; the global provider is
	// not used.
	TracerProvider trace.TracerProvider
	// StopInterrupted makes Open leave a turn that was in flight when the
	// conversation last ran (its process was killed, or crashed, while the
	// model answered) stopped with the reason Interrupted: nothing is
	// asked until Continue or the next message. By default Open asks the
	// model again, as a workflow runs again a step that started and did
	// not end.
	StopInterrupted bool
}

// Conversation orchestrates an interactive session: it owns one Agent,
// which streams from a model, and a loom thread that keeps the session.
// It commands the agent synchronously and hears it through events, which
// it handles one at a time on its own event loop; its methods run there
// too. It is safe for concurrent use.
type Conversation struct {
	db     *thread.DB
	opts   Options
	tools  map[string]agent.Tool
	agent  *Agent
	parent *Conversation
	sub    bool

	// The event loop's queue.
	qmu       sync.Mutex
	queue     []func()
	wake      chan struct{}
	quit      chan struct{}
	closeOnce sync.Once
	ended     chan struct{}
	// suspendOnce puts away what the ended loop owned, once however many
	// Suspends overlap (see Suspend).
	suspendOnce sync.Once

	// Owned by the event loop.
	th        *thread.Thread
	mode      Mode
	queued    []message.Message
	committed int // how many of the agent's messages the thread holds
	handled   int // the agent's last turn whose stop was handled
	tools_    *toolRound
	children  map[string]*Conversation
	nextCmp   string        // the next prompt of a compact the user asked for
	turn      trace.Span    // the turn in flight, when tracing (see beginTurn)
	turnUsage message.Usage // of the turn in flight

	// trc makes the spans; nil makes none. name is the conversation's, in
	// its turns' spans.
	trc  *tracing
	name string

	// finished is closed when a sub-agent is done (yielded, failed,
	// aborted, or ended its turn), with outcome set.
	finished chan struct{}
	outcome  map[string]string

	vmu     sync.Mutex
	modeNow Mode // a copy of mode for readers
}

// toolRound is the tools of one answer, running.
type toolRound struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	aborted bool // set on the loop

	mu      sync.Mutex
	results map[string]message.FunctionResult
}

// New starts a conversation on a new thread of db.
func New(ctx context.Context, db *thread.DB, opts Options) (*Conversation, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("conversation: no client: %w", thread.ErrInvalid)
	}
	th, err := db.Create(ctx, thread.CreateOptions{ID: opts.ID, Kind: thread.KindLocal, Title: opts.Title, State: initialState()})
	if err != nil {
		return nil, err
	}
	return start(db, th, opts, nil, false, nil, Status{Kind: Stopped, Reason: EndTurn}, Mode{Kind: ModeNormal}, nil), nil
}

// Open resumes the conversation on the thread id, in the mode of its last
// stop: tools that were running when it stopped run again; a compact or
// fork that was under way is done again; a turn that was in flight (the
// user's message, or tool results, kept and the model's answer not) is
// asked of the model again — unless opts.StopInterrupted, which opens it
// stopped/interrupted.
func Open(ctx context.Context, db *thread.DB, id string, opts Options) (*Conversation, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("conversation: no client: %w", thread.ErrInvalid)
	}
	th, err := db.Thread(ctx, id)
	if err != nil {
		return nil, err
	}
	msgs, err := load(ctx, th)
	if err != nil {
		return nil, err
	}
	st, err := th.State(ctx, 0)
	if err != nil {
		return nil, err
	}
	status, mode := Status{Kind: Stopped, Reason: EndTurn}, Mode{Kind: ModeNormal}
	var queued []message.Message
	inFlight := false // a turn was in flight when the conversation last ran
	if raw, ok := st[stateStatus]; ok {
		if err := json.Unmarshal(raw, &status); err != nil {
			status = Status{Kind: Stopped, Reason: Aborted}
		} else if status.Kind == Streaming {
			status, inFlight = Status{Kind: Stopped, Reason: Interrupted}, true
		}
	}
	raw, ok := st[stateMode]
	if !ok {
		return nil, fmt.Errorf("thread %s is not a conversation: %w", id, thread.ErrNotFound)
	}
	if err := json.Unmarshal(raw, &mode); err != nil || !mode.valid() {
		return nil, fmt.Errorf("conversation %s: its mode %s is not one this package makes: %w", id, clip(string(raw)), thread.ErrInvalid)
	}
	if status.Kind != Stopped && status.Kind != Errored {
		status = Status{Kind: Stopped, Reason: Aborted}
	}
	if raw, ok := st[stateQueued]; ok && json.Unmarshal(raw, &queued) != nil {
		return nil, fmt.Errorf("conversation %s: its queued messages are not messages: %w", id, thread.ErrInvalid)
	}
	sub := th.Record().Labels[LabelParent] != ""
	c := start(db, th, opts, nil, sub, msgs, status, mode, queued)
	c.do(func() error {
		switch {
		case mode.Kind == ModeToolUse:
			c.runTools(mode)
		case mode.yielded():
			c.finish(map[string]string{"result": mode.Op.Response})
		case mode.Kind == ModeControlFlow:
			c.controlFlow(mode)
		case inFlight && (sub || !opts.StopInterrupted):
			// The turn in flight is asked again; a sub-agent's always, for
			// its parent waits on it.
			if err := c.cont(); err != nil {
				c.notify(Notice{Kind: "error", Err: err})
			}
		case inFlight:
			// Stopped/interrupted: Continue asks again.
		case sub && len(msgs) > 0 && msgs[len(msgs)-1].Role == message.RoleUser && status.Kind == Stopped:
			// A sub-agent stopped after its prompt was kept and before it
			// answered: it answers now.
			if err := c.cont(); err != nil {
				c.notify(Notice{Kind: "error", Err: err})
			}
		case sub && status.Kind == Errored:
			c.finish(map[string]string{"error": status.Err})
		case sub && status.Kind == Stopped && status.Reason == EndTurn && lastText(msgs) != "":
			c.finish(map[string]string{"result": lastText(msgs)})
		}
		return nil
	})
	return c, nil
}

func start(db *thread.DB, th *thread.Thread, opts Options, parent *Conversation, sub bool, msgs []message.Message, status Status, mode Mode, queued []message.Message) *Conversation {
	c := &Conversation{db: db, opts: opts, th: th, parent: parent, sub: sub || parent != nil,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), ended: make(chan struct{}),
		tools: map[string]agent.Tool{}, children: map[string]*Conversation{}, mode: mode, modeNow: mode,
		committed: len(msgs), queued: queued, finished: make(chan struct{})}
	for _, t := range opts.Tools {
		c.tools[t.Spec().Name] = t
	}
	copts := &agent.ChatOptions{Model: opts.Model, Instructions: opts.Instructions}
	for _, t := range opts.Tools {
		copts.Tools = append(copts.Tools, t.Spec())
	}
	copts.Tools = append(copts.Tools, ownTools(c.sub)...)
	c.agent = NewAgent(opts.Client, copts, msgs, c.dispatch)
	c.agent.status = status
	if c.trc = newTracing(opts.TracerProvider, opts.Client, th.ID(), copts.Tools); c.trc != nil {
		// The thread's title rather than Options.Title: it stays when the
		// conversation is opened again, and a sub-agent's is its own.
		c.name = cmp.Or(th.Record().Title, "conversation")
		c.agent.trc = c.trc
	}
	go c.loop()
	return c
}

// dispatch is the agent's way in: the event joins the loop's queue, and
// never blocks.
func (c *Conversation) dispatch(ev Event) {
	c.post(func() { c.onEvent(ev) })
}

func (c *Conversation) post(f func()) {
	c.qmu.Lock()
	c.queue = append(c.queue, f)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// loop is the event loop: it runs what was posted, one at a time.
func (c *Conversation) loop() {
	defer close(c.ended)
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		}
		for {
			c.qmu.Lock()
			if len(c.queue) == 0 {
				c.qmu.Unlock()
				break
			}
			f := c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			c.qmu.Unlock()
			f()
		}
	}
}

// do runs f on the event loop and waits for it.
func (c *Conversation) do(f func() error) error { return c.doCtx(context.Background(), f) }

// doCtx is do, waiting no longer than ctx: f still runs once the loop
// takes it.
func (c *Conversation) doCtx(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	c.post(func() { done <- f() })
	select {
	case err := <-done:
		return err
	case <-c.ended:
		return fmt.Errorf("conversation %s is closed: %w", c.ID(), thread.ErrInvalid)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Close aborts what is in flight, closes the sub-agents, and stops the
// event loop. It may be called more than once. The abort always happens
// (and commits what the turn completed) before the loop stops; ctx bounds
// the waits for the sub-agents and the loop to end, which finish all the
// same, and a Close that ctx cut short returns its cause.
func (c *Conversation) Close(ctx context.Context) error {
	// Not bounded by ctx: a loop told to quit may never run an abort
	// still queued.
	c.do(func() error {
		c.abort()
		return nil
	})
	for _, k := range c.Children() {
		k.Close(ctx)
	}
	c.closeOnce.Do(func() { close(c.quit) })
	select {
	case <-c.ended:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Suspend stops the conversation as a process that ends would, without
// aborting anything: its event loop stops, its stream and tools are
// cancelled, and nothing more is committed, so that its thread keeps what
// its last commit says — a turn in flight, tools running — and the next
// Open takes it up again. A server that shuts down suspends its
// conversations; Close is for a user who is done with one. The
// conversation and its sub-agents are closed after it. It may be called
// more than once. The suspension always completes; ctx bounds how long
// Suspend waits for it (the loop to end, the tools and sub-agents to stop).
func (c *Conversation) Suspend(ctx context.Context) {
	// A stop whose event is still queued is handled, and so committed,
	// first: not bounded by ctx, as a loop told to quit may never run it.
	c.do(func() error {
		c.catchUp()
		return nil
	})
	c.closeOnce.Do(func() { close(c.quit) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-c.ended
		// The loop has ended: what it owned belongs to the first Suspend
		// now (the others wait for it to finish). What the stream and the
		// tools post after this is never handled.
		c.suspendOnce.Do(func() {
			c.agent.Abort()
			if r := c.tools_; r != nil {
				r.cancel()
				r.wg.Wait()
			}
			for _, k := range c.children {
				k.Suspend(context.WithoutCancel(ctx))
			}
			c.endTurn(true, nil)
		})
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// ID returns the id of the conversation's thread.
func (c *Conversation) ID() string { return c.th.ID() }

// Thread returns the conversation's thread, as of its last stop.
func (c *Conversation) Thread() *thread.Thread { return c.th }

// Agent returns the conversation's agent, to read its status and messages.
func (c *Conversation) Agent() *Agent { return c.agent }

// Mode returns the conversation's mode.
func (c *Conversation) Mode() Mode {
	c.vmu.Lock()
	defer c.vmu.Unlock()
	return c.modeNow
}

func (c *Conversation) setMode(m Mode) {
	c.mode = m
	c.vmu.Lock()
	c.modeNow = m
	c.vmu.Unlock()
	c.notify(Notice{Kind: "mode"})
}

func (c *Conversation) notify(n Notice) {
	if c.opts.Notify != nil {
		n.Conversation = c.th.ID()
		c.opts.Notify(n)
	}
}

// busy reports whether a turn is in flight: the agent streams or tools run.
func (c *Conversation) busy() bool {
	return c.agent.Status().Kind == Streaming || c.mode.Kind == ModeToolUse
}

// Send sends m, the user's message. While a turn is in flight it aborts
// it first, unless queued, which holds m until the turn ends (then it goes
// with the tool results, or after the answer). When the conversation
// traces (Options.TracerProvider), the span in ctx (a request's, say) is
// the parent of the turn that m begins; ctx bounds the call, not the turn,
// which outlives it. Commands typed in a chat, such as "@compact", are the
// face's to read (loom chat does): Send sends what it is given.
func (c *Conversation) Send(ctx context.Context, m message.Message, queued bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.do(func() error { return c.send(ctx, m, queued) })
}

// catchUp handles a stop of the agent whose event is still in the queue,
// now: a command then sees the conversation as the stop leaves it.
func (c *Conversation) catchUp() {
	turn, st := c.agent.Turn(), c.agent.Status()
	if turn <= c.handled || st.Kind == Streaming {
		return
	}
	if st.Kind == Errored {
		c.onEvent(AgentError{Turn: turn, Err: errors.New(st.Err)})
		return
	}
	c.onStop(turn, AgentStopped{Turn: turn, Reason: st.Reason, Usage: c.agent.Usage()})
}

func (c *Conversation) send(parent context.Context, m message.Message, queued bool) error {
	c.catchUp()
	if c.mode.yielded() {
		return fmt.Errorf("conversation %s has yielded to its parent: %w", c.ID(), ErrState)
	}
	if err := c.check(m, queued && c.busy()); err != nil {
		return err
	}
	if c.busy() {
		if queued {
			c.queued = append(c.queued, m)
			return nil
		}
		c.abort()
	}
	if err := c.agent.AppendUserMessage(m); err != nil {
		return err
	}
	// The message is kept before the turn starts, marked in flight: a crash
	// while it streams loses the answer, not the question, and Open asks
	// again.
	c.beginTurn(parent)
	return c.goOn()
}

// cont starts the agent's next stream in the turn in flight, or in a new
// one. A turn that cannot go on ends.
func (c *Conversation) cont() error {
	c.beginTurn(context.Background())
	err := c.agent.continueIn(c.ctx())
	if err != nil && !c.busy() {
		c.endTurn(false, err)
	}
	return err
}

// Abort aborts what is in flight — the stream, the tools, the sub-agents —
// and records it; with nothing in flight it does nothing. ctx bounds the
// wait for the conversation's loop to take the abort, which then happens
// all the same; an Abort that ctx cut short returns its cause.
func (c *Conversation) Abort(ctx context.Context) error {
	return c.doCtx(ctx, func() error {
		c.abort()
		return nil
	})
}

func (c *Conversation) abort() {
	for _, child := range c.children {
		child.Abort(context.Background())
	}
	// An answer that is complete, whose stop event is still in the
	// queue, is kept: handled, and so committed, now. Dropped, the thread
	// would not hold what the user saw, and a conversation closed in that
	// moment (an idle server's sweep) would ask the model again when
	// opened. Queued messages wait: they are not sent by that stop.
	if st := c.agent.Status(); st.Kind != Streaming && c.agent.Turn() > c.handled && len(c.agent.OpenCalls()) == 0 {
		q := c.queued
		c.queued = nil
		c.catchUp()
		c.queued = append(q, c.queued...)
	}
	if c.agent.Status().Kind == Streaming {
		c.agent.Abort()
		c.onStop(c.agent.Turn(), AgentStopped{Turn: c.agent.Turn(), Reason: Aborted})
	}
	// A stop whose event is still queued is over, aborted: its tool calls
	// are answered as aborted below, and it does not go on.
	c.handled = max(c.handled, c.agent.Turn())
	switch {
	case c.mode.Kind == ModeToolUse && c.tools_ != nil:
		r := c.tools_
		r.aborted = true
		r.cancel()
		r.wg.Wait()
		c.toolsDone(r)
	case c.mode.Kind == ModeToolUse, c.mode.Kind == ModeControlFlow && !c.mode.yielded(),
		c.mode.Kind == ModeNormal && c.agent.Status().Kind != Streaming && len(c.agent.OpenCalls()) > 0:
		// Nothing runs (a mode read back from the thread, not yet taken
		// up): what it was about is answered as aborted.
		c.agent.mu.Lock()
		c.agent.answerOpen(resultAborted)
		c.agent.mu.Unlock()
		c.setMode(Mode{Kind: ModeNormal})
		c.commitStop(c.ctx())
	}
	// Messages queued for the turn's end are kept, in order, not sent: the
	// next turn (the next message, or Continue) takes them.
	if len(c.queued) > 0 && c.agent.Status().Kind != Streaming && len(c.agent.OpenCalls()) == 0 {
		for _, m := range c.queued {
			c.agent.AppendUserMessage(m)
		}
		c.queued = nil
		c.commitStop(c.ctx())
	}
	c.endTurn(true, nil)
	if c.sub {
		c.finish(map[string]string{"aborted": "aborted"})
	}
}

// onEvent handles an event of the agent.
func (c *Conversation) onEvent(ev Event) {
	switch ev := ev.(type) {
	case ContentUpdated:
		if c.opts.Notify != nil { // the partial text is a copy: only for a listener
			c.notify(Notice{Kind: "content", Partial: c.agent.Partial()})
		}
	case AgentStopped:
		c.onStop(ev.Turn, ev)
	case AgentError:
		if ev.Turn <= c.handled {
			return
		}
		c.handled = ev.Turn
		c.setMode(Mode{Kind: ModeNormal})
		c.commitStop(c.ctx())
		c.endTurn(false, ev.Err)
		c.notify(Notice{Kind: "error", Err: ev.Err})
		if c.sub {
			c.finish(map[string]string{"error": ev.Err.Error()})
		}
	}
}

// initialState is the state of a new conversation's thread: what marks it
// as one.
func initialState() map[string]json.RawMessage {
	return map[string]json.RawMessage{stateMode: json.RawMessage(`{"kind":"normal"}`), stateStatus: json.RawMessage(`{"kind":"stopped","reason":"end_turn"}`)}
}

// load reads the conversation's messages from its thread: all of them
// since its last compaction (whose summary starts them), as they are —
// unlike a view, which leaves out a call without its result.
func load(ctx context.Context, th *thread.Thread) ([]message.Message, error) {
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		return nil, err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].AuthorName == compactAuthor && msgs[i].Role == message.RoleUser {
			return msgs[i:], nil
		}
	}
	return msgs, nil
}

// onStop handles a stop of the agent's turn, once.
func (c *Conversation) onStop(turn int, ev AgentStopped) {
	if turn <= c.handled {
		return
	}
	c.handled = turn
	c.turnUsage.InputTokens += ev.Usage.InputTokens
	c.turnUsage.OutputTokens += ev.Usage.OutputTokens
	switch ev.Reason {
	case ToolUse:
		mode := interpretToolUse(c.agent.OpenCalls(), c.sub)
		c.setMode(mode)
		if c.commitStop(c.ctx()) != nil {
			return // no tool runs for an answer that was not saved
		}
		c.notify(Notice{Kind: "stopped"})
		if mode.Kind == ModeToolUse {
			c.runTools(mode)
		} else {
			c.controlFlow(mode)
		}
	default:
		c.setMode(Mode{Kind: ModeNormal})
		if c.commitStop(c.ctx()) != nil {
			return
		}
		c.endTurn(ev.Reason == Aborted, nil)
		c.notify(Notice{Kind: "stopped"})
		if c.sub && ev.Reason != Aborted {
			// A sub-agent that ends its turn without yielding gives its
			// last answer.
			c.finish(map[string]string{"result": lastText(c.agent.Messages())})
			return
		}
		if ev.Reason != Aborted {
			c.sendQueued()
		}
	}
}

func lastText(msgs []message.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.RoleAssistant {
			return msgs[i].Text()
		}
	}
	return ""
}

// sendQueued sends the messages queued while the turn ran.
func (c *Conversation) sendQueued() {
	if len(c.queued) == 0 {
		return
	}
	for _, m := range c.queued {
		if err := c.agent.AppendUserMessage(m); err != nil {
			c.notify(Notice{Kind: "error", Err: err})
			return
		}
	}
	c.queued = nil
	// A turn of their own, kept before it starts as a message sent is.
	c.beginTurn(context.Background())
	if err := c.goOn(); err != nil && !errors.Is(err, ErrNotSaved) {
		c.notify(Notice{Kind: "error", Err: err})
	}
}

// commitStop commits the agent's messages since the last stop, with the
// mode and status, to the thread: every stop is durable, and Open resumes
// from it. A commit that fails is the conversation's error (see
// saveFailed), which it returns: the caller goes no further.
func (c *Conversation) commitStop(ctx context.Context) error {
	return c.commit(ctx, false)
}

// goOn commits what the agent has with the status streaming — the mark of
// a turn in flight, which Open finds if the process dies before the next
// stop — and starts the agent's next stream.
func (c *Conversation) goOn() error {
	if err := c.commit(c.ctx(), true); err != nil {
		return err
	}
	return c.cont()
}

func (c *Conversation) commit(ctx context.Context, inFlight bool) error {
	fresh, n := c.agent.since(c.committed)
	state, err := c.state(inFlight, c.queued)
	if err == nil {
		_, err = c.th.Commit(ctx, thread.CommitOptions{Messages: fresh, State: state, Kind: thread.KindLocal})
	}
	if err != nil {
		return c.saveFailed(ctx, err)
	}
	c.committed = n
	return nil
}

// saveFailed makes a commit that failed the conversation's error: the turn
// ends, the agent's status is error, an error notice tells of it, and the
// agent knows again what the thread holds (the messages the commit did not
// save are dropped, and a thread that another writer moved is read again),
// so that the next commit saves what comes next. It returns err, wrapped.
func (c *Conversation) saveFailed(ctx context.Context, err error) error {
	err = fmt.Errorf("conversation %s: %w: %w", c.ID(), ErrNotSaved, err)
	msgs, _ := c.agent.since(0)
	msgs = msgs[:min(c.committed, len(msgs))]
	if rerr := c.th.Refresh(ctx); rerr == nil {
		if held, lerr := load(ctx, c.th); lerr == nil {
			msgs = held
		}
	}
	c.agent.reset(msgs, Status{Kind: Errored, Err: notSaved(err)})
	c.committed = len(msgs)
	c.handled = max(c.handled, c.agent.Turn())
	if c.mode.Kind != ModeNormal {
		c.setMode(Mode{Kind: ModeNormal})
	}
	c.endTurn(false, err)
	c.notify(Notice{Kind: "error", Err: err})
	if c.sub {
		c.finish(map[string]string{"error": notSaved(err)})
	}
	return err
}

// notSaved is the status text of a commit that failed: the thread's own
// errors name ids and limits, and are told; a store's may name its
// internals (paths, hosts), and are not.
func notSaved(err error) string {
	for _, known := range []error{thread.ErrInvalid, thread.ErrConflict, thread.ErrNotFound, thread.ErrUnsupported} {
		if errors.Is(err, known) {
			return err.Error()
		}
	}
	return "conversation not saved: the store failed"
}

// check refuses, before it is accepted, a message the thread cannot hold
// (thread.DB.CheckCommit), or one that the messages queued with it would
// take over the state's limit: nothing is changed.
func (c *Conversation) check(m message.Message, queued bool) error {
	if err := c.db.CheckCommit(thread.CommitOptions{Messages: []message.Message{m}}); err != nil {
		return fmt.Errorf("conversation %s: %w", c.ID(), err)
	}
	if !queued {
		return nil
	}
	state, err := c.state(false, append(slices.Clone(c.queued), m))
	if err == nil {
		err = c.db.CheckCommit(thread.CommitOptions{State: state})
	}
	if err != nil {
		return fmt.Errorf("conversation %s: queue a message: %w", c.ID(), err)
	}
	return nil
}

// state is the thread's state for a commit: the mode, the status
// (streaming when inFlight) and the messages queued.
func (c *Conversation) state(inFlight bool, queued []message.Message) (map[string]json.RawMessage, error) {
	mode, err := json.Marshal(c.mode)
	if err != nil {
		return nil, err
	}
	st := c.agent.Status()
	if inFlight {
		st = Status{Kind: Streaming}
	}
	status, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	state := map[string]json.RawMessage{stateMode: mode, stateStatus: status, stateQueued: nil}
	if len(queued) > 0 {
		q, err := json.Marshal(queued)
		if err != nil {
			return nil, err
		}
		state[stateQueued] = q
	}
	return state, nil
}

// runTools runs the calls of mode's tool round, each on its own goroutine;
// their results come back on the loop.
func (c *Conversation) runTools(mode Mode) {
	c.beginTurn(context.Background()) // a conversation opened again in tool use
	ctx, cancel := context.WithCancel(c.ctx())
	r := &toolRound{cancel: cancel, results: map[string]message.FunctionResult{}}
	c.tools_ = r
	// Every open call runs (ActiveTools names them for display).
	calls := map[string]message.FunctionCall{}
	for _, call := range c.agent.OpenCalls() {
		calls[call.CallID] = call
	}
	for _, id := range slices.Sorted(maps.Keys(calls)) {
		call := calls[id]
		r.wg.Add(1)
		ctx, span := c.startTool(ctx, call)
		run := c.toolFunc(ctx, call)
		go func() {
			defer r.wg.Done()
			out, err := run(ctx)
			res := message.FunctionResult{CallID: id, Result: out}
			aborted := false
			if err != nil {
				res = message.FunctionResult{CallID: id, Result: err.Error(), IsError: true}
				if aborted = ctx.Err() != nil; aborted {
					res.Result = "aborted by the user while the tool ran"
				}
			}
			endTool(span, res, aborted)
			r.mu.Lock()
			r.results[id] = res
			all := len(r.results) == len(calls)
			r.mu.Unlock()
			if all {
				c.post(func() {
					if c.tools_ == r && !r.aborted {
						c.toolsDone(r)
					}
				})
			}
		}()
	}
	if len(calls) == 0 {
		c.toolsDone(r)
	}
}

// toolFunc returns what runs a call: a tool of the agent's, one of the
// conversation's own, or an error for a tool there is not. What it does on
// the loop, now, it does in ctx (the call's span).
func (c *Conversation) toolFunc(ctx context.Context, call message.FunctionCall) func(context.Context) (string, error) {
	if t, ok := c.tools[call.Name]; ok {
		return func(ctx context.Context) (string, error) { return t.Call(ctx, call.Arguments) }
	}
	switch call.Name {
	case ToolSpawn:
		var args struct{ Prompt, Title string }
		err := json.Unmarshal([]byte(call.Arguments), &args)
		// Spawning changes the loop's state: it runs there, now.
		child, serr := c.spawn(ctx, call.CallID, args.Prompt, args.Title)
		return func(context.Context) (string, error) {
			if err != nil {
				return "", fmt.Errorf("spawn_subagent: arguments: %v", err)
			}
			if serr != nil {
				return "", serr
			}
			b, _ := json.Marshal(map[string]string{"id": child.ID()})
			return string(b), nil
		}
	case ToolWaitSubs:
		var args struct{ IDs []string }
		err := json.Unmarshal([]byte(call.Arguments), &args)
		var kids []*Conversation
		for _, id := range args.IDs {
			k := c.children[id]
			if k == nil {
				// A sub-agent of an earlier run of this conversation.
				if th, err := c.db.Thread(ctx, id); err == nil && th.Record().Labels[LabelParent] == c.ID() {
					if k, err = Open(ctx, c.db, id, c.opts); err == nil {
						c.children[id] = k
					}
				}
			}
			kids = append(kids, k)
		}
		return func(ctx context.Context) (string, error) {
			if err != nil {
				return "", fmt.Errorf("wait_for_subagents: arguments: %v", err)
			}
			return waitFor(ctx, args.IDs, kids)
		}
	}
	return func(context.Context) (string, error) {
		return "", fmt.Errorf("no tool %q", call.Name)
	}
}

// toolsDone ends a tool round: the results go to the agent; unless a tool
// was aborted, the conversation goes on (with what was queued).
func (c *Conversation) toolsDone(r *toolRound) {
	if c.tools_ != r {
		return
	}
	c.tools_ = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, call := range c.agent.OpenCalls() {
		res, ok := r.results[call.CallID]
		if !ok {
			res = message.FunctionResult{Result: resultAborted, IsError: true}
		}
		c.agent.answer(call.CallID, res)
	}
	c.setMode(Mode{Kind: ModeNormal})
	if r.aborted {
		c.commitStop(c.ctx())
		c.endTurn(true, nil)
		return
	}
	for _, m := range c.queued {
		// With the tool results.
		if err := c.agent.AppendUserMessage(m); err != nil {
			c.notify(Notice{Kind: "error", Err: err})
		}
	}
	c.queued = nil
	// The results are kept before the answer to them streams: a tool that
	// ended does not run again after a crash.
	if err := c.goOn(); err != nil && !errors.Is(err, ErrNotSaved) {
		c.notify(Notice{Kind: "error", Err: err})
	}
}

// controlFlow carries out a compact, fork or yield the agent asked for.
func (c *Conversation) controlFlow(mode Mode) {
	op := mode.Op
	c.beginTurn(context.Background()) // a conversation opened again in control flow
	ctx, span := c.startTool(c.ctx(), message.FunctionCall{CallID: op.CallID, Name: opTool(op.Kind)})
	// The answer's other calls do not run.
	for _, call := range c.agent.OpenCalls() {
		if call.CallID != op.CallID {
			c.agent.answer(call.CallID, message.FunctionResult{Result: "not run: the answer also asked to " + op.Kind, IsError: true})
		}
	}
	switch op.Kind {
	case OpCompact:
		next := op.NextPrompt
		if next == "" {
			next, c.nextCmp = c.nextCmp, ""
		}
		if err := c.compact(ctx, op.Summary); err != nil {
			// The model is told, and may try again.
			res := message.FunctionResult{Result: "compact failed: " + err.Error(), IsError: true}
			c.agent.answer(op.CallID, res)
			endTool(span, res, false)
			c.setMode(Mode{Kind: ModeNormal})
			if err := c.goOn(); err != nil && !errors.Is(err, ErrNotSaved) {
				c.notify(Notice{Kind: "error", Err: err})
			}
			return
		}
		endTool(span, message.FunctionResult{}, false)
		c.setMode(Mode{Kind: ModeNormal})
		if c.commitStop(c.ctx()) != nil {
			return
		}
		if next != "" {
			// The same turn goes on with the next prompt; a turn that
			// cannot is over.
			if err := c.send(context.Background(), message.User(next), false); err != nil && !errors.Is(err, ErrNotSaved) {
				c.endTurn(false, err)
				c.notify(Notice{Kind: "error", Err: err})
			}
		} else {
			c.endTurn(false, nil)
			c.sendQueued()
		}
	case OpFork:
		f, err := c.fork(ctx, op.NextPrompt)
		result := message.FunctionResult{Result: "forked"}
		if err != nil {
			result = message.FunctionResult{Result: "fork failed: " + err.Error(), IsError: true}
		} else {
			b, _ := json.Marshal(map[string]string{"thread": f.ID()})
			result.Result = string(b)
			c.notify(Notice{Kind: "forked", Thread: f.ID()})
			f.Close(context.Background()) // it waits, stopped, on its thread: Open it to go on

		}
		c.agent.answer(op.CallID, result)
		endTool(span, result, false)
		c.setMode(Mode{Kind: ModeNormal})
		// The source goes on.
		if err := c.goOn(); err != nil && !errors.Is(err, ErrNotSaved) {
			c.notify(Notice{Kind: "error", Err: err})
		}
	case OpYield:
		c.agent.answer(op.CallID, message.FunctionResult{Result: "yielded to the parent conversation"})
		endTool(span, message.FunctionResult{}, false)
		if c.commitStop(c.ctx()) != nil {
			return
		}
		c.endTurn(false, nil)
		c.notify(Notice{Kind: "yielded"})
		c.finish(map[string]string{"result": op.Response})
	}
}

// compact replaces the conversation with summary: a compact commit on the
// thread (the originals stay in its history), and the agent's messages.
func (c *Conversation) compact(ctx context.Context, summary string) error {
	if summary == "" {
		return fmt.Errorf("compact: an empty summary: %w", thread.ErrInvalid)
	}
	m := message.User("Summary of the conversation so far:\n" + summary)
	m.AuthorName = compactAuthor
	msgs := c.agent.Messages()
	if _, err := c.th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{m}, Op: thread.OpCompact}); err != nil {
		return err
	}
	if err := c.agent.Compact(len(msgs), []message.Message{m}); err != nil {
		return err
	}
	c.committed = 1
	c.notify(Notice{Kind: "compacted"})
	return nil
}

// Compact asks the agent to compact the conversation: it is sent a
// request to call the compact tool, and after the compaction the
// conversation goes on with prompt, if any. ctx is as Send's.
func (c *Conversation) Compact(ctx context.Context, prompt string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.do(func() error {
		if prompt != "" {
			if err := c.check(message.User(prompt), false); err != nil {
				return err
			}
		}
		c.nextCmp = prompt
		return c.send(ctx, message.User("Call the compact tool now with a summary of this conversation that keeps what is needed to go on."), false)
	})
}

// Fork makes a new conversation on a fork of this one's thread, as of its
// last stop (O(1)), with prompt as its first new message; it works in any
// state, and this one is not changed. In the fork, each tool call without
// a result gets the error result "forked before the tool ran", and it
// starts stopped/end_turn: Continue it to send the prompt. ctx bounds the
// fork's reads and writes.
func (c *Conversation) Fork(ctx context.Context, prompt string) (*Conversation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var f *Conversation
	err := c.do(func() error {
		var err error
		f, err = c.fork(ctx, prompt)
		return err
	})
	return f, err
}

func (c *Conversation) fork(ctx context.Context, prompt string) (*Conversation, error) {
	if prompt != "" {
		if err := c.check(message.User(prompt), false); err != nil {
			return nil, err
		}
	}
	th, err := c.th.Fork(ctx, thread.ForkOptions{})
	if err != nil {
		return nil, err
	}
	msgs, err := load(ctx, th)
	if err != nil {
		return nil, err
	}
	f := start(c.db, th, c.opts, nil, c.sub, msgs, Status{Kind: Stopped, Reason: EndTurn}, Mode{Kind: ModeNormal}, nil)
	err = f.do(func() error {
		f.agent.mu.Lock()
		f.agent.answerOpen(resultForked)
		f.agent.mu.Unlock()
		if prompt != "" {
			if err := f.agent.AppendUserMessage(message.User(prompt)); err != nil {
				return err
			}
		}
		return f.commitStop(ctx)
	})
	if err != nil {
		f.Close(context.Background())
		return nil, err
	}
	return f, nil
}

// Continue starts the agent's next turn on what it has (a fork's prompt,
// a conversation resumed after a stop). ctx is as Send's.
func (c *Conversation) Continue(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.do(func() error {
		if c.busy() || c.mode.Kind != ModeNormal || len(c.agent.OpenCalls()) > 0 {
			return c.cont() // as the agent says (ErrState while it streams)
		}
		c.beginTurn(ctx)
		return c.goOn()
	})
}

// spawn starts a sub-agent on a thread of its own, linked to this one's,
// with prompt.
func (c *Conversation) spawn(ctx context.Context, callID, prompt, title string) (*Conversation, error) {
	if strings.TrimSpace(prompt) == "" {
		return nil, fmt.Errorf("spawn_subagent: an empty prompt: %w", thread.ErrInvalid)
	}
	if title == "" {
		title = "sub-agent of " + c.ID()
	}
	// The child's id comes from the call: a call run again (after a
	// restart in tool use) takes up the child it made, rather than make a
	// second one.
	sum := sha256.Sum256([]byte(c.ID() + "\x00" + callID))
	id := "sub_" + hex.EncodeToString(sum[:12])
	if k := c.children[id]; k != nil {
		return k, nil
	}
	th, err := c.db.Create(ctx, thread.CreateOptions{ID: id, Kind: thread.KindLocal, Title: title, Parent: c.ID(),
		Labels: map[string]string{LabelParent: c.ID()}, State: initialState()})
	if errors.Is(err, thread.ErrConflict) {
		old, oerr := c.db.Thread(ctx, id)
		if oerr != nil || old.Record().Labels[LabelParent] != c.ID() {
			return nil, fmt.Errorf("spawn_subagent: thread %s exists and is not this conversation's sub-agent: %w", id, thread.ErrConflict)
		}
		child, oerr := Open(ctx, c.db, id, c.opts)
		if oerr != nil {
			return nil, oerr
		}
		c.children[id] = child
		return child, nil
	}
	if err != nil {
		return nil, err
	}
	child := start(c.db, th, c.opts, c, true, nil, Status{Kind: Stopped, Reason: EndTurn}, Mode{Kind: ModeNormal}, nil)
	c.children[child.ID()] = child
	c.notify(Notice{Kind: "spawned", Thread: child.ID()})
	// The sub-agent's first turn is a child of the spawn_subagent call.
	if err := child.Send(ctx, message.User(prompt), false); err != nil {
		return nil, err
	}
	return child, nil
}

// finish ends a sub-agent's work with its outcome, once.
func (c *Conversation) finish(outcome map[string]string) {
	if c.outcome != nil {
		return
	}
	c.outcome = outcome
	close(c.finished)
}

// waitFor waits until each sub-agent has finished and returns their
// outcomes as JSON, by id.
func waitFor(ctx context.Context, ids []string, kids []*Conversation) (string, error) {
	out := map[string]any{}
	for i, k := range kids {
		if k == nil {
			out[ids[i]] = map[string]string{"error": "no such sub-agent"}
			continue
		}
		select {
		case <-k.finished:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		// outcome is written before finished is closed.
		if k.outcome["aborted"] != "" {
			out[ids[i]] = "aborted"
		} else {
			out[ids[i]] = k.outcome
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// Children returns the sub-agents this conversation started.
func (c *Conversation) Children() []*Conversation {
	var out []*Conversation
	c.do(func() error {
		for _, k := range slices.Sorted(maps.Keys(c.children)) {
			out = append(out, c.children[k])
		}
		return nil
	})
	return out
}

// Wait waits until the agent is not streaming and no tools run, or ctx
// ends.
func (c *Conversation) Wait(ctx context.Context) error {
	for {
		idle := false
		if err := c.do(func() error {
			c.qmu.Lock()
			pending := len(c.queue)
			c.qmu.Unlock()
			// A stop is over once it is handled: the agent stops before its
			// event reaches the queue.
			idle = !c.busy() && pending == 0 && c.handled >= c.agent.Turn() && (c.mode.Kind != ModeControlFlow || c.mode.yielded())
			return nil
		}); err != nil {
			return err
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeAfter():
		}
	}
}

func timeAfter() <-chan time.Time { return time.After(time.Millisecond) }

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
