package httpapi

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/thread"

	_ "github.com/loomthreads/loom/sqlite"
)

// TestOnSQLite runs the main routes on the SQLite store, and checks that
// what the API wrote reads back after the store is reopened.
func TestOnSQLite(t *testing.T) {
	path := "sqlite://" + t.TempDir() + "/x.db"
	db, err := thread.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Options{DB: db, Keys: twoTenants(t), Agent: agent.New(weatherScript(), &agent.Options{Tools: []agent.Tool{weatherTool()}})})
	createThread(t, s, keyA, "th", "hi", "hello")
	must(t, s, req{method: "POST", path: "/v1/threads/th/checkpoints", key: keyA, body: map[string]any{"name": "start"}}, http.StatusCreated, nil)
	must(t, s, req{method: "POST", path: "/v1/threads/th/messages", key: keyA, header: map[string]string{"If-Match": `"1"`},
		body: map[string]any{"messages": []any{textMsg("user", "more")}}}, http.StatusCreated, nil)
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/messages", key: keyA, header: map[string]string{"If-Match": `"1"`},
		body: map[string]any{"messages": []any{textMsg("user", "stale")}}}, http.StatusPreconditionFailed, "precondition_failed")
	var res runResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", key: keyA, body: map[string]any{"input": "Weather in Paris?"}}, http.StatusOK, &res)
	must(t, s, req{method: "POST", path: "/v1/threads/th/fork", key: keyA, body: map[string]any{"id": "th-fork"}}, http.StatusCreated, nil)
	wantError(t, s, req{method: "GET", path: "/v1/threads/th", key: keyB}, http.StatusNotFound, "not_found")
	doc := must(t, s, req{method: "GET", path: "/v1/threads/th/export?history=1", key: keyA}, http.StatusOK, nil).Body.Bytes()
	must(t, s, req{method: "POST", path: "/v1/threads/import?id=th-copy", key: keyB, body: doc}, http.StatusCreated, nil)
	must(t, s, req{method: "GET", path: "/healthz"}, http.StatusOK, nil)
	var before messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/th/messages", key: keyA}, http.StatusOK, &before)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = thread.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s = newServer(t, Options{DB: db, Keys: twoTenants(t)})
	var after messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/th/messages", key: keyA}, http.StatusOK, &after)
	if diff := cmp.Diff(texts(before.Messages), texts(after.Messages)); diff != "" || after.Version != before.Version || len(after.Messages) != 7 {
		t.Errorf("after reopening, v%d (-before +after):\n%s", after.Version, diff)
	}
	var copied messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/th-copy/messages", key: keyB}, http.StatusOK, &copied)
	if diff := cmp.Diff(texts(before.Messages), texts(copied.Messages)); diff != "" {
		t.Errorf("imported copy (-want +got):\n%s", diff)
	}
	var list listResponse
	must(t, s, req{method: "GET", path: "/v1/threads", key: keyA}, http.StatusOK, &list)
	if len(list.Threads) != 2 {
		t.Errorf("tenant a lists %+v", list.Threads)
	}
}
