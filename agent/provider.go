package agent

import (
	"context"
	"encoding/json"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ContextProvider adds context to the runs of an agent: instructions,
// messages and tools, computed for each run. Providers live on the agent
// and hold no per-thread data themselves: what they remember about a
// thread is their state, a JSON value the agent keeps in the thread's
// state under "ctx/<Name>", so that it is versioned with the messages and
// travels with the thread when it is saved, loaded, forked or copied.
//
// A provider may also implement ThreadCreatedHook and InvokedHook.
type ContextProvider interface {
	// Name names the provider's state key: letters, digits, '_', '-', '.'.
	Name() string
	// Invoking is called before each run's first model request with the
	// provider's state; what it returns joins the run's request.
	Invoking(ctx context.Context, inv Invocation) (*Context, error)
}

// ThreadCreatedHook is a ContextProvider told about new threads: when the
// agent creates one, and when a thread becomes service-managed (serviceID
// is then the service's conversation id). It returns the provider's state
// for the thread (nil keeps the state it was given).
type ThreadCreatedHook interface {
	ThreadCreated(ctx context.Context, info ThreadInfo, state json.RawMessage) (json.RawMessage, error)
}

// InvokedHook is a ContextProvider told how each run ended: its request,
// the final response or the error. It returns the provider's new state for
// the thread (nil keeps the state it was given), which the agent commits
// with the run's last step.
type InvokedHook interface {
	Invoked(ctx context.Context, inv Invoked) (json.RawMessage, error)
}

// ThreadInfo describes the thread a provider is called for.
type ThreadInfo struct {
	// ID is the loom thread id.
	ID string
	// Kind is the thread's kind as the run sees it.
	Kind thread.Kind
	// ServiceID is the service's conversation id, "" if none.
	ServiceID string
}

// Invocation is what Invoking gets.
type Invocation struct {
	Thread ThreadInfo
	// Input are the run's new messages.
	Input []message.Message
	// State is the provider's state for the thread, nil if none.
	State json.RawMessage
}

// Context is what a provider adds to a run.
type Context struct {
	// Instructions are appended to the agent's instructions.
	Instructions string
	// Messages are sent after the instructions and before the thread's
	// messages; they are not stored in the thread. On a service-managed
	// thread they go with the run's first request only, and the service
	// keeps them in its conversation.
	Messages []message.Message
	// Tools join the agent's tools for this run.
	Tools []Tool
}

// Invoked is what InvokedHook.Invoked gets.
type Invoked struct {
	Thread ThreadInfo
	// Input are the run's new messages.
	Input []message.Message
	// Response is the run's last response, nil if there was none.
	Response *ChatResponse
	// Err is why the run failed, nil if it did not.
	Err error
	// State is the provider's state for the thread, nil if none.
	State json.RawMessage
}

// stateKey is where a provider's state lives in a thread's state.
func stateKey(p ContextProvider) string { return "ctx/" + p.Name() }
