package tokens

import (
	_ "embed"
	"fmt"
	"testing"

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

// BenchmarkLoadVocab measures reading an embedded vocabulary, which each
// encoding does once, on first use.
func BenchmarkLoadVocab(b *testing.B) {
	for _, enc := range []Encoding{O200kBase, Cl100kBase} {
		b.Run(enc.Name(), func(b *testing.B) {
			for b.Loop() {
				if _, err := loadVocab(enc.spec.file); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
