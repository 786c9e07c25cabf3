package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// fakeOpenAI serves the Chat Completions API as OpenAI's wire format has
// it: the first request of a run is answered with a call of the tool
// "note", the second with text. It records each request's traceparent.
type fakeOpenAI struct {
	*httptest.Server
	mu          sync.Mutex
	n           int
	traceparent []string
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var body struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.n++
		n := f.n
		f.traceparent = append(f.traceparent, r.Header.Get("traceparent"))
		f.mu.Unlock()
		msg := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"note","arguments":"{\"text\":\"pack an umbrella\"}"}}]}`
		finish := "tool_calls"
		if n%2 == 0 {
			msg, finish = `{"role":"assistant","content":"Noted: pack an umbrella."}`, "stop"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":%d,"completion_tokens":7,"total_tokens":%d}}`,
			n, body.Model, msg, finish, 20+n, 27+n)
	}))
	t.Cleanup(f.Close)
	return f
}

// noteTool appends its text to the thread "notes" of db: a tool with
// store operations of its own.
func noteTool(db *thread.DB) agent.Tool {
	type in struct {
		Text string `json:"text"`
	}
	return agent.MustFunc("note", "Write a note down.", func(ctx context.Context, a in) (string, error) {
		th, err := db.Thread(ctx, "notes")
		if err != nil {
			return "", err
		}
		if _, err := th.Append(ctx, message.User(a.Text)); err != nil {
			return "", err
		}
		return "noted", nil
	})
}

// TestServeTraceTree runs an agent with a tool through loom serve (serveOn,
// with the openai provider against a local server that speaks its wire
// format) traced into an in-memory exporter, under an incoming
// traceparent, and checks the span tree: the request, the run under it,
// the model calls and the tool call under the run, the provider's HTTP
// requests under the model calls (carrying the trace to the provider),
// and store operations under the run and the tool; all in the incoming
// trace, with the GenAI attributes.
func TestServeTraceTree(t *testing.T) {
	fake := newFakeOpenAI(t)
	t.Setenv("OPENAI_BASE_URL", fake.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	db, err := openDB(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "loom.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db = db.WithTracerProvider(tp)
	for _, id := range []string{"th", "notes"} {
		if _, err := db.Create(t.Context(), thread.CreateOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := serveConfig{provider: "openai", model: "gpt-test", maxBody: 1 << 20, shutdown: 5 * time.Second,
		tracer: tp, tools: []agent.Tool{noteTool(db)}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveOn(ctx, l, db, nil, new(auth.Keys), cfg, "test", slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveOn: %v", err)
		}
	})
	exp.Reset()

	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		remote  = "00f067aa0ba902b7"
	)
	req, _ := http.NewRequest("POST", "http://"+l.Addr().String()+"/v1/threads/th/runs", strings.NewReader(`{"input":"Remind me of the umbrella."}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+remote+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(string(body), "Noted: pack an umbrella.") {
		t.Fatalf("run answered %s", body)
	}

	// The server span ends after the response is written: wait for it.
	// Not there in time, tree.one below says so.
	var spans tracetest.SpanStubs
	testwait.Within(5*time.Second, func() bool {
		spans = exp.GetSpans()
		return hasSpan(spans, "POST /v1/threads/{id}/runs")
	})
	tree := newSpanTree(t, spans)
	for _, sp := range spans {
		if got := sp.SpanContext.TraceID().String(); got != traceID {
			t.Errorf("span %q is in trace %s, not the incoming %s", sp.Name, got, traceID)
		}
	}
	request := tree.one("POST /v1/threads/{id}/runs")
	if got := request.Parent.SpanID().String(); got != remote || !request.Parent.IsRemote() {
		t.Errorf("the request's parent is %s (remote %v), want the incoming %s", got, request.Parent.IsRemote(), remote)
	}
	run := tree.one("invoke_agent loom")
	tree.childOf(run, request)
	tree.attrs(run, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "loom",
		"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test", "gen_ai.conversation.id": "th"})

	chats := tree.named("chat gpt-test")
	if len(chats) != 2 {
		t.Fatalf("%d model call spans, want 2; spans: %v", len(chats), tree.names())
	}
	for i, c := range chats {
		tree.childOf(c, run)
		tree.attrs(c, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test",
			"gen_ai.response.model": "gpt-test", "gen_ai.usage.output_tokens": "7"})
		in := tree.attr(c, "gen_ai.usage.input_tokens")
		if in != "21" && in != "22" {
			t.Errorf("model call %d has input tokens %q, want 21 or 22", i, in)
		}
	}
	tool := tree.one("execute_tool note")
	tree.childOf(tool, run)
	tree.attrs(tool, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "note", "gen_ai.tool.call.id": "call_1"})

	// The provider's HTTP requests are client spans under the model calls,
	// and the provider got their trace context.
	var clientSpans []tracetest.SpanStub
	for _, sp := range spans {
		if sp.SpanKind == trace.SpanKindClient && sp.InstrumentationScope.Name == "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp" {
			clientSpans = append(clientSpans, sp)
		}
	}
	if len(clientSpans) != 2 {
		t.Fatalf("%d provider HTTP spans, want 2; spans: %v", len(clientSpans), tree.names())
	}
	fake.mu.Lock()
	got := append([]string(nil), fake.traceparent...)
	fake.mu.Unlock()
	for i, cs := range clientSpans {
		tree.childOf(cs, chats[0], chats[1])
		want := "00-" + traceID + "-" + cs.SpanContext.SpanID().String() + "-01"
		found := false
		for _, tp := range got {
			found = found || tp == want
		}
		if !found {
			t.Errorf("the provider's request %d did not carry traceparent %s; it got %v", i, want, got)
		}
	}

	// Store operations: the run's own, and the tool's under the tool.
	storeUnder := func(parent tracetest.SpanStub) []string {
		var ops []string
		for _, sp := range spans {
			if sp.Parent.SpanID() == parent.SpanContext.SpanID() && strings.HasPrefix(sp.Name, "thread.") {
				ops = append(ops, sp.Name)
				if tree.attr(sp, "loom.store") != "sqlite" {
					t.Errorf("%s: loom.store %q, want sqlite", sp.Name, tree.attr(sp, "loom.store"))
				}
			}
		}
		return ops
	}
	if ops := storeUnder(run); len(ops) == 0 {
		t.Errorf("no store operations under the run; spans: %v", tree.names())
	}
	ops := storeUnder(tool)
	if len(ops) == 0 {
		t.Errorf("no store operations under the tool; spans: %v", tree.names())
	}
	for _, sp := range spans {
		if sp.Parent.SpanID() == tool.SpanContext.SpanID() && strings.HasPrefix(sp.Name, "thread.") && tree.attr(sp, "loom.thread.id") != "notes" {
			t.Errorf("the tool's %s is on thread %q, want notes", sp.Name, tree.attr(sp, "loom.thread.id"))
		}
	}

	// The tool's duration and the tokens reach /metrics.
	mresp, err := http.Get("http://" + l.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{`loom_tool_call_duration_seconds_count{tool="note"} 1`, `loom_model_tokens_total{direction="output",model="gpt-test"} 14`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// spanTree looks spans up by name and id.
type spanTree struct {
	t     *testing.T
	spans tracetest.SpanStubs
	byID  map[trace.SpanID]tracetest.SpanStub
}

func newSpanTree(t *testing.T, spans tracetest.SpanStubs) *spanTree {
	st := &spanTree{t: t, spans: spans, byID: map[trace.SpanID]tracetest.SpanStub{}}
	for _, sp := range spans {
		st.byID[sp.SpanContext.SpanID()] = sp
	}
	return st
}

func hasSpan(spans tracetest.SpanStubs, name string) bool {
	for _, sp := range spans {
		if sp.Name == name {
			return true
		}
	}
	return false
}

func (st *spanTree) names() []string {
	out := make([]string, len(st.spans))
	for i, sp := range st.spans {
		out[i] = sp.Name
	}
	return out
}

func (st *spanTree) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range st.spans {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

func (st *spanTree) one(name string) tracetest.SpanStub {
	st.t.Helper()
	got := st.named(name)
	if len(got) != 1 {
		st.t.Fatalf("%d spans %q, want 1; spans: %v", len(got), name, st.names())
	}
	return got[0]
}

// childOf checks that sp's parent is one of parents.
func (st *spanTree) childOf(sp tracetest.SpanStub, parents ...tracetest.SpanStub) {
	st.t.Helper()
	for _, p := range parents {
		if sp.Parent.SpanID() == p.SpanContext.SpanID() {
			return
		}
	}
	parent := "none"
	if p, ok := st.byID[sp.Parent.SpanID()]; ok {
		parent = p.Name
	}
	st.t.Errorf("span %q is under %q, not under %q", sp.Name, parent, parents[0].Name)
}

func (st *spanTree) attr(sp tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit()
		}
	}
	return ""
}

func (st *spanTree) attrs(sp tracetest.SpanStub, want map[string]string) {
	st.t.Helper()
	for k, v := range want {
		if got := st.attr(sp, k); got != v {
			st.t.Errorf("span %q: %s = %q, want %q", sp.Name, k, got, v)
		}
	}
}

// otlpSpan is a span as an OTLP collector received it.
type otlpSpan struct {
	name, traceID, service string
	attrs                  map[string]string
}

// otlpCollector is a local OTLP/HTTP endpoint that decodes the spans it
// is sent.
type otlpCollector struct {
	mu    sync.Mutex
	spans []otlpSpan
	bad   []string
}

// newOTLPCollector serves a collector for the test, and points the
// standard OTLP environment at it (and at nothing else that could change
// what arrives).
func newOTLPCollector(t *testing.T) *otlpCollector {
	col := &otlpCollector{}
	cs := httptest.NewServer(col)
	t.Cleanup(cs.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", cs.URL)
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	return col
}

// arrived returns the spans the collector got, by name and all of them,
// once it has checked that it could read every request, that every span came from
// service "loom", and that a span of each name in want arrived.
func (c *otlpCollector) arrived(t *testing.T, want ...string) (byName map[string]otlpSpan, all []otlpSpan) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bad) > 0 {
		t.Errorf("the collector got requests it could not read: %v", c.bad)
	}
	seen := map[string]otlpSpan{}
	var names []string
	for _, sp := range c.spans {
		if sp.service != "loom" {
			t.Errorf("span %q from service %q, want loom", sp.name, sp.service)
		}
		seen[sp.name] = sp
		names = append(names, sp.name)
	}
	for _, name := range want {
		if _, ok := seen[name]; !ok {
			t.Fatalf("no span %q arrived; got %v", name, names)
		}
	}
	return seen, slices.Clone(c.spans)
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		c.bad = append(c.bad, fmt.Sprintf("%s %s %s: %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err))
		http.Error(w, "want POST /v1/traces of protobuf", http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s := otlpSpan{name: sp.Name, traceID: hex.EncodeToString(sp.TraceId), service: service, attrs: map[string]string{}}
				for _, kv := range sp.Attributes {
					v := kv.GetValue()
					switch {
					case v.GetStringValue() != "":
						s.attrs[kv.Key] = v.GetStringValue()
					default:
						s.attrs[kv.Key] = fmt.Sprint(v.GetIntValue())
					}
				}
				c.spans = append(c.spans, s)
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// TestServeExportsOTLP starts the loom binary's serve with the standard
// OTLP environment pointing at a collector this test serves, runs the
// scripted agent under an incoming traceparent, stops the server (which
// flushes), and decodes what arrived: the request, the run, the model call
// and the store operations, in the incoming trace, from service "loom".
func TestServeExportsOTLP(t *testing.T) {
	col := newOTLPCollector(t)
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "loom.db"), "--provider", "scripted")

	const traceID = "0af7651916cd43dd8448eb211c80319c"
	do := func(method, path, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	do("POST", "/v1/threads", `{"id":"th"}`)
	do("POST", "/v1/threads/th/runs", `{"input":"hello"}`)
	s.stop(t)

	seen, all := col.arrived(t, "POST /v1/threads", "POST /v1/threads/{id}/runs", "invoke_agent loom", "chat", "thread.create", "thread.commit")
	for _, sp := range all {
		if sp.traceID != traceID {
			t.Errorf("span %q in trace %s, want the incoming %s", sp.name, sp.traceID, traceID)
		}
	}
	if got := seen["chat"].attrs["gen_ai.operation.name"]; got != "chat" {
		t.Errorf("the model call's gen_ai.operation.name is %q", got)
	}
	if got := seen["thread.commit"].attrs["loom.store"]; got != "sqlite" {
		t.Errorf("a commit's loom.store is %q, want sqlite", got)
	}
}

// TestChatExportsOTLP runs loom chat on piped input with the OTLP
// environment pointing at a local collector, and finds its turn, its model
// stream and its store operations in what arrives.
func TestChatExportsOTLP(t *testing.T) {
	col := newOTLPCollector(t)
	loomWith(t, loomOpts{stdin: "hello\n"}, "chat", "--store", sqliteStore(t), "--thread", "traced", "--title", "helper").ok(t)

	seen, _ := col.arrived(t, "invoke_agent helper", "chat", "thread.commit")
	if got := seen["chat"].attrs["gen_ai.provider.name"]; got != "scripted" {
		t.Errorf("the stream's provider is %q, want scripted", got)
	}
	if got := seen["invoke_agent helper"].attrs["gen_ai.conversation.id"]; got != "traced" {
		t.Errorf("the turn's conversation is %q, want traced", got)
	}
}
