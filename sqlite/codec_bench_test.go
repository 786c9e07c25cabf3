package sqlite

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
)

// benchMessages is a commit's worth of a chat with tools: text with quotes,
// brackets and escapes, a call, its result and a usage.
func benchMessages(n int) []message.Message {
	at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	text := strings.Repeat(`Some prose, a "quoted" word, {braces} and [brackets], a tab	and é. `, 8)
	msgs := make([]message.Message, 0, n)
	for i := range n {
		var m message.Message
		switch i % 4 {
		case 0:
			m = message.User(text)
		case 1:
			m = message.ToolCall(fmt.Sprintf("call_%d", i), "weather", `{"city":"Paris","days":[1,2,3]}`)
		case 2:
			m = message.ToolResult(fmt.Sprintf("call_%d", i-1), `{"temp_c":21,"sky":"clear \"mostly\""}`)
		default:
			m = message.Assistant(text + text)
			m.Metadata = map[string]any{"model": "m-1", "tokens": json.Number("812")}
		}
		m.ID = fmt.Sprintf("m_%06d", i)
		m.CreatedAt = at
		msgs = append(msgs, m)
	}
	return msgs
}

// BenchmarkDecodeMessages is the decode of one commit's stored messages, as
// a read of a commit the cache does not hold does it.
func BenchmarkDecodeMessages(b *testing.B) {
	for _, n := range []int{1, 4, 64} {
		blob, err := encodeMessages(benchMessages(n))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(blob)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeMessages(blob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSplitArray is the split alone, side by side with the
// byte-at-a-time scan it replaced (splitArrayBytewise, kept in the tests as
// the reference).
func BenchmarkSplitArray(b *testing.B) {
	for _, n := range []int{1, 64} {
		blob, err := encodeMessages(benchMessages(n))
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range []struct {
			name  string
			split func([]byte) ([][]byte, bool)
		}{{"bytewise", splitArrayBytewise}, {"indexbyte", splitArray}} {
			b.Run(fmt.Sprintf("messages=%d/%s", n, f.name), func(b *testing.B) {
				b.SetBytes(int64(len(blob)))
				for b.Loop() {
					if _, ok := f.split(blob); !ok {
						b.Fatal("not split")
					}
				}
			})
		}
	}
}
