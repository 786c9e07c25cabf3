package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// listAll pages through GET /v1/threads with query q, limit at a time,
// and returns the ids.
func listAll(tb testing.TB, h http.Handler, key, q string, limit int) []string {
	tb.Helper()
	var out []string
	cursor := ""
	for range 100 {
		path := fmt.Sprintf("/v1/threads?limit=%d&%s", limit, q)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page listResponse
		must(tb, h, req{method: "GET", path: path, key: key}, http.StatusOK, &page)
		if len(page.Threads) > limit {
			tb.Fatalf("%s: %d threads", path, len(page.Threads))
		}
		for _, th := range page.Threads {
			out = append(out, th.ID)
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
	tb.Fatalf("listing %s did not end", q)
	return nil
}

// order=updated lists the most recently updated first, in pages joined by
// cursors; a thread written to goes to the front.
func TestListThreadsByUpdated(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	tick := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	s := newServer(t, Options{DB: db, Keys: twoTenants(t)})
	// Made in the order c, a, e, b, d; b and d at the same time.
	for _, id := range []string{"c", "a", "e", "b"} {
		createThread(t, s, keyA, id, "hi")
		if id != "b" {
			tick(time.Second)
		}
	}
	createThread(t, s, keyA, "d", "hi")
	createThread(t, s, keyB, "z", "another tenant's")
	want := []string{"d", "b", "e", "a", "c"}
	for _, limit := range []int{1, 2, 5} {
		if got := listAll(t, s, keyA, "order=updated", limit); !slices.Equal(got, want) {
			t.Fatalf("order=updated in pages of %d: %v, want %v", limit, got, want)
		}
	}
	if got := listAll(t, s, keyA, "order=newest", 10); !slices.Equal(got, []string{"e", "d", "c", "b", "a"}) {
		t.Fatalf("order=newest: %v", got)
	}
	tick(time.Second)
	must(t, s, req{method: "POST", path: "/v1/threads/c/messages", key: keyA, body: map[string]any{"messages": []any{textMsg("user", "more")}}}, http.StatusCreated, nil)
	if got := listAll(t, s, keyA, "order=updated", 2); !slices.Equal(got, []string{"c", "d", "b", "e", "a"}) {
		t.Fatalf("order=updated after writing to c: %v", got)
	}
}

// loom's own threads are left out by default; internal=include lists
// them too and internal=only alone, in full pages.
func TestListThreadsInternal(t *testing.T) {
	s := newServer(t, Options{})
	db := s.db
	var people, own []string
	for i := range 30 {
		id := fmt.Sprintf("t%02d", i)
		var labels map[string]string
		switch i % 3 {
		case 1:
			labels = map[string]string{thread.LabelOwner: "worklog"}
		case 2:
			labels = map[string]string{"loom.workflow": "wf", "loom.workflow.key": id}
		}
		if _, err := db.Create(t.Context(), thread.CreateOptions{ID: id, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		if labels == nil {
			people = append(people, id)
		} else {
			own = append(own, id)
		}
	}
	all := append(slices.Clone(people), own...)
	slices.Sort(all)
	ownDesc := slices.Clone(own)
	slices.Reverse(ownDesc)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"", people},
		{"internal=exclude", people},
		{"internal=include", all},
		{"internal=only", own},
		{"internal=only&order=newest", ownDesc},
	} {
		for _, limit := range []int{1, 3, 50} {
			if got := listAll(t, s, "", tc.q, limit); !slices.Equal(got, tc.want) {
				t.Errorf("%q in pages of %d: %v, want %v", tc.q, limit, got, tc.want)
			}
		}
	}
}

func TestListThreadsBadParams(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "a", "hi")
	var page listResponse
	must(t, s, req{method: "GET", path: "/v1/threads?limit=1&internal=include&order=id", key: ""}, http.StatusOK, &page)
	createThread(t, s, "", "b", "hi")
	must(t, s, req{method: "GET", path: "/v1/threads?limit=1&order=id"}, http.StatusOK, &page)
	idCursor := page.NextCursor
	must(t, s, req{method: "GET", path: "/v1/threads?limit=1&order=updated"}, http.StatusOK, &page)
	updatedCursor := page.NextCursor
	if idCursor == "" || updatedCursor == "" {
		t.Fatalf("no cursors: %q %q", idCursor, updatedCursor)
	}
	for _, q := range []string{
		"internal=yes",
		"internal=EXCLUDE",
		"order=oldest",
		"order=updated&cursor=" + idCursor,
		"order=id&cursor=" + updatedCursor,
		"order=updated&cursor=" + base64.RawURLEncoding.EncodeToString([]byte("12x:a")),
		"order=updated&cursor=" + base64.RawURLEncoding.EncodeToString([]byte("12:a/../b")),
		"cursor=%%%",
	} {
		wantError(t, s, req{method: "GET", path: "/v1/threads?" + q}, http.StatusBadRequest, "invalid")
	}
}
