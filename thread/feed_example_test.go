package thread_test

import (
	"context"
	"fmt"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func ExampleDB_Search() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{ID: "support"})
	th.Append(ctx, message.User("My order is late."), message.Assistant("Your ORDER ships today."))
	th.Append(ctx, message.User("Can I change the address?"))
	// Every word, whole words, any case; newest first.
	hits, _ := db.Search(ctx, thread.SearchQuery{Text: "order"})
	for _, h := range hits {
		fmt.Printf("%s %s: %s\n", h.Thread, h.Message.Role, h.Snippet)
	}
	// Output:
	// support assistant: Your ORDER ships today.
	// support user: My order is late.
}

func ExampleDB_Watch() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	db := thread.New(thread.NewMemoryStore(), nil)
	heard := make(chan thread.Change, 10)
	// Watch returns once it listens: nothing written after it is missed.
	db.Watch(ctx, func(c thread.Change) { heard <- c })
	th, _ := db.Create(ctx, thread.CreateOptions{ID: "live"})
	th.Append(ctx, message.User("hello"))
	for range 2 {
		c := <-heard
		fmt.Println(c.Kind, c.Thread, c.Version, c.Op)
	}
	// Output:
	// create live 1 create
	// move live 2 append
}
