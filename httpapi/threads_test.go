package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
)

func texts(msgs []message.Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return out
}

// TestEveryRouteHappyPath drives each route of the route table once with a
// valid request and checks what it answers; at the end, every route must
// have answered a 2xx.
func TestEveryRouteHappyPath(t *testing.T) {
	s := newServer(t, Options{Version: "v9.9.9"})

	// Create, with labels and messages.
	var th threadJSON
	w := must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{
		"id": "trip", "title": "Trip", "labels": map[string]string{"team": "travel"}, "kind": "local",
		"messages": []any{textMsg("user", "hi"), textMsg("assistant", "hello")},
		"state":    map[string]any{"wf/step": 1},
	}}, http.StatusCreated, &th)
	if th.ID != "trip" || th.Version != 1 || th.Kind != "local" || th.Labels["team"] != "travel" || th.Head == "" {
		t.Fatalf("created %+v", th)
	}
	if got := w.Header().Get("Location"); got != "/v1/threads/trip" {
		t.Errorf("Location %q", got)
	}
	if got := tagVersion(w.Header().Get("ETag")); got != `"1"` {
		t.Errorf("ETag %q", got)
	}
	// An empty body makes an empty thread with a fresh id.
	var empty threadJSON
	must(t, s, req{method: "POST", path: "/v1/threads"}, http.StatusCreated, &empty)
	if empty.ID == "" || empty.Head != "" {
		t.Errorf("empty thread %+v", empty)
	}

	// List: filter by label, page with the cursor.
	for i := range 3 {
		must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{"id": fmt.Sprintf("page%d", i), "labels": map[string]string{"team": "travel"}}}, http.StatusCreated, nil)
	}
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		var list listResponse
		must(t, s, req{method: "GET", path: "/v1/threads?label=team:travel&limit=2&cursor=" + cursor}, http.StatusOK, &list)
		for _, x := range list.Threads {
			ids = append(ids, x.ID)
		}
		if list.NextCursor == "" {
			break
		}
		if pages > 3 {
			t.Fatal("too many pages")
		}
		cursor = url.QueryEscape(list.NextCursor)
	}
	if diff := cmp.Diff([]string{"page0", "page1", "page2", "trip"}, ids); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	// order=newest pages the other way.
	ids, cursor = nil, ""
	for pages := 0; pages < 4; pages++ {
		var list listResponse
		must(t, s, req{method: "GET", path: "/v1/threads?order=newest&label=team:travel&limit=3&cursor=" + cursor}, http.StatusOK, &list)
		for _, x := range list.Threads {
			ids = append(ids, x.ID)
		}
		if list.NextCursor == "" {
			break
		}
		cursor = url.QueryEscape(list.NextCursor)
	}
	if diff := cmp.Diff([]string{"trip", "page2", "page1", "page0"}, ids); diff != "" {
		t.Errorf("listed newest first (-want +got):\n%s", diff)
	}
	var byKind listResponse
	must(t, s, req{method: "GET", path: "/v1/threads?kind=local"}, http.StatusOK, &byKind)
	if len(byKind.Threads) != 1 || byKind.Threads[0].ID != "trip" {
		t.Errorf("kind=local listed %+v", byKind.Threads)
	}

	// Get.
	var got threadJSON
	must(t, s, req{method: "GET", path: "/v1/threads/trip"}, http.StatusOK, &got)
	if got.Title != "Trip" || got.Version != 1 {
		t.Errorf("got %+v", got)
	}

	// Patch.
	must(t, s, req{method: "PATCH", path: "/v1/threads/trip", body: map[string]any{"title": "Lisbon", "labels": map[string]string{"team": "x"}}}, http.StatusOK, &got)
	if got.Title != "Lisbon" || got.Labels["team"] != "x" || got.Version != 2 {
		t.Errorf("patched %+v", got)
	}

	// Append, then read.
	var c commitResponse
	w = must(t, s, req{method: "POST", path: "/v1/threads/trip/messages", body: map[string]any{"messages": []any{textMsg("user", "plan it")}}}, http.StatusCreated, &c)
	if c.Version != 3 || c.Commit == "" || len(c.Messages) != 1 || c.Messages[0].ID == "" || tagVersion(w.Header().Get("ETag")) != `"3"` {
		t.Errorf("commit %+v, ETag %s", c, tagVersion(w.Header().Get("ETag")))
	}
	var msgs messagesResponse
	w = must(t, s, req{method: "GET", path: "/v1/threads/trip/messages"}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"hi", "hello", "plan it"}, texts(msgs.Messages)); diff != "" || msgs.Version != 3 {
		t.Errorf("messages v%d (-want +got):\n%s", msgs.Version, diff)
	}
	if tagVersion(w.Header().Get("ETag")) != `"3"` {
		t.Errorf("messages ETag %q", tagVersion(w.Header().Get("ETag")))
	}
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages?limit=1"}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"plan it"}, texts(msgs.Messages)); diff != "" {
		t.Errorf("last 1 (-want +got):\n%s", diff)
	}
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages?version=1"}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"hi", "hello"}, texts(msgs.Messages)); diff != "" || msgs.Version != 1 {
		t.Errorf("version 1 (-want +got):\n%s", diff)
	}
	// Paging back: the messages before a message id.
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages"}, http.StatusOK, &msgs)
	last := msgs.Messages[2].ID
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages?limit=1&before=" + last}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"hello"}, texts(msgs.Messages)); diff != "" {
		t.Errorf("1 before %s (-want +got):\n%s", last, diff)
	}
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages?before=" + msgs.Messages[0].ID}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"hi"}, texts(msgs.Messages)); diff != "" {
		t.Errorf("all before the second (-want +got):\n%s", diff)
	}
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages?version=1&before=" + last}, http.StatusNotFound, nil)
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages?before=msg_nope"}, http.StatusNotFound, nil)
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages?before=-bad"}, http.StatusBadRequest, nil)

	// View: a message limit, instructions, strategies.
	var v viewResponse
	must(t, s, req{method: "POST", path: "/v1/threads/trip/view", body: map[string]any{
		"model": "gpt-4.1", "budget": 1000, "max_messages": 2,
		"instructions": []any{textMsg("system", "be brief")},
		"strategies":   []any{map[string]any{"type": "elide_tool_results", "keep_last": 1}, map[string]any{"type": "drop_oldest"}},
	}}, http.StatusOK, &v)
	if diff := cmp.Diff([]string{"be brief", "plan it"}, texts(v.Messages)); diff != "" || v.Tokens == 0 || len(v.Dropped) != 2 {
		t.Errorf("view %+v (-want +got):\n%s", v, diff)
	}
	must(t, s, req{method: "POST", path: "/v1/threads/trip/view", body: map[string]any{"encoding": "cl100k_base",
		"strategies": []any{map[string]any{"type": "sliding_window", "turns": 1}}}}, http.StatusOK, &v)
	if diff := cmp.Diff([]string{"plan it"}, texts(v.Messages)); diff != "" {
		t.Errorf("sliding window (-want +got):\n%s", diff)
	}

	// Fork at the first message, and copy.
	first := msgs.Messages[0].ID
	var f threadJSON
	w = must(t, s, req{method: "POST", path: "/v1/threads/trip/fork", body: map[string]any{"at": first, "id": "trip-fork", "title": "Fork"}}, http.StatusCreated, &f)
	if f.ID != "trip-fork" || f.ForkedFrom == nil || f.ForkedFrom.Thread != "trip" || f.ForkedFrom.Message != first || w.Header().Get("Location") != "/v1/threads/trip-fork" {
		t.Errorf("fork %+v", f)
	}
	must(t, s, req{method: "GET", path: "/v1/threads/trip-fork/messages"}, http.StatusOK, &msgs)
	if diff := cmp.Diff([]string{"hi"}, texts(msgs.Messages)); diff != "" {
		t.Errorf("fork's messages (-want +got):\n%s", diff)
	}
	var cp threadJSON
	must(t, s, req{method: "POST", path: "/v1/threads/trip/copy", body: map[string]any{"id": "trip-copy", "version": 1}}, http.StatusCreated, &cp)
	if cp.ID != "trip-copy" || cp.ForkedFrom != nil || cp.Title != "Lisbon" {
		t.Errorf("copy %+v", cp)
	}
	must(t, s, req{method: "POST", path: "/v1/threads/trip/fork"}, http.StatusCreated, &f)
	if f.ID == "" || f.ForkedFrom == nil {
		t.Errorf("fork without a body %+v", f)
	}

	// Checkpoints.
	var ck checkpointJSON
	w = must(t, s, req{method: "POST", path: "/v1/threads/trip/checkpoints", body: map[string]any{"name": "planned"}}, http.StatusCreated, &ck)
	if ck.Name != "planned" || ck.Version != 3 || w.Header().Get("Location") != "/v1/threads/trip/checkpoints/planned" {
		t.Errorf("checkpoint %+v", ck)
	}
	must(t, s, req{method: "POST", path: "/v1/threads/trip/checkpoints", body: map[string]any{"name": "to delete"}}, http.StatusCreated, nil)
	must(t, s, req{method: "DELETE", path: "/v1/threads/trip/checkpoints/to%20delete"}, http.StatusNoContent, nil)
	var cks checkpointsResponse
	must(t, s, req{method: "GET", path: "/v1/threads/trip/checkpoints"}, http.StatusOK, &cks)
	if len(cks.Checkpoints) != 1 || cks.Checkpoints[0].Name != "planned" {
		t.Errorf("checkpoints %+v", cks)
	}

	// Reset, rollback to the checkpoint, restore a version.
	got = threadJSON{}
	must(t, s, req{method: "POST", path: "/v1/threads/trip/reset"}, http.StatusOK, &got)
	if got.Version != 4 || got.Head != "" {
		t.Errorf("reset %+v", got)
	}
	must(t, s, req{method: "POST", path: "/v1/threads/trip/rollback", body: map[string]any{"checkpoint": "planned"}}, http.StatusOK, &got)
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages"}, http.StatusOK, &msgs)
	if got.Version != 5 || len(msgs.Messages) != 3 {
		t.Errorf("rollback %+v, %d messages", got, len(msgs.Messages))
	}
	must(t, s, req{method: "POST", path: "/v1/threads/trip/rollback", body: map[string]any{"version": 1}}, http.StatusOK, &got)
	must(t, s, req{method: "GET", path: "/v1/threads/trip/messages"}, http.StatusOK, &msgs)
	if got.Version != 6 || len(msgs.Messages) != 2 {
		t.Errorf("restore %+v, %d messages", got, len(msgs.Messages))
	}

	// History, paged.
	var hist historyResponse
	must(t, s, req{method: "GET", path: "/v1/threads/trip/history?limit=4"}, http.StatusOK, &hist)
	if len(hist.Entries) != 4 || hist.Entries[0].Version != 6 || hist.Entries[0].Op != "restore" || hist.NextBefore != 3 {
		t.Errorf("history %+v", hist)
	}
	hist = historyResponse{}
	must(t, s, req{method: "GET", path: "/v1/threads/trip/history?before=3"}, http.StatusOK, &hist)
	if len(hist.Entries) != 2 || hist.Entries[1].Op != "create" || hist.NextBefore != 0 {
		t.Errorf("history before 3 %+v", hist)
	}

	// Export with history, import under another id.
	w = must(t, s, req{method: "GET", path: "/v1/threads/trip/export?history=true"}, http.StatusOK, nil)
	doc := w.Body.Bytes()
	if !bytes.Contains(doc, []byte(`"format": "loom.thread/v1"`)) || !bytes.Contains(doc, []byte(`"history"`)) || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("export: %s", doc)
	}
	var imp threadJSON
	must(t, s, req{method: "POST", path: "/v1/threads/import?id=trip-imported", body: doc}, http.StatusCreated, &imp)
	if imp.ID != "trip-imported" || imp.Version != 6 {
		t.Errorf("imported %+v", imp)
	}
	w = must(t, s, req{method: "GET", path: "/v1/threads/trip-imported/export?history=true"}, http.StatusOK, nil)
	if again := w.Body.Bytes(); !bytes.Equal(bytes.ReplaceAll(doc, []byte(`"id": "trip"`), []byte(`"id": "trip-imported"`)), again) {
		t.Errorf("export → import → export changed the document:\n%s\n%s", doc, again)
	}

	// Delete.
	must(t, s, req{method: "DELETE", path: "/v1/threads/trip-copy"}, http.StatusNoContent, nil)
	wantError(t, s, req{method: "GET", path: "/v1/threads/trip-copy"}, http.StatusNotFound, "not_found")

	// The rest.
	w = must(t, s, req{method: "GET", path: "/v1/openapi.json"}, http.StatusOK, nil)
	if !json.Valid(w.Body.Bytes()) {
		t.Error("openapi.json is not JSON")
	}
	must(t, s, req{method: "GET", path: "/v1/server"}, http.StatusOK, nil)
	var health healthResponse
	must(t, s, req{method: "GET", path: "/healthz"}, http.StatusOK, &health)
	if health != (healthResponse{Status: "ok", Version: "v9.9.9"}) {
		t.Errorf("healthz %+v", health)
	}
	must(t, s, req{method: "GET", path: "/metrics"}, http.StatusOK, nil)
	must(t, s, req{method: "GET", path: "/v1/search?q=hello"}, http.StatusOK, nil)
	must(t, s, req{method: "GET", path: "/v1/threads/trip/family"}, http.StatusOK, nil)
	must(t, s, req{method: "GET", path: "/v1/threads/trip/diff?version=1&to=trip-fork"}, http.StatusOK, nil)

	// Every route answered a 2xx, runs, work items, workflows and
	// LangGraph's aside (TestRun…, TestItems, TestWorkflowRoutes and
	// TestLangGraphRoutesAnswer2xx cover them).
	var out strings.Builder
	s.Metrics().WriteTo(&out)
	for _, rt := range routes {
		if rt.pattern == "POST /v1/threads/{id}/runs" || isWorkItemRoute(rt.pattern) || isWorkflowRoute(rt.pattern) || isConversationRoute(rt.pattern) || isFeedRoute(rt.pattern) || isLangGraphRoute(rt.pattern) {
			continue
		}
		method, _, _ := strings.Cut(rt.pattern, " ")
		if !answered2xx(out.String(), rt.pattern, method) {
			t.Errorf("route %s never answered a 2xx", rt.pattern)
		}
	}
}

// TestIfMatchAndETag checks conditional requests: ETags are versions,
// If-Match makes writes conditional (412 when stale, nothing changed), and
// If-None-Match answers 304.
func TestIfMatchAndETag(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "one")
	w := must(t, s, req{method: "GET", path: "/v1/threads/th"}, http.StatusOK, nil)
	if tagVersion(w.Header().Get("ETag")) != `"1"` {
		t.Fatalf("ETag %q", tagVersion(w.Header().Get("ETag")))
	}
	appendTo := func(ifMatch string) *req {
		return &req{method: "POST", path: "/v1/threads/th/messages", header: map[string]string{"If-Match": ifMatch},
			body: map[string]any{"messages": []any{textMsg("user", "x")}}}
	}
	w = must(t, s, *appendTo(`"1"`), http.StatusCreated, nil)
	if tagVersion(w.Header().Get("ETag")) != `"2"` {
		t.Errorf("ETag after append %q", tagVersion(w.Header().Get("ETag")))
	}
	wantError(t, s, *appendTo(`"1"`), http.StatusPreconditionFailed, "precondition_failed")
	wantError(t, s, *appendTo(`"0"`), http.StatusPreconditionFailed, "precondition_failed")
	wantError(t, s, *appendTo(`"soon"`), http.StatusBadRequest, "invalid")
	must(t, s, *appendTo(`*`), http.StatusCreated, nil) // any version
	must(t, s, *appendTo(`3`), http.StatusCreated, nil) // an unquoted version is taken too

	// Without If-Match a stale client's append still lands: pure appends
	// commute.
	must(t, s, req{method: "POST", path: "/v1/threads/th/messages", body: map[string]any{"messages": []any{textMsg("user", "y")}}}, http.StatusCreated, nil)

	for _, rq := range []req{
		{method: "PATCH", path: "/v1/threads/th", body: map[string]any{"title": "new"}},
		{method: "POST", path: "/v1/threads/th/reset"},
		{method: "POST", path: "/v1/threads/th/rollback", body: map[string]any{"version": 1}},
		{method: "POST", path: "/v1/threads/th/checkpoints", body: map[string]any{"name": "c"}},
		{method: "DELETE", path: "/v1/threads/th"},
	} {
		rq.header = map[string]string{"If-Match": `"2"`}
		wantError(t, s, rq, http.StatusPreconditionFailed, "precondition_failed")
	}
	var th threadJSON
	w = must(t, s, req{method: "GET", path: "/v1/threads/th"}, http.StatusOK, &th)
	if th.Version != 5 || th.Title != "t th" {
		t.Fatalf("a refused write changed the thread: %+v", th)
	}
	// The current version passes.
	must(t, s, req{method: "PATCH", path: "/v1/threads/th", header: map[string]string{"If-Match": `"5"`}, body: map[string]any{"title": "new"}}, http.StatusOK, &th)
	if th.Version != 6 || th.Title != "new" {
		t.Errorf("patched %+v", th)
	}

	// If-None-Match.
	w = do(t, s, req{method: "GET", path: "/v1/threads/th", header: map[string]string{"If-None-Match": `"6"`}})
	if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match current: %d %s", w.Code, w.Body.String())
	}
	must(t, s, req{method: "GET", path: "/v1/threads/th", header: map[string]string{"If-None-Match": `"5"`}}, http.StatusOK, nil)
	w = do(t, s, req{method: "GET", path: "/v1/threads/th/messages?version=2", header: map[string]string{"If-None-Match": `"2"`}})
	if w.Code != http.StatusNotModified {
		t.Errorf("messages If-None-Match: %d", w.Code)
	}
	must(t, s, req{method: "DELETE", path: "/v1/threads/th", header: map[string]string{"If-Match": `"6"`}}, http.StatusNoContent, nil)
}

// TestBadRequests checks that malformed bodies and parameters are typed
// 400s that change nothing.
func TestBadRequests(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "one")
	for _, c := range []struct {
		name string
		rq   req
		code string
	}{
		{"unknown field", req{method: "POST", path: "/v1/threads", body: `{"id":"x","colour":"red"}`}, "invalid_json"},
		{"not JSON", req{method: "POST", path: "/v1/threads", body: `{"id":`}, "invalid_json"},
		{"two values", req{method: "POST", path: "/v1/threads", body: `{} {}`}, "invalid_json"},
		{"wrong type", req{method: "POST", path: "/v1/threads", body: `{"title":5}`}, "invalid_json"},
		{"bad kind", req{method: "POST", path: "/v1/threads", body: `{"kind":"weird"}`}, "invalid"},
		{"bad thread id", req{method: "POST", path: "/v1/threads", body: `{"id":"../etc"}`}, "invalid"},
		{"invalid message", req{method: "POST", path: "/v1/threads/th/messages", body: `{"messages":[{"role":"","contents":[]}]}`}, "invalid"},
		{"message without type", req{method: "POST", path: "/v1/threads/th/messages", body: `{"messages":[{"role":"user","contents":[{"text":"x"}]}]}`}, "invalid_json"},
		{"no messages", req{method: "POST", path: "/v1/threads/th/messages", body: `{"messages":[]}`}, "invalid"},
		{"empty body", req{method: "POST", path: "/v1/threads/th/messages"}, "invalid_json"},
		{"bad limit", req{method: "GET", path: "/v1/threads?limit=-1"}, "invalid"},
		{"zero limit", req{method: "GET", path: "/v1/threads?limit=0"}, "invalid"},
		{"bad label", req{method: "GET", path: "/v1/threads?label=nocolon"}, "invalid"},
		{"bad order", req{method: "GET", path: "/v1/threads?order=random"}, "invalid"},
		{"label value with NUL", req{method: "GET", path: "/v1/threads?label=k:a%00b"}, "invalid"},
		{"bad kind filter", req{method: "GET", path: "/v1/threads?kind=x"}, "invalid"},
		{"bad cursor", req{method: "GET", path: "/v1/threads?cursor=!!!"}, "invalid"},
		{"bad version", req{method: "GET", path: "/v1/threads/th/messages?version=x"}, "invalid"},
		{"bad history flag", req{method: "GET", path: "/v1/threads/th/export?history=maybe"}, "invalid"},
		{"unknown strategy", req{method: "POST", path: "/v1/threads/th/view", body: `{"strategies":[{"type":"magic"}]}`}, "invalid"},
		{"strategy extra field", req{method: "POST", path: "/v1/threads/th/view", body: `{"strategies":[{"type":"drop_oldest","turns":2}]}`}, "invalid"},
		{"window without turns", req{method: "POST", path: "/v1/threads/th/view", body: `{"strategies":[{"type":"sliding_window"}]}`}, "invalid"},
		{"bad encoding", req{method: "POST", path: "/v1/threads/th/view", body: `{"encoding":"p50k"}`}, "invalid"},
		{"over budget", req{method: "POST", path: "/v1/threads/th/view", body: `{"budget":1}`}, "invalid"},
		{"rollback both", req{method: "POST", path: "/v1/threads/th/rollback", body: `{"checkpoint":"a","version":1}`}, "invalid"},
		{"rollback neither", req{method: "POST", path: "/v1/threads/th/rollback", body: `{}`}, "invalid"},
		{"bad import id", req{method: "POST", path: "/v1/threads/import?id=..", body: `{}`}, "invalid"},
		{"bad document", req{method: "POST", path: "/v1/threads/import", body: `{"format":"other"}`}, "invalid"},
		{"bad on_busy", req{method: "POST", path: "/v1/threads/th/runs", body: `{"on_busy":"later"}`}, "unsupported"}, // no agent: 501 first
	} {
		t.Run(c.name, func(t *testing.T) {
			w := do(t, s, c.rq)
			if got := errorCode(t, w); got != c.code {
				t.Errorf("code %q (status %d), want %q: %s", got, w.Code, c.code, w.Body.String())
			}
		})
	}
	var th threadJSON
	must(t, s, req{method: "GET", path: "/v1/threads/th"}, http.StatusOK, &th)
	if th.Version != 1 {
		t.Errorf("bad requests changed the thread: %+v", th)
	}
}

// TestUnknownRouteAndMethod checks that the mux's own answers are in the
// error shape.
func TestUnknownRouteAndMethod(t *testing.T) {
	s := newServer(t, Options{})
	wantError(t, s, req{method: "GET", path: "/v1/nothing"}, http.StatusNotFound, "not_found")
	w := wantError(t, s, req{method: "PUT", path: "/v1/threads/x"}, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := w.Header().Get("Allow"); !strings.Contains(allow, "PATCH") {
		t.Errorf("Allow %q", allow)
	}
}

// TestMarshalFastPath checks that the bodies whose messages writeJSON
// writes itself are the JSON that encoding/json would write.
func TestMarshalFastPath(t *testing.T) {
	var m message.Message
	if err := json.Unmarshal([]byte(`{"id":"m1","role":"user","author_name":"<b>&","contents":[{"type":"text","text":"<script>\u2028"},{"type":"citation","spans":[1,2]}],"metadata":{"big":12345678901234567890}}`), &m); err != nil {
		t.Fatal(err)
	}
	msgs := []message.Message{m, message.ToolCall("c1", "f", `{"a":1}`)}
	for _, v := range []any{
		messagesResponse{Version: 3, Messages: msgs},
		messagesResponse{Version: 3, NextBefore: "m0", Messages: msgs},
		messagesResponse{Messages: []message.Message{}},
		commitResponse{Version: 1, Commit: "c_1", Messages: msgs},
		commitResponse{Version: -1 << 63, Commit: "<c&\u2028\"\\\x01>", Messages: []message.Message{}},
		viewResponse{Version: 2, Messages: msgs, Tokens: 9, Dropped: []string{"x"}, Elided: []string{}, Compacted: "c_2"},
	} {
		fast, err := marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("%T: %s: %v", v, fast, err)
		}
		json.Unmarshal(slow, &b)
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("%T (-encoding/json +fast):\n%s", v, diff)
		}
		var compact bytes.Buffer
		json.Compact(&compact, fast)
		if !bytes.Equal(compact.Bytes(), fast) || bytes.Contains(fast, []byte("<")) {
			t.Errorf("%T: not compact and escaped: %s", v, fast)
		}
	}
}

// TestHostileIDs checks that ids in paths that are not valid ids are typed
// 400s, for every route that takes one.
func TestHostileIDs(t *testing.T) {
	s := newServer(t, Options{})
	for _, id := range []string{"..%2F..%2Fetc", "%2e%2e", strings.Repeat("a", 129), strings.Repeat("x", 5000), "a%00b", "-dash", "sp%20ace", "%FF%FE"} {
		for _, rt := range routes {
			method, pattern, _ := strings.Cut(rt.pattern, " ")
			if !strings.Contains(pattern, "{id}") {
				continue
			}
			path := strings.ReplaceAll(strings.ReplaceAll(pattern, "{id}", id), "{name}", "cp")
			w := do(t, s, req{method: method, path: path, body: "{}"})
			if w.Code != http.StatusBadRequest || errorCode(t, w) != "invalid" {
				t.Errorf("%s %s: %d %s", method, clip(path), w.Code, w.Body.String())
			}
		}
	}
	createThread(t, s, "", "th", "hi")
	for _, name := range []string{"%00", strings.Repeat("n", 129), "a%0Ab", "%FF"} {
		wantError(t, s, req{method: "DELETE", path: "/v1/threads/th/checkpoints/" + name}, http.StatusBadRequest, "invalid")
	}
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/checkpoints", body: `{"name":"a\u0000b"}`}, http.StatusBadRequest, "invalid")
}

// TestETagChangesWhenThreadIsRecreated checks that the ETag tells a
// thread from another thread of the same id: after a delete and a create,
// versions start again at 1, so an ETag that is only the version makes a
// stale cached copy "not modified", and lets an If-Match written against
// the deleted thread succeed on the new one (ABA).
func TestETagChangesWhenThreadIsRecreated(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "old secret")
	w := must(t, s, req{method: "PATCH", path: "/v1/threads/th", body: map[string]any{"title": "old title"}}, http.StatusOK, nil)
	stale := w.Header().Get("ETag")

	must(t, s, req{method: "DELETE", path: "/v1/threads/th"}, http.StatusNoContent, nil)
	createThread(t, s, "", "th", "new text")
	must(t, s, req{method: "PATCH", path: "/v1/threads/th", body: map[string]any{"title": "new title"}}, http.StatusOK, nil)

	if w := do(t, s, req{method: "GET", path: "/v1/threads/th", header: map[string]string{"If-None-Match": stale}}); w.Code != http.StatusOK {
		t.Errorf("GET with the deleted thread's ETag %s: %d, want 200 (it is another thread)", stale, w.Code)
	}
	if w := do(t, s, req{method: "GET", path: "/v1/threads/th/messages", header: map[string]string{"If-None-Match": stale}}); w.Code != http.StatusOK {
		t.Errorf("GET messages with the deleted thread's ETag %s: %d, want 200", stale, w.Code)
	}
	if w := do(t, s, req{method: "PATCH", path: "/v1/threads/th", header: map[string]string{"If-Match": stale},
		body: map[string]any{"title": "written against the old thread"}}); w.Code != http.StatusPreconditionFailed {
		t.Errorf("PATCH with the deleted thread's ETag %s: %d, want 412", stale, w.Code)
	}
}
