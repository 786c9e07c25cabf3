package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// BenchmarkListWorkflows lists a page of 50 of 100 workflows on SQLite,
// each with ten recorded step attempts: GET /v1/workflows through the
// handler.
func BenchmarkListWorkflows(b *testing.B) {
	ctx := b.Context()
	db, err := thread.Open(ctx, "sqlite://"+b.TempDir()+"/wf.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	for i := range 100 {
		w, err := workflow.Create(ctx, db, workflow.CreateOptions{ID: fmt.Sprintf("wf%03d", i)})
		if err != nil {
			b.Fatal(err)
		}
		g := workflow.NewGraph()
		for j := range 10 {
			var next []string
			if j < 9 {
				next = []string{fmt.Sprintf("s%d", j+1)}
			}
			g.Add(fmt.Sprintf("s%d", j), func(context.Context, *workflow.Step) (any, error) { return "done", nil }, next...)
		}
		g.Start("s0")
		if _, err := w.Run(ctx, g, nil); err != nil {
			b.Fatal(err)
		}
	}
	s := newServer(b, Options{DB: db})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/v1/workflows?limit=50", nil))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
