package mcpserver

import (
	"strings"
	"testing"

	"github.com/loomthreads/loom/worklog"
)

// TestSessionCloseOfASessionNeverStarted: session_close of an id that
// session_start never gave is a not_found tool error that changes nothing;
// the id session_start gave closes.
func TestSessionCloseOfASessionNeverStarted(t *testing.T) {
	s := wlNewServer()
	AddWorklogToolsFrom(s, wlFixedTenant(wlLogsSource(wlNewLogs(t)), "acme"), nil)
	cs := wlConnect(t, s)
	msg := wlCallErr(t, cs, "session_close", map[string]any{"project": "loom", "session_id": "s-1", "open_threads": []any{"Rotate the API keys"}})
	if !strings.HasPrefix(msg, "not_found: ") || !strings.Contains(msg, "s-1") {
		t.Fatalf("session_close of s-1: %q, want not_found naming it", msg)
	}
	if l := wlCall[worklog.ListResult](t, cs, "list_threads", map[string]any{"project": "loom", "include_resolved": true}); len(l.Threads) != 0 {
		t.Fatalf("the refused close left items: %+v", l.Threads)
	}
	st := wlCall[worklog.StartResult](t, cs, "session_start", map[string]any{"project": "loom"})
	c := wlCall[worklog.CloseResult](t, cs, "session_close", map[string]any{"project": "loom", "session_id": st.SessionID, "open_threads": []any{"Rotate the API keys"}})
	if len(c.OpenThreads) != 1 {
		t.Fatalf("session_close of the session started: %+v", c)
	}
}
