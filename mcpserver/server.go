package mcpserver

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// Name is the server's implementation name, as clients see it.
const Name = "loom"

// instructions tell a connecting client what the server is for.
const instructions = `loom keeps conversation threads: durable, versioned message histories that fork, checkpoint and roll back without losing anything. ` +
	`Find threads with thread_list, read one with thread_get (its newest messages) or thread_view (what fits a model's token budget), ` +
	`write with thread_create and thread_append, branch with thread_fork, mark a point with thread_checkpoint, go back with thread_rollback, ` +
	`and see every version with thread_history. Messages use loom's wire format; {"role":"user","text":"…"} is accepted wherever messages are written.`

// Options configure the server. The zero value (or nil) means the defaults.
type Options struct {
	// Logger receives internal errors of tool calls and the SDK's warnings;
	// nil means slog.Default().
	Logger *slog.Logger
	// Version is the server's implementation version; "" means "dev".
	Version string
	// AddTools, when set, adds more tools (such as another package's, with
	// AddTool) to every server New makes, after the thread tools; Handler,
	// Serve and ServeStdio then serve them too.
	AddTools func(s *mcp.Server)
	// TracerProvider, when not nil, gets an "execute_tool <name>" span for
	// each tool call, a child of the span in the call's context (over
	// HTTP, the request's); a tool added with the SDK's Server.AddTool
	// rather than AddTool leaves it unnamed ("execute_tool"). nil means no
	// spans; the global provider is not used.
	TracerProvider trace.TracerProvider
	// Workflows, when set, adds the tools that run the workflows of its
	// registry in the background: workflow_start (by name),
	// workflow_input and workflow_resume. The caller closes it when it
	// shuts down (workflow.Runner.Close).
	Workflows *workflow.Runner
}

func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

func (o *Options) version() string {
	if o == nil || o.Version == "" {
		return "dev"
	}
	return o.Version
}

// New returns an MCP server whose tools work on db (see Register), scoped
// to the tenant of each call: the tenant that internal/auth put in the
// context (auth.Tenant) when there is one, else db's own tenant. Over HTTP
// the context is the request's (Handler serves statelessly, one session
// per request), so the tenant is that of the request's API key; over stdio
// it is the context given to Serve.
func New(db *thread.DB, opts *Options) *mcp.Server {
	logger := opts.logger()
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "loom threads", Version: opts.version()}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       quiet(logger),
	})
	if opts != nil && opts.TracerProvider != nil {
		s.AddReceivingMiddleware(traceTools(opts.TracerProvider))
	}
	t := register(s, db, logger)
	if opts != nil && opts.Workflows != nil {
		registerWorkflowRuns(s, t, opts.Workflows, logger)
	}
	if opts != nil && opts.AddTools != nil {
		opts.AddTools(s)
	}
	return s
}

// Handler serves New's server over MCP's streamable HTTP transport; mount
// it at /mcp. Authentication is the caller's: wrap the handler in
// internal/auth's Keys.Middleware, which puts each request's tenant in its
// context, and every tool call of that request is scoped to that tenant.
//
// The handler is stateless: each POST is a session of its own, handled with
// the request's context, so the tenant can never come from another
// request, and any of several loom processes sharing a store can answer any
// request. The server therefore sends no requests to the client and serves
// no standalone event stream (GET is 405). Cross-origin browser requests
// are refused (http.CrossOriginProtection), as are loopback requests with a
// foreign Host header (DNS rebinding).
//
// Every refusal is a JSON-RPC error object in application/json: the body
// is checked before the SDK reads it, and the SDK's plain-text refusals
// keep their status. What is no request at all (-32700, -32600, an
// unknown notification) is a 400; a request for an unknown method
// (-32601) or with params off its schema (-32602) is answered like any
// request, in a 200, before protocol 2026-07-28, and from it with a 404
// and a 400. Wrap
// the middleware in front of it in JSONRPCErrors to have its refusals
// (401, 413) answered so too.
func Handler(db *thread.DB, opts *Options) http.Handler {
	s := New(db, opts)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		Logger:    quiet(opts.logger()),
	})
	return jsonRPCErrors(http.NewCrossOriginProtection().Handler(h))
}

// ServeStdio serves New's server over stdin and stdout, as `loom mcp` does,
// until ctx ends or the client closes its end. It returns nil then, and an
// error only if the connection failed. Calls are scoped to the tenant that
// ctx carries (auth.WithTenant), else db's own. Messages are checked as
// IOTransport checks them.
func ServeStdio(ctx context.Context, db *thread.DB, opts *Options) error {
	return Serve(ctx, db, opts, IOTransport(os.Stdin, os.Stdout))
}

// Serve serves New's server over one connection of transport, such as an
// mcp.IOTransport on a pair of pipes, as ServeStdio does over stdin and
// stdout.
func Serve(ctx context.Context, db *thread.DB, opts *Options, transport mcp.Transport) error {
	ss, err := New(db, opts).Connect(ctx, transport, nil)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-done
		return nil
	case err := <-done:
		return err
	}
}

// quiet passes the SDK only its warnings and errors: at Info it logs every
// session, and over stateless HTTP every request is one.
func quiet(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

// minLevel is a slog.Handler that drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
