package agent

import (
	"errors"
	"fmt"

	"github.com/loomthreads/loom/thread"
)

var (
	// ErrBusy is returned by a run on a thread that another run through
	// the same thread.DB is running, when the run's OnBusy is Reject (the default).
	ErrBusy = errors.New("thread is running")
	// ErrInterrupted is the cause of a run's cancellation when a later run
	// with OnBusy Interrupt took its place.
	ErrInterrupted = errors.New("run interrupted by a later run")
	// ErrApprovalRequired is returned by a run on a thread that waits for
	// tool approvals when the run does not decide every pending call.
	// Nothing is changed.
	ErrApprovalRequired = fmt.Errorf("tool calls wait for approval: %w", thread.ErrInvalid)
	// ErrNoConversationID is returned when a service-managed thread's
	// response carries no conversation id, so the service kept nothing the
	// next run could continue.
	ErrNoConversationID = errors.New("service returned no conversation id for a service-managed thread")
	// ErrServiceThreads is returned, before any request, by a run of a
	// service-managed thread on a client whose Capabilities lack
	// ServiceThreads, and by NewServiceThread on such an agent.
	ErrServiceThreads = fmt.Errorf("client does not support service-managed threads: %w", thread.ErrUnsupported)
)

// ProviderError is an error that a model provider returned: an HTTP status
// with the provider's error type and message. Providers wrap the SDK's error
// in it, so callers can tell rate limits and bad requests apart without
// importing the SDKs.
type ProviderError struct {
	// Provider names the provider, such as "openai".
	Provider string
	// StatusCode is the HTTP status, 0 if the request never got one.
	StatusCode int
	// Type is the provider's error type or code, such as
	// "rate_limit_error".
	Type string
	// Message is the provider's message.
	Message string
	// Err is the underlying error.
	Err error
}

func (e *ProviderError) Error() string {
	s := e.Provider
	if e.StatusCode != 0 {
		s += fmt.Sprintf(" %d", e.StatusCode)
	}
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Temporary reports whether trying again later may succeed: rate limits,
// timeouts and server errors.
func (e *ProviderError) Temporary() bool {
	return e.StatusCode == 408 || e.StatusCode == 409 || e.StatusCode == 429 || e.StatusCode >= 500
}
