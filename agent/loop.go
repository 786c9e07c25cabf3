package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// loop makes the run's requests and commits its steps.
func (r *run) loop(ctx context.Context) error {
	if err := r.begin(ctx); err != nil {
		return err
	}
	for {
		if ctx.Err() != nil {
			return r.fail(ctx, context.Cause(ctx))
		}
		msgs, opts, err := r.prompt(ctx)
		if err != nil {
			return r.fail(ctx, err)
		}
		r.sent = true
		resp, err := r.call(ctx, msgs, opts)
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return r.fail(ctx, err)
		}
		r.res.Requests++
		r.res.Response = resp
		addUsage(&r.res.Usage, resp.Usage)
		r.tidy(resp)

		patch := make(map[string]json.RawMessage)
		var kind thread.Kind
		switch r.kind {
		case thread.KindUndetermined:
			kind = thread.KindLocal
			if resp.ConversationID != "" && r.caps.ServiceThreads {
				kind = thread.KindService
			}
		case thread.KindService:
			if resp.ConversationID == "" {
				return r.fail(ctx, ErrNoConversationID)
			}
		}
		if kind == thread.KindService || r.kind == thread.KindService {
			if err := r.served(ctx, resp, patch); err != nil {
				return r.fail(ctx, err)
			}
		}
		if kind != "" {
			r.kind = kind
		}

		calls := unanswered(resp)
		if len(calls) == 0 {
			r.invoked(ctx, resp, nil, patch)
			return r.commit(ctx, StepAnswer, resp.Messages, patch, kind)
		}
		if r.rounds >= r.a.opts.MaxRounds {
			msgs := append(resp.Messages, r.refuse(calls, fmt.Sprintf("not run: the run's limit of %d tool rounds was reached", r.a.opts.MaxRounds))...)
			r.invoked(ctx, resp, ErrMaxRounds, patch)
			if err := r.commit(ctx, StepTools, msgs, patch, kind); err != nil {
				return err
			}
			return ErrMaxRounds
		}
		r.rounds++
		run, wait := r.split(calls)
		msgs = append(resp.Messages, r.execute(ctx, run)...)
		if len(wait) > 0 {
			raw, _ := json.Marshal(wait)
			patch[StatePending] = raw
			r.res.Pending = wait
			// A run cut short while it stops for approval has still
			// failed: its other calls were aborted.
			var runErr error
			if ctx.Err() != nil {
				runErr = context.Cause(ctx)
			}
			r.invoked(ctx, resp, runErr, patch)
			if err := r.commit(ctx, StepTools, msgs, patch, kind); err != nil {
				return err
			}
			return runErr
		}
		if err := r.commit(ctx, StepTools, msgs, patch, kind); err != nil {
			return r.fail(ctx, err)
		}
	}
}

// begin commits what comes before the first request: answers for the calls
// of a run that stopped while running them, the decisions on pending
// approvals (claiming the approved calls first, so that a second run
// deciding them in another process fails before any tool runs), and the
// input.
func (r *run) begin(ctx context.Context) error {
	var first []message.Message
	patch := make(map[string]json.RawMessage)
	if len(r.orphans) > 0 {
		first = r.refuse(calls(r.orphans), "aborted: the run that was running this call stopped before it finished")
		patch[StateRunning] = nil
	}
	if len(r.pending) == 0 {
		step := StepInput
		if len(first) > 0 {
			step = StepApprovals
		}
		return r.commit(ctx, step, append(first, r.input...), patch, "")
	}
	byID := make(map[string]Approval, len(r.req.Approvals))
	for _, ap := range r.req.Approvals {
		byID[ap.CallID] = ap
	}
	var approved []PendingCall
	for _, p := range r.pending {
		ap := byID[p.CallID]
		if ap.Approved {
			approved = append(approved, p)
			continue
		}
		reason := "rejected by the user"
		if ap.Reason != "" {
			reason += ": " + ap.Reason
		}
		first = append(first, message.ToolError(p.CallID, reason))
	}
	patch[StatePending] = nil
	if len(approved) == 0 {
		return r.commit(ctx, StepApprovals, append(first, r.input...), patch, "")
	}
	patch[StateRunning], _ = json.Marshal(approved)
	if err := r.commit(ctx, StepApprovals, first, patch, ""); err != nil {
		return err
	}
	results := r.execute(ctx, calls(approved))
	if err := r.commit(ctx, StepApprovals, append(results, r.input...), map[string]json.RawMessage{StateRunning: nil}, ""); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return r.fail(ctx, context.Cause(ctx))
	}
	return nil
}

func calls(ps []PendingCall) []message.FunctionCall {
	out := make([]message.FunctionCall, len(ps))
	for i, p := range ps {
		out[i] = message.FunctionCall{CallID: p.CallID, Name: p.Name, Arguments: p.Arguments}
	}
	return out
}

// unanswered returns the response's calls that it does not answer itself
// (a service's hosted tools come with their results).
func unanswered(resp *ChatResponse) []message.FunctionCall {
	calls := resp.Calls()
	if len(calls) == 0 {
		return nil
	}
	answered := make(map[string]bool)
	for _, m := range resp.Messages {
		for _, res := range m.Results() {
			answered[res.CallID] = true
		}
	}
	if len(answered) == 0 {
		return calls
	}
	out := calls[:0:0]
	for _, c := range calls {
		if !answered[c.CallID] {
			out = append(out, c)
		}
	}
	return out
}

// served records, in patch, the service's conversation as of resp.
func (r *run) served(ctx context.Context, resp *ChatResponse, patch map[string]json.RawMessage) error {
	depth, err := r.th.Len(ctx)
	if err != nil {
		return err
	}
	created := r.conv.ID == ""
	r.conv = conversation{ID: resp.ConversationID, Seen: depth + int64(len(resp.Messages)), Chained: r.caps.Chaining}
	patch[StateConversation], _ = json.Marshal(r.conv)
	if !r.caps.Chaining {
		patch[thread.StateLinear] = json.RawMessage("true")
	}
	if !created {
		return nil
	}
	// The service has just started the thread's conversation: the
	// providers hear of it.
	info := ThreadInfo{ID: r.th.ID(), Kind: thread.KindService, ServiceID: resp.ConversationID}
	for _, p := range r.a.providers {
		h, ok := p.(ThreadCreatedHook)
		if !ok {
			continue
		}
		st, err := callThreadCreated(ctx, h, info, r.states[p.Name()])
		if err != nil {
			return fmt.Errorf("context provider %s: %w", p.Name(), err)
		}
		if st != nil {
			r.states[p.Name()] = st
			patch[stateKey(p)] = st
		}
	}
	return nil
}

// tidy makes the response's messages fit for the thread: a role, the
// agent's name, a call id on every call, the usage on the last message.
func (r *run) tidy(resp *ChatResponse) {
	for i := range resp.Messages {
		m := &resp.Messages[i]
		if m.Role == "" {
			m.Role = message.RoleAssistant
		}
		if m.AuthorName == "" && m.Role == message.RoleAssistant {
			m.AuthorName = r.a.opts.Name
		}
		for j, c := range m.Contents {
			if fc, ok := c.(message.FunctionCall); ok && fc.CallID == "" {
				fc.CallID = "call_" + message.NewID()
				m.Contents[j] = fc
			}
		}
	}
	if n := len(resp.Messages); n > 0 && resp.Usage != (message.Usage{}) {
		m := &resp.Messages[n-1]
		m.Contents = append(m.Contents[:len(m.Contents):len(m.Contents)], resp.Usage)
	}
}

func addUsage(t *message.Usage, u message.Usage) {
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.TotalTokens += u.TotalTokens
	t.CachedInputTokens += u.CachedInputTokens
	t.ReasoningTokens += u.ReasoningTokens
}

// prompt returns the messages and options of the next request.
func (r *run) prompt(ctx context.Context) ([]message.Message, *ChatOptions, error) {
	// The handle moves only with the run's commits; if it moved otherwise
	// (refreshed by its other users), another writer got in.
	if v := r.th.Version(); v != r.version {
		return nil, nil, fmt.Errorf("thread moved to version %d by another writer, not %d: %w", v, r.version, thread.ErrConflict)
	}
	opts := r.a.opts.Chat.Clone()
	opts.ConversationID, opts.Store = "", nil
	if r.a.opts.Model != "" {
		opts.Model = r.a.opts.Model
	}
	opts.Instructions = r.instr
	opts.Tools = r.specs
	if r.rounds >= r.a.opts.MaxRounds && len(r.specs) > 0 {
		opts.ToolChoice = ToolNone
	}
	switch r.kind {
	case thread.KindService:
		opts.Store = ptr(true)
		if r.conv.ID != "" {
			opts.ConversationID = r.conv.ID
			depth, err := r.th.Len(ctx)
			if err != nil {
				return nil, nil, err
			}
			n := depth - r.conv.Seen
			if n < 0 {
				return nil, nil, fmt.Errorf("thread state %s: the service has seen %d messages of %d: %w", StateConversation, r.conv.Seen, depth, thread.ErrInvalid)
			}
			// The service keeps what it is sent: the providers' messages
			// go with the run's first request only.
			var msgs []message.Message
			if !r.sent {
				msgs = append(msgs, r.extra...)
			}
			if n > 0 {
				unsent, err := r.th.Messages(ctx, thread.ReadOptions{Last: int(n)})
				if err != nil {
					return nil, nil, err
				}
				msgs = append(msgs, unsent...)
			}
			return msgs, opts, nil
		}
	case thread.KindLocal:
		opts.Store = ptr(false)
	}
	vo := r.a.opts.View
	vo.Version = 0
	vo.Instructions = nil
	if r.instr != "" {
		vo.Instructions = append(vo.Instructions, message.System(r.instr))
	}
	vo.Instructions = append(vo.Instructions, r.extra...)
	v, err := r.th.View(ctx, vo)
	if err != nil {
		return nil, nil, err
	}
	// A view may compact the thread: that commit is the run's too.
	if v.Compacted != "" {
		r.version = r.th.Version()
	}
	msgs := v.Messages
	if r.instr != "" {
		msgs = msgs[1:]
	}
	return msgs, opts, nil
}

func ptr[T any](v T) *T { return &v }

// call makes one request, streamed when the run is.
func (r *run) call(ctx context.Context, msgs []message.Message, opts *ChatOptions) (resp *ChatResponse, err error) {
	ctx, span := r.startChat(ctx, opts)
	if span != nil {
		defer func() { endChat(span, resp, err) }()
	}
	return r.request(ctx, msgs, opts)
}

// request makes one request, streamed when the run is.
func (r *run) request(ctx context.Context, msgs []message.Message, opts *ChatOptions) (*ChatResponse, error) {
	if r.emit == nil {
		resp, err := r.a.client.Response(ctx, msgs, opts)
		if err == nil && resp == nil {
			err = errors.New("client returned no response")
		}
		return resp, err
	}
	var resp *ChatResponse
	for u, err := range r.a.client.Stream(ctx, msgs, opts) {
		if err != nil {
			return nil, err
		}
		if u.Response != nil {
			resp = u.Response
			continue
		}
		if !r.emit(Event{Update: &u}) {
			return nil, context.Cause(ctx)
		}
	}
	if resp == nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, errors.New("stream ended without a response")
	}
	return resp, nil
}

// commit writes one step, conditional on the version the run last wrote.
// It is not cancelled with the run: a step that completed is kept.
func (r *run) commit(ctx context.Context, kind StepKind, msgs []message.Message, patch map[string]json.RawMessage, tk thread.Kind) error {
	if len(patch) == 0 {
		patch = nil
	}
	if len(msgs) == 0 && patch == nil {
		if tk == "" {
			return nil
		}
		// An empty response still determines the thread.
		patch = map[string]json.RawMessage{}
	}
	meta := r.meta
	if kind != "" {
		meta = make(map[string]string, len(r.meta)+2)
		for k, v := range r.meta {
			meta[k] = v
		}
		meta["step"] = string(kind)
		if kind != StepInput && kind != StepApprovals && kind != StepState && r.res.Response != nil && r.res.Response.ResponseID != "" {
			meta["response"] = r.res.Response.ResponseID
		}
	}
	// A service thread's messages mirror the service's conversation: what
	// the run sent it and what it answered.
	opts := thread.CommitOptions{Messages: msgs, State: patch, Kind: tk, IfVersion: r.version, Metadata: meta, Mirror: r.kind == thread.KindService,
		FreshIDs: r.freshIDs(msgs)}
	c, err := r.th.Commit(context.WithoutCancel(ctx), opts)
	if err != nil && errors.Is(err, thread.ErrInvalid) && r.dropProviderStates(patch) {
		// A provider's state the thread refuses (over its size limit)
		// must not cost the step: commit it without the providers' state.
		r.a.log.Warn("agent: context provider state refused by the thread; committed the step without it", "thread", r.th.ID(), "run", r.res.RunID, "err", err)
		c, err = r.th.Commit(context.WithoutCancel(ctx), opts)
	}
	if err != nil {
		return err
	}
	r.version = r.th.Version()
	r.res.Version = r.version
	r.res.Messages = append(r.res.Messages, c.Messages...)
	if r.emit != nil {
		r.emit(Event{Step: &Step{Kind: kind, Messages: c.Messages, Commit: c.ID, Version: r.version}})
	}
	return nil
}

// freshIDs reports whether every id msgs hold was made by the run
// (CommitOptions.FreshIDs): such ids need no look among the thread's, and
// a client's input ids get one.
func (r *run) freshIDs(msgs []message.Message) bool {
	for _, m := range msgs {
		if m.ID != "" && !r.minted[m.ID] {
			return false
		}
	}
	return true
}

// dropProviderStates removes the providers' keys from patch and reports
// whether there were any.
func (r *run) dropProviderStates(patch map[string]json.RawMessage) bool {
	dropped := false
	for _, p := range r.a.providers {
		if _, ok := patch[stateKey(p)]; ok {
			delete(patch, stateKey(p))
			r.states[p.Name()] = nil
			dropped = true
		}
	}
	return dropped
}

// fail ends a run that got err: the providers hear of it, and the state
// they return is committed on its own.
func (r *run) fail(ctx context.Context, err error) error {
	patch := make(map[string]json.RawMessage)
	r.invoked(ctx, r.res.Response, err, patch)
	if cerr := r.commit(ctx, StepState, nil, patch, ""); cerr != nil {
		r.a.log.Warn("agent: commit of context provider state after a failed run", "thread", r.th.ID(), "run", r.res.RunID, "err", cerr)
	}
	return err
}

// invoked runs the providers' Invoked hooks and puts their new states in
// patch. A hook that fails keeps its old state and is logged: the run's
// outcome stands.
func (r *run) invoked(ctx context.Context, resp *ChatResponse, runErr error, patch map[string]json.RawMessage) {
	ctx = context.WithoutCancel(ctx)
	for _, p := range r.a.providers {
		h, ok := p.(InvokedHook)
		if !ok {
			continue
		}
		old := r.states[p.Name()]
		st, err := callInvoked(ctx, h, Invoked{Thread: r.info(), Input: r.input, Response: resp, Err: runErr, State: old})
		if err != nil {
			r.a.log.Warn("agent: context provider's Invoked failed; its state is unchanged", "provider", p.Name(), "thread", r.th.ID(), "run", r.res.RunID, "err", err)
			continue
		}
		if st == nil || string(st) == string(old) {
			continue
		}
		if !json.Valid(st) {
			r.a.log.Warn("agent: context provider's state is not JSON; its state is unchanged", "provider", p.Name(), "thread", r.th.ID())
			continue
		}
		r.states[p.Name()] = st
		patch[stateKey(p)] = st
	}
}

func callInvoked(ctx context.Context, h InvokedHook, inv Invoked) (st json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return h.Invoked(ctx, inv)
}

// split separates the calls to run now from those that wait for approval.
func (r *run) split(calls []message.FunctionCall) (run []message.FunctionCall, wait []PendingCall) {
	for _, c := range calls {
		if t, ok := r.tools[c.Name].(ApprovalTool); ok && t.NeedsApproval(c.Arguments) {
			wait = append(wait, PendingCall{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments})
			continue
		}
		run = append(run, c)
	}
	return run, wait
}

func (r *run) refuse(calls []message.FunctionCall, reason string) []message.Message {
	out := make([]message.Message, len(calls))
	for i, c := range calls {
		out[i] = message.ToolError(c.CallID, reason)
	}
	return out
}

// execute runs calls, concurrently up to MaxConcurrency and Sequential
// tools one at a time in order, and returns one tool message per call in
// the calls' order. A call that the run's end stops or never starts gets
// an error result that says it was aborted.
func (r *run) execute(ctx context.Context, calls []message.FunctionCall) []message.Message {
	if len(calls) == 0 {
		return nil
	}
	results := make([]message.FunctionResult, len(calls))
	sem := make(chan struct{}, r.a.opts.MaxConcurrency)
	var seq []int
	var wg sync.WaitGroup
	one := func(i int) {
		c := calls[i]
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i] = aborted(ctx, c.CallID)
			return
		}
		defer func() { <-sem }()
		tctx, span := r.startTool(ctx, c)
		start := time.Now()
		results[i] = callTool(tctx, r.tools[c.Name], c)
		if f := r.a.opts.OnToolCall; f != nil {
			f(tctx, c, results[i], time.Since(start))
		}
		endTool(span, results[i])
	}
	for i, c := range calls {
		t, ok := r.tools[c.Name]
		switch {
		case !ok:
			results[i] = message.FunctionResult{CallID: c.CallID, IsError: true, Result: fmt.Sprintf("no tool named %q", c.Name)}
		case isSequential(t):
			seq = append(seq, i)
		default:
			wg.Go(func() { one(i) })
		}
	}
	if len(seq) > 0 {
		wg.Go(func() {
			for _, i := range seq {
				one(i)
			}
		})
	}
	wg.Wait()
	limit := r.th.DB().Limits().MessageBytes
	out := make([]message.Message, len(results))
	for i, res := range results {
		out[i] = message.New(message.RoleTool, res)
		if n := out[i].Size(); n > limit {
			// The thread would refuse the whole step: the model is told
			// instead, and the step keeps its other results.
			out[i] = message.ToolError(res.CallID, fmt.Sprintf("the result of %d bytes is over the thread's limit of %d bytes a message", n, limit))
		}
	}
	return out
}

func isSequential(t Tool) bool {
	s, ok := t.(SequentialTool)
	return ok && s.Sequential()
}

func aborted(ctx context.Context, callID string) message.FunctionResult {
	return message.FunctionResult{CallID: callID, IsError: true, Result: "aborted: " + context.Cause(ctx).Error()}
}

// callTool runs one call; a panic in the tool is its failure, not the run's.
func callTool(ctx context.Context, t Tool, c message.FunctionCall) (res message.FunctionResult) {
	if ctx.Err() != nil {
		return aborted(ctx, c.CallID)
	}
	defer func() {
		if v := recover(); v != nil {
			res = message.FunctionResult{CallID: c.CallID, IsError: true, Result: validText(fmt.Sprintf("tool %s panicked: %v", c.Name, v))}
		}
	}()
	out, err := t.Call(ctx, c.Arguments)
	switch {
	case err != nil && ctx.Err() != nil:
		return aborted(ctx, c.CallID)
	case err != nil:
		return message.FunctionResult{CallID: c.CallID, IsError: true, Result: validText(strings.TrimSpace(err.Error()))}
	}
	// A thread holds text: bytes that are not UTF-8 (a binary file read
	// whole) become U+FFFD rather than fail the step.
	return message.FunctionResult{CallID: c.CallID, Result: validText(out)}
}

// validText replaces what is not UTF-8 in s; valid text comes back as it
// is, without a copy.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func callThreadCreated(ctx context.Context, h ThreadCreatedHook, info ThreadInfo, state json.RawMessage) (st json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	st, err = h.ThreadCreated(ctx, info, state)
	if err == nil && st != nil && !json.Valid(st) {
		err = fmt.Errorf("state is not JSON: %w", thread.ErrInvalid)
	}
	return st, err
}
