package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// messagePage is the body of GET /v1/threads/{id}/messages.
type messagePage struct {
	Version    int64             `json:"version"`
	NextBefore *string           `json:"next_before"`
	Messages   []message.Message `json:"messages"`
}

// longThread makes a thread "long" of n messages "m0"… in one commit, and
// returns its DB.
func longThread(tb testing.TB, n int) (*thread.DB, *thread.Thread) {
	tb.Helper()
	db := thread.New(thread.NewMemoryStore(), nil)
	msgs := make([]message.Message, n)
	for i := range msgs {
		msgs[i] = message.User(fmt.Sprint("m", i))
	}
	th, err := db.Create(tb.Context(), thread.CreateOptions{ID: "long", Messages: msgs})
	if err != nil {
		tb.Fatal(err)
	}
	return db, th
}

func TestMessagesLimitAndNextBefore(t *testing.T) {
	db, _ := longThread(t, 250)
	s := newServer(t, Options{DB: db})
	for _, tc := range []struct {
		query      string
		first      int // the text index of the first message answered
		n          int
		nextBefore bool
	}{
		{"", 150, 100, true}, // no limit: the newest 100
		{"?limit=10", 240, 10, true},
		{"?limit=249", 1, 249, true},
		{"?limit=250", 0, 250, false},
		{"?limit=1000", 0, 250, false},
		{"?limit=0", 0, 250, false}, // an explicit 0: all of them
	} {
		var p messagePage
		must(t, s, req{method: "GET", path: "/v1/threads/long/messages" + tc.query}, http.StatusOK, &p)
		if len(p.Messages) != tc.n || p.Messages[0].Text() != fmt.Sprint("m", tc.first) || p.Messages[tc.n-1].Text() != "m249" {
			t.Errorf("%q: %d messages %s … %s, want %d from m%d to m249", tc.query, len(p.Messages),
				p.Messages[0].Text(), p.Messages[len(p.Messages)-1].Text(), tc.n, tc.first)
		}
		switch {
		case tc.nextBefore && (p.NextBefore == nil || *p.NextBefore != p.Messages[0].ID):
			t.Errorf("%q: next_before %v, want the first message's id %s", tc.query, p.NextBefore, p.Messages[0].ID)
		case !tc.nextBefore && p.NextBefore != nil:
			t.Errorf("%q: next_before %q on the whole thread", tc.query, *p.NextBefore)
		}
	}
}

// TestMessagesPageToStart pages back with next_before, pinned to a
// version, while the thread grows: the pages join into exactly that
// version's messages.
func TestMessagesPageToStart(t *testing.T) {
	db, th := longThread(t, 250)
	s := newServer(t, Options{DB: db})
	v := th.Version()
	path := "/v1/threads/long/messages?limit=64&version=" + strconv.FormatInt(v, 10)
	var got []message.Message
	pages := 0
	for url := path; ; pages++ {
		var p messagePage
		must(t, s, req{method: "GET", path: url}, http.StatusOK, &p)
		if p.Version != v {
			t.Fatalf("page %d: version %d, want %d", pages, p.Version, v)
		}
		got = append(p.Messages, got...)
		if pages == 0 {
			// Newer messages after the first page change nothing of v's.
			if _, err := th.Append(t.Context(), message.User("later")); err != nil {
				t.Fatal(err)
			}
		}
		if p.NextBefore == nil {
			break
		}
		url = path + "&before=" + *p.NextBefore
	}
	if pages != 3 || len(got) != 250 {
		t.Fatalf("%d pages after the first, %d messages; want 3 and 250", pages, len(got))
	}
	for i, text := range texts(got) {
		if text != fmt.Sprint("m", i) {
			t.Fatalf("message %d is %q", i, text)
		}
	}
	// Without version, before reads the head: the newest 100 before m200.
	var p messagePage
	must(t, s, req{method: "GET", path: "/v1/threads/long/messages?before=" + got[200].ID}, http.StatusOK, &p)
	if len(p.Messages) != 100 || p.Messages[0].Text() != "m100" || p.NextBefore == nil || *p.NextBefore != got[100].ID {
		t.Errorf("before m200: %d messages from %s, next_before %v", len(p.Messages), p.Messages[0].Text(), p.NextBefore)
	}
	// A before the version read does not hold is 404, a bad one 400.
	wantError(t, s, req{method: "GET", path: "/v1/threads/long/messages?version=1&before=nope"}, http.StatusNotFound, "not_found")
	wantError(t, s, req{method: "GET", path: "/v1/threads/long/messages?limit=-1"}, http.StatusBadRequest, "invalid")
}

// TestMessagesNotModifiedOnlyForAnExistingVersion checks that
// GET …/messages?version=V answers 304 only when version V exists: the
// If-None-Match check runs before the version is read, so a version the
// thread never had is "not modified" rather than 404.
func TestMessagesNotModifiedOnlyForAnExistingVersion(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "one")
	w := do(t, s, req{method: "GET", path: "/v1/threads/th/messages?version=7", header: map[string]string{"If-None-Match": `"7"`}})
	if w.Code != http.StatusNotFound {
		t.Errorf("messages at version 7 of a thread at version 1, with If-None-Match \"7\": %d, want 404", w.Code)
	}
}
