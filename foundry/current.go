package foundry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	loomopenai "github.com/loomthreads/loom/openai"
)

// Options configure a Current client. Endpoint and Agent are required (or
// their environment variables).
type Options struct {
	// Endpoint is the Foundry project endpoint,
	// https://<resource>.services.ai.azure.com/api/projects/<project>;
	// "" means $AZURE_AI_PROJECT_ENDPOINT.
	Endpoint string
	// Agent names the agent that answers, by reference; "" means
	// $AZURE_AI_AGENT_NAME.
	Agent string
	// APIVersion is sent as api-version; "" means "2025-11-15-preview".
	APIVersion string
	// APIKey authenticates with an api-key header; "" means
	// $AZURE_AI_API_KEY, and then Credential.
	APIKey string
	// Credential gives Entra ID tokens for Scope; nil (with no API key)
	// means azidentity's DefaultAzureCredential.
	Credential azcore.TokenCredential
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// MaxRetries is how many times a request refused with 429 or 5xx is
	// sent again (the OpenAI SDK honours Retry-After); 0 means 3, negative
	// none.
	MaxRetries int
}

// Current is a chat client for Foundry agents (current): the OpenAI
// Responses and Conversations APIs served under the project endpoint, with
// the agent named by reference in each request. Its chat is package
// openai's Responses client (the official OpenAI Go SDK) in its
// Conversations mode — one linear conversation per loom thread, which loom
// refuses to fork or roll back — pointed at the project, with Foundry's
// authentication and the agent reference added to each request by its HTTP
// transport; Messages and DeleteConversation read and delete the
// service's conversations.
type Current struct {
	*loomopenai.Responses
	t *transport
}

// NewCurrent returns a client of opts. It makes no request.
func NewCurrent(opts Options) (*Current, error) {
	if opts.APIVersion == "" {
		opts.APIVersion = "2025-11-15-preview"
	}
	t, agentName, err := newTransport(connection{endpoint: opts.Endpoint, agent: opts.Agent, agentEnv: "AZURE_AI_AGENT_NAME",
		apiVersion: opts.APIVersion, apiKey: opts.APIKey, cred: opts.Credential, http: opts.HTTPClient, retries: opts.MaxRetries})
	if err != nil {
		return nil, err
	}
	opts.Agent = agentName
	t.endpoint += "/openai"
	base := t.http.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := *t.http
	hc.Transport = &foundryTransport{base: base, t: t, agent: opts.Agent}
	return &Current{t: t, Responses: loomopenai.NewResponses(loomopenai.ResponsesOptions{Conversations: true, Options: loomopenai.Options{
		// The agent answers: the model is its. The client wants one, which
		// the transport takes out again.
		Model:      opts.Agent,
		APIKey:     "unused", // the transport authenticates
		BaseURL:    t.endpoint,
		HTTPClient: &hc,
		MaxRetries: sdkRetries(t.retries),
	}})}, nil
}

// sdkRetries says retries as package openai reads them: 0 is its default
// there, and none is negative.
func sdkRetries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// foundryTransport makes the OpenAI client's requests Foundry's: the
// api-version parameter, the project's authentication (an api-key header,
// or a bearer token kept until shortly before it expires), and the agent
// named by reference, with no model, in each request for a response.
type foundryTransport struct {
	base  http.RoundTripper
	t     *transport
	agent string
}

func (f *foundryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	q := req.URL.Query()
	q.Set("api-version", f.t.apiVersion)
	req.URL.RawQuery = q.Encode()
	req.Header.Del("Authorization")
	if err := f.t.authorize(req.Context(), req); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, whatever happens
		}
		return nil, err
	}
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/responses") && req.Body != nil {
		raw, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err == nil {
			delete(body, "model")
			body["agent"] = map[string]string{"type": "agent_reference", "name": f.agent}
			raw, _ = json.Marshal(body)
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		req.ContentLength = int64(len(raw))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	}
	resp, err := f.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && f.t.tokens != nil {
		// A token the service refuses: the next request gets a new one.
		f.t.tokens.get(context.WithoutCancel(req.Context()), strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
	}
	return resp, err
}

// Messages yields the messages of a conversation of the service, oldest
// first, a page at a time (its cursors: after, has_more): what the
// conversation holds, whoever wrote it.
func (c *Current) Messages(ctx context.Context, conversationID string, opts MessagesOptions) iter.Seq2[message.Message, error] {
	type item struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	path := "/conversations/" + conversationID + "/items"
	return func(yield func(message.Message, error) bool) {
		for it, err := range pages(ctx, c.t, path, nil, opts, func(it item) string { return it.ID }) {
			if err != nil {
				yield(message.Message{}, err)
				return
			}
			if it.Type != "message" {
				continue
			}
			role := message.RoleAssistant
			if it.Role == "user" {
				role = message.RoleUser
			}
			m := message.New(role)
			for _, p := range it.Content {
				if p.Text != "" {
					m.Contents = append(m.Contents, message.Text{Text: p.Text})
				}
			}
			m.Metadata = map[string]any{"foundry.item_id": it.ID}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// DeleteConversation deletes a conversation of the service (not the loom
// thread).
func (c *Current) DeleteConversation(ctx context.Context, id string) error {
	return c.t.do(ctx, "DELETE", "/conversations/"+id, nil, nil, nil)
}

var _ agent.ChatClient = (*Current)(nil)
