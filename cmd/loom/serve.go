package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/anthropic"
	"github.com/loomthreads/loom/examples/workflow/trip"
	"github.com/loomthreads/loom/foundry"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/mcpserver"
	"github.com/loomthreads/loom/openai"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/telemetry"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/webui"
	"github.com/loomthreads/loom/workflow"
	"github.com/loomthreads/loom/worklog"
)

// serveConfig is what `loom serve` runs with.
type serveConfig struct {
	addr            string
	keysFile        string
	origins         []string
	provider, model string
	foundry         foundryFlags
	maxBody         int64
	shutdown        time.Duration
	// retention is the store-wide default retention, applied every
	// gcEvery (0: never) in the background.
	retention retentionFlags
	gcEvery   time.Duration
	// tracer gets the spans of requests, runs, model calls, tool calls
	// and store operations; nil traces nothing (telemetry.FromEnv).
	tracer trace.TracerProvider
	// tools are the agent's tools. The command gives it none; tests do.
	tools []agent.Tool
	// exampleWorkflows is --example-workflows: the examples' workflows
	// (examples/workflow/trip) are registered, for POST /v1/workflows and
	// the MCP tool workflow_start.
	exampleWorkflows bool
	// workflows are registered besides; tests give some.
	workflows func(*workflow.Registry) error
}

// workflowRunner returns the runner of the workflows cfg registers, or
// nil when it registers none.
func (cfg serveConfig) workflowRunner(log *slog.Logger) (*workflow.Runner, error) {
	if !cfg.exampleWorkflows && cfg.workflows == nil {
		return nil, nil
	}
	reg := workflow.NewRegistry()
	if cfg.exampleWorkflows {
		if err := trip.Register(reg); err != nil {
			return nil, err
		}
	}
	if cfg.workflows != nil {
		if err := cfg.workflows(reg); err != nil {
			return nil, err
		}
	}
	return workflow.NewRunner(reg, &workflow.RunnerOptions{Logger: log}), nil
}

// isLoopback reports whether addr's host only ever listens on loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// foundryFlags name the Foundry project and agent of --provider foundry
// and foundry-classic; the environment fills what they leave empty.
type foundryFlags struct{ endpoint, agent string }

func (f *foundryFlags) flags(fs *pflag.FlagSet) {
	fs.StringVar(&f.endpoint, "foundry-endpoint", "", "the Foundry project `URL` (https://<resource>.services.ai.azure.com/api/projects/<project>); $AZURE_AI_PROJECT_ENDPOINT")
	fs.StringVar(&f.agent, "foundry-agent", "", "the Foundry `AGENT`: its name (foundry; $AZURE_AI_AGENT_NAME) or id (foundry-classic; $AZURE_AI_AGENT_ID)")
}

// newClient builds the chat client of the provider named on the command
// line; "" means none. Its HTTP requests are traced with tp (nil: not),
// and carry the trace context to the provider.
func newClient(provider, model string, f foundryFlags, tp trace.TracerProvider) (agent.ChatClient, error) {
	var client agent.ChatClient
	hc := telemetry.HTTPClient(tp, nil)
	switch provider {
	case "foundry":
		return foundry.NewCurrent(foundry.Options{Endpoint: f.endpoint, Agent: f.agent, HTTPClient: hc})
	case "foundry-classic":
		return foundry.NewClassic(foundry.ClassicOptions{Endpoint: f.endpoint, Agent: f.agent, HTTPClient: hc})
	case "", "none":
		return nil, nil
	case "scripted":
		client = scripted.Demo()
	case "openai":
		client = openai.NewChat(openai.Options{Model: model, HTTPClient: hc})
	case "responses":
		client = openai.NewResponses(openai.ResponsesOptions{Options: openai.Options{Model: model, HTTPClient: hc}})
	case "anthropic":
		client = anthropic.New(anthropic.Options{Model: model, HTTPClient: hc})
	default:
		return nil, fmt.Errorf("--provider %q: want scripted, openai, responses, anthropic, foundry or foundry-classic", provider)
	}
	return client, nil
}

// provider is the name GET /v1/server reports: --provider's, "" without
// a model ("none" says the same).
func provider(name string, client agent.ChatClient) string {
	if client == nil {
		return ""
	}
	return name
}

// serveOn serves db on l until ctx ends, then shuts down gracefully: it
// stops accepting, lets the requests in flight (accepted writes) finish for
// up to cfg.shutdown, and returns. Requests, runs, model and tool calls
// are traced with cfg.tracer; db's operations are if the caller gave it
// the same provider (DB.WithTracerProvider). It logs "listening" (with
// the url), "shutting down" and "stopped" to log, like every other line.
// wl keeps the work items of /v1/items, /v1/sessions and the work-item
// tools of /mcp; nil serves none.
func serveOn(ctx context.Context, l net.Listener, db *thread.DB, wl *worklog.Logs, keys *auth.Keys, cfg serveConfig, version string, log *slog.Logger) error {
	defer l.Close()
	if !keys.Enabled() && !isLoopback(l.Addr().String()) {
		return fmt.Errorf("without API keys loom serves on loopback only, not %s: give --keys FILE or $LOOM_API_KEYS", l.Addr())
	}
	client, err := newClient(cfg.provider, cfg.model, cfg.foundry, cfg.tracer)
	if err != nil {
		return err
	}
	runner, err := cfg.workflowRunner(log)
	if err != nil {
		return err
	}
	if runner != nil {
		// The runs under way are cancelled before the store closes: their
		// steps cut short run again at the next resume.
		defer runner.Close()
	}
	metrics := httpapi.NewMetrics()
	var ag *agent.Agent
	if client != nil {
		ag = agent.New(client, &agent.Options{Name: "loom", Model: cfg.model, Tools: cfg.tools,
			TracerProvider: cfg.tracer, OnToolCall: metrics.ObserveToolCall})
	}
	api := httpapi.New(httpapi.Options{DB: db, Keys: keys, Agent: ag, Chat: client, MaxBodyBytes: cfg.maxBody,
		AllowOrigins: cfg.origins, Worklog: wl, Logger: log, Version: version, Provider: provider(cfg.provider, client),
		TracerProvider: cfg.tracer, Metrics: metrics, Workflows: runner})
	mcpOpts := &mcpserver.Options{Logger: log, Version: version, TracerProvider: cfg.tracer, Workflows: runner}
	if wl != nil {
		mcpOpts.AddTools = worklogTools(db, wl, log)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	// What the API's middleware refuses (a key, a body over --max-body)
	// is a JSON-RPC error on /mcp too.
	mux.Handle("/mcp", mcpserver.JSONRPCErrors(api.Protect(mcpserver.Handler(db, mcpOpts))))
	// OpenAI's Conversations and Responses APIs, for the OpenAI SDKs: the
	// same keys, tenants and limits, errors in OpenAI's shape.
	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{
		DB: db, Chat: client, Model: cfg.model, Logger: log}))))
	// The web page: index.html at / and its assets. It holds no data and
	// needs no key; the API it calls does.
	ui := webui.Handler()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /assets/", ui)
	var h http.Handler = mux
	if !keys.Enabled() {
		// Loopback is the only protection then: a web page whose name is
		// re-pointed at 127.0.0.1 (DNS rebinding) must not get in.
		h = loopbackHostOnly(h)
	}
	var inflight sync.WaitGroup
	// Requests run on base: at the end of a shutdown's grace period it is
	// cancelled, so that runs still going commit what they completed and
	// end before the store is closed.
	base, stopBase := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBase()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inflight.Add(1)
			defer inflight.Done()
			h.ServeHTTP(w, r)
		}),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      10 * time.Minute, // runs stream for as long as the model writes
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if cfg.gcEvery > 0 {
		gcCtx, stopGC := context.WithCancel(base)
		var gcDone sync.WaitGroup
		gcDone.Go(func() { collect(gcCtx, db, cfg.gcEvery, log) })
		// Stopped before the store closes; a GC cut short is finished by
		// the next.
		defer func() { stopGC(); gcDone.Wait() }()
	}
	log.Info("listening", "url", "http://"+l.Addr().String(), "version", version, "provider", provider(cfg.provider, client))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", cfg.shutdown.String())
	// Stop accepting; let the requests in flight finish (accepted writes
	// complete whatever their clients do) for the grace period; then cancel
	// what is left and wait for it to return.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdown)
	defer cancel()
	api.Close() // live conversations stop, and their event streams end
	if runner != nil {
		runner.Close() // workflow runs are cancelled, and let their leases go
	}
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		stopBase()
		srv.Close()
		inflight.Wait()
		err = nil
	}
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		log.Error("stopped", "err", err)
	} else {
		log.Info("stopped")
	}
	return err
}

// startTracing returns the tracer provider of the environment: traces go
// by OTLP when the standard variables name an endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, …; telemetry.FromEnv), and otherwise tp
// is nil and nothing is traced. stop flushes what was traced, but never
// hangs a shutdown on an unreachable collector for more than 5 seconds.
func startTracing(ctx context.Context, log *slog.Logger) (tp trace.TracerProvider, stop func(), err error) {
	tp, shutdown, err := telemetry.FromEnv(ctx, "loom", moduleVersion())
	if err != nil {
		return nil, nil, err
	}
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}, nil
}

// loopbackHostOnly refuses requests whose Host header is not a loopback
// name or address.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if ip := net.ParseIP(host); !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":"forbidden","message":"without API keys loom answers only requests addressed to a loopback host"}}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeCommand serves the HTTP API (/v1), the MCP endpoint (/mcp), /healthz
// and /metrics on one port.
type ServeCommand struct {
	base
	cfg serveConfig
	// listen opens the listener; nil means net.Listen. Tests inject one.
	listen func(addr string) (net.Listener, error)
	// logLevel is --log-level; "" takes $LOOM_LOG_LEVEL, else info.
	logLevel string
}

// level returns the level of --log-level, else of $LOOM_LOG_LEVEL,
// else INFO.
func (c *ServeCommand) level() (slog.Level, error) {
	name, from := c.logLevel, "--log-level"
	if name == "" {
		name, from = c.Getenv("LOOM_LOG_LEVEL"), "$LOOM_LOG_LEVEL"
	}
	switch strings.ToLower(name) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, c.usage("%s %q: want debug, info, warn or error", from, name)
}

// Flags implements Command.
func (c *ServeCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.StringVar(&c.cfg.addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&c.cfg.keysFile, "keys", "", "file of API keys, one tenant:key a line (also $LOOM_API_KEYS); a line without a tenant, or a key for two tenants, stops the start; without keys loom listens on loopback only")
	fs.Func("allow-origin", "an `ORIGIN` allowed to make cross-origin requests (repeatable)", func(s string) error {
		c.cfg.origins = append(c.cfg.origins, s)
		return nil
	})
	fs.StringVar(&c.cfg.provider, "provider", "", "chat provider for runs: scripted (a demo that echoes), openai, responses, anthropic, foundry, foundry-classic; keys from the environment")
	fs.StringVar(&c.cfg.model, "model", "", "model for runs (the provider's default when empty)")
	c.cfg.foundry.flags(fs)
	fs.Int64Var(&c.cfg.maxBody, "max-body", 8<<20, "largest request body, in bytes")
	fs.DurationVar(&c.cfg.shutdown, "shutdown-timeout", 30*time.Second, "how long a shutdown waits for requests in flight")
	c.cfg.retention.flags(fs)
	fs.DurationVar(&c.cfg.gcEvery, "gc-every", 10*time.Minute, "apply retention (what loom gc does) every `DURATION` in the background; 0 never")
	fs.BoolVar(&c.cfg.exampleWorkflows, "example-workflows", false, "register the examples' workflows (trip, trip-approval), which POST /v1/workflows and the MCP tool workflow_start start by name")
	fs.StringVar(&c.logLevel, "log-level", "", "the least `LEVEL` logged: debug, info, warn or error ($LOOM_LOG_LEVEL; default info); /healthz and /metrics requests are debug")
	return fs
}

// Run implements Command.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	if c.cfg.maxBody <= 0 {
		return c.usage("--max-body must be positive")
	}
	level, err := c.level()
	if err != nil {
		return err
	}
	ret, err := c.cfg.retention.retention()
	if err != nil {
		return c.usage("%v", err)
	}
	if c.cfg.gcEvery < 0 {
		return c.usage("--gc-every cannot be negative")
	}
	// Refuse before opening the store or listening: a keys file with a
	// line that is not one key for one tenant, and without keys, any
	// address but loopback.
	keys, err := auth.Load(c.cfg.keysFile, c.Getenv("LOOM_API_KEYS"))
	if err != nil {
		return err
	}
	if !keys.Enabled() && !isLoopback(c.cfg.addr) {
		return fmt.Errorf("without API keys loom serves on loopback only, not %s: give --keys FILE or $LOOM_API_KEYS", c.cfg.addr)
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	listen := c.listen
	if listen == nil {
		listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	log := slog.New(slog.NewJSONHandler(c.Stderr, &slog.HandlerOptions{Level: level}))
	// A store on a full disk still serves reads: the server starts, and
	// says so. Writes answer 507 until space is freed.
	if ro, ok := db.Store().(interface{ ReadOnly() error }); ok {
		if err := ro.ReadOnly(); err != nil {
			log.Warn("the store is read-only until space is freed on its disk", "err", err)
		}
	}
	if err := importFileSessions(ctx, c.Store, db, log); err != nil {
		if !errors.Is(err, thread.ErrStorageFull) {
			return err
		}
		log.Warn("the work items' session records will be carried into the store once it has room", "err", err)
	}
	tp, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	c.cfg.tracer = tp
	db = db.WithTracerProvider(tp).WithRetention(ret)
	l, err := listen(c.cfg.addr)
	if err != nil {
		return err
	}
	return serveOn(ctx, l, db, worklog.NewLogs(db, nil), keys, c.cfg, moduleVersion(), log)
}
