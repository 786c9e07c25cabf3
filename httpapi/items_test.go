package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"

	_ "github.com/loomthreads/loom/sqlite"
)

// itemBackends are the stores the work-item tests run on: threads and
// sessions in memory, or both in one SQLite file.
var itemBackends = []string{"memory", "sqlite"}

// itemEnv is a server with work items, and the stores behind it.
type itemEnv struct {
	srv      *Server
	db       *thread.DB
	sessions worklog.SessionStore
}

// newItemEnv returns a server whose Options.Worklog keeps its items and
// its session records in a thread DB of backend; sessions reads the
// default tenant's records as the server keeps them.
func newItemEnv(tb testing.TB, backend string, opts Options) itemEnv {
	tb.Helper()
	var db *thread.DB
	switch backend {
	case "memory":
		db = thread.New(thread.NewMemoryStore(), nil)
	case "sqlite":
		path := filepath.Join(tb.TempDir(), "loom.db")
		var err error
		if db, err = thread.Open(tb.Context(), "sqlite://"+path, nil); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
	default:
		tb.Fatalf("no backend %q", backend)
	}
	opts.DB = db
	opts.Worklog = worklog.NewLogs(db, nil)
	return itemEnv{srv: newServer(tb, opts), db: db, sessions: worklog.NewThreadSessions(db)}
}

// eachBackend runs test on a fresh itemEnv of every backend.
func eachBackend(t *testing.T, opts Options, test func(t *testing.T, env itemEnv)) {
	for _, b := range itemBackends {
		t.Run(b, func(t *testing.T) { test(t, newItemEnv(t, b, opts)) })
	}
}

// jsonKeys returns the sorted member names of a JSON object.
func jsonKeys(tb testing.TB, data []byte) []string {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatalf("not an object (%v): %s", err, data)
	}
	return slices.Sorted(maps.Keys(m))
}

// wantKeys fails unless the JSON object data has exactly the members want.
func wantKeys(tb testing.TB, what string, data []byte, want ...string) {
	tb.Helper()
	slices.Sort(want)
	if diff := cmp.Diff(want, jsonKeys(tb, data)); diff != "" {
		tb.Errorf("%s: members (-want +got):\n%s", what, diff)
	}
}

// createItem creates an item through the API, failing unless it is new.
func createItem(tb testing.TB, h http.Handler, key, project, text string) worklog.Item {
	tb.Helper()
	var res worklog.CreateResult
	must(tb, h, req{method: "POST", path: "/v1/items" + projectQuery(project), key: key, body: map[string]any{"text": text}}, http.StatusCreated, &res)
	return res.Thread
}

func projectQuery(project string) string {
	if project == "" {
		return ""
	}
	return "?project=" + url.QueryEscape(project)
}

// allItems lists every item of a tenant's project, open and resolved.
func allItems(tb testing.TB, h http.Handler, key, project string) []worklog.Item {
	tb.Helper()
	path := "/v1/items?include_resolved=true"
	if project != "" {
		path += "&project=" + url.QueryEscape(project)
	}
	var res worklog.ListResult
	must(tb, h, req{method: "GET", path: path, key: key}, http.StatusOK, &res)
	return res.Threads
}

// closedSessions returns the closed sessions of the tenant ""'s default
// project, as the store has them.
func closedSessions(tb testing.TB, ss worklog.SessionStore) []worklog.Session {
	tb.Helper()
	got, err := ss.ClosedSessions(tb.Context(), worklog.ClosedOptions{Project: worklog.DefaultProject, Limit: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

var itemIDPattern = regexp.MustCompile(`^t-[0-9a-f]{8}$`)

// TestItems goes through every work-item route and checks the shape of
// each answer.
func TestItems(t *testing.T) {
	eachBackend(t, Options{}, func(t *testing.T, env itemEnv) {
		s := env.srv

		// Create: 201, the item, a Location that reads it back.
		w := do(t, s, req{method: "POST", path: "/v1/items", body: map[string]any{"text": "  Release notes still to write  ", "session_id": "sess-1"}})
		if w.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", w.Code, w.Body)
		}
		wantKeys(t, "create result", w.Body.Bytes(), "thread", "performance")
		var created worklog.CreateResult
		if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil {
			t.Fatal(err)
		}
		notes := created.Thread
		if !itemIDPattern.MatchString(notes.ID) || notes.Text != "Release notes still to write" || notes.Status != worklog.StatusOpen ||
			notes.CreatedAt.IsZero() || notes.SourceSession != "sess-1" || created.Deduplicated {
			t.Errorf("created %+v", created)
		}
		var raw struct {
			Performance json.RawMessage `json:"performance"`
		}
		json.Unmarshal(w.Body.Bytes(), &raw)
		wantKeys(t, "performance", raw.Performance, "latency_ms", "target_ms", "meets_target", "result_count", "cache_hit",
			"total_latency_ms", "network_calls_made", "fully_local")
		if created.Performance.TargetMS != worklog.TargetMS || created.Performance.ResultCount != 1 {
			t.Errorf("performance %+v", created.Performance)
		}
		if loc := w.Header().Get("Location"); loc != "/v1/items/"+notes.ID {
			t.Errorf("Location %q", loc)
		}
		wantKeys(t, "item", mustJSON(t, notes), "id", "text", "status", "created_at", "source_session")

		// The same text again, in another case: 200, deduplicated.
		var dup worklog.CreateResult
		w = must(t, s, req{method: "POST", path: "/v1/items", body: map[string]any{"text": "release notes STILL to write."}}, http.StatusOK, &dup)
		if !dup.Deduplicated || dup.Thread.ID != notes.ID || w.Header().Get("Location") != "" {
			t.Errorf("deduplicated %+v", dup)
		}
		wantKeys(t, "deduplicated result", w.Body.Bytes(), "thread", "deduplicated", "performance")

		flaky := createItem(t, s, "", "", "Fix the flaky test")
		build := createItem(t, s, "", "", "Fix the build")

		// Read one.
		var one itemResponse
		w = must(t, s, req{method: "GET", path: "/v1/items/" + flaky.ID}, http.StatusOK, &one)
		wantKeys(t, "get", w.Body.Bytes(), "thread")
		if diff := cmp.Diff(flaky, one.Thread); diff != "" {
			t.Errorf("get (-created +got):\n%s", diff)
		}

		// List: open ones, oldest first.
		var list worklog.ListResult
		w = must(t, s, req{method: "GET", path: "/v1/items"}, http.StatusOK, &list)
		wantKeys(t, "list", w.Body.Bytes(), "threads", "total_open", "total_resolved", "performance")
		if diff := cmp.Diff([]worklog.Item{notes, flaky, build}, list.Threads); diff != "" || list.TotalOpen != 3 || list.TotalResolved != 0 {
			t.Errorf("list: %d open, %d resolved (-want +got):\n%s", list.TotalOpen, list.TotalResolved, diff)
		}

		// Resolve #1, the oldest open item.
		var res worklog.ResolveResult
		w = must(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": "#1", "resolution_note": "written", "session_id": "sess-2"}},
			http.StatusOK, &res)
		wantKeys(t, "resolve result", w.Body.Bytes(), "success", "resolved_thread", "message", "performance")
		if got := res.ResolvedThread; !res.Success || got.ID != notes.ID || got.Status != worklog.StatusResolved || got.ResolutionNote != "written" ||
			got.ResolvedBySession != "sess-2" || got.ResolvedAt.IsZero() || res.AlreadyResolved || res.Message == "" {
			t.Errorf("resolved %+v", res)
		}
		notes = res.ResolvedThread

		// Again, by its id: already resolved, nothing changed.
		var again worklog.ResolveResult
		w = must(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": notes.ID}}, http.StatusOK, &again)
		wantKeys(t, "resolved again", w.Body.Bytes(), "success", "resolved_thread", "already_resolved", "message", "performance")
		if !again.AlreadyResolved || cmp.Diff(notes, again.ResolvedThread) != "" {
			t.Errorf("resolved again %+v", again)
		}

		// The status filter and include_resolved.
		for _, tc := range []struct {
			query string
			want  []worklog.Item
		}{
			{"", []worklog.Item{flaky, build}},
			{"?status=open", []worklog.Item{flaky, build}},
			{"?status=resolved", []worklog.Item{notes}},
			{"?include_resolved=true", []worklog.Item{notes, flaky, build}},
			{"?status=resolved&include_resolved=1", []worklog.Item{notes, flaky, build}},
			{"?include_resolved=false", []worklog.Item{flaky, build}},
			{"?project=default&status=resolved", []worklog.Item{notes}},
		} {
			var l worklog.ListResult
			must(t, s, req{method: "GET", path: "/v1/items" + tc.query}, http.StatusOK, &l)
			if diff := cmp.Diff(tc.want, l.Threads); diff != "" || l.TotalOpen != 2 || l.TotalResolved != 1 {
				t.Errorf("%s: %d open, %d resolved (-want +got):\n%s", tc.query, l.TotalOpen, l.TotalResolved, diff)
			}
		}
		// A resolved item is read like an open one.
		must(t, s, req{method: "GET", path: "/v1/items/" + notes.ID}, http.StatusOK, &one)
		if one.Thread.Status != worklog.StatusResolved {
			t.Errorf("get resolved: %+v", one.Thread)
		}

		// "duplicate of" resolves both.
		w = must(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"text_match": "flaky", "resolution_note": "duplicate of " + build.ID}},
			http.StatusOK, &res)
		wantKeys(t, "resolve with a duplicate", w.Body.Bytes(), "success", "resolved_thread", "also_resolved", "message", "performance")
		if res.ResolvedThread.ID != flaky.ID || len(res.AlsoResolved) != 1 || res.AlsoResolved[0].ID != build.ID || res.AlsoResolved[0].Status != worklog.StatusResolved {
			t.Errorf("duplicate: %+v", res)
		}
		must(t, s, req{method: "GET", path: "/v1/items"}, http.StatusOK, &list)
		if len(list.Threads) != 0 || list.TotalOpen != 0 || list.TotalResolved != 3 {
			t.Errorf("after the duplicate: %+v", list)
		}

		// Sessions: start (empty body), close with open items, start
		// again: the next session carries them.
		var start worklog.StartResult
		w = must(t, s, req{method: "POST", path: "/v1/sessions"}, http.StatusCreated, &start)
		wantKeys(t, "start result", w.Body.Bytes(), "session_id", "project", "open_threads", "recently_resolved", "project_state",
			"sessions_aggregated", "performance")
		if start.SessionID == "" || start.Project != worklog.DefaultProject || len(start.OpenThreads) != 0 || len(start.RecentlyResolved) != 3 ||
			start.SessionsAggregated != 0 {
			t.Errorf("start %+v", start)
		}
		var closed worklog.CloseResult
		w = must(t, s, req{method: "POST", path: "/v1/sessions/" + start.SessionID + "/close", body: map[string]any{"open_threads": []any{
			"Carry me forward",
			map[string]any{"id": "t-0a0b0c0d", "text": "An item object", "status": "open", "created_at": "2020-01-02T03:04:05.678Z"},
		}}}, http.StatusOK, &closed)
		wantKeys(t, "close result", w.Body.Bytes(), "session_id", "project", "closed_at", "open_threads", "created", "performance")
		if closed.SessionID != start.SessionID || closed.Project != worklog.DefaultProject || closed.ClosedAt.IsZero() ||
			len(closed.Created) != 2 || len(closed.OpenThreads) != 2 {
			t.Errorf("close %+v", closed)
		}
		var next worklog.StartResult
		must(t, s, req{method: "POST", path: "/v1/sessions", body: map[string]any{"session_id": "sess-3"}}, http.StatusCreated, &next)
		if next.SessionID != "sess-3" || next.SessionsAggregated != 1 || !slices.Equal(itemTexts(next.OpenThreads), []string{"An item object", "Carry me forward"}) {
			t.Errorf("next start: %d aggregated, open %q", next.SessionsAggregated, itemTexts(next.OpenThreads))
		}
		// The session closed with no body.
		must(t, s, req{method: "POST", path: "/v1/sessions/sess-3/close"}, http.StatusOK, &closed)
		if closed.SessionID != "sess-3" || len(closed.Created) != 0 || len(closed.OpenThreads) != 2 {
			t.Errorf("close without a body: %+v", closed)
		}
		if got := len(closedSessions(t, env.sessions)); got != 2 {
			t.Errorf("%d closed sessions in the store, want 2", got)
		}
		// The closed sessions, newest first, with what each carried.
		var listed sessionsResponse
		must(t, s, req{method: "GET", path: "/v1/sessions?limit=10"}, http.StatusOK, &listed)
		// (Both closed in the same millisecond here: either may come first.)
		var ids []string
		for _, ss := range listed.Sessions {
			ids = append(ids, ss.ID)
			if len(ss.OpenThreads) != 2 || ss.ClosedAt.IsZero() {
				t.Errorf("session %s listed with %d items, closed at %v", ss.ID, len(ss.OpenThreads), ss.ClosedAt)
			}
		}
		slices.Sort(ids)
		if want := []string{start.SessionID, "sess-3"}; !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
			t.Errorf("sessions listed: %v, want %v", ids, want)
		}
		listed = sessionsResponse{}
		must(t, s, req{method: "GET", path: "/v1/sessions?limit=1"}, http.StatusOK, &listed)
		if len(listed.Sessions) != 1 {
			t.Errorf("one session listed: %+v", listed.Sessions)
		}
		wantError(t, s, req{method: "GET", path: "/v1/sessions?limit=101"}, http.StatusBadRequest, "invalid")
		listed = sessionsResponse{}
		must(t, s, req{method: "GET", path: "/v1/sessions?project=elsewhere"}, http.StatusOK, &listed)
		if len(listed.Sessions) != 0 {
			t.Errorf("another project's sessions: %+v", listed.Sessions)
		}

		// Every work-item route answered a 2xx (TestEveryRouteHappyPath
		// leaves them to this test).
		var out strings.Builder
		s.Metrics().WriteTo(&out)
		for _, rt := range routes {
			if !isWorkItemRoute(rt.pattern) {
				continue
			}
			method, _, _ := strings.Cut(rt.pattern, " ")
			if !answered2xx(out.String(), rt.pattern, method) {
				t.Errorf("route %s never answered a 2xx", rt.pattern)
			}
		}
	})
}

// isWorkItemRoute reports whether a route pattern is one of the work-item
// routes.
func isWorkItemRoute(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	return strings.HasPrefix(path, "/v1/items") || strings.HasPrefix(path, "/v1/sessions")
}

func itemTexts(items []worklog.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Text)
	}
	return out
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestItemsCarriedAcrossServers closes a session on one server and starts
// the next on another server of the same store, with nothing cached: the
// items travel in the close record, which is in the store's threads.
func TestItemsCarriedAcrossServers(t *testing.T) {
	eachBackend(t, Options{}, func(t *testing.T, env itemEnv) {
		var start worklog.StartResult
		must(t, env.srv, req{method: "POST", path: "/v1/sessions?project=web", body: map[string]any{}}, http.StatusCreated, &start)
		createItem(t, env.srv, "", "web", "Made before the close")
		must(t, env.srv, req{method: "POST", path: "/v1/sessions/" + start.SessionID + "/close?project=web",
			body: map[string]any{"open_threads": []any{"Left open"}}}, http.StatusOK, nil)

		db := thread.New(env.db.Store(), nil)
		other := newServer(t, Options{DB: db, Worklog: worklog.NewLogs(db, nil)})
		var next worklog.StartResult
		must(t, other, req{method: "POST", path: "/v1/sessions?project=web"}, http.StatusCreated, &next)
		if next.SessionsAggregated != 1 || !slices.Equal(slices.Sorted(slices.Values(itemTexts(next.OpenThreads))), []string{"Left open", "Made before the close"}) {
			t.Errorf("carried: %d sessions, open %q", next.SessionsAggregated, itemTexts(next.OpenThreads))
		}
		// The other server's project now has them.
		if got := itemTexts(allItems(t, other, "", "web")); len(got) != 2 {
			t.Errorf("the other server lists %q", got)
		}
		// Another project carries nothing.
		must(t, other, req{method: "POST", path: "/v1/sessions"}, http.StatusCreated, &next)
		if next.SessionsAggregated != 0 || len(next.OpenThreads) != 0 {
			t.Errorf("default project: %+v", next)
		}
	})
}

// TestItemsErrors sends bad requests: each is answered with its status and
// code, and changes neither the items nor the sessions.
func TestItemsErrors(t *testing.T) {
	long := strings.Repeat("é", worklog.MaxTextLen+1)
	for _, tc := range []struct {
		name   string
		rq     req
		status int
		code   string
	}{
		{"blank text", req{method: "POST", path: "/v1/items", body: map[string]any{"text": " \n\t "}}, 400, "invalid"},
		{"no text", req{method: "POST", path: "/v1/items", body: map[string]any{}}, 400, "invalid"},
		{"text too long", req{method: "POST", path: "/v1/items", body: map[string]any{"text": long}}, 400, "invalid"},
		{"bad JSON", req{method: "POST", path: "/v1/items", body: `{"text":`}, 400, "invalid_json"},
		{"text not a string", req{method: "POST", path: "/v1/items", body: `{"text":5}`}, 400, "invalid_json"},
		{"unknown field", req{method: "POST", path: "/v1/items", body: map[string]any{"text": "x", "color": "red"}}, 400, "invalid_json"},
		{"empty body", req{method: "POST", path: "/v1/items"}, 400, "invalid_json"},
		{"two values", req{method: "POST", path: "/v1/items", body: `{"text":"a"}{"text":"b"}`}, 400, "invalid_json"},
		{"bad session id", req{method: "POST", path: "/v1/items", body: map[string]any{"text": "x", "session_id": "not an id!"}}, 400, "invalid"},
		{"bad project", req{method: "POST", path: "/v1/items?project=%01", body: map[string]any{"text": "x"}}, 400, "invalid"},
		{"project too long", req{method: "GET", path: "/v1/items?project=" + strings.Repeat("p", 201)}, 400, "invalid"},
		{"unknown status", req{method: "GET", path: "/v1/items?status=closed"}, 400, "invalid"},
		{"bad include_resolved", req{method: "GET", path: "/v1/items?include_resolved=maybe"}, 400, "invalid"},
		{"no such item", req{method: "GET", path: "/v1/items/t-00000000"}, 404, "not_found"},
		{"item of another project", req{method: "GET", path: "/v1/items/ITEM?project=other"}, 404, "not_found"},
		{"resolve nothing", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{}}, 400, "invalid"},
		{"resolve blanks", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": " ", "text_match": "\t"}}, 400, "invalid"},
		{"resolve empty body", req{method: "POST", path: "/v1/items/resolve"}, 400, "invalid_json"},
		{"resolve unknown field", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"id": "ITEM"}}, 400, "invalid_json"},
		{"resolve bad JSON", req{method: "POST", path: "/v1/items/resolve", body: `{"thread_id":ITEM}`}, 400, "invalid_json"},
		{"resolve no such id", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": "t-00000000"}}, 404, "not_found"},
		{"resolve no such text", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"text_match": "nothing like it"}}, 404, "not_found"},
		{"resolve past the last", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": "#9"}}, 404, "not_found"},
		{"resolve ambiguous", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"text_match": "fix"}}, 409, "ambiguous"},
		{"note too long", req{method: "POST", path: "/v1/items/resolve",
			body: map[string]any{"thread_id": "ITEM", "resolution_note": strings.Repeat("n", worklog.MaxNoteLen+1)}}, 400, "invalid"},
		{"resolve bad session", req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": "ITEM", "session_id": "a b"}}, 400, "invalid"},
		{"start bad session", req{method: "POST", path: "/v1/sessions", body: map[string]any{"session_id": "a/b"}}, 400, "invalid"},
		{"start session not a path segment", req{method: "POST", path: "/v1/sessions", body: map[string]any{"session_id": "-lead"}}, 400, "invalid"},
		{"get bad item id", req{method: "GET", path: "/v1/items/t-0000%2F0000"}, 400, "invalid"},
		{"start unknown field", req{method: "POST", path: "/v1/sessions", body: map[string]any{"id": "s1"}}, 400, "invalid_json"},
		{"start bad JSON", req{method: "POST", path: "/v1/sessions", body: `[`}, 400, "invalid_json"},
		{"start bad project", req{method: "POST", path: "/v1/sessions?project=%7F"}, 400, "invalid"},
		{"close bad session", req{method: "POST", path: "/v1/sessions/a%20b/close"}, 400, "invalid"},
		{"close session id too long", req{method: "POST", path: "/v1/sessions/" + strings.Repeat("s", 129) + "/close"}, 400, "invalid"},
		{"close null item", req{method: "POST", path: "/v1/sessions/s1/close", body: `{"open_threads":[null]}`}, 400, "invalid"},
		{"close blank item", req{method: "POST", path: "/v1/sessions/s1/close", body: map[string]any{"open_threads": []any{"ok", "  "}}}, 400, "invalid"},
		{"close long item", req{method: "POST", path: "/v1/sessions/s1/close", body: map[string]any{"open_threads": []any{"ok", long}}}, 400, "invalid"},
		{"close not a list", req{method: "POST", path: "/v1/sessions/s1/close", body: map[string]any{"open_threads": "x"}}, 400, "invalid_json"},
		{"close unknown field", req{method: "POST", path: "/v1/sessions/s1/close", body: map[string]any{"project": "x"}}, 400, "invalid_json"},
		{"wrong method", req{method: "DELETE", path: "/v1/items/ITEM"}, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, Options{}, func(t *testing.T, env itemEnv) {
				s := env.srv
				item := createItem(t, s, "", "", "Fix the build")
				createItem(t, s, "", "", "Fix the flaky test")
				var start worklog.StartResult
				must(t, s, req{method: "POST", path: "/v1/sessions"}, http.StatusCreated, &start)
				must(t, s, req{method: "POST", path: "/v1/sessions/" + start.SessionID + "/close"}, http.StatusOK, nil)
				beforeItems, beforeSessions := allItems(t, s, "", ""), closedSessions(t, env.sessions)

				rq := tc.rq
				rq.path = strings.ReplaceAll(rq.path, "ITEM", item.ID)
				if b, ok := rq.body.(string); ok {
					rq.body = strings.ReplaceAll(b, "ITEM", item.ID)
				}
				if m, ok := rq.body.(map[string]any); ok && m["thread_id"] == "ITEM" {
					m = maps.Clone(m)
					m["thread_id"] = item.ID
					rq.body = m
				}
				w := wantError(t, s, rq, tc.status, tc.code)
				var e struct {
					Error map[string]json.RawMessage `json:"error"`
				}
				json.Unmarshal(w.Body.Bytes(), &e)
				if _, ok := e.Error["candidates"]; ok != (tc.code == "ambiguous") {
					t.Errorf("candidates: %s", w.Body)
				}
				if len(w.Body.String()) > 4096 {
					t.Errorf("an error of %d bytes", w.Body.Len())
				}

				if diff := cmp.Diff(beforeItems, allItems(t, s, "", "")); diff != "" {
					t.Errorf("items changed (-before +after):\n%s", diff)
				}
				if diff := cmp.Diff(beforeSessions, closedSessions(t, env.sessions)); diff != "" {
					t.Errorf("sessions changed (-before +after):\n%s", diff)
				}
			})
		})
	}
}

// TestItemsAmbiguous checks that a text matching several open items is a
// 409 whose error lists them, whole, and changes nothing.
func TestItemsAmbiguous(t *testing.T) {
	eachBackend(t, Options{}, func(t *testing.T, env itemEnv) {
		s := env.srv
		build := createItem(t, s, "", "", "Fix the build")
		flaky := createItem(t, s, "", "", "Fix the flaky test")
		other := createItem(t, s, "", "", "Write the changelog")
		before := allItems(t, s, "", "")

		w := wantError(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"text_match": "  FIX the ", "resolution_note": "done"}},
			http.StatusConflict, "ambiguous")
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, "error", mustJSON(t, e.Error), "code", "message", "candidates")
		if diff := cmp.Diff([]worklog.Item{build, flaky}, e.Error.Candidates); diff != "" {
			t.Errorf("candidates (-want +got):\n%s", diff)
		}
		for _, it := range []worklog.Item{build, flaky} {
			if !strings.Contains(e.Error.Message, it.ID) {
				t.Errorf("message %q does not name %s", e.Error.Message, it.ID)
			}
		}
		if strings.Contains(e.Error.Message, other.ID) {
			t.Errorf("message %q names %s", e.Error.Message, other.ID)
		}
		if diff := cmp.Diff(before, allItems(t, s, "", "")); diff != "" {
			t.Errorf("items changed (-before +after):\n%s", diff)
		}

		// The id of one resolves it.
		var res worklog.ResolveResult
		must(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": e.Error.Candidates[1].ID}}, http.StatusOK, &res)
		if res.ResolvedThread.ID != flaky.ID {
			t.Errorf("resolved %+v", res.ResolvedThread)
		}
		// Now one open item matches: it is resolved.
		must(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"text_match": "fix the"}}, http.StatusOK, &res)
		if res.ResolvedThread.ID != build.ID {
			t.Errorf("resolved %+v", res.ResolvedThread)
		}
		// Two resolved matches and no open one: ambiguous again.
		w = wantError(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"text_match": "fix"}}, http.StatusConflict, "ambiguous")
		json.Unmarshal(w.Body.Bytes(), &e)
		if len(e.Error.Candidates) != 2 {
			t.Errorf("resolved candidates: %s", w.Body)
		}

		// Other errors keep their two members.
		w = wantError(t, s, req{method: "POST", path: "/v1/items/resolve", body: map[string]any{"text_match": "nothing"}}, http.StatusNotFound, "not_found")
		wantKeys(t, "not found", w.Body.Bytes(), "error")
		var nf struct {
			Error json.RawMessage `json:"error"`
		}
		json.Unmarshal(w.Body.Bytes(), &nf)
		wantKeys(t, "not found error", nf.Error, "code", "message")
	})
}

// TestItemsUnsupported checks that every work-item route answers 501 when
// the server keeps no work items, whatever the request.
func TestItemsUnsupported(t *testing.T) {
	s := newServer(t, Options{})
	for _, rq := range []req{
		{method: "GET", path: "/v1/items"},
		{method: "GET", path: "/v1/items?status=nonsense"},
		{method: "GET", path: "/v1/items/t-00000000"},
		{method: "POST", path: "/v1/items", body: map[string]any{"text": "x"}},
		{method: "POST", path: "/v1/items", body: `{bad`},
		{method: "POST", path: "/v1/items/resolve", body: map[string]any{"thread_id": "#1"}},
		{method: "POST", path: "/v1/sessions"},
		{method: "POST", path: "/v1/sessions/s1/close", body: map[string]any{"open_threads": []any{"x"}}},
	} {
		wantError(t, s, rq, http.StatusNotImplemented, "unsupported")
	}
}

// TestItemsTenants checks that each tenant sees only its own items and
// sessions, and each project its own items.
func TestItemsTenants(t *testing.T) {
	eachBackend(t, Options{Keys: twoTenants(t)}, func(t *testing.T, env itemEnv) {
		s := env.srv
		wantError(t, s, req{method: "GET", path: "/v1/items"}, http.StatusUnauthorized, "unauthorized")
		wantError(t, s, req{method: "POST", path: "/v1/sessions"}, http.StatusUnauthorized, "unauthorized")

		a := createItem(t, s, keyA, "", "Tenant a's secret work")
		aWeb := createItem(t, s, keyA, "web", "Tenant a's web work")
		// The same text in b is a new item, not a duplicate of a's.
		b := createItem(t, s, keyB, "", "Tenant a's secret work")
		if b.ID == a.ID {
			t.Errorf("b's item has a's id %s", a.ID)
		}
		if got := allItems(t, s, keyA, ""); len(got) != 1 || got[0].ID != a.ID {
			t.Errorf("a lists %+v", got)
		}
		if got := allItems(t, s, keyA, "web"); len(got) != 1 || got[0].ID != aWeb.ID {
			t.Errorf("a lists in web %+v", got)
		}
		if got := allItems(t, s, keyB, ""); len(got) != 1 || got[0].ID != b.ID {
			t.Errorf("b lists %+v", got)
		}
		if got := allItems(t, s, keyB, "web"); len(got) != 0 {
			t.Errorf("b lists in web %+v", got)
		}
		wantError(t, s, req{method: "GET", path: "/v1/items/" + a.ID, key: keyB}, http.StatusNotFound, "not_found")
		wantError(t, s, req{method: "GET", path: "/v1/items/" + aWeb.ID, key: keyA}, http.StatusNotFound, "not_found")
		must(t, s, req{method: "GET", path: "/v1/items/" + aWeb.ID + "?project=web", key: keyA}, http.StatusOK, nil)
		w := must(t, s, req{method: "POST", path: "/v1/items?project=web", key: keyA, body: map[string]any{"text": "Another"}}, http.StatusCreated, nil)
		if loc := w.Header().Get("Location"); !strings.HasSuffix(loc, "?project=web") {
			t.Errorf("Location %q", loc)
		} else {
			must(t, s, req{method: "GET", path: loc, key: keyA}, http.StatusOK, nil)
		}
		wantError(t, s, req{method: "POST", path: "/v1/items/resolve", key: keyB, body: map[string]any{"thread_id": aWeb.ID}}, http.StatusNotFound, "not_found")
		wantError(t, s, req{method: "POST", path: "/v1/items/resolve?project=web", key: keyB, body: map[string]any{"text_match": "web work"}},
			http.StatusNotFound, "not_found")
		if got := allItems(t, s, keyA, "web"); got[0].ID != aWeb.ID || got[0].Status != worklog.StatusOpen {
			t.Errorf("b resolved a's item: %+v", got[0])
		}

		// a closes a session, with the same id as b's: b carries nothing.
		var start worklog.StartResult
		must(t, s, req{method: "POST", path: "/v1/sessions", key: keyA, body: map[string]any{"session_id": "shared-id"}}, http.StatusCreated, &start)
		must(t, s, req{method: "POST", path: "/v1/sessions/shared-id/close", key: keyA, body: map[string]any{"open_threads": []any{"a carries this"}}},
			http.StatusOK, nil)
		must(t, s, req{method: "POST", path: "/v1/sessions", key: keyB, body: map[string]any{"session_id": "shared-id"}}, http.StatusCreated, &start)
		if start.SessionsAggregated != 0 || slices.Contains(itemTexts(start.OpenThreads), "a carries this") {
			t.Errorf("b's start: %+v", start)
		}
		// Closing b's session does not replace a's.
		must(t, s, req{method: "POST", path: "/v1/sessions/shared-id/close", key: keyB}, http.StatusOK, nil)
		must(t, s, req{method: "POST", path: "/v1/sessions", key: keyA}, http.StatusCreated, &start)
		if start.SessionsAggregated != 1 || !slices.Contains(itemTexts(start.OpenThreads), "a carries this") ||
			slices.Contains(itemTexts(start.OpenThreads), "Tenant a's web work") {
			t.Errorf("a's start: %d aggregated, open %q", start.SessionsAggregated, itemTexts(start.OpenThreads))
		}
		if got := closedSessions(t, env.sessions); len(got) != 0 {
			t.Errorf("the tenant \"\" sees sessions %+v", got)
		}
	})
}

// TestItemsConcurrentCreate creates items from 8 goroutines over HTTP: none
// is lost.
func TestItemsConcurrentCreate(t *testing.T) {
	const writers, each = 8, 25
	eachBackend(t, Options{}, func(t *testing.T, env itemEnv) {
		hs := httptest.NewServer(env.srv)
		defer hs.Close()
		var wg sync.WaitGroup
		for g := range writers {
			wg.Go(func() {
				for i := range each {
					body, _ := json.Marshal(map[string]any{"text": fmt.Sprintf("writer %d item %d", g, i)})
					resp, err := hs.Client().Post(hs.URL+"/v1/items", "application/json", bytes.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					data, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						t.Errorf("writer %d item %d: %d %s", g, i, resp.StatusCode, data)
						return
					}
				}
			})
		}
		wg.Wait()
		var list worklog.ListResult
		must(t, env.srv, req{method: "GET", path: "/v1/items"}, http.StatusOK, &list)
		got := map[string]bool{}
		ids := map[string]bool{}
		for _, it := range list.Threads {
			got[it.Text] = true
			ids[it.ID] = true
		}
		if len(list.Threads) != writers*each || len(got) != writers*each || len(ids) != writers*each || list.TotalOpen != writers*each {
			t.Errorf("%d items (%d texts, %d ids, total_open %d), want %d", len(list.Threads), len(got), len(ids), list.TotalOpen, writers*each)
		}
	})
}

// TestOpenAPIItemSchemas checks that the schemas of the work-item bodies
// have exactly the JSON members of the Go types that read and write them,
// as TestOpenAPISchemasMatchTypes does for the others.
func TestOpenAPIItemSchemas(t *testing.T) {
	schemas := loadOpenAPI(t)["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range map[string]any{
		"CreateItemRequest":   itemCreateRequest{},
		"ResolveItemRequest":  itemResolveRequest{},
		"StartSessionRequest": sessionStartRequest{},
		"CloseSessionRequest": sessionCloseRequest{},
		"ItemResult":          itemResponse{},
		"Item":                worklog.Item{},
		"ListResult":          worklog.ListResult{},
		"CreateResult":        worklog.CreateResult{},
		"ResolveResult":       worklog.ResolveResult{},
		"StartResult":         worklog.StartResult{},
		"CloseResult":         worklog.CloseResult{},
		"Performance":         worklog.Performance{},
	} {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		props, _ := s["properties"].(map[string]any)
		var want, required []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			want = append(want, tag)
			if !strings.Contains(opts, "omitzero") && !strings.HasSuffix(name, "Request") {
				required = append(required, tag)
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, slices.Sorted(maps.Keys(props))); diff != "" {
			t.Errorf("schema %s: Go members (-) and schema properties (+) differ:\n%s", name, diff)
		}
		// Members always written are required.
		var got []string
		rs, _ := s["required"].([]any)
		for _, r := range rs {
			got = append(got, r.(string))
		}
		slices.Sort(required)
		slices.Sort(got)
		if required != nil && !slices.Equal(required, got) {
			t.Errorf("schema %s: required %q, want %q", name, got, required)
		}
		if s["additionalProperties"] != false {
			t.Errorf("schema %s allows unknown members", name)
		}
	}
	detail := schemas["ErrorDetail"].(map[string]any)["properties"].(map[string]any)
	if !slices.Contains(detail["code"].(map[string]any)["enum"].([]any), any("ambiguous")) {
		t.Errorf("code ambiguous not documented")
	}
}

// keyDefault is a bare key: the tenant "".
const keyDefault = "key-for-the-default-tenant-0123"

// On a server whose keys include one of the tenant "", that tenant's
// work items are as apart from tenant a's as b's are: it cannot read a's
// sessions through a project named "a/…", nor put items into a's next
// session_start through a session id "a:…" (forms a shared session table
// once used): such names are its own.
func TestItemsOfTheDefaultTenantApart(t *testing.T) {
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
func TestItemWithProjectStateGetsByLocation(t *testing.T) {
	eachBackend(t, Options{}, func(t *testing.T, env itemEnv) {
		w := must(t, env.srv, req{method: "POST", path: "/v1/items", body: map[string]any{"text": "PROJECT STATE: loom: green"}}, http.StatusCreated, nil)
		var got itemResponse
		must(t, env.srv, req{method: "GET", path: w.Header().Get("Location")}, http.StatusOK, &got)
		if got.Thread.Text != "PROJECT STATE: loom: green" {
			t.Errorf("got %+v", got.Thread)
		}
	})
}
