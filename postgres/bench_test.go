package postgres

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return open(b, testserver.Postgres(b), nil) }, nil)
}

// BenchmarkConcurrentAppend is storetest's concurrent scenario (64
// writers, synchronous_commit on) with pools of 16 and 64 connections
// (Bench's uses the default pool): on 64 threads, and on one hot thread,
// where the writers that lose a race queue for its row (AppendAt); and on
// 64 threads with a store that does not notify its changes.
func BenchmarkConcurrentAppend(b *testing.B) {
	for _, conns := range []int32{16, 64} {
		for _, threads := range []int{64, 1} {
			b.Run(fmt.Sprintf("conns=%d/threads=%d", conns, threads), func(b *testing.B) {
				storetest.BenchConcurrent(b, open(b, testserver.Postgres(b), &Options{MaxConns: conns}), 64, threads)
			})
		}
	}
	// What the search index costs: the same store, side by side, with and
	// without it.
	for _, index := range []bool{true, false} {
		for _, notify := range []bool{true, false} {
			b.Run(fmt.Sprintf("conns=16/threads=64/search=%v/notify=%v", index, notify), func(b *testing.B) {
				s := open(b, testserver.Postgres(b), &Options{MaxConns: 16, NoNotify: !notify})
				s.noIndex = !index
				cpu := startCPU(b, s)
				storetest.BenchConcurrent(b, s, 64, 64)
				// What the fold left for the next search, which then
				// folds it: its cost counts in the CPU time.
				var pending int
				if err := s.pool.QueryRow(b.Context(), `SELECT count(*) FROM loom_search_pending`).Scan(&pending); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(pending), "pending-at-end")
				if err := s.foldAll(b.Context()); err != nil {
					b.Fatal(err)
				}
				cpu.report(b)
			})
		}
	}
	// What notifying the changes costs (see Options.NoNotify).
	b.Run("conns=16/threads=64/nonotify", func(b *testing.B) {
		storetest.BenchConcurrent(b, open(b, testserver.Postgres(b), &Options{MaxConns: 16, NoNotify: true}), 64, 64)
	})
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

// BenchmarkAppendProse appends messages of prose, about 100 words each,
// drawn from a vocabulary of 20,000, to one thread: the cost of indexing
// what a chat turn says.
func BenchmarkAppendProse(b *testing.B) {
	s := open(b, testserver.Postgres(b), nil)
	ctx := b.Context()
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vocabulary := make([]string, 20000)
	for i := range vocabulary {
		w := make([]byte, 3+rng.IntN(8))
		for j := range w {
			w[j] = byte('a' + rng.IntN(26))
		}
		vocabulary[i] = string(w)
	}
	texts := make([]string, 256)
	for i := range texts {
		var sb strings.Builder
		for range 100 {
			sb.WriteString(vocabulary[int(rng.ExpFloat64()*2000)%len(vocabulary)])
			sb.WriteString(" ")
		}
		texts[i] = sb.String()
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := th.Append(ctx, message.User(texts[i%len(texts)])); err != nil {
			b.Fatal(err)
		}
	}
}
