package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// goText is text that names Go rather than loom: a client writes JSON and
// should read about JSON members, not Go types.
var goText = []string{"Go struct", "Go value", "httpapi.", "is its package imported", "json: ", "reflect", "[]message."}

// wantLoomError serves rq and fails unless it is answered with status and
// code and a message that names no Go type and says each of says.
func wantLoomError(t *testing.T, h http.Handler, rq req, status int, code string, says ...string) {
	t.Helper()
	w := wantError(t, h, rq, status, code)
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	for _, g := range goText {
		if strings.Contains(e.Error.Message, g) {
			t.Errorf("%s %s: the answer speaks Go (%q): %s", rq.method, rq.path, g, e.Error.Message)
		}
	}
	for _, s := range says {
		if !strings.Contains(e.Error.Message, s) {
			t.Errorf("%s %s: the answer does not say %q: %s", rq.method, rq.path, s, e.Error.Message)
		}
	}
}

// fullServer returns a server with every face on: an agent on a scripted
// model that answers "ok", and work items.
func fullServer(t *testing.T) *Server {
	t.Helper()
	db := thread.New(thread.NewMemoryStore(), nil)
	return newServer(t, Options{DB: db, Agent: agent.New(scripted.New(scripted.Text("ok")), nil), Worklog: worklog.NewLogs(db, nil)})
}

// TestDecodeErrorsNameTheMember checks that a body of the wrong shape is
// answered with a sentence that names the JSON member and what it should
// be, in loom's words: no Go struct, type or package names.
func TestDecodeErrorsNameTheMember(t *testing.T) {
	s := fullServer(t)
	createThread(t, s, "", "t1", "hi")
	for _, tc := range []struct {
		name string
		rq   req
		says []string
	}{
		{"number for a string", req{method: "POST", path: "/v1/threads", body: `{"id":5}`}, []string{"id: expected a string, got a number"}},
		{"array for the body", req{method: "POST", path: "/v1/threads", body: `[1,2]`}, []string{"expected a JSON object, got an array"}},
		{"string for the body", req{method: "POST", path: "/v1/threads/t1/messages", body: `"hi"`}, []string{"expected a JSON object, got a string"}},
		{"object for an array", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":{}}`}, []string{"messages: expected an array of messages, got an object"}},
		{"string for a map", req{method: "POST", path: "/v1/threads", body: `{"labels":"a"}`}, []string{"labels: expected an object, got a string"}},
		{"number for a label value", req{method: "POST", path: "/v1/threads", body: `{"labels":{"a":1}}`}, []string{"labels: expected a string as each value, got a number"}},
		{"string for an integer", req{method: "POST", path: "/v1/threads/t1/fork", body: `{"version":"2"}`}, []string{"version: expected an integer, got a string"}},
		{"fraction for an integer", req{method: "POST", path: "/v1/threads/t1/view", body: `{"budget":1.5}`}, []string{"budget: expected an integer"}},
		{"string for a boolean", req{method: "POST", path: "/v1/threads/t1/runs", body: `{"stream":"yes"}`}, []string{"stream: expected true or false, got a string"}},
		{"unknown member", req{method: "POST", path: "/v1/threads", body: `{"name":"x"}`}, []string{`unknown member "name"`}},
		{"not JSON", req{method: "POST", path: "/v1/threads", body: `{"id":`}, []string{"not valid JSON"}},
		{"bad JSON", req{method: "POST", path: "/v1/threads", body: `{"id" 1}`}, []string{"not valid JSON"}},
		{"two values", req{method: "POST", path: "/v1/threads", body: `{} {}`}, []string{"after the JSON value"}},
		{"strategy of the wrong shape", req{method: "POST", path: "/v1/threads/t1/view", body: `{"strategies":[{"type":"sliding_window","turns":"2"}]}`}, []string{"strategies[0]", "turns: expected an integer, got a string"}},
		{"strategy with an unknown member", req{method: "POST", path: "/v1/threads/t1/view", body: `{"strategies":[{"type":"drop_oldest","n":2}]}`}, []string{"strategies[0]", `unknown member "n"`}},
		{"message role a number", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":1,"contents":[]}]}`}, []string{"messages[0]", "role"}},
		{"work item text a number", req{method: "POST", path: "/v1/items", body: `{"text":1}`}, []string{"text: expected a string, got a number"}},
		{"workflow input step a number", req{method: "POST", path: "/v1/workflows/w1/input", body: `{"step":1,"input":1}`}, []string{"step: expected a string, got a number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantLoomError(t, s, tc.rq, http.StatusBadRequest, "invalid_json", tc.says...)
		})
	}
	// An imported document is read by package thread, in the same words.
	wantLoomError(t, s, req{method: "POST", path: "/v1/threads/import", body: `{"format":"loom.thread/v1","thread":{"id":5}}`},
		http.StatusBadRequest, "invalid", "thread.id: expected a string, got a number")
	wantLoomError(t, s, req{method: "POST", path: "/v1/threads/import", body: `[1]`},
		http.StatusBadRequest, "invalid", "expected a JSON object, got an array")
}

// TestMessagesNeedContents checks that a message without contents, such
// as one in OpenAI's shape ({"role":"user","content":"hi"}), is refused
// with a message that says how a loom message is written, and that the
// thread does not change.
func TestMessagesNeedContents(t *testing.T) {
	s := fullServer(t)
	createThread(t, s, "", "t1", "hi")
	const how = "messages carry `contents`"
	for _, tc := range []struct {
		name string
		rq   req
	}{
		{"append in OpenAI's shape", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":"user","content":"hi"}]}`}},
		{"append without contents", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":"user"}]}`}},
		{"append with null contents", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":"user","contents":null}]}`}},
		{"create in OpenAI's shape", req{method: "POST", path: "/v1/threads", body: `{"id":"t2","messages":[{"role":"user","content":"hi"}]}`}},
		{"run input in OpenAI's shape", req{method: "POST", path: "/v1/threads/t1/runs", body: `{"input":[{"role":"user","content":"hi"}]}`}},
		{"view instructions in OpenAI's shape", req{method: "POST", path: "/v1/threads/t1/view", body: `{"instructions":[{"role":"system","content":"be brief"}]}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantLoomError(t, s, tc.rq, http.StatusBadRequest, "invalid", how, `[{"type":"text","text":`)
		})
	}
	// Nothing changed.
	var msgs messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/t1/messages"}, http.StatusOK, &msgs)
	if msgs.Version != 1 || len(msgs.Messages) != 1 {
		t.Errorf("thread t1 changed: version %d, %d messages", msgs.Version, len(msgs.Messages))
	}
	wantError(t, s, req{method: "GET", path: "/v1/threads/t2"}, http.StatusNotFound, "not_found")
	// Empty contents, written out, are a message with no parts.
	must(t, s, req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":"user","contents":[]}]}`}, http.StatusCreated, nil)
}

// TestUnknownQueryParametersRefused checks that each route refuses a query
// parameter it does not take, naming it, rather than ignoring it.
func TestUnknownQueryParametersRefused(t *testing.T) {
	s := fullServer(t)
	createThread(t, s, "", "t1", "hi")
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		path = strings.NewReplacer("{id}", "t1", "{name}", "c1", "{thread_id}", "t1").Replace(path)
		t.Run(rt.pattern, func(t *testing.T) {
			wantLoomError(t, s, req{method: method, path: path + "?colour=blue"}, http.StatusBadRequest, "invalid", `query parameter "colour"`)
		})
	}
	// A known parameter given twice where it is taken once, and a
	// malformed query, are refused too.
	wantLoomError(t, s, req{method: "GET", path: "/v1/threads?limit=1&limit=2"}, http.StatusBadRequest, "invalid", `query parameter "limit"`)
	wantLoomError(t, s, req{method: "GET", path: "/v1/threads?limit=%zz"}, http.StatusBadRequest, "invalid", "query")
	// Labels may repeat.
	must(t, s, req{method: "GET", path: "/v1/threads?label=a:1&label=b:2"}, http.StatusOK, nil)
}

// TestInvalidUTF8Refused checks that text that is not UTF-8 — raw bytes, or
// a \u escape of half a surrogate pair — is refused with 400 rather than
// stored as U+FFFD, in bodies and in query parameters.
func TestInvalidUTF8Refused(t *testing.T) {
	s := fullServer(t)
	createThread(t, s, "", "t1", "hi")
	for _, tc := range []struct {
		name string
		rq   req
	}{
		{"raw byte in a message", req{method: "POST", path: "/v1/threads/t1/messages", body: "{\"messages\":[{\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}]}"}},
		{"lone surrogate in a message", req{method: "POST", path: "/v1/threads/t1/messages", body: `{"messages":[{"role":"user","contents":[{"type":"text","text":"a\ud800b"}]}]}`}},
		{"lone surrogate in a title", req{method: "PATCH", path: "/v1/threads/t1", body: `{"title":"\udc00"}`}},
		{"raw byte in a label", req{method: "POST", path: "/v1/threads", body: "{\"id\":\"t3\",\"labels\":{\"a\":\"\xc3\"}}"}},
		{"lone surrogate in a checkpoint name", req{method: "POST", path: "/v1/threads/t1/checkpoints", body: `{"name":"c\ud83d"}`}},
		{"lone surrogate in run input", req{method: "POST", path: "/v1/threads/t1/runs", body: `{"input":"\ud800"}`}},
		{"raw byte in a query parameter", req{method: "GET", path: "/v1/search?q=%ff"}},
		{"raw byte in a label filter", req{method: "GET", path: "/v1/threads?label=a:%c3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, s, tc.rq)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", w.Code, w.Body.String())
			}
			if c := errorCode(t, w); c != "invalid" && c != "invalid_json" {
				t.Errorf("code %q", c)
			}
		})
	}
	var th threadJSON
	must(t, s, req{method: "GET", path: "/v1/threads/t1"}, http.StatusOK, &th)
	if th.Version != 1 || th.Title != "t t1" {
		t.Errorf("thread t1 changed: %+v", th)
	}
	if _, err := s.db.Thread(t.Context(), "t3"); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("thread t3: %v, want not found", err)
	}
}

// failingBody is a request body whose read fails the way a network read
// does, with the server's addresses in the error's text.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) {
	return 0, errors.New("read tcp 10.1.2.3:8080->10.9.8.7:40000: i/o timeout")
}

// TestBodyReadErrorTextIsNotSent checks that a failed body read is
// answered without the error's text: decode sends "reading the request
// body: " + err.Error(), which names the server's network addresses.
func TestBodyReadErrorTextIsNotSent(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "one")
	for _, path := range []string{"/v1/threads", "/v1/threads/th/messages"} {
		r := httptest.NewRequest("POST", path, failingBody{})
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest || errorCode(t, w) != "invalid_json" {
			t.Errorf("POST %s: %d %s, want 400 invalid_json", path, w.Code, w.Body.String())
		}
		if strings.Contains(w.Body.String(), "10.1.2.3") || strings.Contains(w.Body.String(), "i/o timeout") {
			t.Errorf("POST %s: the read error reached the client: %d %s", path, w.Code, w.Body.String())
		}
	}
}
