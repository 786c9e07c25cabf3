package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/langgraph"
)

// isLangGraphRoute reports whether a route pattern is one of LangGraph's
// checkpointer routes.
func isLangGraphRoute(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	return strings.HasPrefix(path, "/v1/langgraph/")
}

// lgAPI is a LangGraph client of one tenant of a server: each answer it
// gets is checked against openapi.json, as a client generated from the
// document reads it.
type lgAPI struct {
	tb  testing.TB
	s   *Server
	c   *contract
	key string
}

// newLGAPI returns a server with tenants a and b, and tenant a's client.
func newLGAPI(t *testing.T) *lgAPI {
	t.Helper()
	return &lgAPI{tb: t, s: newServer(t, Options{Keys: twoTenants(t)}), c: newContract(t), key: keyA}
}

// as returns the client of the tenant of key on the same server.
func (a *lgAPI) as(key string) *lgAPI {
	b := *a
	b.key = key
	return &b
}

// call serves one request and fails unless it is answered with want; it
// decodes a JSON answer into out when out is not nil.
func (a *lgAPI) call(method, path string, body any, want int, out any) *httptest.ResponseRecorder {
	a.tb.Helper()
	w := do(a.tb, a.s, req{method: method, path: path, body: body, key: a.key})
	_, pattern := a.s.mux.Handler(httptest.NewRequest(method, path, nil))
	m, p, _ := strings.Cut(pattern, " ")
	if err := a.c.check(p, m, w.Code, w.Header(), w.Body.Bytes()); err != nil {
		a.tb.Errorf("%s %s: %v", method, clip(path), err)
	}
	if w.Code != want {
		a.tb.Fatalf("%s %s: status %d, want %d; body %s", method, clip(path), w.Code, want, w.Body.String())
	}
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			a.tb.Fatalf("%s %s: decoding %s: %v", method, clip(path), w.Body.String(), err)
		}
	}
	return w
}

// lgCheckpoint is a checkpoint to put: its names, channel versions and
// values.
type lgCheckpoint struct {
	thread, ns, parent, id string
	versions               map[string]int // channel_versions
	moved                  map[string]int // new_versions
	values                 map[string]langgraph.Value
	metadata               map[string]any
}

// body is c as a put request's body.
func (c lgCheckpoint) body() map[string]any {
	cfg := map[string]any{"thread_id": c.thread, "checkpoint_ns": c.ns}
	if c.parent != "" {
		cfg["checkpoint_id"] = c.parent
	}
	metadata := c.metadata
	if metadata == nil {
		metadata = map[string]any{"source": "loop", "step": 1}
	}
	return map[string]any{
		"config": cfg,
		"checkpoint": map[string]any{
			"v": 4, "id": c.id, "ts": "2026-11-27T20:00:00.000000+00:00",
			"channel_versions": c.versions, "versions_seen": map[string]any{"__input__": map[string]any{}},
			"updated_channels": slices.Sorted(maps.Keys(c.moved)),
		},
		"metadata":       metadata,
		"new_versions":   c.moved,
		"channel_values": c.values,
	}
}

// put puts c and checks the config it is answered with.
func (a *lgAPI) put(c lgCheckpoint) langgraph.PutResponse {
	a.tb.Helper()
	var resp langgraph.PutResponse
	a.call("POST", "/v1/langgraph/checkpoints", c.body(), http.StatusOK, &resp)
	if want := (langgraph.Config{ThreadID: c.thread, CheckpointNS: c.ns, CheckpointID: c.id}); resp.Config != want {
		a.tb.Fatalf("put %s: config %+v, want %+v", c.id, resp.Config, want)
	}
	return resp
}

// get returns the tuple of the query cfg makes.
func (a *lgAPI) get(cfg langgraph.Config) lgTupleJSON {
	a.tb.Helper()
	var tup lgTupleJSON
	a.call("GET", lgGetPath(cfg), nil, http.StatusOK, &tup)
	return tup
}

// lgGetPath is the GET of the checkpoint cfg names.
func lgGetPath(cfg langgraph.Config) string {
	q := url.Values{"thread_id": {cfg.ThreadID}, "checkpoint_ns": {cfg.CheckpointNS}}
	if cfg.CheckpointID != "" {
		q.Set("checkpoint_id", cfg.CheckpointID)
	}
	return "/v1/langgraph/checkpoint?" + q.Encode()
}

// lgTupleJSON is a tuple as a client reads it, its checkpoint's
// channel_values apart, and the sum of its messages (the server's chain
// sum, which the tests cannot compute) taken out of them.
type lgTupleJSON struct {
	langgraph.Tuple
	values map[string]langgraph.Value
	sum    *langgraph.MessagesSum
}

func (t *lgTupleJSON) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &t.Tuple); err != nil {
		return err
	}
	raw, ok := t.Checkpoint["channel_values"]
	if !ok {
		return fmt.Errorf("checkpoint without channel_values: %s", b)
	}
	if err := json.Unmarshal(raw, &t.values); err != nil {
		return err
	}
	if v, ok := t.values["messages"]; ok && v.Messages != nil {
		if v.Sum == nil {
			return fmt.Errorf("messages without their sum: %s", raw)
		}
		t.sum, v.Sum = v.Sum, nil
		t.values["messages"] = v
		var err error
		t.Checkpoint["channel_values"], err = json.Marshal(t.values)
		return err
	}
	return nil
}

// list returns the ids of the checkpoints a search finds, in order.
func (a *lgAPI) list(search map[string]any) []string {
	a.tb.Helper()
	var resp struct {
		Checkpoints []lgTupleJSON `json:"checkpoints"`
	}
	a.call("POST", "/v1/langgraph/checkpoints/search", search, http.StatusOK, &resp)
	ids := []string{}
	for _, t := range resp.Checkpoints {
		ids = append(ids, t.Config.CheckpointID)
	}
	return ids
}

// writes puts the writes of a task against a checkpoint.
func (a *lgAPI) writes(thread, ns, id, task, path string, ws ...langgraph.Write) {
	a.tb.Helper()
	a.call("POST", "/v1/langgraph/writes", langgraph.WritesRequest{
		Config: langgraph.Config{ThreadID: thread, CheckpointNS: ns, CheckpointID: id}, TaskID: task, TaskPath: path, Writes: ws,
	}, http.StatusNoContent, nil)
}

// blob is a value as a serializer made it.
func blob(s string) langgraph.Value {
	return langgraph.Value{Blob: &langgraph.Blob{Type: "json", Data: []byte(s)}}
}

// lcMessage is a LangChain message in its stored form, as Python's
// message_to_dict writes it.
func lcMessage(typ, id, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": map[string]any{
		"content": text, "type": typ, "id": id, "name": nil,
		"additional_kwargs": map[string]any{}, "response_metadata": map[string]any{"model": "fake"},
	}})
	return b
}

// messages is the value of a messages channel.
func messages(ms ...json.RawMessage) langgraph.Value { return langgraph.Value{Messages: ms} }

// jsonDiff is the difference of want and got as JSON values.
func jsonDiff(tb testing.TB, want, got any) string {
	tb.Helper()
	norm := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			tb.Fatal(err)
		}
		return out
	}
	return cmp.Diff(norm(want), norm(got))
}

// TestLangGraphRefusesBadInput sends each route bodies and queries it must
// refuse: each is a 400 with loom's error shape, naming what is wrong, and
// leaves the tenant without a thread. None reaches the Saver.
func TestLangGraphRefusesBadInput(t *testing.T) {
	a := newLGAPI(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	put := func(edit func(b map[string]any)) map[string]any {
		b := lgCheckpoint{thread: "t", id: "c1", versions: map[string]int{"a": 1}, moved: map[string]int{"a": 1},
			values: map[string]langgraph.Value{"a": blob("1")}}.body()
		edit(b)
		return b
	}
	ckpt := func(b map[string]any) map[string]any { return b["checkpoint"].(map[string]any) }
	cfg := func(b map[string]any) map[string]any { return b["config"].(map[string]any) }
	writes := func(edit func(b map[string]any)) map[string]any {
		b := map[string]any{"config": map[string]any{"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"},
			"task_id": "task", "task_path": "", "writes": []any{map[string]any{"idx": 0, "channel": "a", "value": blob("1")}}}
		edit(b)
		return b
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		code, says         string
	}{
		{"put: no body", "POST", "/v1/langgraph/checkpoints", "", "invalid_json", "empty request body"},
		{"put: unknown member", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { b["extra"] = 1 }), "invalid_json", "extra"},
		{"put: config not an object", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { b["config"] = 1 }), "invalid_json", "config"},
		{"put: no thread", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { delete(cfg(b), "thread_id") }), "invalid", "config.thread_id"},
		{"put: thread too long", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { cfg(b)["thread_id"] = long(1025) }), "invalid", "config.thread_id"},
		{"put: thread with a control character", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { cfg(b)["thread_id"] = "a\u0007b" }), "invalid", "control character"},
		{"put: thread with a lone surrogate", "POST", "/v1/langgraph/checkpoints", `{"config":{"thread_id":"\ud800"},"checkpoint":{"id":"c1"}}`, "invalid_json", "UTF-8"},
		{"put: namespace too long", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { cfg(b)["checkpoint_ns"] = long(1025) }), "invalid", "config.checkpoint_ns"},
		{"put: parent id too long", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { cfg(b)["checkpoint_id"] = long(129) }), "invalid", "checkpoint_id"},
		{"put: no checkpoint", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { delete(b, "checkpoint") }), "invalid", "checkpoint"},
		{"put: no checkpoint id", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { delete(ckpt(b), "id") }), "invalid", "checkpoint.id"},
		{"put: checkpoint id a number", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { ckpt(b)["id"] = 7 }), "invalid", "checkpoint.id"},
		{"put: checkpoint id too long", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { ckpt(b)["id"] = long(129) }), "invalid", "checkpoint.id"},
		{"put: channel_values in the checkpoint", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { ckpt(b)["channel_values"] = map[string]any{} }), "invalid", "checkpoint.channel_values"},
		{"put: a version that is true", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { ckpt(b)["channel_versions"] = map[string]any{"a": true} }), "invalid", "channel_versions"},
		{"put: channel versions not an object", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { ckpt(b)["channel_versions"] = []int{1} }), "invalid", "channel_versions"},
		{"put: a new version that is null", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { b["new_versions"] = map[string]any{"a": nil} }), "invalid", "new_versions"},
		{"put: a value that is neither", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { b["channel_values"] = map[string]any{"a": map[string]any{}} }), "invalid", "one of blob and messages"},
		{"put: a value that is both", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"messages": map[string]any{"blob": blob("1").Blob, "messages": []any{lcMessage("human", "m1", "hi")}}}
		}), "invalid", "both"},
		{"put: messages in another channel", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"a": messages(lcMessage("human", "m1", "hi"))}
		}), "invalid", `only for the channel "messages"`},
		{"put: a message without an id", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"messages": messages(json.RawMessage(`{"type":"human","data":{"content":"hi","id":null}}`))}
		}), "invalid", "data.id"},
		{"put: a message that is not an object", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"messages": messages(json.RawMessage(`"hi"`))}
		}), "invalid", "messages[0]"},
		{"put: a message of another shape", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"messages": messages(json.RawMessage(`{"role":"user","content":"hi"}`))}
		}), "invalid", "content"},
		{"put: a message without a type", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"messages": messages(json.RawMessage(`{"data":{"id":"m1"}}`))}
		}), "invalid", "messages[0].type"},
		{"put: blob data not base64", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"a": map[string]any{"blob": map[string]any{"type": "json", "data": "!!"}}}
		}), "invalid_json", "base64"},
		{"put: extends on a blob", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"a": map[string]any{"blob": blob("1").Blob, "extends": map[string]any{"n": 0, "h": ""}}}
		}), "invalid", "extends"},
		{"put: a sum", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"messages": map[string]any{"messages": []any{}, "sum": map[string]any{"n": 0, "h": ""}}}
		}), "invalid", "answers only"},
		{"put: shares", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) {
			b["channel_values"] = map[string]any{"messages": map[string]any{"messages": []any{}, "shares": map[string]any{"tuple": 0, "n": 0}}}
		}), "invalid", "answers only"},
		{"put: a value that is null", "POST", "/v1/langgraph/checkpoints", put(func(b map[string]any) { b["channel_values"] = map[string]any{"a": nil} }), "invalid", "one of blob and messages"},

		{"writes: no checkpoint id", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) { delete(b["config"].(map[string]any), "checkpoint_id") }), "invalid", "checkpoint_id"},
		{"writes: no task", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) { delete(b, "task_id") }), "invalid", "task_id"},
		{"writes: task id too long", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) { b["task_id"] = long(1025) }), "invalid", "task_id"},
		{"writes: extends", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) {
			b["writes"] = []any{map[string]any{"idx": 0, "channel": "messages", "value": langgraph.Value{Messages: []json.RawMessage{}, Extends: &langgraph.MessagesSum{}}}}
		}), "invalid", "extends"},
		{"writes: task path too long", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) { b["task_path"] = long(1025) }), "invalid", "task_path"},
		{"writes: no writes", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) { delete(b, "writes") }), "invalid", "writes"},
		{"writes: no channel", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) { b["writes"] = []any{map[string]any{"idx": 0, "value": blob("1")}} }), "invalid", "writes[0].channel"},
		{"writes: idx not an integer", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) {
			b["writes"] = []any{map[string]any{"idx": 1.5, "channel": "a", "value": blob("1")}}
		}), "invalid_json", "idx"},
		{"writes: no value", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) { b["writes"] = []any{map[string]any{"idx": 0, "channel": "a"}} }), "invalid", "writes[0].value"},
		{"writes: messages in another channel", "POST", "/v1/langgraph/writes", writes(func(b map[string]any) {
			b["writes"] = []any{map[string]any{"idx": 0, "channel": "a", "value": messages(lcMessage("ai", "m2", "hi"))}}
		}), "invalid", "writes[0].value"},

		{"get: no thread", "GET", "/v1/langgraph/checkpoint", nil, "invalid", "thread_id"},
		{"get: empty thread", "GET", "/v1/langgraph/checkpoint?thread_id=", nil, "invalid", "thread_id"},
		{"get: thread with a control character", "GET", "/v1/langgraph/checkpoint?thread_id=a%00b", nil, "invalid", "control character"},
		{"get: thread not UTF-8", "GET", "/v1/langgraph/checkpoint?thread_id=%FF", nil, "invalid", "UTF-8"},
		{"get: thread twice", "GET", "/v1/langgraph/checkpoint?thread_id=a&thread_id=b", nil, "invalid", "thread_id"},
		{"get: empty checkpoint id", "GET", "/v1/langgraph/checkpoint?thread_id=a&checkpoint_id=", nil, "invalid", "checkpoint_id"},
		{"get: checkpoint id too long", "GET", "/v1/langgraph/checkpoint?thread_id=a&checkpoint_id=" + long(129), nil, "invalid", "checkpoint_id"},
		{"get: messages_n alone", "GET", "/v1/langgraph/checkpoint?thread_id=a&messages_n=1", nil, "invalid", "both or neither"},
		{"get: messages_n negative", "GET", "/v1/langgraph/checkpoint?thread_id=a&messages_n=-1&messages_h=", nil, "invalid", "messages_n"},
		{"get: messages_n not a number", "GET", "/v1/langgraph/checkpoint?thread_id=a&messages_n=x&messages_h=", nil, "invalid", "messages_n"},
		{"get: messages_h not a sum", "GET", "/v1/langgraph/checkpoint?thread_id=a&messages_n=1&messages_h=abc", nil, "invalid", "messages_h"},
		{"get: messages_h of nothing", "GET", "/v1/langgraph/checkpoint?thread_id=a&messages_n=0&messages_h=" + strings.Repeat("a", 32), nil, "invalid", "messages_h"},
		{"get: namespace too long", "GET", "/v1/langgraph/checkpoint?thread_id=a&checkpoint_ns=" + long(1025), nil, "invalid", "checkpoint_ns"},
		{"get: unknown parameter", "GET", "/v1/langgraph/checkpoint?thread_id=a&thread=b", nil, "invalid", `"thread"`},

		{"list: no body", "POST", "/v1/langgraph/checkpoints/search", "", "invalid_json", "empty request body"},
		{"list: negative limit", "POST", "/v1/langgraph/checkpoints/search", `{"limit":-1}`, "invalid", "limit"},
		{"list: thread a number", "POST", "/v1/langgraph/checkpoints/search", `{"thread_id":1}`, "invalid_json", "thread_id"},
		{"list: thread too long", "POST", "/v1/langgraph/checkpoints/search", map[string]any{"thread_id": long(1025)}, "invalid", "thread_id"},
		{"list: namespace with a control character", "POST", "/v1/langgraph/checkpoints/search", `{"checkpoint_ns":"\n"}`, "invalid", "checkpoint_ns"},
		{"list: filter not an object", "POST", "/v1/langgraph/checkpoints/search", `{"filter":[]}`, "invalid_json", "filter"},

		{"delete: thread with NUL", "DELETE", "/v1/langgraph/threads/a%00b", nil, "invalid", "control character"},
		{"delete: thread not UTF-8", "DELETE", "/v1/langgraph/threads/%FF%FE", nil, "invalid", "UTF-8"},
		{"delete: thread too long", "DELETE", "/v1/langgraph/threads/" + long(1025), nil, "invalid", "thread_id"},

		{"copy: no target", "POST", "/v1/langgraph/threads/src/copy", `{}`, "invalid", "target_thread_id"},
		{"copy: no body", "POST", "/v1/langgraph/threads/src/copy", "", "invalid_json", "empty request body"},
		{"copy: unknown member", "POST", "/v1/langgraph/threads/src/copy", `{"target_thread_id":"d","extra":"x"}`, "invalid_json", "extra"},
		{"copy: source with a control character", "POST", "/v1/langgraph/threads/a%0Ab/copy", `{"target_thread_id":"d"}`, "invalid", "control character"},
		{"copy: target too long", "POST", "/v1/langgraph/threads/src/copy", map[string]any{"target_thread_id": long(1025)}, "invalid", "target_thread_id"},

		{"prune: no threads", "POST", "/v1/langgraph/prune", `{"strategy":"delete"}`, "invalid", "thread_ids"},
		{"prune: unknown strategy", "POST", "/v1/langgraph/prune", `{"thread_ids":["t"],"strategy":"sometimes"}`, "invalid", "strategy"},
		{"prune: empty thread", "POST", "/v1/langgraph/prune", `{"thread_ids":["t",""]}`, "invalid", "thread_ids[1]"},

		{"runs: no runs", "POST", "/v1/langgraph/runs/delete", `{}`, "invalid", "run_ids"},
		{"runs: empty run", "POST", "/v1/langgraph/runs/delete", `{"run_ids":[""]}`, "invalid", "run_ids[0]"},
		{"runs: run id too long", "POST", "/v1/langgraph/runs/delete", map[string]any{"run_ids": []string{long(257)}}, "invalid", "run_ids[0]"},

		{"delta: no config", "POST", "/v1/langgraph/delta-history", `{"channels":["a"]}`, "invalid", "config.thread_id"},
		{"delta: no channels", "POST", "/v1/langgraph/delta-history", `{"config":{"thread_id":"t"}}`, "invalid", "channels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.as(keyA)
			a.tb = t
			w := a.call(tc.method, tc.path, tc.body, http.StatusBadRequest, nil)
			if code := errorCode(t, w); code != tc.code {
				t.Errorf("code %q, want %q: %s", code, tc.code, w.Body.String())
			}
			var e errorBody
			json.Unmarshal(w.Body.Bytes(), &e)
			if !strings.Contains(e.Error.Message, tc.says) {
				t.Errorf("the answer does not say %q: %s", tc.says, e.Error.Message)
			}
		})
	}
	// Nothing was kept.
	var list listResponse
	must(t, a.s, req{method: "GET", path: "/v1/threads", key: keyA}, http.StatusOK, &list)
	if len(list.Threads) != 0 {
		t.Errorf("refused requests left threads: %+v", list.Threads)
	}
}

// TestLangGraphPathEscapedThreadIDs checks that a thread id in a path is
// any text, path-escaped: a slash, a space, dots and other scripts reach
// the handler unescaped (a body it refuses proves it), and the path is
// not cleaned into another route.
func TestLangGraphPathEscapedThreadIDs(t *testing.T) {
	a := newLGAPI(t)
	for _, id := range []string{"a/b c", "..", ".", "../x", "线程 ✓", "%", "?x=1#y"} {
		path := "/v1/langgraph/threads/" + lgPathEscape(id) + "/copy"
		w := a.call("POST", path, `{"target_thread_id":""}`, http.StatusBadRequest, nil)
		if !strings.Contains(w.Body.String(), "target_thread_id") {
			t.Errorf("POST %s: %s", path, w.Body.String())
		}
	}
	// The method is refused on a route that has none of it.
	wantError(t, a.s, req{method: "PUT", path: "/v1/langgraph/checkpoints", key: keyA, body: `{}`}, http.StatusMethodNotAllowed, "method_not_allowed")
}

// lgPathEscape escapes a thread id for a path segment as a client should:
// url.PathEscape, and the dots too, which a path would otherwise read as
// "." and ".." segments.
func lgPathEscape(id string) string {
	return strings.ReplaceAll(url.PathEscape(id), ".", "%2E")
}

// The tests below need package langgraph's Saver: they answer 501 while
// its methods are stubs.

// TestLangGraphUnknownThread checks the answers for a thread nobody put:
// get is 404 (the client's None), delete is 204, copy is 404, list and
// delta history find nothing.
func TestLangGraphUnknownThread(t *testing.T) {
	a := newLGAPI(t)
	w := a.call("GET", lgGetPath(langgraph.Config{ThreadID: "nobody"}), nil, http.StatusNotFound, nil)
	if code := errorCode(t, w); code != "not_found" {
		t.Errorf("code %q", code)
	}
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: "nobody", CheckpointID: "c1"}), nil, http.StatusNotFound, nil)
	a.call("DELETE", "/v1/langgraph/threads/nobody", nil, http.StatusNoContent, nil)
	a.call("POST", "/v1/langgraph/threads/nobody/copy", map[string]any{"target_thread_id": "d"}, http.StatusNotFound, nil)
	if ids := a.list(map[string]any{"thread_id": "nobody"}); len(ids) != 0 {
		t.Errorf("list: %v", ids)
	}
	a.call("POST", "/v1/langgraph/prune", map[string]any{"thread_ids": []string{"nobody"}}, http.StatusNoContent, nil)
	a.call("POST", "/v1/langgraph/runs/delete", map[string]any{"run_ids": []string{"r"}}, http.StatusNoContent, nil)
}

// TestLangGraphPutAndGet puts a checkpoint and its child and reads them
// back: the checkpoint as put with channel_values, each channel's value at
// its version (a value the child did not move is its parent's), the
// messages JSON-equal to what was sent, the parent's config and the
// metadata.
func TestLangGraphPutAndGet(t *testing.T) {
	a := newLGAPI(t)
	m1, m2 := lcMessage("human", "m1", "hi"), lcMessage("ai", "m2", "hello ✓")
	c1 := lgCheckpoint{thread: "t", id: "c01", versions: map[string]int{"messages": 1, "count": 1}, moved: map[string]int{"messages": 1, "count": 1},
		values: map[string]langgraph.Value{"messages": messages(m1), "count": blob("1")}, metadata: map[string]any{"source": "input", "step": -1, "run_id": "r1"}}
	c2 := lgCheckpoint{thread: "t", parent: "c01", id: "c02", versions: map[string]int{"messages": 2, "count": 1}, moved: map[string]int{"messages": 2},
		values: map[string]langgraph.Value{"messages": messages(m1, m2)}, metadata: map[string]any{"source": "loop", "step": 0, "writes": map[string]any{"n": []any{1, "x"}}}}
	sums := map[string]*langgraph.MessagesSum{"c01": a.put(c1).Messages, "c02": a.put(c2).Messages}
	if sums["c01"] == nil || sums["c01"].N != 1 || sums["c02"] == nil || sums["c02"].N != 2 || *sums["c01"] == *sums["c02"] {
		t.Fatalf("the puts' message sums: %+v, %+v", sums["c01"], sums["c02"])
	}

	for _, tc := range []struct {
		cfg    langgraph.Config
		want   lgCheckpoint
		parent *langgraph.Config
		values map[string]langgraph.Value
	}{
		{langgraph.Config{ThreadID: "t"}, c2, &langgraph.Config{ThreadID: "t", CheckpointID: "c01"},
			map[string]langgraph.Value{"messages": messages(m1, m2), "count": blob("1")}},
		{langgraph.Config{ThreadID: "t", CheckpointID: "c02"}, c2, &langgraph.Config{ThreadID: "t", CheckpointID: "c01"},
			map[string]langgraph.Value{"messages": messages(m1, m2), "count": blob("1")}},
		{langgraph.Config{ThreadID: "t", CheckpointID: "c01"}, c1, nil,
			map[string]langgraph.Value{"messages": messages(m1), "count": blob("1")}},
	} {
		got := a.get(tc.cfg)
		if want := (langgraph.Config{ThreadID: "t", CheckpointID: tc.want.id}); got.Config != want {
			t.Errorf("get %+v: config %+v, want %+v", tc.cfg, got.Config, want)
		}
		if diff := cmp.Diff(tc.parent, got.ParentConfig); diff != "" {
			t.Errorf("get %+v: parent_config (-want +got):\n%s", tc.cfg, diff)
		}
		sent := tc.want.body()
		wantCkpt := sent["checkpoint"].(map[string]any)
		wantCkpt["channel_values"] = tc.values
		if diff := jsonDiff(t, wantCkpt, got.Checkpoint); diff != "" {
			t.Errorf("get %+v: checkpoint (-want +got):\n%s", tc.cfg, diff)
		}
		if diff := jsonDiff(t, sent["metadata"], got.Metadata); diff != "" {
			t.Errorf("get %+v: metadata (-want +got):\n%s", tc.cfg, diff)
		}
		if len(got.PendingWrites) != 0 {
			t.Errorf("get %+v: pending writes %+v", tc.cfg, got.PendingWrites)
		}
		if *got.sum != *sums[tc.want.id] {
			t.Errorf("get %+v: the messages' sum %+v, the put's %+v", tc.cfg, got.sum, sums[tc.want.id])
		}
	}
	// Neither another id nor another namespace has it.
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: "t", CheckpointID: "c03"}), nil, http.StatusNotFound, nil)
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: "t", CheckpointNS: "sub:1"}), nil, http.StatusNotFound, nil)

	// A checkpoint that drops a message and edits another stores what
	// changed; it reads back as sent.
	m2edited := lcMessage("ai", "m2", "hello, edited")
	a.put(lgCheckpoint{thread: "t", parent: "c02", id: "c03", versions: map[string]int{"messages": 3, "count": 1}, moved: map[string]int{"messages": 3},
		values: map[string]langgraph.Value{"messages": messages(m2edited)}})
	got := a.get(langgraph.Config{ThreadID: "t"})
	if diff := jsonDiff(t, messages(m2edited), got.values["messages"]); diff != "" {
		t.Errorf("edited messages (-want +got):\n%s", diff)
	}
	// And the blob's bytes are the bytes sent.
	if b := got.values["count"].Blob; b == nil || string(b.Data) != "1" || b.Type != "json" {
		t.Errorf("count: %+v", got.values["count"])
	}
}

// TestLangGraphList checks list: newest first across namespaces, one
// namespace, before, limit, a metadata filter, one checkpoint id, and
// every thread of the tenant.
func TestLangGraphList(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	val := map[string]langgraph.Value{"a": blob("1")}
	for _, c := range []lgCheckpoint{
		{thread: "t", id: "c01", metadata: map[string]any{"source": "input", "step": -1}},
		{thread: "t", parent: "c01", id: "c02", metadata: map[string]any{"source": "loop", "step": 0, "user": map[string]any{"name": "ada"}}},
		{thread: "t", parent: "c02", id: "c03", metadata: map[string]any{"source": "loop", "step": 1}},
		{thread: "t", ns: "sub:1", id: "c04", metadata: map[string]any{"source": "loop", "step": 0}},
		{thread: "u", id: "c05", metadata: map[string]any{"source": "input", "step": -1}},
	} {
		c.versions, c.moved, c.values = v, v, val
		a.put(c)
	}
	ns := ""
	for _, tc := range []struct {
		search map[string]any
		want   []string
	}{
		{map[string]any{"thread_id": "t"}, []string{"c04", "c03", "c02", "c01"}},
		{map[string]any{"thread_id": "t", "checkpoint_ns": ns}, []string{"c03", "c02", "c01"}},
		{map[string]any{"thread_id": "t", "checkpoint_ns": "sub:1"}, []string{"c04"}},
		{map[string]any{"thread_id": "t", "before": "c03"}, []string{"c02", "c01"}},
		{map[string]any{"thread_id": "t", "limit": 2}, []string{"c04", "c03"}},
		{map[string]any{"thread_id": "t", "checkpoint_ns": ns, "before": "c03", "limit": 1}, []string{"c02"}},
		{map[string]any{"thread_id": "t", "filter": map[string]any{"source": "loop"}}, []string{"c04", "c03", "c02"}},
		{map[string]any{"thread_id": "t", "filter": map[string]any{"source": "loop", "step": 0}}, []string{"c04", "c02"}},
		{map[string]any{"thread_id": "t", "filter": map[string]any{"user": map[string]any{"name": "ada"}}}, []string{"c02"}},
		{map[string]any{"thread_id": "t", "filter": map[string]any{"step": "0"}}, []string{}},
		{map[string]any{"thread_id": "t", "checkpoint_ns": ns, "checkpoint_id": "c02"}, []string{"c02"}},
		{map[string]any{}, []string{"c05", "c04", "c03", "c02", "c01"}},
		{map[string]any{"filter": map[string]any{"source": "input"}}, []string{"c05", "c01"}},
		{map[string]any{"thread_id": "nobody"}, []string{}},
	} {
		if got := a.list(tc.search); !slices.Equal(got, tc.want) {
			t.Errorf("list %v: %v, want %v", tc.search, got, tc.want)
		}
	}
	// Another tenant lists none of them.
	if got := a.as(keyB).list(map[string]any{}); len(got) != 0 {
		t.Errorf("tenant b lists %v", got)
	}
}

// TestLangGraphWrites checks putWrites: the writes come back with their
// checkpoint sorted by (task_id, idx); a write whose (task_id, idx) is
// stored is ignored when idx >= 0 and replaces the stored one when idx < 0;
// a messages write keeps its messages.
func TestLangGraphWrites(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	a.put(lgCheckpoint{thread: "t", id: "c01", versions: v, moved: v, values: map[string]langgraph.Value{"a": blob("1")}})
	m3 := lcMessage("ai", "m3", "from a task")
	a.writes("t", "", "c01", "task-b", "~p", langgraph.Write{Idx: 0, Channel: "a", Value: blob(`"b0"`)}, langgraph.Write{Idx: 1, Channel: "messages", Value: messages(m3)})
	a.writes("t", "", "c01", "task-a", "~p", langgraph.Write{Idx: 0, Channel: "a", Value: blob(`"a0"`)})
	// Again, with other values: idx 0 is taken, idx -1 (an error) replaces.
	a.writes("t", "", "c01", "task-b", "~p", langgraph.Write{Idx: 0, Channel: "a", Value: blob(`"b0 again"`)})
	a.writes("t", "", "c01", "task-a", "~p", langgraph.Write{Idx: -1, Channel: "__error__", Value: blob(`"first"`)})
	a.writes("t", "", "c01", "task-a", "~p", langgraph.Write{Idx: -1, Channel: "__error__", Value: blob(`"second"`)})

	got := a.get(langgraph.Config{ThreadID: "t"})
	want := []langgraph.PendingWrite{
		{TaskID: "task-a", Channel: "__error__", Value: blob(`"second"`), Idx: -1, TaskPath: "~p"},
		{TaskID: "task-a", Channel: "a", Value: blob(`"a0"`), Idx: 0, TaskPath: "~p"},
		{TaskID: "task-b", Channel: "a", Value: blob(`"b0"`), Idx: 0, TaskPath: "~p"},
		{TaskID: "task-b", Channel: "messages", Value: messages(m3), Idx: 1, TaskPath: "~p"},
	}
	if diff := jsonDiff(t, want, got.PendingWrites); diff != "" {
		t.Errorf("pending writes (-want +got):\n%s", diff)
	}
	// The writes are the checkpoint's: its child has none.
	a.put(lgCheckpoint{thread: "t", parent: "c01", id: "c02", versions: v, moved: map[string]int{}})
	if got := a.get(langgraph.Config{ThreadID: "t"}); len(got.PendingWrites) != 0 {
		t.Errorf("the child's pending writes: %+v", got.PendingWrites)
	}
}

// TestLangGraphCopyThread copies a thread with two namespaces and writes,
// then checks that the target reads as the source, that a second copy to
// it conflicts, and that the source is unchanged.
func TestLangGraphCopyThread(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	src := "source/thread ✓"
	vm := map[string]int{"a": 1, "messages": 1}
	a.put(lgCheckpoint{thread: src, id: "c01", versions: vm, moved: vm, values: map[string]langgraph.Value{"a": blob("1"), "messages": messages(lcMessage("human", "m1", "hi"))}})
	a.put(lgCheckpoint{thread: src, parent: "c01", id: "c02", versions: vm, moved: map[string]int{}})
	a.put(lgCheckpoint{thread: src, ns: "sub:1", id: "c03", versions: v, moved: v, values: map[string]langgraph.Value{"a": blob("3")}})
	a.writes(src, "", "c02", "task", "", langgraph.Write{Idx: 0, Channel: "a", Value: blob("2")})

	path := "/v1/langgraph/threads/" + lgPathEscape(src) + "/copy"
	a.call("POST", path, map[string]any{"target_thread_id": "dst"}, http.StatusNoContent, nil)
	for _, ns := range []string{"", "sub:1"} {
		s, d := a.get(langgraph.Config{ThreadID: src, CheckpointNS: ns}), a.get(langgraph.Config{ThreadID: "dst", CheckpointNS: ns})
		if d.Config.ThreadID != "dst" || d.Config.CheckpointID != s.Config.CheckpointID {
			t.Errorf("ns %q: copy's config %+v, source's %+v", ns, d.Config, s.Config)
		}
		for _, diff := range []string{
			jsonDiff(t, s.Checkpoint, d.Checkpoint), jsonDiff(t, s.Metadata, d.Metadata), jsonDiff(t, s.PendingWrites, d.PendingWrites),
		} {
			if diff != "" {
				t.Errorf("ns %q: the copy differs (-source +copy):\n%s", ns, diff)
			}
		}
	}
	if got := a.list(map[string]any{"thread_id": "dst"}); !slices.Equal(got, []string{"c03", "c02", "c01"}) {
		t.Errorf("the copy lists %v", got)
	}
	w := a.call("POST", path, map[string]any{"target_thread_id": "dst"}, http.StatusConflict, nil)
	if code := errorCode(t, w); code != "conflict" {
		t.Errorf("second copy: code %q", code)
	}
	if got := a.list(map[string]any{"thread_id": src}); !slices.Equal(got, []string{"c03", "c02", "c01"}) {
		t.Errorf("the source lists %v", got)
	}
}

// TestLangGraphDeleteThread deletes a thread, by a path-escaped id, with
// every namespace, and again: both 204.
func TestLangGraphDeleteThread(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	id := "a/b c ✓"
	a.put(lgCheckpoint{thread: id, id: "c01", versions: v, moved: v, values: map[string]langgraph.Value{"a": blob("1")}})
	a.put(lgCheckpoint{thread: id, ns: "sub:1", id: "c02", versions: v, moved: v, values: map[string]langgraph.Value{"a": blob("2")}})
	a.put(lgCheckpoint{thread: "keep", id: "c03", versions: v, moved: v, values: map[string]langgraph.Value{"a": blob("3")}})
	a.call("DELETE", "/v1/langgraph/threads/"+lgPathEscape(id), nil, http.StatusNoContent, nil)
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: id}), nil, http.StatusNotFound, nil)
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: id, CheckpointNS: "sub:1"}), nil, http.StatusNotFound, nil)
	a.call("DELETE", "/v1/langgraph/threads/"+lgPathEscape(id), nil, http.StatusNoContent, nil)
	if got := a.list(map[string]any{}); !slices.Equal(got, []string{"c03"}) {
		t.Errorf("after the delete: %v", got)
	}
}

// TestLangGraphPrune checks both strategies: keep_latest keeps the latest
// checkpoint of each namespace, delete deletes the thread's checkpoints;
// other threads are untouched.
func TestLangGraphPrune(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	val := map[string]langgraph.Value{"a": blob("1")}
	for _, c := range []lgCheckpoint{
		{thread: "x", id: "c01"}, {thread: "x", parent: "c01", id: "c02"}, {thread: "x", parent: "c02", id: "c03"},
		{thread: "x", ns: "sub:1", id: "c04"}, {thread: "x", ns: "sub:1", parent: "c04", id: "c05"},
		{thread: "y", id: "c06"}, {thread: "y", parent: "c06", id: "c07"},
		{thread: "z", id: "c08"},
	} {
		c.versions, c.moved, c.values = v, v, val
		a.put(c)
	}
	a.call("POST", "/v1/langgraph/prune", map[string]any{"thread_ids": []string{"x"}, "strategy": "keep_latest"}, http.StatusNoContent, nil)
	if got := a.list(map[string]any{"thread_id": "x"}); !slices.Equal(got, []string{"c05", "c03"}) {
		t.Errorf("x after keep_latest: %v", got)
	}
	// The latest still reads whole.
	if got := a.get(langgraph.Config{ThreadID: "x"}); got.Config.CheckpointID != "c03" || got.values["a"].Blob == nil {
		t.Errorf("x's latest after keep_latest: %+v", got)
	}
	a.call("POST", "/v1/langgraph/prune", map[string]any{"thread_ids": []string{"y", "nobody"}, "strategy": "delete"}, http.StatusNoContent, nil)
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: "y"}), nil, http.StatusNotFound, nil)
	// No strategy is keep_latest.
	a.call("POST", "/v1/langgraph/prune", map[string]any{"thread_ids": []string{"z"}}, http.StatusNoContent, nil)
	if got := a.list(map[string]any{}); !slices.Equal(got, []string{"c08", "c05", "c03"}) {
		t.Errorf("after the prunes: %v", got)
	}
}

// TestLangGraphDeleteForRuns deletes the checkpoints of runs by their
// metadata's run_id, with their writes, and nothing else.
func TestLangGraphDeleteForRuns(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	val := map[string]langgraph.Value{"a": blob("1")}
	for _, c := range []lgCheckpoint{
		{thread: "t", id: "c01", metadata: map[string]any{"run_id": "r1"}},
		{thread: "t", parent: "c01", id: "c02", metadata: map[string]any{"run_id": "r1"}},
		{thread: "t", parent: "c02", id: "c03", metadata: map[string]any{"run_id": "r2"}},
		{thread: "u", id: "c04", metadata: map[string]any{"run_id": "r3"}},
		{thread: "u", parent: "c04", id: "c05", metadata: map[string]any{}},
	} {
		c.versions, c.moved, c.values = v, v, val
		a.put(c)
	}
	a.writes("t", "", "c02", "task", "", langgraph.Write{Idx: 0, Channel: "a", Value: blob("2")})
	a.call("POST", "/v1/langgraph/runs/delete", map[string]any{"run_ids": []string{"r1", "r3"}}, http.StatusNoContent, nil)
	if got := a.list(map[string]any{}); !slices.Equal(got, []string{"c05", "c03"}) {
		t.Errorf("after deleting runs r1 and r3: %v", got)
	}
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: "t", CheckpointID: "c02"}), nil, http.StatusNotFound, nil)
	a.call("POST", "/v1/langgraph/runs/delete", map[string]any{"run_ids": []string{}}, http.StatusNoContent, nil)
}

// TestLangGraphDeltaHistory checks getDeltaChannelHistory as
// BaseCheckpointSaver's default walk computes it: from the checkpoint's
// parent up, writes oldest first, each checkpoint's in (task_path,
// task_id, idx) order, the named checkpoint's own left out, and the seed
// at the nearest ancestor that stored the channel's value.
func TestLangGraphDeltaHistory(t *testing.T) {
	a := newLGAPI(t)
	a.put(lgCheckpoint{thread: "t", id: "c01", versions: map[string]int{"d": 1}, moved: map[string]int{"d": 1}, values: map[string]langgraph.Value{"d": blob(`"seed"`)}})
	a.writes("t", "", "c01", "task-b", "~p", langgraph.Write{Idx: 0, Channel: "d", Value: blob(`"w1"`)})
	a.writes("t", "", "c01", "task-a", "~p", langgraph.Write{Idx: 0, Channel: "d", Value: blob(`"w2"`)}, langgraph.Write{Idx: 1, Channel: "other", Value: blob(`"x"`)})
	a.writes("t", "", "c01", "task-z", "", langgraph.Write{Idx: 0, Channel: "d", Value: blob(`"w0"`)})
	// A delta channel moves without a stored value.
	a.put(lgCheckpoint{thread: "t", parent: "c01", id: "c02", versions: map[string]int{"d": 2}, moved: map[string]int{"d": 2}})
	a.writes("t", "", "c02", "task-a", "~p", langgraph.Write{Idx: 0, Channel: "d", Value: blob(`"w3"`)})
	a.put(lgCheckpoint{thread: "t", parent: "c02", id: "c03", versions: map[string]int{"d": 3}, moved: map[string]int{"d": 3}})
	a.writes("t", "", "c03", "task-a", "~p", langgraph.Write{Idx: 0, Channel: "d", Value: blob(`"w4, the target's own"`)})

	pw := func(task, path, v string) langgraph.PendingWrite {
		return langgraph.PendingWrite{TaskID: task, Channel: "d", Value: blob(v), Idx: 0, TaskPath: path}
	}
	seed := blob(`"seed"`)
	for _, tc := range []struct {
		cfg  langgraph.Config
		want langgraph.DeltaResponse
	}{
		{langgraph.Config{ThreadID: "t", CheckpointID: "c03"}, langgraph.DeltaResponse{Channels: map[string]langgraph.DeltaHistory{
			"d":    {Seed: &seed, Writes: []langgraph.PendingWrite{pw("task-z", "", `"w0"`), pw("task-a", "~p", `"w2"`), pw("task-b", "~p", `"w1"`), pw("task-a", "~p", `"w3"`)}},
			"none": {Writes: []langgraph.PendingWrite{}},
		}}},
		{langgraph.Config{ThreadID: "t"}, langgraph.DeltaResponse{Channels: map[string]langgraph.DeltaHistory{
			"d":    {Seed: &seed, Writes: []langgraph.PendingWrite{pw("task-z", "", `"w0"`), pw("task-a", "~p", `"w2"`), pw("task-b", "~p", `"w1"`), pw("task-a", "~p", `"w3"`)}},
			"none": {Writes: []langgraph.PendingWrite{}},
		}}},
		{langgraph.Config{ThreadID: "t", CheckpointID: "c02"}, langgraph.DeltaResponse{Channels: map[string]langgraph.DeltaHistory{
			"d":    {Seed: &seed, Writes: []langgraph.PendingWrite{pw("task-z", "", `"w0"`), pw("task-a", "~p", `"w2"`), pw("task-b", "~p", `"w1"`)}},
			"none": {Writes: []langgraph.PendingWrite{}},
		}}},
		{langgraph.Config{ThreadID: "t", CheckpointID: "c01"}, langgraph.DeltaResponse{Channels: map[string]langgraph.DeltaHistory{
			"d":    {Writes: []langgraph.PendingWrite{}},
			"none": {Writes: []langgraph.PendingWrite{}},
		}}},
	} {
		var got json.RawMessage
		a.call("POST", "/v1/langgraph/delta-history", langgraph.DeltaRequest{Config: tc.cfg, Channels: []string{"d", "none"}}, http.StatusOK, &got)
		if diff := jsonDiff(t, tc.want, got); diff != "" {
			t.Errorf("delta history at %+v (-want +got):\n%s", tc.cfg, diff)
		}
	}
}

// TestLangGraphRoutesAnswer2xx walks one thread through every LangGraph
// route, so that each has answered a success (TestEveryRouteHappyPath
// leaves them to this test).
func TestLangGraphRoutesAnswer2xx(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	a.put(lgCheckpoint{thread: "t", id: "c01", versions: v, moved: v, values: map[string]langgraph.Value{"a": blob("1")}, metadata: map[string]any{"run_id": "r1"}})
	a.writes("t", "", "c01", "task", "", langgraph.Write{Idx: 0, Channel: "a", Value: blob("2")})
	a.get(langgraph.Config{ThreadID: "t"})
	a.list(map[string]any{"thread_id": "t"})
	a.call("POST", "/v1/langgraph/delta-history", langgraph.DeltaRequest{Config: langgraph.Config{ThreadID: "t"}, Channels: []string{"a"}}, http.StatusOK, nil)
	a.call("POST", "/v1/langgraph/threads/t/copy", map[string]any{"target_thread_id": "t2"}, http.StatusNoContent, nil)
	a.call("POST", "/v1/langgraph/prune", map[string]any{"thread_ids": []string{"t2"}, "strategy": "delete"}, http.StatusNoContent, nil)
	a.call("POST", "/v1/langgraph/runs/delete", map[string]any{"run_ids": []string{"r1"}}, http.StatusNoContent, nil)
	a.call("DELETE", "/v1/langgraph/threads/t", nil, http.StatusNoContent, nil)

	var out strings.Builder
	a.s.Metrics().WriteTo(&out)
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		if isLangGraphRoute(rt.pattern) && !answered2xx(out.String(), rt.pattern, method) {
			t.Errorf("route %s never answered a 2xx", rt.pattern)
		}
	}
}

// rebuildMessages returns the whole list of messages of each tuple of a
// list's answer, as a client rebuilds them: an earlier tuple's beginning
// (shares), then the messages sent.
func rebuildMessages(tb testing.TB, tuples []lgTupleJSON) [][]json.RawMessage {
	tb.Helper()
	out := make([][]json.RawMessage, len(tuples))
	for i, t := range tuples {
		v := t.values["messages"]
		var list []json.RawMessage
		if sh := v.Shares; sh != nil {
			if sh.Tuple >= i || sh.N > len(out[sh.Tuple]) {
				tb.Fatalf("tuple %d shares %+v, which is not an earlier list", i, *sh)
			}
			list = append(list, out[sh.Tuple][:sh.N]...)
		}
		if v.Extends != nil {
			tb.Fatalf("tuple %d of a list extends %+v, which no request named", i, *v.Extends)
		}
		out[i] = append(list, v.Messages...)
	}
	return out
}

// TestLangGraphSendsWhatATurnAdds checks that the messages of a turn cost
// what it adds, both ways: a put may send only the messages after its
// parent's (extends), which a put that names another list is refused
// (409, so the client sends the whole list); a get that names the list the
// client holds is answered with the rest only; a list sends each line of
// messages once (shares).
func TestLangGraphSendsWhatATurnAdds(t *testing.T) {
	a := newLGAPI(t)
	m1, m2, m3 := lcMessage("human", "m1", "hi"), lcMessage("ai", "m2", "hello"), lcMessage("human", "m3", "and?")
	vs := func(n int) map[string]int { return map[string]int{"messages": n} }
	s1 := a.put(lgCheckpoint{thread: "t", id: "c01", versions: vs(1), moved: vs(1), values: map[string]langgraph.Value{"messages": messages(m1)}}).Messages
	// c02 sends m2 only.
	s2 := a.put(lgCheckpoint{thread: "t", parent: "c01", id: "c02", versions: vs(2), moved: vs(2),
		values: map[string]langgraph.Value{"messages": {Messages: []json.RawMessage{m2}, Extends: s1}}}).Messages
	if s1 == nil || s2 == nil || s2.N != 2 {
		t.Fatalf("sums %+v, %+v", s1, s2)
	}
	whole := a.get(langgraph.Config{ThreadID: "t"})
	if diff := jsonDiff(t, messages(m1, m2), whole.values["messages"]); diff != "" {
		t.Errorf("c02's messages (-want +got):\n%s", diff)
	}
	if *whole.sum != *s2 {
		t.Errorf("c02's sum %+v, its put's %+v", whole.sum, s2)
	}

	// A get that names what the client holds.
	getKnowing := func(id string, known langgraph.MessagesSum) lgTupleJSON {
		t.Helper()
		q := url.Values{"thread_id": {"t"}, "checkpoint_id": {id}, "messages_n": {fmt.Sprint(known.N)}, "messages_h": {known.H}}
		var tup lgTupleJSON
		a.call("GET", "/v1/langgraph/checkpoint?"+q.Encode(), nil, http.StatusOK, &tup)
		return tup
	}
	for _, tc := range []struct {
		id      string
		known   langgraph.MessagesSum
		extends *langgraph.MessagesSum
		rest    langgraph.Value
	}{
		{"c02", *s1, s1, messages(m2)},
		{"c02", *s2, s2, langgraph.Value{Messages: []json.RawMessage{}}},
		{"c02", langgraph.MessagesSum{}, &langgraph.MessagesSum{}, messages(m1, m2)},
		// Not a beginning of the list: all of it.
		{"c01", *s2, nil, messages(m1)},
		{"c02", langgraph.MessagesSum{N: 1, H: strings.Repeat("0", 32)}, nil, messages(m1, m2)},
	} {
		got := getKnowing(tc.id, tc.known)
		v := got.values["messages"]
		if diff := cmp.Diff(tc.extends, v.Extends); diff != "" {
			t.Errorf("get %s knowing %+v: extends (-want +got):\n%s", tc.id, tc.known, diff)
		}
		v.Extends = nil
		if diff := jsonDiff(t, tc.rest, v); diff != "" {
			t.Errorf("get %s knowing %+v: messages (-want +got):\n%s", tc.id, tc.known, diff)
		}
	}

	// A put whose extends is not its parent's list: 409, nothing stored;
	// the whole list then goes.
	w := a.call("POST", "/v1/langgraph/checkpoints", lgCheckpoint{thread: "t", parent: "c02", id: "c03", versions: vs(3), moved: vs(3),
		values: map[string]langgraph.Value{"messages": {Messages: []json.RawMessage{m3}, Extends: s1}}}.body(), http.StatusConflict, nil)
	if code := errorCode(t, w); code != "conflict" {
		t.Errorf("a stale extends: code %q", code)
	}
	a.call("GET", lgGetPath(langgraph.Config{ThreadID: "t", CheckpointID: "c03"}), nil, http.StatusNotFound, nil)
	a.put(lgCheckpoint{thread: "t", parent: "c02", id: "c03", versions: vs(3), moved: vs(3), values: map[string]langgraph.Value{"messages": messages(m1, m2, m3)}})

	// A list: each tuple's whole list, rebuilt.
	var listed struct {
		Checkpoints []lgTupleJSON `json:"checkpoints"`
	}
	a.call("POST", "/v1/langgraph/checkpoints/search", map[string]any{"thread_id": "t"}, http.StatusOK, &listed)
	want := [][]json.RawMessage{{m1, m2, m3}, {m1, m2}, {m1}}
	if diff := jsonDiff(t, want, rebuildMessages(t, listed.Checkpoints)); diff != "" {
		t.Errorf("listed messages (-want +got):\n%s", diff)
	}
}

// TestLangGraphDeltaHistoryEndsOnACycle checks that delta history answers
// when parents make a cycle — a checkpoint put as its own parent, or two
// each naming the other (a parent a thread does not know is recorded as
// given) — rather than walking it for ever. What it answers is not
// LangGraph's concern (its own walk would not end): only that it does.
func TestLangGraphDeltaHistoryEndsOnACycle(t *testing.T) {
	a := newLGAPI(t)
	v := map[string]int{"a": 1}
	val := map[string]langgraph.Value{"a": blob("1")}
	a.put(lgCheckpoint{thread: "self", parent: "c01", id: "c01", versions: v, moved: v, values: val})
	a.put(lgCheckpoint{thread: "pair", parent: "c03", id: "c02", versions: v, moved: v, values: val})
	a.put(lgCheckpoint{thread: "pair", parent: "c02", id: "c03", versions: v, moved: v, values: val})
	for _, cfg := range []langgraph.Config{{ThreadID: "self"}, {ThreadID: "pair", CheckpointID: "c02"}, {ThreadID: "pair", CheckpointID: "c03"}} {
		done := make(chan int, 1)
		go func() {
			w := do(t, a.s, req{method: "POST", path: "/v1/langgraph/delta-history", key: keyA,
				body: langgraph.DeltaRequest{Config: cfg, Channels: []string{"a", "none"}}})
			done <- w.Code
		}()
		select {
		case code := <-done:
			if code != http.StatusOK {
				t.Errorf("delta history at %+v: status %d", cfg, code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delta history at %+v: no answer after 10 s", cfg)
		}
	}
}

// TestLangGraphThreadIsALoomThread reads a LangGraph thread through the
// routes loom's page uses: it is listed with its labels, its messages are
// loom messages (a person reads the text; the answer's role is the
// assistant's), its checkpoints are the timeline's, and a branch made by
// updateState on an old checkpoint is in its history.
func TestLangGraphThreadIsALoomThread(t *testing.T) {
	a := newLGAPI(t)
	v := func(n int) map[string]int { return map[string]int{"messages": n} }
	m1, m2, m3 := lcMessage("human", "m1", "hello"), lcMessage("ai", "m2", "hi there"), lcMessage("ai", "m3", "hi, edited")
	a.put(lgCheckpoint{thread: "chat", id: "c01", versions: v(1), moved: v(1), values: map[string]langgraph.Value{"messages": messages(m1)}})
	a.put(lgCheckpoint{thread: "chat", parent: "c01", id: "c02", versions: v(2), moved: v(2), values: map[string]langgraph.Value{"messages": messages(m1, m2)}})
	// updateState on c01: a branch with another answer.
	a.put(lgCheckpoint{thread: "chat", parent: "c01", id: "c03", versions: v(3), moved: v(3), values: map[string]langgraph.Value{"messages": messages(m1, m3)}})

	id := langgraph.ThreadKey("chat", "")
	var list struct {
		Threads []struct {
			ID     string            `json:"id"`
			Labels map[string]string `json:"labels"`
		} `json:"threads"`
	}
	a.call("GET", "/v1/threads?label=langgraph.thread:chat", nil, http.StatusOK, &list)
	if len(list.Threads) != 1 || list.Threads[0].ID != id || list.Threads[0].Labels["langgraph"] != "checkpoints" {
		t.Fatalf("listed %+v, want the one thread %s", list.Threads, id)
	}
	var msgs struct {
		Messages []struct {
			ID       string `json:"id"`
			Role     string `json:"role"`
			Contents []struct {
				Text string `json:"text"`
			} `json:"contents"`
		} `json:"messages"`
	}
	a.call("GET", "/v1/threads/"+id+"/messages", nil, http.StatusOK, &msgs)
	if len(msgs.Messages) != 2 || msgs.Messages[1].Role != "assistant" || msgs.Messages[1].Contents[0].Text != "hi, edited" {
		t.Fatalf("the thread's messages: %+v", msgs.Messages)
	}
	var cps struct {
		Checkpoints []struct {
			Name string `json:"name"`
		} `json:"checkpoints"`
	}
	a.call("GET", "/v1/threads/"+id+"/checkpoints", nil, http.StatusOK, &cps)
	var names []string
	for _, c := range cps.Checkpoints {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"c01", "c02", "c03"}) {
		t.Fatalf("the timeline's checkpoints: %v", names)
	}
	var hist struct {
		Entries []struct {
			Op string `json:"op"`
		} `json:"entries"`
	}
	a.call("GET", "/v1/threads/"+id+"/history", nil, http.StatusOK, &hist)
	if len(hist.Entries) == 0 || hist.Entries[0].Op != "rollback" {
		t.Fatalf("the branch is not in the history: %+v", hist.Entries)
	}
}
