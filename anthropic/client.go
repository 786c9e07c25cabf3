package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// DefaultMaxTokens is the max_tokens of a request when neither
// ChatOptions.MaxTokens nor Options.MaxTokens says otherwise. Anthropic
// requires the field, so some default has to be sent.
const DefaultMaxTokens = 4096

// Options configure a Client. The zero value talks to Anthropic with the key
// in ANTHROPIC_API_KEY, but has no model: set Model here or in each request's
// ChatOptions.
type Options struct {
	// Model is the default model, such as "claude-sonnet-4-5";
	// ChatOptions.Model overrides it.
	Model string
	// APIKey is sent as x-api-key; "" reads ANTHROPIC_API_KEY.
	APIKey string
	// BaseURL is the API's address; "" reads ANTHROPIC_BASE_URL, and
	// without it Anthropic's own.
	BaseURL string
	// HTTPClient sends the requests; nil means a client like the SDK's
	// default, which waits at most 10 minutes for response headers.
	HTTPClient *http.Client
	// MaxRetries is how often a request that failed with a connection
	// error, 408, 409, 429 or a 5xx status is tried again: 0 means the
	// SDK's default (2), a negative value means never.
	MaxRetries int
	// MaxTokens is max_tokens when ChatOptions.MaxTokens is 0; 0 means
	// DefaultMaxTokens.
	MaxTokens int
	// RequestOptions are applied after the options above, to every
	// request: headers, middleware, beta flags, extra body fields.
	RequestOptions []option.RequestOption
}

// Client is a chat client on Anthropic's Messages API. It keeps no state
// between requests, so it is safe for concurrent use.
type Client struct {
	sdk       anthropic.Client
	model     string
	maxTokens int64
}

var _ agent.ChatClient = (*Client)(nil)

// New returns a client with the given options. It reads ANTHROPIC_API_KEY
// and ANTHROPIC_BASE_URL when the options leave them empty, and nothing
// else from the environment: the SDK's other credential sources (auth
// tokens, profiles, federation) would make a client's behaviour depend on
// files of the machine it runs on; pass option.WithAuthToken and the like in
// RequestOptions to use them. New touches neither the network nor the disk.
func New(opts Options) *Client {
	apiKey := opts.APIKey
	if apiKey == "" {
		apiKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	baseURL := opts.BaseURL
	if baseURL == "" {
		baseURL = os.Getenv("ANTHROPIC_BASE_URL")
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient()
	}
	ro := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
	}
	if apiKey != "" {
		ro = append(ro, option.WithAPIKey(apiKey))
	}
	if baseURL != "" {
		ro = append(ro, option.WithBaseURL(baseURL))
	}
	switch {
	case opts.MaxRetries < 0:
		ro = append(ro, option.WithMaxRetries(0))
	case opts.MaxRetries > 0:
		ro = append(ro, option.WithMaxRetries(opts.MaxRetries))
	}
	ro = append(ro, opts.RequestOptions...)
	maxTokens := int64(opts.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Client{
		sdk:       anthropic.NewClient(ro...),
		model:     opts.Model,
		maxTokens: maxTokens,
	}
}

// defaultHTTPClient mirrors the SDK's own default, which the SDK only
// installs along with its environment defaults: a server that accepts the
// connection but never answers must not hang a request for ever.
func defaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

// Capabilities reports streaming and tools. Anthropic keeps no
// conversations, so there are no service threads.
func (c *Client) Capabilities() agent.Capabilities {
	return agent.Capabilities{Streaming: true, Tools: true}
}

// Response sends msgs to the Messages API and returns the whole response.
//
// The SDK refuses a non-streaming request whose max_tokens could make it
// run longer than ten minutes; Response then streams the request itself and
// returns what the stream collected, which is the same response.
func (c *Client) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	params, err := c.params(msgs, opts)
	if err != nil {
		return nil, err
	}
	if _, err := anthropic.CalculateNonStreamingTimeout(int(params.MaxTokens), params.Model, c.sdk.Messages.Options); err != nil {
		return c.responseByStream(ctx, params)
	}
	m, err := c.sdk.Messages.New(ctx, params)
	if err != nil {
		return nil, wrapError(ctx, err)
	}
	return toResponse(m), nil
}

// responseByStream streams a request and returns its final response.
func (c *Client) responseByStream(ctx context.Context, params anthropic.MessageNewParams) (*agent.ChatResponse, error) {
	for u, err := range c.stream(ctx, params) {
		if err != nil {
			return nil, err
		}
		if u.Response != nil {
			return u.Response, nil
		}
	}
	return nil, errors.New("anthropic: stream ended without a response")
}

// Stream sends msgs to the Messages API with server-sent events and yields
// text, reasoning and tool-call deltas and usage as they arrive, then the
// whole response. Signatures and redacted thinking make no deltas: they are
// opaque, and reach the caller in the final response. A stream that ends
// before message_stop yields an error wrapping io.ErrUnexpectedEOF.
func (c *Client) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	params, err := c.params(msgs, opts)
	if err != nil {
		return func(yield func(agent.Update, error) bool) { yield(agent.Update{}, err) }
	}
	return c.stream(ctx, params)
}

func (c *Client) stream(ctx context.Context, params anthropic.MessageNewParams) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		// A consumer that stops early must not leave the request running.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s := c.sdk.Messages.NewStreaming(ctx, params)
		defer s.Close()

		var acc anthropic.Message
		// calls maps a tool_use block's index to its call's index: a
		// CallDelta counts calls, not blocks.
		calls := map[int64]int{}
		stopped := false
		for !stopped && s.Next() {
			ev := s.Current()
			if err := acc.Accumulate(ev); err != nil {
				yield(agent.Update{}, fmt.Errorf("anthropic: stream: %w", err))
				return
			}
			var u agent.Update
			switch ev.Type {
			case "message_start", "message_delta":
				usage := toUsage(acc.Usage)
				u.Usage = &usage
			case "message_stop":
				stopped = true
			case "content_block_start":
				switch b := ev.ContentBlock; b.Type {
				case "text":
					u.Text = b.Text
				case "thinking":
					u.Reasoning = b.Thinking
				case "tool_use":
					i := len(calls)
					calls[ev.Index] = i
					u.Call = &agent.CallDelta{Index: i, CallID: b.ID, Name: b.Name}
				}
			case "content_block_delta":
				switch d := ev.Delta; d.Type {
				case "text_delta":
					u.Text = d.Text
				case "thinking_delta":
					u.Reasoning = d.Thinking
				case "input_json_delta":
					if i, ok := calls[ev.Index]; ok && d.PartialJSON != "" {
						u.Call = &agent.CallDelta{Index: i, Arguments: d.PartialJSON}
					}
				}
			}
			if u != (agent.Update{}) && !yield(u, nil) {
				return
			}
		}
		if err := s.Err(); err != nil {
			yield(agent.Update{}, wrapError(ctx, err))
			return
		}
		if !stopped {
			if err := ctx.Err(); err != nil {
				yield(agent.Update{}, err)
				return
			}
			yield(agent.Update{}, fmt.Errorf("anthropic: stream ended before message_stop: %w", io.ErrUnexpectedEOF))
			return
		}
		yield(agent.Update{Response: toResponse(&acc)}, nil)
	}
}
