package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// errf is this package's own error: a request that failed before it
// reached package thread (a body that is not JSON, a missing key, a refused
// origin). Its message is always safe to send.
func errf(status int, code, format string, args ...any) error {
	return apierr.Errorf(status, code, format, args...)
}

// invalidf is a bad query parameter or path value: a thread.ErrInvalid, so
// that it is mapped like every other bad input.
func invalidf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, thread.ErrInvalid)...)
}

// errorBody is the one shape of every error response.
type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Candidates are the work items a text matched, whole, for an
	// ambiguous resolution (code "ambiguous"): the client picks one by
	// its id. Other errors have none.
	Candidates []worklog.Item `json:"candidates,omitzero"`
}

// retryAfter is the Retry-After, in seconds, of a 503 (code
// "unavailable"): long enough for a store's server to restart or a
// partition to heal, short next to the store's deadlines.
const retryAfter = "5"

// writeError answers r with err, mapped by the error table. A 500 is logged
// with the real error and the request id, and sent as a generic message
// that names the request id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := s.reportError(r, err)
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="loom"`)
	case http.StatusServiceUnavailable:
		// The store is down or did not answer in time: a client may try
		// again, not at once.
		w.Header().Set("Retry-After", retryAfter)
	}
	body := errorBody{errorJSON{Code: code, Message: msg}}
	var amb *worklog.AmbiguousError
	if code == "ambiguous" && errors.As(err, &amb) {
		body.Error.Candidates = orEmpty(amb.Candidates)
	}
	writeJSON(w, status, body)
}

// reportError classifies err, counts conflicts, logs internal errors and
// records err for the access log. It returns what the client is told.
func (s *Server) reportError(r *http.Request, err error) (status int, code, msg string) {
	// The error table of internal/apierr, shared with the MCP server: the
	// only place errors become statuses and codes.
	status, code, msg = apierr.Classify(err, r.Header.Get("If-Match") != "")
	if errors.Is(err, thread.ErrConflict) {
		s.metrics.Conflict()
	}
	info := infoOf(r.Context())
	if info != nil {
		info.err = err
	}
	if status >= 500 && code == apierr.Internal {
		id := ""
		if info != nil {
			id = info.id
		}
		s.log.ErrorContext(r.Context(), "internal error", append(traceIDs(r.Context()), "request_id", id, "method", r.Method, "path", r.URL.Path, "err", err)...)
		msg = "internal error"
		if id != "" {
			msg = "internal error (request " + id + ")"
		}
	}
	return status, code, msg
}
