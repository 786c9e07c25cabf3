package httpapi

import (
	"net/http"
	"testing"

	"github.com/loomthreads/loom/thread"
)

// TestSearchHitVersion: a hit whose message the head holds has no
// version; one whose message only a rolled-back version held names the
// newest version that held it, where reading the thread shows it.
func TestSearchHitVersion(t *testing.T) {
	for _, store := range []struct {
		name string
		db   func(testing.TB) *thread.DB
	}{
		{"memory", func(testing.TB) *thread.DB { return thread.New(thread.NewMemoryStore(), nil) }},
		{"sqlite", func(tb testing.TB) *thread.DB {
			db, err := thread.Open(tb.Context(), "sqlite://"+tb.TempDir()+"/x.db", nil)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { db.Close() })
			return db
		}},
	} {
		t.Run(store.name, func(t *testing.T) {
			s := newServer(t, Options{DB: store.db(t)})
			createThread(t, s, "", "th", "kept aardvark") // v1
			must(t, s, req{method: "POST", path: "/v1/threads/th/checkpoints", body: `{"name":"before"}`}, http.StatusCreated, nil)
			appendText := func(text string) {
				t.Helper()
				must(t, s, req{method: "POST", path: "/v1/threads/th/messages", body: map[string]any{"messages": []any{textMsg("user", text)}}}, http.StatusCreated, nil)
			}
			appendText("lost zebra")                                                                                              // v2
			appendText("lost walrus")                                                                                             // v3
			must(t, s, req{method: "POST", path: "/v1/threads/th/rollback", body: `{"checkpoint":"before"}`}, http.StatusOK, nil) // v4
			appendText("new aardvark")                                                                                            // v5

			search := func(q string) []searchHitJSON {
				t.Helper()
				var res searchResponse
				must(t, s, req{method: "GET", path: "/v1/search?q=" + q}, http.StatusOK, &res)
				return res.Hits
			}
			for q, want := range map[string]int64{"zebra": 3, "walrus": 3} {
				hits := search(q)
				if len(hits) != 1 || hits[0].Version != want {
					t.Fatalf("%s: %+v, want one hit at version %d", q, hits, want)
				}
				// At that version the thread holds the message.
				var p messagePage
				must(t, s, req{method: "GET", path: "/v1/threads/th/messages?limit=0&version=3"}, http.StatusOK, &p)
				if texts(p.Messages)[len(p.Messages)-1] != "lost walrus" || texts(p.Messages)[1] != "lost zebra" {
					t.Errorf("version 3: %v", texts(p.Messages))
				}
			}
			// Both aardvarks are in the head: no version.
			hits := search("aardvark")
			if len(hits) != 2 || hits[0].Version != 0 || hits[1].Version != 0 {
				t.Fatalf("aardvark: %+v, want two hits without a version", hits)
			}
			// Restored, the head holds the zebra again; reset, nothing does,
			// and the zebra is at the version before the reset.
			must(t, s, req{method: "POST", path: "/v1/threads/th/rollback", body: `{"version":3}`}, http.StatusOK, nil) // v6
			if hits := search("zebra"); len(hits) != 1 || hits[0].Version != 0 {
				t.Fatalf("zebra restored: %+v, want no version", hits)
			}
			must(t, s, req{method: "POST", path: "/v1/threads/th/reset"}, http.StatusOK, nil) // v7
			if hits := search("zebra"); len(hits) != 1 || hits[0].Version != 6 {
				t.Fatalf("zebra after a reset: %+v, want version 6", hits)
			}
		})
	}
}
