package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func isConversationRoute(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	return strings.HasPrefix(path, "/v1/conversations")
}

// nextEvent returns the data of the next event of ch named name, skipping
// the others.
func nextEvent(t *testing.T, ch <-chan sseEvent, name string) conversationEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %q", name)
			}
			if ev.name != name {
				continue
			}
			var data conversationEvent
			if err := json.Unmarshal(ev.data, &data); err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			return data
		case <-timeout:
			t.Fatalf("no %q event", name)
		}
	}
}

func post(t *testing.T, url, key string, body any) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp, out.Bytes()
}

func TestConversationRoutes(t *testing.T) {
	client := scripted.New(scripted.Text("Hello to you, over HTTP."), scripted.Step{Text: "a slow one", Delay: 5 * time.Second}, scripted.Text("forked answer"))
	client.ChunkSize = 3
	s := newServer(t, Options{Chat: client, Keys: twoTenants(t)})
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()

	resp, body := post(t, ts.URL+"/v1/conversations", keyA, map[string]string{"id": "c1", "title": "over http"})
	if resp.StatusCode != 201 || resp.Header.Get("Location") != "/v1/conversations/c1" {
		t.Fatalf("create: %s %s", resp.Status, body)
	}
	if resp, _ := post(t, ts.URL+"/v1/conversations", keyA, map[string]string{"id": "c1"}); resp.StatusCode != 409 {
		t.Fatalf("create twice: %s", resp.Status)
	}
	evs, stop := streamEvents(t, ts.URL+"/v1/conversations/c1/events", keyA, "")
	defer stop()
	if ev := nextEvent(t, evs, "state"); ev.Status.Kind != conversation.Stopped || ev.Mode.Kind != conversation.ModeNormal {
		t.Fatalf("first event %+v", ev)
	}
	if resp, body := post(t, ts.URL+"/v1/conversations/c1/commands", keyA, map[string]any{"command": "send", "text": "hi"}); resp.StatusCode != 200 {
		t.Fatalf("send: %s %s", resp.Status, body)
	}
	nextEvent(t, evs, "content")
	if ev := nextEvent(t, evs, "stopped"); ev.Status != (conversation.Status{Kind: conversation.Stopped, Reason: conversation.EndTurn}) {
		t.Fatalf("stopped: %+v", ev)
	}
	var got conversationJSON
	w := must(t, s, req{method: "GET", path: "/v1/conversations/c1", key: keyA}, 200, nil)
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Messages) != 2 || got.Messages[1].Text() != "Hello to you, over HTTP." {
		t.Fatalf("get: %s (%v)", w.Body, err)
	}

	// A command the state forbids: continue while streaming.
	post(t, ts.URL+"/v1/conversations/c1/commands", keyA, map[string]any{"command": "send", "text": "slowly"})
	if resp, body := post(t, ts.URL+"/v1/conversations/c1/commands", keyA, map[string]any{"command": "continue"}); resp.StatusCode != 409 {
		t.Fatalf("continue while streaming: %s %s", resp.Status, body)
	}
	if resp, _ := post(t, ts.URL+"/v1/conversations/c1/commands", keyA, map[string]any{"command": "abort"}); resp.StatusCode != 200 {
		t.Fatalf("abort: %s", resp.Status)
	}
	if ev := nextEvent(t, evs, "stopped"); ev.Status.Reason != conversation.Aborted {
		t.Fatalf("after abort: %+v", ev)
	}
	for _, bad := range []map[string]any{{"command": "dance"}, {"command": "send"}, {"command": "send", "text": "x", "extra": 1}} {
		if resp, body := post(t, ts.URL+"/v1/conversations/c1/commands", keyA, bad); resp.StatusCode != 400 {
			t.Fatalf("%v: %s %s", bad, resp.Status, body)
		}
	}

	// A fork: its own conversation, from the source's last stop.
	resp, body = post(t, ts.URL+"/v1/conversations/c1/commands", keyA, map[string]any{"command": "fork", "text": "another way"})
	var forked conversationJSON
	json.Unmarshal(body, &forked)
	if resp.StatusCode != 200 || forked.Fork == "" {
		t.Fatalf("fork: %s %s", resp.Status, body)
	}
	if resp, body := post(t, ts.URL+"/v1/conversations/"+forked.Fork+"/commands", keyA, map[string]any{"command": "continue"}); resp.StatusCode != 200 {
		t.Fatalf("continue the fork: %s %s", resp.Status, body)
	}
	fevs, fstop := streamEvents(t, ts.URL+"/v1/conversations/"+forked.Fork+"/events", keyA, "")
	defer fstop()
	if ev := nextEvent(t, fevs, "state"); ev.Status.Kind == conversation.Streaming {
		nextEvent(t, fevs, "stopped")
	}
	w = must(t, s, req{method: "GET", path: "/v1/conversations/" + forked.Fork, key: keyA}, 200, nil)
	json.Unmarshal(w.Body.Bytes(), &got)
	if last := got.Messages[len(got.Messages)-1]; last.Text() != "forked answer" || got.Messages[len(got.Messages)-2].Text() != "another way" {
		t.Fatalf("the fork: %s", w.Body)
	}

	var list conversationsResponse
	must(t, s, req{method: "GET", path: "/v1/conversations", key: keyA}, 200, &list)
	if len(list.Conversations) != 2 {
		t.Fatalf("list: %+v", list)
	}

	// A thread that is not a conversation is not one here.
	createThread(t, s, keyA, "plain", "hi")
	wantError(t, s, req{method: "GET", path: "/v1/conversations/plain", key: keyA}, 404, "not_found")

	// Another tenant sees none of it.
	wantError(t, s, req{method: "GET", path: "/v1/conversations/c1", key: keyB}, 404, "not_found")
	wantError(t, s, req{method: "POST", path: "/v1/conversations/c1/commands", key: keyB, body: map[string]any{"command": "abort"}}, 404, "not_found")
	// The thread is in the store, as any other.
	th, err := s.db.WithTenant("a").Thread(t.Context(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := th.Messages(t.Context(), thread.ReadOptions{})
	if len(msgs) < 3 || msgs[0].Role != message.RoleUser {
		t.Fatalf("the thread: %d messages", len(msgs))
	}

	// Closing the server ends the event streams, and refuses what comes
	// after; every conversation route answered a 2xx.
	s.Close()
	wantError(t, s, req{method: "GET", path: "/v1/conversations/c1", key: keyA}, 503, "unavailable")
	if _, ok := <-evs; ok {
		for range evs {
		}
	}
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		if !isConversationRoute(rt.pattern) {
			continue
		}
		testwait.Until(t, 5*time.Second, "route "+rt.pattern+" answers a 2xx", func() bool {
			var out strings.Builder
			s.Metrics().WriteTo(&out)
			return answered2xx(out.String(), rt.pattern, method)
		})
	}
}

func TestConversationsNeedAModel(t *testing.T) {
	s := newServer(t, Options{})
	w := wantError(t, s, req{method: "POST", path: "/v1/conversations", body: map[string]any{}}, 501, "unsupported")
	if !strings.Contains(w.Body.String(), "--provider scripted") {
		t.Fatalf("the answer does not say how to get a model: %s", w.Body)
	}
	// The list needs none: the threads are in the store.
	var list conversationsResponse
	must(t, s, req{method: "GET", path: "/v1/conversations"}, 200, &list)
}

// A live conversation nobody uses is closed after the idle time, and
// opened again from its thread by the next request.
func TestConversationIdleIsClosed(t *testing.T) {
	client := scripted.New(scripted.Text("one"), scripted.Text("two"))
	s := newServer(t, Options{Chat: client, ConversationIdle: time.Minute})
	defer s.Close()
	var got conversationJSON
	must(t, s, req{method: "POST", path: "/v1/conversations", body: map[string]any{"id": "c1"}}, 201, nil)
	must(t, s, req{method: "POST", path: "/v1/conversations/c1/commands", body: map[string]any{"command": "send", "text": "hi"}}, 200, nil)
	eventually(t, "the turn ends and is stored", func() bool {
		w := must(t, s, req{method: "GET", path: "/v1/conversations/c1"}, 200, nil)
		json.Unmarshal(w.Body.Bytes(), &got)
		var stored messagesResponse
		must(t, s, req{method: "GET", path: "/v1/threads/c1/messages"}, 200, &stored)
		return got.Status.Kind == conversation.Stopped && len(got.Messages) == 2 && len(stored.Messages) == 2
	})
	// c1 was last used an hour ago.
	s.lives.mu.Lock()
	first := s.lives.m[thread.Key("", "c1")]
	first.used = first.used.Add(-time.Hour)
	s.lives.mu.Unlock()
	must(t, s, req{method: "POST", path: "/v1/conversations", body: map[string]any{"id": "c2"}}, 201, nil) // sweeps
	s.lives.mu.Lock()
	_, still := s.lives.m[thread.Key("", "c1")]
	s.lives.mu.Unlock()
	if still {
		t.Fatal("an idle conversation stayed live")
	}
	w := must(t, s, req{method: "GET", path: "/v1/conversations/c1"}, 200, nil)
	json.Unmarshal(w.Body.Bytes(), &got)
	if len(got.Messages) != 2 || got.Messages[1].Text() != "one" {
		t.Fatalf("reopened: %s", w.Body)
	}
	s.lives.mu.Lock()
	second := s.lives.m[thread.Key("", "c1")]
	s.lives.mu.Unlock()
	if second == first || second == nil {
		t.Fatal("not opened anew")
	}
}
