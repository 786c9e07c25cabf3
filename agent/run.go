package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ErrMaxRounds is returned by a run whose model still called tools after
// MaxRounds rounds and a last request without tools. The calls are
// committed with error results that say so.
var ErrMaxRounds = errors.New("tool round limit reached")

// errStopped is the cause of a streamed run's cancellation when its
// consumer stopped iterating.
var errStopped = fmt.Errorf("stream consumer stopped: %w", context.Canceled)

// maxReasonLen caps an approval's reason, which becomes a tool result.
const maxReasonLen = 4096

type run struct {
	a    *Agent
	th   *thread.Thread
	req  Request
	emit func(Event) bool

	res     *Result
	caps    Capabilities
	kind    thread.Kind
	version int64
	conv    conversation
	input   []message.Message
	minted  map[string]bool            // the input ids the run made (message.NewID)
	states  map[string]json.RawMessage // provider name → state
	instr   string
	extra   []message.Message
	sent    bool // a request of this run was sent
	tools   map[string]Tool
	specs   []ToolSpec
	rounds  int
	meta    map[string]string
	pending []PendingCall
	orphans []PendingCall // claimed calls of a run that stopped
}

func (a *Agent) invoke(ctx context.Context, th *thread.Thread, req Request, emit func(Event) bool) (res *Result, err error) {
	if a.err != nil {
		return nil, a.err
	}
	if th == nil {
		return nil, fmt.Errorf("run: no thread: %w", thread.ErrInvalid)
	}
	ctx, span := a.startRun(ctx, th.ID())
	if span != nil {
		defer func() { endRun(span, res, err) }()
	}
	rctx, release, err := acquire(ctx, th.DB(), th.ID(), req.OnBusy)
	if err != nil {
		return nil, err
	}
	defer release()
	if rctx.Err() != nil {
		return nil, fmt.Errorf("run on %s: %w", th.ID(), context.Cause(rctx))
	}
	// The run's own cancel, for a stream consumer that stops; the slot's
	// cancel (an interrupt) reaches rctx through its parent.
	rctx, cancel := context.WithCancelCause(rctx)
	defer cancel(nil)
	r := &run{a: a, th: th, req: req, caps: a.client.Capabilities()}
	if emit != nil {
		r.emit = func(e Event) bool {
			if !emit(e) {
				cancel(errStopped)
				return false
			}
			return true
		}
	}
	if err := r.prepare(rctx); err != nil {
		return nil, fmt.Errorf("run on %s: %w", th.ID(), withCause(rctx, err))
	}
	err = r.loop(rctx)
	if err != nil {
		err = fmt.Errorf("run on %s: %w", th.ID(), withCause(rctx, err))
	}
	return r.res, err
}

// withCause returns err, an error of a run whose context is ctx, carrying
// the cause of ctx's end when ctx has ended and err does not say why: a
// store or a tool that was cancelled answers context.Canceled, which would
// tell a client whose run was interrupted by another (ErrInterrupted, 409)
// that it had gone away itself (499).
func withCause(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if errors.Is(err, cause) || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w (%v)", cause, err)
}

// prepare checks everything that can be checked before the run changes
// anything, and asks the context providers for their context. Nothing the
// run does after it (run an approved tool, call the model) may be wasted on
// input that a commit would refuse.
func (r *run) prepare(ctx context.Context) error {
	if err := r.th.Refresh(ctx); err != nil {
		return err
	}
	r.kind, r.version = r.th.Kind(), r.th.Version()
	if r.kind == thread.KindService && !r.caps.ServiceThreads {
		return ErrServiceThreads
	}
	r.input = make([]message.Message, len(r.req.Input))
	for i, m := range r.req.Input {
		m = m.Clone()
		if m.ID == "" {
			m.ID = message.NewID()
			if r.minted == nil {
				r.minted = make(map[string]bool, len(r.req.Input))
			}
			r.minted[m.ID] = true
		}
		r.input[i] = m
	}
	st, err := r.th.State(ctx, 0)
	if err != nil {
		return err
	}
	if r.conv, err = decodeConversation(st); err != nil {
		return err
	}
	if r.kind == thread.KindService && r.conv.ID != "" && r.conv.Chained != r.caps.Chaining {
		return fmt.Errorf("the thread's service id %q was made by a client that %s responses by id, and this one does not: %w",
			r.conv.ID, map[bool]string{true: "chains", false: "does not chain"}[r.conv.Chained], ErrServiceThreads)
	}
	r.states = make(map[string]json.RawMessage, len(r.a.providers))
	for _, p := range r.a.providers {
		if s, ok := st[stateKey(p)]; ok {
			r.states[p.Name()] = s
		}
	}
	if r.pending, err = decodeCalls(st, StatePending); err != nil {
		return err
	}
	if r.orphans, err = decodeCalls(st, StateRunning); err != nil {
		return err
	}
	if err := r.checkApprovals(); err != nil {
		return err
	}
	if len(r.pending) == 0 && len(r.input) == 0 {
		n, err := r.th.Len(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no input and an empty thread: %w", thread.ErrInvalid)
		}
	}
	r.res = &Result{RunID: ids.New("run_"), Version: r.version}
	r.meta = make(map[string]string, len(r.req.Metadata)+2)
	maps.Copy(r.meta, r.req.Metadata)
	r.meta["run"] = r.res.RunID
	if r.a.opts.Name != "" {
		r.meta["agent"] = r.a.opts.Name
	}
	// The input is checked as the input commit will check it (each message,
	// sizes, repeated ids), with the metadata the commits will carry (two
	// more keys).
	check := maps.Clone(r.meta)
	check["step"], check["response"] = string(StepApprovals), "resp"
	if err := r.th.DB().CheckCommit(thread.CommitOptions{Messages: r.input, Metadata: check}); err != nil {
		return err
	}
	return r.invoking(ctx)
}

func decodeCalls(st map[string]json.RawMessage, key string) ([]PendingCall, error) {
	raw, ok := st[key]
	if !ok {
		return nil, nil
	}
	var p []PendingCall
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("thread state %s: %v: %w", key, err, thread.ErrInvalid)
	}
	return p, nil
}

func (r *run) checkApprovals() error {
	if len(r.pending) == 0 {
		if len(r.req.Approvals) > 0 {
			return fmt.Errorf("approvals given, but no tool call waits for one: %w", thread.ErrInvalid)
		}
		return nil
	}
	decided := make(map[string]bool, len(r.req.Approvals))
	for _, ap := range r.req.Approvals {
		if decided[ap.CallID] {
			return fmt.Errorf("two decisions for call %q: %w", ap.CallID, thread.ErrInvalid)
		}
		if !utf8.ValidString(ap.Reason) || len(ap.Reason) > maxReasonLen {
			return fmt.Errorf("approval reason for %q: at most %d bytes of UTF-8: %w", ap.CallID, maxReasonLen, thread.ErrInvalid)
		}
		decided[ap.CallID] = true
	}
	var missing []string
	for _, p := range r.pending {
		if !decided[p.CallID] {
			missing = append(missing, p.CallID)
		}
		delete(decided, p.CallID)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: no decision for %s", ErrApprovalRequired, strings.Join(missing, ", "))
	}
	for id := range decided {
		return fmt.Errorf("approval for %q, which does not wait for one: %w", id, thread.ErrInvalid)
	}
	return nil
}

func (r *run) info() ThreadInfo {
	return ThreadInfo{ID: r.th.ID(), Kind: r.kind, ServiceID: r.conv.ID}
}

// invoking runs the providers' Invoking hooks concurrently and merges what
// they return in the providers' order.
func (r *run) invoking(ctx context.Context) error {
	ps := r.a.providers
	out := make([]*Context, len(ps))
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		inv := Invocation{Thread: r.info(), Input: r.input, State: r.states[p.Name()]}
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					errs[i] = fmt.Errorf("panic: %v", v)
				}
			}()
			out[i], errs[i] = p.Invoking(ctx, inv)
		})
	}
	wg.Wait()
	instr := []string{}
	if r.a.opts.Instructions != "" {
		instr = append(instr, r.a.opts.Instructions)
	}
	r.tools, r.specs = r.a.tools, r.a.specs
	for i, p := range ps {
		if errs[i] != nil {
			return fmt.Errorf("context provider %s: %w", p.Name(), errs[i])
		}
		c := out[i]
		if c == nil {
			continue
		}
		if c.Instructions != "" {
			instr = append(instr, c.Instructions)
		}
		for _, m := range c.Messages {
			if err := m.Validate(); err != nil {
				return fmt.Errorf("context provider %s: %v: %w", p.Name(), err, thread.ErrInvalid)
			}
			r.extra = append(r.extra, m)
		}
		if len(c.Tools) > 0 {
			if len(r.tools) == len(r.a.tools) {
				r.tools = maps.Clone(r.a.tools)
				r.specs = append([]ToolSpec(nil), r.a.specs...)
			}
			for _, t := range c.Tools {
				if err := addTool(r.tools, t); err != nil {
					return fmt.Errorf("context provider %s: %w", p.Name(), err)
				}
				r.specs = append(r.specs, t.Spec())
			}
		}
	}
	r.instr = strings.Join(instr, "\n\n")
	if len(r.specs) > 0 && !r.caps.Tools {
		return fmt.Errorf("the agent has tools and its client does not take tools: %w", thread.ErrUnsupported)
	}
	return nil
}
