package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) thread.Store { return open(b, testserver.Postgres(b), nil) }, nil)
}

// BenchmarkConcurrentAppend is storetest's concurrent scenario (64
// writers, synchronous_commit on) with pools of 16 and 64 connections
// (Bench's uses the default pool): on 64 threads, and on one hot thread,
// where the writers that lose a race queue for its row (AppendAt).
func BenchmarkConcurrentAppend(b *testing.B) {
	for _, conns := range []int32{16, 64} {
		for _, threads := range []int{64, 1} {
			b.Run(fmt.Sprintf("conns=%d/threads=%d", conns, threads), func(b *testing.B) {
				storetest.BenchConcurrent(b, open(b, testserver.Postgres(b), &Options{MaxConns: conns}), 64, threads)
			})
		}
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
