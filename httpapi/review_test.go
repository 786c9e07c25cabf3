package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
)

// TestReviewInterruptedRunIsNotAnInternalError checks that a run that a
// later run (on_busy "interrupt") took the place of is answered as a
// conflict, not as a 500: agent.ErrInterrupted is the cause of its
// cancellation, it wraps neither context.Canceled nor a sentinel, and the
// error table has no row for it.
func TestReviewInterruptedRunIsNotAnInternalError(t *testing.T) {
	client := scripted.New(scripted.Step{Text: "slow", Delay: time.Minute}, scripted.Text("second"))
	s := newServer(t, Options{Agent: agent.New(client, nil)})
	createThread(t, s, "", "th")
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		first <- do(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "one"}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(client.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first run never reached the model")
		}
		time.Sleep(time.Millisecond)
	}
	var res runResponse
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "two", "on_busy": "interrupt"}}, http.StatusOK, &res)

	var w *httptest.ResponseRecorder
	select {
	case w = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupted run did not end")
	}
	if w.Code != http.StatusConflict {
		t.Errorf("interrupted run answered %d, want 409; body %s", w.Code, w.Body.String())
	}
	if strings.Contains(w.Body.String(), `"internal"`) {
		t.Errorf("interrupted run answered as an internal error: %s", w.Body.String())
	}
}

// TestReviewETagChangesWhenThreadIsRecreated checks that the ETag tells a
// thread from another thread of the same id: after a delete and a create,
// versions start again at 1, so an ETag that is only the version makes a
// stale cached copy "not modified", and lets an If-Match written against
// the deleted thread succeed on the new one (ABA).
func TestReviewETagChangesWhenThreadIsRecreated(t *testing.T) {
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

// TestReviewMessagesNotModifiedOnlyForAnExistingVersion checks that
// GET …/messages?version=V answers 304 only when version V exists: the
// If-None-Match check runs before the version is read, so a version the
// thread never had is "not modified" rather than 404.
func TestReviewMessagesNotModifiedOnlyForAnExistingVersion(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "one")
	w := do(t, s, req{method: "GET", path: "/v1/threads/th/messages?version=7", header: map[string]string{"If-None-Match": `"7"`}})
	if w.Code != http.StatusNotFound {
		t.Errorf("messages at version 7 of a thread at version 1, with If-None-Match \"7\": %d, want 404", w.Code)
	}
}

// failingBody is a request body whose read fails the way a network read
// does, with the server's addresses in the error's text.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) {
	return 0, errors.New("read tcp 10.1.2.3:8080->10.9.8.7:40000: i/o timeout")
}

// TestReviewBodyReadErrorTextIsNotSent checks that a failed body read is
// answered without the error's text: decode sends "reading the request
// body: " + err.Error(), which names the server's network addresses.
func TestReviewBodyReadErrorTextIsNotSent(t *testing.T) {
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
