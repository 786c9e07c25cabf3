package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/loomthreads/loom/worklog"
)

// keyDefault is a bare key: the tenant "".
const keyDefault = "key-for-the-default-tenant-0123"

// On a server whose keys include one of the tenant "", that tenant's
// work items are as apart from tenant a's as b's are: it cannot read a's
// sessions through a project named "a/…", nor put items into a's next
// session_start through a session id "a:…" (forms a shared session table
// once used): such names are its own.
func TestReviewItemsDefaultTenantApart(t *testing.T) {
	keys := twoTenants(t)
	if err := keys.Add(keyDefault, ""); err != nil {
		t.Fatal(err)
	}
	eachBackend(t, Options{Keys: keys}, func(t *testing.T, env itemEnv) {
		s := env.srv
		must(t, s, req{method: "POST", path: "/v1/sessions", key: keyA, body: map[string]any{"session_id": "s1"}}, http.StatusCreated, nil)
		must(t, s, req{method: "POST", path: "/v1/sessions/s1/close", key: keyA, body: map[string]any{"open_threads": []any{"a's secret"}}},
			http.StatusOK, nil)

		spy := "?project=" + url.QueryEscape("a/"+worklog.DefaultProject)
		var start worklog.StartResult
		must(t, s, req{method: "POST", path: "/v1/sessions" + spy, key: keyDefault}, http.StatusCreated, &start)
		if start.SessionsAggregated != 0 || slices.Contains(itemTexts(start.OpenThreads), "a's secret") {
			t.Errorf("the tenant \"\" read a's sessions: %d aggregated, open %q", start.SessionsAggregated, itemTexts(start.OpenThreads))
		}
		for _, id := range []string{"a:s1", "a:s2"} {
			must(t, s, req{method: "POST", path: "/v1/sessions" + spy, key: keyDefault, body: map[string]any{"session_id": id}}, http.StatusCreated, nil)
			must(t, s, req{method: "POST", path: "/v1/sessions/" + id + "/close" + spy, key: keyDefault,
				body: map[string]any{"open_threads": []any{"injected"}}}, http.StatusOK, nil)
		}
		must(t, s, req{method: "POST", path: "/v1/sessions", key: keyA}, http.StatusCreated, &start)
		if texts := itemTexts(start.OpenThreads); start.SessionsAggregated != 1 || slices.Contains(texts, "injected") || !slices.Contains(texts, "a's secret") {
			t.Errorf("a's start: %d aggregated, open %q", start.SessionsAggregated, texts)
		}
	})
}

// An item that records project state is created like any other, with a
// Location that gets it.
func TestReviewItemsGetProjectState(t *testing.T) {
	eachBackend(t, Options{}, func(t *testing.T, env itemEnv) {
		w := must(t, env.srv, req{method: "POST", path: "/v1/items", body: map[string]any{"text": "PROJECT STATE: loom: green"}}, http.StatusCreated, nil)
		var got itemResponse
		must(t, env.srv, req{method: "GET", path: w.Header().Get("Location")}, http.StatusOK, &got)
		if got.Thread.Text != "PROJECT STATE: loom: green" {
			t.Errorf("got %+v", got.Thread)
		}
	})
}
