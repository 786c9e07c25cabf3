package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeMCPAnswersJSONRPCErrors: through `loom serve`, what /mcp
// refuses is a JSON-RPC error object in application/json: an unknown
// method (-32601, the case, which answered 400 text/plain), a body
// that is not JSON (-32700), one that is not UTF-8 (-32700, nothing
// stored: no thread, no work item), and one over --max-body (413,
// -32600).
func TestServeMCPAnswersJSONRPCErrors(t *testing.T) {
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "mcp.db"), "--max-body", "4096")
	for _, tc := range []struct {
		name, body   string
		status, code int
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"nope"}`, 200, -32601},
		{"malformed", `{"jsonrpc":"2.0",`, 400, -32700},
		{"not UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"thread_create\",\"arguments\":{\"id\":\"latin1\",\"title\":\"caf\xe9\"}}}", 400, -32700},
		{"a work item not UTF-8", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"create_thread","arguments":{"project":"p","text":"th\udc00e vert"}}}`, 400, -32700},
		{"over --max-body", `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("x", 5000) + `"}}}`, 413, -32600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var msg struct {
				JSONRPC string `json:"jsonrpc"`
				Error   *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(raw, &msg) != nil || msg.JSONRPC != "2.0" || msg.Error == nil || msg.Error.Code != tc.code {
				t.Fatalf("%d %s %s, want %d application/json with JSON-RPC error %d", resp.StatusCode, resp.Header.Get("Content-Type"), raw, tc.status, tc.code)
			}
		})
	}
	if code, _ := call(t, "GET", s.url+"/v1/threads/latin1", "", nil, nil); code != http.StatusNotFound {
		t.Errorf("the thread of the refused call: %d, want 404", code)
	}
	var items struct {
		Threads []struct{ Text string } `json:"threads"`
	}
	if code, _ := call(t, "GET", s.url+"/v1/items?project=p&include_resolved=true", "", nil, &items); code != http.StatusOK || len(items.Threads) != 0 {
		t.Errorf("the work items after the refused call: %d %+v", code, items.Threads)
	}
	s.stop(t)
}
