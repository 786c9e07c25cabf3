package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/agent"
)

// TestReviewToolErrorCodesMatchTheHTTPTable checks that a tool error's code
// is the one the HTTP API's error table (httpapi/errors.go) gives the same
// error: STYLE says one table maps errors to HTTP statuses and MCP errors,
// but mcpserver keeps a shorter table of its own, so a deadline is
// "canceled" here and "timeout" over HTTP, and the agent's errors, which
// tools added with AddTool/Options.AddTools return, are "internal" or
// "invalid" here and busy, approval_required or rate_limited over HTTP.
func TestReviewToolErrorCodesMatchTheHTTPTable(t *testing.T) {
	errs := map[string]error{
		"deadline":  fmt.Errorf("store read: %w", context.DeadlineExceeded),
		"busy":      fmt.Errorf("run on th: %w", agent.ErrBusy),
		"approval":  fmt.Errorf("run on th: %w", agent.ErrApprovalRequired),
		"ratelimit": fmt.Errorf("chat: %w", &agent.ProviderError{Provider: "openai", StatusCode: 429, Type: "rate_limit_error"}),
	}
	// The codes the HTTP API gives these errors (apierr.Classify).
	httpCode := map[string]string{
		"deadline":  "timeout",
		"busy":      "busy",
		"approval":  "approval_required",
		"ratelimit": "rate_limited",
	}
	type in struct {
		Mode string `json:"mode" jsonschema:"which error"`
	}
	type out struct {
		OK bool `json:"ok"`
	}
	addTools := func(s *mcp.Server) {
		AddTool(s, &mcp.Tool{Name: "fail"}, slog.New(slog.DiscardHandler), func(_ context.Context, in in) (out, error) {
			return out{}, errs[in.Mode]
		})
	}
	cs := connectPipes(t, t.Context(), newDB(t), &Options{Logger: slog.New(slog.DiscardHandler), AddTools: addTools})
	for mode, want := range httpCode {
		got := fails(t, cs, "fail", map[string]any{"mode": mode})
		code, _, _ := strings.Cut(got, ":")
		if code != want {
			t.Errorf("%s: MCP code %q (%q), HTTP code %q", mode, code, got, want)
		}
	}
}
