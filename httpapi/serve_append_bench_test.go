package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/internal/cputime"
	"github.com/loomthreads/loom/message"
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

// BenchmarkServeCost measures what the server adds to an append, each
// request timed beside its floor in the same loop (one floor request, then
// one through loom, in turn), so that both see the same load on a shared
// machine. It reports the time of each (loom-µs, floor-µs), what loom adds
// (own-µs, loom − floor) and the ratio (loom/floor).
//
//   - store=memory: the floor is a net/http handler that reads the body
//     and answers 201 with headers and a body like loom's; loom is the real
//     handler on the memory store (no tracing).
//   - store=sqlite: the floor is the library's append, Thread.Append of
//     the same message on a handle held open, on the same SQLite file;
//     loom is the real handler on that file.
//
// With via=tcp the requests go over a loopback TCP connection with
// net/http's client, as BenchmarkServeAppend sends them; with via=handler
// the handler is called in process (ServeHTTP), which leaves out the
// network and the client: the server's own cost. The server logs nothing
// (as in BenchmarkServeAppend) but with log=json, where it writes loom
// serve's JSON line per request to io.Discard.
//
// cpu-µs is the CPU time the whole process used per loop (both requests;
// the client's side and the server's; making the requests; the garbage
// collector): unlike the times, it leaves out the waits for a core, so it
// moves less with the load of a shared machine.
func BenchmarkServeCost(b *testing.B) {
	msg := message.User("The quick brown fox jumps over the lazy dog.")
	body := []byte(`{"messages":[{"role":"user","contents":[{"type":"text","text":"The quick brown fox jumps over the lazy dog."}]}]}`)
	answer := []byte(`{"version":12,"commit":"c_0000000000000000000000000","messages":[{"id":"m_0000000000000000000000000","role":"user","contents":[{"type":"text","text":"The quick brown fox jumps over the lazy dog."}],"created_at":"2026-11-28T00:00:00.000000Z"}]}` + "\n")
	floorHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h := w.Header()
		h.Set("X-Request-Id", "req_0000000000000000000000000")
		h.Set("ETag", `"12.0000000000"`)
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusCreated)
		w.Write(answer)
	})
	type benchCase struct {
		store, via string
		log        bool // a JSON log line per request, as loom serve writes, to io.Discard
	}
	for _, bc := range []benchCase{
		{"memory", "tcp", false}, {"memory", "handler", false}, {"memory", "handler", true},
		{"sqlite", "tcp", false}, {"sqlite", "handler", false},
	} {
		store, via := bc.store, bc.via
		name := fmt.Sprintf("store=%s/via=%s", store, via)
		if bc.log {
			name += "/log=json"
		}
		b.Run(name, func(b *testing.B) {
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
			var held []*thread.Thread // the library's threads, for the SQLite floor
			for i := range 100 {
				if _, err := db.Create(b.Context(), thread.CreateOptions{ID: fmt.Sprintf("th%d", i)}); err != nil {
					b.Fatal(err)
				}
				th, err := db.Create(b.Context(), thread.CreateOptions{ID: fmt.Sprintf("lib%d", i)})
				if err != nil {
					b.Fatal(err)
				}
				held = append(held, th)
			}
			opts := Options{DB: db}
			if bc.log {
				opts.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
			}
			loom := newServer(b, opts)
			send := func(h http.Handler) func(i int) time.Duration {
				if via == "handler" {
					// The requests are made once, and each is copied with a
					// fresh body to be sent (as a server hands a handler a
					// request of its own), so that the making of them, which
					// costs more than a bare handler, is not in cpu-µs.
					var reqs [100]*http.Request
					for i := range reqs {
						reqs[i] = httptest.NewRequest("POST", fmt.Sprintf("/v1/threads/th%d/messages", i), bytes.NewReader(body))
						reqs[i].Header.Set("Content-Type", "application/json")
					}
					w := &benchWriter{header: http.Header{}}
					return func(i int) time.Duration {
						r := new(http.Request)
						*r = *reqs[i%100]
						r.Body = io.NopCloser(bytes.NewReader(body))
						clear(w.header)
						w.code = 0
						start := time.Now()
						h.ServeHTTP(w, r)
						d := time.Since(start)
						if w.code != http.StatusCreated {
							b.Fatalf("status %d", w.code)
						}
						return d
					}
				}
				ts := httptest.NewServer(h)
				b.Cleanup(ts.Close)
				client := &http.Client{Transport: &http.Transport{}}
				b.Cleanup(client.CloseIdleConnections)
				return func(i int) time.Duration {
					r, err := http.NewRequest("POST", fmt.Sprintf("%s/v1/threads/th%d/messages", ts.URL, i%100), bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					r.Header.Set("Content-Type", "application/json")
					start := time.Now()
					resp, err := client.Do(r)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					d := time.Since(start)
					if resp.StatusCode != http.StatusCreated {
						b.Fatalf("status %d", resp.StatusCode)
					}
					return d
				}
			}
			viaLoom := send(loom)
			floor := send(floorHandler)
			if store == "sqlite" {
				floor = func(i int) time.Duration {
					start := time.Now()
					if _, err := held[i%100].Append(b.Context(), msg); err != nil {
						b.Fatal(err)
					}
					return time.Since(start)
				}
			}
			b.ReportAllocs()
			var loomT, floorT time.Duration
			n := 0
			cpu := cputime.Process()
			for b.Loop() {
				floorT += floor(n)
				loomT += viaLoom(n)
				n++
			}
			cpu = cputime.Process() - cpu
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) / 1e3 }
			if cpu > 0 {
				b.ReportMetric(us(cpu), "cpu-µs")
			}
			b.ReportMetric(us(loomT), "loom-µs")
			b.ReportMetric(us(floorT), "floor-µs")
			b.ReportMetric(us(loomT-floorT), "own-µs")
			b.ReportMetric(float64(loomT)/float64(floorT), "ratio")
		})
	}
}

// benchWriter is a ResponseWriter that keeps the status and drops the
// body.
type benchWriter struct {
	header http.Header
	code   int
}

func (w *benchWriter) Header() http.Header { return w.header }
func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *benchWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}
