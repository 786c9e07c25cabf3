package sqlite

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// indexFixture fills s with n threads of the default tenant, made in
// batches of creations (no commits: every thread is empty). Thread i has
// the id ix_%08d and is updated at i µs. Every 100th (i%100 == 50) is a
// fork of the root i/10000*10000 (a family of 101 per 10,000 threads),
// with the labels rare=yes (1% of the threads, as postgres's
// BenchmarkScale) and family=<its root> (100 threads, whatever n). Every
// thread has the label team=a or team=b, half of them each.
func indexFixture(tb testing.TB, s *Store, n int) {
	tb.Helper()
	ctx := context.Background()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var b store.Batch
	for i := range n {
		at := base.Add(time.Duration(i) * time.Microsecond)
		r := &thread.Record{ID: indexID(i), Version: 1, CreatedAt: at, UpdatedAt: at,
			Labels: map[string]string{"team": string(rune('a' + i%2))}}
		if i%100 == 50 {
			root := indexID(i / 10_000 * 10_000)
			r.ForkedFrom = thread.ForkPoint{Thread: root}
			r.Labels["rare"], r.Labels["family"] = "yes", root
		}
		b.Create = append(b.Create, store.Creation{Record: r, Op: thread.OpCreate})
		if len(b.Create) == 5000 || i == n-1 {
			if err := s.Apply(ctx, &b); err != nil {
				tb.Fatal(err)
			}
			b = store.Batch{}
		}
	}
}

func indexID(i int) string { return fmt.Sprintf("ix_%08d", i) }

// BenchmarkIndexedReads reads, through thread.DB, a fork family of 101
// threads; a page of 50 of a label of 100 threads, of a label of 1% of
// them and of a label of half of them, in id order (the first page and
// one from the middle) and by update; and the first page of 50 of the
// list; in stores (indexFixture) of 10,000 and 100,000 threads, and of
// 1,000,000 when LOOM_BENCH_1M=1 (building that one takes a minute or
// two). None of them may grow with the store (issue 27).
func BenchmarkIndexedReads(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("LOOM_BENCH_1M") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := openBench(b, nil)
			t0 := time.Now()
			indexFixture(b, s, n)
			b.Logf("%d threads built in %v", n, time.Since(t0).Round(time.Millisecond))
			db := thread.New(s, nil)
			b.Run("family", func(b *testing.B) {
				for b.Loop() {
					_, fam, err := db.Family(ctx, indexID(50))
					if err != nil || len(fam) != 101 {
						b.Fatalf("family: %d threads, %v", len(fam), err)
					}
				}
			})
			page := func(name string, opts thread.ListOptions) {
				b.Run(name, func(b *testing.B) {
					opts.Limit = 50
					for b.Loop() {
						got := 0
						for _, err := range db.Threads(ctx, opts) {
							if err != nil {
								b.Fatal(err)
							}
							got++
						}
						if got != opts.Limit {
							b.Fatalf("%d threads, want %d", got, opts.Limit)
						}
					}
				})
			}
			family := map[string]string{"family": indexID(0)}
			rare := map[string]string{"rare": "yes"}
			common := map[string]string{"team": "b"}
			page("label-100", thread.ListOptions{Labels: family})
			page("label-100-middle", thread.ListOptions{Labels: family, After: indexID(2500)})
			page("label-100-updated", thread.ListOptions{Labels: family, Order: thread.OrderUpdated})
			page("label-1%", thread.ListOptions{Labels: rare})
			page("label-1%-middle", thread.ListOptions{Labels: rare, After: indexID(n / 2)})
			page("label-1%-updated", thread.ListOptions{Labels: rare, Order: thread.OrderUpdated})
			page("label-50%", thread.ListOptions{Labels: common})
			page("label-50%-updated", thread.ListOptions{Labels: common, Order: thread.OrderUpdated})
			page("first-page", thread.ListOptions{})
		})
	}
}

// BenchmarkAppendLabelled is a chat turn on a thread with three labels:
// what label_index costs a write (a thread's update time is in it).
func BenchmarkAppendLabelled(b *testing.B) {
	ctx := context.Background()
	db := thread.New(openBench(b, nil), nil)
	th, err := db.Create(ctx, thread.CreateOptions{Labels: map[string]string{"team": "a", "project": "loom", "user": "u1"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := th.Append(ctx, user, assistant); err != nil {
			b.Fatal(err)
		}
	}
}
