package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/worklog"
)

// TestTenantAttackOverMCP has tenant beta call every thread tool with
// alpha's ids over /mcp and checks that nothing of alpha's is read,
// changed, blocked or revealed: each answer is the answer for an id nobody
// has, beta can take each of alpha's ids in its own namespace, and alpha's
// threads read back as they were.
func TestTenantAttackOverMCP(t *testing.T) {
	db := newDB(t)
	srv := httpServer(t, db, nil)
	alpha := connectHTTP(t, srv, keyAlpha)
	beta := connectHTTP(t, srv, keyBeta)

	a := ok[createOut](t, alpha, "thread_create", map[string]any{"id": "secret", "title": "alpha's",
		"messages": []any{map[string]any{"role": "user", "text": "the launch date is the 9th"}}})
	msgID := a.Messages[0].ID
	ok[checkpointOut](t, alpha, "thread_checkpoint", map[string]any{"id": "secret", "name": "cp"})
	fork := ok[forkOut](t, alpha, "thread_fork", map[string]any{"id": "secret"}).Thread.ID
	world := func() string {
		var b strings.Builder
		for _, id := range []string{"secret", fork} {
			b.WriteString(text(call(t, alpha, "thread_get", map[string]any{"id": id, "messages": 100})))
			b.WriteString(text(call(t, alpha, "thread_history", map[string]any{"id": id})))
		}
		b.WriteString(text(call(t, alpha, "thread_list", map[string]any{"internal": "include"})))
		return b.String()
	}
	before := world()

	// answer is what beta learns from a call: success, or the error's code,
	// with every id in the arguments the same placeholder.
	answer := func(tool string, args map[string]any, id string) string {
		t.Helper()
		data, _ := json.Marshal(args)
		var concrete map[string]any
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(data), "{id}", id)), &concrete); err != nil {
			t.Fatal(err)
		}
		res := call(t, beta, tool, concrete)
		txt := text(res)
		if strings.Contains(txt, "launch date") {
			t.Errorf("beta's %s revealed alpha's messages: %s", tool, txt)
		}
		if !res.IsError {
			return "ok"
		}
		code, _, _ := strings.Cut(txt, ":")
		return code
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"thread_get", map[string]any{"id": "{id}", "messages": 10}},
		{"thread_get", map[string]any{"id": "{id}", "version": 1}},
		{"thread_append", map[string]any{"id": "{id}", "messages": []any{map[string]any{"role": "user", "text": "mine now"}}}},
		{"thread_append", map[string]any{"id": "{id}", "if_version": 2, "messages": []any{map[string]any{"role": "user", "text": "x"}}}},
		{"thread_fork", map[string]any{"id": "{id}"}},
		{"thread_fork", map[string]any{"id": "{id}", "at": msgID}},
		{"thread_view", map[string]any{"id": "{id}"}},
		{"thread_checkpoint", map[string]any{"id": "{id}", "name": "x"}},
		{"thread_rollback", map[string]any{"id": "{id}", "checkpoint": "cp"}},
		{"thread_rollback", map[string]any{"id": "{id}", "version": 1}},
		{"thread_history", map[string]any{"id": "{id}"}},
	} {
		for _, id := range []string{"secret", fork} {
			if got, want := answer(c.tool, c.args, id), answer(c.tool, c.args, "nobody-has-this"); got != want || got != "not_found" {
				t.Errorf("beta's %s on alpha's %s: %q; on an unknown id: %q", c.tool, id, got, want)
			}
		}
	}
	if list := ok[listOut](t, beta, "thread_list", map[string]any{}); len(list.Threads) != 0 {
		t.Errorf("beta lists %+v", list.Threads)
	}
	// beta takes alpha's ids in its own namespace, as any fresh id.
	for _, id := range []string{"secret", fork, "fresh"} {
		if got := answer("thread_create", map[string]any{"id": "{id}", "messages": []any{map[string]any{"role": "user", "text": "beta's own"}}}, id); got != "ok" {
			t.Errorf("beta creates %s: %s", id, got)
		}
		if got := answer("thread_fork", map[string]any{"id": "{id}"}, id); got != "ok" {
			t.Errorf("beta forks its %s: %s", id, got)
		}
		if got := answer("thread_create", map[string]any{"id": "{id}"}, id); got != "conflict" {
			t.Errorf("beta creates %s twice: %s", id, got)
		}
	}
	ok[checkpointOut](t, beta, "thread_checkpoint", map[string]any{"id": "secret", "name": "cp"})
	ok[rollbackOut](t, beta, "thread_rollback", map[string]any{"id": "secret", "checkpoint": "cp"})
	got := ok[getOut](t, beta, "thread_get", map[string]any{"id": "secret", "messages": 10})
	if len(got.Messages) != 1 || got.Messages[0].Text() != "beta's own" {
		t.Errorf("beta's secret: %+v", got.Messages)
	}
	if after := world(); after != before {
		t.Fatalf("beta changed alpha's threads:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// alpha is blocked from nothing.
	ok[createOut](t, alpha, "thread_create", map[string]any{"id": "fresh"})
	ok[forkOut](t, alpha, "thread_fork", map[string]any{"id": "secret"})
}

// TestTenantAttackOnWorkItemsOverMCP has beta call every work-item tool on
// alpha's project, item ids, session ids and work-log thread id over /mcp,
// as loom serve serves them (each call's Log from the tenant of its key):
// beta reads, changes, blocks and learns nothing of alpha's.
func TestTenantAttackOnWorkItemsOverMCP(t *testing.T) {
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
