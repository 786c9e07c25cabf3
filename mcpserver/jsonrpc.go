package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/jsonerr"
	"github.com/loomthreads/loom/internal/jsonguard"
)

// The JSON-RPC 2.0 error codes that /mcp answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	// codeServerError is JSON-RPC's first implementation-defined server
	// error: an outage of loom's (503 "unavailable", 507
	// "insufficient_storage"), whose message starts with that code.
	codeServerError = -32000
)

// maxBodyDepth bounds how deeply the JSON of one request may nest: the
// envelope's few levels and a message's own (thread state, tool
// arguments), with room to spare. Deeper input is refused before it is
// decoded, so that no decoder pays for it.
const maxBodyDepth = 256

// protocol20260728 is the MCP version from which an unknown method is a
// 404 and invalid params a 400 (SEP-2575); before it, the transport answers
// a request with its response, an error included, in a 200.
const protocol20260728 = "2026-07-28"

// serverMethods are the methods a client may send loom's MCP server: the
// requests and notifications of the MCP versions the SDK speaks, with the
// SDK's type of their params. A request for another method is -32601
// without reaching the SDK.
var serverMethods = map[string]struct {
	notification, needsParams bool
	params                    func() any
}{
	"initialize":                       {needsParams: true, params: func() any { return new(mcp.InitializeParams) }},
	"ping":                             {params: func() any { return new(mcp.PingParams) }},
	"server/discover":                  {params: func() any { return new(mcp.DiscoverParams) }},
	"tools/list":                       {params: func() any { return new(mcp.ListToolsParams) }},
	"tools/call":                       {needsParams: true, params: func() any { return new(mcp.CallToolParamsRaw) }},
	"prompts/list":                     {params: func() any { return new(mcp.ListPromptsParams) }},
	"prompts/get":                      {needsParams: true, params: func() any { return new(mcp.GetPromptParams) }},
	"resources/list":                   {params: func() any { return new(mcp.ListResourcesParams) }},
	"resources/templates/list":         {params: func() any { return new(mcp.ListResourceTemplatesParams) }},
	"resources/read":                   {needsParams: true, params: func() any { return new(mcp.ReadResourceParams) }},
	"resources/subscribe":              {needsParams: true, params: func() any { return new(mcp.SubscribeParams) }},
	"resources/unsubscribe":            {needsParams: true, params: func() any { return new(mcp.UnsubscribeParams) }},
	"subscriptions/listen":             {needsParams: true, params: func() any { return new(mcp.SubscriptionsListenParams) }},
	"completion/complete":              {needsParams: true, params: func() any { return new(mcp.CompleteParams) }},
	"logging/setLevel":                 {needsParams: true, params: func() any { return new(mcp.SetLoggingLevelParams) }},
	"notifications/initialized":        {notification: true, params: func() any { return new(mcp.InitializedParams) }},
	"notifications/cancelled":          {notification: true, params: func() any { return new(mcp.CancelledParams) }},
	"notifications/progress":           {notification: true, needsParams: true, params: func() any { return new(mcp.ProgressNotificationParams) }},
	"notifications/roots/list_changed": {notification: true, params: func() any { return new(mcp.RootsListChangedParams) }},
}

// rpcError is a JSON-RPC error answer: its code and message, the id of the
// request it answers (nil for null), and the HTTP status it goes with.
type rpcError struct {
	status  int
	code    int
	message string
	id      json.RawMessage
}

// encode returns e as one JSON-RPC response object, a line.
func (e *rpcError) encode() []byte {
	type wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	id := e.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{e.code, e.message}})
	return append(b, '\n')
}

// write answers e: application/json, one JSON-RPC response object.
func (e *rpcError) write(w http.ResponseWriter) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	w.Write(e.encode())
}

// jsonRPCErrors makes every refusal of next, the SDK's streamable handler,
// a JSON-RPC error object, as the MCP transport asks: it checks a POST's
// body before the SDK reads it (answering what is no JSON-RPC request
// itself), and turns the SDK's plain-text refusals (a wrong method,
// content type, Accept header or protocol version; a cross-origin request)
// into JSON-RPC errors of the same status.
//
// A request that is not one at all is a 400: a body that is not JSON, not
// UTF-8 (or holds an escaped lone surrogate, which decoding would turn
// into U+FFFD) or nested deeper than maxBodyDepth is -32700; JSON that is
// no JSON-RPC message, a request without an id, a notification with one,
// params that are not structured, an empty batch or a batch in a protocol
// version without batches is -32600; an unknown notification is -32601.
// A request for a method loom does not serve is -32601, and params that do
// not fit the method (not an object; tools/call without a string name or
// with arguments that are not an object) -32602: both in a 200, the
// transport's answer to a request, before protocol 2026-07-28, and from
// it a 404 and a 400. Arguments that do not fit a tool's own schema are no
// protocol error: the tool answers them with a tool error (isError) that
// the model can read and correct, as MCP asks.
func jsonRPCErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &rpcWriter{ResponseWriter: w}
		defer rw.finish()
		w = rw
		if r.Method == http.MethodPost && mediaType(r.Header.Get("Content-Type")) == "application/json" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					(&rpcError{status: http.StatusRequestEntityTooLarge, code: codeInvalidRequest,
						message: fmt.Sprintf("the request is over the limit of %d bytes", mbe.Limit)}).write(w)
					return
				}
				(&rpcError{status: http.StatusBadRequest, code: codeParseError, message: "the request body could not be read"}).write(w)
				return
			}
			if e := checkBody(body, r.Header.Get("Mcp-Protocol-Version")); e != nil {
				e.write(w)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		next.ServeHTTP(w, r)
	})
}

// mediaType is the base media type of a Content-Type, lower case.
func mediaType(ct string) string {
	base, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(base))
}

// checkBody returns the error that body, a POST to /mcp speaking MCP
// version protocol ("" when the header is absent), is answered with, or
// nil when it is well-formed JSON-RPC for the SDK to serve.
func checkBody(body []byte, protocol string) *rpcError {
	bad := func(code int, format string, args ...any) *rpcError {
		return &rpcError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return bad(codeParseError, "parse error: the body is empty; send one JSON-RPC message")
	}
	if err := jsonguard.Check(body, maxBodyDepth); err != nil {
		return bad(codeParseError, "parse error: %s", err)
	}
	if err := json.Unmarshal(body, new(json.RawMessage)); err != nil {
		return bad(codeParseError, "parse error: %s", syntaxError(err))
	}
	if trimmed[0] != '[' {
		return checkMessage(trimmed, protocol)
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(trimmed, &batch); err != nil {
		return bad(codeParseError, "parse error: %s", syntaxError(err))
	}
	switch {
	case len(batch) == 0:
		return bad(codeInvalidRequest, "invalid request: an empty batch")
	case protocol >= "2025-06-18":
		return bad(codeInvalidRequest, "invalid request: protocol version %q has no batches; send one message a request", clip(protocol, 40))
	}
	for i, m := range batch {
		if e := checkMessage(m, protocol); e != nil {
			// One answer for the whole batch: the first fault.
			e.status, e.id = http.StatusBadRequest, nil
			e.message = fmt.Sprintf("batch message [%d]: %s", i, e.message)
			return e
		}
	}
	return nil
}

// checkMessage checks one JSON-RPC message (valid JSON) of a request.
func checkMessage(raw json.RawMessage, protocol string) *rpcError {
	bad := func(code int, id json.RawMessage, format string, args ...any) *rpcError {
		return &rpcError{status: http.StatusBadRequest, code: code, id: id, message: fmt.Sprintf(format, args...)}
	}
	var m struct {
		JSONRPC *json.RawMessage `json:"jsonrpc"`
		ID      json.RawMessage  `json:"id"`
		Method  json.RawMessage  `json:"method"`
		Params  json.RawMessage  `json:"params"`
		Result  json.RawMessage  `json:"result"`
		Error   json.RawMessage  `json:"error"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return bad(codeInvalidRequest, nil, "invalid request: a JSON-RPC message is an object")
	}
	// The id, when it is one JSON-RPC allows and the SDK takes: a string
	// or an integer.
	var id json.RawMessage
	hasID := len(m.ID) > 0
	if hasID {
		if !validID(m.ID) {
			return bad(codeInvalidRequest, nil, `invalid request: "id" must be a string or an integer`)
		}
		id = m.ID
	}
	if m.JSONRPC == nil || string(bytes.TrimSpace(*m.JSONRPC)) != `"2.0"` {
		return bad(codeInvalidRequest, id, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if len(m.Method) == 0 {
		if hasID && (len(m.Result) > 0 || len(m.Error) > 0) {
			return nil // a response, which the SDK takes (and ignores)
		}
		return bad(codeInvalidRequest, id, `invalid request: a request needs a "method"`)
	}
	var method string
	if err := json.Unmarshal(m.Method, &method); err != nil {
		return bad(codeInvalidRequest, id, `invalid request: "method" must be a string`)
	}
	params := bytes.TrimSpace(m.Params)
	if string(params) == "null" {
		params = nil
	}
	if len(params) > 0 && params[0] != '{' && params[0] != '[' {
		return bad(codeInvalidRequest, id, `invalid request: "params" must be an object or an array`)
	}
	info, known := serverMethods[method]
	switch {
	case !known && !hasID:
		return bad(codeMethodNotFound, nil, "method not found: %q is no notification this server takes", clip(method, 100))
	case !known:
		return callError(protocol, http.StatusNotFound, codeMethodNotFound, id, "method not found: %q", clip(method, 100))
	case info.notification && hasID:
		return bad(codeInvalidRequest, id, "invalid request: %s is a notification, sent without an id", method)
	case !info.notification && !hasID:
		return bad(codeInvalidRequest, nil, "invalid request: %s is a request and needs an id", method)
	case len(params) > 0 && params[0] != '{':
		return callError(protocol, http.StatusBadRequest, codeInvalidParams, id, "invalid params: the params of %s are an object", method)
	case len(params) == 0 && info.needsParams:
		return callError(protocol, http.StatusBadRequest, codeInvalidParams, id, "invalid params: %s needs params", method)
	case method == "tools/call":
		if e := checkToolCall(params, protocol, id); e != nil {
			return e
		}
	}
	if len(params) > 0 {
		// Decoded as the SDK will, so that a member of the wrong type is
		// said in JSON's words, not in the SDK's Go ones.
		if err := json.Unmarshal(params, info.params()); err != nil {
			msg := fmt.Sprintf("invalid params: the params of %s do not fit its schema", method)
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				msg = "invalid params: " + jsonerr.Describe(info.params(), err)
			}
			if !hasID {
				return bad(codeInvalidParams, nil, "%s", msg)
			}
			return callError(protocol, http.StatusBadRequest, codeInvalidParams, id, "%s", msg)
		}
	}
	return nil
}

// checkToolCall checks the params of tools/call against its request
// schema: a string name and, when given, an object of arguments. Whether
// the arguments fit the tool is the tool's to say.
func checkToolCall(params json.RawMessage, protocol string, id json.RawMessage) *rpcError {
	var p struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(params, &p) // an object: checked
	var name string
	if len(p.Name) == 0 || json.Unmarshal(p.Name, &name) != nil || name == "" {
		return callError(protocol, http.StatusBadRequest, codeInvalidParams, id, `invalid params: tools/call needs the tool's "name", a string`)
	}
	if args := bytes.TrimSpace(p.Arguments); len(args) > 0 && string(args) != "null" && args[0] != '{' {
		return callError(protocol, http.StatusBadRequest, codeInvalidParams, id, `invalid params: the "arguments" of tools/call are an object`)
	}
	return nil
}

// callError is the error answer to a request the server understood but
// cannot serve: in a 200, as the transport answers any request, before
// protocol 2026-07-28; with status from it.
func callError(protocol string, status, code int, id json.RawMessage, format string, args ...any) *rpcError {
	if protocol < protocol20260728 {
		status = http.StatusOK
	}
	return &rpcError{status: status, code: code, id: id, message: fmt.Sprintf(format, args...)}
}

// validID reports whether raw is a JSON-RPC id the server takes: a string
// or an integer that fits in 64 bits.
func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		var s string
		return json.Unmarshal(raw, &s) == nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1<<63 {
		return false
	}
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// syntaxError says where JSON is broken, without Go's words.
func syntaxError(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	}
	return "the body is not valid JSON"
}

// JSONRPCErrors wraps h, the middleware in front of Handler (such as the
// authentication and body limit of the HTTP API), so that its error
// answers are JSON-RPC errors as well: the same status and headers (a
// 401's WWW-Authenticate, say), an application/json body of one JSON-RPC
// error object with the answer's message (-32600 for a 4xx; for a 503 or
// 507 of loom's, an outage a client may retry, -32000 with loom's code and
// message, "unavailable: the store is unavailable"; -32603 and no detail
// for another 5xx). Answers that are JSON-RPC already pass unchanged.
func JSONRPCErrors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &rpcWriter{ResponseWriter: w}
		defer rw.finish()
		h.ServeHTTP(rw, r)
	})
}

// rpcWriter holds back an error answer (a status of 400 or more) and
// writes it as a JSON-RPC error of the same status when the handler is
// done, unless it is one already. Everything else passes through, streamed
// as written.
type rpcWriter struct {
	http.ResponseWriter
	// status is the held error's status, 0 while nothing is held; body is
	// what the handler wrote of it.
	status int
	body   []byte
	done   bool
}

// WriteHeader implements http.ResponseWriter.
func (w *rpcWriter) WriteHeader(status int) {
	if w.status != 0 || w.done {
		return
	}
	if status < 400 {
		w.done = true
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.status = status
}

// Write implements http.ResponseWriter.
func (w *rpcWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		if len(w.body) < 64<<10 {
			w.body = append(w.body, b...)
		}
		return len(b), nil
	}
	w.done = true
	return w.ResponseWriter.Write(b)
}

// finish writes the held error answer, as JSON-RPC.
func (w *rpcWriter) finish() {
	if w.status == 0 {
		return
	}
	status, body := w.status, bytes.TrimSpace(w.body)
	w.status, w.done = 0, true
	var probe struct {
		JSONRPC string `json:"jsonrpc"`
		Error   struct {
			Code    any    `json:"code"` // loom's is a string, JSON-RPC's a number
			Message string `json:"message"`
		} `json:"error"`
	}
	isJSON := mediaType(w.Header().Get("Content-Type")) == "application/json" && json.Unmarshal(body, &probe) == nil
	if isJSON && probe.JSONRPC == "2.0" {
		w.ResponseWriter.WriteHeader(status)
		w.ResponseWriter.Write(w.body)
		return
	}
	e := &rpcError{status: status, code: codeInvalidRequest}
	loomCode, _ := probe.Error.Code.(string)
	switch {
	case (status == http.StatusServiceUnavailable || status == http.StatusInsufficientStorage) && isJSON && loomCode != "":
		// An outage (the store down or full), which a client may retry:
		// loom's code and message, as a tool error says them.
		e.code, e.message = codeServerError, loomCode+": "+probe.Error.Message
	case status >= 500:
		e.code, e.message = codeInternal, "internal error: the server failed; the error is in its log"
	case status == http.StatusMethodNotAllowed:
		e.message = "invalid request: /mcp takes POST, one JSON-RPC message a request (this server keeps no sessions and offers no event stream)"
	case isJSON && probe.Error.Message != "":
		e.message = probe.Error.Message
	case len(body) > 0 && !isJSON:
		// The SDK's own words for a client's mistake (http.Error).
		e.message = "invalid request: " + clip(strings.TrimSpace(strings.TrimPrefix(string(body), "Bad Request: ")), 300)
	default:
		e.message = "invalid request: " + strings.ToLower(http.StatusText(status))
	}
	e.write(w.ResponseWriter)
}

// Flush implements http.Flusher, for the SDK's event streams.
func (w *rpcWriter) Flush() {
	if w.status != 0 {
		return
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *rpcWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
