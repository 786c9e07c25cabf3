package jsonfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkIndexes measures the reads that an index keeps from growing
// with the store: a fork family of 100 and the first page (50) of a rare
// label, among 10,000 and 100,000 threads of one message each. The root
// and its 99 forks are spread over the ids; one thread in 1,000 has the
// label rare=yes. The store is filled with Options.NoSync (reads do not
// sync). LOOM_BENCH_THREADS (a comma-separated list) replaces the sizes;
// LOOM_BENCH_DIR keeps the filled stores there, for the next run.
func BenchmarkIndexes(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if v := os.Getenv("LOOM_BENCH_THREADS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		dir := b.TempDir()
		if keep := os.Getenv("LOOM_BENCH_DIR"); keep != "" {
			dir = filepath.Join(keep, fmt.Sprint(n))
		}
		if _, err := os.Stat(filepath.Join(dir, "filled")); err != nil {
			fillIndexStore(b, dir, n)
			if err := os.WriteFile(filepath.Join(dir, "filled"), nil, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		s := openTest(b, dir, nil)
		db := thread.New(s, nil)
		// The index is built on first use: OpenAndFamily measures that.
		if _, _, err := db.Family(b.Context(), "t00000000"); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Family=100/threads=%d", n), func(b *testing.B) {
			for b.Loop() {
				_, fam, err := db.Family(b.Context(), "t00000000")
				if err != nil || len(fam) != 100 {
					b.Fatal(len(fam), err)
				}
			}
		})
		b.Run(fmt.Sprintf("RareLabelPage/threads=%d", n), func(b *testing.B) {
			want := min(50, n/1000)
			for b.Loop() {
				got := 0
				for _, err := range s.Threads(b.Context(), thread.ListOptions{Labels: map[string]string{"rare": "yes"}, Limit: 50}) {
					if err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != want {
					b.Fatalf("%d threads, want %d", got, want)
				}
			}
		})
		// What the first use of the index after Open costs (it reads every
		// thread file): a family on a store just opened.
		b.Run(fmt.Sprintf("OpenAndFamily/threads=%d", n), func(b *testing.B) {
			for b.Loop() {
				s, err := Open(b.Context(), dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				_, fam, err := thread.New(s, nil).Family(b.Context(), "t00000000")
				if err != nil || len(fam) != 100 {
					b.Fatal(len(fam), err)
				}
				s.Close()
			}
		})
		b.Run(fmt.Sprintf("FirstPage/threads=%d", n), func(b *testing.B) {
			for b.Loop() {
				got := 0
				for _, err := range s.Threads(b.Context(), thread.ListOptions{Limit: 50}) {
					if err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != 50 {
					b.Fatalf("%d threads", got)
				}
			}
		})
	}
}

// fillIndexStore makes n threads t00000000…: t00000000 is the root of a
// family of 100 (its forks spread over the ids), and one thread in 1,000
// is labelled rare=yes.
func fillIndexStore(b *testing.B, dir string, n int) {
	b.Helper()
	ctx := b.Context()
	s, err := Open(ctx, dir, &Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	db := thread.New(s, nil)
	root, err := db.Create(ctx, thread.CreateOptions{ID: "t00000000", Messages: []message.Message{message.User("root")}})
	if err != nil {
		b.Fatal(err)
	}
	every := n / 99
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("t%08d", i)
		var labels map[string]string
		if i%1000 == 500 {
			labels = map[string]string{"rare": "yes"}
		}
		if i%every == 0 && i/every <= 99 {
			if _, err := root.Fork(ctx, thread.ForkOptions{ID: id, Labels: labels}); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if _, err := db.Create(ctx, thread.CreateOptions{ID: id, Labels: labels, Messages: []message.Message{message.User("message " + id)}}); err != nil {
			b.Fatal(err)
		}
	}
}
