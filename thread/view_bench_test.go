package thread_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkView measures a view of 8,000 tokens over threads of 1,000 and
// 100,000 messages in memory, with the token counts cached: the cost should
// not depend on the thread's length.
func BenchmarkView(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db := thread.New(thread.NewMemoryStore(), nil)
			th, err := db.Create(ctx, thread.CreateOptions{})
			must(b, err)
			r := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < n; i += 2 {
				_, err := th.Append(ctx, message.User(viewText(r, 10+r.IntN(30))))
				must(b, err)
				_, err = th.Append(ctx, message.Assistant(viewText(r, 20+r.IntN(60))))
				must(b, err)
			}
			opts := thread.ViewOptions{Model: "gpt-4o", Budget: 8000,
				Instructions: []message.Message{message.System("You are a helpful assistant.")}}
			v, err := th.View(ctx, opts) // warms the token cache
			must(b, err)
			for b.Loop() {
				if _, err := th.View(ctx, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(v.Messages)), "msgs/view")
		})
	}
}
