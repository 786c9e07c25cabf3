package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

// connect serves s over in-memory transports and returns a client session.
func wlConnect(tb testing.TB, s *mcp.Server) *mcp.ClientSession {
	tb.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// newServer returns an empty server for AddTools or AddToolsFrom.
func wlNewServer() *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "test", Version: "0"}, nil)
}

// call calls a tool that must succeed and decodes its structured content.
func wlCall[Out any](tb testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) Out {
	tb.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		tb.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		tb.Fatalf("%s %v: tool error %s", tool, args, wlText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		tb.Fatal(err)
	}
	var out Out
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatalf("%s: %v in %s", tool, err, b)
	}
	return out
}

// callErr calls a tool that must fail and returns the error's text.
func wlCallErr(tb testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) string {
	tb.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		tb.Fatalf("%s: %v", tool, err)
	}
	if !res.IsError {
		tb.Fatalf("%s %v: succeeded, want a tool error", tool, args)
	}
	return wlText(res)
}

func wlText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func wlTexts(items []worklog.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Text)
	}
	slices.Sort(out)
	return out
}

// TestLocalProjectAndSession checks the optional project and session_id of
// create_thread and resolve_thread in the local mode: the Log's project
// only, and a named session recorded.
func TestLocalProjectAndSession(t *testing.T) {
	log, err := worklog.Open(filepath.Join(t.TempDir(), ".gitmem"), &worklog.Options{Project: "loom", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s := wlNewServer()
	AddWorklogTools(s, log, nil)
	cs := wlConnect(t, s)

	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"create_thread", map[string]any{"text": "x", "project": "other"}},
		{"resolve_thread", map[string]any{"text_match": "x", "project": "other"}},
		{"session_start", map[string]any{"project": "other"}},
		{"session_close", map[string]any{"project": "other"}},
		{"create_thread", map[string]any{"text": "x", "session_id": "not a session id"}},
	} {
		if msg := wlCallErr(t, cs, tc.tool, tc.args); !strings.HasPrefix(msg, "invalid: ") {
			t.Errorf("%s %v: %q, want invalid", tc.tool, tc.args, msg)
		}
	}
	if got, _ := log.List(t.Context(), worklog.ListOptions{IncludeResolved: true}); len(got.Threads) != 0 {
		t.Fatalf("refused calls changed the log: %+v", got.Threads)
	}

	st := wlCall[worklog.StartResult](t, cs, "session_start", map[string]any{"project": "loom"})
	a := wlCall[worklog.CreateResult](t, cs, "create_thread", map[string]any{"text": "Release notes", "project": "loom"})
	b := wlCall[worklog.CreateResult](t, cs, "create_thread", map[string]any{"text": "Flaky test", "session_id": "s-named"})
	if a.Thread.SourceSession != st.SessionID || b.Thread.SourceSession != "s-named" {
		t.Fatalf("source sessions %q and %q, want %q and s-named", a.Thread.SourceSession, b.Thread.SourceSession, st.SessionID)
	}
	r := wlCall[worklog.ResolveResult](t, cs, "resolve_thread", map[string]any{"thread_id": b.Thread.ID, "session_id": "s-other"})
	if r.ResolvedThread.ResolvedBySession != "s-other" {
		t.Fatalf("resolved by %q, want s-other", r.ResolvedThread.ResolvedBySession)
	}
	// list_threads' project still lists another project's sessions here.
	if l := wlCall[worklog.ListResult](t, cs, "list_threads", map[string]any{"project": "other"}); len(l.Threads) != 0 {
		t.Fatalf("another project's items: %+v", l.Threads)
	}
	if l := wlCall[worklog.ListResult](t, cs, "list_threads", nil); !slices.Equal(wlTexts(l.Threads), []string{"Release notes"}) {
		t.Fatalf("list_threads: %+v", l.Threads)
	}
	// session_close without an id closes the current session.
	if c := wlCall[worklog.CloseResult](t, cs, "session_close", nil); c.SessionID != st.SessionID {
		t.Fatalf("session_close closed %q, want %q", c.SessionID, st.SessionID)
	}
}

// logsSource returns a Source of ls for the tenant that tenantKey puts in
// the context.
type tenantKey struct{}

func wlLogsSource(ls *worklog.Logs) WorklogSource {
	return func(ctx context.Context, project string) (*worklog.Log, error) {
		tenant, _ := ctx.Value(tenantKey{}).(string)
		return ls.Log(tenant, project)
	}
}

// fixedTenant makes a Source see one tenant whatever the context, as a
// server's authentication would.
func wlFixedTenant(src WorklogSource, tenant string) WorklogSource {
	return func(ctx context.Context, project string) (*worklog.Log, error) {
		return src(context.WithValue(ctx, tenantKey{}, tenant), project)
	}
}

func wlNewLogs(tb testing.TB) *worklog.Logs {
	tb.Helper()
	db, err := thread.Open(context.Background(), "memory://", nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return worklog.NewLogs(db, nil)
}

func TestServerMode(t *testing.T) {
	logs := wlNewLogs(t)
	src := wlLogsSource(logs)
	s := wlNewServer()
	AddWorklogToolsFrom(s, wlFixedTenant(src, "acme"), nil)
	cs := wlConnect(t, s)

	st := wlCall[worklog.StartResult](t, cs, "session_start", map[string]any{"project": "loom"})
	if st.Project != "loom" || st.SessionID == "" || len(st.OpenThreads) != 0 {
		t.Fatalf("session_start: %+v", st)
	}
	a := wlCall[worklog.CreateResult](t, cs, "create_thread", map[string]any{"text": "Release notes", "project": "loom", "session_id": st.SessionID})
	b := wlCall[worklog.CreateResult](t, cs, "create_thread", map[string]any{"text": "Flaky test", "project": "loom"})
	// A shared Log has no current session: only a named one is recorded.
	if a.Thread.SourceSession != st.SessionID || b.Thread.SourceSession != "" {
		t.Fatalf("source sessions %q and %q, want %q and none", a.Thread.SourceSession, b.Thread.SourceSession, st.SessionID)
	}
	wlCall[worklog.CreateResult](t, cs, "create_thread", map[string]any{"text": "In the default project"})

	r := wlCall[worklog.ResolveResult](t, cs, "resolve_thread", map[string]any{"text_match": "flaky", "project": "loom", "session_id": st.SessionID, "resolution_note": "fixed"})
	if r.ResolvedThread.ID != b.Thread.ID || r.ResolvedThread.ResolvedBySession != st.SessionID {
		t.Fatalf("resolve_thread: %+v", r.ResolvedThread)
	}
	// The item is the project's: not found in the default project.
	if msg := wlCallErr(t, cs, "resolve_thread", map[string]any{"thread_id": a.Thread.ID}); !strings.HasPrefix(msg, "not_found: ") {
		t.Fatalf("resolve in the default project: %q", msg)
	}

	// list_threads' project selects the Log.
	if l := wlCall[worklog.ListResult](t, cs, "list_threads", map[string]any{"project": "loom"}); !slices.Equal(wlTexts(l.Threads), []string{"Release notes"}) || l.TotalResolved != 1 {
		t.Fatalf("list_threads loom: %+v", l)
	}
	if l := wlCall[worklog.ListResult](t, cs, "list_threads", nil); !slices.Equal(wlTexts(l.Threads), []string{"In the default project"}) {
		t.Fatalf("list_threads: %+v", l)
	}
	// They are the Log's items, as the HTTP API would list them.
	log, err := logs.Log("acme", "loom")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := log.List(t.Context(), worklog.ListOptions{IncludeResolved: true}); err != nil || !slices.Equal(wlTexts(l.Threads), []string{"Flaky test", "Release notes"}) {
		t.Fatalf("the Log lists %+v, %v", l, err)
	}

	if msg := wlCallErr(t, cs, "session_close", map[string]any{"project": "loom"}); !strings.HasPrefix(msg, "invalid: session_id is required") {
		t.Fatalf("session_close without an id: %q", msg)
	}
	c := wlCall[worklog.CloseResult](t, cs, "session_close", map[string]any{"project": "loom", "session_id": st.SessionID, "open_threads": []any{"Write the guide"}})
	if c.SessionID != st.SessionID || !slices.Equal(wlTexts(c.OpenThreads), []string{"Release notes", "Write the guide"}) {
		t.Fatalf("session_close: %+v", c)
	}
	next := wlCall[worklog.StartResult](t, cs, "session_start", map[string]any{"project": "loom"})
	if next.SessionsAggregated != 1 || !slices.Equal(wlTexts(next.OpenThreads), []string{"Release notes", "Write the guide"}) {
		t.Fatalf("next session_start: %+v", next)
	}

	// Another tenant, through the same Logs, sees none of it.
	s2 := wlNewServer()
	AddWorklogToolsFrom(s2, wlFixedTenant(src, "other"), nil)
	other := wlConnect(t, s2)
	if l := wlCall[worklog.ListResult](t, other, "list_threads", map[string]any{"project": "loom", "include_resolved": true}); len(l.Threads) != 0 {
		t.Fatalf("another tenant lists %+v", l.Threads)
	}
	if st := wlCall[worklog.StartResult](t, other, "session_start", map[string]any{"project": "loom"}); st.SessionsAggregated != 0 || len(st.OpenThreads) != 0 {
		t.Fatalf("another tenant's session_start: %+v", st)
	}
	if msg := wlCallErr(t, other, "resolve_thread", map[string]any{"thread_id": a.Thread.ID, "project": "loom"}); !strings.HasPrefix(msg, "not_found: ") {
		t.Fatalf("another tenant resolves: %q", msg)
	}
}

// TestServerSourceErrors checks that a Source's errors are the call's: a
// bad project is invalid, anything else internal (logged, not sent), and
// no Log at all is internal too.
func TestServerSourceErrors(t *testing.T) {
	logs := wlNewLogs(t)
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	s := wlNewServer()
	AddWorklogToolsFrom(s, func(ctx context.Context, project string) (*worklog.Log, error) {
		switch project {
		case "down":
			return nil, errors.New("secret detail")
		case "nil":
			return nil, nil
		}
		return logs.Log("", project)
	}, logger)
	cs := wlConnect(t, s)
	for tool, args := range map[string]map[string]any{
		"list_threads":   {},
		"create_thread":  {"text": "x"},
		"resolve_thread": {"text_match": "x"},
		"session_start":  {},
		"session_close":  {"session_id": "s1"},
	} {
		for project, want := range map[string]string{"bad\x01name": "invalid: ", "down": "internal: ", "nil": "internal: "} {
			args["project"] = project
			if msg := wlCallErr(t, cs, tool, args); !strings.HasPrefix(msg, want) || strings.Contains(msg, "secret") {
				t.Errorf("%s in project %q: %q, want %q", tool, project, msg, want)
			}
		}
	}
	if !strings.Contains(logged.String(), "secret detail") {
		t.Errorf("the internal error was not logged:\n%s", logged.String())
	}
}

// TestTenantCannotReachAnotherTenantsWorkItems has beta call every
// work-item tool on alpha's project, item ids, session ids and work-log
// thread id over /mcp, as loom serve serves them (each call's Log from the
// tenant of its key): beta reads, changes, blocks and learns nothing of
// alpha's.
func TestTenantCannotReachAnotherTenantsWorkItems(t *testing.T) {
	db := newDB(t)
	logs := worklog.NewLogs(db, nil)
	src := func(ctx context.Context, project string) (*worklog.Log, error) {
		tenant, _ := auth.Tenant(ctx)
		return logs.Log(tenant, project)
	}
	srv := httpServer(t, db, &Options{AddTools: func(s *mcp.Server) { AddWorklogToolsFrom(s, src, nil) }})
	alpha := connectHTTP(t, srv, keyAlpha)
	beta := connectHTTP(t, srv, keyBeta)
	p := "victim"

	start := ok[worklog.StartResult](t, alpha, "session_start", map[string]any{"project": p, "session_id": "s-alpha"})
	item := ok[worklog.CreateResult](t, alpha, "create_thread", map[string]any{"project": p, "text": "rotate alpha's keys", "session_id": start.SessionID}).Thread
	ok[worklog.CloseResult](t, alpha, "session_close", map[string]any{"project": p, "session_id": "s-alpha", "open_threads": []any{"carried by alpha"}})
	world := func() string {
		l := ok[worklog.ListResult](t, alpha, "list_threads", map[string]any{"project": p, "include_resolved": true})
		b, _ := json.Marshal(l.Threads)
		return string(b)
	}
	before := world()
	secret := func(res *mcp.CallToolResult) {
		t.Helper()
		if txt := text(res); strings.Contains(txt, "alpha") {
			t.Errorf("beta learned alpha's items: %s", txt)
		}
	}

	// Reads: nothing.
	res := call(t, beta, "list_threads", map[string]any{"project": p, "include_resolved": true})
	secret(res)
	if l := ok[worklog.ListResult](t, beta, "list_threads", map[string]any{"project": p, "include_resolved": true}); len(l.Threads) != 0 {
		t.Errorf("beta lists %+v", l.Threads)
	}
	// Resolving alpha's item, by id, by text or by number, is resolving an
	// item nobody has.
	for _, args := range []map[string]any{
		{"project": p, "thread_id": item.ID},
		{"project": p, "text_match": "rotate"},
		{"project": p, "thread_id": "#1"},
	} {
		res := call(t, beta, "resolve_thread", args)
		secret(res)
		other := call(t, beta, "resolve_thread", map[string]any{"project": p, "thread_id": "t-00000000"})
		code, _, _ := strings.Cut(text(res), ":")
		want, _, _ := strings.Cut(text(other), ":")
		if !res.IsError || code != want {
			t.Errorf("beta resolves %v: %q; an unknown item: %q", args, text(res), text(other))
		}
	}
	// Beta's own session of alpha's session id, and items in its own
	// project of the same name; and a thread of the id of alpha's work log.
	s := ok[worklog.StartResult](t, beta, "session_start", map[string]any{"project": p, "session_id": "s-alpha"})
	if len(s.OpenThreads) != 0 || s.SessionsAggregated != 0 {
		t.Errorf("beta's session start carries %+v from %d sessions", s.OpenThreads, s.SessionsAggregated)
	}
	ok[worklog.CreateResult](t, beta, "create_thread", map[string]any{"project": p, "text": "beta's own", "session_id": "s-alpha"})
	ok[worklog.CloseResult](t, beta, "session_close", map[string]any{"project": p, "session_id": "s-alpha", "open_threads": []any{"beta's carried"}})
	ok[createOut](t, beta, "thread_create", map[string]any{"id": worklog.ThreadID("alpha", p)})

	if after := world(); after != before {
		t.Fatalf("beta changed alpha's items:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Alpha is blocked from nothing, and its next session carries only its
	// own.
	ok[worklog.CreateResult](t, alpha, "create_thread", map[string]any{"project": p, "text": "after the attack"})
	next := ok[worklog.StartResult](t, alpha, "session_start", map[string]any{"project": p})
	var got []string
	for _, it := range next.OpenThreads {
		got = append(got, it.Text)
	}
	if all := strings.Join(got, "|"); strings.Contains(all, "beta") || !strings.Contains(all, "carried by alpha") {
		t.Errorf("alpha's next session carries %q", all)
	}
}
