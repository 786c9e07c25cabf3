package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// buildThreads fills s with n threads of one message each, in bulk SQL:
// t00000001, t00000002, …; every 100th (t…100, t…200, …) is a fork of a
// root, labelled rare=yes, and every root (t00000001, t00000101, …) has
// 100 forks: the family of t00000001 is t00000001 and t00000100 to
// t00010000 (101 threads).
func buildThreads(b *testing.B, s *Store, n int) {
	b.Helper()
	ctx := b.Context()
	msgs, err := encodeMessages([]message.Message{message.User("a message of the thread")})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO loom_commits (seq, id, parent, depth, refs, op, at, state_from, messages)
			SELECT g, 'c' || lpad(g::text, 8, '0'), NULL, 1, 1, 'create', $3::timestamptz + g * interval '1 ms', '', $1
			FROM generate_series(1, $2) g`, []any{msgs, n, at}},
		{`INSERT INTO loom_threads (seq, id, tenant, kind, title, labels, head, version, created_at, updated_at,
				forked_thread, forked_commit, forked_message)
			SELECT g, 't' || lpad(g::text, 8, '0'), '', 'local', '',
				CASE WHEN g % 100 = 0 THEN '{"rare":"yes"}' ELSE '{}' END::jsonb, g, 1,
				$2::timestamptz + g * interval '1 ms', $2::timestamptz + g * interval '1 ms',
				CASE WHEN g % 100 = 0 THEN 't' || lpad((((g / 100 - 1) / 100) * 100 + 1)::text, 8, '0') ELSE '' END,
				CASE WHEN g % 100 = 0 THEN 'c' || lpad((((g / 100 - 1) / 100) * 100 + 1)::text, 8, '0') ELSE '' END, ''
			FROM generate_series(1, $1) g`, []any{n, at}},
		{`INSERT INTO loom_history (thread, version, commit_seq, op, at)
			SELECT g, 1, g, 'create', $2::timestamptz + g * interval '1 ms' FROM generate_series(1, $1) g`, []any{n, at}},
		{`SELECT setval('loom_commit_seq', $1), setval('loom_thread_seq', $1)`, []any{n}},
		{`ANALYZE`, nil},
	} {
		if _, err := s.pool.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatalf("build %d threads: %v", n, err)
		}
	}
}

// BenchmarkScale measures the reads that must not grow with the store, on
// 10k, 100k and 1M threads (buildThreads): a fork family of 101 threads
// (DB.Family, and the store's Descendants alone), the first page of 50 of
// a rare label (1% of the threads), and the first page of 50 of the list.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		s := open(b, testserver.Postgres(b), nil)
		t0 := time.Now()
		buildThreads(b, s, n)
		b.Logf("%d threads built in %v", n, time.Since(t0).Round(time.Millisecond))
		db := thread.New(s, nil)
		ctx := b.Context()
		b.Run(fmt.Sprintf("threads=%d/family", n), func(b *testing.B) {
			for b.Loop() {
				_, fam, err := db.Family(ctx, "t00000001")
				if err != nil || len(fam) != 101 {
					b.Fatalf("family: %d threads (%v)", len(fam), err)
				}
			}
		})
		b.Run(fmt.Sprintf("threads=%d/descendants", n), func(b *testing.B) {
			for b.Loop() {
				k := 0
				for _, err := range s.Descendants(ctx, "t00000001") {
					if err != nil {
						b.Fatal(err)
					}
					k++
				}
				if k != 100 {
					b.Fatalf("%d descendants", k)
				}
			}
		})
		page := func(b *testing.B, opts thread.ListOptions) {
			for b.Loop() {
				k := 0
				for _, err := range s.Threads(ctx, opts) {
					if err != nil {
						b.Fatal(err)
					}
					k++
				}
				if k != 50 {
					b.Fatalf("%d threads", k)
				}
			}
		}
		b.Run(fmt.Sprintf("threads=%d/rare-label-page", n), func(b *testing.B) {
			page(b, thread.ListOptions{Labels: map[string]string{"rare": "yes"}, Limit: 50})
		})
		b.Run(fmt.Sprintf("threads=%d/rare-label-page-after", n), func(b *testing.B) {
			// A page from the middle of the label's threads.
			page(b, thread.ListOptions{Labels: map[string]string{"rare": "yes"}, After: fmt.Sprintf("t%08d", n/2), Limit: 50})
		})
		b.Run(fmt.Sprintf("threads=%d/first-page", n), func(b *testing.B) {
			page(b, thread.ListOptions{Limit: 50})
		})
		s.Close()
	}
}
