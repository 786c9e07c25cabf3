package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

func openBench(b *testing.B, opts *Options) *Store {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openBench(b, nil) }, nil)
}

var (
	user      = message.User(strings.Repeat("u", 200))
	assistant = message.Assistant(strings.Repeat("a", 600))
)

// turns appends n chat turns (a 200-byte question, a 600-byte answer).
func turns(b *testing.B, th *thread.Thread, n int) {
	b.Helper()
	for range n {
		if _, err := th.Append(context.Background(), user, assistant); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatTurn is one chat turn (two messages, one commit) early in a
// thread and after 10,000 turns: the cost must not grow with the thread.
// The early thread is replaced every 1,000 turns, off the clock.
func BenchmarkChatTurn(b *testing.B) {
	for _, sync := range []Synchronous{SyncNormal, SyncFull} {
		for _, at := range []int{1, 10_000} {
			b.Run(fmt.Sprintf("sync=%s/turn=%d", sync, at), func(b *testing.B) {
				ctx := context.Background()
				db := thread.New(openBench(b, &Options{Synchronous: sync}), nil)
				th, err := db.Create(ctx, thread.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				turns(b, th, at-1)
				b.ReportAllocs()
				for i := 1; b.Loop(); i++ {
					if _, err := th.Append(ctx, user, assistant); err != nil {
						b.Fatal(err)
					}
					if at == 1 && i%1000 == 0 {
						b.StopTimer()
						if err := th.Delete(ctx); err != nil {
							b.Fatal(err)
						}
						if th, err = db.Create(ctx, thread.CreateOptions{}); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				}
			})
		}
	}
}

// size returns the bytes of the database's pages in use: the file's size
// once the write-ahead log is checkpointed, less the free pages that
// deletes leave for reuse.
func size(b *testing.B, s *Store) int64 {
	b.Helper()
	var pages, free, pageSize int64
	for q, v := range map[string]*int64{"PRAGMA page_count": &pages, "PRAGMA freelist_count": &free, "PRAGMA page_size": &pageSize} {
		if err := s.w.QueryRow(q).Scan(v); err != nil {
			b.Fatal(err)
		}
	}
	return (pages - free) * pageSize
}

// BenchmarkDiskPerTurn writes 1,000 chat turns of 200 + 600 bytes into a
// fresh database and reports its size, search index folded in, over the
// raw message bytes (disk/raw) and per turn. The time per op is that of the 1,000 turns.
func BenchmarkDiskPerTurn(b *testing.B) {
	const n = 1000
	raw := float64(n * (len(user.Text()) + len(assistant.Text())))
	var bytes int64
	for b.Loop() {
		b.StopTimer()
		s, err := Open(context.Background(), filepath.Join(b.TempDir(), fmt.Sprintf("disk-%d.db", bytes)), nil)
		if err != nil {
			b.Fatal(err)
		}
		th, err := thread.New(s, nil).Create(context.Background(), thread.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		empty := size(b, s)
		b.StartTimer()
		turns(b, th, n)
		b.StopTimer()
		// The search index counts: everything pending is folded in.
		if err := s.foldAll(context.Background()); err != nil {
			b.Fatal(err)
		}
		bytes = size(b, s) - empty
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(bytes)/raw, "disk/raw")
	b.ReportMetric(float64(bytes)/n, "B/turn")
}

// chain makes a thread whose head is depth commits of one 400-byte message
// deep, written a thousand commits to a batch: fast to build, and a fork
// does not care how the chain was made.
func chain(b *testing.B, s *Store, depth int) *thread.Thread {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var parent *thread.Commit
	for done := 0; done < depth; {
		var batch store.Batch
		for ; done < depth && len(batch.Commits) < 1000; done++ {
			c := &thread.Commit{ID: ids.New("c_"), Depth: int64(done + 1), Op: thread.OpAppend, Time: now,
				Messages: []message.Message{{ID: message.NewID(), Role: message.RoleUser, CreatedAt: now,
					Contents: []message.Content{message.Text{Text: strings.Repeat("m", 400)}}}}}
			if parent != nil {
				c.Parent = parent.ID
			}
			batch.Commits = append(batch.Commits, c)
			parent = c
		}
		if done == depth {
			batch.Create = []store.Creation{{Record: &thread.Record{ID: fmt.Sprintf("chain-%d", depth), Kind: thread.KindLocal,
				Head: parent.ID, Version: 1, CreatedAt: now, UpdatedAt: now}, Op: thread.OpLoad}}
		}
		if err := s.Apply(ctx, &batch); err != nil {
			b.Fatal(err)
		}
	}
	th, err := thread.New(s, nil).Thread(ctx, fmt.Sprintf("chain-%d", depth))
	if err != nil {
		b.Fatal(err)
	}
	return th
}

// BenchmarkForkStorage forks a thread at its head at depths 10 to 100,000
// and reports the new storage a fork takes: the growth of the pages in use
// over 1,000 forks, per fork. The time per op is one fork.
func BenchmarkForkStorage(b *testing.B) {
	for _, depth := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			ctx := context.Background()
			s := openBench(b, nil)
			th := chain(b, s, depth)
			var forks []*thread.Thread
			before := size(b, s)
			var grown, forked int64
			b.ReportAllocs()
			for b.Loop() {
				f, err := th.Fork(ctx, thread.ForkOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if forks = append(forks, f); len(forks) == 1000 {
					b.StopTimer()
					grown += size(b, s) - before
					forked += int64(len(forks))
					for _, f := range forks {
						if err := f.Delete(ctx); err != nil {
							b.Fatal(err)
						}
					}
					forks = forks[:0]
					before = size(b, s)
					b.StartTimer()
				}
			}
			if forked == 0 { // fewer than 1,000 forks: measure what there is
				grown, forked = size(b, s)-before, int64(len(forks))
			}
			b.ReportMetric(float64(grown)/float64(forked), "B/fork")
		})
	}
}

// BenchmarkHistoryLast10 reads the last 10 history entries of a thread of
// 10,000 versions.
func BenchmarkHistoryLast10(b *testing.B) {
	ctx := context.Background()
	db := thread.New(openBench(b, nil), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for range 9_999 {
		if _, err := th.Append(ctx, message.User("x")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range th.History(ctx, thread.HistoryOptions{Limit: 10}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10 {
			b.Fatal(n)
		}
	}
}

// BenchmarkDeleteThread deletes a thread of 1,000 commits: the references
// and the freed commits, walked up the parents.
func BenchmarkDeleteThread(b *testing.B) {
	ctx := context.Background()
	db := thread.New(openBench(b, nil), nil)
	for b.Loop() {
		b.StopTimer()
		th, err := db.Create(ctx, thread.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for range 1000 {
			if _, err := th.Append(ctx, message.User("x")); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := th.Delete(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUncached reads with the commit cache off: every message decoded
// from its JSON, as on the first read of a thread after Open. ReadAll is
// storetest's full read of 1,000 messages (and of 10,000), Last50 its last
// 50 at depth 100,000.
func BenchmarkUncached(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		depth, last int
	}{{"ReadAll/messages=1000", 1000, 0}, {"ReadAll/messages=10000", 10_000, 0}, {"Last50/depth=100000", 100_000, 50}} {
		b.Run(c.name, func(b *testing.B) {
			s := openBench(b, &Options{CacheBytes: -1})
			th := chain(b, s, c.depth)
			want := c.last
			if want == 0 {
				want = c.depth
			}
			b.ReportAllocs()
			for b.Loop() {
				msgs, err := th.Messages(ctx, thread.ReadOptions{Last: c.last})
				if err != nil || len(msgs) != want {
					b.Fatal(len(msgs), err)
				}
			}
		})
	}
}
