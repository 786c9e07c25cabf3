package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomthreads/loom/thread"
)

// The thread state keys the agent owns.
const (
	// StateConversation holds a service-managed thread's conversation:
	// {"id": …, "seen": …, "chained": …}; see ServiceID.
	StateConversation = "service/conversation"
	// StatePending holds the tool calls that wait for approval.
	StatePending = "agent/pending"
	// StateRunning holds the approved calls a run has claimed and is
	// running: a second run deciding the same approvals loses the claim
	// before any tool runs, and the run after a crash answers them as
	// aborted.
	StateRunning = "agent/running"
)

// conversation is what the agent keeps about a service's conversation, in
// the thread state so that it is versioned with the messages: forking or
// rolling back a thread whose service chains responses continues from the
// response of that point.
type conversation struct {
	// ID is the conversation id, or the id of the last response for a
	// service that chains responses.
	ID string `json:"id,omitzero"`
	// Seen counts the thread's messages (its depth) that the service has:
	// later ones are sent with the next request.
	Seen int64 `json:"seen"`
	// Chained says that ID names one response, not a whole conversation.
	Chained bool `json:"chained,omitzero"`
}

// IsServiceManaged reports whether th is a service-managed thread: the chat
// service keeps its conversation and loom keeps the id and a mirror.
func IsServiceManaged(th *thread.Thread) bool { return th.Kind() == thread.KindService }

// ServiceID returns the service's id for th's conversation at the handle's
// version: the conversation id, or the last response's id for a service
// that chains responses. It is "" for local and undetermined threads and
// for a service thread whose first run has not happened.
func ServiceID(ctx context.Context, th *thread.Thread) (string, error) {
	st, err := th.State(ctx, 0)
	if err != nil {
		return "", err
	}
	c, err := decodeConversation(st)
	return c.ID, err
}

func decodeConversation(st map[string]json.RawMessage) (conversation, error) {
	var c conversation
	raw, ok := st[StateConversation]
	if !ok {
		return c, nil
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("thread state %s: %v: %w", StateConversation, err, thread.ErrInvalid)
	}
	return c, nil
}

// NewThread creates an undetermined thread: its first run makes it
// service-managed if the service returns a conversation id, local
// otherwise. The agent's context providers give it their initial state.
func (a *Agent) NewThread(ctx context.Context, db *thread.DB, opts thread.CreateOptions) (*thread.Thread, error) {
	opts.Kind = thread.KindUndetermined
	return a.create(ctx, db, opts, "")
}

// NewLocalThread creates a local thread: every run sends its messages (its
// view) and asks the service to keep nothing.
func (a *Agent) NewLocalThread(ctx context.Context, db *thread.DB, opts thread.CreateOptions) (*thread.Thread, error) {
	opts.Kind = thread.KindLocal
	return a.create(ctx, db, opts, "")
}

// NewServiceThread creates a service-managed thread for the conversation
// the service keeps under serviceID, or, with serviceID "", one that the
// first run starts. Such a thread cannot start with messages of its own
// (they would not be in the service's conversation): opts.Messages must be
// empty (thread.ErrInvalid). It fails with ErrServiceThreads when the
// agent's client cannot keep conversations.
func (a *Agent) NewServiceThread(ctx context.Context, db *thread.DB, serviceID string, opts thread.CreateOptions) (*thread.Thread, error) {
	if a.err != nil {
		return nil, a.err
	}
	if !a.client.Capabilities().ServiceThreads {
		return nil, ErrServiceThreads
	}
	if len(opts.Messages) > 0 {
		return nil, fmt.Errorf("new service thread: a service id and local messages: %w", thread.ErrInvalid)
	}
	opts.Kind = thread.KindService
	return a.create(ctx, db, opts, serviceID)
}

func (a *Agent) create(ctx context.Context, db *thread.DB, opts thread.CreateOptions, serviceID string) (*thread.Thread, error) {
	if a.err != nil {
		return nil, a.err
	}
	if db == nil {
		return nil, fmt.Errorf("new thread: no DB: %w", thread.ErrInvalid)
	}
	state := make(map[string]json.RawMessage, len(opts.State)+len(a.providers)+1)
	for k, v := range opts.State {
		state[k] = v
	}
	if serviceID != "" {
		caps := a.client.Capabilities()
		c := conversation{ID: serviceID, Chained: caps.Chaining}
		raw, _ := json.Marshal(c)
		state[StateConversation] = raw
		if !caps.Chaining {
			state[thread.StateLinear] = json.RawMessage("true")
		}
	}
	if opts.ID == "" {
		opts.ID = thread.NewThreadID()
	}
	info := ThreadInfo{ID: opts.ID, Kind: opts.Kind, ServiceID: serviceID}
	for _, p := range a.providers {
		h, ok := p.(ThreadCreatedHook)
		if !ok {
			continue
		}
		key := stateKey(p)
		st, err := callThreadCreated(ctx, h, info, state[key])
		if err != nil {
			return nil, fmt.Errorf("new thread: context provider %s: %w", p.Name(), err)
		}
		if st != nil {
			state[key] = st
		}
	}
	if len(state) > 0 {
		opts.State = state
	}
	return db.Create(ctx, opts)
}
