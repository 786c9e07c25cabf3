package thread_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func Example() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	th, _ := db.Create(ctx, thread.CreateOptions{Title: "support chat"})
	th.Append(ctx, message.User("My order is late."), message.Assistant("Let me check."))
	msgs, _ := th.Messages(ctx, thread.ReadOptions{Last: 50})
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.Role, m.Text())
	}
	// Output:
	// user: My order is late.
	// assistant: Let me check.
}

func ExampleThread_Append() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{})
	// One call, one commit: a tool call and its result stay together.
	c, _ := th.Append(ctx,
		message.ToolCall("call_1", "weather", `{"city":"Paris"}`),
		message.ToolResult("call_1", `{"temp_c":21}`),
	)
	fmt.Println("messages:", c.Depth, "version:", th.Version())
	// Output: messages: 2 version: 2
}

func ExampleThread_Fork() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{})
	c, _ := th.Append(ctx, message.User("Plan a trip."), message.Assistant("Where to?"))
	th.Append(ctx, message.User("Rome."))

	// Branch from "Where to?": the fork shares the prefix, copies nothing.
	alt, _ := th.Fork(ctx, thread.ForkOptions{At: c.Messages[1].ID})
	alt.Append(ctx, message.User("Lisbon."))

	for _, t := range []*thread.Thread{th, alt} {
		msgs, _ := t.Messages(ctx, thread.ReadOptions{})
		fmt.Println(len(msgs), msgs[len(msgs)-1].Text())
	}
	// Output:
	// 3 Rome.
	// 3 Lisbon.
}

func ExampleThread_Rollback() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{})
	th.Append(ctx, message.User("Write a haiku."))
	th.Checkpoint(ctx, "asked")
	th.Append(ctx, message.Assistant("A bad haiku."))

	th.Rollback(ctx, "asked") // the bad answer stays in history, not in the thread
	th.Append(ctx, message.Assistant("Autumn moonlight—"))

	msgs, _ := th.Messages(ctx, thread.ReadOptions{})
	for _, m := range msgs {
		fmt.Println(m.Text())
	}
	// Output:
	// Write a haiku.
	// Autumn moonlight—
}

func ExampleThread_Messages_timeTravel() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, _ := db.Create(ctx, thread.CreateOptions{}) // version 1
	th.Append(ctx, message.User("one"))             // version 2
	th.Append(ctx, message.User("two"))             // version 3
	th.Reset(ctx)                                   // version 4: empty

	for v := int64(1); v <= th.Version(); v++ {
		msgs, _ := th.Messages(ctx, thread.ReadOptions{Version: v})
		fmt.Println("version", v, "has", len(msgs), "messages")
	}
	th.Restore(ctx, 3) // undo the reset
	msgs, _ := th.Messages(ctx, thread.ReadOptions{})
	fmt.Println("restored:", msgs[0].Text(), msgs[1].Text())
	// Output:
	// version 1 has 0 messages
	// version 2 has 1 messages
	// version 3 has 2 messages
	// version 4 has 0 messages
	// restored: one two
}

func ExampleThread_Save() {
	ctx := context.Background()
	src := thread.New(thread.NewMemoryStore(), nil)
	th, _ := src.Create(ctx, thread.CreateOptions{ID: "trip", Title: "Trip"})
	th.Append(ctx, message.User("Book a train."))
	th.Checkpoint(ctx, "start")

	var doc bytes.Buffer
	th.Save(ctx, &doc, thread.SaveOptions{History: true})

	// Load it into another store: messages, checkpoints and history move.
	dst := thread.New(thread.NewMemoryStore(), nil)
	copied, _ := dst.Load(ctx, &doc, thread.LoadOptions{})
	msgs, _ := copied.Messages(ctx, thread.ReadOptions{})
	fmt.Println(copied.ID(), copied.Title(), copied.Version(), msgs[0].Text())
	for cp := range copied.Checkpoints(ctx) {
		fmt.Println("checkpoint:", cp.Name)
	}
	// Output:
	// trip Trip 2 Book a train.
	// checkpoint: start
}

func ExampleDB_WithTenant() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	alice, bob := db.WithTenant("alice"), db.WithTenant("bob")
	// Each tenant has its own namespace of ids: both can have "support".
	a, _ := alice.Create(ctx, thread.CreateOptions{ID: "support", Messages: []message.Message{message.User("alice's question")}})
	_, err := bob.Create(ctx, thread.CreateOptions{ID: "support"})
	fmt.Println("bob creates support:", err)
	_, err = bob.Thread(ctx, "nobody")
	fmt.Println("bob reads an id alice lacks too:", errors.Is(err, thread.ErrNotFound))
	msgs, _ := a.Messages(ctx, thread.ReadOptions{})
	fmt.Println("alice's support:", msgs[0].Text())
	// The store keeps alice's thread under her key.
	r, _ := db.Store().Thread(ctx, thread.Key("alice", "support"))
	fmt.Println("stored as", r.ID, "of tenant", r.Tenant)
	// Output:
	// bob creates support: <nil>
	// bob reads an id alice lacks too: true
	// alice's support: alice's question
	// stored as alice/support of tenant alice
}

// A Group changes several threads in one atomic batch: here a checkpoint
// of two threads at once, and later a rollback of both, which succeeds for
// both or for neither.
func ExampleDB_Group() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	research, _ := db.Create(ctx, thread.CreateOptions{ID: "research"})
	writing, _ := db.Create(ctx, thread.CreateOptions{ID: "writing", Parent: "research"})
	research.Append(ctx, message.User("find sources"))
	writing.Append(ctx, message.Assistant("draft 1"))

	g := db.Group()
	g.Checkpoint(ctx, research, "v1")
	g.Checkpoint(ctx, writing, "v1")
	if err := g.Apply(ctx); err != nil {
		fmt.Println(err)
	}

	research.Append(ctx, message.User("more sources"))
	writing.Append(ctx, message.Assistant("draft 2"))

	g = db.Group()
	g.Rollback(ctx, research, "v1")
	g.Rollback(ctx, writing, "v1")
	if err := g.Apply(ctx); err != nil {
		fmt.Println(err)
	}
	for _, th := range []*thread.Thread{research, writing} {
		n, _ := th.Len(ctx)
		fmt.Printf("%s: %d message, parent %q\n", th.ID(), n, th.Record().ForkedFrom.Thread)
	}
	// Output:
	// research: 1 message, parent ""
	// writing: 1 message, parent "research"
}

func ExampleDB_GC() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), &thread.Options{
		// The store-wide default: each thread keeps its newest 3 versions.
		Retention: thread.Retention{KeepLast: 3},
	})
	th, _ := db.Create(ctx, thread.CreateOptions{ID: "chat"})
	for _, text := range []string{"one", "two", "three", "four", "five"} {
		th.Append(ctx, message.User(text))
	}
	rep, _ := db.GC(ctx, thread.GCOptions{})
	fmt.Println("versions dropped:", rep.Versions)
	for e := range th.History(ctx, thread.HistoryOptions{}) {
		fmt.Println("kept version", e.Version)
	}
	msgs, _ := th.Messages(ctx, thread.ReadOptions{})
	fmt.Println("messages:", len(msgs)) // the head still reaches every one
	_, err := th.Messages(ctx, thread.ReadOptions{Version: 2})
	fmt.Println(errors.Is(err, thread.ErrNotFound))
	// Output:
	// versions dropped: 3
	// kept version 6
	// kept version 5
	// kept version 4
	// messages: 5
	// true
}
