package postgres

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) thread.Store { return open(b, testserver.Postgres(b), nil) }, nil)
}

// BenchmarkConcurrentAppend appends from 64 goroutines at once, each to its
// own thread or all to one, and reports the latency of an append (p50,
// p99) and the throughput.
func BenchmarkConcurrentAppend(b *testing.B) {
	const goroutines = 64
	for _, shared := range []bool{false, true} {
		name := "threads=64"
		if shared {
			name = "threads=1"
		}
		b.Run(name, func(b *testing.B) {
			s := open(b, testserver.Postgres(b), &Options{MaxConns: 16})
			db := thread.New(s, &thread.Options{AppendRetries: 1_000_000})
			ctx := b.Context()
			threads := make([]*thread.Thread, goroutines)
			for i := range threads {
				if shared && i > 0 {
					h, err := db.Thread(ctx, threads[0].ID())
					if err != nil {
						b.Fatal(err)
					}
					threads[i] = h
					continue
				}
				th, err := db.Create(ctx, thread.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				threads[i] = th
			}
			text := strings.Repeat("m", 400)
			var (
				mu        sync.Mutex
				latencies []time.Duration
				next      atomic.Int64
			)
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((goroutines + procs - 1) / procs)
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				th := threads[int(next.Add(1)-1)%goroutines]
				var mine []time.Duration
				for pb.Next() {
					t0 := time.Now()
					if _, err := th.Append(ctx, message.User(text)); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			if len(latencies) == 0 {
				return
			}
			slices.Sort(latencies)
			pct := func(p float64) float64 {
				return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds())
			}
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "appends/s")
		})
	}
}

// BenchmarkDiskPerTurn appends chat turns (a 200-byte question, a 600-byte
// answer) to one thread and reports what the tables and their indexes grew
// by, per turn.
func BenchmarkDiskPerTurn(b *testing.B) {
	s := open(b, testserver.Postgres(b), nil)
	ctx := b.Context()
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	size := func() int64 {
		if _, err := s.pool.Exec(ctx, "CHECKPOINT"); err != nil {
			b.Logf("checkpoint: %v", err) // needs superuser or pg_checkpoint; sizes are still right
		}
		var n int64
		err := s.pool.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
			WHERE c.relkind = 'r' AND c.relname LIKE 'loom\_%'`).Scan(&n)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	user, assistant := message.User(strings.Repeat("u", 200)), message.Assistant(strings.Repeat("a", 600))
	before := size()
	turns := 0
	b.ReportAllocs()
	for b.Loop() {
		if _, err := th.Append(ctx, user, assistant); err != nil {
			b.Fatal(err)
		}
		turns++
	}
	b.StopTimer()
	if turns >= 100 {
		b.ReportMetric(float64(size()-before)/float64(turns), "disk-B/turn")
	}
}
