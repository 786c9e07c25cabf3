package thread_test

import (
	"context"
	"fmt"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Most recently updated first, loom's own threads left out, a page at a
// time: the cursor of the next page is the last thread's UpdatedAt and ID.
func ExampleDB_Threads_byUpdated() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Now: func() time.Time { now = now.Add(time.Second); return now }})
	for _, id := range []string{"alpha", "beta", "gamma"} {
		db.Create(ctx, thread.CreateOptions{ID: id})
	}
	db.Create(ctx, thread.CreateOptions{ID: "wl_notes", Labels: map[string]string{thread.LabelOwner: "worklog"}})
	alpha, _ := db.Thread(ctx, "alpha")
	alpha.Append(ctx, message.User("news")) // alpha moves to the front

	opts := thread.ListOptions{Order: thread.OrderUpdated, Internal: thread.InternalExclude, Limit: 2}
	for page := 1; ; page++ {
		var last thread.Record
		n := 0
		for th, err := range db.Threads(ctx, opts) {
			if err != nil {
				panic(err)
			}
			last, n = th.Record(), n+1
			fmt.Println(page, last.ID)
		}
		if n < opts.Limit {
			break
		}
		opts.After, opts.AfterUpdated = last.ID, last.UpdatedAt
	}
	// Output:
	// 1 alpha
	// 1 gamma
	// 2 beta
}
