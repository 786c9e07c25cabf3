package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/auth"
)

// rpcAnswer is an HTTP answer of /mcp: its status, content type and the
// one JSON-RPC message of its body (a JSON object, or the data of an SSE
// event).
type rpcAnswer struct {
	status int
	ctype  string
	header http.Header
	raw    string
	msg    struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

// post sends body to srv's /mcp as a client would, with the headers given
// as pairs after it (Content-Type and Accept have a client's defaults).
func rpc(t *testing.T, url, method, body string, header ...string) rpcAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyAlpha)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := rpcAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), header: resp.Header, raw: string(b)}
	data := b
	if strings.HasPrefix(a.ctype, "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = []byte(d)
				break
			}
		}
	}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &a.msg); err != nil {
			t.Fatalf("%s %s: the answer is not a JSON-RPC message: %v\n%d %s\n%s", method, body, err, a.status, a.ctype, b)
		}
	}
	return a
}

// TestJSONRPCErrorsOverHTTP sends /mcp what a broken or hostile client
// might, over real HTTP, and checks that every refusal is a JSON-RPC error
// object (application/json, "jsonrpc":"2.0", the id when the request had a
// usable one, else null) with the code JSON-RPC gives it and the status
// the MCP transport gives it: 400 for what is not a request at all (parse
// error, invalid request, an unknown notification), and for a request the
// server understood but cannot serve, the error in a 200 answer, as any
// other result (before protocol 2026-07-28; from it, 404 for an unknown
// method and 400 for invalid params). Messages say what is wrong without
// Go's words.
func TestJSONRPCErrorsOverHTTP(t *testing.T) {
	db := newDB(t)
	srv := httpServer(t, db, nil)
	const (
		v0618 = "2025-06-18"
		v0728 = "2026-07-28"
	)
	for _, tc := range []struct {
		name    string
		method  string
		body    string
		header  []string
		status  int
		code    int
		id      string
		message string // a part of the message, when it matters
	}{
		{name: "unknown method", body: `{"jsonrpc":"2.0","id":1,"method":"nope"}`, status: 200, code: -32601, id: "1", message: `"nope"`},
		{name: "unknown method, 2025-06-18", body: `{"jsonrpc":"2.0","id":"a","method":"nope"}`, header: []string{"Mcp-Protocol-Version", v0618}, status: 200, code: -32601, id: `"a"`},
		{name: "unknown method, 2026-07-28", body: `{"jsonrpc":"2.0","id":7,"method":"nope"}`, header: []string{"Mcp-Protocol-Version", v0728}, status: 404, code: -32601, id: "7"},
		{name: "unknown notification", body: `{"jsonrpc":"2.0","method":"notifications/nope"}`, status: 400, code: -32601, id: "null"},
		{name: "malformed JSON", body: `{"jsonrpc":"2.0",`, status: 400, code: -32700, id: "null"},
		{name: "not JSON", body: `hello`, status: 400, code: -32700, id: "null"},
		{name: "empty body", body: ``, status: 400, code: -32700, id: "null"},
		{name: "trailing garbage", body: `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, status: 400, code: -32700, id: "null"},
		{name: "not an object", body: `42`, status: 400, code: -32600, id: "null"},
		{name: "no jsonrpc member", body: `{"id":1,"method":"ping"}`, status: 400, code: -32600, id: "1", message: `"jsonrpc"`},
		{name: "jsonrpc 1.0", body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, status: 400, code: -32600, id: "1"},
		{name: "method not a string", body: `{"jsonrpc":"2.0","id":1,"method":5}`, status: 400, code: -32600, id: "1"},
		{name: "id an object", body: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, status: 400, code: -32600, id: "null"},
		{name: "id a fraction", body: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, status: 400, code: -32600, id: "null"},
		{name: "neither request nor response", body: `{"jsonrpc":"2.0","id":1}`, status: 400, code: -32600, id: "1"},
		{name: "a request without an id", body: `{"jsonrpc":"2.0","method":"tools/list"}`, status: 400, code: -32600, id: "null"},
		{name: "a notification with an id", body: `{"jsonrpc":"2.0","id":3,"method":"notifications/initialized"}`, status: 400, code: -32600, id: "3"},
		{name: "params not structured", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":5}`, status: 400, code: -32600, id: "1"},
		{name: "params an array", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}`, status: 200, code: -32602, id: "1"},
		{name: "empty batch", body: `[]`, status: 400, code: -32600, id: "null"},
		{name: "batch with a bad message", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},5]`, status: 400, code: -32600, id: "null", message: "[1]"},
		{name: "batch, 2025-06-18", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, header: []string{"Mcp-Protocol-Version", v0618}, status: 400, code: -32600, id: "null", message: "batch"},
		{name: "tools/call without params", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, status: 200, code: -32602, id: "1", message: "params"},
		{name: "tools/call, name not a string", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, status: 200, code: -32602, id: "1", message: "name"},
		{name: "tools/call, no name", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, status: 200, code: -32602, id: "1", message: "name"},
		{name: "tools/call, arguments not an object", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"thread_get","arguments":[1]}}`, status: 200, code: -32602, id: "1", message: "arguments"},
		{name: "tools/call, params an array", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, status: 200, code: -32602, id: "1"},
		{name: "tools/call, 2026-07-28 invalid params", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, header: []string{"Mcp-Protocol-Version", v0728}, status: 400, code: -32602, id: "1"},
		{name: "initialize, protocolVersion a number", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5,"capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, status: 200, code: -32602, id: "1", message: "protocolVersion: expected a string, got a number"},
		{name: "logging/setLevel, level an object", body: `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":{}}}`, status: 200, code: -32602, id: "1", message: "level"},
		{name: "tools/list, cursor a number", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":5}}`, status: 200, code: -32602, id: "1", message: "cursor: expected a string, got a number"},
		{name: "unknown tool", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, status: 200, code: -32602, id: "1", message: "nope"},
		{name: "invalid UTF-8", body: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"thread_create\",\"arguments\":{\"id\":\"u1\",\"title\":\"caf\xe9\"}}}", status: 400, code: -32700, id: "null", message: "UTF-8"},
		{name: "lone surrogate", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"thread_create","arguments":{"id":"u2","title":"\udc00"}}}`, status: 400, code: -32700, id: "null", message: "UTF-8"},
		{name: "nested too deep", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}}`, status: 400, code: -32700, id: "null", message: "deep"},
		{name: "unsupported protocol version", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, header: []string{"Mcp-Protocol-Version", "1999-01-01"}, status: 400, code: -32600, id: "null"},
		{name: "not JSON content", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, header: []string{"Content-Type", "text/plain"}, status: 415, code: -32600, id: "null"},
		{name: "no event stream accepted", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, header: []string{"Accept", "application/json"}, status: 400, code: -32600, id: "null"},
		{name: "GET", method: "GET", status: 405, code: -32600, id: "null"},
		{name: "DELETE", method: "DELETE", status: 405, code: -32600, id: "null"},
		{name: "cross-origin", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, header: []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}, status: 403, code: -32600, id: "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "POST"
			}
			a := rpc(t, srv.URL, method, tc.body, tc.header...)
			if a.status != tc.status || !strings.HasPrefix(a.ctype, "application/json") && !strings.HasPrefix(a.ctype, "text/event-stream") {
				t.Errorf("status %d %q, want %d with a JSON-RPC body\n%s", a.status, a.ctype, tc.status, a.raw)
			}
			if a.status >= 400 && a.ctype != "application/json" {
				t.Errorf("content type %q of a %d, want application/json", a.ctype, a.status)
			}
			if a.msg.JSONRPC != "2.0" || a.msg.Error == nil || a.msg.Result != nil {
				t.Fatalf("not a JSON-RPC error object: %s", a.raw)
			}
			if a.msg.Error.Code != tc.code {
				t.Errorf("code %d, want %d: %s", a.msg.Error.Code, tc.code, a.msg.Error.Message)
			}
			if id := string(a.msg.ID); id != tc.id && !(tc.id == "null" && id == "") {
				t.Errorf("id %s, want %s", id, tc.id)
			}
			if !strings.Contains(a.msg.Error.Message, tc.message) {
				t.Errorf("message %q does not say %q", a.msg.Error.Message, tc.message)
			}
			for _, goism := range []string{"Go ", "jsonrpc2", "unmarshal", "wireDecode", "*mcp.", "struct"} {
				if strings.Contains(a.msg.Error.Message, goism) {
					t.Errorf("message %q speaks Go (%q)", a.msg.Error.Message, goism)
				}
			}
			if tc.status == 405 && a.header.Get("Allow") != "POST" {
				t.Errorf("405 without Allow: POST")
			}
		})
	}
	// Nothing refused was written.
	for _, id := range []string{"u1", "u2"} {
		if _, err := db.Thread(context.Background(), id); err == nil {
			t.Errorf("thread %s was created from refused input", id)
		}
	}
}

// TestMCPServesWellFormedRequestsAroundTheChecks: what the checks let
// through still works, over real HTTP and without sessions (the handler is
// stateless: a request needs no Mcp-Session-Id, and one it does not know
// is no error), a batch of an older protocol included, and arguments that
// do not fit a tool's schema are a tool error the model can read (a result
// with isError, as MCP 2025-11-25 asks), not a protocol error.
func TestMCPServesWellFormedRequestsAroundTheChecks(t *testing.T) {
	srv := httpServer(t, newDB(t), nil)
	for _, tc := range []struct {
		name   string
		body   string
		header []string
	}{
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil},
		{"ping with params null", `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, nil},
		{"tools/list, no session id", `{"jsonrpc":"2.0","id":"x","method":"tools/list"}`, []string{"Mcp-Protocol-Version", "2025-06-18"}},
		{"tools/list, an unknown session id", `{"jsonrpc":"2.0","id":"x","method":"tools/list"}`, []string{"Mcp-Protocol-Version", "2025-06-18", "Mcp-Session-Id", "no-such-session"}},
		{"batch, 2025-03-26", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := rpc(t, srv.URL, "POST", tc.body, tc.header...)
			if a.status != 200 || a.msg.Error != nil || a.msg.Result == nil {
				t.Fatalf("%d %s", a.status, a.raw)
			}
		})
	}
	a := rpc(t, srv.URL, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"thread_get","arguments":{"id":5}}}`)
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(a.msg.Result, &res); err != nil || a.status != 200 || !res.IsError || len(res.Content) == 0 || !strings.HasPrefix(res.Content[0].Text, "invalid: arguments: id") {
		t.Fatalf("arguments off the schema: %d %s", a.status, a.raw)
	}
	// A notification is accepted with 202 and no body.
	if a := rpc(t, srv.URL, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != 202 {
		t.Fatalf("notification: %d %s", a.status, a.raw)
	}
}

// TestJSONRPCErrorsWrapsTheMiddleware: JSONRPCErrors in front of the
// middleware before Handler makes its refusals JSON-RPC too (a 401 keeps
// its WWW-Authenticate), and leaves Handler's answers as they are.
func TestJSONRPCErrorsWrapsTheMiddleware(t *testing.T) {
	keys, err := auth.Parse(strings.NewReader("alpha:" + keyAlpha + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	deny := func(w http.ResponseWriter, r *http.Request, err error) {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "unauthorized: send a key", http.StatusUnauthorized)
	}
	srv := httptest.NewServer(JSONRPCErrors(keys.Middleware(Handler(newDB(t), nil), deny)))
	t.Cleanup(srv.Close)
	a := rpc(t, srv.URL, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization", "Bearer wrong-key-0123456789")
	if a.status != 401 || a.ctype != "application/json" || a.msg.Error == nil || a.msg.Error.Code != -32600 ||
		!strings.Contains(a.msg.Error.Message, "send a key") || a.header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("401: %d %s %v %s", a.status, a.ctype, a.header, a.raw)
	}
	a = rpc(t, srv.URL, "POST", `{"jsonrpc":"2.0","id":1,"method":"nope"}`)
	if a.status != 200 || a.msg.Error == nil || a.msg.Error.Code != -32601 || string(a.msg.ID) != "1" {
		t.Fatalf("unknown method through both: %d %s", a.status, a.raw)
	}
	a = rpc(t, srv.URL, "POST", `{"jsonrpc":"2.0",`)
	if a.status != 400 || a.msg.Error == nil || a.msg.Error.Code != -32700 {
		t.Fatalf("parse error through both: %d %s", a.status, a.raw)
	}
	if a := rpc(t, srv.URL, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); a.status != 200 || a.msg.Result == nil {
		t.Fatalf("ping through both: %d %s", a.status, a.raw)
	}
}

// TestJSONRPCErrorsKeepsOutages: a 503 or 507 of the middleware (its store
// down, or its disk full) reaches an MCP client as a JSON-RPC server error
// that keeps loom's code and message, as a tool error would say them, and
// the status and Retry-After: a client can tell an outage to retry from a
// failure of the server.
func TestJSONRPCErrorsKeepsOutages(t *testing.T) {
	for _, c := range []struct {
		status     int
		code, msg  string
		retryAfter string
	}{
		{http.StatusServiceUnavailable, "unavailable", "the store is unavailable", "5"},
		{http.StatusInsufficientStorage, "insufficient_storage", "the store is out of space", ""},
	} {
		outage := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": c.code, "message": c.msg}})
		})
		srv := httptest.NewServer(JSONRPCErrors(outage))
		a := rpc(t, srv.URL, "POST", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
		srv.Close()
		if a.status != c.status || a.ctype != "application/json" || a.msg.Error == nil ||
			a.msg.Error.Code != codeServerError || a.msg.Error.Message != c.code+": "+c.msg ||
			a.header.Get("Retry-After") != c.retryAfter {
			t.Errorf("%d: %d %s Retry-After %q %s; want a %d error %q", c.status, a.status, a.ctype,
				a.header.Get("Retry-After"), a.raw, codeServerError, c.code+": "+c.msg)
		}
	}
}
