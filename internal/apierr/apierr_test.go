package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/worklog"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		ifMatch bool
		status  int
		code    string
	}{
		{"own error", Errorf(401, "unauthorized", "no key"), false, 401, "unauthorized"},
		{"body too large", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), false, 413, "too_large"},
		{"busy", fmt.Errorf("run: %w", agent.ErrBusy), false, 409, "busy"},
		{"interrupted", fmt.Errorf("run: %w", agent.ErrInterrupted), false, 409, "interrupted"},
		{"approval", agent.ErrApprovalRequired, false, 409, "approval_required"},
		{"round limit", agent.ErrMaxRounds, false, 422, "max_rounds"},
		{"ambiguous", &worklog.AmbiguousError{Query: "fix"}, false, 409, "ambiguous"},
		{"rate limited", &agent.ProviderError{Provider: "openai", StatusCode: 429}, false, 429, "rate_limited"},
		{"provider", &agent.ProviderError{Provider: "openai", StatusCode: 500, Message: "secret account 42"}, false, 502, "provider_error"},
		{"not found", fmt.Errorf("thread x: %w", thread.ErrNotFound), false, 404, "not_found"},
		{"conflict", thread.ErrConflict, false, 409, "conflict"},
		{"conflict with If-Match", thread.ErrConflict, true, 412, "precondition_failed"},
		{"invalid", thread.ErrInvalid, false, 400, "invalid"},
		{"unsupported", thread.ErrUnsupported, false, 501, "unsupported"},
		{"deadline", context.DeadlineExceeded, false, 504, "timeout"},
		{"canceled", context.Canceled, false, StatusClientClosed, "canceled"},
		{"internal", errors.New("pq: connection to 10.0.0.5 refused"), false, 500, Internal},
	} {
		status, code, msg := Classify(tc.err, tc.ifMatch)
		if status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
		if strings.Contains(msg, "10.0.0.5") || strings.Contains(msg, "secret") {
			t.Errorf("%s: internal text sent: %q", tc.name, msg)
		}
	}
}

// TestClassifyStoreOutages: a store that cannot be reached, does not answer
// in time, or is out of disk is the store's trouble, not the server's
// fault: 503 unavailable (which clients may retry) and 507
// insufficient_storage, with a message that names the cause and none of
// the driver's text or addresses.
func TestClassifyStoreOutages(t *testing.T) {
	dial := errors.New("dial tcp 10.0.0.5:5432: i/o timeout")
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
		msg    string
	}{
		{"unreachable", fmt.Errorf("append x: %w", store.Unavailable("cannot reach PostgreSQL", dial)), 503, "unavailable",
			"the store is unavailable: cannot reach PostgreSQL"},
		{"bare sentinel", fmt.Errorf("read: %w: %w", thread.ErrUnavailable, dial), 503, "unavailable", "the store is unavailable"},
		// The store's own deadline, not the client's: still 503.
		{"no answer in time", store.Unavailable("Redis did not answer in time", fmt.Errorf("%w: %w", context.DeadlineExceeded, dial)), 503, "unavailable",
			"the store is unavailable: Redis did not answer in time"},
		{"disk full", fmt.Errorf("apply: %w", store.StorageFull("the disk of the JSON-file store is full", errors.New("write /srv/x: no space left on device"))), 507,
			"insufficient_storage", "the store is out of space: the disk of the JSON-file store is full"},
		{"bare full", thread.ErrStorageFull, 507, "insufficient_storage", "the store is out of space"},
	} {
		status, code, msg := Classify(tc.err, false)
		if status != tc.status || code != tc.code || msg != tc.msg {
			t.Errorf("%s: %d %s %q, want %d %s %q", tc.name, status, code, msg, tc.status, tc.code, tc.msg)
		}
	}
}

// TestClassifyNoConversationID: a service that answered a run of a
// service-managed thread without a conversation id failed as a provider,
// not as the server: 502 provider_error, with the sentinel's text, which
// names no internals.
func TestClassifyNoConversationID(t *testing.T) {
	err := fmt.Errorf("run th_1: %w", agent.ErrNoConversationID)
	status, code, msg := Classify(err, false)
	if status != http.StatusBadGateway || code != "provider_error" || msg != err.Error() {
		t.Errorf("%d %s %q, want 502 provider_error %q", status, code, msg, err.Error())
	}
	if !strings.Contains(msg, agent.ErrNoConversationID.Error()) {
		t.Errorf("%q does not say the service returned no conversation id", msg)
	}
	// Under If-Match too: it is no conflict.
	if status, code, _ := Classify(err, true); status != http.StatusBadGateway || code != "provider_error" {
		t.Errorf("with If-Match: %d %s, want 502 provider_error", status, code)
	}
}

// TestClassifyProviderError checks what a client is told of a model
// provider's error: the provider's name, its HTTP status and its error
// type, each when there is one, and never the provider's own message or
// the error under it, which may echo the request or an account.
func TestClassifyProviderError(t *testing.T) {
	under := errors.New("dial tcp 10.0.0.5:443: secret")
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
		msg    string
	}{
		{"status and type", &agent.ProviderError{Provider: "openai", StatusCode: 500, Type: "server_error", Message: "secret account 42"},
			502, "provider_error", "model provider openai failed with status 500 (server_error)"},
		{"status only", fmt.Errorf("run: %w", &agent.ProviderError{Provider: "anthropic", StatusCode: 503, Message: "secret"}),
			502, "provider_error", "model provider anthropic failed with status 503"},
		{"type only", &agent.ProviderError{Provider: "anthropic", Type: "overloaded_error", Err: under},
			502, "provider_error", "model provider anthropic failed (overloaded_error)"},
		{"neither", &agent.ProviderError{Provider: "gemini", Err: under},
			502, "provider_error", "model provider gemini failed"},
		{"a client error of the provider", &agent.ProviderError{Provider: "openai", StatusCode: 400, Type: "invalid_request_error", Message: "secret prompt"},
			502, "provider_error", "model provider openai failed with status 400 (invalid_request_error)"},
		{"rate limited", fmt.Errorf("step 3: %w", &agent.ProviderError{Provider: "openai", StatusCode: 429, Type: "rate_limit_error", Message: "secret org"}),
			429, "rate_limited", "model provider openai is rate limiting requests; try again later"},
		// A provider's timeout is the provider's, not the client's deadline.
		{"timed out", &agent.ProviderError{Provider: "openai", Err: context.DeadlineExceeded},
			502, "provider_error", "model provider openai failed"},
	} {
		status, code, msg := Classify(tc.err, false)
		if status != tc.status || code != tc.code || msg != tc.msg {
			t.Errorf("%s: %d %s %q, want %d %s %q", tc.name, status, code, msg, tc.status, tc.code, tc.msg)
		}
		if strings.Contains(msg, "secret") || strings.Contains(msg, "10.0.0.5") {
			t.Errorf("%s: the provider's text sent: %q", tc.name, msg)
		}
	}
}
