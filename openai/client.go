package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Options configure a client. The zero value talks to OpenAI with the key in
// OPENAI_API_KEY; a model must then come from ChatOptions.Model.
type Options struct {
	// Model is the default model; ChatOptions.Model overrides it.
	Model string
	// APIKey authenticates requests; "" means the OPENAI_API_KEY environment
	// variable. With a BaseURL and no key at all, a placeholder key is sent,
	// so that OpenAI-compatible servers without authentication (Ollama,
	// vLLM, llama.cpp) work without configuration.
	APIKey string
	// BaseURL is the API's root, such as "http://localhost:11434/v1" for
	// Ollama; "" means the OPENAI_BASE_URL environment variable, or OpenAI.
	BaseURL string
	// HTTPClient sends the requests; nil means the SDK's client.
	HTTPClient *http.Client
	// MaxRetries is how often a request that failed with a rate limit, a
	// timeout or a server error is tried again: 0 means the SDK's default
	// (2), a negative number means never.
	MaxRetries int
	// RequestOptions are passed to the SDK after the options above, so they
	// can add headers or body fields (such as reasoning.summary) that this
	// package does not set.
	RequestOptions []option.RequestOption
}

// placeholderKey is sent to servers that need no key: the SDK would send no
// Authorization header at all, which some compatible servers refuse.
const placeholderKey = "no-key"

// provider names this package in agent.ProviderError.
const provider = "openai"

// newClient builds the SDK client. It only assembles options: nothing is
// read from the network until a request is made.
func newClient(o Options) sdk.Client {
	var opts []option.RequestOption
	key := o.APIKey
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	base := o.BaseURL
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if key == "" && base != "" {
		key = placeholderKey
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	switch {
	case o.MaxRetries < 0:
		opts = append(opts, option.WithMaxRetries(0))
	case o.MaxRetries > 0:
		opts = append(opts, option.WithMaxRetries(o.MaxRetries))
	}
	opts = append(opts, o.RequestOptions...)
	return sdk.NewClient(opts...)
}

// model picks the request's model: the call's, else the client's.
func model(def string, opts *agent.ChatOptions) (string, error) {
	if opts.Model != "" {
		return opts.Model, nil
	}
	if def != "" {
		return def, nil
	}
	return "", fmt.Errorf("openai: no model: set Options.Model or ChatOptions.Model: %w", thread.ErrInvalid)
}

// requestID names the service's request id, for errors: OpenAI's
// x-request-id, or Azure's.
func requestID(h http.Header) string {
	for _, k := range []string{"x-request-id", "apim-request-id", "x-ms-request-id"} {
		if v := h.Get(k); v != "" {
			return " (request " + v + ")"
		}
	}
	return ""
}

// wrapError turns what the SDK returned into the error loom callers match:
// context errors stay themselves, HTTP errors become *agent.ProviderError.
// raw is the HTTP response, when there was one; it recovers the status of
// error bodies the SDK could not decode.
func wrapError(ctx context.Context, err error, raw *http.Response) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && !isHTTPError(err, raw) {
		return ctx.Err()
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		pe := &agent.ProviderError{
			Provider:   provider,
			StatusCode: apiErr.StatusCode,
			Type:       apiErr.Type,
			Message:    apiErr.Message,
			Err:        err,
		}
		if pe.Type == "" {
			pe.Type = apiErr.Code
		}
		if pe.Message == "" {
			pe.Message = bodyMessage(apiErr.Response)
		}
		if apiErr.Response != nil {
			pe.Message += requestID(apiErr.Response.Header)
		}
		return pe
	}
	if raw != nil && raw.StatusCode >= 400 {
		return &agent.ProviderError{
			Provider:   provider,
			StatusCode: raw.StatusCode,
			Message:    bodyMessage(raw),
			Err:        err,
		}
	}
	return fmt.Errorf("openai: %w", err)
}

func isHTTPError(err error, raw *http.Response) bool {
	var apiErr *sdk.Error
	return errors.As(err, &apiErr) || (raw != nil && raw.StatusCode >= 400)
}

// bodyMessage reads what an error body says when it is not OpenAI's error
// object: {"error": "text"} as some compatible servers write it, or the
// start of a plain-text or HTML body.
func bodyMessage(res *http.Response) string {
	if res == nil || res.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	res.Body = io.NopCloser(bytes.NewReader(b)) // the error's Response keeps it
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &v) == nil {
		var s string
		if json.Unmarshal(v.Error, &s) == nil && s != "" {
			return s
		}
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(v.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		if v.Message != "" {
			return v.Message
		}
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = s[:512]
	}
	return strings.ToValidUTF8(s, "")
}

// errTruncated is the error of a stream that ended without its final event:
// a dropped connection looks like a clean end of the body to an SSE reader.
var errTruncated = fmt.Errorf("openai: stream ended before the response was complete: %w", io.ErrUnexpectedEOF)

// readError is what a stream that failed while reading returns: the
// context's error when it was canceled, otherwise the read error.
func readError(ctx context.Context, err error) error {
	var pe *agent.ProviderError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil:
		return errTruncated
	case errors.As(err, &pe):
		return err
	}
	return fmt.Errorf("openai: stream: %w", err)
}

// callID returns id, or a fresh one for servers that send calls without ids,
// since a call without an id can never be paired with its result.
func callID(id string) string {
	if id != "" {
		return id
	}
	return "call_" + strings.TrimPrefix(message.NewID(), "msg_")
}

// finish maps a finish reason shared by both APIs. A response with function
// calls is a tool-calls response whatever the server said (some compatible
// servers say "stop"), unless it was cut short or filtered.
func finish(reason string, hasCalls bool) agent.FinishReason {
	switch reason {
	case "length", "max_tokens", "max_output_tokens":
		return agent.FinishLength
	case "content_filter":
		return agent.FinishContentFilter
	}
	if hasCalls {
		return agent.FinishToolCalls
	}
	switch reason {
	case "", "stop", "tool_calls", "function_call", "end_turn":
		return agent.FinishStop
	}
	return agent.FinishReason(reason)
}

// assistant builds the one assistant message of a response, merging adjacent
// texts so that the message reads the same whether it was streamed or not.
// Strings are made valid UTF-8, which a thread requires and servers do not
// always send.
func assistant(contents []message.Content, meta map[string]any) message.Message {
	m := message.Message{Role: message.RoleAssistant, Metadata: meta}
	for _, c := range contents {
		switch v := c.(type) {
		case message.Text:
			if v.Text == "" {
				continue
			}
			v.Text = utf8Valid(v.Text)
			if n := len(m.Contents); n > 0 {
				if prev, ok := m.Contents[n-1].(message.Text); ok {
					m.Contents[n-1] = message.Text{Text: prev.Text + v.Text}
					continue
				}
			}
			c = v
		case message.Reasoning:
			c = message.Reasoning{Text: utf8Valid(v.Text), Protected: utf8Valid(v.Protected)}
		case message.FunctionCall:
			c = message.FunctionCall{CallID: utf8Valid(v.CallID), Name: utf8Valid(v.Name), Arguments: utf8Valid(v.Arguments)}
		}
		m.Contents = append(m.Contents, c)
	}
	return m
}

// utf8Valid replaces what is not UTF-8 in s.
func utf8Valid(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// checkCalls refuses calls without a name: nothing could ever run them, and
// the thread would refuse the message.
func checkCalls(calls []message.FunctionCall) error {
	for _, c := range calls {
		if c.Name == "" {
			return fmt.Errorf("openai: server sent function call %q without a name", c.CallID)
		}
	}
	return nil
}

// resultText is what the model sees of a function result. A failed call is
// sent as "Error: " and its reason, since neither API has a field that says
// a call failed.
func resultText(r message.FunctionResult) string {
	if !r.IsError {
		return r.Result
	}
	if r.Result == "" {
		return "Error: the call failed"
	}
	return "Error: " + r.Result
}

// arguments is what is sent back of a call's arguments: servers that parse
// them (Ollama) refuse "", which a model writes for a call without arguments.
func arguments(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}
