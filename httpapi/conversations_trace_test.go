package httpapi

import (
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/thread"
)

// TestConversationSpans sends a message to a live conversation with an
// incoming traceparent, on a server traced into an in-memory exporter: the
// turn the message begins runs in the incoming trace, under the command's
// request, with its stream and its store operations under it.
func TestConversationSpans(t *testing.T) {
	tp, exp := recordSpans(t)
	db := thread.New(thread.NewMemoryStore(), &thread.Options{TracerProvider: tp})
	s := newServer(t, Options{DB: db, Chat: scripted.New(scripted.Text("Hello over HTTP.")), TracerProvider: tp})
	t.Cleanup(func() { s.Close() })
	must(t, s, req{method: "POST", path: "/v1/conversations", body: map[string]string{"id": "c1", "title": "helper"}}, http.StatusCreated, nil)
	exp.Reset()

	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00f067aa0ba902b7"
	)
	must(t, s, req{method: "POST", path: "/v1/conversations/c1/commands", body: map[string]any{"command": "send", "text": "hi"},
		header: map[string]string{"traceparent": "00-" + traceID + "-" + parent + "-01"}}, http.StatusOK, nil)
	// The turn outlives the request: its span ends when the agent stops.
	var spans tracetest.SpanStubs
	if !testwait.Within(10*time.Second, func() bool {
		spans = exp.GetSpans()
		return ended(spans, "invoke_agent helper")
	}) {
		t.Fatalf("the turn's span never ended; spans: %s", spanNames(spans))
	}

	parentOf := spanTree(t, spans, traceID)
	count := map[string]int{}
	for _, sp := range spans {
		count[sp.Name]++
		var want string
		switch {
		case sp.Name == "POST /v1/conversations/{id}/commands":
			want = "remote " + parent
		case sp.Name == "invoke_agent helper", sp.Name == "thread.open":
			want = "POST /v1/conversations/{id}/commands"
		case sp.Name == "chat", sp.Name == "thread.commit":
			want = "invoke_agent helper"
		default:
			t.Errorf("a span %q", sp.Name)
			continue
		}
		if got := parentOf(sp); got != want {
			t.Errorf("%s's parent %q, want %q", sp.Name, got, want)
		}
	}
	// The live conversation opened with create: the command opens no
	// thread. The turn commits the question and the answer.
	if count["POST /v1/conversations/{id}/commands"] != 1 || count["invoke_agent helper"] != 1 || count["chat"] != 1 || count["thread.commit"] != 2 {
		t.Errorf("spans: %s", spanNames(spans))
	}
	for _, sp := range spans {
		if sp.Name == "chat" && attr(sp, "gen_ai.conversation.id") != "c1" {
			t.Errorf("chat: gen_ai.conversation.id %v", attr(sp, "gen_ai.conversation.id"))
		}
	}
}

func ended(spans tracetest.SpanStubs, name string) bool {
	for _, sp := range spans {
		if sp.Name == name {
			return true
		}
	}
	return false
}
