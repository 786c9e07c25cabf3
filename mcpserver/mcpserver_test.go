package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

const (
	keyAlpha = "alpha-key-0123456789"
	keyBeta  = "beta-key-0123456789"
)

func newDB(tb testing.TB) *thread.DB {
	tb.Helper()
	return thread.New(thread.NewMemoryStore(), nil)
}

// httpServer serves Handler behind the auth middleware, with keys for the
// tenants alpha and beta.
func httpServer(tb testing.TB, db *thread.DB, opts *Options) *httptest.Server {
	tb.Helper()
	keys, err := auth.Parse(strings.NewReader("alpha:" + keyAlpha + "\nbeta:" + keyBeta + "\n"))
	if err != nil {
		tb.Fatal(err)
	}
	deny := func(w http.ResponseWriter, r *http.Request, err error) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}
	srv := httptest.NewServer(keys.Middleware(Handler(db, opts), deny))
	tb.Cleanup(srv.Close)
	return srv
}

// withKey adds an API key to every request.
type withKey struct {
	key  string
	base http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.base.RoundTrip(r)
}

// connectHTTP connects an SDK client to srv with key, speaking the
// protocol version (the SDK's latest when "").
func connectHTTP(tb testing.TB, srv *httptest.Server, key string, version ...string) *mcp.ClientSession {
	tb.Helper()
	transport := &mcp.StreamableClientTransport{
		Endpoint:             srv.URL,
		HTTPClient:           &http.Client{Transport: withKey{key, srv.Client().Transport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	return connect(tb, transport, version...)
}

func connect(tb testing.TB, transport mcp.Transport, version ...string) *mcp.ClientSession {
	tb.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	opts := &mcp.ClientSessionOptions{}
	if len(version) > 0 {
		opts.ProtocolVersion = version[0]
	}
	cs, err := client.Connect(context.Background(), transport, opts)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// connectPipes serves db with Serve over a pair of pipes, as over stdio,
// with ctx's values (such as a tenant), and connects an SDK client to it.
func connectPipes(tb testing.TB, ctx context.Context, db *thread.DB, opts *Options) *mcp.ClientSession {
	tb.Helper()
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, db, opts, &mcp.IOTransport{Reader: serverR, Writer: serverW}) }()
	cs := connect(tb, &mcp.IOTransport{Reader: clientR, Writer: clientW})
	tb.Cleanup(func() {
		cs.Close()
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return cs
}

// eachTransport runs f on a client of a fresh server over each
// transport: HTTP as tenant alpha, and pipes (as stdio) in the DB's tenant.
func eachTransport(t *testing.T, f func(t *testing.T, cs *mcp.ClientSession)) {
	for _, name := range []string{"http", "stdio"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			if name == "http" {
				f(t, connectHTTP(t, httpServer(t, db, nil), keyAlpha))
			} else {
				f(t, connectPipes(t, t.Context(), db, nil))
			}
		})
	}
}

func call(tb testing.TB, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	tb.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		tb.Fatalf("%s: %v", tool, err)
	}
	return res
}

// ok calls tool, fails unless it succeeded, and decodes its structured
// result.
func ok[Out any](tb testing.TB, cs *mcp.ClientSession, tool string, args any) Out {
	tb.Helper()
	res := call(tb, cs, tool, args)
	var out Out
	if res.IsError {
		tb.Fatalf("%s(%v): tool error %q", tool, args, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatalf("%s: decoding %s: %v", tool, b, err)
	}
	return out
}

// fails calls tool and returns the text of the tool error it must give.
func fails(tb testing.TB, cs *mcp.ClientSession, tool string, args any) string {
	tb.Helper()
	res := call(tb, cs, tool, args)
	if !res.IsError {
		tb.Fatalf("%s(%v) succeeded, want a tool error; result %s", tool, args, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func texts(msgs []message.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+":"+m.Text())
	}
	return out
}

func TestToolListHasThreadToolsWithInputSchemas(t *testing.T) {
	eachTransport(t, func(t *testing.T, cs *mcp.ClientSession) {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		required := map[string][]string{
			"thread_list":         nil,
			"thread_get":          {"id"},
			"thread_create":       nil,
			"thread_append":       {"id", "messages"},
			"thread_view":         {"id"},
			"thread_fork":         {"id"},
			"thread_checkpoint":   {"id", "name"},
			"thread_rollback":     {"id"},
			"thread_history":      {"id"},
			"thread_search":       {"query"},
			"workflow_list":       nil,
			"workflow_get":        {"id"},
			"workflow_history":    {"id"},
			"workflow_checkpoint": {"id", "name"},
			"workflow_restore":    {"id"},
			"workflow_edit":       {"id", "by"},
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			want, known := required[tool.Name]
			if !known {
				continue
			}
			if tool.Description == "" {
				t.Errorf("%s has no description", tool.Name)
			}
			schema, _ := tool.InputSchema.(map[string]any)
			if schema["type"] != "object" {
				t.Errorf("%s: input schema type %v, want object", tool.Name, schema["type"])
			}
			props, _ := schema["properties"].(map[string]any)
			for _, name := range want {
				p, _ := props[name].(map[string]any)
				if p["description"] == nil && tool.Name != "thread_list" && tool.Name != "workflow_list" {
					t.Errorf("%s: property %s has no description", tool.Name, name)
				}
			}
			var got []string
			req, _ := schema["required"].([]any)
			for _, r := range req {
				got = append(got, r.(string))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: required %v, want %v", tool.Name, got, want)
			}
			if out, _ := tool.OutputSchema.(map[string]any); out["type"] != "object" {
				t.Errorf("%s: output schema %v, want an object", tool.Name, tool.OutputSchema)
			}
		}
		want := []string{"thread_append", "thread_checkpoint", "thread_create", "thread_fork", "thread_get",
			"thread_history", "thread_list", "thread_rollback", "thread_search", "thread_view",
			"workflow_checkpoint", "workflow_edit", "workflow_get", "workflow_history", "workflow_list", "workflow_restore"}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("tools %v, want %v", names, want)
		}
		// Messages in the wire format are described for the model.
		for _, tool := range res.Tools {
			if tool.Name != "thread_append" {
				continue
			}
			b, _ := json.Marshal(tool.InputSchema)
			for _, s := range []string{`"role"`, `"text"`, `"contents"`, `"if_version"`} {
				if !bytes.Contains(b, []byte(s)) {
					t.Errorf("thread_append's schema lacks %s: %s", s, b)
				}
			}
		}
	})
}

func TestRoundTripCreateAppendGetViewForkCheckpointRollbackHistory(t *testing.T) {
	eachTransport(t, func(t *testing.T, cs *mcp.ClientSession) {
		created := ok[createOut](t, cs, "thread_create", map[string]any{
			"title":    "support chat",
			"labels":   map[string]string{"team": "support"},
			"messages": []any{map[string]any{"role": "system", "text": "Be brief."}},
		})
		id := created.Thread.ID
		if id == "" || created.Thread.Version != 1 || created.Thread.Title != "support chat" || len(created.Messages) != 1 || created.Messages[0].ID == "" {
			t.Fatalf("created %+v", created)
		}

		// Simple messages and a wire-format tool call with its result.
		app := ok[appendOut](t, cs, "thread_append", map[string]any{
			"id": id,
			"messages": []any{
				map[string]any{"role": "user", "text": "What is the weather in Paris?"},
				json.RawMessage(`{"role":"assistant","contents":[{"type":"function_call","call_id":"c1","name":"weather","arguments":"{\"city\":\"Paris\"}"}]}`),
				json.RawMessage(`{"role":"tool","contents":[{"type":"function_result","call_id":"c1","result":"{\"temp_c\":21}"}]}`),
			},
			"if_version": 1,
		})
		if app.Version != 2 || len(app.Messages) != 3 || app.Commit == "" {
			t.Fatalf("append: %+v", app)
		}
		if calls := app.Messages[1].Calls(); len(calls) != 1 || calls[0].Name != "weather" {
			t.Fatalf("append kept calls %+v", calls)
		}
		res := call(t, cs, "thread_append", map[string]any{"id": id, "messages": []any{map[string]any{"role": "assistant", "text": "21°C and sunny."}}})
		if res.IsError || !strings.Contains(text(res), "21°C and sunny.") {
			t.Fatalf("append's text should show the message: %q", text(res))
		}

		got := ok[getOut](t, cs, "thread_get", map[string]any{"id": id, "messages": 3})
		if got.Thread.Version != 3 || got.Length != 5 {
			t.Errorf("get: version %d, length %d; want 3, 5", got.Thread.Version, got.Length)
		}
		if diff := cmp.Diff([]string{"assistant:", "tool:", "assistant:21°C and sunny."}, texts(got.Messages)); diff != "" {
			t.Errorf("get's last 3 messages (-want +got):\n%s", diff)
		}
		res = call(t, cs, "thread_get", map[string]any{"id": id, "messages": 3})
		if s := text(res); !strings.Contains(s, "calls weather(") || !strings.Contains(s, "support chat") {
			t.Errorf("get's summary: %q", s)
		}
		// Paging back from the first of the last 3.
		prev := ok[getOut](t, cs, "thread_get", map[string]any{"id": id, "messages": 3, "before": got.Messages[0].ID})
		if len(prev.Messages) != 2 || prev.Messages[1].ID == got.Messages[0].ID || !strings.HasPrefix(texts(prev.Messages)[0], "system:") {
			t.Errorf("get before %s: %v", got.Messages[0].ID, texts(prev.Messages))
		}
		if res := call(t, cs, "thread_get", map[string]any{"id": id, "before": got.Messages[0].ID}); !res.IsError {
			t.Error("before without messages: not an error")
		}
		// Time travel: the messages as they were at version 1.
		old := ok[getOut](t, cs, "thread_get", map[string]any{"id": id, "messages": 10, "version": 1})
		if diff := cmp.Diff([]string{"system:Be brief."}, texts(old.Messages)); diff != "" {
			t.Errorf("get at version 1 (-want +got):\n%s", diff)
		}

		// A view of at most 3 messages keeps the system message and does not
		// split the tool call from its result.
		view := ok[viewOut](t, cs, "thread_view", map[string]any{
			"id": id, "model": "gpt-4.1", "budget": 1000, "max_messages": 4,
			"strategies": []any{map[string]any{"type": "sliding_window", "turns": 1}},
		})
		if view.Version != 3 || view.Tokens <= 0 || len(view.Messages) > 4 || view.Messages[0].Role != message.RoleSystem {
			t.Errorf("view: %+v", view)
		}
		view = ok[viewOut](t, cs, "thread_view", map[string]any{"id": id, "max_messages": 3})
		if diff := cmp.Diff([]string{"system:Be brief.", "user:What is the weather in Paris?", "assistant:21°C and sunny."}, texts(view.Messages)); diff != "" {
			t.Errorf("view of 3 (-want +got):\n%s", diff)
		}
		if len(view.Dropped) != 2 {
			t.Errorf("view dropped %v, want the call and its result", view.Dropped)
		}

		cp := ok[checkpointOut](t, cs, "thread_checkpoint", map[string]any{"id": id, "name": "answered"})
		if cp.Checkpoint.Name != "answered" || cp.Checkpoint.Version != 3 {
			t.Errorf("checkpoint: %+v", cp)
		}
		ok[appendOut](t, cs, "thread_append", map[string]any{"id": id, "messages": []any{map[string]any{"role": "user", "text": "And tomorrow?"}}})

		// Fork at the user's question: the fork keeps the prefix.
		userMsg := app.Messages[0].ID
		fork := ok[forkOut](t, cs, "thread_fork", map[string]any{"id": id, "at": userMsg, "title": "what if"})
		if fork.Thread.ID == id || fork.Thread.Title != "what if" || fork.Thread.ForkedFrom == nil || fork.Thread.ForkedFrom.Thread != id {
			t.Errorf("fork: %+v", fork.Thread)
		}
		if fork.Thread.Labels["team"] != "support" {
			t.Errorf("fork labels %v, want the source's", fork.Thread.Labels)
		}
		forked := ok[getOut](t, cs, "thread_get", map[string]any{"id": fork.Thread.ID, "messages": 100})
		if diff := cmp.Diff([]string{"system:Be brief.", "user:What is the weather in Paris?"}, texts(forked.Messages)); diff != "" {
			t.Errorf("forked messages (-want +got):\n%s", diff)
		}
		// A fork of an earlier version.
		fork1 := ok[forkOut](t, cs, "thread_fork", map[string]any{"id": id, "version": 1})
		if n := ok[getOut](t, cs, "thread_get", map[string]any{"id": fork1.Thread.ID}).Length; n != 1 {
			t.Errorf("fork at version 1 has %d messages, want 1", n)
		}

		rb := ok[rollbackOut](t, cs, "thread_rollback", map[string]any{"id": id, "checkpoint": "answered"})
		if rb.Thread.Version != 5 || rb.Thread.Head != cp.Checkpoint.Commit {
			t.Errorf("rollback: %+v, want version 5 at %s", rb.Thread, cp.Checkpoint.Commit)
		}
		got = ok[getOut](t, cs, "thread_get", map[string]any{"id": id, "messages": 1})
		if got.Length != 5 || got.Messages[0].Text() != "21°C and sunny." || len(got.Checkpoints) != 1 {
			t.Errorf("after rollback: %+v", got)
		}
		// Restoring version 4 undoes the rollback.
		rb = ok[rollbackOut](t, cs, "thread_rollback", map[string]any{"id": id, "version": 4})
		if rb.Thread.Version != 6 {
			t.Errorf("restore: %+v", rb.Thread)
		}

		hist := ok[historyOut](t, cs, "thread_history", map[string]any{"id": id})
		var ops []thread.Op
		for _, e := range hist.Entries {
			ops = append(ops, e.Op)
		}
		if diff := cmp.Diff([]thread.Op{thread.OpRestore, thread.OpRollback, thread.OpAppend, thread.OpAppend, thread.OpAppend, thread.OpCreate}, ops); diff != "" {
			t.Errorf("history ops (-want +got):\n%s", diff)
		}
		page := ok[historyOut](t, cs, "thread_history", map[string]any{"id": id, "limit": 2})
		if len(page.Entries) != 2 || page.NextBefore != 5 {
			t.Errorf("history page: %+v", page)
		}
		page = ok[historyOut](t, cs, "thread_history", map[string]any{"id": id, "limit": 10, "before": page.NextBefore})
		if len(page.Entries) != 4 || page.Entries[0].Version != 4 || page.NextBefore != 0 {
			t.Errorf("history second page: %+v", page)
		}

		found := ok[searchOut](t, cs, "thread_search", map[string]any{"query": "SUNNY 21", "limit": 1})
		if len(found.Hits) != 1 || found.Hits[0].Thread != id || !strings.Contains(found.Hits[0].Snippet, "21°C and sunny") || found.Next == "" {
			t.Errorf("search: %+v", found)
		}
		if msg := fails(t, cs, "thread_search", map[string]any{"query": "?!"}); !strings.Contains(msg, "at least one word") {
			t.Errorf("search without words: %s", msg)
		}

		list := ok[listOut](t, cs, "thread_list", map[string]any{"labels": map[string]string{"team": "support"}})
		if len(list.Threads) != 3 {
			t.Errorf("list by label: %d threads, want 3", len(list.Threads))
		}
		p1 := ok[listOut](t, cs, "thread_list", map[string]any{"limit": 2})
		p2 := ok[listOut](t, cs, "thread_list", map[string]any{"limit": 2, "cursor": p1.NextCursor})
		if len(p1.Threads) != 2 || p1.NextCursor == "" || len(p2.Threads) != 1 || p2.NextCursor != "" {
			t.Errorf("list pages: %+v then %+v", p1, p2)
		}
	})
}

func TestErrorsAreCodedToolErrors(t *testing.T) {
	db := newDB(t)
	cs := connectPipes(t, t.Context(), db, nil)
	th, err := db.Create(t.Context(), thread.CreateOptions{Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Checkpoint(t.Context(), "start"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(t.Context(), message.Assistant("hello")); err != nil {
		t.Fatal(err)
	}
	id := th.ID()
	user := []any{map[string]any{"role": "user", "text": "x"}}
	tests := []struct {
		name, tool string
		args       any
		want       string // prefix of the error text
	}{
		{"unknown thread", "thread_get", map[string]any{"id": "th_missing"}, "not_found: "},
		{"unknown thread on append", "thread_append", map[string]any{"id": "th_missing", "messages": user}, "not_found: "},
		{"unknown checkpoint", "thread_rollback", map[string]any{"id": id, "checkpoint": "nope"}, "not_found: "},
		{"unknown fork point", "thread_fork", map[string]any{"id": id, "at": "msg_nope"}, "not_found: "},
		{"negative fork version", "thread_fork", map[string]any{"id": id, "version": -1}, "invalid: "},
		{"fork onto a taken id", "thread_fork", map[string]any{"id": id, "new_id": id}, "conflict: "},
		{"missing id", "thread_get", map[string]any{}, "invalid: "},
		{"no arguments", "thread_history", nil, "invalid: "},
		{"wrong type", "thread_get", map[string]any{"id": 5}, "invalid: "},
		{"unknown argument", "thread_get", map[string]any{"id": id, "bogus": true}, "invalid: "},
		{"malformed id", "thread_get", map[string]any{"id": "no spaces allowed"}, "invalid: "},
		{"negative limit", "thread_list", map[string]any{"limit": -1}, "invalid: "},
		{"unknown kind", "thread_list", map[string]any{"kind": "remote"}, "invalid: "},
		{"no messages", "thread_append", map[string]any{"id": id, "messages": []any{}}, "invalid: "},
		{"message without text or contents", "thread_append", map[string]any{"id": id, "messages": []any{map[string]any{"role": "user"}}}, "invalid: messages[0]: "},
		{"message with text and contents", "thread_append", map[string]any{"id": id, "messages": []any{map[string]any{"role": "user", "text": "a", "contents": []any{}}}}, "invalid: "},
		{"bad role", "thread_append", map[string]any{"id": id, "messages": []any{map[string]any{"role": "Not A Role", "text": "a"}}}, "invalid: "},
		{"content without type", "thread_append", map[string]any{"id": id, "messages": []any{map[string]any{"role": "user", "contents": []any{map[string]any{"text": "a"}}}}}, "invalid: "},
		{"rollback to both", "thread_rollback", map[string]any{"id": id, "checkpoint": "start", "version": 1}, "invalid: "},
		{"rollback to neither", "thread_rollback", map[string]any{"id": id}, "invalid: "},
		{"unknown strategy", "thread_view", map[string]any{"id": id, "strategies": []any{map[string]any{"type": "summarize"}}}, "invalid: "},
		{"sliding window of no turns", "thread_view", map[string]any{"id": id, "strategies": []any{map[string]any{"type": "sliding_window"}}}, "invalid: "},
		{"unknown encoding", "thread_view", map[string]any{"id": id, "encoding": "p50k"}, "invalid: "},
		{"over budget", "thread_view", map[string]any{"id": id, "budget": 1}, "invalid: "},
		{"stale if_version", "thread_append", map[string]any{"id": id, "messages": user, "if_version": 1}, "conflict: "},
		{"checkpoint name taken", "thread_checkpoint", map[string]any{"id": id, "name": "start"}, "conflict: "},
		{"id taken", "thread_create", map[string]any{"id": id}, "conflict: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fails(t, cs, tt.tool, tt.args)
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("error %q, want it to start with %q", got, tt.want)
			}
			if strings.Contains(got, ": not found") || strings.Contains(got, ": invalid") && !strings.HasPrefix(got, "invalid") {
				t.Errorf("error %q repeats its code", got)
			}
		})
	}
	// Nothing was written by the failed calls.
	if err := th.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if th.Version() != 2 {
		t.Errorf("thread at version %d after failed calls, want 2", th.Version())
	}
}

// TestForkNamesTheNewThread checks thread_fork's new_id: the fork takes
// the id the caller gives, as over HTTP and with loom fork --id.
func TestForkNamesTheNewThread(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), nil)
	cs := connectPipes(t, t.Context(), db, nil)
	th, err := db.Create(t.Context(), thread.CreateOptions{Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	named := ok[forkOut](t, cs, "thread_fork", map[string]any{"id": th.ID(), "new_id": "what-if-named"})
	if named.Thread.ID != "what-if-named" || named.Thread.ForkedFrom == nil || named.Thread.ForkedFrom.Thread != th.ID() {
		t.Errorf("fork with new_id: %+v, want what-if-named forked from %s", named.Thread, th.ID())
	}
	if _, err := db.Thread(t.Context(), "what-if-named"); err != nil {
		t.Errorf("the named fork: %v", err)
	}
}

func TestNotFoundNamesTheThread(t *testing.T) {
	cs := connectPipes(t, t.Context(), newDB(t), nil)
	if got := fails(t, cs, "thread_get", map[string]any{"id": "th_x"}); got != `not_found: thread "th_x"` {
		t.Errorf("error %q", got)
	}
}

func TestTenantIsolationOverHTTP(t *testing.T) {
	db := newDB(t)
	srv := httpServer(t, db, nil)
	alpha := connectHTTP(t, srv, keyAlpha)
	beta := connectHTTP(t, srv, keyBeta)

	a := ok[createOut](t, alpha, "thread_create", map[string]any{
		"title": "alpha's", "messages": []any{map[string]any{"role": "user", "text": "secret plans"}},
	})
	id, msgID := a.Thread.ID, a.Messages[0].ID
	ok[checkpointOut](t, alpha, "thread_checkpoint", map[string]any{"id": id, "name": "cp"})
	b := ok[createOut](t, beta, "thread_create", map[string]any{"title": "beta's"})

	// The threads were created in the tenants of the keys.
	if _, err := db.WithTenant("alpha").Thread(t.Context(), id); err != nil {
		t.Errorf("alpha's thread is not in tenant alpha: %v", err)
	}
	if _, err := db.WithTenant("beta").Thread(t.Context(), b.Thread.ID); err != nil {
		t.Errorf("beta's thread is not in tenant beta: %v", err)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"thread_get", map[string]any{"id": id, "messages": 10}},
		{"thread_append", map[string]any{"id": id, "messages": []any{map[string]any{"role": "user", "text": "mine now"}}}},
		{"thread_fork", map[string]any{"id": id}},
		{"thread_fork", map[string]any{"id": id, "at": msgID}},
		{"thread_view", map[string]any{"id": id}},
		{"thread_checkpoint", map[string]any{"id": id, "name": "x"}},
		{"thread_rollback", map[string]any{"id": id, "checkpoint": "cp"}},
		{"thread_history", map[string]any{"id": id}},
	} {
		got := fails(t, beta, c.tool, c.args)
		if !strings.HasPrefix(got, "not_found: ") || strings.Contains(got, "secret") {
			t.Errorf("beta's %s of alpha's thread: %q, want not_found", c.tool, got)
		}
	}
	list := ok[listOut](t, beta, "thread_list", map[string]any{})
	if len(list.Threads) != 1 || list.Threads[0].ID != b.Thread.ID {
		t.Errorf("beta lists %+v, want only its own thread", list.Threads)
	}
	list = ok[listOut](t, alpha, "thread_list", map[string]any{})
	if len(list.Threads) != 1 || list.Threads[0].ID != id {
		t.Errorf("alpha lists %+v, want only its own thread", list.Threads)
	}
	// alpha's thread is untouched.
	got := ok[getOut](t, alpha, "thread_get", map[string]any{"id": id})
	if got.Thread.Version != 1 || got.Length != 1 {
		t.Errorf("alpha's thread after beta's attempts: %+v", got)
	}
}

func TestTenantReachesToolsOverEveryProtocolVersion(t *testing.T) {
	db := newDB(t)
	srv := httpServer(t, db, nil)
	for _, v := range mcp.SupportedProtocolVersions() {
		t.Run(v, func(t *testing.T) {
			cs := connectHTTP(t, srv, keyBeta, v)
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s", got)
			}
			created := ok[createOut](t, cs, "thread_create", map[string]any{"title": v})
			if _, err := db.WithTenant("beta").Thread(t.Context(), created.Thread.ID); err != nil {
				t.Errorf("thread not in tenant beta: %v", err)
			}
			// A second request of the same client is scoped again.
			list := ok[listOut](t, cs, "thread_list", map[string]any{"limit": 1000})
			if !slices.ContainsFunc(list.Threads, func(ti threadInfo) bool { return ti.ID == created.Thread.ID }) {
				t.Errorf("beta does not list its thread")
			}
		})
	}
}

func TestCrossOriginBrowserRequestsAreRefused(t *testing.T) {
	srv := httpServer(t, newDB(t), nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"thread_list","arguments":{}}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-API-Key", keyAlpha)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403", resp.StatusCode)
	}
}

func TestUnauthenticatedHTTPIsRefused(t *testing.T) {
	srv := httpServer(t, newDB(t), nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"thread_list","arguments":{}}}`
	for _, key := range []string{"", "not-a-known-key-000000"} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: status %d, want 401", key, resp.StatusCode)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	if cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Error("a client without a key connected")
	}
}

func TestHTTPWithXAPIKeyHeader(t *testing.T) {
	srv := httpServer(t, newDB(t), nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"thread_create","arguments":{"title":"t"}}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-API-Key", keyBeta)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "created thread") {
		t.Errorf("status %d, body %s", resp.StatusCode, b)
	}
}

func TestStdioTenantComesFromContext(t *testing.T) {
	db := newDB(t)
	cs := connectPipes(t, auth.WithTenant(t.Context(), "gamma"), db, nil)
	created := ok[createOut](t, cs, "thread_create", map[string]any{"title": "g"})
	if _, err := db.WithTenant("gamma").Thread(t.Context(), created.Thread.ID); err != nil {
		t.Errorf("thread not in tenant gamma: %v", err)
	}
	if _, err := db.Thread(t.Context(), created.Thread.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("thread visible to the default tenant: %v", err)
	}
}

func TestDBTenantAppliesWithoutAuth(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Tenant: "own"})
	cs := connectPipes(t, t.Context(), db, nil)
	created := ok[createOut](t, cs, "thread_create", map[string]any{})
	if _, err := db.Thread(t.Context(), created.Thread.ID); err != nil {
		t.Errorf("thread not in the DB's tenant: %v", err)
	}
}

// TestServeStdio runs ServeStdio on pipes in place of stdin and stdout. It
// swaps os.Stdin and os.Stdout, so it must not run in parallel.
func TestServeStdio(t *testing.T) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	oldIn, oldOut := os.Stdin, os.Stdout
	os.Stdin, os.Stdout = stdinR, stdoutW
	db := newDB(t)
	done := make(chan error, 1)
	go func() { done <- ServeStdio(t.Context(), db, nil) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
	if err != nil {
		os.Stdin, os.Stdout = oldIn, oldOut
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "thread_create", Arguments: map[string]any{"title": "over stdio"}})
	cs.Close() // closes stdin's writer: the client leaves
	var serveErr error
	select {
	case serveErr = <-done:
	case <-time.After(10 * time.Second):
		serveErr = errors.New("ServeStdio did not return after the client left")
	}
	os.Stdin, os.Stdout = oldIn, oldOut
	stdoutW.Close()
	stdoutR.Close()
	if err != nil || res.IsError {
		t.Fatalf("thread_create over stdio: %v %v", err, res)
	}
	if serveErr != nil {
		t.Errorf("ServeStdio: %v", serveErr)
	}
	var n int
	for _, err := range db.Threads(t.Context(), thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d threads after a create over stdio, want 1", n)
	}
}

func TestServeReturnsWhenContextEnds(t *testing.T) {
	serverR, _ := io.Pipe()
	_, serverW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, newDB(t), nil, &mcp.IOTransport{Reader: serverR, Writer: serverW}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// failingStore is a store whose listings fail with an internal error.
type failingStore struct {
	*thread.MemoryStore
}

func (failingStore) Threads(context.Context, thread.ListOptions) iter.Seq2[*thread.Record, error] {
	return func(yield func(*thread.Record, error) bool) {
		yield(nil, errors.New("disk on fire at /var/secret/loom.db"))
	}
}

func TestInternalErrorsAreGenericAndLogged(t *testing.T) {
	logs := &syncWriter{w: new(bytes.Buffer)}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	db := thread.New(failingStore{thread.NewMemoryStore()}, nil)
	cs := connectPipes(t, t.Context(), db, &Options{Logger: logger})
	got := fails(t, cs, "thread_list", map[string]any{})
	if !strings.HasPrefix(got, "internal: ") || strings.Contains(got, "secret") {
		t.Errorf("internal error text %q", got)
	}
	if s := logs.String(); !strings.Contains(s, "disk on fire") || !strings.Contains(s, "thread_list") {
		t.Errorf("log %q lacks the error", s)
	}
}

func TestAddToolsFromOptionsRecoverPanicsAndMapErrors(t *testing.T) {
	logs := &syncWriter{w: new(bytes.Buffer)}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	type in struct {
		Mode string `json:"mode" jsonschema:"what to do"`
	}
	type out struct {
		OK bool `json:"ok"`
	}
	addTools := func(s *mcp.Server) {
		AddTool(s, &mcp.Tool{Name: "t"}, logger, func(ctx context.Context, in in) (out, error) {
			switch in.Mode {
			case "panic":
				panic("boom")
			case "unsupported":
				return out{}, fmt.Errorf("fork of a linear thread: %w", thread.ErrUnsupported)
			case "canceled":
				return out{}, context.Canceled
			}
			return out{OK: true}, nil
		})
	}
	cs := connectPipes(t, t.Context(), newDB(t), &Options{AddTools: addTools})
	ok[listOut](t, cs, "thread_list", nil) // the thread tools are still there
	for mode, want := range map[string]string{
		"panic":       "internal: ",
		"unsupported": "unsupported: fork of a linear thread",
		"canceled":    "canceled: ",
	} {
		if got := fails(t, cs, "t", map[string]any{"mode": mode}); !strings.HasPrefix(got, want) {
			t.Errorf("mode %s: %q, want %q", mode, got, want)
		}
	}
	if !ok[out](t, cs, "t", map[string]any{"mode": "fine"}).OK {
		t.Error("tool did not succeed")
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("the panic was not logged: %s", logs.String())
	}
}

// syncWriter serializes writes for the race detector.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.w)
}

func TestSummarizeOneLinePerMessage(t *testing.T) {
	m := message.New(message.RoleAssistant,
		message.Text{Text: "Let me\ncheck."},
		message.FunctionCall{CallID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`},
		message.Usage{InputTokens: 3},
	)
	m.ID = "msg_1"
	want := `[msg_1] assistant: Let me check. calls weather({"city":"Paris"}) [c1]`
	if got := summarize(m); got != want {
		t.Errorf("summarize = %q, want %q", got, want)
	}
	long := message.User(strings.Repeat("é", 300))
	if got := summarize(long); !strings.HasSuffix(got, "…") || len([]rune(got)) > summaryTextMax+20 {
		t.Errorf("long message summary %q", got)
	}
}

// TestToolErrorCodesMatchTheHTTPTable checks that a tool error's code
// is the one the HTTP API's error table (httpapi/errors.go) gives the same
// error: STYLE says one table maps errors to HTTP statuses and MCP errors,
// but mcpserver keeps a shorter table of its own, so a deadline is
// "canceled" here and "timeout" over HTTP, and the agent's errors, which
// tools added with AddTool/Options.AddTools return, are "internal" or
// "invalid" here and busy, approval_required or rate_limited over HTTP.
func TestToolErrorCodesMatchTheHTTPTable(t *testing.T) {
	errs := map[string]error{
		"deadline":  fmt.Errorf("store read: %w", context.DeadlineExceeded),
		"busy":      fmt.Errorf("run on th: %w", agent.ErrBusy),
		"approval":  fmt.Errorf("run on th: %w", agent.ErrApprovalRequired),
		"ratelimit": fmt.Errorf("chat: %w", &agent.ProviderError{Provider: "openai", StatusCode: 429, Type: "rate_limit_error"}),
	}
	// The codes the HTTP API gives these errors (apierr.Classify).
	httpCode := map[string]string{
		"deadline":  "timeout",
		"busy":      "busy",
		"approval":  "approval_required",
		"ratelimit": "rate_limited",
	}
	type in struct {
		Mode string `json:"mode" jsonschema:"which error"`
	}
	type out struct {
		OK bool `json:"ok"`
	}
	addTools := func(s *mcp.Server) {
		AddTool(s, &mcp.Tool{Name: "fail"}, slog.New(slog.DiscardHandler), func(_ context.Context, in in) (out, error) {
			return out{}, errs[in.Mode]
		})
	}
	cs := connectPipes(t, t.Context(), newDB(t), &Options{Logger: slog.New(slog.DiscardHandler), AddTools: addTools})
	for mode, want := range httpCode {
		got := fails(t, cs, "fail", map[string]any{"mode": mode})
		code, _, _ := strings.Cut(got, ":")
		if code != want {
			t.Errorf("%s: MCP code %q (%q), HTTP code %q", mode, code, got, want)
		}
	}
}

// TestTenantCannotReachAnotherTenantsThreads has tenant beta call every
// thread tool with alpha's ids over /mcp and checks that nothing of alpha's
// is read, changed, blocked or revealed: each answer is the answer for an
// id nobody has, beta can take each of alpha's ids in its own namespace,
// and alpha's threads read back as they were.
func TestTenantCannotReachAnotherTenantsThreads(t *testing.T) {
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
