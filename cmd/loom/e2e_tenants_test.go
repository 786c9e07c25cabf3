package main

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/worklog"
)

// TestEndToEndTenantsApart replays issue 12's report against the built
// `loom serve` with two API keys, on each durable store, across a
// restart: other takes acme's work log's thread id and acme's thread id
// (both were 409s that blocked or revealed acme), and acme's items,
// threads and sessions are untouched, in the store after the restart too.
func TestEndToEndTenantsApart(t *testing.T) {
	for name, store := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "loom.db") },
		"postgres": func(t *testing.T) string { return testserver.Postgres(t) },
		"redis":    func(t *testing.T) string { return testserver.Redis(t) },
		"file":     func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "threads") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tenantsApart(t, store(t))
		})
	}
}

func tenantsApart(t *testing.T, store string) {
	keys := keysFile(t)
	s := startServer(t, store, "--keys", keys)
	wl := worklog.ThreadID("acme", "victim")
	want := func(status, code int, what string) {
		t.Helper()
		if status != code {
			t.Errorf("%s: status %d, want %d", what, status, code)
		}
	}
	st, _ := call(t, "POST", s.url+"/v1/threads", keyAcme, map[string]any{"id": "secret", "title": "acme's"}, nil)
	want(st, http.StatusCreated, "acme creates secret")
	st, _ = call(t, "POST", s.url+"/v1/sessions?project=victim", keyAcme, map[string]any{"session_id": "s-acme"}, nil)
	want(st, http.StatusCreated, "acme starts a session")
	st, _ = call(t, "POST", s.url+"/v1/sessions/s-acme/close?project=victim", keyAcme, map[string]any{"open_threads": []any{"acme's carried item"}}, nil)
	want(st, http.StatusOK, "acme closes a session")
	// Defect 2: other's create of acme's id answered 409 "thread exists".
	st, _ = call(t, "POST", s.url+"/v1/threads", keyOther, map[string]any{"id": "secret", "title": "other's"}, nil)
	want(st, http.StatusCreated, "other creates secret")
	// Defect 1: other took acme's work log's id, and acme's items failed
	// with 409 for ever.
	st, _ = call(t, "POST", s.url+"/v1/threads", keyOther, map[string]any{"id": wl}, nil)
	want(st, http.StatusCreated, "other creates "+wl)
	st, _ = call(t, "POST", s.url+"/v1/items?project=victim", keyAcme, map[string]any{"text": "acme's item"}, nil)
	want(st, http.StatusCreated, "acme creates an item")
	s.stop(t)

	s = startServer(t, store, "--keys", keys)
	for key, title := range map[string]string{keyAcme: "acme's", keyOther: "other's"} {
		var th struct{ Title string }
		st, _ := call(t, "GET", s.url+"/v1/threads/secret", key, nil, &th)
		if st != http.StatusOK || th.Title != title {
			t.Errorf("after the restart, %s's secret: %d %q", title, st, th.Title)
		}
	}
	var start struct {
		SessionsAggregated int `json:"sessions_aggregated"`
		OpenThreads        []struct {
			Text string `json:"text"`
		} `json:"open_threads"`
	}
	st, _ = call(t, "POST", s.url+"/v1/sessions?project=victim", keyAcme, map[string]any{}, &start)
	texts := map[string]bool{}
	for _, it := range start.OpenThreads {
		texts[it.Text] = true
	}
	if st != http.StatusCreated || start.SessionsAggregated != 1 || !texts["acme's carried item"] || !texts["acme's item"] {
		t.Errorf("after the restart, acme's session start: %d %+v", st, start)
	}
	st, _ = call(t, "POST", s.url+"/v1/sessions?project=victim", keyOther, map[string]any{}, &start)
	if st != http.StatusCreated || start.SessionsAggregated != 0 || len(start.OpenThreads) != 0 {
		t.Errorf("other's session start: %d %+v", st, start)
	}
}
