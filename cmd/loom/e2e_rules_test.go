package main

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sendRaw sends body as it is and returns the status and the answer.
func sendRaw(t *testing.T, method, url, key string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestEndToEndThreadRules drives the rules a thread keeps through a real
// `loom serve`: a message at the size limit exports and imports; JSON
// nested over the limit is refused and an export stays linear in what is
// stored; a service thread takes no messages over HTTP or MCP; a message id
// goes into a thread once; a lone-surrogate escape is refused.
func TestEndToEndThreadRules(t *testing.T) {
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "rules.db"), "--keys", keysFile(t))
	api := s.url + "/v1"
	status := func(method, path string, body any, want int, header ...string) {
		t.Helper()
		if code, _ := call(t, method, api+path, keyAcme, body, nil, header...); code != want {
			t.Fatalf("%s %s: %d, want %d", method, path, code, want)
		}
	}

	// Save → load at the size limit: 1 MiB as the thread measures it
	// (64 bytes of message, 4 of role, the 30 of the id it is given, 16 of
	// the content, and the text).
	status("POST", "/threads", map[string]any{"id": "big"}, 201)
	limit := 1 << 20
	status("POST", "/threads/big/messages", map[string]any{"messages": []any{userMsg(strings.Repeat("x", limit-64-4-30-16+1))}}, 400)
	status("POST", "/threads/big/messages", map[string]any{"messages": []any{userMsg(strings.Repeat("x", limit-64-4-30-16))}}, 201)
	for i, q := range []string{"", "?history=true"} {
		code, doc := sendRaw(t, "GET", api+"/threads/big/export"+q, keyAcme, nil)
		if code != 200 {
			t.Fatalf("export%s: %d", q, code)
		}
		if code, body := sendRaw(t, "POST", api+"/threads/import?id=big-back-"+string(rune('0'+i)), keyAcme, doc); code != 201 {
			t.Fatalf("import of the export%s of an accepted append: %d %s", q, code, body)
		}
	}

	// Deep JSON: over the limit refused, at the limit stored, and the
	// export grows with what is stored, not with the square of its depth.
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	status("POST", "/threads", map[string]any{"id": "deep", "state": map[string]any{"k": rawJSON(deep(129))}}, 400)
	status("POST", "/threads", map[string]any{"id": "deep", "state": map[string]any{"k": rawJSON(deep(128))}}, 201)
	for _, q := range []string{"", "?history=true"} {
		if code, doc := sendRaw(t, "GET", api+"/threads/deep/export"+q, keyAcme, nil); code != 200 || len(doc) > 4096 {
			t.Fatalf("export%s of 256 bytes of state: %d, %d bytes", q, code, len(doc))
		}
	}
	if code, body := sendRaw(t, "POST", api+"/threads", keyAcme, []byte(`{"id":"lone","state":{"k":"\udc00"}}`)); code != 400 {
		t.Fatalf("a lone surrogate in state: %d %s", code, body)
	}

	// Service-managed or local, never both.
	status("POST", "/threads", map[string]any{"id": "both", "kind": "service", "messages": []any{userMsg("hi")}}, 400)
	status("GET", "/threads/both", nil, 404)
	status("POST", "/threads", map[string]any{"id": "svc", "kind": "service"}, 201)
	status("POST", "/threads/svc/messages", map[string]any{"messages": []any{userMsg("hi")}}, 400)
	cs := mcpSession(t, s.url, keyAcme)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "thread_append", Arguments: map[string]any{
		"id": "svc", "messages": []any{map[string]any{"role": "user", "text": "hi"}}}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "invalid:") {
		t.Fatalf("mcp append to a service thread: %v %+v", err, res)
	}

	// A message id goes into a thread once: 409, even under If-Match.
	status("POST", "/threads", map[string]any{"id": "ids"}, 201)
	m := userMsg("once")
	m["id"] = "m1"
	status("POST", "/threads/ids/messages", map[string]any{"messages": []any{m}}, 201)
	status("POST", "/threads/ids/messages", map[string]any{"messages": []any{m}}, 409)
	status("POST", "/threads/ids/messages", map[string]any{"messages": []any{m}}, 409, "If-Match", `"2"`)
	var msgs messagesOut
	call(t, "GET", api+"/threads/ids/messages", keyAcme, nil, &msgs)
	if len(msgs.Messages) != 1 || msgs.Version != 2 {
		t.Fatalf("%d messages at version %d after refused appends", len(msgs.Messages), msgs.Version)
	}
	s.stop(t)
}

// rawJSON is JSON text that json.Marshal writes as it is.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
