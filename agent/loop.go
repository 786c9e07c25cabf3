package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// loop makes the run's requests and commits its steps.
func (r *run) loop(ctx context.Context) error {
	switch {
	case len(r.pending) > 0:
		msgs := append(r.decide(ctx), r.input...)
		if err := r.commit(ctx, StepApprovals, msgs, map[string]json.RawMessage{StatePending: nil}, ""); err != nil {
			return err
		}
		if err := context.Cause(ctx); ctx.Err() != nil {
			return r.fail(ctx, err)
		}
	case len(r.input) > 0:
		if err := r.commit(ctx, StepInput, r.input, nil, ""); err != nil {
			return err
		}
	}
	for {
		if ctx.Err() != nil {
			return r.fail(ctx, context.Cause(ctx))
		}
		msgs, opts, err := r.prompt(ctx)
		if err != nil {
			return r.fail(ctx, err)
		}
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
			if resp.ConversationID != "" {
				kind = thread.KindService
			}
		case thread.KindService:
			if resp.ConversationID == "" {
				return r.fail(ctx, ErrNoConversationID)
			}
		}
		if kind == thread.KindService || r.kind == thread.KindService {
			if err := r.served(ctx, resp, patch, kind != ""); err != nil {
				return r.fail(ctx, err)
			}
		}
		if kind != "" {
			r.kind = kind
		}

		calls := resp.Calls()
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
		results := r.execute(ctx, run)
		msgs = append(resp.Messages, results...)
		if len(wait) > 0 {
			raw, _ := json.Marshal(wait)
			patch[StatePending] = raw
			r.res.Pending = wait
			r.invoked(ctx, resp, nil, patch)
			return r.commit(ctx, StepTools, msgs, patch, kind)
		}
		if err := r.commit(ctx, StepTools, msgs, patch, kind); err != nil {
			return err
		}
	}
}

// served records, in patch, the service's conversation as of resp.
func (r *run) served(ctx context.Context, resp *ChatResponse, patch map[string]json.RawMessage, created bool) error {
	depth, err := r.th.Len(ctx)
	if err != nil {
		return err
	}
	r.conv = conversation{ID: resp.ConversationID, Seen: depth + int64(len(resp.Messages)), Chained: r.caps.Chaining}
	patch[StateConversation], _ = json.Marshal(r.conv)
	if !r.caps.Chaining {
		patch[thread.StateLinear] = json.RawMessage("true")
	}
	if !created {
		return nil
	}
	// The thread has just become service-managed: the providers hear of it.
	info := ThreadInfo{ID: r.th.ID(), Kind: thread.KindService, ServiceID: resp.ConversationID}
	for _, p := range r.a.providers {
		h, ok := p.(ThreadCreatedHook)
		if !ok {
			continue
		}
		st, err := h.ThreadCreated(ctx, info, r.states[p.Name()])
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
	opts := r.a.opts.Chat.Clone()
	if opts == nil {
		opts = new(ChatOptions)
	}
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
			msgs := append([]message.Message(nil), r.extra...)
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
	r.version = r.th.Version()
	msgs := v.Messages
	if r.instr != "" {
		msgs = msgs[1:]
	}
	return msgs, opts, nil
}

func ptr[T any](v T) *T { return &v }

// call makes one request, streamed when the run is.
func (r *run) call(ctx context.Context, msgs []message.Message, opts *ChatOptions) (*ChatResponse, error) {
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
		return nil
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
	c, err := r.th.Commit(context.WithoutCancel(ctx), thread.CommitOptions{
		Messages: msgs, State: patch, Kind: tk, IfVersion: r.version, Metadata: meta,
	})
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

// fail ends a run that got err: the providers hear of it, and the state
// they return is committed on its own.
func (r *run) fail(ctx context.Context, err error) error {
	patch := make(map[string]json.RawMessage)
	r.invoked(ctx, nil, err, patch)
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

// decide runs the approved pending calls and answers the rejected ones.
func (r *run) decide(ctx context.Context) []message.Message {
	byID := make(map[string]Approval, len(r.req.Approvals))
	for _, ap := range r.req.Approvals {
		byID[ap.CallID] = ap
	}
	var approved []message.FunctionCall
	var out []message.Message
	for _, p := range r.pending {
		ap := byID[p.CallID]
		if ap.Approved {
			approved = append(approved, message.FunctionCall{CallID: p.CallID, Name: p.Name, Arguments: p.Arguments})
			continue
		}
		reason := "rejected by the user"
		if ap.Reason != "" {
			reason += ": " + ap.Reason
		}
		out = append(out, message.ToolError(p.CallID, reason))
	}
	return append(out, r.execute(ctx, approved)...)
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
		results[i] = callTool(ctx, r.tools[c.Name], c)
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
	out := make([]message.Message, len(results))
	for i, res := range results {
		out[i] = message.New(message.RoleTool, res)
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
			res = message.FunctionResult{CallID: c.CallID, IsError: true, Result: fmt.Sprintf("tool %s panicked: %v", c.Name, v)}
		}
	}()
	out, err := t.Call(ctx, c.Arguments)
	switch {
	case err != nil && ctx.Err() != nil:
		return aborted(ctx, c.CallID)
	case err != nil:
		return message.FunctionResult{CallID: c.CallID, IsError: true, Result: strings.TrimSpace(err.Error())}
	}
	return message.FunctionResult{CallID: c.CallID, Result: out}
}
