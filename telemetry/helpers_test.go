package telemetry

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func sdktraceProvider(tb testing.TB) *sdktrace.TracerProvider {
	tb.Helper()
	tp := sdktrace.NewTracerProvider()
	tb.Cleanup(func() { tp.Shutdown(tb.Context()) })
	return tp
}
