package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// The database of BenchmarkSearch1M: threads of turns (a commit of a
// question and an answer), each message of 20 to 40 words of prose.
const (
	searchBenchThreads  = 1000
	searchBenchMessages = 1_000_000
	searchBenchVocab    = 30_000
)

// searchBenchVersion names the cached database: change it when the data
// changes. The schema version is part of the name, so that a new schema
// builds a new file.
var searchBenchVersion = fmt.Sprintf("v2-schema%d", SchemaVersion)

// searchBenchDB returns the path of the benchmark's database, built once
// and kept under os.TempDir() for the next run.
func searchBenchDB(b *testing.B) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), "loom-bench-search-1m-"+searchBenchVersion+".db")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if testing.Short() {
		b.Skip("builds a database of 1,000,000 messages (not with -short)")
	}
	start := time.Now()
	tmp := path + ".tmp"
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(tmp + suffix)
	}
	s, err := Open(context.Background(), tmp, nil)
	if err != nil {
		b.Fatal(err)
	}
	// A file that a crash would leave as .tmp needs no durability, and a
	// cache of a quarter of the file spares the build most of its reads.
	for _, q := range []string{"PRAGMA synchronous = OFF", "PRAGMA cache_size = -131072"} {
		if _, err := s.w.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	p := newProse(42, vocabulary(searchBenchVocab))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const perThread = searchBenchMessages / searchBenchThreads
	const threadsPerBatch = 100
	for t := 0; t < searchBenchThreads; {
		var batch store.Batch
		for ; t < searchBenchThreads && len(batch.Create) < threadsPerBatch; t++ {
			var parent *thread.Commit
			for depth := 0; depth < perThread; depth += 2 {
				now = now.Add(time.Second)
				c := &thread.Commit{ID: ids.New("c_"), Depth: int64(depth + 2), Op: thread.OpAppend, Time: now,
					Messages: []message.Message{
						{ID: message.NewID(), Role: message.RoleUser, CreatedAt: now, Contents: []message.Content{message.Text{Text: p.text(20, 40)}}},
						{ID: message.NewID(), Role: message.RoleAssistant, CreatedAt: now, Contents: []message.Content{message.Text{Text: p.text(20, 40)}}},
					}}
				if parent != nil {
					c.Parent = parent.ID
				}
				batch.Commits = append(batch.Commits, c)
				parent = c
			}
			batch.Create = append(batch.Create, store.Creation{Record: &thread.Record{ID: fmt.Sprintf("thread-%04d", t), Kind: thread.KindLocal,
				Head: parent.ID, Version: 1, CreatedAt: now, UpdatedAt: now}, Op: thread.OpLoad})
		}
		if err := s.Apply(ctx, &batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.foldAll(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s in %v", path, time.Since(start).Round(time.Second))
	return path
}

// BenchmarkSearch1M searches 1,000,000 messages of a thousand threads for
// two words, 20 hits at most, through thread.DB.Search: pairs of words of
// middling frequency (ranks 300 to 3,000 of 30,000, each in 0.1% to 1% of
// the messages), and the two commonest words of English, which most
// messages hold. It reports the latency's median and 99th percentile.
// The database is built on the first run (in about a minute) and kept in
// os.TempDir(); with -short the benchmark skips rather than build it.
func BenchmarkSearch1M(b *testing.B) {
	path := searchBenchDB(b)
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.foldAll(context.Background()); err != nil {
		b.Fatal(err)
	}
	db := thread.New(s, nil)
	vocab := vocabulary(searchBenchVocab)
	var mid []string
	for i := range 50 {
		mid = append(mid, vocab[300+i*23]+" "+vocab[1000+i*41])
	}
	for _, c := range []struct {
		name    string
		queries []string
	}{
		{"mid", mid},
		{"common", []string{"the of"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			var took []time.Duration
			hits := 0
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				h, err := db.Search(ctx, thread.SearchQuery{Text: c.queries[i%len(c.queries)], Limit: 20})
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				hits += len(h)
			}
			slices.Sort(took)
			at := func(q float64) float64 {
				return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(float64(hits)/float64(len(took)), "hits/op")
		})
	}
}

// BenchmarkSearchAfterAppends is a search right after n chat turns of
// prose (BenchmarkChatTurnWords's), with the background folder stopped:
// the search folds the n pending commits first, which is what it costs.
// The appends are off the clock.
func BenchmarkSearchAfterAppends(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := openBench(b, nil)
			s.stopFolding()
			db := thread.New(s, nil)
			p := newProse(1, vocabulary(30_000))
			th, err := db.Create(ctx, thread.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				for range n {
					if _, err := th.Append(ctx, message.User(p.text(20, 40)), message.Assistant(p.text(100, 200))); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if _, err := db.Search(ctx, thread.SearchQuery{Text: "the of", Limit: 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSearchOneCommit searches a thread made of one commit of 1,000
// messages that all hold the word, as an imported thread is: a page of 20
// hits all in that commit.
func BenchmarkSearchOneCommit(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "one.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "imported"})
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]message.Message, 1000)
	for i := range msgs {
		msgs[i] = message.User(fmt.Sprintf("needle number %d in a long imported thread of prose", i))
	}
	if _, err := th.Append(ctx, msgs...); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		h, err := db.Search(ctx, thread.SearchQuery{Text: "needle", Limit: 20})
		if err != nil || len(h) != 20 {
			b.Fatal(len(h), err)
		}
	}
}
