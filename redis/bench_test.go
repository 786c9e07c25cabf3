package redis_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) thread.Store { return open(b, testserver.Redis(b), nil) }, nil)
}

// BenchmarkConcurrentAppend has 64 goroutines append to 64 threads (one
// each) through one store, and reports the latency percentiles of an
// append, the throughput, and the memory Redis uses per append.
func BenchmarkConcurrentAppend(b *testing.B) {
	s := open(b, testserver.Redis(b), nil)
	db := thread.New(s, nil)
	ctx := context.Background()
	const workers = 64
	ths := make([]*thread.Thread, workers)
	for i := range ths {
		th, err := db.Create(ctx, thread.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ths[i] = th
	}
	before := usedMemory(b, s)
	msg := message.User(fmt.Sprintf("%0400d", 0))
	var mu sync.Mutex
	var lat []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + workers - 1) / workers
	for w := range workers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, per)
			for range per {
				t0 := time.Now()
				if _, err := ths[w].Append(ctx, msg); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(usedMemory(b, s)-before)/float64(len(lat)), "redis-B/append")
}

func usedMemory(b *testing.B, s *redis.Store) int64 {
	var n int64
	info, err := s.Client().Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	fmt.Sscanf(info[len("# Memory\r\nused_memory:"):], "%d", &n)
	return n
}
