package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// TestListByUpdatedUsesIndex: a page most recently updated first, from the
// start or after a cursor, is a seek in threads_by_updated, not a sort of
// the tenant's threads.
func TestListByUpdatedUsesIndex(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, paged, args, cursor := listSQL(thread.ListOptions{Order: thread.OrderUpdated})
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{first, append(args, 50)},
		{paged, append(append(args, cursor(&thread.Record{ID: "x", UpdatedAt: time.Now()})...), 50)},
	} {
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q.sql, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if !strings.Contains(p, "threads_by_updated") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of %s:\n%s", q.sql, p)
		}
	}
}

// seedThreads makes n empty threads in one batch, each updated at its own
// second, and every fourth one loom's own.
func seedThreads(tb testing.TB, s store.Store, n int) {
	tb.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &store.Batch{}
	for i := range n {
		at := base.Add(time.Duration(i*7919%n) * time.Second)
		r := &thread.Record{ID: fmt.Sprintf("th_%06d", i), Kind: thread.KindLocal, Title: fmt.Sprintf("thread %d", i),
			Version: 1, CreatedAt: at, UpdatedAt: at}
		if i%4 == 0 {
			r.Labels = map[string]string{thread.LabelOwner: "worklog"}
		}
		b.Create = append(b.Create, store.Creation{Record: r, Op: thread.OpCreate})
	}
	if err := s.Apply(context.Background(), b); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkListByUpdated is the first page of 50 threads, most recently
// updated first and loom's own left out, on a store of 10,000: what the
// thread list's first paint waits for.
func BenchmarkListByUpdated(b *testing.B) {
	s := openBench(b, nil)
	seedThreads(b, s, 10_000)
	db := thread.New(s, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range db.Threads(ctx, thread.ListOptions{Order: thread.OrderUpdated, Internal: thread.InternalExclude, Limit: 51}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 51 {
			b.Fatalf("%d threads", n)
		}
	}
}
