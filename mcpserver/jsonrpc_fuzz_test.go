package mcpserver

import (
	"encoding/json"
	"net/http"
	"testing"
	"unicode/utf8"
)

// FuzzCheckBody: whatever a client posts, the check of /mcp's bodies does
// not panic, lets through only UTF-8 JSON, and answers the rest with a
// JSON-RPC error code and a status a client can act on.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"thread_get","arguments":{"id":"x"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"nope","params":[1]}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\\udc00\"}}",
		`[]`, ``, `null`, `[[[[`,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "2026-07-28")
	}
	f.Fuzz(func(t *testing.T, body []byte, protocol string) {
		e := checkBody(body, protocol)
		if e == nil {
			if !json.Valid(body) || !utf8.Valid(body) {
				t.Fatalf("let through %q", body)
			}
			return
		}
		switch e.code {
		case codeParseError, codeInvalidRequest, codeMethodNotFound, codeInvalidParams:
		default:
			t.Fatalf("code %d for %q", e.code, body)
		}
		switch e.status {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
		default:
			t.Fatalf("status %d for %q", e.status, body)
		}
		if e.message == "" || !utf8.ValidString(e.message) {
			t.Fatalf("message %q for %q", e.message, body)
		}
		if len(e.id) > 0 && !validID(e.id) {
			t.Fatalf("id %s for %q", e.id, body)
		}
	})
}
