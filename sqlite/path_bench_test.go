package sqlite

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// The benchmarks of issue 27, the store's path: a full read of a long
// thread with the commit cache on and off, and the latency of an agent's
// turns while the write-ahead log is checkpointed.

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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
			cpu := cpuTime(b)
			for b.Loop() {
				read()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
