// Package anthropic is a chat client on Anthropic's Messages API, built on
// the official SDK (github.com/anthropics/anthropic-sdk-go). It is the only
// loom package that imports that SDK.
//
// The smallest use gives an agent a Claude model; the key comes from
// ANTHROPIC_API_KEY:
//
//	a := agent.New(anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5"}), …)
//
// A Client can also be used on its own, with Response for a whole answer or
// Stream for deltas as they arrive.
//
// # What is sent
//
// ChatOptions.Instructions and then the text of every system message form
// the system prompt, in order. User and assistant messages keep their role;
// tool messages become user turns of tool_result blocks. Turns of one role
// that follow each other are merged, since Anthropic wants user and
// assistant to alternate and the results of all of an assistant turn's calls
// in the one user turn after it; in a user turn the tool_result blocks come
// first. Function calls become tool_use blocks whose input is the parsed
// arguments; arguments that are not a JSON object are sent as {}.
// Images (image/*) and PDFs (application/pdf) are sent as base64 or by URL;
// other data is refused with an error wrapping thread.ErrInvalid. Usage,
// Error and Unknown contents, and messages' author names and metadata, are
// not sent.
//
// Reasoning is Anthropic's thinking: a thinking block becomes a Reasoning
// whose Protected is the block's signature, and a redacted_thinking block a
// Reasoning without text whose Protected is "redacted_thinking:" followed by
// the block's data, which tells the two apart on the way back even when a
// thinking block's text is empty (thinking display "omitted"). Reasoning
// without a Protected payload, such as another provider's, is not sent,
// since Anthropic would refuse a thinking block it cannot verify.
//
// Of ChatOptions.Metadata only "user_id" is sent: it is the one field of
// Anthropic's metadata. ResponseFormat with a Schema uses structured outputs
// (output_config.format); without a Schema it is refused with an error
// wrapping thread.ErrUnsupported, since Anthropic has no schema-less JSON
// mode. Anthropic keeps no conversations: a ConversationID or Store set to
// true is refused before any request with agent.ErrServiceThreads.
//
// # What comes back
//
// A response is one assistant message whose contents are the blocks in
// order: text, reasoning, function calls (Arguments is the input's JSON
// text), and, for block types loom has no content for (server tools,
// newer types), an Unknown whose type is "anthropic." and the block's type.
// Stop reasons map to FinishStop (end_turn, stop_sequence), FinishLength
// (max_tokens, model_context_window_exceeded), FinishToolCalls (tool_use) and
// FinishContentFilter (refusal); others are kept as they are. InputTokens
// counts all input, cached or not, and CachedInputTokens the part read from
// the prompt cache.
//
// Errors from the API, before or in the middle of a stream, are
// *agent.ProviderError with the status, the error type (such as
// "overloaded_error") and the message. A streamed error carries the status
// that Anthropic gives the same error before a stream starts, so that
// Temporary works for both. A stream that ends before message_stop is an
// error wrapping io.ErrUnexpectedEOF, and a canceled context gives the
// context's error.
package anthropic
