package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// The fuzz targets send random bodies to the routes that decode JSON: each
// answer must be a 2xx or a typed error (a 4xx, or 501), never a 500 or a
// panic. `go test` runs their seeds; `make fuzz` runs each for a while.

// knownCodes are the codes of the error table.
var knownCodes = map[string]bool{
	"not_found": true, "conflict": true, "precondition_failed": true, "invalid": true, "invalid_json": true,
	"unsupported": true, "busy": true, "approval_required": true, "too_large": true, "method_not_allowed": true,
	"ambiguous": true,
}

func checkAnswer(t *testing.T, w *httptest.ResponseRecorder, body string) {
	t.Helper()
	if w.Code >= 200 && w.Code < 300 {
		return
	}
	if w.Code >= 500 && w.Code != http.StatusNotImplemented {
		t.Fatalf("status %d for %q: %s", w.Code, body, w.Body.String())
	}
	if code := errorCode(t, w); !knownCodes[code] {
		t.Fatalf("status %d, code %q for %q", w.Code, code, body)
	}
}

// fuzzServer returns a server with a thread "th" of a few messages, a tool
// call among them, and a checkpoint "cp".
func fuzzServer(f *testing.F, opts Options) (*Server, *thread.DB) {
	f.Helper()
	db := thread.New(thread.NewMemoryStore(), nil)
	opts.DB = db
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 64 << 10
	}
	s := newServer(f, opts)
	seedThread(f, db, "th")
	return s, db
}

func seedThread(tb testing.TB, db *thread.DB, id string) *thread.Thread {
	tb.Helper()
	th, err := db.Create(tb.Context(), thread.CreateOptions{ID: id, Messages: []message.Message{
		{ID: "m1", Role: message.RoleSystem, Contents: []message.Content{message.Text{Text: "be brief"}}},
		{ID: "m2", Role: message.RoleUser, Contents: []message.Content{message.Text{Text: "weather?"}}},
		message.ToolCall("c1", "weather", `{"city":"Paris"}`),
		message.ToolResult("c1", `{"temp_c":21}`),
		{ID: "m5", Role: message.RoleAssistant, Contents: []message.Content{message.Text{Text: "21 °C"}}},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := th.Checkpoint(tb.Context(), "cp"); err != nil {
		tb.Fatal(err)
	}
	return th
}

func fuzzPost(t *testing.T, s *Server, path, body string, header map[string]string) {
	w := do(t, s, req{method: "POST", path: path, body: body, header: header})
	checkAnswer(t, w, body)
}

func FuzzCreateThread(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"id":"a","title":"t","labels":{"k":"v"},"kind":"local"}`,
		`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}],"state":{"wf/x":1}}`,
		`{"kind":"service","messages":[{"role":"user","contents":[]}]}`, `{"id":"../x"}`, `{"labels":{"":"x"}}`,
		`{"state":{"":null}}`, `{"messages":[null]}`, `[]`, `null`, `{"id":1}`, ``,
	} {
		f.Add(seed)
	}
	s, _ := fuzzServer(f, Options{})
	f.Fuzz(func(t *testing.T, body string) { fuzzPost(t, s, "/v1/threads", body, nil) })
}

func FuzzPatchThread(f *testing.F) {
	for _, seed := range []string{`{"title":"x"}`, `{"labels":{}}`, `{"labels":{"a b":"c"}}`, `{"title":null}`, `{"title":"\u0000"}`, `{}`} {
		f.Add(seed, "")
		f.Add(seed, `"1"`)
	}
	s, _ := fuzzServer(f, Options{})
	f.Fuzz(func(t *testing.T, body, ifMatch string) {
		w := do(t, s, req{method: "PATCH", path: "/v1/threads/th", body: body, header: map[string]string{"If-Match": ifMatch}})
		checkAnswer(t, w, body)
	})
}

func FuzzAppend(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]}`,
		`{"messages":[{"id":"m1","role":"user","contents":[]}]}`,
		`{"messages":[{"role":"tool","contents":[{"type":"function_result","call_id":"c9","result":"x"}]}]}`,
		`{"messages":[{"role":"user","contents":[{"type":"citation","url":"u"}],"metadata":{"n":1e400}}]}`,
		`{"messages":[{"role":"USER","contents":[{"type":"data","data":"!!"}]}]}`,
		`{"messages":[]}`, `{"messages":null}`, `{}`,
	} {
		f.Add(seed, "")
		f.Add(seed, `"2"`)
	}
	s, db := fuzzServer(f, Options{})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body, ifMatch string) {
		// A fresh thread now and then, so that the thread stays small.
		if n.Add(1)%100 == 0 {
			db.Delete(t.Context(), "th")
			seedThread(t, db, "th")
		}
		fuzzPost(t, s, "/v1/threads/th/messages", body, map[string]string{"If-Match": ifMatch})
	})
}

func FuzzView(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"model":"gpt-4.1","budget":100,"max_messages":3,"pinned":["m2"]}`,
		`{"encoding":"cl100k_base","instructions":[{"role":"system","contents":[{"type":"text","text":"x"}]}]}`,
		`{"strategies":[{"type":"sliding_window","turns":1},{"type":"elide_tool_results","keep_last":0},{"type":"drop_oldest"}]}`,
		`{"strategies":[{"type":"summarize","keep":2}],"budget":50}`, `{"budget":1}`, `{"pinned":["nope"]}`,
		`{"version":99}`, `{"version":-1}`, `{"strategies":[{"type":"sliding_window","turns":0}]}`, `{"strategies":[null]}`,
		`{"max_messages":1,"instructions":[{"role":"system","contents":[]},{"role":"system","contents":[]}]}`,
	} {
		f.Add(seed)
	}
	client := scripted.New(scripted.Text("a summary"))
	client.Repeat = true
	s, db := fuzzServer(f, Options{Agent: agent.New(client, nil)})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body string) {
		if n.Add(1)%100 == 0 { // summaries commit
			db.Delete(t.Context(), "th")
			seedThread(t, db, "th")
		}
		fuzzPost(t, s, "/v1/threads/th/view", body, nil)
	})
}

func FuzzFork(f *testing.F) {
	for _, seed := range []string{`{}`, `{"at":"m2","id":"f1","title":"x","labels":{"a":"b"}}`, `{"at":"nope"}`, `{"version":1}`, `{"version":7}`, `{"id":"th"}`, `{"at":"../"}`} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	s, _ := fuzzServer(f, Options{})
	f.Fuzz(func(t *testing.T, body string, copy bool) {
		path := "/v1/threads/th/fork"
		if copy {
			path = "/v1/threads/th/copy"
		}
		fuzzPost(t, s, path, body, nil)
	})
}

func FuzzRollback(f *testing.F) {
	for _, seed := range []string{`{"checkpoint":"cp"}`, `{"version":1}`, `{"version":2}`, `{"checkpoint":"nope"}`, `{"checkpoint":""}`, `{"version":-3}`, `{"checkpoint":"cp","version":1}`} {
		f.Add(seed, "/v1/threads/th/rollback")
	}
	f.Add(`{"name":"new"}`, "/v1/threads/th/checkpoints")
	f.Add(`{"name":"cp"}`, "/v1/threads/th/checkpoints")
	f.Add(`{"name":""}`, "/v1/threads/th/checkpoints")
	f.Add(``, "/v1/threads/th/reset")
	f.Add(`{}`, "/v1/threads/th/reset")
	s, _ := fuzzServer(f, Options{})
	paths := []string{"/v1/threads/th/rollback", "/v1/threads/th/checkpoints", "/v1/threads/th/reset"}
	f.Fuzz(func(t *testing.T, body, path string) {
		for _, p := range paths {
			if p == path {
				fuzzPost(t, s, path, body, nil)
			}
		}
	})
}

func FuzzImport(f *testing.F) {
	s, db := fuzzServer(f, Options{})
	th, err := db.Thread(f.Context(), "th")
	if err != nil {
		f.Fatal(err)
	}
	for _, history := range []bool{false, true} {
		var doc strings.Builder
		if err := th.Save(f.Context(), &doc, thread.SaveOptions{History: history}); err != nil {
			f.Fatal(err)
		}
		f.Add(doc.String(), "copy")
	}
	f.Add(`{"format":"loom.thread/v1","thread":{"id":"x","kind":"local"},"messages":[]}`, "")
	f.Add(`{"format":"loom.thread/v2"}`, "")
	f.Add(`{}`, "../x")
	f.Fuzz(func(t *testing.T, body, id string) {
		fuzzPost(t, s, "/v1/threads/import?id="+url.QueryEscape(id), body, nil)
	})
}

func FuzzRun(f *testing.F) {
	for _, seed := range []string{
		`{"input":"hi"}`, `{"input":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]}`,
		`{"input":"hi","on_busy":"queue"}`, `{"approvals":[{"call_id":"c1","approved":true}]}`,
		`{"input":[{"role":"","contents":[]}]}`, `{"input":5}`, `{"on_busy":"never"}`, `{}`, `{"input":null,"stream":true}`,
	} {
		f.Add(seed)
	}
	client := scripted.New(scripted.Text("ok"))
	client.Repeat = true
	s, db := fuzzServer(f, Options{Agent: agent.New(client, nil)})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body string) {
		if n.Add(1)%50 == 0 {
			db.Delete(t.Context(), "th")
			seedThread(t, db, "th")
		}
		fuzzPost(t, s, "/v1/threads/th/runs", body, nil)
	})
}

func FuzzListQuery(f *testing.F) {
	for _, seed := range []string{"", "label=a:b", "label=a&kind=local", "limit=0", "limit=99999999999999999999", "cursor=dGg", "cursor=!!", "kind=x&label=:"} {
		f.Add(seed)
	}
	s, _ := fuzzServer(f, Options{})
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest("GET", "/v1/threads", nil)
		r.URL.RawQuery = query
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		checkAnswer(t, w, query)
	})
}

// FuzzItems sends random bodies to the work-item routes that decode JSON.
// The project changes every 100 inputs, so that its items stay few.
func FuzzItems(f *testing.F) {
	for _, seed := range []string{
		`{"text":"Fix the build"}`, `{"text":"fix the build."}`, `{"text":"  "}`, `{"text":"t-0a0b: legacy prefix"}`,
		`{"text":"{\"id\":\"t-01234567\",\"text\":\"json item\",\"status\":\"open\"}"}`, `{"text":"x","session_id":"s 1"}`,
		`{"text":5}`, `{}`, ``, `null`, `[]`,
	} {
		f.Add(seed, 0)
	}
	for _, seed := range []string{
		`{"thread_id":"#1"}`, `{"thread_id":"#0"}`, `{"thread_id":"#99999999999999999999"}`, `{"text_match":"fix"}`,
		`{"text_match":"build","resolution_note":"duplicate of t-01234567"}`, `{"thread_id":"t-01234567","session_id":"s1"}`, `{}`,
	} {
		f.Add(seed, 1)
	}
	for _, seed := range []string{`{}`, ``, `{"session_id":"s1"}`, `{"session_id":""}`, `{"session_id":"../x"}`} {
		f.Add(seed, 2)
	}
	for _, seed := range []string{
		`{"open_threads":["a","b"]}`, `{"open_threads":[{"id":"t-01234567","text":"obj","status":"resolved"}]}`,
		`{"open_threads":["{\"item\":\"legacy\",\"context\":\"c\"}",{"note":"n","status":"open"}]}`,
		`{"open_threads":[null,1,true,[]]}`, `{"open_threads":["PROJECT STATE: loom"]}`, `{"open_threads":null}`, ``,
	} {
		f.Add(seed, 3)
	}
	db := thread.New(thread.NewMemoryStore(), nil)
	s := newServer(f, Options{DB: db, MaxBodyBytes: 64 << 10, Worklog: worklog.NewLogs(db, nil)})
	paths := []string{"/v1/items", "/v1/items/resolve", "/v1/sessions", "/v1/sessions/s1/close"}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body string, route int) {
		project := fmt.Sprintf("fuzz%d", n.Add(1)/100)
		route = (route%len(paths) + len(paths)) % len(paths)
		path := paths[route] + "?project=" + project
		if route == 1 {
			// Something to resolve.
			do(t, s, req{method: "POST", path: "/v1/items?project=" + project, body: `{"text":"Fix the build"}`})
		}
		if route == 3 {
			// A session to close: one never started is refused.
			do(t, s, req{method: "POST", path: "/v1/sessions?project=" + project, body: `{"session_id":"s1"}`})
		}
		fuzzPost(t, s, path, body, nil)
	})
}

// FuzzLangGraph sends random bodies to LangGraph's checkpointer routes,
// and random queries to its GET, on a thread with two checkpoints (the
// second extends the first's messages) and pending writes.
func FuzzLangGraph(f *testing.F) {
	put := `{"config":{"thread_id":"t","checkpoint_ns":"","checkpoint_id":"c01"},"checkpoint":{"v":4,"id":"c02","ts":"x","channel_versions":{"a":2,"messages":2}},` +
		`"metadata":{"run_id":"r1"},"new_versions":{"a":2,"messages":2},"channel_values":{"a":{"blob":{"type":"json","data":"MQ=="}},` +
		`"messages":{"messages":[{"type":"ai","data":{"id":"m2","content":"hello","tool_calls":[{"id":"c1","name":"f","args":{}}]}}],"extends":{"n":1,"h":"%s"}}}}`
	put = fmt.Sprintf(put, strings.Repeat("0", 32))
	for _, seed := range []struct {
		body  string
		route int
	}{
		{put, 0}, {`{"config":{"thread_id":"t"},"checkpoint":{"id":"c03","channel_values":{}}}`, 0},
		{`{"config":{"thread_id":"t"},"checkpoint":{"id":"c09"},"channel_values":{"messages":{"messages":[{"type":"x","data":{"id":"..\/"}}]}},"new_versions":{"messages":"9"}}`, 0},
		{`{"config":{"thread_id":"t","checkpoint_id":"c01"},"task_id":"k","task_path":"~p","writes":[{"idx":-1,"channel":"__error__","value":{"blob":{"type":"json","data":""}}}]}`, 1},
		{`{"config":{"thread_id":"t","checkpoint_id":"c01"},"task_id":"k","writes":[{"idx":0,"channel":"messages","value":{"messages":[{"type":"human","data":{"id":"w"}}]}}]}`, 1},
		{`{"thread_id":"t","filter":{"run_id":"r1"},"before":"c09","limit":1}`, 2}, {`{"checkpoint_ns":""}`, 2}, {`{}`, 2},
		{`{"target_thread_id":"copy"}`, 3}, {`{"target_thread_id":"t"}`, 3},
		{`{"thread_ids":["t","u"],"strategy":"keep_latest"}`, 4}, {`{"thread_ids":[]}`, 4},
		{`{"run_ids":["r1"]}`, 5}, {`{"config":{"thread_id":"t","checkpoint_id":"c01"},"channels":["a","messages",""]}`, 6},
		{`thread_id=t&messages_n=1&messages_h=` + strings.Repeat("a", 32), 7}, {`thread_id=t&checkpoint_id=c01&checkpoint_ns=`, 7},
		{``, 0}, {`null`, 1}, {`[]`, 2}, {`{"x":1}`, 3},
	} {
		f.Add(seed.body, seed.route)
	}
	s := newServer(f, Options{MaxBodyBytes: 64 << 10})
	paths := []string{"/v1/langgraph/checkpoints", "/v1/langgraph/writes", "/v1/langgraph/checkpoints/search",
		"/v1/langgraph/threads/t/copy", "/v1/langgraph/prune", "/v1/langgraph/runs/delete", "/v1/langgraph/delta-history"}
	f.Fuzz(func(t *testing.T, body string, route int) {
		// The thread as the seeds know it: c01 with one message.
		do(t, s, req{method: "POST", path: "/v1/langgraph/checkpoints", body: `{"config":{"thread_id":"t"},"checkpoint":{"id":"c01","channel_versions":{"messages":1}},` +
			`"new_versions":{"messages":1},"channel_values":{"messages":{"messages":[{"type":"human","data":{"id":"m1","content":"hi"}}]}}}`})
		route = (route%(len(paths)+1) + len(paths) + 1) % (len(paths) + 1)
		if route == len(paths) {
			r := httptest.NewRequest("GET", "/v1/langgraph/checkpoint", nil)
			r.URL.RawQuery = body
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			checkAnswer(t, w, body)
			return
		}
		fuzzPost(t, s, paths[route], body, nil)
	})
}
