package jsonfile

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/loomthreads/loom/thread/storetest"
)

// BenchmarkStore runs the standard scenarios with every fsync, as the store
// runs by default.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openTest(b, b.TempDir(), nil) }, &storetest.BenchOptions{MaxDepth: 10_000})
}

// BenchmarkStoreNoSync runs them with Options.NoSync: what the files and
// the JSON cost without the disk's flushes.
func BenchmarkStoreNoSync(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openTest(b, b.TempDir(), &Options{NoSync: true}) }, &storetest.BenchOptions{MaxDepth: 10_000})
}

// BenchmarkChatTurnDisk appends chat turns (a 200-byte user message and a
// 600-byte answer in one commit) and reports what a turn costs on disk:
// bytes of file content, bytes of allocated blocks, files, and fsyncs.
func BenchmarkChatTurnDisk(b *testing.B) {
	ctx := b.Context()
	dir := b.TempDir()
	s := openTest(b, dir, nil)
	var syncs atomic.Int64
	s.testHooks.sync = func(string) error { syncs.Add(1); return nil }
	th, err := thread.New(s, nil).Create(ctx, thread.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	user, assistant := strings.Repeat("u", 200), strings.Repeat("a", 600)
	size0, blocks0, files0 := usage(b, dir)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := th.Append(ctx, message.User(user), message.Assistant(assistant)); err != nil {
			b.Fatal(err)
		}
		n++
	}
	size, blocks, files := usage(b, dir)
	b.ReportMetric(float64(size-size0)/float64(n), "file-B/turn")
	b.ReportMetric(float64(blocks-blocks0)/float64(n), "disk-B/turn")
	b.ReportMetric(float64(files-files0)/float64(n), "files/turn")
	b.ReportMetric(float64(syncs.Load())/float64(n), "fsyncs/turn")
}

// usage sums the sizes, allocated bytes and number of the files under dir.
func usage(b *testing.B, dir string) (size, blocks, files int64) {
	b.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		size += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			blocks += st.Blocks * 512
		}
		files++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return size, blocks, files
}

// BenchmarkConcurrentDisk runs storetest.BenchConcurrent (64 writers, on
// 64 threads and on one) and reports what the disk is asked per append:
// fsyncs, and appends per intent (the size of a group commit).
func BenchmarkConcurrentDisk(b *testing.B) {
	for _, threads := range []int{64, 1} {
		b.Run(fmt.Sprintf("writers=64/threads=%d", threads), func(b *testing.B) {
			s := openTest(b, b.TempDir(), nil)
			var syncs, intents atomic.Int64
			s.testHooks.sync = func(name string) error {
				syncs.Add(1)
				if filepath.Base(name) == "intent.json" {
					intents.Add(1)
				}
				return nil
			}
			// BenchConcurrent makes its threads first, one after another:
			// what that costs is measured on another store, and left out.
			probe := openTest(b, b.TempDir(), nil)
			var creates atomic.Int64
			probe.testHooks.sync = func(string) error { creates.Add(1); return nil }
			for range threads {
				if _, err := thread.New(probe, nil).Create(b.Context(), thread.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			storetest.BenchConcurrent(b, s, 64, threads)
			n := float64(b.N)
			b.ReportMetric(float64(syncs.Load()-creates.Load())/n, "fsyncs/append")
			b.ReportMetric(n/float64(intents.Load()-int64(threads)), "appends/intent")
		})
	}
}
