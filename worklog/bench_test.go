package worklog

import (
	"bufio"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// benchItems is the size of the file the benchmarks work on: the issue's
// latency target is 5 ms p99 with 10,000 items.
const benchItems = 10_000

// benchLog returns a Log on a file of n open items, and their ids.
func benchLog(b *testing.B, n int, noSync bool) (*Log, []string) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), ".gitmem")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	entries := make([]*entry, n)
	ids := make([]string, n)
	for i := range entries {
		it := Item{ID: fmt.Sprintf("t-%08x", i), Text: fmt.Sprintf("Work item %d: follow up on the %dth open question of the migration", i, i),
			Status: StatusOpen, CreatedAt: base.Add(time.Duration(i) * time.Second), SourceSession: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69"}
		entries[i] = &entry{it: it, key: NormalizeText(it.Text)}
		ids[i] = it.ID
	}
	l, err := Open(dir, &Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	f := l.items.(*fileItems).f
	unlock, _, err := f.lock(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	err = f.write(func(w *bufio.Writer) error { return writeThreads(w, entries, false) })
	unlock()
	if err != nil {
		b.Fatal(err)
	}
	return l, ids
}

// latencies records the time of each operation and reports percentiles.
type latencies []time.Duration

func (ls *latencies) time(f func()) {
	start := time.Now()
	f()
	*ls = append(*ls, time.Since(start))
}

func (ls latencies) report(b *testing.B) {
	if len(ls) == 0 {
		return
	}
	slices.Sort(ls)
	at := func(p float64) float64 {
		return float64(ls[min(len(ls)-1, int(p*float64(len(ls))))].Nanoseconds()) / 1e6
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkTools measures list_threads, create_thread and resolve_thread
// on a local file of 10,000 items, with and without fsync, and
// list_threads when another process changed the file (cold: a parse).
func BenchmarkTools(b *testing.B) {
	ctx := b.Context()
	b.Run("list_threads", func(b *testing.B) {
		l, _ := benchLog(b, benchItems, true)
		if _, err := l.List(ctx, ListOptions{}); err != nil {
			b.Fatal(err)
		}
		var ls latencies
		for b.Loop() {
			ls.time(func() {
				res, err := l.List(ctx, ListOptions{})
				if err != nil || len(res.Threads) != benchItems {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
	b.Run("list_threads/cold", func(b *testing.B) {
		l, _ := benchLog(b, benchItems, true)
		var ls latencies
		for b.Loop() {
			l.items.(*fileItems).cache(nil)
			ls.time(func() {
				if _, err := l.List(ctx, ListOptions{}); err != nil {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"nosync", true}} {
		b.Run("create_thread/"+mode.name, func(b *testing.B) {
			l, _ := benchLog(b, benchItems, mode.noSync)
			if _, err := l.List(ctx, ListOptions{}); err != nil {
				b.Fatal(err)
			}
			var ls latencies
			for i := 0; b.Loop(); i++ {
				ls.time(func() {
					if _, err := l.Create(ctx, CreateOptions{Text: fmt.Sprint("New item number ", i)}); err != nil {
						b.Fatal(err)
					}
				})
			}
			ls.report(b)
		})
		b.Run("resolve_thread/"+mode.name, func(b *testing.B) {
			l, ids := benchLog(b, benchItems, mode.noSync)
			if _, err := l.List(ctx, ListOptions{}); err != nil {
				b.Fatal(err)
			}
			var ls latencies
			for i := 0; b.Loop(); i++ {
				// Past benchItems iterations the items are resolved
				// already and nothing is written.
				ls.time(func() {
					if _, err := l.Resolve(ctx, ResolveOptions{ID: ids[i%len(ids)], Note: "done"}); err != nil {
						b.Fatal(err)
					}
				})
			}
			ls.report(b)
		})
	}
	b.Run("resolve_thread/text/nosync", func(b *testing.B) {
		l, _ := benchLog(b, benchItems, true)
		var ls latencies
		for i := 0; b.Loop(); i++ {
			ls.time(func() {
				if _, err := l.Resolve(ctx, ResolveOptions{TextMatch: fmt.Sprintf("item %d:", i%benchItems), Note: "done"}); err != nil {
					b.Fatal(err)
				}
			})
		}
		ls.report(b)
	})
}
