package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// toolsResponse is what testdata/tools.json and testdata/tools.sse both
// come to.
func toolsResponse() *agent.ChatResponse {
	return &agent.ChatResponse{
		Messages: []message.Message{{
			Role: message.RoleAssistant,
			Contents: []message.Content{
				message.Reasoning{Text: "The user wants the weather in two cities.", Protected: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
				message.Reasoning{Protected: "redacted_thinking:EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
				message.Text{Text: "Let me check both cities."},
				message.FunctionCall{CallID: "toolu_01A09q90qw90lq917835lq9", Name: "weather", Arguments: `{"city": "Paris"}`},
				message.FunctionCall{CallID: "toolu_01B7tWbbrH2yXzFC3zkDcE5w", Name: "weather", Arguments: `{"city": "London"}`},
			},
		}},
		ResponseID:   "msg_01XFDUDYJgAACzvnptvVoYEL",
		Model:        "claude-sonnet-4-5-20250929",
		Usage:        message.Usage{InputTokens: 125, OutputTokens: 89, TotalTokens: 214, CachedInputTokens: 100},
		FinishReason: agent.FinishToolCalls,
	}
}

func TestResponseMapsTextThinkingToolUseAndUsage(t *testing.T) {
	c, _ := newFake(t, Options{}, replyFile(t, "tools.json"))
	resp, err := c.Response(t.Context(), []message.Message{message.User("Weather in Paris and London?")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(toolsResponse(), resp); diff != "" {
		t.Errorf("response mismatch (-want +got):\n%s", diff)
	}
	if resp.ConversationID != "" {
		t.Errorf("ConversationID = %q, want none", resp.ConversationID)
	}
}

// TestResponseSentBackUnchanged checks that what a response holds — thinking
// with its signature, redacted thinking, tool calls — is sent back as
// Anthropic sent it.
func TestResponseSentBackUnchanged(t *testing.T) {
	c, f := newFake(t, Options{}, replyFile(t, "tools.json"))
	msgs := []message.Message{message.User("Weather in Paris and London?")}
	resp, err := c.Response(t.Context(), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, resp.Messages...)
	msgs = append(msgs,
		message.ToolResult("toolu_01A09q90qw90lq917835lq9", "21°C"),
		message.ToolResult("toolu_01B7tWbbrH2yXzFC3zkDcE5w", "14°C"),
	)
	if _, err := c.Response(t.Context(), msgs, nil); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(f.Requests()[1].Body, &sent); err != nil {
		t.Fatal(err)
	}
	var original struct {
		Content []any `json:"content"`
	}
	if err := json.Unmarshal(testdata(t, "tools.json"), &original); err != nil {
		t.Fatal(err)
	}
	var assistant struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	if err := json.Unmarshal(sent.Messages[1], &assistant); err != nil {
		t.Fatal(err)
	}
	if assistant.Role != "assistant" {
		t.Fatalf("second turn is %q", assistant.Role)
	}
	if diff := cmp.Diff(original.Content, assistant.Content); diff != "" {
		t.Errorf("assistant turn differs from the response's content (-got from API +sent):\n%s", diff)
	}
	if len(sent.Messages) != 3 {
		t.Errorf("%d turns, want 3 (both results in one user turn)", len(sent.Messages))
	}
}

func TestResponseFinishReasons(t *testing.T) {
	for _, tc := range []struct {
		stop string
		want agent.FinishReason
	}{
		{"end_turn", agent.FinishStop},
		{"stop_sequence", agent.FinishStop},
		{"max_tokens", agent.FinishLength},
		{"model_context_window_exceeded", agent.FinishLength},
		{"tool_use", agent.FinishToolCalls},
		{"refusal", agent.FinishContentFilter},
		{"pause_turn", "pause_turn"},
	} {
		t.Run(tc.stop, func(t *testing.T) {
			body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":"` + tc.stop + `","usage":{"input_tokens":1,"output_tokens":1}}`
			c, _ := newFake(t, Options{}, reply(200, body))
			resp, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != tc.want {
				t.Errorf("FinishReason = %q, want %q", resp.FinishReason, tc.want)
			}
		})
	}
}

func TestResponseUsageCountsCacheAsInput(t *testing.T) {
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",
		"usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":3000,"output_tokens":40,"output_tokens_details":{"thinking_tokens":25}}}`
	c, _ := newFake(t, Options{}, reply(200, body))
	resp, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := message.Usage{InputTokens: 3210, OutputTokens: 40, TotalTokens: 3250, CachedInputTokens: 3000, ReasoningTokens: 25}
	if diff := cmp.Diff(want, resp.Usage); diff != "" {
		t.Errorf("usage mismatch (-want +got):\n%s", diff)
	}
}

func TestResponseUnknownBlocksKept(t *testing.T) {
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1},
		"content":[
			{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"loom"}},
			{"type":"text","text":""},
			{"type":"text","text":"Found it."}
		]}`
	c, f := newFake(t, Options{}, reply(200, body))
	resp, err := c.Response(t.Context(), []message.Message{message.User("search")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	contents := resp.Messages[0].Contents
	if len(contents) != 2 {
		t.Fatalf("contents = %#v, want the server tool block and the text", contents)
	}
	u, ok := contents[0].(message.Unknown)
	if !ok || u.Type() != "anthropic.server_tool_use" {
		t.Fatalf("first content = %#v, want an Unknown of type anthropic.server_tool_use", contents[0])
	}
	jsonEqual(t, "unknown block", decode(t, u.Raw), `{"type":"anthropic.server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"loom"}}`)
	if err := resp.Messages[0].Validate(); err != nil {
		t.Errorf("message does not validate: %v", err)
	}

	// Sent back, the Unknown is left out.
	msgs := append([]message.Message{message.User("search")}, resp.Messages...)
	if _, err := c.Response(t.Context(), append(msgs, message.User("thanks")), nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "messages", f.lastBody(t)["messages"], `[
		{"role":"user","content":[{"type":"text","text":"search"}]},
		{"role":"assistant","content":[{"type":"text","text":"Found it."}]},
		{"role":"user","content":[{"type":"text","text":"thanks"}]}
	]`)
}

// TestResponseLargeMaxTokensStreams checks that a request the SDK will not
// send without streaming (it could take over ten minutes) is streamed.
func TestResponseLargeMaxTokensStreams(t *testing.T) {
	c, f := newFake(t, Options{MaxTokens: 64000}, replyFile(t, "tools.sse"))
	resp, err := c.Response(t.Context(), []message.Message{message.User("Weather in Paris and London?")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(toolsResponse(), resp); diff != "" {
		t.Errorf("response mismatch (-want +got):\n%s", diff)
	}
	jsonEqual(t, "stream", f.lastBody(t)["stream"], `true`)
}

func decode(tb testing.TB, b []byte) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatal(err)
	}
	return v
}
