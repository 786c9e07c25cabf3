package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// answered2xx reports whether the text exposition text counts a 2xx answer
// of route to method.
func answered2xx(text, route, method string) bool {
	re := regexp.MustCompile(`(?m)^loom_http_requests_total\{code="2\d\d",method="` + regexp.QuoteMeta(method) + `",route="` + regexp.QuoteMeta(route) + `"\} [1-9]`)
	return re.MatchString(text)
}

// scrape GETs /metrics from h and parses it with the Prometheus text parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := must(t, h, req{method: "GET", path: "/metrics"}, http.StatusOK, nil)
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// value returns the value of the series name{labels} in mfs: a counter's or
// a gauge's value, a histogram's count; -1 if there is no such series.
func value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			return m.GetUntyped().GetValue()
		}
	}
	return -1
}

// TestMetricsParse scrapes /metrics with the Prometheus client's own parser:
// the Go and process collectors are there, and loom's series move with the
// requests.
func TestMetricsParse(t *testing.T) {
	s := newServer(t, Options{})
	createThread(t, s, "", "th", "one")
	appendOne := req{method: "POST", path: "/v1/threads/th/messages", body: map[string]any{"messages": []any{textMsg("user", "x")}}}
	must(t, s, appendOne, http.StatusCreated, nil)

	before := scrape(t, s)
	if v := value(before, "go_goroutines", nil); v < 1 {
		t.Errorf("go_goroutines = %v", v)
	}
	if runtime.GOOS == "linux" {
		if v := value(before, "process_resident_memory_bytes", nil); v <= 0 {
			t.Errorf("process_resident_memory_bytes = %v", v)
		}
	}
	for name, mf := range before {
		if mf.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
	}

	must(t, s, appendOne, http.StatusCreated, nil)
	wantError(t, s, req{method: "GET", path: "/v1/threads/none"}, http.StatusNotFound, "not_found")
	m := s.Metrics()
	m.Run(RunCompleted, 1500*time.Millisecond)
	m.ToolCall("search", 20*time.Millisecond)
	m.Tokens("gpt-4.1", message.Usage{InputTokens: 120, OutputTokens: 30})
	m.Tokens("gpt-4.1", message.Usage{InputTokens: 80})
	m.StoreOpSince("append", time.Now().Add(-time.Millisecond))
	after := scrape(t, s)

	appendRoute := map[string]string{"route": "POST /v1/threads/{id}/messages", "method": "POST", "code": "201"}
	for _, c := range []struct {
		name          string
		labels        map[string]string
		before, after float64
	}{
		{"loom_http_requests_total", appendRoute, 1, 2},
		{"loom_http_requests_total", map[string]string{"route": "POST /v1/threads", "method": "POST", "code": "201"}, 1, 1},
		{"loom_http_requests_total", map[string]string{"route": "GET /v1/threads/{id}", "method": "GET", "code": "404"}, -1, 1},
		{"loom_http_requests_total", map[string]string{"route": "GET /metrics", "method": "GET", "code": "200"}, -1, 1},
		{"loom_http_request_duration_seconds", map[string]string{"route": "POST /v1/threads/{id}/messages"}, 1, 2},
		{"loom_store_operations_total", map[string]string{"op": "append"}, 1, 3},
		// An append is one store operation: no read of the thread first.
		{"loom_store_operations_total", map[string]string{"op": "get"}, -1, 1},
		{"loom_store_operation_duration_seconds", map[string]string{"op": "append"}, 1, 3},
		{"loom_store_operation_duration_seconds", map[string]string{"op": "get"}, -1, 1},
		{"loom_conflicts_total", nil, 0, 0},
		{"loom_run_duration_seconds", map[string]string{"outcome": "completed"}, -1, 1},
		{"loom_tool_call_duration_seconds", map[string]string{"tool": "search"}, -1, 1},
		{"loom_model_tokens_total", map[string]string{"model": "gpt-4.1", "direction": "input"}, -1, 200},
		{"loom_model_tokens_total", map[string]string{"model": "gpt-4.1", "direction": "output"}, -1, 30},
	} {
		if got := value(before, c.name, c.labels); got != c.before {
			t.Errorf("before: %s%v = %v, want %v", c.name, c.labels, got, c.before)
		}
		if got := value(after, c.name, c.labels); got != c.after {
			t.Errorf("after: %s%v = %v, want %v", c.name, c.labels, got, c.after)
		}
	}
	if got := after["loom_http_request_duration_seconds"].GetType(); got != dto.MetricType_HISTOGRAM {
		t.Errorf("loom_http_request_duration_seconds is a %v", got)
	}
}

// TestMetricsRuns checks the runs' durations by outcome and their tokens
// by model, for runs answered in JSON and streamed.
func TestMetricsRuns(t *testing.T) {
	s := newServer(t, Options{Agent: agent.New(weatherScript(), &agent.Options{Tools: []agent.Tool{weatherTool(agent.WithApproval())}})})
	createThread(t, s, "", "th")
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "Weather?"}}, http.StatusOK, nil)
	wantError(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "hurry"}}, http.StatusConflict, "approval_required")
	must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"approvals": []any{map[string]any{"call_id": "c1", "approved": true}}}}, http.StatusOK, nil)
	mfs := scrape(t, s)
	for outcome, want := range map[string]float64{RunPending: 1, RunError: 1, RunCompleted: 1} {
		if got := value(mfs, "loom_run_duration_seconds", map[string]string{"outcome": outcome}); got != want {
			t.Errorf("%s runs: %v, want %v", outcome, got, want)
		}
	}
	if got := value(mfs, "loom_model_tokens_total", map[string]string{"model": "scripted", "direction": "input"}); got != 10 {
		t.Errorf("input tokens: %v", got)
	}

	s = newServer(t, Options{Agent: agent.New(weatherScript(), &agent.Options{Tools: []agent.Tool{weatherTool()}})})
	createThread(t, s, "", "th")
	w := must(t, s, req{method: "POST", path: "/v1/threads/th/runs", body: map[string]any{"input": "Weather?", "stream": true}}, http.StatusOK, nil)
	if !strings.Contains(w.Body.String(), "event: result") {
		t.Fatalf("no result:\n%s", w.Body.String())
	}
	mfs = scrape(t, s)
	if got := value(mfs, "loom_run_duration_seconds", map[string]string{"outcome": RunCompleted}); got != 1 {
		t.Errorf("streamed runs: %v", got)
	}
	if got := value(mfs, "loom_model_tokens_total", map[string]string{"model": "scripted", "direction": "output"}); got != 5 {
		t.Errorf("output tokens: %v", got)
	}
}

// TestMetricsRegistry checks that each server has a registry of its own
// and that nothing is registered globally.
func TestMetricsRegistry(t *testing.T) {
	a, b := newServer(t, Options{}), newServer(t, Options{})
	a.Metrics().StoreOp("append")
	if got := value(scrape(t, b), "loom_store_operations_total", map[string]string{"op": "append"}); got != -1 {
		t.Errorf("server b counts a's operation: %v", got)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "loom_") {
			t.Errorf("%s is on the default registry", mf.GetName())
		}
	}
}

// TestMetricsExemplar checks that a request whose context carries a sampled
// span has its trace id as the exemplar of its duration, in OpenMetrics.
func TestMetricsExemplar(t *testing.T) {
	s := newServer(t, Options{})
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	s.Metrics().ObserveRequest(ctx, "GET /v1/threads", "GET", 200, 3*time.Millisecond)
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	s.Metrics().ObserveRequest(unsampled, "GET /v1/threads/{id}", "GET", 200, 3*time.Millisecond)

	r := httptest.NewRequest("GET", "/metrics", nil)
	r.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	body := w.Body.String()
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("Content-Type %q", ct)
	}
	if !strings.Contains(body, `loom_http_request_duration_seconds_bucket{route="GET /v1/threads",le="0.005"} 1 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 0.003`) {
		t.Errorf("no exemplar:\n%s", grepLines(body, "loom_http_request_duration"))
	}
	if strings.Count(body, "trace_id=") != 1 {
		t.Errorf("want one exemplar, from the sampled span:\n%s", grepLines(body, "trace_id"))
	}
}

func grepLines(text, sub string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// BenchmarkMetrics measures the bookkeeping of one request: its count and
// duration, and a thread operation.
func BenchmarkMetrics(b *testing.B) {
	m := NewMetrics()
	routes := []string{"POST /v1/threads/{id}/messages", "GET /v1/threads/{id}", "POST /v1/threads/{id}/view", "GET /v1/threads"}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.Request(routes[i%len(routes)], "POST", 201, 3*time.Millisecond)
			m.StoreOp("append")
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				m.Request(routes[i%len(routes)], "POST", 201, 3*time.Millisecond)
				m.StoreOp("append")
			}
		})
	})
}
