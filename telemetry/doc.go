// Package telemetry exports loom's OpenTelemetry traces. It is the only
// package that sets up the OpenTelemetry SDK and its OTLP exporter; the
// packages that make spans (thread, agent, httpapi) take a
// trace.TracerProvider in their options and set nothing global.
//
// The smallest use, in a command:
//
//	tp, shutdown, err := telemetry.FromEnv(ctx, "loom", version)
//	if err != nil {
//		return err
//	}
//	defer shutdown(context.WithoutCancel(ctx))
//	db := thread.New(store, &thread.Options{TracerProvider: tp})
//
// FromEnv traces only when the standard OTLP environment names an
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); otherwise tp is nil, which the
// packages take as "no spans", at no cost.
package telemetry
