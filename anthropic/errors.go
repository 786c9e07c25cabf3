package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/loomthreads/loom/agent"
)

// provider is ProviderError.Provider for this package's errors.
const provider = "anthropic"

// errorStatus is the HTTP status Anthropic documents for each error type. An
// error event in the middle of a stream arrives on a 200 response; its
// ProviderError gets the status the same error would have had before the
// stream began, so that Temporary tells an overloaded stream (529) from a
// bad request (400).
var errorStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

// wrapError turns the SDK's API errors into *agent.ProviderError, keeps
// context errors as they are when ctx is done, and adds context to the rest.
func wrapError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		// The transport's own error for a request cut off by ctx says
		// less than ctx does.
		return ctxErr
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("anthropic: %w", err)
	}
	pe := &agent.ProviderError{
		Provider:   provider,
		StatusCode: apiErr.StatusCode,
		Type:       string(apiErr.Type()),
		Err:        err,
	}
	raw := apiErr.RawJSON()
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) == nil && body.Error.Message != "" {
		pe.Message = body.Error.Message
		if pe.Type == "" {
			pe.Type = body.Error.Type
		}
	} else {
		// A proxy's HTML page or plain text is still the best message
		// there is; a short piece of it is enough to tell what happened.
		pe.Message = truncate(strings.TrimSpace(raw), 200)
	}
	if pe.StatusCode < 400 {
		pe.StatusCode = errorStatus[pe.Type]
	}
	return pe
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
