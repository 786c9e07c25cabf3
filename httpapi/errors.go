package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/thread"
)

// apiError is this package's own error: a request that failed before it
// reached package thread (a body that is not JSON, a missing key, a refused
// origin). Its message is always safe to send.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errf(status int, code, format string, args ...any) error {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// invalidf is a bad query parameter or path value: a thread.ErrInvalid, so
// that it is mapped like every other bad input.
func invalidf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, thread.ErrInvalid)...)
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

// errorTable maps errors to HTTP statuses and codes, first match wins. It is
// the only place that does: every handler returns its error and the
// server's error writer looks it up here. Rows that wrap others come first
// (agent.ErrApprovalRequired wraps thread.ErrInvalid).
var errorTable = []errorRow{
	{
		match: func(err error) bool { var e *apiError; return errors.As(err, &e) },
		reply: func(err error, _ bool) (int, string, string) {
			var e *apiError
			errors.As(err, &e)
			return e.status, e.code, e.msg
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
	sentinel(agent.ErrApprovalRequired, http.StatusConflict, "approval_required"),
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
			if ifMatch {
				return http.StatusPreconditionFailed, "precondition_failed", err.Error()
			}
			return http.StatusConflict, "conflict", err.Error()
		},
	},
	sentinel(thread.ErrInvalid, http.StatusBadRequest, "invalid"),
	sentinel(thread.ErrUnsupported, http.StatusNotImplemented, "unsupported"),
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
			return statusClientClosed, "canceled", "the request was canceled"
		},
	},
}

// statusClientClosed is the status logged for a request whose client went
// away before it was answered (nginx's 499).
const statusClientClosed = 499

// classify looks err up in errorTable. Anything it does not know is a 500
// with a generic message: internal error text never reaches a client.
func classify(err error, ifMatch bool) (status int, code, msg string) {
	for _, row := range errorTable {
		if row.match(err) {
			return row.reply(err, ifMatch)
		}
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

// errorBody is the one shape of every error response.
type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers r with err, mapped by the error table. A 500 is logged
// with the real error and the request id, and sent as a generic message
// that names the request id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := s.reportError(r, err)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="loom"`)
	}
	writeJSON(w, status, errorBody{errorJSON{Code: code, Message: msg}})
}

// reportError classifies err, counts conflicts, logs internal errors and
// records err for the access log. It returns what the client is told.
func (s *Server) reportError(r *http.Request, err error) (status int, code, msg string) {
	status, code, msg = classify(err, r.Header.Get("If-Match") != "")
	if errors.Is(err, thread.ErrConflict) {
		s.metrics.Conflict()
	}
	info := infoOf(r.Context())
	if info != nil {
		info.err = err
	}
	if status >= 500 && code == "internal" {
		id := ""
		if info != nil {
			id = info.id
		}
		s.log.ErrorContext(r.Context(), "internal error", "request_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error"
		if id != "" {
			msg = "internal error (request " + id + ")"
		}
	}
	return status, code, msg
}
