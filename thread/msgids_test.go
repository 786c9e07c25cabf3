package thread_test

import (
	"fmt"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkAppendOwnID appends messages that come with ids of their own
// (as agents and clients send them) to threads of growing length: the
// check that the thread does not hold the id yet costs what is appended,
// not the thread's length, once the DB has met the thread.
func BenchmarkAppendOwnID(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := b.Context()
			db := thread.New(thread.NewMemoryStore(), nil)
			th, err := db.Create(ctx, thread.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i += 1000 {
				msgs := make([]message.Message, 1000)
				for j := range msgs {
					msgs[j] = message.User("x")
				}
				if _, err := th.Append(ctx, msgs...); err != nil {
					b.Fatal(err)
				}
			}
			// The first append with an id of its own reads the thread.
			warm := message.User("y")
			warm.ID = "warm"
			if _, err := th.Append(ctx, warm); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				m := message.User("y")
				m.ID = fmt.Sprint("own-", i)
				i++
				if _, err := th.Append(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
