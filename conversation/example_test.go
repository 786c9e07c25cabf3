package conversation_test

import (
	"context"
	"fmt"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// A conversation whose agent asks to compact: the summary replaces what
// came before, and the conversation goes on with the next prompt.
func Example() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	client := scripted.New(
		scripted.Text("Lisbon has trams and pastéis de nata."),
		scripted.Calls(message.FunctionCall{CallID: "k1", Name: conversation.ToolCompact,
			Arguments: `{"summary":"The user asked about Lisbon.","next_prompt":"And Porto?"}`}),
		scripted.Text("Porto has port wine."),
	)
	c, _ := conversation.New(ctx, db, conversation.Options{Client: client})
	defer c.Close(context.Background())

	c.Send(context.Background(), message.User("Tell me about Lisbon"), false)
	c.Wait(ctx)
	c.Send(context.Background(), message.User("Please compact."), false)
	c.Wait(ctx)
	for _, m := range c.Agent().Messages() {
		fmt.Printf("%s: %s\n", m.Role, m.Text())
	}
	fmt.Println(c.Agent().Status(), c.Mode())
	// Output:
	// user: Summary of the conversation so far:
	// The user asked about Lisbon.
	// user: And Porto?
	// assistant: Porto has port wine.
	// stopped/end_turn normal
}
