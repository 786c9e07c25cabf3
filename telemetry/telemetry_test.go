package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/trace"
)

// collector is a local OTLP/HTTP endpoint that keeps the spans it is sent.
type collector struct {
	mu       sync.Mutex
	names    []string
	services []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces of protobuf", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				c.names = append(c.names, sp.Name)
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// TestFromEnvExportsOTLP sends spans to a local OTLP endpoint named by
// OTEL_EXPORTER_OTLP_ENDPOINT and decodes what arrives.
func TestFromEnvExportsOTLP(t *testing.T) {
	col := &collector{}
	ts := httptest.NewServer(col)
	defer ts.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ts.URL)
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")

	tp, shutdown, err := FromEnv(t.Context(), "loom-test", "v0")
	if err != nil {
		t.Fatal(err)
	}
	if tp == nil {
		t.Fatal("no provider with an endpoint set")
	}
	tr := tp.Tracer("test")
	ctx, run := tr.Start(t.Context(), "invoke_agent")
	_, chat := tr.Start(ctx, "chat test-model", trace.WithSpanKind(trace.SpanKindClient))
	chat.End()
	run.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	slices.Sort(col.names)
	if got := strings.Join(col.names, ","); got != "chat test-model,invoke_agent" {
		t.Errorf("spans %q", got)
	}
	if len(col.services) == 0 || col.services[0] != "loom-test" {
		t.Errorf("service.name %q", col.services)
	}
}

// TestFromEnvOff checks that without an endpoint, or with the SDK
// disabled, there is no provider and nothing to shut down.
func TestFromEnvOff(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
		t.Setenv("OTEL_SDK_DISABLED", "")
		for k, v := range env {
			t.Setenv(k, v)
		}
		tp, shutdown, err := FromEnv(t.Context(), "loom", "")
		if err != nil || tp != nil || shutdown(t.Context()) != nil {
			t.Errorf("%v: provider %v, error %v", env, tp, err)
		}
	}
}

// TestFromEnvProtocol checks that a protocol loom does not export with is
// a clear error, and that the traces-only variable wins over the general.
func TestFromEnvProtocol(t *testing.T) {
	for _, tc := range []struct {
		traces, all string
		ok          bool
	}{
		{"", "", true},
		{"", "http/protobuf", true},
		{"", "grpc", false},
		{"http/json", "", false},
		{"http/protobuf", "grpc", true},
		{"grpc", "http/protobuf", false},
	} {
		t.Setenv("OTEL_SDK_DISABLED", "")
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", tc.traces)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.all)
		tp, shutdown, err := FromEnv(t.Context(), "loom", "")
		if (err == nil) != tc.ok || (tp != nil) != tc.ok {
			t.Errorf("traces %q, all %q: provider %v, error %v; want ok %v", tc.traces, tc.all, tp, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "http/protobuf") {
			t.Errorf("error %q does not say what loom speaks", err)
		}
		shutdown(t.Context())
	}
}

// TestHTTPClientPropagates checks that a request through HTTPClient
// carries its context's trace in a traceparent header.
func TestHTTPClientPropagates(t *testing.T) {
	got := make(chan string, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer ts.Close()
	tp := sdktraceProvider(t)
	ctx, span := tp.Tracer("test").Start(t.Context(), "run")
	defer span.End()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL, nil)
	resp, err := HTTPClient(tp, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tp := <-got; !strings.Contains(tp, span.SpanContext().TraceID().String()) {
		t.Errorf("traceparent %q, want trace %s", tp, span.SpanContext().TraceID())
	}
	if HTTPClient(nil, nil) != nil {
		t.Error("HTTPClient(nil, nil) is not nil")
	}
}
