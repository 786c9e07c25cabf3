package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/worklog"
)

// TestSessionCloseOfASessionNeverStarted: `loom session close --id` of an
// id no session start gave fails, naming it, and leaves the items alone;
// the id session start gives closes.
func TestSessionCloseOfASessionNeverStarted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := loom(t, "session", "close", "--dir", dir, "--id", "s-1", "--open", "Rotate the API keys")
	if r.code == 0 || !strings.Contains(r.stderr, "session s-1 was never started") {
		t.Fatalf("close of s-1: exit %d, stderr %q", r.code, r.stderr)
	}
	if out := loom(t, "items", "list", "--dir", dir).ok(t).stdout; strings.Contains(out, "Rotate") {
		t.Errorf("the refused close added an item:\n%s", out)
	}
	var start worklog.StartResult
	loom(t, "session", "start", "--dir", dir, "--json").ok(t).decode(t, &start)
	loom(t, "session", "close", "--dir", dir, "--id", start.SessionID, "--open", "Rotate the API keys").ok(t)
}

// TestServeClosesOnlyStartedSessions: through `loom serve`, the README's
// example as it was (a close of s-1, never started) is 404 not_found, and
// the example as it is (the id POST /v1/sessions returned) closes.
func TestServeClosesOnlyStartedSessions(t *testing.T) {
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "sessions.db"))
	code, _ := call(t, "POST", s.url+"/v1/sessions/s-1/close", "", map[string]any{"open_threads": []any{"Rotate the API keys"}}, nil)
	if code != http.StatusNotFound {
		t.Fatalf("close of s-1, never started: %d, want 404", code)
	}
	var start worklog.StartResult
	if code, _ := call(t, "POST", s.url+"/v1/sessions", "", nil, &start); code != http.StatusCreated {
		t.Fatalf("start: %d", code)
	}
	var closed worklog.CloseResult
	code, _ = call(t, "POST", s.url+"/v1/sessions/"+start.SessionID+"/close", "", map[string]any{"open_threads": []any{"Rotate the API keys"}}, &closed)
	if code != http.StatusOK || len(closed.OpenThreads) != 1 {
		t.Fatalf("close of the session started: %d %+v", code, closed)
	}
	s.stop(t)
}

// TestSessionCloseRefusesOpenTextThatIsNotUTF8: --open with bytes that are
// not UTF-8 is refused, not carried as U+FFFD.
func TestSessionCloseRefusesOpenTextThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := loom(t, "session", "close", "--dir", dir, "--open", "caf\xe9 au lait")
	if r.code == 0 || !strings.Contains(r.stderr, "UTF-8") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if out := loom(t, "items", "list", "--dir", dir).ok(t).stdout; strings.Contains(out, "au lait") {
		t.Errorf("the refused text was stored:\n%s", out)
	}
}
