package message

// Content is one part of a message. Its dynamic type is one of Text,
// FunctionCall, FunctionResult, Data, Reasoning, Usage, Error or Unknown; a
// type switch over them is exhaustive.
type Content interface {
	// Type returns the content's wire type, such as "text".
	Type() string
	isContent()
}

// Text is plain text.
type Text struct {
	Text string `json:"text"`
}

// FunctionCall is a model's request to call a tool.
type FunctionCall struct {
	// CallID pairs the call with its FunctionResult.
	CallID string `json:"call_id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is the JSON text the model wrote. It is kept as text because
	// models sometimes write invalid JSON, and the thread records what was said.
	Arguments string `json:"arguments,omitzero"`
}

// FunctionResult is the result of a FunctionCall.
type FunctionResult struct {
	// CallID names the call this result answers.
	CallID string `json:"call_id"`
	// Result is what the tool returned, usually JSON or plain text.
	Result string `json:"result,omitzero"`
	// IsError says that the call failed (or was aborted) and Result says why.
	IsError bool `json:"is_error,omitzero"`
}

// Data is binary data or a reference to it: an image, a file, audio.
// Either URI or Data is set.
type Data struct {
	// MediaType is the IANA media type, such as "image/png".
	MediaType string `json:"media_type,omitzero"`
	// URI locates the data (https:, file id, data: URI).
	URI string `json:"uri,omitzero"`
	// Data holds the bytes inline; base64 in JSON.
	Data []byte `json:"data,omitzero"`
	// Name is an optional file name.
	Name string `json:"name,omitzero"`
}

// Reasoning is a model's visible reasoning, with the provider's opaque
// payload (a signature or encrypted content) that must be sent back verbatim.
type Reasoning struct {
	Text      string `json:"text,omitzero"`
	Protected string `json:"protected,omitzero"`
}

// Usage reports the tokens a model call used.
type Usage struct {
	InputTokens       int64 `json:"input_tokens,omitzero"`
	OutputTokens      int64 `json:"output_tokens,omitzero"`
	TotalTokens       int64 `json:"total_tokens,omitzero"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitzero"`
	ReasoningTokens   int64 `json:"reasoning_tokens,omitzero"`
}

// Error is an error that a model or a service reported in place of content.
type Error struct {
	Code    string `json:"code,omitzero"`
	Message string `json:"message"`
}

// Unknown is a content whose type this version of loom does not know. Raw
// holds its JSON object as it was read, compacted and with <, >, &, U+2028
// and U+2029 in strings escaped as encoding/json writes them; it is written
// back unchanged, so newer content survives older code.
type Unknown struct {
	Raw []byte
}

// Type returns "text".
func (Text) Type() string { return "text" }

// Type returns "function_call".
func (FunctionCall) Type() string { return "function_call" }

// Type returns "function_result".
func (FunctionResult) Type() string { return "function_result" }

// Type returns "data".
func (Data) Type() string { return "data" }

// Type returns "reasoning".
func (Reasoning) Type() string { return "reasoning" }

// Type returns "usage".
func (Usage) Type() string { return "usage" }

// Type returns "error".
func (Error) Type() string { return "error" }

// Type returns the "type" member of the raw JSON, or "" if it has none.
func (u Unknown) Type() string {
	t, _ := unknownType(u.Raw)
	return t
}

func (Text) isContent()           {}
func (FunctionCall) isContent()   {}
func (FunctionResult) isContent() {}
func (Data) isContent()           {}
func (Reasoning) isContent()      {}
func (Usage) isContent()          {}
func (Error) isContent()          {}
func (Unknown) isContent()        {}
