package main

// End-to-end tests: the real loom binary, built once, serving on a free port
// over SQLite and PostgreSQL, driven through the HTTP API, the MCP endpoint
// (with the MCP SDK's client) and the command line on the same store.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/testserver"
)

const (
	keyAcme  = "key-acme-0123456789abcdef"
	keyOther = "key-other-0123456789abcdef"
)

var built struct {
	once sync.Once
	path string
	err  error
}

// binary builds cmd/loom once per test run and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "loom-e2e-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "loom")
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// server is a running `loom serve`.
type server struct {
	url    string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func keysFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("acme:"+keyAcme+"\nother:"+keyOther+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startServer starts `loom serve` on a free loopback port and waits until
// it says where it listens.
func startServer(t *testing.T, store string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--store", store}, args...)...)
	cmd.Env = append(os.Environ(), "LOOM_API_KEYS=")
	pr, pw := io.Pipe()
	s := &server{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = io.MultiWriter(pw, s.stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait(); pw.Close() }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := listeningURL(sc.Text()); ok {
				found <- u
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case s.url = <-found:
	case err := <-s.done:
		t.Fatalf("loom serve exited: %v\n%s", err, s.stderr.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("loom serve did not start:\n%s", s.stderr.String())
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	return s
}

// stop sends SIGTERM and waits for a graceful exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("loom serve after SIGTERM: %v\n%s", err, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("loom serve did not stop:\n%s", s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), `"msg":"stopped"`) {
		t.Fatalf("no graceful stop:\n%s", s.stderr.String())
	}
}

// TestMain removes the binary the end-to-end tests built and stops the
// PostgreSQL and Redis servers they started.
func TestMain(m *testing.M) { testserver.Main(m, removeBinary) }

func removeBinary() {
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
}

// post sends a JSON body with key and returns the status, for goroutines
// (which must not call t.Fatal).
func post(url, key string, body any) (int, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// call makes an API request with key and decodes the JSON answer into out
// (when not nil); it returns the status and the headers.
func call(t *testing.T, method, url, key string, body any, out any, header ...string) (int, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, url, err, raw)
		}
	}
	return resp.StatusCode, resp.Header
}

func userMsg(text string) map[string]any {
	return map[string]any{"role": "user", "contents": []any{map[string]any{"type": "text", "text": text}}}
}

type threadOut struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

type messagesOut struct {
	Version  int64 `json:"version"`
	Messages []struct {
		ID       string `json:"id"`
		Role     string `json:"role"`
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	} `json:"messages"`
}

func (m messagesOut) texts() []string {
	var out []string
	for _, msg := range m.Messages {
		s := ""
		for _, c := range msg.Contents {
			s += c.Text
		}
		out = append(out, s)
	}
	return out
}

// cli runs the loom binary with args and returns its stdout.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "LOOM_STORE=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loom %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

type withKey struct {
	key  string
	base http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.base.RoundTrip(r)
}

func mcpSession(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:             url + "/mcp",
		HTTPClient:           &http.Client{Transport: withKey{key, http.DefaultTransport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestEndToEndSQLite(t *testing.T) {
	endToEnd(t, "sqlite://"+filepath.Join(t.TempDir(), "loom.db"))
}

func TestEndToEndPostgres(t *testing.T) {
	endToEnd(t, testserver.Postgres(t))
}

func endToEnd(t *testing.T, store string) {
	s := startServer(t, store, "--keys", keysFile(t), "--provider", "scripted")
	api := s.url + "/v1"

	// The API: create, append, read, a stale If-Match, view, fork.
	var th threadOut
	if code, _ := call(t, "POST", api+"/threads", keyAcme, map[string]any{"title": "e2e"}, &th); code != 201 {
		t.Fatalf("create: %d", code)
	}
	if code, _ := call(t, "POST", api+"/threads/"+th.ID+"/messages", keyAcme,
		map[string]any{"messages": []any{userMsg("hello from http")}}, nil); code != 201 {
		t.Fatalf("append: %d", code)
	}
	var msgs messagesOut
	code, hdr := call(t, "GET", api+"/threads/"+th.ID+"/messages", keyAcme, nil, &msgs)
	if code != 200 || len(msgs.Messages) != 1 || hdr.Get("ETag") == "" {
		t.Fatalf("read: %d %+v etag %q", code, msgs, hdr.Get("ETag"))
	}
	if code, _ := call(t, "POST", api+"/threads/"+th.ID+"/messages", keyAcme,
		map[string]any{"messages": []any{userMsg("stale")}}, nil, "If-Match", `"1"`); code != 412 {
		t.Fatalf("stale If-Match: %d, want 412", code)
	}
	var run struct {
		Text string `json:"text"`
	}
	if code, _ := call(t, "POST", api+"/threads/"+th.ID+"/runs", keyAcme, map[string]any{"input": "ping"}, &run); code != 200 || run.Text != "You said: ping" {
		t.Fatalf("run: %d %+v", code, run)
	}
	// A streamed run: Server-Sent Events, ending with the result.
	req, _ := http.NewRequest("POST", api+"/threads/"+th.ID+"/runs", strings.NewReader(`{"input":"stream me","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(events), "event: step") ||
		!strings.Contains(string(events), "event: result") || !strings.Contains(string(events), "You said: stream me") {
		t.Fatalf("stream: %s\n%s", resp.Header.Get("Content-Type"), events)
	}
	var fork threadOut
	if code, _ := call(t, "POST", api+"/threads/"+th.ID+"/fork", keyAcme, map[string]any{"at": msgs.Messages[0].ID}, &fork); code != 201 {
		t.Fatalf("fork: %d", code)
	}
	// Another tenant sees nothing of it.
	if code, _ := call(t, "GET", api+"/threads/"+th.ID, keyOther, nil, nil); code != 404 {
		t.Fatalf("other tenant: %d, want 404", code)
	}
	if code, _ := call(t, "GET", api+"/threads/"+th.ID, "", nil, nil); code != 401 {
		t.Fatalf("no key: %d, want 401", code)
	}

	// MCP, with the SDK's client, as the same tenant.
	cs := mcpSession(t, s.url, keyAcme)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "thread_append", Arguments: map[string]any{
		"id": th.ID, "messages": []any{map[string]any{"role": "user", "text": "hello from mcp"}}}})
	if err != nil || res.IsError {
		t.Fatalf("mcp append: %v %+v", err, res)
	}
	other := mcpSession(t, s.url, keyOther)
	if res, err := other.CallTool(t.Context(), &mcp.CallToolParams{Name: "thread_get", Arguments: map[string]any{"id": th.ID}}); err != nil || !res.IsError ||
		!strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "not_found:") {
		t.Fatalf("mcp get as another tenant: %v %+v", err, res)
	}

	// The command line, on the same store, beside the running server.
	cli(t, "threads", "append", th.ID, "hello from the cli", "--store", store, "--tenant", "acme")
	if out := cli(t, "threads", "list", "--json", "--store", store, "--tenant", "acme"); !strings.Contains(out, th.ID) || !strings.Contains(out, fork.ID) {
		t.Fatalf("cli list:\n%s", out)
	}
	if out := cli(t, "threads", "list", "--json", "--store", store, "--tenant", "other"); strings.Contains(out, th.ID) {
		t.Fatalf("cli list of another tenant shows the thread:\n%s", out)
	}

	// The server reads what all three wrote.
	msgs = messagesOut{}
	call(t, "GET", api+"/threads/"+th.ID+"/messages", keyAcme, nil, &msgs)
	want := "hello from http|ping|You said: ping|stream me|You said: stream me|hello from mcp|hello from the cli"
	if got := strings.Join(msgs.texts(), "|"); got != want {
		t.Fatalf("thread:\n%s\nwant:\n%s", got, want)
	}
	var health struct {
		Status string `json:"status"`
	}
	if code, _ := call(t, "GET", s.url+"/healthz", "", nil, &health); code != 200 || health.Status != "ok" {
		t.Fatalf("healthz: %d %+v", code, health)
	}
	// The web page needs no key (the API it calls does); the API's
	// unknown routes stay the API's.
	if code, h := call(t, "GET", s.url+"/", "", nil, nil); code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || h.Get("Content-Security-Policy") == "" {
		t.Fatalf("the web page: %d %v", code, h)
	}
	if code, _ := call(t, "GET", s.url+"/v1/nothing-here", keyAcme, nil, nil); code != 404 {
		t.Fatalf("an unknown API route: %d", code)
	}
	if code, _ := call(t, "POST", s.url+"/", "", nil, nil); code == 200 {
		t.Fatalf("POST / answered 200")
	}
	s.stop(t)
}

// TestServeWithoutKeysOnLoopback serves without keys: requests need none,
// and a request for another host name (a rebound DNS name) is refused.
func TestServeWithoutKeysOnLoopback(t *testing.T) {
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "open.db"))
	if code, _ := call(t, "POST", s.url+"/v1/threads", "", map[string]any{"id": "open"}, nil); code != 201 {
		t.Fatalf("create without a key: %d", code)
	}
	req, _ := http.NewRequest("GET", s.url+"/v1/threads/open", nil)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("foreign Host: %d, want 403", resp.StatusCode)
	}
	s.stop(t)
}

func TestServeRefusesNonLoopbackWithoutKeys(t *testing.T) {
	r := loomWith(t, loomOpts{}, "serve", "--addr", "0.0.0.0:0", "--store", "memory://")
	if r.code != 1 || !strings.Contains(r.stderr, "loopback only") {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
}

// TestTwoServersOnOnePostgresLoseNothing appends to the same threads
// through two loom serve processes sharing one PostgreSQL database.
func TestTwoServersOnOnePostgresLoseNothing(t *testing.T) {
	dsn := testserver.Postgres(t)
	keys := keysFile(t)
	servers := []*server{startServer(t, dsn, "--keys", keys), startServer(t, dsn, "--keys", keys)}
	const threads, writers, each = 4, 8, 25
	ids := make([]string, threads)
	for i := range ids {
		var th threadOut
		if code, _ := call(t, "POST", servers[0].url+"/v1/threads", keyAcme, map[string]any{"title": fmt.Sprint("shared ", i)}, &th); code != 201 {
			t.Fatalf("create: %d", code)
		}
		ids[i] = th.ID
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range each {
				srv := servers[(w+n)%2]
				id := ids[(w+n)%threads]
				body := map[string]any{"messages": []any{userMsg(fmt.Sprintf("w%d-%d", w, n))}}
				if code, err := post(srv.url+"/v1/threads/"+id+"/messages", keyAcme, body); code != 201 {
					t.Errorf("append through server %d: %d %v", (w+n)%2, code, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	seen := map[string]bool{}
	for _, id := range ids {
		var msgs messagesOut
		call(t, "GET", servers[1].url+"/v1/threads/"+id+"/messages", keyAcme, nil, &msgs)
		for _, text := range msgs.texts() {
			if seen[text] {
				t.Fatalf("%q stored twice", text)
			}
			seen[text] = true
		}
	}
	if len(seen) != writers*each {
		t.Fatalf("%d messages stored, %d acknowledged", len(seen), writers*each)
	}
	t.Logf("%d appends through two servers on one PostgreSQL in %v: %.0f appends/s", writers*each, elapsed, float64(writers*each)/elapsed.Seconds())
	for _, s := range servers {
		s.stop(t)
	}
}

func TestEndToEndWorklogSQLite(t *testing.T) {
	worklogEndToEnd(t, "sqlite://"+filepath.Join(t.TempDir(), "loom.db"))
}

func TestEndToEndWorklogPostgres(t *testing.T) {
	worklogEndToEnd(t, testserver.Postgres(t))
}

// toolError calls a tool that must fail and returns the error's text.
func toolError(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if !res.IsError {
		t.Fatalf("%s %v: succeeded, want a tool error", tool, args)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// worklogEndToEnd drives the work-item tools on /mcp of the served binary,
// in two tenants, over the store's own session records (serve derives
// --sessions from --store), checks them against /v1/items, and restarts the
// server on the same store.
func worklogEndToEnd(t *testing.T, store string) {
	keys := keysFile(t)
	s := startServer(t, store, "--keys", keys)

	type item struct {
		ID                string `json:"id"`
		Text              string `json:"text"`
		Status            string `json:"status"`
		SourceSession     string `json:"source_session"`
		ResolvedBySession string `json:"resolved_by_session"`
	}
	type started struct {
		SessionID          string `json:"session_id"`
		Project            string `json:"project"`
		OpenThreads        []item `json:"open_threads"`
		SessionsAggregated int    `json:"sessions_aggregated"`
	}
	type created struct {
		Thread item `json:"thread"`
	}
	type resolved struct {
		ResolvedThread item `json:"resolved_thread"`
	}
	type listed struct {
		Threads       []item `json:"threads"`
		TotalOpen     int    `json:"total_open"`
		TotalResolved int    `json:"total_resolved"`
	}
	type closed struct {
		SessionID   string `json:"session_id"`
		OpenThreads []item `json:"open_threads"`
	}
	textsOf := func(items []item) string {
		var out []string
		for _, it := range items {
			out = append(out, it.Text)
		}
		slices.Sort(out)
		return strings.Join(out, "|")
	}
	idsOf := func(items []item) string {
		var out []string
		for _, it := range items {
			out = append(out, it.ID+"/"+it.Status)
		}
		slices.Sort(out)
		return strings.Join(out, "|")
	}
	// httpItems lists a project's items, open and resolved, through the
	// HTTP API with key.
	httpItems := func(url, key string) listed {
		t.Helper()
		var l listed
		if code, _ := call(t, "GET", url+"/v1/items?project=loom&include_resolved=true", key, nil, &l); code != 200 {
			t.Fatalf("GET /v1/items: %d", code)
		}
		return l
	}

	acme, other := mcpSession(t, s.url, keyAcme), mcpSession(t, s.url, keyOther)
	tools, err := acme.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"thread_list", "list_threads", "create_thread", "resolve_thread", "session_start", "session_close"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v: no %s", names, want)
		}
	}

	st := callOK[started](t, acme, "session_start", map[string]any{"project": "loom"})
	if st.SessionID == "" || st.Project != "loom" || len(st.OpenThreads) != 0 {
		t.Fatalf("session_start: %+v", st)
	}
	in := map[string]any{"project": "loom", "session_id": st.SessionID}
	with := func(kv ...any) map[string]any {
		m := maps.Clone(in)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	notes := callOK[created](t, acme, "create_thread", with("text", "Release notes still to write"))
	flaky := callOK[created](t, acme, "create_thread", with("text", "Flaky test in the sqlite store"))
	callOK[created](t, acme, "create_thread", with("text", "Benchmark the remote store"))
	if notes.Thread.SourceSession != st.SessionID || notes.Thread.Status != "open" {
		t.Fatalf("create_thread: %+v", notes)
	}
	r := callOK[resolved](t, acme, "resolve_thread", with("text_match", "FLAKY test", "resolution_note", "fixed"))
	if r.ResolvedThread.ID != flaky.Thread.ID || r.ResolvedThread.ResolvedBySession != st.SessionID {
		t.Fatalf("resolve_thread: %+v", r)
	}
	l := callOK[listed](t, acme, "list_threads", map[string]any{"project": "loom"})
	if got := textsOf(l.Threads); got != "Benchmark the remote store|Release notes still to write" || l.TotalResolved != 1 {
		t.Fatalf("list_threads: %s %+v", got, l)
	}
	// They are the items the HTTP API lists, and what it creates the tools
	// list.
	all := callOK[listed](t, acme, "list_threads", map[string]any{"project": "loom", "include_resolved": true})
	if got, want := idsOf(httpItems(s.url, keyAcme).Threads), idsOf(all.Threads); got != want || len(all.Threads) != 3 {
		t.Fatalf("GET /v1/items lists %s, the tools %s", got, want)
	}
	var viaHTTP created
	if code, _ := call(t, "POST", s.url+"/v1/items?project=loom", keyAcme, map[string]any{"text": "Filed over HTTP", "session_id": st.SessionID}, &viaHTTP); code != 201 {
		t.Fatalf("POST /v1/items: %d", code)
	}
	if l := callOK[listed](t, acme, "list_threads", map[string]any{"project": "loom"}); !strings.Contains(textsOf(l.Threads), "Filed over HTTP") {
		t.Fatalf("list_threads after POST /v1/items: %+v", l.Threads)
	}
	callOK[resolved](t, acme, "resolve_thread", with("thread_id", viaHTTP.Thread.ID, "resolution_note", "done"))
	// The project selects the items: the default project has none.
	if l := callOK[listed](t, acme, "list_threads", nil); len(l.Threads) != 0 || l.TotalResolved != 0 {
		t.Fatalf("list_threads of the default project: %+v", l)
	}

	// Another tenant sees none of it, and keeps its own.
	if l := callOK[listed](t, other, "list_threads", map[string]any{"project": "loom", "include_resolved": true}); len(l.Threads) != 0 {
		t.Fatalf("another tenant lists %+v", l.Threads)
	}
	if msg := toolError(t, other, "resolve_thread", map[string]any{"project": "loom", "thread_id": notes.Thread.ID}); !strings.HasPrefix(msg, "not_found:") {
		t.Fatalf("another tenant resolves acme's item: %s", msg)
	}
	callOK[created](t, other, "create_thread", map[string]any{"project": "loom", "text": "The other tenant's item"})
	ost := callOK[started](t, other, "session_start", map[string]any{"project": "loom"})
	callOK[closed](t, other, "session_close", map[string]any{"project": "loom", "session_id": ost.SessionID})
	if l := callOK[listed](t, acme, "list_threads", map[string]any{"project": "loom"}); strings.Contains(textsOf(l.Threads), "other tenant") {
		t.Fatalf("acme lists another tenant's item: %+v", l.Threads)
	}
	if got := textsOf(httpItems(s.url, keyOther).Threads); got != "The other tenant's item" {
		t.Fatalf("GET /v1/items as the other tenant: %s", got)
	}

	// A shared server has no current session: session_close needs its id.
	if msg := toolError(t, acme, "session_close", map[string]any{"project": "loom"}); !strings.HasPrefix(msg, "invalid:") {
		t.Fatalf("session_close without session_id: %s", msg)
	}
	c := callOK[closed](t, acme, "session_close", with("open_threads", []any{"Write the migration guide"}))
	if c.SessionID != st.SessionID || textsOf(c.OpenThreads) != "Benchmark the remote store|Release notes still to write|Write the migration guide" {
		t.Fatalf("session_close: %+v", c)
	}
	s.stop(t)

	// After a restart on the same store: the items are there, and the
	// next session carries what the closed one left open.
	s = startServer(t, store, "--keys", keys)
	acme, other = mcpSession(t, s.url, keyAcme), mcpSession(t, s.url, keyOther)
	l = callOK[listed](t, acme, "list_threads", map[string]any{"project": "loom", "include_resolved": true})
	if got := textsOf(l.Threads); got != "Benchmark the remote store|Filed over HTTP|Flaky test in the sqlite store|Release notes still to write|Write the migration guide" ||
		l.TotalOpen != 3 || l.TotalResolved != 2 {
		t.Fatalf("list_threads after a restart: %s %+v", got, l)
	}
	if got, want := idsOf(httpItems(s.url, keyAcme).Threads), idsOf(l.Threads); got != want {
		t.Fatalf("after a restart GET /v1/items lists %s, the tools %s", got, want)
	}
	next := callOK[started](t, acme, "session_start", map[string]any{"project": "loom"})
	if next.SessionID == st.SessionID || next.SessionsAggregated != 1 ||
		textsOf(next.OpenThreads) != "Benchmark the remote store|Release notes still to write|Write the migration guide" {
		t.Fatalf("session_start after a restart: %+v", next)
	}
	onext := callOK[started](t, other, "session_start", map[string]any{"project": "loom"})
	if onext.SessionsAggregated != 1 || textsOf(onext.OpenThreads) != "The other tenant's item" {
		t.Fatalf("the other tenant's session_start after a restart: %+v", onext)
	}
	s.stop(t)
}
