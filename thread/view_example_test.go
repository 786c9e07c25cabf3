package thread_test

import (
	"context"
	"fmt"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// A view of a thread within a token budget: the instructions come first,
// and whole turns are dropped oldest first until the rest fits.
func ExampleThread_View() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	th, _ := db.Create(ctx, thread.CreateOptions{})
	th.Append(ctx,
		message.User("What is the capital of France?"),
		message.Assistant("Paris."),
		message.User("And of Peru?"),
		message.ToolCall("call_1", "lookup", `{"country":"Peru"}`),
		message.ToolResult("call_1", `{"capital":"Lima","population":"10 million"}`),
		message.Assistant("Lima."),
		message.User("Thanks!"),
	)
	v, err := th.View(ctx, thread.ViewOptions{
		Model:        "gpt-4o",
		Budget:       60,
		Instructions: []message.Message{message.System("Answer briefly.")},
	})
	if err != nil {
		panic(err)
	}
	for _, m := range v.Messages {
		switch {
		case len(m.Calls()) > 0:
			fmt.Printf("%-9s calls %s\n", m.Role, m.Calls()[0].Name)
		case len(m.Results()) > 0:
			fmt.Printf("%-9s result of %s\n", m.Role, m.Results()[0].CallID)
		default:
			fmt.Printf("%-9s %s\n", m.Role, m.Text())
		}
	}
	fmt.Println(len(v.Dropped), "dropped;", v.Tokens, "tokens")
	// Output:
	// system    Answer briefly.
	// user      And of Peru?
	// assistant calls lookup
	// tool      result of call_1
	// assistant Lima.
	// user      Thanks!
	// 2 dropped; 57 tokens
}

// summarizer stands for a chat client asked to summarize.
type summarizer struct{ calls int }

func (s *summarizer) Summarize(ctx context.Context, msgs []message.Message) (message.Message, error) {
	s.calls++
	return message.Assistant(fmt.Sprintf("(We talked about %d things.)", len(msgs)/2)), nil
}

// Compaction: when the view does not fit, the older messages are summarized
// once and the summary is committed; later views reuse it.
func ExampleSummarize() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	th, _ := db.Create(ctx, thread.CreateOptions{})
	for i := range 20 {
		th.Append(ctx, message.User(fmt.Sprintf("Tell me fact %d.", i)), message.Assistant(fmt.Sprintf("Fact %d.", i)))
	}
	sum := &summarizer{}
	opts := thread.ViewOptions{Budget: 100, Strategies: []thread.Strategy{thread.Summarize{Summarizer: sum, Keep: 2}}}
	v, _ := th.View(ctx, opts)
	for _, m := range v.Messages {
		fmt.Println(m.Role, m.Text())
	}
	c, _ := db.Store().Commit(ctx, v.Compacted)
	fmt.Println("compact commit:", c.Op, "over", c.Depth-int64(len(c.Messages)), "messages kept in history")

	th.Append(ctx, message.User("One more?"))
	v, _ = th.View(ctx, opts)
	fmt.Println(len(v.Messages), "messages;", sum.calls, "summary written")
	// Output:
	// assistant (We talked about 19 things.)
	// user Tell me fact 19.
	// assistant Fact 19.
	// compact commit: compact over 40 messages kept in history
	// 4 messages; 1 summary written
}
