package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// BenchmarkListThreadsFirstPage is what the thread list's first paint
// waits for on a SQLite store of 10,000 threads (a quarter of them loom's
// own): GET /v1/threads?order=updated&limit=50, through the whole handler.
func BenchmarkListThreadsFirstPage(b *testing.B) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now }
	db, err := thread.Open(b.Context(), "sqlite://"+b.TempDir()+"/bench.db", &thread.Options{Now: clock})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	g := db.Group()
	for i := range 10_000 {
		o := thread.CreateOptions{ID: fmt.Sprintf("th_%05d", i), Title: fmt.Sprintf("thread %d", i), Kind: thread.KindLocal}
		if i%4 == 0 {
			o.Labels = map[string]string{thread.LabelOwner: "worklog"}
		}
		if _, err := g.Create(b.Context(), o); err != nil {
			b.Fatal(err)
		}
	}
	if err := g.Apply(b.Context()); err != nil {
		b.Fatal(err)
	}
	s := newServer(b, Options{DB: db})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/v1/threads?order=updated&limit=50", nil))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
