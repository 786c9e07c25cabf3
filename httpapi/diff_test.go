package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// diffLine writes a diff's entries as -text, +text, =text or ~old>new.
func diffLine(d thread.Diff) string {
	parts := []string{fmt.Sprintf("shared=%d", d.Shared)}
	for _, e := range d.Entries {
		switch e.Change {
		case thread.DiffRemoved:
			parts = append(parts, "-"+e.From.Text())
		case thread.DiffAdded:
			parts = append(parts, "+"+e.To.Text())
		case thread.DiffSame:
			parts = append(parts, "="+e.From.Text())
		case thread.DiffChanged:
			parts = append(parts, "~"+e.From.Text()+">"+e.To.Text())
		}
	}
	for _, s := range d.State {
		parts = append(parts, fmt.Sprintf("%s:%s:%s>%s", s.Key, s.Change, s.From, s.To))
	}
	if d.Truncated {
		parts = append(parts, "…")
	}
	return strings.Join(parts, " ")
}

func appendText(tb testing.TB, h http.Handler, key, id string, texts ...string) {
	tb.Helper()
	var msgs []any
	for _, t := range texts {
		msgs = append(msgs, textMsg("user", t))
	}
	must(tb, h, req{method: "POST", path: "/v1/threads/" + id + "/messages", key: key, body: map[string]any{"messages": msgs}}, http.StatusCreated, nil)
}

func TestDiffForkAndVersions(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "a", "hello", "hi")
	must(t, s, req{method: "POST", path: "/v1/threads/a/fork", body: map[string]any{"id": "f"}}, http.StatusCreated, nil)
	appendText(t, s, "", "a", "rome")
	appendText(t, s, "", "f", "lisbon", "porto")

	for _, c := range []struct {
		name, path string
		want       string
		from, to   thread.DiffSide
	}{
		{"a fork", "/v1/threads/a/diff?to=f", "shared=2 -rome +lisbon +porto",
			thread.DiffSide{Thread: "a", Version: 2, Messages: 3}, thread.DiffSide{Thread: "f", Version: 2, Messages: 4}},
		{"the fork back", "/v1/threads/f/diff?to=a", "shared=2 -lisbon -porto +rome",
			thread.DiffSide{Thread: "f", Version: 2, Messages: 4}, thread.DiffSide{Thread: "a", Version: 2, Messages: 3}},
		{"two versions", "/v1/threads/a/diff?version=1", "shared=2 +rome",
			thread.DiffSide{Thread: "a", Version: 1, Messages: 2}, thread.DiffSide{Thread: "a", Version: 2, Messages: 3}},
		{"two versions, to older", "/v1/threads/a/diff?to_version=1", "shared=2 -rome",
			thread.DiffSide{Thread: "a", Version: 2, Messages: 3}, thread.DiffSide{Thread: "a", Version: 1, Messages: 2}},
		{"a version of a fork", "/v1/threads/a/diff?to=f&to_version=1&version=2", "shared=2 -rome",
			thread.DiffSide{Thread: "a", Version: 2, Messages: 3}, thread.DiffSide{Thread: "f", Version: 1, Messages: 2}},
		{"version 0 is the head", "/v1/threads/a/diff?version=0&to=a&to_version=0", "shared=3",
			thread.DiffSide{Thread: "a", Version: 2, Messages: 3}, thread.DiffSide{Thread: "a", Version: 2, Messages: 3}},
		{"cut at the limit", "/v1/threads/a/diff?to=f&limit=2", "shared=2 -rome +lisbon …",
			thread.DiffSide{Thread: "a", Version: 2, Messages: 3}, thread.DiffSide{Thread: "f", Version: 2, Messages: 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d thread.Diff
			must(t, s, req{method: "GET", path: c.path}, http.StatusOK, &d)
			if got := diffLine(d); got != c.want {
				t.Errorf("diff = %s, want %s", got, c.want)
			}
			if d.From != c.from || d.To != c.to {
				t.Errorf("sides %+v %+v, want %+v %+v", d.From, d.To, c.from, c.to)
			}
		})
	}
}

// TestDiffJSON checks the answer's shape member by member: what the page
// and the clients read.
func TestDiffJSON(t *testing.T) {
	s := newServer(t, Options{})
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{
		"id": "a", "messages": []any{textMsg("user", "hi")}, "state": map[string]any{"gone": 1, "n": 1, "same": true},
	}}, http.StatusCreated, nil)
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{
		"id": "b", "messages": []any{textMsg("user", "hello")}, "state": map[string]any{"n": 2, "new": "x", "same": true},
	}}, http.StatusCreated, nil)
	var got map[string]any
	must(t, s, req{method: "GET", path: "/v1/threads/a/diff?to=b"}, http.StatusOK, &got)
	if k := slices.Sorted(maps.Keys(got)); !slices.Equal(k, []string{"entries", "from", "shared", "state", "to", "truncated"}) {
		t.Errorf("members %v", k)
	}
	if diff := cmp.Diff(map[string]any{"thread": "a", "version": 1.0, "messages": 1.0}, got["from"]); diff != "" {
		t.Errorf("from (-want +got):\n%s", diff)
	}
	entries := got["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("entries %v", entries)
	}
	removed, added := entries[0].(map[string]any), entries[1].(map[string]any)
	if removed["change"] != "removed" || removed["to"] != nil || removed["from"].(map[string]any)["role"] != "user" {
		t.Errorf("removed entry %v", removed)
	}
	if _, ok := removed["to"]; ok {
		t.Errorf("removed entry has a to: %v", removed)
	}
	if _, ok := added["from"]; ok || added["change"] != "added" || added["to"].(map[string]any)["id"] == "" {
		t.Errorf("added entry %v", added)
	}
	want := []any{
		map[string]any{"key": "gone", "change": "removed", "from": 1.0},
		map[string]any{"key": "n", "change": "changed", "from": 1.0, "to": 2.0},
		map[string]any{"key": "new", "change": "added", "to": "x"},
	}
	if diff := cmp.Diff(want, got["state"]); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if got["shared"] != 0.0 || got["truncated"] != false {
		t.Errorf("shared %v, truncated %v", got["shared"], got["truncated"])
	}
	// Answers with every kind of entry and state change, and with none,
	// are what openapi.json says.
	withID := func(id, text string) map[string]any { m := textMsg("user", text); m["id"] = id; return m }
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{
		"id": "c", "messages": []any{withID("m1", "x"), withID("m2", "y"), withID("m3", "z")},
	}}, http.StatusCreated, nil)
	must(t, s, req{method: "POST", path: "/v1/threads", body: map[string]any{
		"id": "d", "messages": []any{withID("m0", "w"), withID("m2", "Y"), withID("m3", "z")},
	}}, http.StatusCreated, nil)
	var cd thread.Diff
	must(t, s, req{method: "GET", path: "/v1/threads/c/diff?to=d"}, http.StatusOK, &cd)
	if got := diffLine(cd); got != "shared=0 -x +w ~y>Y =z" {
		t.Errorf("c to d: %s", got)
	}
	c := newContract(t)
	for _, path := range []string{"/v1/threads/a/diff?to=b", "/v1/threads/c/diff?to=d", "/v1/threads/a/diff", "/v1/threads/b/diff?version=1&limit=1"} {
		w := must(t, s, req{method: "GET", path: path}, http.StatusOK, nil)
		if err := c.check("/v1/threads/{id}/diff", "GET", w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
	}
	w := do(t, s, req{method: "GET", path: "/v1/threads/a/diff?to=nope"})
	if err := c.check("/v1/threads/{id}/diff", "GET", w.Code, w.Header(), w.Body.Bytes()); err != nil || w.Code != http.StatusNotFound {
		t.Errorf("GET a missing to: %d, %v", w.Code, err)
	}
	// Nothing differs: empty lists, not null.
	var same map[string]any
	must(t, s, req{method: "GET", path: "/v1/threads/a/diff"}, http.StatusOK, &same)
	if e, st := same["entries"], same["state"]; !reflect.DeepEqual(e, []any{}) || !reflect.DeepEqual(st, []any{}) || same["shared"] != 1.0 {
		t.Errorf("a head with itself: %v", same)
	}
}

func TestDiffErrors(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "a", "hello", "hi")
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/threads/nope/diff", http.StatusNotFound, "not_found"},
		{"/v1/threads/a/diff?to=nope", http.StatusNotFound, "not_found"},
		{"/v1/threads/a/diff?version=2", http.StatusNotFound, "not_found"},
		{"/v1/threads/a/diff?to_version=9", http.StatusNotFound, "not_found"},
		{"/v1/threads/a/diff?version=-1", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?version=one", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?to_version=1.5", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?to=..%2Fetc", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?to=a%20b", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?limit=0", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?limit=10001", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?limit=x", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?from=a", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a/diff?version=1&version=1", http.StatusBadRequest, "invalid"},
		{"/v1/threads/a%20b/diff", http.StatusBadRequest, "invalid"},
	} {
		wantError(t, s, req{method: "GET", path: c.path}, c.status, c.code)
	}
	for _, m := range []string{"POST", "DELETE"} {
		wantError(t, s, req{method: m, path: "/v1/threads/a/diff"}, http.StatusMethodNotAllowed, "method_not_allowed")
	}
	// The largest limit is taken.
	must(t, s, req{method: "GET", path: "/v1/threads/a/diff?limit=10000&version=1"}, http.StatusOK, nil)
}

// TestDiffTenants: a tenant cannot diff with, nor learn of, another
// tenant's thread, even one of the same id as its own.
func TestDiffTenants(t *testing.T) {
	s := newServer(t, Options{Keys: twoTenants(t)})
	createThread(t, s, keyA, "a", "mine")
	createThread(t, s, keyB, "b", "theirs")
	createThread(t, s, keyB, "same", "b's")
	createThread(t, s, keyA, "same", "a's")
	wantError(t, s, req{method: "GET", path: "/v1/threads/a/diff?to=b", key: keyA}, http.StatusNotFound, "not_found")
	wantError(t, s, req{method: "GET", path: "/v1/threads/b/diff?to=a", key: keyA}, http.StatusNotFound, "not_found")
	wantError(t, s, req{method: "GET", path: "/v1/threads/b/diff", key: keyA}, http.StatusNotFound, "not_found")
	wantError(t, s, req{method: "GET", path: "/v1/threads/a/diff"}, http.StatusUnauthorized, "unauthorized")
	var d thread.Diff
	must(t, s, req{method: "GET", path: "/v1/threads/a/diff?to=same", key: keyA}, http.StatusOK, &d)
	if got := diffLine(d); got != "shared=0 -mine +a's" {
		t.Errorf("a's diff with its own thread same = %s", got)
	}
	must(t, s, req{method: "GET", path: "/v1/threads/b/diff?to=same", key: keyB}, http.StatusOK, &d)
	if got := diffLine(d); got != "shared=0 -theirs +b's" {
		t.Errorf("b's diff with its own thread same = %s", got)
	}
}

// TestOpenAPIDiffSchemas: the diff's schemas have exactly the JSON
// members of the thread types the route answers with.
func TestOpenAPIDiffSchemas(t *testing.T) {
	schemas := loadOpenAPI(t)["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range map[string]any{
		"Diff":            thread.Diff{},
		"DiffSide":        thread.DiffSide{},
		"DiffEntry":       thread.DiffEntry{},
		"DiffStateChange": thread.StateChange{},
	} {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		props, _ := s["properties"].(map[string]any)
		var want []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			if tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
				want = append(want, tag)
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, slices.Sorted(maps.Keys(props))); diff != "" {
			t.Errorf("schema %s: Go members (-) and schema properties (+) differ:\n%s", name, diff)
		}
	}
	// The changes the schemas list are the ones package thread makes.
	entry := schemas["DiffEntry"].(map[string]any)["properties"].(map[string]any)["change"].(map[string]any)["enum"]
	want := []any{string(thread.DiffSame), string(thread.DiffAdded), string(thread.DiffRemoved), string(thread.DiffChanged)}
	if diff := cmp.Diff(want, entry); diff != "" {
		t.Errorf("DiffEntry.change (-want +got):\n%s", diff)
	}
}

// BenchmarkDiffSQLite answers GET /v1/threads/{id}/diff on SQLite for a
// 10,000-message thread (a commit a message): against its fork, both 10
// messages on; against itself 10 versions back; and, for the case that
// reads everything, against a copy loaded from its document (no commit
// shared, every message compared) 10 messages on.
func BenchmarkDiffSQLite(b *testing.B) {
	ctx := b.Context()
	db, err := thread.Open(ctx, "sqlite://"+b.TempDir()+"/bench.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	th, err := db.Create(ctx, thread.CreateOptions{ID: "big"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10_000 {
		if _, err := th.Append(ctx, message.User(fmt.Sprintf("message %d of a long thread", i))); err != nil {
			b.Fatal(err)
		}
	}
	var doc bytes.Buffer
	if err := th.Save(ctx, &doc, thread.SaveOptions{}); err != nil {
		b.Fatal(err)
	}
	cp, err := db.Load(ctx, &doc, thread.LoadOptions{ID: "copy"})
	if err != nil {
		b.Fatal(err)
	}
	f, err := th.Fork(ctx, thread.ForkOptions{ID: "fork"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		for _, t := range []*thread.Thread{th, f, cp} {
			if _, err := t.Append(ctx, message.User(fmt.Sprint("more ", i))); err != nil {
				b.Fatal(err)
			}
		}
	}
	s := newServer(b, Options{DB: db})
	for _, c := range []struct{ name, path string }{
		{"fork", "/v1/threads/big/diff?to=fork"},
		{"versions", "/v1/threads/big/diff?version=10001"},
		{"copy-no-shared-commit", "/v1/threads/big/diff?to=copy"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest("GET", c.path, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
				}
			}
		})
	}
}

// FuzzDiffQuery sends random queries to the diff route: each answer is a
// 2xx whose counts hold together, or a typed error, never a 500.
func FuzzDiffQuery(f *testing.F) {
	for _, seed := range []string{
		"", "to=fork", "version=1", "to_version=2&to=fork", "limit=1", "limit=0", "limit=10001",
		"version=-1", "version=99", "to=..%2Fx", "to=", "to=th&to_version=1&version=2&limit=3",
		"version=1&version=2", "colour=blue", "limit=99999999999999999999", "to=%ff",
	} {
		f.Add(seed)
	}
	s, db := fuzzServer(f, Options{})
	th, err := db.Thread(f.Context(), "th")
	if err != nil {
		f.Fatal(err)
	}
	fork, err := th.Fork(f.Context(), thread.ForkOptions{ID: "fork", At: "m2"})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := fork.Append(f.Context(), message.User("other")); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest("GET", "/v1/threads/th/diff", nil)
		r.URL.RawQuery = query
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		checkAnswer(t, w, query)
		if w.Code != http.StatusOK {
			return
		}
		var d thread.Diff
		if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
			t.Fatalf("%q: %v", query, err)
		}
		if d.Shared > min(d.From.Messages, d.To.Messages) || len(d.Entries) > thread.MaxDiffLimit {
			t.Fatalf("%q: %+v", query, d)
		}
	})
}
