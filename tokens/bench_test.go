package tokens

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
)

//go:embed testdata/english.txt
var english string

// BenchmarkEncode measures encoding English text, with no cache involved.
func BenchmarkEncode(b *testing.B) {
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		enc.Count("") // load the vocabulary outside the timing
		b.Run(enc.Name(), func(b *testing.B) {
			b.Run("Count", func(b *testing.B) {
				b.SetBytes(int64(len(english)))
				b.ReportAllocs()
				for b.Loop() {
					enc.Count(english)
				}
			})
			b.Run("Encode", func(b *testing.B) {
				b.SetBytes(int64(len(english)))
				b.ReportAllocs()
				dst := make([]int, 0, len(english))
				for b.Loop() {
					dst = enc.AppendEncode(dst[:0], english)
				}
			})
		})
	}
}

// BenchmarkCountCached measures a cache hit of Counter.Count.
func BenchmarkCountCached(b *testing.B) {
	c := NewCounter(nil)
	m := message.User(english)
	m.ID = "msg_01jpbx5b8qc3v0f4nyk2r7s9wd"
	c.Count(m, O200kBase)
	b.ReportAllocs()
	for b.Loop() {
		c.Count(m, O200kBase)
	}
}

// BenchmarkCountCachedParallel measures cache hits from all cores at once,
// over many messages.
func BenchmarkCountCachedParallel(b *testing.B) {
	c := NewCounter(nil)
	msgs := make([]message.Message, 1024)
	for i := range msgs {
		msgs[i] = message.User(fmt.Sprint("message ", i))
		msgs[i].ID = fmt.Sprintf("msg_%08d", i)
		c.Count(msgs[i], O200kBase)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Count(msgs[i%len(msgs)], O200kBase)
			i++
		}
	})
}

// BenchmarkLoadVocab measures opening an embedded vocabulary, which each
// encoding does once, on first use: checking its header and finding the
// ranks of the 256 bytes.
func BenchmarkLoadVocab(b *testing.B) {
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		b.Run(enc.Name(), func(b *testing.B) {
			for b.Loop() {
				if _, err := loadVocab(enc.spec.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFirstCount measures what the first count in a new process costs,
// the vocabulary's loading and the tables built on first use included: each
// iteration runs this test binary again, and the child times its first
// Counter.Count of a message (English with a few non-ASCII characters, as
// thread.View's first count is) and reports it. The metric is the child's
// time, not the process start.
//
//	go test -run '^$' -bench FirstCount -benchtime 20x ./tokens
func BenchmarkFirstCount(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFirstCountChild$", "-test.v")
		cmd.Env = append(os.Environ(), "LOOM_TOKENS_FIRST_COUNT=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("child: %v\n%s", err, out)
		}
		_, after, ok := strings.Cut(string(out), "first count: ")
		if !ok {
			b.Fatalf("child said no time:\n%s", out)
		}
		ns, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ns)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/first-count")
}

// TestFirstCountChild is BenchmarkFirstCount's child; it does nothing in
// an ordinary run.
func TestFirstCountChild(t *testing.T) {
	if os.Getenv("LOOM_TOKENS_FIRST_COUNT") == "" {
		t.Skip("run by BenchmarkFirstCount")
	}
	m := message.User("Résumé of the meeting: " + english)
	m.ID = "msg_01jpbx5b8qc3v0f4nyk2r7s9wd"
	start := time.Now()
	n := NewCounter(nil).Count(m, O200kBase)
	d := time.Since(start)
	if n == 0 {
		t.Fatal("no tokens")
	}
	fmt.Printf("first count: %d ns\n", d.Nanoseconds())
}
