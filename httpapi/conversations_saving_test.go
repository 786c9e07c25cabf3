package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// breakableStore is a store whose writes fail while broken is set, with a
// text that names internals a client must never be told.
type breakableStore struct {
	store.Store
	broken atomic.Bool
}

func (b *breakableStore) Apply(ctx context.Context, batch *store.Batch) error {
	if b.broken.Load() {
		return errors.New("write /var/lib/loom/secret.db: disk on fire")
	}
	return b.Store.Apply(ctx, batch)
}

// savedMessages reads thread id of tenant a straight from db.
func savedMessages(t *testing.T, db *thread.DB, id string) []string {
	t.Helper()
	th, err := db.WithTenant("a").Thread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+": "+shorten(m.Text(), 20))
	}
	return out
}

// A message the conversation's thread cannot hold is refused with 400
// invalid — what appending it to the thread answers; 413 too_large is the
// server's limit on a request body, which this one is under — and changes
// nothing: the next message is saved, and read back by a new server.
func TestConversationSendOverTheMessageLimit(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	client := scripted.New(scripted.Text("first answer"), scripted.Text("second answer"))
	s := newServer(t, Options{DB: db, Chat: client, Keys: twoTenants(t)})
	ts := httptest.NewServer(s)
	defer ts.Close()
	if resp, body := post(t, ts.URL+"/v1/conversations", keyA, map[string]string{"id": "cv1"}); resp.StatusCode != 201 {
		t.Fatalf("create: %s %s", resp.Status, body)
	}
	evs, stop := streamEvents(t, ts.URL+"/v1/conversations/cv1/events", keyA, "")
	defer stop()
	nextEvent(t, evs, "state")
	post(t, ts.URL+"/v1/conversations/cv1/commands", keyA, map[string]any{"command": "send", "text": "hi"})
	nextEvent(t, evs, "stopped")

	huge := strings.Repeat("x", 1_100_000)
	for _, cmd := range []map[string]any{
		{"command": "send", "text": huge},
		{"command": "send", "text": huge, "queued": true},
		{"command": "compact", "text": huge},
		{"command": "fork", "text": huge},
	} {
		resp, body := post(t, ts.URL+"/v1/conversations/cv1/commands", keyA, cmd)
		var e errorBody
		json.Unmarshal(body, &e)
		if resp.StatusCode != 400 || e.Error.Code != "invalid" || !strings.Contains(e.Error.Message, "over the limit of 1048576") {
			t.Fatalf("%s of %d bytes: %s %s", cmd["command"], len(huge), resp.Status, shorten(string(body), 300))
		}
	}
	if n := len(client.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want once", n)
	}
	if resp, body := post(t, ts.URL+"/v1/conversations/cv1/commands", keyA, map[string]any{"command": "send", "text": "again"}); resp.StatusCode != 200 {
		t.Fatalf("send: %s %s", resp.Status, body)
	}
	if ev := nextEvent(t, evs, "stopped"); ev.Status != (conversation.Status{Kind: conversation.Stopped, Reason: conversation.EndTurn}) {
		t.Fatalf("stopped: %+v", ev)
	}
	want := []string{"user: hi", "assistant: first answer", "user: again", "assistant: second answer"}
	if got := savedMessages(t, db, "cv1"); !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
	s.Close()

	// Another server on the store: the conversation as it was left.
	s2 := newServer(t, Options{DB: db, Chat: client, Keys: twoTenants(t)})
	defer s2.Close()
	var got conversationJSON
	must(t, s2, req{method: "GET", path: "/v1/conversations/cv1", key: keyA}, 200, &got)
	if len(got.Messages) != 4 || got.Status != (conversation.Status{Kind: conversation.Stopped, Reason: conversation.EndTurn}) {
		t.Fatalf("after a restart: %+v", got)
	}
}

// A commit that fails is an error event and the status error, never a
// quiet end_turn; the store's own text reaches the log, not the client;
// and the conversation saves again once the store does.
func TestConversationCommitFailureIsAnError(t *testing.T) {
	store := &breakableStore{Store: thread.NewMemoryStore()}
	db := thread.New(store, nil)
	gate := make(chan struct{}, 10)
	client := scripted.New(scripted.Step{Chunks: []agent.Update{{Text: "lost "}, {Text: "answer"}}, Text: "lost answer", Gate: gate},
		scripted.Text("saved answer"))
	var logged lockedBuffer
	s := newServer(t, Options{DB: db, Chat: client, Keys: twoTenants(t), Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()
	post(t, ts.URL+"/v1/conversations", keyA, map[string]string{"id": "cv1"})
	evs, stop := streamEvents(t, ts.URL+"/v1/conversations/cv1/events", keyA, "")
	defer stop()
	nextEvent(t, evs, "state")

	// The message is kept; its answer cannot be.
	if resp, body := post(t, ts.URL+"/v1/conversations/cv1/commands", keyA, map[string]any{"command": "send", "text": "one"}); resp.StatusCode != 200 {
		t.Fatalf("send: %s %s", resp.Status, body)
	}
	gate <- struct{}{}
	nextEvent(t, evs, "content")
	store.broken.Store(true)
	gate <- struct{}{}
	gate <- struct{}{}
	ev := nextEvent(t, evs, "error")
	if ev.Status.Kind != conversation.Errored || ev.Error == "" || strings.Contains(ev.Error+ev.Status.Err, "secret") {
		t.Fatalf("error event %+v", ev)
	}

	// A message that cannot be kept is refused, as the store's failure.
	resp, body := post(t, ts.URL+"/v1/conversations/cv1/commands", keyA, map[string]any{"command": "send", "text": "two"})
	if resp.StatusCode < 500 || strings.Contains(string(body), "secret") {
		t.Fatalf("send on a broken store: %s %s", resp.Status, body)
	}
	if ev := nextEvent(t, evs, "error"); ev.Status.Kind != conversation.Errored {
		t.Fatalf("error event %+v", ev)
	}
	var got conversationJSON
	must(t, s, req{method: "GET", path: "/v1/conversations/cv1", key: keyA}, 200, &got)
	if got.Status.Kind != conversation.Errored || len(got.Messages) != 1 || got.Messages[0].Text() != "one" {
		t.Fatalf("after the failures: %+v", got)
	}
	if !strings.Contains(logged.String(), "disk on fire") {
		t.Fatalf("the store's failure is not in the log:\n%s", logged.String())
	}

	store.broken.Store(false)
	if resp, body := post(t, ts.URL+"/v1/conversations/cv1/commands", keyA, map[string]any{"command": "send", "text": "three"}); resp.StatusCode != 200 {
		t.Fatalf("send: %s %s", resp.Status, body)
	}
	if ev := nextEvent(t, evs, "stopped"); ev.Status != (conversation.Status{Kind: conversation.Stopped, Reason: conversation.EndTurn}) {
		t.Fatalf("stopped: %+v", ev)
	}
	want := []string{"user: one", "user: three", "assistant: saved answer"}
	if got := savedMessages(t, db, "cv1"); !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
}

// lockedBuffer is a log buffer written by the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// A server that shuts down (Close) while a conversation's answer streams
// leaves the turn in flight, not aborted: the next server asks the model
// again on the conversation's first request, and saves the answer.
func TestConversationResumesAfterTheServerCloses(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	gate := make(chan struct{}, 10)
	first := scripted.New(scripted.Step{Chunks: []agent.Update{{Text: "half "}, {Text: "an answer"}}, Text: "half an answer", Gate: gate})
	s := newServer(t, Options{DB: db, Chat: first, Keys: twoTenants(t)})
	ts := httptest.NewServer(s)
	must(t, s, req{method: "POST", path: "/v1/conversations", key: keyA, body: map[string]any{"id": "cv1"}}, 201, nil)
	evs, stop := streamEvents(t, ts.URL+"/v1/conversations/cv1/events", keyA, "")
	nextEvent(t, evs, "state")
	must(t, s, req{method: "POST", path: "/v1/conversations/cv1/commands", key: keyA, body: map[string]any{"command": "send", "text": "where was I?"}}, 200, nil)
	gate <- struct{}{}
	if ev := nextEvent(t, evs, "content"); ev.Partial == "" {
		t.Fatalf("content event %+v", ev)
	}
	s.Close()
	stop()
	ts.Close()

	// The next server's model answers once the test has its events.
	gate2 := make(chan struct{}, 2)
	again := scripted.New(scripted.Step{Chunks: []agent.Update{{Text: "the answer"}}, Text: "the answer", Gate: gate2})
	s2 := newServer(t, Options{DB: db, Chat: again, Keys: twoTenants(t)})
	defer s2.Close()
	ts2 := httptest.NewServer(s2)
	defer ts2.Close()
	evs, stop = streamEvents(t, ts2.URL+"/v1/conversations/cv1/events", keyA, "")
	defer stop()
	nextEvent(t, evs, "state")
	gate2 <- struct{}{} // its one update
	gate2 <- struct{}{} // its end
	if ev := nextEvent(t, evs, "stopped"); ev.Status != (conversation.Status{Kind: conversation.Stopped, Reason: conversation.EndTurn}) {
		t.Fatalf("after the restart: %+v", ev)
	}
	if got, want := savedMessages(t, db, "cv1"), []string{"user: where was I?", "assistant: the answer"}; !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
	if n := len(again.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times after the restart, want 1", n)
	}
}
