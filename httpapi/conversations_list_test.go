package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/thread"
)

// listConversationsAll reads every page of GET /v1/conversations with page size limit.
func listConversationsAll(t *testing.T, s *Server, key string, limit int) []conversationItem {
	t.Helper()
	var all []conversationItem
	cursor := ""
	for range 100 {
		path := fmt.Sprintf("/v1/conversations?limit=%d", limit)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page conversationsResponse
		must(t, s, req{method: "GET", path: path, key: key}, 200, &page)
		if len(page.Conversations) > limit {
			t.Fatalf("%s: %d conversations", path, len(page.Conversations))
		}
		all = append(all, page.Conversations...)
		if cursor = page.NextCursor; cursor == "" {
			return all
		}
	}
	t.Fatal("the cursors never end")
	return nil
}

func idsOf(items []conversationItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

// waitStopped waits until the live conversation id is stopped with n
// messages or more, over GET /v1/conversations/{id}.
func waitStopped(t *testing.T, s *Server, key, id string, n int) conversationJSON {
	t.Helper()
	var got conversationJSON
	if !testwait.Within(10*time.Second, func() bool {
		got = conversationJSON{}
		must(t, s, req{method: "GET", path: "/v1/conversations/" + id, key: key}, 200, &got)
		return got.Status.Kind == conversation.Stopped && got.Mode.Kind == conversation.ModeNormal && len(got.Messages) >= n
	}) {
		t.Fatalf("%s never stopped with %d messages: %+v", id, n, got)
	}
	return got
}

// The list holds the threads package conversation made — the ones this
// server started, a sub-agent (with its parent), a fork, one started
// elsewhere (not live) — newest first, and no other thread; its pages
// meet; another tenant sees none of it.
func TestListConversations(t *testing.T) {
	s := newServer(t, Options{Chat: scripted.Echo(), Keys: twoTenants(t)})
	defer s.Close()

	// One started elsewhere, on the same store: not live here.
	other, err := conversation.New(t.Context(), s.db.WithTenant("a"), conversation.Options{Client: scripted.Echo(), ID: "c0", Title: "from loom chat"})
	if err != nil {
		t.Fatal(err)
	}
	other.Close(context.Background())
	must(t, s, req{method: "POST", path: "/v1/conversations", key: keyA, body: map[string]any{"id": "c1", "title": "first"}}, 201, nil)
	createThread(t, s, keyA, "plain", "not a conversation")
	must(t, s, req{method: "POST", path: "/v1/conversations/c1/commands", key: keyA,
		body: map[string]any{"command": "send", "text": `call spawn_subagent {"prompt":"look around","title":"helper"}`}}, 200, nil)
	// The prompt, the call, its result, the answer after it.
	got := waitStopped(t, s, keyA, "c1", 4)
	if got.Messages[3].Text() == "" {
		t.Fatalf("after the sub-agent: %+v", got.Messages)
	}
	var fork conversationJSON
	must(t, s, req{method: "POST", path: "/v1/conversations/c1/commands", key: keyA, body: map[string]any{"command": "fork", "text": "another way"}}, 200, &fork)

	all := listConversationsAll(t, s, keyA, 50)
	byID := map[string]conversationItem{}
	for _, it := range all {
		byID[it.ID] = it
	}
	if len(all) != 4 || byID["plain"].ID != "" {
		t.Fatalf("listed %v, want c0, c1, its sub-agent and its fork", idsOf(all))
	}
	var sub conversationItem
	for _, it := range all {
		if it.Parent != "" {
			sub = it
		}
	}
	if sub.Parent != "c1" || sub.ForkedFrom != "" || sub.Title != "helper" || !sub.Live || sub.Status == nil || sub.Status.Kind != conversation.Stopped {
		t.Fatalf("the sub-agent: %+v", sub)
	}
	if c1 := byID["c1"]; !c1.Live || c1.Title != "first" || c1.Status == nil || c1.Mode == nil || c1.Mode.Kind != conversation.ModeNormal || c1.Version < 2 || c1.UpdatedAt.IsZero() || c1.Parent != "" {
		t.Fatalf("c1: %+v", c1)
	}
	if c0 := byID["c0"]; c0.Live || c0.Status != nil || c0.Mode != nil || c0.Title != "from loom chat" {
		t.Fatalf("c0, not live here: %+v", c0)
	}
	if f := byID[fork.Fork]; f.ForkedFrom != "c1" {
		t.Fatalf("the fork: %+v", f)
	}
	// Newest first: by id, descending (loom's ids are time-ordered; the
	// named ones sort as named).
	if ids := idsOf(all); !slices.IsSortedFunc(ids, func(a, b string) int { return -cmpString(a, b) }) {
		t.Fatalf("not newest first: %v", ids)
	}
	// Pages of one meet, with nothing twice.
	if paged := idsOf(listConversationsAll(t, s, keyA, 1)); !slices.Equal(paged, idsOf(all)) {
		t.Fatalf("paged %v, whole %v", paged, idsOf(all))
	}
	// The JSON: live always, parent and status only when there is one.
	w := must(t, s, req{method: "GET", path: "/v1/conversations", key: keyA}, 200, nil)
	var raw struct {
		Conversations []map[string]json.RawMessage `json:"conversations"`
	}
	json.Unmarshal(w.Body.Bytes(), &raw)
	for _, c := range raw.Conversations {
		_, hasStatus := c["status"]
		_, hasParent := c["parent"]
		if string(c["live"]) == "" || hasStatus != (string(c["live"]) == "true") || hasParent != (string(c["id"]) == `"`+sub.ID+`"`) {
			t.Fatalf("item %s", w.Body)
		}
	}

	// Another tenant sees none of them.
	var b conversationsResponse
	must(t, s, req{method: "GET", path: "/v1/conversations", key: keyB}, 200, &b)
	if len(b.Conversations) != 0 {
		t.Fatalf("tenant b sees %v", idsOf(b.Conversations))
	}
	// Bad queries are refused.
	for _, q := range []string{"limit=0", "limit=x", "cursor=%%%", "cursor=Lg", "order=newest"} {
		wantError(t, s, req{method: "GET", path: "/v1/conversations?" + q, key: keyA}, 400, "invalid")
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A page reads at most convScan threads: among many other threads, it
// comes back short with a cursor, which leads on to the conversation.
func TestListConversationsScansBoundedly(t *testing.T) {
	s := newServer(t, Options{Chat: scripted.Echo()})
	defer s.Close()
	db := s.db
	c, err := conversation.New(t.Context(), db, conversation.Options{Client: scripted.Echo(), ID: "a-conversation"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
	for i := range convScan + 1 {
		if _, err := db.Create(t.Context(), thread.CreateOptions{ID: fmt.Sprintf("z-%04d", i), Kind: thread.KindLocal}); err != nil {
			t.Fatal(err)
		}
	}
	var page conversationsResponse
	must(t, s, req{method: "GET", path: "/v1/conversations"}, 200, &page)
	if len(page.Conversations) != 0 || page.NextCursor == "" {
		t.Fatalf("first page: %+v", page)
	}
	if all := idsOf(listConversationsAll(t, s, "", 50)); !slices.Equal(all, []string{"a-conversation"}) {
		t.Fatalf("all pages: %v", all)
	}
}

// A sub-agent that a live conversation runs is that conversation's, over
// every route: its events come from it, and no second conversation is
// opened on its thread.
func TestConversationSubAgentIsTheLiveOne(t *testing.T) {
	s := newServer(t, Options{Chat: scripted.Echo()})
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()
	must(t, s, req{method: "POST", path: "/v1/conversations", body: map[string]any{"id": "p"}}, 201, nil)
	must(t, s, req{method: "POST", path: "/v1/conversations/p/commands",
		body: map[string]any{"command": "send", "text": `call spawn_subagent {"prompt":"one"}`}}, 200, nil)
	waitStopped(t, s, "", "p", 4)
	s.lives.mu.Lock()
	parent := s.lives.m[thread.Key("", "p")]
	s.lives.mu.Unlock()
	kids := parent.conv.Children()
	if len(kids) != 1 {
		t.Fatalf("%d sub-agents", len(kids))
	}
	id := kids[0].ID()
	waitStopped(t, s, "", id, 2)
	s.lives.mu.Lock()
	l := s.lives.m[thread.Key("", id)]
	s.lives.mu.Unlock()
	if l == nil || l.conv != kids[0] || l.root != parent {
		t.Fatalf("the sub-agent's entry: %+v", l)
	}
	// Its events are its own: a message to it streams there.
	evs, stop := streamEvents(t, ts.URL+"/v1/conversations/"+id+"/events", "", "")
	defer stop()
	nextEvent(t, evs, "state")
	must(t, s, req{method: "POST", path: "/v1/conversations/" + id + "/commands", body: map[string]any{"command": "send", "text": "more"}}, 200, nil)
	nextEvent(t, evs, "content")
	nextEvent(t, evs, "stopped")
	if got := waitStopped(t, s, "", id, 4); got.Messages[3].Text() != "You said: more" {
		t.Fatalf("the sub-agent: %+v", got.Messages)
	}
}

// Each event says the status and mode its change made, not those of the
// moment it is written: a compaction's control_flow mode, which lasts only
// as long as a commit, is in its mode event.
func TestConversationEventsCarryTheirState(t *testing.T) {
	s := newServer(t, Options{Chat: scripted.Echo()})
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()
	must(t, s, req{method: "POST", path: "/v1/conversations", body: map[string]any{"id": "c"}}, 201, nil)
	must(t, s, req{method: "POST", path: "/v1/conversations/c/commands", body: map[string]any{"command": "send", "text": "alpha"}}, 200, nil)
	waitStopped(t, s, "", "c", 2)
	evs, stop := streamEvents(t, ts.URL+"/v1/conversations/c/events", "", "")
	defer stop()
	nextEvent(t, evs, "state")
	must(t, s, req{method: "POST", path: "/v1/conversations/c/commands", body: map[string]any{"command": "compact"}}, 200, nil)
	var modes []string
	for {
		ev := nextEvent(t, evs, "mode")
		modes = append(modes, ev.Mode.String())
		if ev.Mode.Kind == conversation.ModeNormal && slices.Contains(modes, "control_flow/compact") {
			break
		}
	}
	if !slices.Contains(modes, "control_flow/compact") {
		t.Fatalf("modes %v", modes)
	}
}

// An idle sub-agent's entry is forgotten, not closed (its root owns it);
// an idle root is closed with its sub-agents' entries, and the next
// request opens the sub-agent from its thread.
func TestConversationSubAgentIdle(t *testing.T) {
	s := newServer(t, Options{Chat: scripted.Echo(), ConversationIdle: time.Hour})
	defer s.Close()
	must(t, s, req{method: "POST", path: "/v1/conversations", body: map[string]any{"id": "p"}}, 201, nil)
	must(t, s, req{method: "POST", path: "/v1/conversations/p/commands",
		body: map[string]any{"command": "send", "text": `call spawn_subagent {"prompt":"one"}`}}, 200, nil)
	waitStopped(t, s, "", "p", 4)
	entry := func(id string) *live {
		s.lives.mu.Lock()
		defer s.lives.mu.Unlock()
		return s.lives.m[thread.Key("", id)]
	}
	parent := entry("p")
	kid := parent.conv.Children()[0]
	waitStopped(t, s, "", kid.ID(), 2)
	if l := entry(kid.ID()); l == nil || l.conv != kid {
		t.Fatal("the sub-agent has no entry of its own")
	}
	sweep := func(at time.Time) {
		s.lives.mu.Lock()
		s.sweep(at)
		s.lives.mu.Unlock()
	}
	// Only the sub-agent is idle (the parent was used since): forgotten,
	// still running in its parent.
	s.lives.mu.Lock()
	entryKid := s.lives.m[thread.Key("", kid.ID())]
	entryKid.used = time.Now().Add(-time.Hour)
	parent.used = time.Now().Add(time.Hour)
	s.lives.mu.Unlock()
	sweep(time.Now().Add(time.Minute))
	parent.mu.Lock()
	_, kept := parent.kids[kid.ID()]
	parent.mu.Unlock()
	if entry(kid.ID()) != nil || kept || entry("p") != parent {
		t.Fatal("the idle sub-agent's entry stayed, or its parent went")
	}
	if got := waitStopped(t, s, "", kid.ID(), 2); entry(kid.ID()).conv != kid {
		t.Fatalf("asked again, the sub-agent is another conversation: %+v", got)
	}
	// Both idle: the root is closed, and its sub-agent's entry goes too.
	sweep(time.Now().Add(3 * time.Hour))
	if entry("p") != nil || entry(kid.ID()) != nil {
		t.Fatal("idle entries stayed")
	}
	if got := waitStopped(t, s, "", kid.ID(), 2); got.Messages[0].Text() != "one" {
		t.Fatalf("the sub-agent opened from its thread: %+v", got.Messages)
	}
	if l := entry(kid.ID()); l == nil || l.root != nil || l.conv == kid {
		t.Fatal("not opened anew from its thread")
	}
}
