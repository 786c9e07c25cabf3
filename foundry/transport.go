package foundry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/loomthreads/loom/agent"
)

// Scope is the Entra ID scope of Foundry's data plane.
const Scope = "https://ai.azure.com/.default"

// tokens keeps the credential's token and asks for a new one a while
// before it expires (or when the service refuses it).
type tokens struct {
	cred azcore.TokenCredential
	mu   sync.Mutex
	tok  azcore.AccessToken
	now  func() time.Time
}

// refreshBefore is how long before its expiry a token is replaced.
const refreshBefore = 2 * time.Minute

// get returns the token to send. rejected names a token the service
// refused: a new one is asked for, unless another request already got one.
func (t *tokens) get(ctx context.Context, rejected string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fresh := rejected != "" && rejected == t.tok.Token
	now := t.now()
	due := t.tok.ExpiresOn.Add(-refreshBefore)
	if !t.tok.RefreshOn.IsZero() && t.tok.RefreshOn.Before(due) {
		due = t.tok.RefreshOn
	}
	if fresh || t.tok.Token == "" || !now.Before(due) {
		tok, err := t.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{Scope}})
		if err != nil {
			return "", fmt.Errorf("foundry: get an Entra ID token: %w", err)
		}
		t.tok = tok
	}
	return t.tok.Token, nil
}

// connection is what both clients are made of: where, as whom, how hard
// to insist. The environment fills what is empty, as the Azure tools name
// it.
type connection struct {
	endpoint, agent, agentEnv, apiVersion, apiKey string
	cred                                          azcore.TokenCredential
	http                                          *http.Client
	retries                                       int
}

// newTransport checks c and makes its transport: an API key, or Entra ID
// tokens (DefaultAzureCredential when no credential is given).
func newTransport(c connection) (*transport, string, error) {
	if c.endpoint == "" {
		c.endpoint = os.Getenv("AZURE_AI_PROJECT_ENDPOINT")
	}
	if c.agent == "" {
		c.agent = os.Getenv(c.agentEnv)
	}
	if c.apiKey == "" {
		c.apiKey = os.Getenv("AZURE_AI_API_KEY")
	}
	if c.endpoint == "" || c.agent == "" {
		return nil, "", fmt.Errorf("foundry: an endpoint (AZURE_AI_PROJECT_ENDPOINT) and an agent (%s) are required", c.agentEnv)
	}
	t := &transport{endpoint: strings.TrimRight(c.endpoint, "/"), apiVersion: c.apiVersion, apiKey: c.apiKey,
		http: c.http, retries: c.retries, sleep: sleepCtx}
	if t.http == nil {
		t.http = http.DefaultClient
	}
	switch {
	case t.retries == 0:
		t.retries = 3
	case t.retries < 0:
		t.retries = 0
	}
	if c.apiKey == "" {
		if c.cred == nil {
			// Entra ID as the Azure tools find it: the environment
			// (AZURE_CLIENT_ID…), a managed identity, the Azure CLI's login.
			cred, err := azidentity.NewDefaultAzureCredential(nil)
			if err != nil {
				return nil, "", fmt.Errorf("foundry: no API key (AZURE_AI_API_KEY) and no Entra ID credential: %w", err)
			}
			c.cred = cred
		}
		t.tokens = &tokens{cred: c.cred, now: time.Now}
	}
	return t, c.agent, nil
}

// transport sends requests to a Foundry endpoint: authenticated (an API
// key, or an Entra ID token), retried on 429 and 5xx as the service's
// Retry-After says, and with the service's request id in its errors.
type transport struct {
	endpoint, apiVersion string
	apiKey               string
	tokens               *tokens
	http                 *http.Client
	retries              int
	sleep                func(context.Context, time.Duration) error
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// do sends a request with a JSON body (nil for none) and decodes a JSON
// answer into out (nil to drop it). A stream is asked for with out of
// type **http.Response: the response is handed over, open.
func (t *transport) do(ctx context.Context, method, path string, query map[string]string, body, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	refreshed := false
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, t.endpoint+path, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		q := req.URL.Query()
		q.Set("api-version", t.apiVersion)
		for k, v := range query {
			if v != "" {
				q.Set(k, v)
			}
		}
		req.URL.RawQuery = q.Encode()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if err := t.authorize(ctx, req); err != nil {
			return err
		}
		resp, err := t.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if attempt < t.retries && method != http.MethodPost {
				if err := t.sleep(ctx, backoff(attempt)); err != nil {
					return err
				}
				continue
			}
			return &agent.ProviderError{Provider: "foundry", Message: "the request failed", Err: err}
		}
		if resp.StatusCode == http.StatusUnauthorized && t.tokens != nil && !refreshed {
			// The token may have been revoked or have expired early: once
			// more with a new one.
			resp.Body.Close()
			refreshed = true
			if _, err := t.tokens.get(ctx, strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")); err != nil {
				return err
			}
			attempt--
			continue
		}
		// A POST is sent again only when the service says it did not take
		// it (429): after a 5xx it may have made the run or message anyway.
		again := resp.StatusCode == http.StatusTooManyRequests || method != http.MethodPost && retryable(resp.StatusCode)
		if wait := retryAfter(resp.Header, attempt); again && attempt < t.retries && wait <= maxRetryAfter {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err := t.sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if resp.StatusCode >= 300 {
			defer resp.Body.Close()
			return providerError(resp)
		}
		if stream, ok := out.(**http.Response); ok {
			*stream = resp
			return nil
		}
		defer resp.Body.Close()
		if out == nil {
			io.Copy(io.Discard, resp.Body)
			return nil
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return &agent.ProviderError{Provider: "foundry", StatusCode: resp.StatusCode, Message: "an answer that is not the JSON expected" + requestID(resp.Header), Err: err}
		}
		return nil
	}
}

func (t *transport) authorize(ctx context.Context, req *http.Request) error {
	switch {
	case t.apiKey != "":
		req.Header.Set("api-key", t.apiKey)
	case t.tokens != nil:
		tok, err := t.tokens.get(ctx, "")
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return nil
}

// maxRetryAfter is the longest wait a service may ask for before a
// retry; asking for more gives up at once.
const maxRetryAfter = time.Minute

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusInternalServerError ||
		status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// retryAfter is how long the service asks to wait (retry-after-ms,
// Retry-After in seconds or as a date), or a jittered backoff.
func retryAfter(h http.Header, attempt int) time.Duration {
	if ms, err := strconv.Atoi(h.Get("retry-after-ms")); err == nil && ms >= 0 {
		return time.Duration(ms) * time.Millisecond
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
		if at, err := http.ParseTime(v); err == nil {
			return max(time.Until(at), 0)
		}
	}
	return backoff(attempt)
}

func backoff(attempt int) time.Duration {
	d := 500 * time.Millisecond << min(attempt, 5)
	return d/2 + rand.N(d/2)
}

// requestID names the service's request id, for errors.
func requestID(h http.Header) string {
	for _, k := range []string{"x-ms-request-id", "apim-request-id", "x-request-id"} {
		if v := h.Get(k); v != "" {
			return " (request " + v + ")"
		}
	}
	return ""
}

// providerError reads the service's error: {"error": {"code", "message"}}.
func providerError(resp *http.Response) error {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	json.Unmarshal(raw, &body)
	msg := body.Error.Message
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &agent.ProviderError{Provider: "foundry", StatusCode: resp.StatusCode, Type: body.Error.Code, Message: msg + requestID(resp.Header)}
}
