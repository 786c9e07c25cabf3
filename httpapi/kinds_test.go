package httpapi

import (
	"net/http"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestServiceThreadsOverHTTP checks that the routes inherit package
// thread's rule "service-managed or local, never both": a service thread is
// not created with messages, takes no appends, and its export does not
// import with its mirror under a new id — each a 400 that changes nothing —
// while the agent's mirror (a Go commit with Mirror set) reads back.
func TestServiceThreadsOverHTTP(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	s := newServer(t, Options{DB: db})

	wantError(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{
		"id": "both", "kind": "service", "messages": []any{textMsg("user", "hi")},
	}}, http.StatusBadRequest, "invalid")
	wantError(t, s, req{method: "GET", path: "/v1/threads/both"}, http.StatusNotFound, "not_found")

	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{"id": "svc", "kind": "service"}}, http.StatusCreated, nil)
	wantError(t, s, req{method: "POST", path: "/v1/threads/svc/messages", body: map[string]any{
		"messages": []any{textMsg("user", "hi")},
	}}, http.StatusBadRequest, "invalid")
	wantError(t, s, req{method: "POST", path: "/v1/threads/svc/messages", header: map[string]string{"If-Match": `"1"`}, body: map[string]any{
		"messages": []any{textMsg("user", "hi")},
	}}, http.StatusBadRequest, "invalid")

	// The agent's mirror of the service's conversation.
	th, err := db.Thread(t.Context(), "svc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Commit(t.Context(), thread.CommitOptions{Messages: []message.Message{message.User("hi"), message.Assistant("hello")}, Mirror: true}); err != nil {
		t.Fatal(err)
	}
	var got messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/svc/messages"}, http.StatusOK, &got)
	if len(got.Messages) != 2 || got.Version != 2 {
		t.Fatalf("the mirror reads %d messages at version %d, want 2 at 2", len(got.Messages), got.Version)
	}

	for _, q := range []string{"", "?history=true"} {
		doc := must(t, s, req{method: "GET", path: "/v1/threads/svc/export" + q}, http.StatusOK, nil).Body.Bytes()
		wantError(t, s, req{method: "POST", path: "/v1/threads/import?id=svc-copy", body: doc}, http.StatusBadRequest, "invalid")
		wantError(t, s, req{method: "GET", path: "/v1/threads/svc-copy"}, http.StatusNotFound, "not_found")
	}
}

// TestMessageIDOncePerThreadOverHTTP checks that appending a message whose
// id the thread holds is a 409 conflict, with and without If-Match (no
// version the client could read again would resolve it).
func TestMessageIDOncePerThreadOverHTTP(t *testing.T) {
	s := newServer(t, Options{})
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{"id": "t"}}, http.StatusCreated, nil)
	m := textMsg("user", "hi")
	m["id"] = "m1"
	must(t, s, req{method: "POST", path: "/v1/threads/t/messages", body: map[string]any{"messages": []any{m}}}, http.StatusCreated, nil)
	wantError(t, s, req{method: "POST", path: "/v1/threads/t/messages", body: map[string]any{"messages": []any{m}}}, http.StatusConflict, "conflict")
	wantError(t, s, req{method: "POST", path: "/v1/threads/t/messages", header: map[string]string{"If-Match": `"2"`},
		body: map[string]any{"messages": []any{m}}}, http.StatusConflict, "conflict")
	var got messagesResponse
	must(t, s, req{method: "GET", path: "/v1/threads/t/messages"}, http.StatusOK, &got)
	if len(got.Messages) != 1 || got.Version != 2 {
		t.Fatalf("%d messages at version %d after refused appends, want 1 at 2", len(got.Messages), got.Version)
	}
}
