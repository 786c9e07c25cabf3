package redis_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return open(b, testserver.Redis(b), nil) }, nil)
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

// BenchmarkScale measures the reads that must not grow with the store:
// the fork family of 100 threads, the first page (50) of a rare label and
// the first page of the list, with n threads of one message each, every
// 100th of them a fork labelled rare=yes of one of the roots of families
// of 100. Each read runs side by side with its fallback (the scan a store
// without the index does: Family without store.ForkIndex, and a label
// page through a store in cluster mode, which keeps no label sets).
// LOOM_REDIS_SCALE lists the sizes (default "10000,100000").
func BenchmarkScale(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if v := os.Getenv("LOOM_REDIS_SCALE"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			url := testserver.Redis(b)
			s := open(b, url, nil)
			scan := open(b, url, &redis.Options{Cluster: true})
			db := thread.New(s, nil)
			member := populate(b, db, n)
			b.Logf("%d threads: Redis uses %d bytes a thread", n, usedMemory(b, s)/int64(n))
			family := func(b *testing.B, db *thread.DB) {
				for b.Loop() {
					if _, fam, err := db.Family(b.Context(), member); err != nil || len(fam) != 100 {
						b.Fatalf("family: %d, %v", len(fam), err)
					}
				}
			}
			page := func(b *testing.B, s store.Store, opts thread.ListOptions) {
				for b.Loop() {
					got := 0
					for _, err := range s.Threads(b.Context(), opts) {
						if err != nil {
							b.Fatal(err)
						}
						got++
					}
					if got != 50 {
						b.Fatalf("a page of %d", got)
					}
				}
			}
			rare := thread.ListOptions{Labels: map[string]string{"rare": "yes"}, Limit: 50}
			b.Run("Family=100", func(b *testing.B) { family(b, db) })
			b.Run("Family=100/forks", func(b *testing.B) { family(b, thread.New(forksOnly{s, s}, nil)) })
			b.Run("Family=100/scan", func(b *testing.B) { family(b, thread.New(struct{ store.Store }{s}, nil)) })
			b.Run("RareLabelPage", func(b *testing.B) { page(b, s, rare) })
			b.Run("RareLabelPage/scan", func(b *testing.B) { page(b, scan, rare) })
			b.Run("FirstPage", func(b *testing.B) { page(b, s, thread.ListOptions{Limit: 50}) })
		})
	}
}

// forksOnly is a store with a ForkIndex but no DescendantIndex: Family
// asks it for each member's forks.
type forksOnly struct {
	store.Store
	store.ForkIndex
}

// populate makes n threads of one message each, every 100th a fork of
// one of the roots of families of 100, labelled rare=yes, and returns a
// fork of the first family.
func populate(b *testing.B, db *thread.DB, n int) string {
	ctx := b.Context()
	msgs := []message.Message{message.User("hello")}
	roots := make([]*thread.Thread, (n/100+98)/99)
	for i := range roots {
		th, err := db.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("r%07d", i), Messages: msgs})
		if err != nil {
			b.Fatal(err)
		}
		roots[i] = th
	}
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n-len(roots); i += workers {
				id := fmt.Sprintf("t%07d", i)
				var err error
				if i%100 == 0 {
					_, err = roots[i/100/99].Fork(ctx, thread.ForkOptions{ID: id, Labels: map[string]string{"rare": "yes"}})
				} else {
					_, err = db.Create(ctx, thread.CreateOptions{ID: id, Messages: msgs})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return "t0000100"
}
