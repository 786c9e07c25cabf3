package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Bench runs the standard benchmark scenarios against stores made by
// newStore, as sub-benchmarks: append one message, a chat turn, fork at
// depths 10, 1,000 and 100,000, the last 50 messages at depths 1,000 and
// 100,000, a full read of 1,000 messages, a view of 8,000 tokens at depths
// 1,000 and 100,000, 64 writers appending at once (to
// 64 threads and to one; see BenchConcurrent), and time travel in a thread
// of 10,000 versions. Flat costs must stay flat across depths. opts may be nil.
func Bench(b *testing.B, newStore func(b *testing.B) store.Store, opts *BenchOptions) {
	var o BenchOptions
	if opts != nil {
		o = *opts
	}
	deep := func(b *testing.B, depth int) {
		if o.MaxDepth > 0 && depth > o.MaxDepth {
			b.Skipf("depth %d is over this store's MaxDepth of %d", depth, o.MaxDepth)
		}
	}
	user := strings.Repeat("u", 200)
	assistant := strings.Repeat("a", 600)
	// Appends go to a thread that grows to 10,000 commits and is then
	// replaced, off the clock: the cost of turn 1 to turn 10,000, in a store
	// that does not grow with b.N.
	appendBench := func(b *testing.B, msgs ...message.Message) {
		s := newStore(b)
		th := newThread(b, s, 0)
		b.ReportAllocs()
		for i := 1; b.Loop(); i++ {
			if _, err := th.Append(b.Context(), msgs...); err != nil {
				b.Fatal(err)
			}
			if i%10_000 == 0 {
				b.StopTimer()
				if err := th.Delete(b.Context()); err != nil {
					b.Fatal(err)
				}
				th = newThread(b, s, 0)
				b.StartTimer()
			}
		}
	}
	b.Run("Append", func(b *testing.B) { appendBench(b, message.User(user)) })
	b.Run("ChatTurn", func(b *testing.B) { appendBench(b, message.User(user), message.Assistant(assistant)) })
	for _, depth := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("Fork/depth=%d", depth), func(b *testing.B) {
			deep(b, depth)
			th := newThread(b, newStore(b), depth)
			// The forks are deleted, off the clock, a thousand at a time:
			// the store stays the same size, so what is measured is the
			// fork at this depth, not a store growing with b.N.
			var forks []*thread.Thread
			b.ReportAllocs()
			for b.Loop() {
				f, err := th.Fork(b.Context(), thread.ForkOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if forks = append(forks, f); len(forks) == 1000 {
					b.StopTimer()
					for _, f := range forks {
						if err := f.Delete(b.Context()); err != nil {
							b.Fatal(err)
						}
					}
					forks = forks[:0]
					b.StartTimer()
				}
			}
		})
	}
	for _, depth := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("Last50/depth=%d", depth), func(b *testing.B) {
			deep(b, depth)
			th := newThread(b, newStore(b), depth)
			b.ReportAllocs()
			for b.Loop() {
				if msgs, err := th.Messages(b.Context(), thread.ReadOptions{Last: 50}); err != nil || len(msgs) != 50 {
					b.Fatal(len(msgs), err)
				}
			}
		})
	}
	b.Run("ReadAll/messages=1000", func(b *testing.B) {
		th := newThread(b, newStore(b), 1000)
		b.ReportAllocs()
		for b.Loop() {
			if msgs, err := th.Messages(b.Context(), thread.ReadOptions{}); err != nil || len(msgs) != 1000 {
				b.Fatal(len(msgs), err)
			}
		}
	})
	for _, depth := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("View/tokens=8000/depth=%d", depth), func(b *testing.B) {
			deep(b, depth)
			th := newThread(b, newStore(b), depth)
			opts := thread.ViewOptions{Model: "gpt-4o", Budget: 8000}
			if _, err := th.View(b.Context(), opts); err != nil { // warms the token cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := th.View(b.Context(), opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, threads := range []int{64, 1} {
		b.Run(fmt.Sprintf("Concurrent/writers=64/threads=%d", threads), func(b *testing.B) {
			BenchConcurrent(b, newStore(b), 64, threads)
		})
	}
	b.Run("TimeTravel/versions=10000", func(b *testing.B) {
		th := newThread(b, newStore(b), 10_000)
		r := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		for b.Loop() {
			v := 2 + r.Int64N(th.Version()-1)
			if msgs, err := th.Messages(b.Context(), thread.ReadOptions{Version: v, Last: 50}); err != nil || len(msgs) != int(min(v-1, 50)) {
				b.Fatal(v, len(msgs), err)
			}
		}
	})
}

// BenchConcurrent has writers goroutines append 400-byte messages through s
// at once, spread over threads threads (1: all on one thread, where every
// append is a compare-and-swap race), and reports the latency of an append
// (p50-µs, p99-µs) and the throughput (appends/s).
func BenchConcurrent(b *testing.B, s store.Store, writers, threads int) {
	ctx := context.Background()
	db := thread.New(s, &thread.Options{AppendRetries: 1_000_000})
	handles := make([]*thread.Thread, writers)
	for i := range handles {
		var err error
		if i < threads {
			handles[i], err = db.Create(ctx, thread.CreateOptions{})
		} else {
			handles[i], err = db.Thread(ctx, handles[i%threads].ID()) // a handle of its own
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	text := strings.Repeat("m", 400)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		next      atomic.Int64
	)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((writers + procs - 1) / procs)
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		th := handles[int(next.Add(1)-1)%writers]
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
}

// BenchOptions tune Bench.
type BenchOptions struct {
	// MaxDepth skips the scenarios that first build a thread deeper than
	// this: building 100,000 commits takes minutes on a slow store. 0 runs
	// them all.
	MaxDepth int
}

// newThread makes a thread of depth single-message commits (and versions).
func newThread(b *testing.B, s store.Store, depth int) *thread.Thread {
	b.Helper()
	ctx := context.Background()
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("m", 400)
	for range depth {
		if _, err := th.Append(ctx, message.User(text)); err != nil {
			b.Fatal(err)
		}
	}
	return th
}
