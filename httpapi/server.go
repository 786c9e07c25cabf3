package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
	"github.com/loomthreads/loom/worklog"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes
// is 0.
const DefaultMaxBodyBytes = 8 << 20

// Options configure a Server.
type Options struct {
	// DB is the store of threads; it is required. Every request uses it
	// through DB.WithTenant with the tenant of its API key.
	DB *thread.DB
	// Keys are the API keys. nil, or no keys, means no authentication and
	// every request in the tenant "": serve such a server on loopback only.
	Keys *auth.Keys
	// Agent runs the threads' runs; nil answers runs with 501 (code
	// "unsupported"), and views that summarize likewise.
	Agent *agent.Agent
	// Chat is the model live conversations (/v1/conversations) stream
	// from; nil answers them with 501.
	Chat agent.ChatClient
	// ConversationIdle is how long a live conversation that nobody
	// listens to and that runs nothing stays open after its last request;
	// 0 means 10 minutes. Its thread stays: a request opens it again.
	ConversationIdle time.Duration
	// MaxBodyBytes caps a request body, imported documents included; 0
	// means DefaultMaxBodyBytes. A larger body is answered with 413 (code
	// "too_large") and changes nothing.
	MaxBodyBytes int64
	// AllowOrigins are the origins (scheme://host[:port]) whose browser
	// pages may call the API; "*" allows any. A request whose Origin is
	// neither listed nor the server's own is refused with 403. Empty
	// refuses every cross-origin request and sends no CORS headers.
	AllowOrigins []string
	// Heartbeat is how often a streamed run with nothing to send sends
	// a comment line, to keep proxies from closing the connection; zero
	// means DefaultHeartbeat, a negative value sends none.
	Heartbeat time.Duration
	// Worklog keeps the work items of /v1/items and /v1/sessions, each
	// tenant's apart; nil answers those routes with 501 (code
	// "unsupported").
	Worklog *worklog.Logs
	// Logger logs each request and every internal error; nil means
	// slog.Default(). A request's line is at INFO (WARN for a 5xx but
	// 501; DEBUG for a successful /healthz or /metrics), with trace_id
	// and span_id when the request has a span, or, untraced, when it
	// sends a W3C traceparent (the ids of the caller's span).
	Logger *slog.Logger
	// Version is reported by /healthz and GET /v1/server.
	Version string
	// Provider names the model provider of Agent and Chat ("scripted",
	// "openai", …), for GET /v1/server; "" says none, or not told.
	Provider string
	// TracerProvider, when not nil, gets a span for each request (by
	// otelhttp), named by its route, such as "POST /v1/threads/{id}/runs".
	// Its parent is the trace context of the request's headers, read by
	// Propagator; the request's context, which runs and store operations
	// see, carries the span; live conversations (/v1/conversations) make
	// their turn, model and tool spans with it. Give DB and Agent the same
	// provider for their spans. nil means no spans, at no cost; the global provider is not
	// used.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context of a request's headers when
	// TracerProvider is set; nil means W3C Trace Context (traceparent,
	// tracestate). The global propagator is not used.
	Propagator propagation.TextMapPropagator
	// Metrics are what /metrics serves; nil means NewMetrics(). Pass your
	// own to record into them from outside the server, such as the tool
	// calls of Agent (agent.Options.OnToolCall: Metrics.ObserveToolCall).
	Metrics *Metrics
	// Workflows runs the workflows of its registry that POST /v1/workflows
	// starts and POST /v1/workflows/{id}/resume resumes, in the
	// background; GET /v1/workflow-definitions lists them. nil answers
	// those two with 501 (code "unsupported") and lists none. The caller
	// closes it (workflow.Runner.Close) when it shuts the server down,
	// which cancels the runs under way: they resume at the next resume.
	// See the example of a main that serves its own workflows.
	Workflows *workflow.Runner
	// WorkflowPoll is how often a workflow's event stream
	// (GET /v1/workflows/{id}/events) reads the workflow's version on a
	// store that does not tell of other processes' writes (SQLite, JSON
	// files); 0 means 200 ms.
	WorkflowPoll time.Duration
}

// Server is loom's JSON API over HTTP: /v1/… for threads, runs and work
// items, /healthz and /metrics. It implements http.Handler and is safe for
// concurrent use.
type Server struct {
	db       *thread.DB
	keys     *auth.Keys
	agent    *agent.Agent
	chat     agent.ChatClient
	convIdle time.Duration
	lives    lives
	worklog  *worklog.Logs
	maxBody  int64
	// heartbeat is Options.Heartbeat with its default.
	heartbeat time.Duration
	origins   map[string]bool
	anyOrig   bool
	log       *slog.Logger
	version   string
	provider  string
	metrics   *Metrics
	// tracing are the otelhttp options of Options.TracerProvider; nil
	// traces nothing.
	tracing []otelhttp.Option
	// tp is Options.TracerProvider, for live conversations' spans.
	tp trace.TracerProvider
	// traces is whether the server makes spans (Options.TracerProvider).
	traces bool
	// tenants holds the DB of each tenant served so far (tenantDB): a
	// tenant string to a *thread.DB, s.db.WithTenant of it.
	tenants sync.Map
	// workflows is Options.Workflows; wfPoll Options.WorkflowPoll.
	workflows *workflow.Runner
	wfPoll    time.Duration
	// closing is closed by Close: the change feeds end.
	closing chan struct{}
	// feeds counts each tenant's open change feeds.
	feeds struct {
		mu sync.Mutex
		n  map[string]int
	}

	mux         *http.ServeMux
	api         http.Handler    // the mux behind the whole chain, authentication included
	public      http.Handler    // the mux behind the chain without authentication
	publicPaths map[string]bool // the paths of the public routes
}

// route is one entry of the route table: a ServeMux pattern and its
// handler, which returns its error for the error table to answer.
type route struct {
	pattern string
	handle  func(s *Server, w http.ResponseWriter, r *http.Request) error
	// public routes need no API key.
	public bool
	// query are the query parameters the route takes; any other is
	// refused (400), so that a misspelt one is not silently ignored. Each
	// is taken once, save those of repeatable.
	query []string
}

// repeatable are the query parameters that may be given more than once.
var repeatable = map[string]bool{"label": true}

// routes is the route table: the mux registers it, and the OpenAPI test
// checks that openapi.json describes exactly these routes.
var routes = []route{
	{pattern: "GET /v1/threads", handle: (*Server).listThreads, query: []string{"label", "kind", "limit", "cursor", "order", "internal"}},
	{pattern: "POST /v1/threads", handle: (*Server).createThread},
	{pattern: "POST /v1/threads/import", handle: (*Server).importThread, query: []string{"id"}},
	{pattern: "GET /v1/threads/{id}", handle: (*Server).getThread},
	{pattern: "PATCH /v1/threads/{id}", handle: (*Server).patchThread},
	{pattern: "DELETE /v1/threads/{id}", handle: (*Server).deleteThread},
	{pattern: "GET /v1/threads/{id}/messages", handle: (*Server).getMessages, query: []string{"limit", "version", "before"}},
	{pattern: "POST /v1/threads/{id}/messages", handle: (*Server).appendMessages},
	{pattern: "POST /v1/threads/{id}/view", handle: (*Server).view},
	{pattern: "POST /v1/threads/{id}/fork", handle: (*Server).fork},
	{pattern: "POST /v1/threads/{id}/copy", handle: (*Server).copyThread},
	{pattern: "GET /v1/threads/{id}/history", handle: (*Server).history, query: []string{"limit", "before"}},
	{pattern: "GET /v1/threads/{id}/family", handle: (*Server).family},
	{pattern: "GET /v1/threads/{id}/diff", handle: (*Server).diff, query: []string{"version", "to", "to_version", "limit"}},
	{pattern: "GET /v1/threads/{id}/events", handle: (*Server).threadEvents},
	{pattern: "GET /v1/events", handle: (*Server).events},
	{pattern: "GET /v1/search", handle: (*Server).search, query: []string{"q", "limit", "before"}},
	{pattern: "GET /v1/threads/{id}/checkpoints", handle: (*Server).listCheckpoints},
	{pattern: "POST /v1/threads/{id}/checkpoints", handle: (*Server).createCheckpoint},
	{pattern: "DELETE /v1/threads/{id}/checkpoints/{name}", handle: (*Server).deleteCheckpoint},
	{pattern: "POST /v1/threads/{id}/rollback", handle: (*Server).rollback},
	{pattern: "POST /v1/threads/{id}/reset", handle: (*Server).reset},
	{pattern: "GET /v1/threads/{id}/export", handle: (*Server).export, query: []string{"history"}},
	{pattern: "POST /v1/threads/{id}/runs", handle: (*Server).run},
	{pattern: "GET /v1/conversations", handle: (*Server).listConversations, query: []string{"limit", "cursor"}},
	{pattern: "POST /v1/conversations", handle: (*Server).createConversation},
	{pattern: "GET /v1/conversations/{id}", handle: (*Server).getConversation},
	{pattern: "POST /v1/conversations/{id}/commands", handle: (*Server).conversationCommand},
	{pattern: "GET /v1/conversations/{id}/events", handle: (*Server).conversationEvents},
	{pattern: "GET /v1/workflows", handle: (*Server).listWorkflows, query: []string{"limit", "cursor"}},
	{pattern: "POST /v1/workflows", handle: (*Server).startWorkflow},
	{pattern: "GET /v1/workflow-definitions", handle: (*Server).workflowDefinitions},
	{pattern: "GET /v1/workflows/{id}", handle: (*Server).getWorkflow, query: []string{"version"}},
	{pattern: "DELETE /v1/workflows/{id}", handle: (*Server).deleteWorkflow},
	{pattern: "GET /v1/workflows/{id}/history", handle: (*Server).workflowHistory, query: []string{"limit", "before"}},
	{pattern: "GET /v1/workflows/{id}/checkpoints", handle: (*Server).workflowCheckpoints},
	{pattern: "POST /v1/workflows/{id}/checkpoints", handle: (*Server).checkpointWorkflow},
	{pattern: "POST /v1/workflows/{id}/restore", handle: (*Server).restoreWorkflow},
	{pattern: "POST /v1/workflows/{id}/fork", handle: (*Server).forkWorkflow},
	{pattern: "POST /v1/workflows/{id}/input", handle: (*Server).workflowInput},
	{pattern: "POST /v1/workflows/{id}/edits", handle: (*Server).editWorkflow},
	{pattern: "POST /v1/workflows/{id}/resume", handle: (*Server).resumeWorkflow},
	{pattern: "GET /v1/workflows/{id}/events", handle: (*Server).workflowEvents, query: []string{"after"}},
	{pattern: "GET /v1/workflows/{id}/at", handle: (*Server).workflowAt, query: []string{"checkpoint", "version", "last"}},
	{pattern: "GET /v1/items", handle: (*Server).listItems, query: []string{"project", "status", "include_resolved"}},
	{pattern: "POST /v1/items", handle: (*Server).createItem, query: []string{"project"}},
	{pattern: "POST /v1/items/resolve", handle: (*Server).resolveItem, query: []string{"project"}},
	{pattern: "GET /v1/items/{id}", handle: (*Server).getItem, query: []string{"project"}},
	{pattern: "GET /v1/sessions", handle: (*Server).listSessions, query: []string{"project", "limit"}},
	{pattern: "POST /v1/sessions", handle: (*Server).startSession, query: []string{"project"}},
	{pattern: "POST /v1/sessions/{id}/close", handle: (*Server).closeSession, query: []string{"project"}},
	{pattern: "POST /v1/langgraph/checkpoints", handle: (*Server).lgPut},
	{pattern: "POST /v1/langgraph/writes", handle: (*Server).lgPutWrites},
	{pattern: "GET /v1/langgraph/checkpoint", handle: (*Server).lgGet, query: []string{"thread_id", "checkpoint_ns", "checkpoint_id", "messages_n", "messages_h"}},
	{pattern: "POST /v1/langgraph/checkpoints/search", handle: (*Server).lgList},
	{pattern: "DELETE /v1/langgraph/threads/{thread_id}", handle: (*Server).lgDeleteThread},
	{pattern: "POST /v1/langgraph/threads/{thread_id}/copy", handle: (*Server).lgCopyThread},
	{pattern: "POST /v1/langgraph/prune", handle: (*Server).lgPrune},
	{pattern: "POST /v1/langgraph/runs/delete", handle: (*Server).lgDeleteRuns},
	{pattern: "POST /v1/langgraph/delta-history", handle: (*Server).lgDeltaHistory},
	{pattern: "GET /v1/openapi.json", handle: (*Server).openAPI},
	{pattern: "GET /v1/server", handle: (*Server).serverInfo},
	{pattern: "GET /healthz", handle: (*Server).healthz, public: true},
	{pattern: "GET /metrics", handle: (*Server).serveMetrics, public: true},
}

// New returns a Server on opts.DB. It panics if opts.DB is nil.
func New(opts Options) *Server {
	if opts.DB == nil {
		panic("httpapi: Options.DB is nil")
	}
	s := &Server{
		db: opts.DB, keys: opts.Keys, agent: opts.Agent, chat: opts.Chat, worklog: opts.Worklog, maxBody: opts.MaxBodyBytes,
		origins: map[string]bool{}, log: opts.Logger, version: opts.Version, provider: opts.Provider, metrics: opts.Metrics,
		mux: http.NewServeMux(), publicPaths: map[string]bool{}, closing: make(chan struct{}),
		workflows: opts.Workflows, wfPoll: opts.WorkflowPoll,
	}
	if s.wfPoll <= 0 {
		s.wfPoll = defaultWorkflowPoll
	}
	s.feeds.n = map[string]int{}
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.convIdle = opts.ConversationIdle; s.convIdle <= 0 {
		s.convIdle = 10 * time.Minute
	}
	switch s.heartbeat = opts.Heartbeat; {
	case s.heartbeat == 0:
		s.heartbeat = DefaultHeartbeat
	case s.heartbeat < 0:
		s.heartbeat = 0
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	for _, o := range opts.AllowOrigins {
		if o == "*" {
			s.anyOrig = true
		}
		s.origins[strings.TrimSuffix(o, "/")] = true
	}
	for _, rt := range routes {
		s.mux.Handle(rt.pattern, s.endpoint(rt))
		if rt.public {
			_, path, _ := strings.Cut(rt.pattern, " ")
			s.publicPaths[path] = true
		}
	}
	// A span is named by its route before the chain runs: a traced request
	// is matched once, by routed, and the chain reads the route it found.
	traced := opts.TracerProvider != nil
	if traced {
		s.tp, s.traces = opts.TracerProvider, true
		s.tracing = tracing(opts.TracerProvider, opts.Propagator)
	}
	s.api = s.chain(http.HandlerFunc(s.dispatch), true, traced)
	s.public = s.chain(http.HandlerFunc(s.dispatch), false, traced)
	if traced {
		s.api, s.public = s.routed(s.traced(s.api)), s.routed(s.traced(s.public))
	}
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.publicPaths[r.URL.Path] {
		s.public.ServeHTTP(w, r)
		return
	}
	s.api.ServeHTTP(w, r)
}

// Protect wraps h in the middleware of the API: request ids, logging and
// metrics, CORS, the body limit and authentication, so that h sees only
// requests with a valid key (when keys are configured) and finds their
// tenant with auth.Tenant(r.Context()). The route in logs and metrics is the
// pattern of the mux that calls the result, such as "/mcp".
func (s *Server) Protect(h http.Handler) http.Handler {
	return s.traced(s.chain(h, true, true))
}

// Metrics returns the server's metrics, for handlers mounted beside it to
// count their thread operations in.
func (s *Server) Metrics() *Metrics { return s.metrics }

// endpoint adapts a route's handler: it names the route for the logs and
// metrics, and answers the handler's error through the error table.
func (s *Server) endpoint(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := infoOf(r.Context()); info != nil {
			info.route = rt.pattern
		}
		err := checkQuery(r.URL.RawQuery, rt.query)
		if err == nil {
			err = rt.handle(s, w, r)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// checkQuery refuses a query that is not well formed or not UTF-8, a
// parameter that is not one of names, and one given twice that is not
// repeatable: url.Values would drop the first, and ignore the rest.
func checkQuery(raw string, names []string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return invalidf("query %q: not a URL query (%v)", clip(raw), err)
	}
	for k, vs := range q {
		if !slices.Contains(names, k) {
			if len(names) == 0 {
				return invalidf("query parameter %q: this route takes no query parameters", clip(k))
			}
			return invalidf("query parameter %q: this route takes only %s", clip(k), strings.Join(names, ", "))
		}
		if len(vs) > 1 && !repeatable[k] {
			return invalidf("query parameter %q: given %d times, taken once", k, len(vs))
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return invalidf("query parameter %q: not UTF-8", k)
			}
		}
	}
	return nil
}

// dispatch serves r from the mux, answering requests that match no route
// with the JSON error shape (404, or 405 with an Allow header) rather than
// the mux's plain text.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	info := infoOf(r.Context())
	if sw, ok := w.(*statusWriter); ok && info != nil && info.route == "" && sw.info == info {
		// Not matched yet (observe leaves it to the mux): the mux matches
		// r once, and serves it, unless no route matches and it answers
		// itself, which sw catches. Then the answer is as below.
		sw.catching = true
		s.mux.ServeHTTP(w, r)
		sw.catching = false
		if sw.caught == nil {
			return
		}
		info = nil
	}
	// A traced request was matched before the chain (routed): its route
	// is the pattern, "" when none matched.
	var pattern string
	if info != nil {
		pattern = info.route
	} else {
		_, pattern = s.mux.Handler(r)
	}
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	cw := &captureWriter{header: http.Header{}}
	s.mux.ServeHTTP(cw, r)
	switch {
	case cw.code == http.StatusMethodNotAllowed:
		w.Header().Set("Allow", cw.header.Get("Allow"))
		s.writeError(w, r, errf(http.StatusMethodNotAllowed, "method_not_allowed", "method %s not allowed on %s", r.Method, r.URL.Path))
	case cw.code >= 300 && cw.code < 400:
		// The mux redirects unclean paths ("/v1/threads/../x").
		w.Header().Set("Location", cw.header.Get("Location"))
		w.WriteHeader(cw.code)
	default:
		s.writeError(w, r, errf(http.StatusNotFound, "not_found", "no route for %s %q", r.Method, clip(r.URL.Path)))
	}
}

// captureWriter records what the mux's own 404, 405 and redirect handlers
// write, so that dispatch can answer in JSON instead.
type captureWriter struct {
	header http.Header
	code   int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *captureWriter) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(p), nil
}

//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	return s.metrics.serve(w, r)
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
