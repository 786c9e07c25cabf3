package mcpserver

import (
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestToolErrorsSpeakJSON: a message of the wrong shape in a tool's
// arguments is told in JSON's words — by the tool's schema ("has type
// \"integer\", want \"string\"") or by the decoder behind it ("text:
// expected a string, got a number") — never with a Go type.
func TestToolErrorsSpeakJSON(t *testing.T) {
	db := newDB(t)
	cs := connectPipes(t, t.Context(), db, nil)
	th, err := db.Create(t.Context(), thread.CreateOptions{Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]any{
		{"role": 5, "text": "x"},
		{"role": "user", "contents": []any{map[string]any{"type": "text", "text": 7}}},
	} {
		msg := fails(t, cs, "thread_append", map[string]any{"id": th.ID(), "messages": []any{bad}})
		if !strings.Contains(msg, "expected a string, got a number") && !strings.Contains(msg, `want "string"`) {
			t.Errorf("append %v: %q, want it said in JSON's words", bad, msg)
		}
		for _, goWord := range []string{"message.", "Go struct", "Go value", "of type"} {
			if strings.Contains(msg, goWord) {
				t.Errorf("append %v: %q names Go (%q)", bad, msg, goWord)
			}
		}
	}
}
