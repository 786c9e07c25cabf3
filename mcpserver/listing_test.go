package mcpserver

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// withWorkItems serves db's thread tools and the work-item tools of a Log
// kept in db, as loom serve does, over pipes.
func withWorkItems(t *testing.T, db *thread.DB) *mcp.ClientSession {
	t.Helper()
	log, err := worklog.OpenDB(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return connectPipes(t, t.Context(), db, &Options{AddTools: func(s *mcp.Server) { AddWorklogTools(s, log, nil) }})
}

// The thread tools and the work-item tools on one server (create_thread
// and thread_create, list_threads and thread_list) are told apart by
// their titles and the family each description begins with.
func TestToolFamiliesAtAGlance(t *testing.T) {
	cs := withWorkItems(t, newDB(t))
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	workItems := []string{"list_threads", "create_thread", "resolve_thread", "session_start", "session_close"}
	titles := map[string]string{}
	for _, tool := range res.Tools {
		var family string
		switch {
		case strings.HasPrefix(tool.Name, "thread_"):
			family = "Threads: "
		case strings.HasPrefix(tool.Name, "workflow_"):
			family = "Workflows: "
		case slices.Contains(workItems, tool.Name):
			family = "Work items: "
		default:
			t.Errorf("tool %s of no known family", tool.Name)
			continue
		}
		if !strings.HasPrefix(tool.Title, family) || !strings.HasPrefix(tool.Description, family) {
			t.Errorf("%s: title %q, description %q; want both to begin %q", tool.Name, tool.Title, tool.Description, family)
		}
		if other, dup := titles[tool.Title]; dup {
			t.Errorf("%s and %s share the title %q", other, tool.Name, tool.Title)
		}
		titles[tool.Title] = tool.Name
	}
	if len(titles) != 21 {
		t.Errorf("%d tools, want 21: %v", len(titles), titles)
	}
}

// thread_list leaves loom's own threads out unless internal asks for
// them, and pages most recently updated first with order updated.
func TestThreadListInternalAndOrder(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Now: clock})
	cs := withWorkItems(t, db)
	for _, id := range []string{"b", "a", "c"} {
		ok[threadInfo](t, cs, "thread_create", map[string]any{"id": id})
	}
	// A work item: the work log's thread is made in db.
	ok[worklog.CreateResult](t, cs, "create_thread", map[string]any{"text": "Release notes"})
	ids := func(args map[string]any) []string {
		t.Helper()
		var out []string
		for range 10 {
			page := ok[listOut](t, cs, "thread_list", args)
			for _, ti := range page.Threads {
				out = append(out, ti.ID)
			}
			if page.NextCursor == "" {
				return out
			}
			args["cursor"] = page.NextCursor
		}
		t.Fatalf("thread_list %v did not end", args)
		return nil
	}
	if got := ids(map[string]any{}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("thread_list: %v", got)
	}
	own := ids(map[string]any{"internal": "only"})
	if len(own) != 1 || !strings.HasPrefix(own[0], "wl_") {
		t.Fatalf("internal only: %v", own)
	}
	if got := ids(map[string]any{"internal": "include", "limit": 1}); !slices.Equal(got, append([]string{"a", "b", "c"}, own...)) {
		t.Errorf("internal include: %v", got)
	}
	if got := ids(map[string]any{"order": "updated", "limit": 1}); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Errorf("order updated: %v", got)
	}
	ok[threadInfo](t, cs, "thread_append", map[string]any{"id": "b", "messages": []any{map[string]any{"role": "user", "text": "hi"}}})
	if got := ids(map[string]any{"order": "updated", "limit": 2, "internal": "include"}); !slices.Equal(got, append([]string{"b"}, append(own, "c", "a")...)) {
		t.Errorf("order updated after writing to b: %v", got)
	}
	for _, args := range []map[string]any{
		{"internal": "yes"},
		{"order": "oldest"},
		{"order": "updated", "cursor": "b"},
		{"order": "updated", "cursor": "x:b"},
	} {
		if msg := fails(t, cs, "thread_list", args); !strings.HasPrefix(msg, "invalid: ") {
			t.Errorf("thread_list %v: %q, want invalid", args, msg)
		}
	}
}
