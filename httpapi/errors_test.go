package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/thread"
)

// TestErrorTable checks each row of the error table: the status, the code,
// and that the message of a 500 does not hold the error's text.
func TestErrorTable(t *testing.T) {
	secret := errors.New("open /var/lib/loom/secret.db: permission denied")
	for _, c := range []struct {
		name    string
		err     error
		ifMatch bool
		status  int
		code    string
	}{
		{"not found", fmt.Errorf("thread %q: %w", "x", thread.ErrNotFound), false, 404, "not_found"},
		{"conflict", fmt.Errorf("commit to x: %w", thread.ErrConflict), false, 409, "conflict"},
		{"conflict with If-Match", fmt.Errorf("commit to x: %w", thread.ErrConflict), true, 412, "precondition_failed"},
		{"invalid", fmt.Errorf("title: %w", thread.ErrInvalid), false, 400, "invalid"},
		{"unsupported", fmt.Errorf("fork: %w", thread.ErrUnsupported), false, 501, "unsupported"},
		{"busy", fmt.Errorf("run on x: %w", agent.ErrBusy), false, 409, "busy"},
		{"approval required", fmt.Errorf("run on x: %w", agent.ErrApprovalRequired), false, 409, "approval_required"},
		{"provider error", fmt.Errorf("run: %w", &agent.ProviderError{Provider: "openai", StatusCode: 500, Type: "server_error", Message: "org-123 broke"}), false, 502, "provider_error"},
		{"rate limited", fmt.Errorf("run: %w", &agent.ProviderError{Provider: "openai", StatusCode: 429}), false, 429, "rate_limited"},
		{"deadline", fmt.Errorf("run: %w", context.DeadlineExceeded), false, 504, "timeout"},
		{"canceled", fmt.Errorf("run: %w", context.Canceled), false, apierr.StatusClientClosed, "canceled"},
		{"too large", fmt.Errorf("load: %w", &http.MaxBytesError{Limit: 10}), false, 413, "too_large"},
		{"bad JSON", errBadJSON("request body: unexpected EOF"), false, 400, "invalid_json"},
		{"unauthorized", errf(401, "unauthorized", "unknown API key"), false, 401, "unauthorized"},
		{"forbidden", errf(403, "forbidden", "origin not allowed"), false, 403, "forbidden"},
		{"internal", fmt.Errorf("commit to x: %w", secret), false, 500, "internal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := newServer(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			r := httptest.NewRequest("POST", "/v1/threads/x/messages", nil)
			if c.ifMatch {
				r.Header.Set("If-Match", `"1"`)
			}
			info := &reqInfo{id: "req_test"}
			r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
			w := httptest.NewRecorder()
			s.writeError(w, r, c.err)
			if w.Code != c.status {
				t.Errorf("status %d, want %d", w.Code, c.status)
			}
			if got := errorCode(t, w); got != c.code {
				t.Errorf("code %q, want %q", got, c.code)
			}
			body := w.Body.String()
			if strings.Contains(body, "secret") || strings.Contains(body, "org-123") {
				t.Errorf("the answer holds internal text: %s", body)
			}
			if c.status == 500 {
				if !strings.Contains(body, "req_test") {
					t.Errorf("a 500 does not name the request id: %s", body)
				}
				if !strings.Contains(logs.String(), "secret.db") || !strings.Contains(logs.String(), "req_test") {
					t.Errorf("the log lacks the error or the request id: %s", logs.String())
				}
			}
			if c.status == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// failingStore is a store whose reads fail with an error that must not
// reach a client.
type failingStore struct {
	*thread.MemoryStore
	err error
}

func (f *failingStore) Thread(context.Context, string) (*thread.Record, error) { return nil, f.err }

func (f *failingStore) Threads(context.Context, thread.ListOptions) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) { yield(nil, f.err) }
}

// TestInternalErrorNotSent checks, end to end, that a store failure is a
// 500 whose body names the request id and not the error.
func TestInternalErrorNotSent(t *testing.T) {
	var logs bytes.Buffer
	st := &failingStore{MemoryStore: thread.NewMemoryStore(), err: errors.New("pq: password authentication failed for user loom_secret")}
	s := newServer(t, Options{DB: thread.New(st, nil), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, path := range []string{"/v1/threads/th", "/v1/threads"} {
		w := wantError(t, s, req{method: "GET", path: path, header: map[string]string{"X-Request-Id": "trace-42"}}, 500, "internal")
		if strings.Contains(w.Body.String(), "loom_secret") || !strings.Contains(w.Body.String(), "trace-42") {
			t.Errorf("%s: body %s", path, w.Body.String())
		}
	}
	if !strings.Contains(logs.String(), "loom_secret") || !strings.Contains(logs.String(), "trace-42") {
		t.Errorf("the log lacks the error or the request id:\n%s", logs.String())
	}
}

// TestHealthzUnavailable checks that /healthz answers 503 when the store
// fails.
func TestHealthzUnavailable(t *testing.T) {
	st := &failingStore{MemoryStore: thread.NewMemoryStore(), err: errors.New("disk on fire")}
	s := newServer(t, Options{DB: thread.New(st, nil), Version: "v1"})
	var h healthResponse
	w := must(t, s, req{method: "GET", path: "/healthz"}, http.StatusServiceUnavailable, &h)
	if h.Status != "unavailable" || strings.Contains(w.Body.String(), "fire") {
		t.Errorf("healthz: %s", w.Body.String())
	}
}

// TestPanicIsA500 checks that a handler's panic is answered, logged and
// counted, not a dropped connection.
func TestPanicIsA500(t *testing.T) {
	var logs bytes.Buffer
	s := newServer(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h := s.Protect(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	w := wantError(t, h, req{method: "GET", path: "/mcp"}, 500, "internal")
	if strings.Contains(w.Body.String(), "boom") {
		t.Errorf("the panic's value reached the client: %s", w.Body.String())
	}
	if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), w.Header().Get("X-Request-Id")) {
		t.Errorf("the log lacks the panic or the request id: %s", logs.String())
	}
	var metrics strings.Builder
	s.Metrics().WriteTo(&metrics)
	if !regexp.MustCompile(`code="500",method="GET",route="[^"]*"} 1`).MatchString(metrics.String()) {
		t.Errorf("the 500 is not counted:\n%s", metrics.String())
	}
}
