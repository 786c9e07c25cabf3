package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/cputime"
	"github.com/loomthreads/loom/thread"
)

// The benchmarks of issue 27, the store's path: a full read of a long
// thread with the commit cache on and off, and the latency of an agent's
// turns while the write-ahead log is checkpointed.

// BenchmarkFullReadCache reads all 200,000 messages of a thread (one a
// commit) through thread.DB, with the 32 MiB cache of decoded commits on
// and off, side by side on one file. The cache must not cost more than it
// saves: cache=on's cpu-ns/op (the process's CPU time, garbage collection
// included, per read) must not exceed cache=off's. The thread is read once
// before the clock starts, so that cache=on measures the steady state of
// repeated reads.
func BenchmarkFullReadCache(b *testing.B) {
	const depth = 200_000
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "full.db")
	{
		s, err := Open(ctx, path, &Options{CacheBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		chain(b, s, depth)
		s.Close()
	}
	for _, c := range []struct {
		name  string
		bytes int64
	}{{"cache=on", 0}, {"cache=off", -1}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(ctx, path, &Options{CacheBytes: c.bytes})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			th, err := thread.New(s, nil).Thread(ctx, "chain-200000")
			if err != nil {
				b.Fatal(err)
			}
			read := func() {
				msgs, err := th.Messages(ctx, thread.ReadOptions{})
				if err != nil || len(msgs) != depth {
					b.Fatal(len(msgs), err)
				}
			}
			read()
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				read()
			}
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkTurnP99 is an agent's turns as the log grows: 500 turns of one
// 200-byte user message appended through thread.DB to a new thread in a
// new file, each timed, with the log checkpointed in the background (the
// store's way) and inside the COMMIT of the write that crosses 1000 pages
// (SQLite's auto-checkpoint, the way before issue 27). It reports the
// median and the 99th percentile of a turn in ms; the time per op is the
// 500 turns. A new file's log reaches 1000 pages after about 150 such
// turns, so the 500 turns have three checkpoints: the 99.9th percentile
// and the maximum (over all the runs' turns) show where they fall.
func BenchmarkTurnP99(b *testing.B) {
	const n = 500
	for _, c := range []struct {
		name       string
		background bool
	}{{"checkpoint=background", true}, {"checkpoint=sqlite", false}} {
		b.Run(c.name, func(b *testing.B) {
			defer func(old bool) { walBackground = old }(walBackground)
			walBackground = c.background
			ctx := context.Background()
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				s, err := Open(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("turns-%d.db", i)), nil)
				if err != nil {
					b.Fatal(err)
				}
				th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for range n {
					start := time.Now()
					if _, err := th.Append(ctx, user); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			slices.Sort(lat)
			at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(at(0.999), "p99.9-ms")
			b.ReportMetric(at(1), "max-ms")
		})
	}
}
