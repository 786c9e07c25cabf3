package message_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/loomthreads/loom/message"
)

func ExampleUser() {
	m := message.User("What is the weather in Paris?")
	fmt.Println(m.Role, m.Text())
	fmt.Println(m.Validate())
	// Output:
	// user What is the weather in Paris?
	// <nil>
}

func ExampleToolCall() {
	call := message.ToolCall("call_1", "weather", `{"city":"Paris"}`)
	for _, c := range call.Calls() {
		fmt.Printf("%s calls %s with %s\n", c.CallID, c.Name, c.Arguments)
	}

	result := message.ToolResult("call_1", `{"temp_c":21}`)
	for _, r := range result.Results() {
		fmt.Printf("%s answers %s: %s\n", result.Role, r.CallID, r.Result)
	}

	failed := message.ToolError("call_2", "timeout after 30s")
	fmt.Println(failed.Results()[0].IsError)
	// Output:
	// call_1 calls weather with {"city":"Paris"}
	// tool answers call_1: {"temp_c":21}
	// true
}

func ExampleNew() {
	// Parallel tool calls go in one assistant message.
	m := message.New(message.RoleAssistant,
		message.Text{Text: "Checking both cities."},
		message.FunctionCall{CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
		message.FunctionCall{CallID: "call_2", Name: "weather", Arguments: `{"city":"Rome"}`},
	)
	for _, c := range m.Contents {
		fmt.Println(c.Type())
	}
	fmt.Println(len(m.Calls()), "calls")
	// Output:
	// text
	// function_call
	// function_call
	// 2 calls
}

func ExampleMessage_MarshalJSON() {
	m := message.ToolCall("call_1", "weather", `{"city":"Paris"}`)
	m.ID = "msg_1"
	m.CreatedAt = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	m.Metadata = map[string]any{"request_id": "req_42"}

	b, err := json.Marshal(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"id":"msg_1","role":"assistant","contents":[{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"}],"created_at":"2025-03-14T15:09:26.535897932Z","metadata":{"request_id":"req_42"}}
}

func ExampleMessage_AppendJSON() {
	// Writing several messages into one buffer, as a JSON array.
	msgs := []message.Message{
		message.User("What is the weather in Paris?"),
		message.ToolCall("call_1", "weather", `{"city":"Paris"}`),
	}
	b := []byte{'['}
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = m.AppendJSON(b); err != nil {
			fmt.Println(err)
			return
		}
	}
	b = append(b, ']')
	fmt.Println(string(b))
	// Output:
	// [{"role":"user","contents":[{"type":"text","text":"What is the weather in Paris?"}]},{"role":"assistant","contents":[{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"}]}]
}

func ExampleUnknown() {
	// A newer program wrote a content type this version does not know, and
	// a metadata number too big for an int64.
	in := `{"role":"assistant","contents":[{"type":"text","text":"Paris is sunny."},{"type":"citation","url":"https://example.com/paris","spans":[1,2]}],"metadata":{"big":12345678901234567890}}`

	var m message.Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		fmt.Println(err)
		return
	}
	u := m.Contents[1].(message.Unknown)
	fmt.Println(u.Type(), string(u.Raw))
	fmt.Println(m.Metadata["big"])

	out, err := json.Marshal(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out) == in)
	// Output:
	// citation {"type":"citation","url":"https://example.com/paris","spans":[1,2]}
	// 12345678901234567890
	// true
}

func ExampleMessage_Validate() {
	m := message.New("User", message.Text{Text: "hi"}, nil)
	m.ID = "../../etc"
	fmt.Println(m.Validate())
	// Output:
	// id "../../etc": not a valid id
	// role "User": want a lowercase word such as user or assistant
	// contents[1]: nil content
}

func ExampleMessage_Clone() {
	orig := message.User("hi")
	orig.Metadata = map[string]any{"tags": []any{"a"}}

	c := orig.Clone()
	c.Contents[0] = message.Text{Text: "changed"}
	c.Metadata["tags"].([]any)[0] = "changed"

	fmt.Println(orig.Text(), orig.Metadata["tags"])
	// Output:
	// hi [a]
}
