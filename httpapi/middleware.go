package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/internal/ids"
)

// reqInfo is what the middleware learns about a request as it goes down the
// chain (the route, the tenant, the error), kept in the request's context
// so that the access log, written on the way back up, can report it.
type reqInfo struct {
	id     string
	route  string
	tenant string
	err    error
}

type infoKey struct{}

func infoOf(ctx context.Context) *reqInfo {
	info, _ := ctx.Value(infoKey{}).(*reqInfo)
	return info
}

// RequestID returns the id of the request that ctx belongs to ("" outside
// the server's middleware): the X-Request-Id of its response and of its log
// lines.
func RequestID(ctx context.Context) string {
	if info := infoOf(ctx); info != nil {
		return info.id
	}
	return ""
}

// chain wraps h in the middleware, outermost first: request id, logging
// and metrics with panic recovery, CORS, the body limit, and (when
// authenticate) the API key check. With outerRoute, the route of the logs
// and metrics is r.Pattern as the chain gets it: that of the mux that
// calls the chain (Protect), or of the server's own mux (routed);
// otherwise the chain matches r against the server's mux itself.
func (s *Server) chain(h http.Handler, authenticate, outerRoute bool) http.Handler {
	if authenticate {
		h = s.authenticate(h)
	}
	h = s.limitBody(h)
	h = s.cors(h)
	return s.observe(h, outerRoute)
}

// observe gives the request its id, then logs and counts it once it is
// answered. A panic below is answered with a 500 (when nothing was written
// yet) and logged with its stack.
func (s *Server) observe(next http.Handler, outerRoute bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// One allocation for both.
		o := &struct {
			info reqInfo
			sw   statusWriter
		}{info: reqInfo{id: requestID(r.Header.Get("X-Request-Id"))}}
		info, sw := &o.info, &o.sw
		*sw = statusWriter{ResponseWriter: w, info: info}
		if outerRoute {
			info.route = r.Pattern
		}
		// Otherwise the route's handler names it as it starts (endpoint),
		// and a request answered before (401, 403, 413, 404) is matched
		// against the mux once it is answered.
		w.Header().Set("X-Request-Id", info.id)
		ctx := context.WithValue(r.Context(), infoKey{}, info)
		if _, sent := r.Header["Traceparent"]; sent && !s.traces && !trace.SpanContextFromContext(ctx).IsValid() {
			// Untraced, the log lines still join the client's trace: they
			// carry the ids of its traceparent (the caller's span). A
			// request without one (Header.Get would look for this key)
			// has none to extract.
			ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		r = r.WithContext(ctx)
		defer func() {
			v := recover()
			if v != nil && v != http.ErrAbortHandler {
				s.log.ErrorContext(r.Context(), "panic", append(traceIDs(r.Context()), "request_id", info.id, "panic", v, "stack", string(debug.Stack()))...)
				if !sw.wrote {
					s.writeError(sw, r, errors.New("panic"))
				}
			}
			d := time.Since(start)
			if !outerRoute && info.route == "" {
				_, info.route = s.mux.Handler(r)
			}
			s.done(r, info, sw, d)
			if v == http.ErrAbortHandler {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// done logs and counts an answered request.
func (s *Server) done(r *http.Request, info *reqInfo, sw *statusWriter, d time.Duration) {
	code := sw.code
	if !sw.wrote {
		code = http.StatusOK
	}
	route := info.route
	if route == "" {
		route = "unmatched"
	}
	s.metrics.ObserveRequest(r.Context(), route, r.Method, code, d)
	level := slog.LevelInfo
	switch {
	case code >= 500 && code != http.StatusNotImplemented:
		level = slog.LevelWarn
	case probes[route]:
		// Probes and scrapes come every few seconds: at INFO they would
		// bury the requests people make.
		level = slog.LevelDebug
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("route", route), slog.Int("status", code),
		slog.Duration("duration", d), slog.String("tenant", info.tenant), slog.String("request_id", info.id),
	}
	if info.err != nil && code < 500 {
		// 5xx errors were logged in full when they were answered.
		attrs = append(attrs, slog.String("error", info.err.Error()))
	}
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	s.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

// traceIDs returns the trace_id and span_id of ctx's span context, for a
// log line of its request; none when it has none.
func traceIDs(ctx context.Context) []any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}

// probes are the routes of health checks and metric scrapes, whose
// successes are logged at DEBUG.
var probes = map[string]bool{"GET /healthz": true, "GET /metrics": true}

// traceContext reads a request's W3C traceparent when the server does not
// trace, for its log lines.
var traceContext = propagation.TraceContext{}

// requestID returns the client's X-Request-Id when it is a sane token (1 to
// 128 bytes of letters, digits, '_', '-', '.'), else a new id.
func requestID(h string) string {
	if ids.Valid(h) {
		return h
	}
	return ids.New("req_")
}

// statusWriter remembers the status of a response for the access log and
// the metrics. It passes Flush and the others through via Unwrap, for
// http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
	// info is the request's; with catching, what is written while its
	// route is "" (by the mux's own 404, 405 and redirect handlers, since
	// a route's handler names its route first) goes to caught instead,
	// for dispatch to answer in JSON.
	info     *reqInfo
	catching bool
	caught   *captureWriter
}

// catches reports whether w catches what is written now, making caught
// on first use.
func (w *statusWriter) catches() bool {
	if !w.catching || w.info.route != "" {
		return false
	}
	if w.caught == nil {
		w.caught = &captureWriter{header: http.Header{}}
	}
	return true
}

func (w *statusWriter) Header() http.Header {
	if w.catches() {
		return w.caught.Header()
	}
	return w.ResponseWriter.Header()
}

func (w *statusWriter) WriteHeader(code int) {
	if w.catches() {
		w.caught.WriteHeader(code)
		return
	}
	if !w.wrote && code >= 200 {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.catches() {
		return w.caught.Write(p)
	}
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// corsMethods and corsHeaders are what a preflight allows.
const (
	corsMethods       = "GET, POST, PATCH, DELETE"
	corsHeaders       = "Authorization, Content-Type, If-Match, If-None-Match, X-API-Key, X-Request-Id, Last-Event-ID"
	corsExposeHeaders = "ETag, Location, X-Request-Id"
)

// cors refuses requests from browser pages of origins that are not allowed,
// and answers preflights for the ones that are. A request without Origin
// (not from a browser), or from the server's own origin, passes untouched.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if origin == "" || (!preflight && sameOrigin(origin, r.Host)) {
			next.ServeHTTP(w, r)
			return
		}
		if len(s.origins) > 0 {
			w.Header().Add("Vary", "Origin")
		}
		if !s.anyOrig && !s.origins[origin] {
			s.writeError(w, r, errf(http.StatusForbidden, "forbidden", "origin %q is not allowed", clip(origin)))
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether origin names the host the request was sent
// to, as a browser's request from a page the server itself served does.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && strings.EqualFold(u.Host, host)
}

// limitBody caps the request body: a body announced over the limit is
// refused at once, and one that turns out longer fails its read with an
// *http.MaxBytesError, which the error table answers with 413.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.maxBody {
			s.writeError(w, r, &http.MaxBytesError{Limit: s.maxBody})
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate checks the request's API key and records its tenant.
func (s *Server) authenticate(next http.Handler) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := infoOf(r.Context()); info != nil {
			info.tenant, _ = auth.Tenant(r.Context())
		}
		next.ServeHTTP(w, r)
	})
	return s.keys.Middleware(inner, func(w http.ResponseWriter, r *http.Request, err error) {
		msg := "missing API key: send Authorization: Bearer KEY or X-API-Key"
		if errors.Is(err, auth.ErrBadKey) {
			msg = "unknown API key"
		}
		s.writeError(w, r, errf(http.StatusUnauthorized, "unauthorized", "%s", msg))
	})
}

// tenant returns the tenant of the request (set by authenticate).
func tenant(r *http.Request) string {
	t, _ := auth.Tenant(r.Context())
	return t
}

// tracing returns the otelhttp options of a server traced by tp: spans of
// tp, parents from prop (nil means W3C Trace Context).
func tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) []otelhttp.Option {
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	// otelhttp's own HTTP metrics would go to the global MeterProvider,
	// which loom never sets: a no-op one skips the cost of looking it up
	// and recording for nothing (/metrics has loom's own).
	return []otelhttp.Option{otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop), otelhttp.WithMeterProvider(noop.NewMeterProvider())}
}

// traced wraps h, outermost, in a span per request when the server traces
// (Options.TracerProvider). The route is r.Pattern as h gets it: that of
// the mux that calls h (Protect), or of the server's own mux (routed).
// It names the span, and otelhttp sets it as http.route; a request that
// matches no route is "<METHOD> unmatched".
func (s *Server) traced(h http.Handler) http.Handler {
	if s.tracing == nil {
		return h
	}
	// The method is the client's to choose: an unknown one is OTHER, as in
	// the metrics, so that span names stay few.
	name := func(_ string, r *http.Request) string {
		switch rt := r.Pattern; {
		case rt == "":
			return normalMethod(r.Method) + " unmatched"
		case strings.Contains(rt, " "):
			return rt
		default:
			return normalMethod(r.Method) + " " + rt
		}
	}
	return otelhttp.NewHandler(h, "http", append(s.tracing, otelhttp.WithSpanNameFormatter(name))...)
}

// routed sets r.Pattern, on a copy of r, to the pattern of the server's
// mux that r matches ("" for none) before h runs: a traced request is
// matched once, for its span (traced) and the chain below it (built with
// outerRoute), before the mux serves it.
func (s *Server) routed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := new(http.Request)
		*r2 = *r
		_, r2.Pattern = s.mux.Handler(r)
		h.ServeHTTP(w, r2)
	})
}
