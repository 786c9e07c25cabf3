package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// gcText returns a message text of about n bytes: i, then words of a
// vocabulary of 512, so that the search index holds what a chat's would.
func gcText(r *rand.Rand, i, n int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d", i)
	for sb.Len() < n {
		fmt.Fprintf(&sb, " w%x", r.IntN(512))
	}
	return sb.String()
}

// gcThread writes, in batches of 1,000 commits, a thread "t" whose
// history is chain versions, each a commit of one message of about size
// bytes on the previous one, then regen versions, each a new commit of
// that size on the parent of the chain's last (a regenerated last
// answer), keeping its last 100 versions. It returns the text bytes of
// the messages the last 100 versions reach.
func gcThread(b testing.TB, s *Store, chain, regen, size int) int64 {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	r := rand.New(rand.NewPCG(1, 2))
	var (
		batch   store.Batch
		history []store.HistoryEntry
		sizes   []int64 // of each commit's message, by version - 1
		parent  string
		depth   int64
	)
	flush := func() {
		if err := s.Apply(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		batch = store.Batch{}
	}
	add := func(i int, parentID string, d int64) string {
		text := gcText(r, i, size)
		c := &store.Commit{ID: fmt.Sprintf("c%07d", i), Parent: parentID, Depth: d, Op: thread.OpAppend, Time: now,
			Messages: []message.Message{{ID: fmt.Sprintf("m%07d", i), Role: message.RoleAssistant, CreatedAt: now,
				Contents: []message.Content{message.Text{Text: text}}}}}
		batch.Commits = append(batch.Commits, c)
		history = append(history, store.HistoryEntry{Version: int64(len(history) + 1), Commit: c.ID, Op: thread.OpAppend, Time: now})
		sizes = append(sizes, int64(len(text)))
		if len(batch.Commits) == 1000 {
			flush()
		}
		return c.ID
	}
	for i := range chain {
		depth++
		parent = add(i, parent, depth)
	}
	base := ""
	if chain > 1 {
		base = history[chain-2].Commit
	}
	for i := range regen {
		add(chain+i, base, depth)
	}
	head := history[len(history)-1].Commit
	batch.Create = []store.Creation{{Record: &thread.Record{ID: "t", Kind: thread.KindLocal, Head: head,
		Version: int64(len(history)), CreatedAt: now, UpdatedAt: now, Labels: map[string]string{thread.LabelKeepLast: "100"}},
		Op: thread.OpLoad, History: history}}
	flush()
	// What the last 100 versions reach: the chain under the head, and
	// each kept version's own commit.
	var raw int64
	if regen == 0 {
		for _, n := range sizes {
			raw += n
		}
		return raw
	}
	for _, n := range sizes[:chain-1] {
		raw += n
	}
	for _, n := range sizes[len(sizes)-100:] {
		raw += n
	}
	return raw
}

// diskBytes returns the size of the database file and its log, once the
// log is checkpointed into the file and cut, and the bytes of the pages in
// use (the file less its free pages).
func diskBytes(b *testing.B, s *Store) (file, used int64) {
	b.Helper()
	var busy, logged, copied int64
	if err := s.w.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &copied); err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{s.path, s.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			file += fi.Size()
		}
	}
	return file, size(b, s)
}

// BenchmarkGC100k collects a thread of about 100,000 versions down to its
// last 100 (thread.DB.GC, KeepLast 100) and reports the time of the GC,
// the disk before and after (the file and its log after a full checkpoint,
// and the pages in use), the message bytes the kept versions reach
// (raw-kept), and disk-after/raw-kept. append: 100,000 appends of one ~1 KB
// message, where every message stays (the head reaches them all) and only
// history goes. regenerated: a conversation of 1,000 messages whose last
// answer was regenerated 100,000 times, each a ~1 KB commit on the same
// parent: 99,901 commits go. Run with -benchtime=1x: each op builds its
// store afresh, off the clock.
func BenchmarkGC100k(b *testing.B) {
	for _, c := range []struct {
		name         string
		chain, regen int
	}{
		{"append", 100_000, 0},
		{"regenerated", 1_000, 100_000},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			var fileBefore, usedBefore, fileAfter, usedAfter, raw int64
			var rep thread.GCReport
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				s, err := Open(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("gc%d.db", i)), nil)
				if err != nil {
					b.Fatal(err)
				}
				raw = gcThread(b, s, c.chain, c.regen, 1000)
				if err := s.foldAll(ctx); err != nil {
					b.Fatal(err)
				}
				fileBefore, usedBefore = diskBytes(b, s)
				db := thread.New(s, nil)
				b.StartTimer()
				rep, err = db.GC(ctx, thread.GCOptions{})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				fileAfter, usedAfter = diskBytes(b, s)
				s.Close()
				b.StartTimer()
			}
			if rep.Pruned != 1 {
				b.Fatalf("GC: %+v, want the thread pruned", rep)
			}
			b.ReportMetric(float64(fileBefore)/1e6, "MB-before")
			b.ReportMetric(float64(usedBefore)/1e6, "MB-used-before")
			b.ReportMetric(float64(fileAfter)/1e6, "MB-after")
			b.ReportMetric(float64(usedAfter)/1e6, "MB-used-after")
			b.ReportMetric(float64(raw)/1e6, "MB-raw-kept")
			b.ReportMetric(float64(fileAfter)/float64(raw), "after/raw")
		})
	}
}
