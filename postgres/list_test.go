package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

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

// TestListByUpdatedUsesIndex: on 10,000 threads, a page most recently
// updated first, from the start or after a cursor, is a scan of
// loom_threads_updated, not a sort of the tenant's threads.
func TestListByUpdatedUsesIndex(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	seedThreads(t, s, 10_000)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, "ANALYZE loom_threads"); err != nil {
		t.Fatal(err)
	}
	first, paged, args, cursor := listSQL(thread.ListOptions{Order: thread.OrderUpdated})
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{first, append(args, 50)},
		{paged, append(append(args, cursor(&thread.Record{ID: "th_005000", UpdatedAt: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)})...), 50)},
	} {
		rows, err := s.pool.Query(ctx, "EXPLAIN "+q.sql, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, "loom_threads_updated") || strings.Contains(p, "Sort") {
			t.Errorf("plan of %s:\n%s", q.sql, p)
		}
	}
}

// BenchmarkListByUpdated is the first page of 50 threads, most recently
// updated first and loom's own left out, on a store of 10,000.
func BenchmarkListByUpdated(b *testing.B) {
	s := open(b, testserver.Postgres(b), nil)
	seedThreads(b, s, 10_000)
	db := thread.New(s, nil)
	ctx := context.Background()
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

// TestLabelPageUsesIndex: on 10,000 threads, a page of a label, from the
// start or after a cursor, with one label or two, walks loom_labels in id
// order and looks each record up: no sort, no scan of the threads.
func TestLabelPageUsesIndex(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	seedThreads(t, s, 10_000)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	for _, labels := range []map[string]string{
		{thread.LabelOwner: "worklog"},
		{thread.LabelOwner: "worklog", "other": "x"},
	} {
		first, paged, args, cursor := listSQL(thread.ListOptions{Labels: labels})
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{first, append(slices.Clone(args), 50)},
			{paged, append(append(slices.Clone(args), cursor(&thread.Record{ID: "th_005000"})...), 50)},
		} {
			rows, err := s.pool.Query(ctx, "EXPLAIN "+q.sql, q.args...)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			p := strings.Join(plan, "\n")
			if !strings.Contains(p, "loom_labels_pkey") || strings.Contains(p, "Sort") || strings.Contains(p, "Seq Scan on loom_threads") ||
				strings.Contains(p, "Seq Scan on loom_labels") || strings.Contains(p, "Merge Join") || strings.Contains(p, "Hash") {
				t.Errorf("plan of %s:\n%s", q.sql, p)
			}
		}
	}
}

// TestDescendants: a family walked down in one query, its forks' forks
// included, other threads and the root left out.
func TestDescendants(t *testing.T) {
	s := open(t, testserver.Postgres(t), nil)
	ctx := t.Context()
	db := thread.New(s, nil).WithTenant("acme")
	root, err := db.Create(ctx, thread.CreateOptions{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	fork := func(from *thread.Thread, id string) *thread.Thread {
		f, err := from.Fork(ctx, thread.ForkOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f1 := fork(root, "f1")
	fork(root, "f2")
	fork(fork(f1, "g1"), "h1")
	if _, err := db.Create(ctx, thread.CreateOptions{ID: "lone"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for r, err := range s.Descendants(ctx, "acme/root") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.ID)
	}
	slices.Sort(got)
	if want := []string{"acme/f1", "acme/f2", "acme/g1", "acme/h1"}; !slices.Equal(got, want) {
		t.Errorf("descendants of root = %v, want %v", got, want)
	}
	for range s.Descendants(ctx, "acme/lone") {
		t.Error("lone has descendants")
	}
}

// TestMigrateLabels: the migration to schema 7 indexes the labels of the
// threads a database holds.
func TestMigrateLabels(t *testing.T) {
	s := open(t, restoreFixture(t), nil)
	var labels, indexed int
	err := s.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM loom_threads t, jsonb_each_text(t.labels)),
		(SELECT count(*) FROM loom_labels)`).Scan(&labels, &indexed)
	if err != nil || labels == 0 || indexed != labels {
		t.Errorf("%d labels, %d indexed (%v)", labels, indexed, err)
	}
}
