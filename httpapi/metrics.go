package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/message"
)

// Metrics counts what the server does, for /metrics, on a Prometheus
// registry of its own (never the global one): requests by route, method and
// status, request durations by route, thread operations and their latency by
// name, write conflicts, run and tool call durations, tokens by model, and
// the Go runtime and process collectors. It is safe for concurrent use;
// handlers mounted with Server.Protect are counted without doing anything,
// and may count their thread operations with StoreOp.
//
// The series:
//
//	loom_http_requests_total{route,method,code}          counter
//	loom_http_request_duration_seconds{route}            histogram, with trace_id exemplars
//	loom_store_operations_total{op}                      counter
//	loom_store_operation_duration_seconds{op}            histogram
//	loom_conflicts_total                                 counter
//	loom_run_duration_seconds{outcome}                   histogram: completed, pending or error
//	loom_tool_call_duration_seconds{tool}                histogram
//	loom_model_tokens_total{model,direction}             counter: direction input or output
//	go_*, process_*                                      the client's Go and process collectors
type Metrics struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	ops         *prometheus.CounterVec
	opDurations *prometheus.HistogramVec
	conflicts   prometheus.Counter
	runs        *prometheus.HistogramVec
	tools       *prometheus.HistogramVec
	tokens      *prometheus.CounterVec

	scrape http.Handler

	// The children of the vectors for the label values seen, which are
	// few (routes, operations): looking them up here costs a fraction of
	// WithLabelValues's hashing and locking.
	reqChildren   sync.Map // requestKey → prometheus.Counter
	durChildren   sync.Map // route → prometheus.Observer
	opChildren    sync.Map // op → prometheus.Counter
	opDurChildren sync.Map // op → prometheus.Observer
}

type requestKey struct {
	route, method string
	code          int
}

// durationBuckets are the upper bounds of the request duration histogram,
// in seconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// storeBuckets are those of thread operations, which are mostly quicker
// than the requests that make them.
var storeBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// runBuckets are those of runs and tool calls, which wait for models and
// the outside world: up to ten minutes.
var runBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// NewMetrics returns empty metrics on a registry of their own, for
// Options.Metrics when something outside the server records into them too,
// such as an agent's tool calls (agent.Options.OnToolCall with
// ObserveToolCall).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loom_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route pattern.",
			Buckets: durationBuckets,
		}, []string{"route"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_store_operations_total",
			Help: "Thread operations the server's handlers called, by operation.",
		}, []string{"op"}),
		opDurations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loom_store_operation_duration_seconds",
			Help:    "Time the thread operations took, by operation.",
			Buckets: storeBuckets,
		}, []string{"op"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loom_conflicts_total",
			Help: "Writes refused because the thread had moved (compare-and-swap lost).",
		}),
		runs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loom_run_duration_seconds",
			Help:    "Time agent runs took, by outcome: completed, pending (stopped for approvals) or error.",
			Buckets: runBuckets,
		}, []string{"outcome"}),
		tools: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loom_tool_call_duration_seconds",
			Help:    "Time tool calls took, by tool.",
			Buckets: runBuckets,
		}, []string{"tool"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_model_tokens_total",
			Help: "Tokens the models read (input) and wrote (output), by model.",
		}, []string{"model", "direction"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.durations, m.ops, m.opDurations, m.conflicts, m.runs, m.tools, m.tokens,
	)
	m.scrape = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
	return m
}

// Registry returns the registry the metrics are on, for a program that
// serves them elsewhere or adds its own collectors. It is not the global
// default registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Request counts one request to route (a ServeMux pattern, or "unmatched")
// answered with status after d. It is ObserveRequest without a context.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	m.ObserveRequest(context.Background(), route, method, status, d)
}

// ObserveRequest is Request for a request whose context is ctx: when ctx
// carries a sampled OpenTelemetry span, its trace id is the exemplar of the
// duration's observation (shown to scrapers that negotiate OpenMetrics).
func (m *Metrics) ObserveRequest(ctx context.Context, route, method string, status int, d time.Duration) {
	method = normalMethod(method)
	child(&m.reqChildren, requestKey{route, method, status}, func() prometheus.Counter {
		return m.requests.WithLabelValues(route, method, statusText(status))
	}).Inc()
	observe(ctx, child(&m.durChildren, route, func() prometheus.Observer { return m.durations.WithLabelValues(route) }), d)
}

// child returns the child of a metric vector that cache holds for key,
// made by mk the first time.
func child[K comparable, T any](cache *sync.Map, key K, mk func() T) T {
	c, ok := cache.Load(key)
	if !ok {
		c, _ = cache.LoadOrStore(key, mk())
	}
	return c.(T)
}

// observe observes d on o, with the trace id of ctx's span as the exemplar
// when it is sampled.
func observe(ctx context.Context, o prometheus.Observer, d time.Duration) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(d.Seconds())
}

// StoreOp counts one thread operation, such as "append" or "fork".
func (m *Metrics) StoreOp(op string) {
	child(&m.opChildren, op, func() prometheus.Counter { return m.ops.WithLabelValues(op) }).Inc()
}

// StoreOpSince counts one thread operation, such as "append", that began
// at start and ended now, and observes its duration: call it as
// defer m.StoreOpSince("append", time.Now()), which allocates nothing.
func (m *Metrics) StoreOpSince(op string, start time.Time) {
	d := time.Since(start)
	m.StoreOp(op)
	child(&m.opDurChildren, op, func() prometheus.Observer { return m.opDurations.WithLabelValues(op) }).Observe(d.Seconds())
}

// Conflict counts one write that lost a compare-and-swap (thread.ErrConflict).
func (m *Metrics) Conflict() { m.conflicts.Inc() }

// Run outcomes, the values of loom_run_duration_seconds's outcome label.
const (
	RunCompleted = "completed" // the run ended with the model's answer
	RunPending   = "pending"   // the run stopped for tool calls that wait for approval
	RunError     = "error"     // the run failed or was cancelled
)

// Run records an agent run that took d and ended with outcome (RunCompleted,
// RunPending or RunError).
func (m *Metrics) Run(outcome string, d time.Duration) {
	m.runs.WithLabelValues(outcome).Observe(d.Seconds())
}

// ToolCall records a call of the tool named tool that took d.
func (m *Metrics) ToolCall(tool string, d time.Duration) {
	m.ObserveToolCall(context.Background(), message.FunctionCall{Name: tool}, message.FunctionResult{}, d)
}

// ObserveToolCall records a tool call that took d, with the trace id of
// ctx's span as exemplar. Its signature is agent.Options.OnToolCall's.
func (m *Metrics) ObserveToolCall(ctx context.Context, call message.FunctionCall, _ message.FunctionResult, d time.Duration) {
	observe(ctx, m.tools.WithLabelValues(call.Name), d)
}

// Tokens counts the input and output tokens of u against model ("" counts
// as "unknown").
func (m *Metrics) Tokens(model string, u message.Usage) {
	if model == "" {
		model = "unknown"
	}
	if u.InputTokens > 0 {
		m.tokens.WithLabelValues(model, "input").Add(float64(u.InputTokens))
	}
	if u.OutputTokens > 0 {
		m.tokens.WithLabelValues(model, "output").Add(float64(u.OutputTokens))
	}
}

// WriteTo writes the metrics in the Prometheus text exposition format
// (version 0.0.4), series sorted so that the output is stable.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	mfs, err := m.reg.Gather()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	enc := expfmt.NewEncoder(cw, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return cw.n, err
		}
	}
	return cw.n, nil
}

// serve answers a scrape, in the format the scraper asks for: OpenMetrics
// (with exemplars) or the text format.
func (m *Metrics) serve(w http.ResponseWriter, r *http.Request) error {
	m.scrape.ServeHTTP(w, r)
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// statusText is the code label's value of status: its three digits.
func statusText(status int) string {
	if status >= 100 && status < 600 {
		return statusCodes[status-100]
	}
	return strconv.Itoa(status)
}

var statusCodes = func() (s [500]string) {
	for i := range s {
		s[i] = strconv.Itoa(i + 100)
	}
	return s
}()

// normalMethod keeps the method label's values to a known few.
func normalMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}
