package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/internal/jsonerr"
	"github.com/loomthreads/loom/internal/jsonguard"
	"github.com/loomthreads/loom/thread"
)

// The error types of OpenAI's error shape.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePermission     = "permission_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
)

// Error is an error this package makes itself, answered as it is. Its
// message is always safe to send.
type Error struct {
	Status  int
	Type    string
	Code    string // "" sends null
	Param   string // "" sends null
	Message string
}

func (e *Error) Error() string { return e.Message }

// invalidParam is a 400 about param ("" for none).
func invalidParam(param, format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// unsupported is a 400 for what loom does not do of the API: the message
// says so, so that nobody takes it for their own mistake.
func unsupported(param, format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_parameter", Param: param,
		Message: "loom does not support " + fmt.Sprintf(format, args...)}
}

// notFound is OpenAI's 404 for an object of kind ("Conversation") and id.
func notFound(kind, id string) error {
	return &Error{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found",
		Message: fmt.Sprintf("%s with id '%s' not found.", kind, clip(id))}
}

type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// typeOf is the error type OpenAI gives a status.
func typeOf(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return typeInvalidRequest // as OpenAI answers a bad key
	case status == http.StatusForbidden:
		return typePermission
	case status == http.StatusTooManyRequests:
		return typeRateLimit
	case status >= 500:
		return typeServer
	}
	return typeInvalidRequest
}

// writeError answers r with err: this package's own *Error as it is, any
// other through loom's one error table (internal/apierr). A 500 is logged
// with the real error and sent as a generic message with the request id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		status, code, msg := apierr.Classify(err, false)
		if status == http.StatusInternalServerError {
			id := httpapi.RequestID(r.Context())
			s.log.ErrorContext(r.Context(), "openai api: internal error", "method", r.Method, "path", r.URL.Path, "request_id", id, "err", err)
			msg = "The server had an error while processing your request (request id " + id + ")."
		}
		e = &Error{Status: status, Type: typeOf(status), Code: code, Message: msg}
	}
	if e.Type == "" {
		e.Type = typeOf(e.Status)
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	if errors.Is(err, thread.ErrDuplicateID) {
		// The SDKs retry a 409 twice unless told not to; an id the thread
		// holds already stays taken.
		w.Header().Set("X-Should-Retry", "false")
	}
	writeJSON(w, e.Status, errorBody{errorJSON{Message: e.Message, Type: e.Type, Param: orNull(e.Param), Code: orNull(e.Code)}})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":{"message":"The server could not encode its answer.","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// maxBodyDepth caps how deeply a body may nest: a thread's default JSON
// depth (128) plus the request's own levels.
const maxBodyDepth = 128 + 16

// decode reads r's body, one JSON object, into v, refusing unknown members
// as OpenAI refuses an unknown parameter. An empty body is an error unless
// optional.
func decode(r *http.Request, v any, optional bool) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return invalidParam("", "The request body could not be read.")
	}
	return decodeBytes(data, v, optional)
}

// decodeBytes is decode of data.
func decodeBytes(data []byte, v any, optional bool) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return invalidParam("", "The request body is empty: a JSON object is required.")
	}
	if trimmed[0] != '{' {
		return invalidParam("", "The request body must be a JSON object.")
	}
	if err := jsonguard.Check(data, maxBodyDepth); err != nil {
		return invalidParam("", "The request body is not valid JSON: %v.", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var unknown string
		if _, err := fmt.Sscanf(err.Error(), "json: unknown field %q", &unknown); err == nil {
			return invalidParam(unknown, "Unknown parameter: '%s'.", clip(unknown))
		}
		return invalidParam("", "The request body is not valid: %s.", jsonerr.Describe(v, err))
	}
	if dec.More() {
		return invalidParam("", "The request body holds more than one JSON value.")
	}
	return nil
}

// Errors rewrites the error answers of loom's middleware (a missing or
// wrong key, a body over the limit, a refused origin), which have loom's
// shape {"error":{"code","message"}}, into OpenAI's, so that an SDK reads
// every error under Prefix the same way. Answers that are not errors pass
// through untouched and unbuffered.
func Errors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &errorWriter{ResponseWriter: w}
		h.ServeHTTP(ew, r)
		ew.finish()
	})
}

// errorWriter buffers a 4xx or 5xx answer whose body has loom's error
// shape and writes it in OpenAI's.
type errorWriter struct {
	http.ResponseWriter
	status int
	buf    *bytes.Buffer // the error body, while it is buffered
}

func (e *errorWriter) WriteHeader(code int) {
	if e.status != 0 {
		return
	}
	e.status = code
	if code >= 400 && strings.HasPrefix(e.Header().Get("Content-Type"), "application/json") {
		e.buf = &bytes.Buffer{}
		return
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *errorWriter) Write(p []byte) (int, error) {
	if e.status == 0 {
		e.WriteHeader(http.StatusOK)
	}
	if e.buf != nil {
		e.buf.Write(p)
		if e.buf.Len() > 1<<16 {
			return 0, errors.New("openaiapi: error body too large")
		}
		return len(p), nil
	}
	return e.ResponseWriter.Write(p)
}

// Flush lets streamed answers through.
func (e *errorWriter) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok && e.buf == nil {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (e *errorWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// finish writes a buffered loom error in OpenAI's shape; called once the
// wrapped handler has returned.
func (e *errorWriter) finish() {
	if e.buf == nil {
		return
	}
	var loom struct {
		Error struct {
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Type    *string `json:"type"`
		} `json:"error"`
	}
	body := e.buf.Bytes()
	e.buf = nil
	// An answer with a type is OpenAI's shape already (this package's own).
	if json.Unmarshal(body, &loom) != nil || loom.Error.Message == "" || loom.Error.Type != nil {
		e.ResponseWriter.WriteHeader(e.status)
		e.ResponseWriter.Write(body)
		return
	}
	code := loom.Error.Code
	if e.status == http.StatusUnauthorized {
		code = "invalid_api_key"
	}
	e.Header().Del("Content-Length")
	writeJSON(e.ResponseWriter, e.status, errorBody{errorJSON{Message: loom.Error.Message, Type: typeOf(e.status), Code: orNull(code)}})
}
