package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

func TestServerInfo(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	model := scripted.Demo()
	full := newServer(t, Options{DB: db, Keys: twoTenants(t), Agent: agent.New(model, nil), Chat: model,
		Worklog: worklog.NewLogs(db, nil), Provider: "scripted", Version: "v1.2.3"})
	bare := newServer(t, Options{Keys: twoTenants(t), Version: "v1.2.3"})
	for _, tc := range []struct {
		name string
		s    *Server
		want serverInfo
	}{
		{"full", full, serverInfo{Version: "v1.2.3", Runs: true, Provider: "scripted", Conversations: true, Items: true}},
		{"bare", bare, serverInfo{Version: "v1.2.3"}},
	} {
		var got serverInfo
		w := must(t, tc.s, req{method: "GET", path: "/v1/server", key: keyA}, http.StatusOK, &got)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		// Every member is present, false and "" too: a page reads them.
		for _, k := range []string{`"runs":`, `"provider":`, `"conversations":`, `"items":`} {
			if !strings.Contains(w.Body.String(), k) {
				t.Errorf("%s: %s has no %s", tc.name, w.Body, k)
			}
		}
	}
	// Like every /v1 route, it needs a key.
	wantError(t, full, req{method: "GET", path: "/v1/server"}, http.StatusUnauthorized, "unauthorized")
}

// TestNoModelHint checks that the 501 of a route that needs a model says
// how to get one.
func TestNoModelHint(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "hi")
	for _, rq := range []req{
		{method: "POST", path: "/v1/threads/th/runs", body: `{"input":"hi"}`},
		{method: "POST", path: "/v1/conversations", body: `{}`},
		{method: "GET", path: "/v1/conversations/cv"},
		{method: "POST", path: "/v1/threads/th/view", body: `{"budget":10,"strategies":[{"type":"summarize"}]}`},
	} {
		w := wantError(t, s, rq, http.StatusNotImplemented, "unsupported")
		if !strings.HasSuffix(errorMessage(t, w), "has none: "+modelHint) {
			t.Errorf("%s %s: %s lacks the hint", rq.method, rq.path, w.Body)
		}
	}
}

// errorMessage returns the message of an error answer.
func errorMessage(tb testing.TB, w *httptest.ResponseRecorder) string {
	tb.Helper()
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		tb.Fatal(err)
	}
	return e.Error.Message
}
