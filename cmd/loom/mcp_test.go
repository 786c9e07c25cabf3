package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMCPServesThreadToolsOnStdio(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "mcp.db")
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	var stderr bytes.Buffer
	e := &Env{Stdin: serverR, Stdout: serverW, Stderr: &stderr,
		Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- e.Main(ctx, []string{"mcp", "--store", store}) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "thread_create", Arguments: map[string]any{
		"id": "th_mcp", "title": "over stdio", "messages": []any{map[string]any{"role": "user", "text": "hello"}}}})
	if err != nil || res.IsError {
		t.Fatalf("create: %v %+v", err, res)
	}
	cs.Close()
	clientW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("loom mcp exited %d: %s", code, stderr.String())
	}
	// The thread is in the store, where the rest of loom sees it.
	r := loom(t, "threads", "show", "th_mcp", "--store", store)
	if r.code != 0 || !strings.Contains(r.stdout, "hello") {
		t.Fatalf("show: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// worklogMCP starts `loom mcp --worklog --dir dir` on the command's own
// streams and connects the SDK's client to it; stop closes the client and
// checks that the command exited 0.
func worklogMCP(t *testing.T, dir string) (cs *mcp.ClientSession, stop func()) {
	t.Helper()
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	var stderr bytes.Buffer
	e := &Env{Stdin: serverR, Stdout: serverW, Stderr: &stderr,
		Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() { done <- e.Main(ctx, []string{"mcp", "--worklog", "--dir", dir}) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return cs, func() {
		t.Helper()
		defer cancel()
		cs.Close()
		clientW.Close()
		if code := <-done; code != 0 {
			t.Fatalf("loom mcp --worklog exited %d: %s", code, stderr.String())
		}
	}
}

// callOK calls a tool that must succeed and decodes its structured content.
func callOK[Out any](t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) Out {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %v", tool, res.Content)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out Out
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, b)
	}
	return out
}

type wlItem struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Status string `json:"status"`
}

type wlPerf struct {
	TargetMS    int     `json:"target_ms"`
	MeetsTarget bool    `json:"meets_target"`
	LatencyMS   float64 `json:"latency_ms"`
	ResultCount int     `json:"result_count"`
}

func TestMCPServesWorklogToolsOnStdio(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".gitmem")
	cs, stop := worklogMCP(t, dir)

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"create_thread", "list_threads", "resolve_thread", "session_close", "session_start"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want only %v", names, want)
	}

	type created struct {
		Thread      wlItem `json:"thread"`
		Performance wlPerf `json:"performance"`
	}
	a := callOK[created](t, cs, "create_thread", map[string]any{"text": "Release notes still to write"})
	b := callOK[created](t, cs, "create_thread", map[string]any{"text": "Flaky test in the sqlite store"})
	if !strings.HasPrefix(a.Thread.ID, "t-") || a.Thread.Status != "open" || a.Thread.ID == b.Thread.ID {
		t.Fatalf("created %+v and %+v", a.Thread, b.Thread)
	}

	type listed struct {
		Threads     []wlItem `json:"threads"`
		TotalOpen   int      `json:"total_open"`
		Performance wlPerf   `json:"performance"`
	}
	l := callOK[listed](t, cs, "list_threads", nil)
	if len(l.Threads) != 2 || l.TotalOpen != 2 || l.Performance.MeetsTarget != (l.Performance.LatencyMS <= 100) || l.Performance.TargetMS != 100 {
		t.Fatalf("list_threads: %+v", l)
	}

	type resolved struct {
		ResolvedThread wlItem `json:"resolved_thread"`
		Performance    wlPerf `json:"performance"`
	}
	r := callOK[resolved](t, cs, "resolve_thread", map[string]any{"text_match": "release NOTES", "resolution_note": "written"})
	if r.ResolvedThread.ID != a.Thread.ID || r.ResolvedThread.Status != "resolved" {
		t.Fatalf("resolve_thread: %+v", r)
	}
	// Errors are tool errors with mcpserver's codes.
	for args, want := range map[string]string{"nothing matches this": "not_found: ", "": "invalid: "} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "resolve_thread", Arguments: map[string]any{"text_match": args}})
		if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, want) {
			t.Errorf("resolve_thread %q: %v %+v, want %q", args, err, res, want)
		}
	}

	type closed struct {
		SessionID   string   `json:"session_id"`
		OpenThreads []wlItem `json:"open_threads"`
		Performance wlPerf   `json:"performance"`
	}
	c := callOK[closed](t, cs, "session_close", map[string]any{"open_threads": []any{"Benchmark the remote store"}})
	if c.SessionID == "" || len(c.OpenThreads) != 2 {
		t.Fatalf("session_close: %+v", c)
	}
	stop()

	// A second run of the command, a new session: the items are carried.
	cs, stop = worklogMCP(t, dir)
	defer stop()
	type started struct {
		SessionID          string   `json:"session_id"`
		OpenThreads        []wlItem `json:"open_threads"`
		SessionsAggregated int      `json:"sessions_aggregated"`
		Performance        wlPerf   `json:"performance"`
	}
	st := callOK[started](t, cs, "session_start", nil)
	var texts []string
	for _, it := range st.OpenThreads {
		texts = append(texts, it.Text)
	}
	slices.Sort(texts)
	if want := []string{"Benchmark the remote store", "Flaky test in the sqlite store"}; !slices.Equal(texts, want) ||
		st.SessionsAggregated != 1 || st.SessionID == "" || st.SessionID == c.SessionID || st.Performance.MeetsTarget != (st.Performance.LatencyMS <= 100) {
		t.Fatalf("session_start: %+v", st)
	}
}
