package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and OTEL_SDK_DISABLED is not true.
func Enabled() bool { return enabled(os.Getenv) }

func enabled(getenv func(string) string) bool {
	if off, _ := strconv.ParseBool(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); off {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns a TracerProvider that exports spans by OTLP over HTTP,
// configured by the standard environment (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_PROTOCOL's http/protobuf, OTEL_TRACES_SAMPLER,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, …), and the shutdown that
// flushes and stops it. service and version name the service when
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES do not.
//
// When Enabled is false, it returns a nil provider, which loom's packages
// take as "no spans", and a shutdown that does nothing. It sets nothing
// global. A protocol other than http/protobuf
// (OTEL_EXPORTER_OTLP_PROTOCOL=grpc) is an error: loom has no gRPC
// exporter.
func FromEnv(ctx context.Context, service, version string, opts ...otlptracehttp.Option) (trace.TracerProvider, func(context.Context) error, error) {
	none := func(context.Context) error { return nil }
	if !Enabled() {
		return nil, none, nil
	}
	if err := checkProtocol(os.Getenv); err != nil {
		return nil, none, err
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, none, fmt.Errorf("otlp exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	// Later detectors win: the environment over the defaults given here.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, none, fmt.Errorf("otel resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// checkProtocol refuses an OTLP protocol other than http/protobuf, the one
// loom exports with, rather than send to a gRPC port what it cannot read.
func checkProtocol(getenv func(string) string) error {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch p := strings.TrimSpace(getenv(k)); p {
		case "":
			continue
		case "http/protobuf":
			return nil
		default:
			return fmt.Errorf("%s=%q: loom exports traces by OTLP over HTTP only (http/protobuf, usually port 4318)", k, p)
		}
	}
	return nil
}

// HTTPClient returns a copy of base whose transport makes a client span
// for each request, with tp, and sends the request's trace context in W3C
// Trace Context headers (traceparent), so that a model provider's calls
// join the run's trace. Give it to openai.Options.HTTPClient or
// anthropic.Options.HTTPClient. A nil base means a client on a copy of
// http.DefaultTransport that waits at most 10 minutes for response headers
// (the providers' own default). A nil tp returns base as it is, nil
// included, so that the provider keeps its default client.
func HTTPClient(tp trace.TracerProvider, base *http.Client) *http.Client {
	if tp == nil {
		return base
	}
	if base == nil {
		base = &http.Client{}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			t = t.Clone()
			t.ResponseHeaderTimeout = 10 * time.Minute
			base.Transport = t
		}
	}
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithMeterProvider(noop.NewMeterProvider())) // no global meter: loom sets none
	return &c
}
