// Package message defines the messages that make up a loom thread: who said
// what, as a list of typed contents.
//
// A Message has an id, a Role, an optional author name, its contents, a
// creation time and free-form metadata. A content is one of the variants
// Text, FunctionCall, FunctionResult, Data, Reasoning, Usage and Error, or
// Unknown: a content of a type this version of loom does not know, kept as its
// raw JSON so that it survives every round trip untouched.
//
// The builders cover the common cases:
//
//	message.User("What is the weather in Paris?")
//	message.Assistant("Let me look.")
//	message.ToolCall("call_1", "weather", `{"city":"Paris"}`)
//	message.ToolResult("call_1", `{"temp_c":21}`)
//
// Messages are values that never change once they are in a thread: the thread
// store hands out copies (see Message.Clone), and a message's id names the same
// message forever.
//
// The JSON wire format is documented in docs/wire-format.md and is what every
// store uses (and the HTTP API of a later release will).
package message
