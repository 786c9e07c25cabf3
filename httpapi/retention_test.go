package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// TestThreadExpiry: a thread's record says when it expires — its
// updated_at plus its own TTL (label loom.ttl) or the server's default —
// in the answer to a create, a get and a listing, and says nothing for a
// thread that never expires.
func TestThreadExpiry(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil).WithRetention(thread.Retention{TTL: time.Hour})
	s := newServer(t, Options{DB: db})
	var def, own, never threadJSON
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{"id": "def"}}, http.StatusCreated, &def)
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{"id": "own", "labels": map[string]string{thread.LabelTTL: "720h"}}}, http.StatusCreated, &own)
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{"id": "never", "labels": map[string]string{thread.LabelTTL: "0"}}}, http.StatusCreated, &never)
	if want := def.UpdatedAt.Add(time.Hour); !def.ExpiresAt.Equal(want) {
		t.Errorf("the default's expiry: %v; want %v", def.ExpiresAt, want)
	}
	if want := own.UpdatedAt.Add(720 * time.Hour); !own.ExpiresAt.Equal(want) {
		t.Errorf("a thread's own expiry: %v; want %v", own.ExpiresAt, want)
	}
	if !never.ExpiresAt.IsZero() {
		t.Errorf("a thread with loom.ttl=0 expires at %v; want never", never.ExpiresAt)
	}
	w := must(t, s, req{method: "GET", path: "/v1/threads/never"}, http.StatusOK, nil)
	if body := w.Body.String(); strings.Contains(body, "expires_at") {
		t.Errorf("a thread that never expires: %s", body)
	}
	var got threadJSON
	must(t, s, req{method: "GET", path: "/v1/threads/own"}, http.StatusOK, &got)
	if !got.ExpiresAt.Equal(own.ExpiresAt) {
		t.Errorf("GET says %v; the create said %v", got.ExpiresAt, own.ExpiresAt)
	}
	var list listResponse
	must(t, s, req{method: "GET", path: "/v1/threads"}, http.StatusOK, &list)
	for _, th := range list.Threads {
		if (th.ID == "never") != th.ExpiresAt.IsZero() {
			t.Errorf("the listing's %s expires at %v", th.ID, th.ExpiresAt)
		}
	}
}
