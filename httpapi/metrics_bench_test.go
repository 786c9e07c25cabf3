package httpapi

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// BenchmarkMetricsPerAppend is the metrics bookkeeping of one append
// request as the handler does it: the request and two thread operations
// (get, append) with their durations; "exemplar" has a sampled span in the
// request's context, whose trace id goes with the duration.
func BenchmarkMetricsPerAppend(b *testing.B) {
	m := NewMetrics()
	const route = "POST /v1/threads/{id}/messages"
	sampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled}))
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"serial", context.Background()}, {"parallel", context.Background()}, {"exemplar-serial", sampled}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			one := func() {
				m.StoreOpSince("get", time.Now())
				m.StoreOpSince("append", time.Now())
				m.ObserveRequest(c.ctx, route, "POST", 201, 3*time.Millisecond)
			}
			if c.name != "parallel" {
				for b.Loop() {
					one()
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
				}
			})
		})
	}
}
