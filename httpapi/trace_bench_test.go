package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/thread"
)

// BenchmarkAppendTracing appends a message through the server's handler on
// a memory store, with tracing off (no TracerProvider) and on (the SDK,
// sampling everything, batching to an exporter that drops the spans), so
// that the cost of a request's spans can be read off: the request's and
// the store's (open, commit).
func BenchmarkAppendTracing(b *testing.B) {
	body := []byte(`{"messages":[{"role":"user","contents":[{"type":"text","text":"The quick brown fox jumps over the lazy dog."}]}]}`)
	bench := func(tp trace.TracerProvider) func(b *testing.B) {
		return func(b *testing.B) {
			db := thread.New(thread.NewMemoryStore(), &thread.Options{TracerProvider: tp})
			s := newServer(b, Options{DB: db, TracerProvider: tp})
			createThread(b, s, "", "th")
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest("POST", "/v1/threads/th/messages", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				s.ServeHTTP(w, r)
				if w.Code != http.StatusOK && w.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		}
	}
	b.Run("off", bench(nil))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { tp.Shutdown(b.Context()) })
	b.Run("on", bench(tp))
}
