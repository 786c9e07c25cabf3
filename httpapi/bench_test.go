package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkHTTP serves the real handler on a loopback TCP listener, with
// SQLite in a temporary directory, and drives it with a pool of concurrent
// HTTP clients (8 per GOMAXPROCS). It reports requests per second and the
// 99th-percentile latency.
func BenchmarkHTTP(b *testing.B) {
	open := func(b *testing.B) (*thread.DB, *httptest.Server, *http.Client) {
		db, err := thread.Open(b.Context(), "sqlite://"+b.TempDir()+"/bench.db", nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		ts := httptest.NewServer(newServer(b, Options{DB: db}))
		b.Cleanup(ts.Close)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
		b.Cleanup(client.CloseIdleConnections)
		return db, ts, client
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 16) // ~720 bytes

	view50 := func(text string) func(b *testing.B) {
		return func(b *testing.B) {
			db, ts, client := open(b)
			msgs := make([]message.Message, 50)
			for i := range msgs {
				if i%2 == 0 {
					msgs[i] = message.User(text)
				} else {
					msgs[i] = message.Assistant(text)
				}
			}
			if _, err := db.Create(b.Context(), thread.CreateOptions{ID: "th", Messages: msgs}); err != nil {
				b.Fatal(err)
			}
			url := ts.URL + "/v1/threads/th/view"
			drive(b, client, func(int64) (*http.Request, error) {
				return http.NewRequest("POST", url, strings.NewReader(`{"model":"gpt-4.1"}`))
			}, http.StatusOK)
		}
	}
	// 50 messages of ~720 bytes (a 40 KB answer), and of ~90 bytes (a
	// short chat, 8 KB).
	b.Run("view50", view50(text))
	b.Run("view50short", view50(text[:90]))

	b.Run("append100threads", func(b *testing.B) {
		db, ts, client := open(b)
		for i := range 100 {
			if _, err := db.Create(b.Context(), thread.CreateOptions{ID: fmt.Sprintf("th%d", i)}); err != nil {
				b.Fatal(err)
			}
		}
		body := []byte(fmt.Sprintf(`{"messages":[{"role":"user","contents":[{"type":"text","text":%q}]}]}`, text))
		drive(b, client, func(n int64) (*http.Request, error) {
			return http.NewRequest("POST", fmt.Sprintf("%s/v1/threads/th%d/messages", ts.URL, n%100), bytes.NewReader(body))
		}, http.StatusCreated)
	})
}

// drive sends b.N requests made by next from concurrent clients, and
// reports req/s and the p50 and p99 latencies.
func drive(b *testing.B, client *http.Client, next func(n int64) (*http.Request, error), want int) {
	b.Helper()
	var (
		mu   sync.Mutex
		lats []time.Duration
		seq  atomic.Int64
	)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			r, err := next(seq.Add(1))
			if err != nil {
				b.Error(err)
				return
			}
			r.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := client.Do(r)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mine = append(mine, time.Since(start))
			if resp.StatusCode != want {
				b.Errorf("status %d, want %d", resp.StatusCode, want)
				return
			}
		}
		mu.Lock()
		lats = append(lats, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	q := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(lats))/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkPageReads measures what the web UI asks for as it opens, on
// SQLite: the first page of 50 threads of a 10,000-thread store (the
// threads page), and the newest 50 messages of a 100,000-message thread
// with its history page and its fork family (a thread's page). One
// client, one request at a time: the time a person waits.
func BenchmarkPageReads(b *testing.B) {
	db, err := thread.Open(b.Context(), "sqlite://"+b.TempDir()+"/bench.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := b.Context()
	g := db.Group()
	for i := range 10_000 {
		if _, err := g.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("t%05d", i), Title: "a thread", Messages: []message.Message{message.User("hello")}}); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 {
			if err := g.Apply(ctx); err != nil {
				b.Fatal(err)
			}
			g = db.Group()
		}
	}
	big, err := db.Create(ctx, thread.CreateOptions{ID: "big"})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]message.Message, 1000)
	for i := range batch {
		batch[i] = message.User(fmt.Sprintf("message %d of a long thread, with some words to search", i))
	}
	for range 100 {
		if _, err := big.Append(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := big.Fork(ctx, thread.ForkOptions{ID: "big-fork"}); err != nil {
		b.Fatal(err)
	}
	s := newServer(b, Options{DB: db})
	get := func(path string) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", path, w.Code, w.Body)
				}
			}
		}
	}
	b.Run("threads-page-of-10k", get("/v1/threads?limit=50"))
	b.Run("last-50-of-100k-messages", get("/v1/threads/big/messages?limit=50"))
	b.Run("history-page", get("/v1/threads/big/history?limit=50"))
	b.Run("family-in-10k", get("/v1/threads/big/family"))
}
