package redis_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) thread.Store { return open(b, testserver.Redis(b), nil) }, nil)
}

// BenchmarkConcurrentAppend is storetest's concurrent scenario (64 writers,
// 64 threads) that also reports the memory Redis uses per append.
func BenchmarkConcurrentAppend(b *testing.B) {
	s := open(b, testserver.Redis(b), nil)
	before := usedMemory(b, s)
	storetest.BenchConcurrent(b, s, 64, 64)
	b.ReportMetric(float64(usedMemory(b, s)-before)/float64(b.N), "redis-B/append")
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
