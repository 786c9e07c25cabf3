// Package oaiitem converts the items of OpenAI's Conversations and
// Responses APIs to loom messages and back: one item is one message, and
// the item id is the message id.
//
//	msgs, err := oaiitem.FromItems(items) // a client's items → messages to append
//	for _, it := range oaiitem.Items(msgs) { … it.JSON … } // stored messages → items
//
// The conversion is never lossy. An item whose own conversion back is not
// the item as given (annotations, logprobs, several summary parts, an output
// given as an array, extra members…) is kept whole in its message's
// Metadata under MetadataKey, and reads return it; the message's contents
// are still what a model is sent. Messages that loom made (its own API, its
// agents, its providers) carry no such item and read from their contents,
// where one message may make several items: an assistant message [Text,
// FunctionCall, FunctionCall] reads as a message item and two function
// calls, whose ids are the message id, <id>.1 and <id>.2. Usage and Error
// contents make no item.
//
// Split goes the other way for a model's answer (one message per item, as a
// conversation holds them), and Coalesce merges a conversation's runs of
// assistant or tool messages back into loom's one-message-per-turn shape
// before they are sent to a model.
package oaiitem
