package redis_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
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

// BenchmarkWatchLatency measures how long a change takes from the start of
// an append through one store to the listener of a DB on another store
// (two loom processes): p50 and p99 in milliseconds. On a cluster the
// thread's family is on another node than the listener's connection, so
// the notice crosses the cluster bus.
func BenchmarkWatchLatency(b *testing.B) {
	b.Run("Single", func(b *testing.B) { watchLatency(b, testserver.Redis(b), false) })
	b.Run("Cluster", func(b *testing.B) { watchLatency(b, startCluster(b, 3), true) })
}

func watchLatency(b *testing.B, url string, cluster bool) {
	ws := open(b, url, nil)
	writer := thread.New(ws, nil)
	listener := thread.New(open(b, url, nil), nil)
	ctx := b.Context()
	heard := make(chan thread.Change, 1024)
	if err := listener.Watch(ctx, func(c thread.Change) { heard <- c }); err != nil {
		b.Fatal(err)
	}
	var th *thread.Thread
	for i := 0; th == nil; i++ {
		t, err := writer.Create(ctx, thread.CreateOptions{ID: fmt.Sprint("bench", i)})
		if err != nil {
			b.Fatal(err)
		}
		<-heard
		if !cluster {
			th = t
			break
		}
		// go-redis subscribes on the node of the channel's slot.
		cc := ws.Client().(*goredis.ClusterClient)
		sub, err := cc.MasterForKey(ctx, ws.Prefix()+":changes")
		if err != nil {
			b.Fatal(err)
		}
		if at, err := nodeOf(ctx, ws, t.ID()); err != nil {
			b.Fatal(err)
		} else if at != sub.Options().Addr {
			th = t
		}
	}
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := th.Append(ctx, message.User("x")); err != nil {
			b.Fatal(err)
		}
		for c := range heard {
			if c.Kind == thread.ChangeMove && c.Thread == th.ID() && c.Version == th.Version() {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
