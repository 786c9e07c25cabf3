package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"

	"github.com/loomthreads/loom/message"
)

// ChatClient sends messages to a model and returns its response. Providers
// (package openai, package anthropic, agent/scripted) implement it; the agent
// is the only caller that needs to know about threads.
//
// A client must be safe for concurrent use. It must not keep or change the
// messages and options it is given.
type ChatClient interface {
	// Response sends msgs and returns the model's whole response.
	Response(ctx context.Context, msgs []message.Message, opts *ChatOptions) (*ChatResponse, error)
	// Stream sends msgs and yields the response as it is made: deltas of
	// text, reasoning and tool calls, usage, and as the last update one
	// whose Response is the whole response (the same one Response would
	// have returned). A stream that stops early yields an error and no
	// Response; the consumer may stop iterating at any time, which
	// cancels the request.
	Stream(ctx context.Context, msgs []message.Message, opts *ChatOptions) iter.Seq2[Update, error]
	// Capabilities says what the client supports.
	Capabilities() Capabilities
}

// Capabilities say what a chat client supports. Local threads (the client is
// sent the messages) are always supported.
type Capabilities struct {
	// ServiceThreads: the service can keep the conversation under an id
	// (ChatResponse.ConversationID), so that a run sends only new messages.
	ServiceThreads bool
	// Chaining: each response has its own conversation id that names the
	// conversation up to that response, and an older id can be continued
	// from (OpenAI Responses' previous_response_id). Service threads of such
	// a client can be forked and rolled back; without it, the service keeps
	// one linear conversation and loom refuses to fork or rewind it.
	Chaining bool
	// Streaming: Stream yields deltas as the model makes them. A client
	// without it still implements Stream, with one final update.
	Streaming bool
	// Tools: the client sends ChatOptions.Tools and returns function calls.
	Tools bool
}

// ChatOptions are the settings of one request. The zero value asks for the
// client's defaults.
type ChatOptions struct {
	// Model names the model; "" means the client's default.
	Model string
	// ConversationID continues a conversation the service keeps: a
	// conversation id, or the id of the response to continue from. "" means
	// the request carries the whole conversation.
	ConversationID string
	// Store asks the service to keep (true) or not keep (false) the
	// conversation; nil leaves it to the service's default.
	Store *bool
	// Instructions are the system instructions, sent the way the provider
	// wants them (a system message, an instructions field).
	Instructions string
	// Tools are the tools the model may call.
	Tools []ToolSpec
	// ToolChoice says whether the model may, must or must not call tools.
	ToolChoice ToolChoice
	// Temperature, when not nil, sets the sampling temperature.
	Temperature *float64
	// MaxTokens, when not 0, caps the tokens of the response.
	MaxTokens int
	// ResponseFormat, when not nil, asks for JSON output.
	ResponseFormat *ResponseFormat
	// Metadata is sent to services that keep request metadata.
	Metadata map[string]string
}

// Clone returns a copy of o that shares nothing mutable with it.
func (o *ChatOptions) Clone() *ChatOptions {
	if o == nil {
		return nil
	}
	c := *o
	if o.Store != nil {
		v := *o.Store
		c.Store = &v
	}
	if o.Temperature != nil {
		v := *o.Temperature
		c.Temperature = &v
	}
	c.Tools = append([]ToolSpec(nil), o.Tools...)
	for i := range c.Tools {
		c.Tools[i].Parameters = bytes.Clone(c.Tools[i].Parameters)
	}
	if o.ResponseFormat != nil {
		v := *o.ResponseFormat
		v.Schema = bytes.Clone(v.Schema)
		c.ResponseFormat = &v
	}
	if o.Metadata != nil {
		c.Metadata = make(map[string]string, len(o.Metadata))
		for k, v := range o.Metadata {
			c.Metadata[k] = v
		}
	}
	return &c
}

// ToolChoice says whether the model may call tools: "" or ToolAuto lets it
// choose, ToolNone forbids calls, ToolRequired demands one, and any other
// value names the one tool it must call.
type ToolChoice string

// The tool choices that are not a tool's name.
const (
	ToolAuto     ToolChoice = "auto"
	ToolNone     ToolChoice = "none"
	ToolRequired ToolChoice = "required"
)

// ToolSpec describes a tool to a model.
type ToolSpec struct {
	// Name is what the model calls the tool by: letters, digits, _ and -,
	// at most 64 bytes.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
}

// ResponseFormat asks for JSON output: any JSON object when Schema is nil,
// otherwise JSON that matches Schema.
type ResponseFormat struct {
	// Name names the schema, as some providers require.
	Name string
	// Schema is a JSON Schema; nil asks for any JSON object.
	Schema json.RawMessage
	// Strict asks the provider to enforce Schema exactly.
	Strict bool
}

// FinishReason says why a model stopped.
type FinishReason string

// The finish reasons that providers' own reasons are mapped to.
const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
)

// ChatResponse is a model's whole response.
type ChatResponse struct {
	// Messages are what the model said: usually one assistant message,
	// with text, reasoning and function calls as its contents.
	Messages []message.Message
	// ConversationID names the conversation the service keeps, including
	// this response: a conversation id, or this response's id for a
	// service that chains responses. "" when the service keeps nothing.
	ConversationID string
	// ResponseID is the provider's id of this response.
	ResponseID string
	// Model is the model that answered, as the provider names it.
	Model string
	// Usage counts the tokens of the request and the response.
	Usage message.Usage
	// FinishReason says why the model stopped.
	FinishReason FinishReason
}

// Calls returns the function calls of the response's messages, in order.
func (r *ChatResponse) Calls() []message.FunctionCall {
	var calls []message.FunctionCall
	for _, m := range r.Messages {
		calls = append(calls, m.Calls()...)
	}
	return calls
}

// Text returns the text of the response's messages.
func (r *ChatResponse) Text() string {
	var s string
	for _, m := range r.Messages {
		s += m.Text()
	}
	return s
}

// Update is one step of a streamed response. Usually one field is set.
type Update struct {
	// Text is a piece of the answer's text.
	Text string
	// Reasoning is a piece of the model's visible reasoning.
	Reasoning string
	// Call is a piece of a function call.
	Call *CallDelta
	// Usage, when not nil, is the usage so far.
	Usage *message.Usage
	// Response, on the last update only, is the whole response.
	Response *ChatResponse
}

// CallDelta is a piece of a streamed function call. The first piece of a call
// has its CallID and Name; later ones add to Arguments.
type CallDelta struct {
	// Index orders the calls of one response.
	Index     int
	CallID    string
	Name      string
	Arguments string
}

// StreamOf adapts a whole response to a stream of one text update and the
// final update, for clients that cannot stream.
func StreamOf(resp *ChatResponse, err error) iter.Seq2[Update, error] {
	return func(yield func(Update, error) bool) {
		if err == nil && resp == nil {
			err = errors.New("client returned no response")
		}
		if err != nil {
			yield(Update{}, err)
			return
		}
		if t := resp.Text(); t != "" {
			if !yield(Update{Text: t}, nil) {
				return
			}
		}
		yield(Update{Response: resp}, nil)
	}
}
