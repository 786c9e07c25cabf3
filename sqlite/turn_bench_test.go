package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// floor is the hardware's floor for a commit: one ~1 KB INSERT in its own
// transaction, on the same driver, journal and sync as the store.
type floor struct {
	conn *sql.Conn
	ins  *sql.Stmt
	row  []byte
}

func openFloor(b *testing.B) *floor {
	b.Helper()
	ctx := context.Background()
	dsn := "file:" + filepath.Join(b.TempDir(), "floor.db") + "?_pragma=journal_mode(wal)&_pragma=synchronous(normal)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, b BLOB)`); err != nil {
		b.Fatal(err)
	}
	ins, err := conn.PrepareContext(ctx, `INSERT INTO t (b) VALUES (?)`)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ins.Close() })
	return &floor{conn: conn, ins: ins, row: []byte(strings.Repeat("x", 1000))}
}

func (f *floor) insert(b *testing.B) {
	ctx := context.Background()
	if _, err := f.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		b.Fatal(err)
	}
	if _, err := f.ins.ExecContext(ctx, f.row); err != nil {
		b.Fatal(err)
	}
	if _, err := f.conn.ExecContext(ctx, "COMMIT"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTurnVsFloor alternates the floor (one ~1 KB INSERT in its own
// transaction) and a one-commit chat turn (a 200-byte question and a
// 600-byte answer), in one loop, early in a thread and after 100,000
// turns (LOOM_BENCH_LONG=1: building them takes a while), and reports
// both and their ratio. Alternating puts both under the same load, cache
// and WAL state.
func BenchmarkTurnVsFloor(b *testing.B) {
	ats := []int{1, 10_000}
	if os.Getenv("LOOM_BENCH_LONG") != "" {
		ats = append(ats, 100_000)
	}
	for _, at := range ats {
		b.Run(fmt.Sprintf("turn=%d", at), func(b *testing.B) {
			ctx := context.Background()
			f := openFloor(b)
			db := thread.New(openBench(b, nil), nil)
			th, err := db.Create(ctx, thread.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			turns(b, th, at-1)
			var floorT, turnT time.Duration
			for b.Loop() {
				t0 := time.Now()
				f.insert(b)
				t1 := time.Now()
				if _, err := th.Append(ctx, user, assistant); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				floorT += t1.Sub(t0)
				turnT += t2.Sub(t1)
			}
			b.ReportMetric(float64(floorT.Nanoseconds())/float64(b.N), "floor-ns/op")
			b.ReportMetric(float64(turnT.Nanoseconds())/float64(b.N), "turn-ns/op")
			b.ReportMetric(float64(turnT)/float64(floorT), "turn/floor")
		})
	}
}

// BenchmarkGroupCommit is 64 writers appending at once to one SQLite file,
// each to a thread of its own or all to one thread, through DB.Append (a
// writer that loses a race on the one thread retries, as every caller
// does). It reports appends a second and the p99 of one append.
func BenchmarkGroupCommit(b *testing.B) {
	for _, threads := range []int{64, 1} {
		b.Run(fmt.Sprintf("writers=64/threads=%d", threads), func(b *testing.B) {
			ctx := context.Background()
			db := thread.New(openBench(b, nil), nil)
			ids := make([]string, threads)
			for i := range ids {
				th, err := db.Create(ctx, thread.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = th.ID()
			}
			const writers = 64
			per := max(b.N/writers, 1)
			lat := make([][]time.Duration, writers)
			var wg sync.WaitGroup
			msg := []message.Message{user}
			b.ResetTimer()
			start := time.Now()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := ids[w%threads]
					ls := make([]time.Duration, 0, per)
					for range per {
						t0 := time.Now()
						if _, _, err := db.Append(ctx, id, thread.CommitOptions{Messages: msg}); err != nil {
							b.Error(err)
							return
						}
						ls = append(ls, time.Since(t0))
					}
					lat[w] = ls
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "appends/s")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

// BenchmarkLoadBatch applies one batch of 10,000 commits and the thread
// that heads them, as a document's load or a copy does: the planner asks
// about every commit of the batch, and the store must answer each in
// O(1), not with a scan of the batch.
func BenchmarkLoadBatch(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	s := openBench(b, nil)
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		batch := &store.Batch{Commits: make([]*store.Commit, n)}
		parent := ""
		for j := range batch.Commits {
			id := fmt.Sprintf("c_load%d_%05d", i, j)
			batch.Commits[j] = &store.Commit{ID: id, Parent: parent, Depth: int64(j + 1), Op: thread.OpAppend, Time: now,
				Messages: []message.Message{user}}
			parent = id
		}
		batch.Create = []store.Creation{{Record: &store.Record{ID: fmt.Sprintf("load%d", i), Head: parent, Version: 1,
			CreatedAt: now, UpdatedAt: now}, Op: thread.OpCreate}}
		b.StartTimer()
		if err := s.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}
