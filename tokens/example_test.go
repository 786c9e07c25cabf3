package tokens_test

import (
	"fmt"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/tokens"
)

func Example() {
	enc, exact := tokens.EncodingFor("gpt-4o-mini")
	fmt.Println(enc, exact)
	fmt.Println(enc.Encode("hello world"))

	msgs := []message.Message{
		message.System("You are terse."),
		message.User("What is the weather in Paris?"),
		message.ToolCall("call_1", "weather", `{"city":"Paris"}`),
		message.ToolResult("call_1", `{"temp_c":21}`),
	}
	for _, m := range msgs {
		fmt.Println(m.Role, tokens.Count(m, enc))
	}
	fmt.Println("request", tokens.CountRequest(msgs, enc))

	enc, exact = tokens.EncodingFor("claude-sonnet-4-5")
	fmt.Println(enc, exact)
	// Output:
	// o200k_base true
	// [24912 2375]
	// system 8
	// user 11
	// assistant 10
	// tool 10
	// request 42
	// o200k_base false
}
