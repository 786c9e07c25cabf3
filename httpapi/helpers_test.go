package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/thread"
)

// Keys of the tests' two tenants.
const (
	keyA = "key-for-tenant-a-0123456789"
	keyB = "key-for-tenant-b-0123456789"
)

// newServer returns a server on a fresh memory store; opts.DB and
// opts.Logger are filled in when unset.
func newServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.DB == nil {
		opts.DB = thread.New(thread.NewMemoryStore(), nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return New(opts)
}

// twoTenants returns keys for tenants "a" and "b".
func twoTenants(tb testing.TB) *auth.Keys {
	tb.Helper()
	k := new(auth.Keys)
	if err := k.Add(keyA, "a"); err != nil {
		tb.Fatal(err)
	}
	if err := k.Add(keyB, "b"); err != nil {
		tb.Fatal(err)
	}
	return k
}

// req describes a request to the handler.
type req struct {
	method, path string
	body         any // a string or []byte is sent as is, anything else as JSON
	header       map[string]string
	key          string
}

// do serves one request on h and returns the recorded response.
func do(tb testing.TB, h http.Handler, rq req) *httptest.ResponseRecorder {
	tb.Helper()
	var body io.Reader
	switch b := rq.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	r := httptest.NewRequest(rq.method, rq.path, body)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if rq.key != "" {
		r.Header.Set("Authorization", "Bearer "+rq.key)
	}
	for k, v := range rq.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// must serves rq and fails unless the status is want; it decodes a JSON
// body into out when out is not nil.
func must(tb testing.TB, h http.Handler, rq req, want int, out any) *httptest.ResponseRecorder {
	tb.Helper()
	w := do(tb, h, rq)
	if w.Code != want {
		tb.Fatalf("%s %s: status %d, want %d; body %s", rq.method, rq.path, w.Code, want, w.Body.String())
	}
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			tb.Fatalf("%s %s: decoding %s: %v", rq.method, rq.path, w.Body.String(), err)
		}
	}
	return w
}

// errorCode returns the code of an error response, failing if the body is
// not the error shape.
func errorCode(tb testing.TB, w *httptest.ResponseRecorder) string {
	tb.Helper()
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		tb.Fatalf("not an error body (%v): %s", err, w.Body.String())
	}
	return e.Error.Code
}

// wantError serves rq and fails unless it is answered with status and code.
func wantError(tb testing.TB, h http.Handler, rq req, status int, code string) *httptest.ResponseRecorder {
	tb.Helper()
	w := do(tb, h, rq)
	if w.Code != status {
		tb.Fatalf("%s %s: status %d, want %d; body %s", rq.method, rq.path, w.Code, status, w.Body.String())
	}
	if got := errorCode(tb, w); got != code {
		tb.Fatalf("%s %s: code %q, want %q; body %s", rq.method, rq.path, got, code, w.Body.String())
	}
	return w
}

// createThread makes a thread with messages through the API.
func createThread(tb testing.TB, h http.Handler, key, id string, texts ...string) threadJSON {
	tb.Helper()
	msgs := []map[string]any{}
	for i, t := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "contents": []any{map[string]any{"type": "text", "text": t}}})
	}
	var th threadJSON
	must(tb, h, req{method: "POST", path: "/v1/threads", key: key, body: map[string]any{"id": id, "title": "t " + id, "messages": msgs}}, http.StatusCreated, &th)
	return th
}

// textMsg is a message body in the wire format.
func textMsg(role, text string) map[string]any {
	return map[string]any{"role": role, "contents": []any{map[string]any{"type": "text", "text": text}}}
}

// tagVersion returns an ETag with only its version, as `"3"`: the rest
// names the thread's creation and differs between runs.
func tagVersion(etag string) string {
	if v, _, ok := strings.Cut(etag, "."); ok {
		return v + `"`
	}
	return etag
}

// eventually waits for cond, up to 10 s, and fails the test if it never
// holds. It calls tb.Fatalf: only from the test's goroutine.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testwait.Until(tb, 10*time.Second, what, cond)
}
