// Package apierr is the one table that maps loom's errors to what a client
// is told — an HTTP status, a code and a message — shared by the HTTP API and
// the MCP server so that the two faces say the same thing for the same
// error. Sentinel errors of packages thread and agent name ids and limits,
// never internals, so their text is sent; anything the table does not know
// is an internal error whose text stays in the server's log.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
	"github.com/loomthreads/loom/worklog"
)

// Error is an error a server face made itself, before its request reached
// package thread (a body that is not JSON, a missing key, a refused
// origin), with the status and code to answer it with. Its message is
// always safe to send.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Errorf returns an *Error.
func Errorf(status int, code, format string, args ...any) error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// errorRow is one row of the error table.
type errorRow struct {
	// match reports whether the row applies to err.
	match func(err error) bool
	// status and code answer a request that failed with err; ifMatch
	// says whether the request carried If-Match.
	reply func(err error, ifMatch bool) (status int, code, msg string)
}

// sentinel matches errors.Is(err, target) and sends the error's text, which
// for package thread's and package agent's sentinels names ids and limits,
// never internals.
func sentinel(target error, status int, code string) errorRow {
	return errorRow{
		match: func(err error) bool { return errors.Is(err, target) },
		reply: func(err error, _ bool) (int, string, string) { return status, code, err.Error() },
	}
}

// outage matches errors.Is(err, kind) and sends msg, followed by the
// Reason of the *thread.StoreError that err holds, if any.
func outage(kind error, status int, code, msg string) errorRow {
	return errorRow{
		match: func(err error) bool { return errors.Is(err, kind) },
		reply: func(err error, _ bool) (int, string, string) {
			var se *thread.StoreError
			if errors.As(err, &se) && se.Kind == kind && se.Reason != "" {
				return status, code, msg + ": " + se.Reason
			}
			return status, code, msg
		},
	}
}

// errorTable maps errors to HTTP statuses and codes, first match wins. It is
// the only place that does: every handler returns its error and the
// server's error writer looks it up here. Rows that wrap others come first
// (agent.ErrApprovalRequired wraps thread.ErrInvalid).
var errorTable = []errorRow{
	{
		match: func(err error) bool { var e *Error; return errors.As(err, &e) },
		reply: func(err error, _ bool) (int, string, string) {
			var e *Error
			errors.As(err, &e)
			return e.Status, e.Code, e.Msg
		},
	},
	{
		match: func(err error) bool { var e *http.MaxBytesError; return errors.As(err, &e) },
		reply: func(err error, _ bool) (int, string, string) {
			var e *http.MaxBytesError
			errors.As(err, &e)
			return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over the limit of %d bytes", e.Limit)
		},
	},
	sentinel(agent.ErrBusy, http.StatusConflict, "busy"),
	sentinel(agent.ErrInterrupted, http.StatusConflict, "interrupted"),
	sentinel(agent.ErrMaxRounds, http.StatusUnprocessableEntity, "max_rounds"),
	sentinel(agent.ErrNoConversationID, http.StatusBadGateway, "provider_error"),
	sentinel(agent.ErrApprovalRequired, http.StatusConflict, "approval_required"),
	// A workflow another runner holds, a name no workflow is registered
	// under, a server that is shutting down its workflow runs.
	sentinel(workflow.ErrBusy, http.StatusConflict, "busy"),
	sentinel(workflow.ErrUnknown, http.StatusNotFound, "unknown_workflow"),
	sentinel(workflow.ErrClosed, http.StatusServiceUnavailable, "shutting_down"),
	// A text that matches several work items: the message lists them.
	sentinel(worklog.ErrAmbiguous, http.StatusConflict, "ambiguous"),
	{
		match: func(err error) bool { var e *agent.ProviderError; return errors.As(err, &e) },
		reply: func(err error, _ bool) (int, string, string) {
			var e *agent.ProviderError
			errors.As(err, &e)
			if e.StatusCode == http.StatusTooManyRequests {
				return http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("model provider %s is rate limiting requests; try again later", e.Provider)
			}
			// The provider's own message may echo the request or an
			// account id: only its status and error type are sent.
			msg := fmt.Sprintf("model provider %s failed", e.Provider)
			if e.StatusCode != 0 {
				msg += fmt.Sprintf(" with status %d", e.StatusCode)
			}
			if e.Type != "" {
				msg += fmt.Sprintf(" (%s)", e.Type)
			}
			return http.StatusBadGateway, "provider_error", msg
		},
	},
	sentinel(thread.ErrNotFound, http.StatusNotFound, "not_found"),
	{
		match: func(err error) bool { return errors.Is(err, thread.ErrConflict) },
		reply: func(err error, ifMatch bool) (int, string, string) {
			// A message id the thread holds is no version that moved: 409
			// even under If-Match.
			if ifMatch && !errors.Is(err, thread.ErrDuplicateID) {
				return http.StatusPreconditionFailed, "precondition_failed", err.Error()
			}
			return http.StatusConflict, "conflict", err.Error()
		},
	},
	sentinel(thread.ErrInvalid, http.StatusBadRequest, "invalid"),
	sentinel(thread.ErrUnsupported, http.StatusNotImplemented, "unsupported"),
	// The store's trouble, not the server's fault: its server is down,
	// partitioned or past the store's deadline (503, which the HTTP error
	// writer sends with Retry-After), or its disk is full (507). Only a
	// StoreError's Reason is sent: the rest is the driver's text. These
	// rows come before the deadline's: a store's own deadline wraps
	// context.DeadlineExceeded too.
	outage(thread.ErrUnavailable, http.StatusServiceUnavailable, "unavailable", "the store is unavailable"),
	outage(thread.ErrStorageFull, http.StatusInsufficientStorage, "insufficient_storage", "the store is out of space"),
	{
		match: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) },
		reply: func(error, bool) (int, string, string) {
			return http.StatusGatewayTimeout, "timeout", "the request took too long"
		},
	},
	{
		// The client went away; nobody reads the answer, but the log and
		// the metrics should not count it as the server's fault.
		match: func(err error) bool { return errors.Is(err, context.Canceled) },
		reply: func(error, bool) (int, string, string) {
			return StatusClientClosed, "canceled", "the request was canceled"
		},
	},
}

// StatusClientClosed is the status logged for a request whose client went
// away before it was answered (nginx's 499).
const StatusClientClosed = 499

// Internal is the code of an error the table does not know: the server's
// fault, whose text is logged and never sent.
const Internal = "internal"

// Classify looks err up in the table and returns the HTTP status, the code
// and the message a client is told; ifMatch says whether the request was
// conditional (a conflict is then 412). Anything the table does not know
// is a 500 with code Internal and a generic message: internal error text
// never reaches a client.
func Classify(err error, ifMatch bool) (status int, code, msg string) {
	for _, row := range errorTable {
		if row.match(err) {
			return row.reply(err, ifMatch)
		}
	}
	return http.StatusInternalServerError, Internal, "internal error"
}
