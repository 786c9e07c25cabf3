package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

type feedEvent struct {
	id, name string
	change   thread.Change
}

// nextChange returns the next event of a change feed.
func nextChange(t *testing.T, ch <-chan sseEvent) feedEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		out := feedEvent{id: ev.id, name: ev.name}
		if err := json.Unmarshal(ev.data, &out.change); err != nil {
			t.Fatalf("event %s: %v", ev.name, err)
		}
		return out
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	panic("unreachable")
}

func isFeedRoute(pattern string) bool {
	return strings.HasSuffix(pattern, "/events") && !isConversationRoute(pattern)
}

// TestFeedRoutes checks the change feeds over a real listener: a thread's
// own feed and the tenant's, resumed with Last-Event-ID, blind to other
// tenants, ended by a delete and by Close.
func TestFeedRoutes(t *testing.T) {
	s := newServer(t, Options{Keys: twoTenants(t)})
	ts := httptest.NewServer(s)
	defer ts.Close()
	h := s
	must(t, h, req{method: "POST", path: "/v1/threads", key: keyA, body: map[string]any{"id": "f1"}}, 201, nil)

	one, stopOne := streamEvents(t, ts.URL+"/v1/threads/f1/events", keyA, "")
	defer stopOne()
	all, stopAll := streamEvents(t, ts.URL+"/v1/events", keyA, "")
	defer stopAll()
	other, stopOther := streamEvents(t, ts.URL+"/v1/events", keyB, "")
	defer stopOther()

	must(t, h, req{method: "POST", path: "/v1/threads/f1/messages", key: keyA, body: map[string]any{"messages": []any{map[string]any{"role": "user", "contents": []any{map[string]any{"type": "text", "text": "hello"}}}}}}, 201, nil)
	ev := nextChange(t, one)
	if ev.name != "change" || ev.id != "2" || ev.change.Kind != thread.ChangeMove || ev.change.Thread != "f1" || ev.change.Version != 2 || ev.change.Op != thread.OpAppend || ev.change.Head == "" {
		t.Fatalf("thread feed: %+v", ev)
	}
	ev = nextChange(t, all)
	if ev.change.Thread != "f1" || ev.change.Version != 2 || ev.id == "" {
		t.Fatalf("tenant feed: %+v", ev)
	}
	tenantID := ev.id
	must(t, h, req{method: "POST", path: "/v1/threads/f1/checkpoints", key: keyA, body: map[string]any{"name": "cp"}}, 201, nil)
	if ev := nextChange(t, one); ev.change.Kind != thread.ChangeCheckpoint || ev.change.Checkpoint != "cp" || ev.id != "2" {
		t.Fatalf("checkpoint event: %+v", ev)
	}
	for _, text := range []string{"two", "three"} {
		must(t, h, req{method: "POST", path: "/v1/threads/f1/messages", key: keyA, body: map[string]any{"messages": []any{map[string]any{"role": "user", "contents": []any{map[string]any{"type": "text", "text": text}}}}}}, 201, nil)
	}

	// Resumed after version 2: versions 3 and 4 from the history.
	again, stopAgain := streamEvents(t, ts.URL+"/v1/threads/f1/events", keyA, "2")
	defer stopAgain()
	for _, v := range []int64{3, 4} {
		if ev := nextChange(t, again); ev.change.Version != v || ev.change.Kind != thread.ChangeMove {
			t.Fatalf("resumed feed: %+v, want version %d", ev, v)
		}
	}
	// The tenant feed resumed from its first event: both moves again, in order.
	allAgain, stopAllAgain := streamEvents(t, ts.URL+"/v1/events", keyA, tenantID)
	defer stopAllAgain()
	// It starts a few seconds early (a late commit may carry an earlier
	// time), so the create may come again; in order, each once.
	var versions []int64
	for len(versions) == 0 || versions[len(versions)-1] < 4 {
		ev := nextChange(t, allAgain)
		versions = append(versions, ev.change.Version)
	}
	if n := len(versions); n < 3 || versions[n-3] != 2 || versions[n-2] != 3 || (n == 4 && versions[0] != 1) || n > 4 {
		t.Fatalf("resumed tenant feed: versions %v", versions)
	}
	// A Last-Event-ID past the thread's version (a thread of the same id,
	// deleted since) is a gap, and the feed goes on from the head.
	past, stopPast := streamEvents(t, ts.URL+"/v1/threads/f1/events", keyA, "99")
	defer stopPast()
	if ev := nextChange(t, past); ev.name != "gap" || ev.id != "4" {
		t.Fatalf("resumed past the head: %+v", ev)
	}

	// Another tenant heard nothing: its first event is its own.
	must(t, h, req{method: "POST", path: "/v1/threads", key: keyB, body: map[string]any{"id": "f1"}}, 201, nil)
	if ev := nextChange(t, other); ev.change.Kind != thread.ChangeCreate || ev.change.Thread != "f1" || ev.change.Version != 1 {
		t.Fatalf("tenant b heard %+v", ev)
	}
	wantError(t, h, req{method: "GET", path: "/v1/threads/f1/events", key: keyA, header: map[string]string{"Last-Event-ID": "x"}}, 400, "invalid")
	wantError(t, h, req{method: "GET", path: "/v1/threads/nope/events", key: keyA}, 404, "not_found")

	// A tenant holds at most maxFeeds feeds (b has one open).
	var stops []func()
	for range maxFeeds - 1 {
		_, stop := streamEvents(t, ts.URL+"/v1/events", keyB, "")
		stops = append(stops, stop)
	}
	wantError(t, h, req{method: "GET", path: "/v1/events", key: keyB}, http.StatusTooManyRequests, "too_many_feeds")
	for _, stop := range stops {
		stop()
	}

	// A delete is the thread feed's last event.
	must(t, h, req{method: "DELETE", path: "/v1/threads/f1", key: keyA}, 204, nil)
	for {
		ev := nextChange(t, one)
		if ev.change.Kind == thread.ChangeDelete {
			break
		}
	}
	select {
	case _, ok := <-one:
		if ok {
			t.Fatal("an event after the delete")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the thread feed did not end after the delete")
	}
	// Close ends the tenant feeds.
	s.Close()
	select {
	case <-drain(all):
	case <-time.After(5 * time.Second):
		t.Fatal("the tenant feed did not end at Close")
	}
}

func drain(ch <-chan sseEvent) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	return done
}

// TestSearchAndFamilyRoutes checks GET /v1/search (paging, tenants, bad
// queries) and GET /v1/threads/{id}/family.
func TestSearchAndFamilyRoutes(t *testing.T) {
	s := newServer(t, Options{Keys: twoTenants(t)})
	h := s
	msg := func(text string) map[string]any {
		return map[string]any{"role": "user", "contents": []any{map[string]any{"type": "text", "text": text}}}
	}
	must(t, h, req{method: "POST", path: "/v1/threads", key: keyA, body: map[string]any{"id": "s1", "messages": []any{msg("Where is the blue whale?"), msg("the whale swims")}}}, 201, nil)
	must(t, h, req{method: "POST", path: "/v1/threads", key: keyB, body: map[string]any{"id": "s1", "messages": []any{msg("another blue whale")}}}, 201, nil)

	var res searchResponse
	must(t, h, req{method: "GET", path: "/v1/search?q=Whale&limit=1", key: keyA}, 200, &res)
	if len(res.Hits) != 1 || res.Hits[0].Thread != "s1" || res.Hits[0].Message.Text() != "the whale swims" || res.Next == "" || res.Hits[0].Index != 1 {
		t.Fatalf("page 1: %+v", res)
	}
	next := res.Next
	res = searchResponse{}
	must(t, h, req{method: "GET", path: "/v1/search?q=whale&limit=1&before=" + next, key: keyA}, 200, &res)
	if len(res.Hits) != 1 || !strings.Contains(res.Hits[0].Snippet, "blue whale") {
		t.Fatalf("page 2: %+v", res)
	}
	res = searchResponse{}
	must(t, h, req{method: "GET", path: "/v1/search?q=another", key: keyA}, 200, &res)
	if len(res.Hits) != 0 {
		t.Fatalf("tenant a found tenant b's message: %+v", res)
	}
	wantError(t, h, req{method: "GET", path: "/v1/search?q=", key: keyA}, 400, "invalid")
	wantError(t, h, req{method: "GET", path: "/v1/search?q=!!", key: keyA}, 400, "invalid")
	wantError(t, h, req{method: "GET", path: "/v1/search?q=a&limit=0", key: keyA}, 400, "invalid")

	// A family: s1 ← s1-f ← s1-ff, and s1 ← s1-g.
	must(t, h, req{method: "POST", path: "/v1/threads/s1/fork", key: keyA, body: map[string]any{"id": "s1-f"}}, 201, nil)
	must(t, h, req{method: "POST", path: "/v1/threads/s1-f/fork", key: keyA, body: map[string]any{"id": "s1-ff"}}, 201, nil)
	must(t, h, req{method: "POST", path: "/v1/threads/s1/fork", key: keyA, body: map[string]any{"id": "s1-g"}}, 201, nil)
	must(t, h, req{method: "POST", path: "/v1/threads", key: keyA, body: map[string]any{"id": "lone"}}, 201, nil)
	var fam familyResponse
	must(t, h, req{method: "GET", path: "/v1/threads/s1-ff/family", key: keyA}, 200, &fam)
	var got []string
	for _, th := range fam.Threads {
		got = append(got, th.ID)
	}
	if fam.Root != "s1" || strings.Join(got, ",") != "s1,s1-f,s1-ff,s1-g" || fam.Threads[2].ForkedFrom == nil || fam.Threads[2].ForkedFrom.Thread != "s1-f" {
		t.Fatalf("family: root %s, %v", fam.Root, got)
	}
	fam = familyResponse{}
	must(t, h, req{method: "GET", path: "/v1/threads/s1/family", key: keyB}, 200, &fam)
	if len(fam.Threads) != 1 {
		t.Fatalf("tenant b's family of s1: %+v", fam)
	}
	wantError(t, h, req{method: "GET", path: "/v1/threads/nope/family", key: keyA}, 404, "not_found")
}
