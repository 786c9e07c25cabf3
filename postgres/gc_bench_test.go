package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// BenchmarkGC100k measures a GC (retention, issue 29) that keeps the last
// 100 versions of a thread of 100,000:
//
//   - line: 100,000 appends of a ~1 KB message; every message is still
//     reached by the head, so only history goes;
//   - regenerated: a conversation of 1,000 ~1 KB messages whose last
//     answer was regenerated 100,000 times (each version a new commit on
//     the same parent), so 99,900 commits are freed.
//
// It reports the GC's time (its reads of the history it drops, and the one
// prune batch), the tables' size (pg_total_relation_size of every loom_
// table, search index included, after a plain VACUUM) before and after,
// and after a VACUUM FULL, the bytes of the messages the kept versions
// reach (their stored JSON), and the ratio of the size after to those.
// Run it with -benchtime=1x: each run builds its thread afresh.
func BenchmarkGC100k(b *testing.B) {
	const versions = 100_000
	for _, shape := range []string{"line", "regenerated"} {
		b.Run(shape, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := open(b, testserver.Postgres(b), nil)
				ctx := b.Context()
				buildGCBench(b, s, shape, versions)
				if err := s.foldAll(ctx); err != nil {
					b.Fatal(err)
				}
				before := tableBytes(b, s, "VACUUM")
				db := thread.New(s, nil)
				b.StartTimer()
				start := time.Now()
				rep, err := db.GC(ctx, thread.GCOptions{})
				gcTime := time.Since(start)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if rep.Pruned != 1 || rep.Versions != versions+1-100 {
					b.Fatalf("gc: %+v; want %d versions pruned", rep, versions+1-100)
				}
				after := tableBytes(b, s, "VACUUM")
				full := tableBytes(b, s, "VACUUM FULL")
				var kept, commits int64
				if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(octet_length(messages)), 0), count(*) FROM loom_commits`).Scan(&kept, &commits); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(gcTime.Seconds(), "gc-s")
				b.ReportMetric(float64(before)/1e6, "MB-before")
				b.ReportMetric(float64(after)/1e6, "MB-after")
				b.ReportMetric(float64(full)/1e6, "MB-after-full")
				b.ReportMetric(float64(kept)/1e6, "MB-kept-raw")
				b.ReportMetric(float64(after)/float64(kept), "after/raw")
				b.ReportMetric(float64(full)/float64(kept), "full/raw")
				b.ReportMetric(float64(commits), "commits-kept")
				b.StartTimer()
			}
		})
	}
}

// tableBytes runs vacuum ("VACUUM" or "VACUUM FULL") on the store's
// tables and returns their size, indexes and TOAST included.
func tableBytes(tb testing.TB, s *Store, vacuum string) int64 {
	tb.Helper()
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, vacuum); err != nil {
		tb.Fatal(err)
	}
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname LIKE 'loom\_%'`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// prose returns about 1 KB of words, different each call.
func prose(rng *rand.Rand) string {
	var sb strings.Builder
	for sb.Len() < 1000 {
		w := rng.IntN(5000)
		fmt.Fprintf(&sb, "w%x%c ", w, 'a'+rune(w%26))
	}
	return sb.String()
}

// buildGCBench makes the thread "t" of BenchmarkGC100k's shape, with
// versions+1 versions, by batches of commits and moves, and its retention
// (the last 100 versions).
func buildGCBench(tb testing.TB, s store.Store, shape string, versions int) {
	tb.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(29, 100))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tick := func() time.Time { at = at.Add(time.Microsecond); return at }
	n := 0
	commit := func(parent string, depth int64, role message.Role) *thread.Commit {
		n++
		id := fmt.Sprintf("c%07d", n)
		return &thread.Commit{ID: id, Parent: parent, Depth: depth, Op: thread.OpAppend, Time: tick(),
			Messages: []message.Message{{ID: "m" + id, Role: role, Contents: []message.Content{message.Text{Text: prose(rng)}}}}}
	}
	now := tick()
	rec := &thread.Record{ID: "t", Kind: thread.KindLocal, Version: 1, CreatedAt: now, UpdatedAt: now,
		Labels: thread.Retention{KeepLast: 100}.Labels()}
	if err := s.Apply(ctx, &store.Batch{Create: []store.Creation{{Record: rec, Op: thread.OpCreate}}}); err != nil {
		tb.Fatal(err)
	}
	version := int64(1)
	var b store.Batch
	flush := func() {
		if len(b.Moves) == 0 {
			return
		}
		if err := s.Apply(ctx, &b); err != nil {
			tb.Fatal(err)
		}
		b = store.Batch{}
	}
	add := func(c *thread.Commit) {
		b.Commits = append(b.Commits, c)
		b.Moves = append(b.Moves, store.Move{Thread: "t", From: version, Head: c.ID, Op: c.Op, Time: c.Time})
		version++
		if len(b.Moves) == 2000 {
			flush()
		}
	}
	head, depth, question := "", int64(0), ""
	line := versions
	if shape == "regenerated" {
		line = 1000
	}
	for i := range line {
		role := message.RoleUser
		if i%2 == 1 {
			role = message.RoleAssistant
		}
		c := commit(head, depth+1, role)
		add(c)
		question, head, depth = head, c.ID, depth+1
	}
	if shape == "regenerated" {
		// The last answer, made again and again on the question before it.
		for range versions - line {
			add(commit(question, depth, message.RoleAssistant))
		}
	}
	flush()
}
