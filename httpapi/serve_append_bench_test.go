package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/telemetry"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkServeAppend appends one message through the real handler on a
// loopback TCP listener, on the memory store and on SQLite: one client
// sending a request at a time (the time of one request, ns/op), and the
// concurrent clients of BenchmarkHTTP (req/s, p50, p99). Tracing is off (no
// TracerProvider, as loom serve without OTEL_EXPORTER_OTLP_ENDPOINT), "sdk"
// (every span sampled and batched to an exporter that drops it: the spans'
// own cost), or "otlp" (loom serve's provider, telemetry.FromEnv, exporting
// by OTLP/HTTP to a local endpoint that reads and discards what it gets; it
// runs on the same cores, as the exporter does).
func BenchmarkServeAppend(b *testing.B) {
	body := []byte(`{"messages":[{"role":"user","contents":[{"type":"text","text":"The quick brown fox jumps over the lazy dog."}]}]}`)
	for _, store := range []string{"memory", "sqlite"} {
		for _, tracing := range []string{"off", "sdk", "otlp"} {
			for _, clients := range []string{"1", "16"} {
				b.Run(fmt.Sprintf("store=%s/tracing=%s/clients=%s", store, tracing, clients), func(b *testing.B) {
					var (
						tp    trace.TracerProvider
						sent  atomic.Int64 // bytes the OTLP endpoint got
						flush func()
					)
					switch tracing {
					case "sdk":
						sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
						tp, flush = sdk, func() { sdk.Shutdown(b.Context()) }
					case "otlp":
						sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							n, _ := io.Copy(io.Discard, r.Body)
							sent.Add(n)
						}))
						b.Cleanup(sink.Close)
						b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
						p, shutdown, err := telemetry.FromEnv(b.Context(), "loom", "bench")
						if err != nil || p == nil {
							b.Fatal(p, err)
						}
						tp, flush = p, func() { shutdown(b.Context()) }
					}
					var db *thread.DB
					if store == "memory" {
						db = thread.New(thread.NewMemoryStore(), nil)
					} else {
						var err error
						if db, err = thread.Open(b.Context(), "sqlite://"+b.TempDir()+"/bench.db", nil); err != nil {
							b.Fatal(err)
						}
					}
					b.Cleanup(func() { db.Close() })
					if tp != nil {
						db = db.WithTracerProvider(tp)
					}
					serveAppend(b, db, Options{DB: db, TracerProvider: tp}, body, clients == "1")
					b.StopTimer()
					if flush != nil {
						flush()
					}
					if tracing == "otlp" {
						b.ReportMetric(float64(sent.Load())/float64(b.N), "otlp-B/op")
					}
				})
			}
		}
	}
}

// serveAppend serves opts on a loopback listener and appends body to 100
// threads in turn.
func serveAppend(b *testing.B, db *thread.DB, opts Options, body []byte, serial bool) {
	for i := range 100 {
		if _, err := db.Create(b.Context(), thread.CreateOptions{ID: fmt.Sprintf("th%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	ts := httptest.NewServer(newServer(b, opts))
	b.Cleanup(ts.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	b.Cleanup(client.CloseIdleConnections)
	next := func(n int64) (*http.Request, error) {
		return http.NewRequest("POST", fmt.Sprintf("%s/v1/threads/th%d/messages", ts.URL, n%100), bytes.NewReader(body))
	}
	if !serial {
		drive(b, client, next, http.StatusCreated)
		return
	}
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		n++
		r, err := next(n)
		if err != nil {
			b.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
