package mcpserver

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestServiceThreadTakesNoAppend checks that thread_append inherits package
// thread's rule "service-managed or local, never both": an append to a
// service thread is an invalid tool error that writes nothing, while the
// agent's mirror (a Go commit with Mirror set) goes in.
func TestServiceThreadTakesNoAppend(t *testing.T) {
	db := newDB(t)
	cs := connectPipes(t, t.Context(), db, nil)
	th, err := db.Create(t.Context(), thread.CreateOptions{ID: "svc", Kind: thread.KindService})
	if err != nil {
		t.Fatal(err)
	}
	user := []any{map[string]any{"role": "user", "text": "x"}}
	for _, args := range []map[string]any{
		{"id": "svc", "messages": user},
		{"id": "svc", "messages": user, "if_version": 1},
	} {
		if got := fails(t, cs, "thread_append", args); !strings.HasPrefix(got, "invalid: ") {
			t.Fatalf("append to a service thread: %q, want an invalid error", got)
		}
	}
	if _, err := th.Commit(t.Context(), thread.CommitOptions{Messages: []message.Message{message.User("x")}, Mirror: true}); err != nil {
		t.Fatalf("the agent's mirror: %v", err)
	}
	if err := th.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, _ := th.Len(t.Context()); n != 1 || th.Version() != 2 {
		t.Fatalf("%d messages at version %d, want the mirror's 1 at 2", n, th.Version())
	}
}

// TestMessageIDOncePerThreadOverMCP checks that thread_append of a message
// whose id the thread holds is a conflict tool error.
func TestMessageIDOncePerThreadOverMCP(t *testing.T) {
	eachTransport(t, func(t *testing.T, cs *mcp.ClientSession) {
		ok[createOut](t, cs, "thread_create", map[string]any{"id": "t"})
		msg := []any{map[string]any{"id": "m1", "role": "user", "text": "x"}}
		ok[appendOut](t, cs, "thread_append", map[string]any{"id": "t", "messages": msg})
		if got := fails(t, cs, "thread_append", map[string]any{"id": "t", "messages": msg}); !strings.HasPrefix(got, "conflict: ") {
			t.Fatalf("the same message id again: %q, want a conflict", got)
		}
	})
}
