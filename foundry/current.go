package foundry

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
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/openai/openai-go/v3/option"

	"github.com/loomthreads/loom/agent"
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

// NewCurrent returns a chat client for Foundry agents (current): the
// OpenAI Responses and Conversations APIs served under the project
// endpoint, with the agent named by reference in each request. It is
// package openai's Responses client (the official OpenAI Go SDK) in its
// Conversations mode — one linear conversation per loom thread, which
// loom refuses to fork or roll back — pointed at the project, with
// Foundry's authentication and the agent reference added to each request.
// It makes no request.
func NewCurrent(opts Options) (*loomopenai.Responses, error) {
	if opts.Endpoint == "" {
		opts.Endpoint = os.Getenv("AZURE_AI_PROJECT_ENDPOINT")
	}
	if opts.Agent == "" {
		opts.Agent = os.Getenv("AZURE_AI_AGENT_NAME")
	}
	if opts.APIKey == "" {
		opts.APIKey = os.Getenv("AZURE_AI_API_KEY")
	}
	if opts.Endpoint == "" || opts.Agent == "" {
		return nil, errors.New("foundry: an endpoint (AZURE_AI_PROJECT_ENDPOINT) and an agent (AZURE_AI_AGENT_NAME) are required")
	}
	if opts.APIVersion == "" {
		opts.APIVersion = "2025-11-15-preview"
	}
	var toks *tokens
	if opts.APIKey == "" {
		cred := opts.Credential
		if cred == nil {
			var err error
			if cred, err = azidentity.NewDefaultAzureCredential(nil); err != nil {
				return nil, fmt.Errorf("foundry: no API key (AZURE_AI_API_KEY) and no Entra ID credential: %w", err)
			}
		}
		toks = &tokens{cred: cred, now: time.Now}
	}
	retries := opts.MaxRetries
	if retries == 0 {
		retries = 3
	}
	return loomopenai.NewResponses(loomopenai.ResponsesOptions{Conversations: true, Options: loomopenai.Options{
		// The agent answers: the model is its. The SDK wants one, which
		// the middleware takes out again.
		Model:      opts.Agent,
		APIKey:     "unused", // the middleware authenticates
		BaseURL:    strings.TrimRight(opts.Endpoint, "/") + "/openai",
		HTTPClient: opts.HTTPClient,
		MaxRetries: retries,
		RequestOptions: []option.RequestOption{
			option.WithQuery("api-version", opts.APIVersion),
			option.WithMiddleware(foundryMiddleware(opts.Agent, opts.APIKey, toks)),
		},
	}}), nil
}

// foundryMiddleware authenticates each request (an api-key header, or a
// bearer token kept until shortly before it expires), and names the agent
// in each request for a response.
func foundryMiddleware(agentName, apiKey string, toks *tokens) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		req.Header.Del("Authorization")
		if apiKey != "" {
			req.Header.Set("api-key", apiKey)
		} else {
			tok, err := toks.get(req.Context(), false)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+tok)
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
				body["agent"] = map[string]string{"type": "agent_reference", "name": agentName}
				raw, _ = json.Marshal(body)
			}
			req.Body = io.NopCloser(bytes.NewReader(raw))
			req.ContentLength = int64(len(raw))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
		}
		resp, err := next(req)
		if err == nil && resp.StatusCode == http.StatusUnauthorized && toks != nil {
			// A token the service refuses: a new one, for the SDK's retry.
			toks.get(context.WithoutCancel(req.Context()), true)
		}
		return resp, err
	}
}

var _ agent.ChatClient = (*loomopenai.Responses)(nil)
