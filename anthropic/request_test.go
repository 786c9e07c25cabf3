package anthropic

import (
	"errors"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// okText is the smallest valid answer of the Messages API.
const okText = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`

func TestRequestHeadersCarryKeyAndVersion(t *testing.T) {
	c, f := newFake(t, Options{APIKey: "sk-ant-test"}, reply(200, okText))
	if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	r := f.Requests()[0]
	if r.Path != "/v1/messages" {
		t.Errorf("path = %q, want /v1/messages", r.Path)
	}
	if got := r.Header.Get("X-Api-Key"); got != "sk-ant-test" {
		t.Errorf("x-api-key = %q", got)
	}
	if got := r.Header.Get("Anthropic-Version"); got != "2023-06-01" {
		t.Errorf("anthropic-version = %q", got)
	}
}

func TestRequestKeyAndBaseURLFromEnvironment(t *testing.T) {
	_, f := newFake(t, Options{}, reply(200, okText))
	// newFake sets BaseURL; to read it from the environment, build the
	// client again without it.
	srvURL := f.url
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", srvURL)
	c := New(Options{Model: "claude-test", MaxRetries: -1})
	if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests()[0].Header.Get("X-Api-Key"); got != "sk-from-env" {
		t.Errorf("x-api-key = %q, want the environment's", got)
	}
}

func TestRequestOptionsMapped(t *testing.T) {
	c, f := newFake(t, Options{Model: "claude-default", MaxTokens: 1000}, reply(200, okText))
	temp := 0.25
	opts := &agent.ChatOptions{
		Model:        "claude-override",
		Instructions: "You are a weather bot.",
		Temperature:  &temp,
		Metadata:     map[string]string{"user_id": "u-42", "trace": "ignored"},
	}
	msgs := []message.Message{message.System("Be brief."), message.User("hi")}
	if _, err := c.Response(t.Context(), msgs, opts); err != nil {
		t.Fatal(err)
	}
	body := f.lastBody(t)
	jsonEqual(t, "model", body["model"], `"claude-override"`)
	jsonEqual(t, "max_tokens", body["max_tokens"], `1000`)
	jsonEqual(t, "temperature", body["temperature"], `0.25`)
	jsonEqual(t, "metadata", body["metadata"], `{"user_id":"u-42"}`)
	jsonEqual(t, "system", body["system"], `[{"type":"text","text":"You are a weather bot."},{"type":"text","text":"Be brief."}]`)
	for _, k := range []string{"tools", "tool_choice", "output_config", "stream"} {
		if _, ok := body[k]; ok {
			t.Errorf("body has %q, which nothing asked for", k)
		}
	}
}

func TestRequestMaxTokensDefaults(t *testing.T) {
	for _, tc := range []struct {
		name       string
		client, in int
		want       string
	}{
		{"package default", 0, 0, "4096"},
		{"client default", 2000, 0, "2000"},
		{"request", 2000, 300, "300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f := newFake(t, Options{MaxTokens: tc.client}, reply(200, okText))
			if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, &agent.ChatOptions{MaxTokens: tc.in}); err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, "max_tokens", f.lastBody(t)["max_tokens"], tc.want)
		})
	}
}

func TestRequestTurnsAlternateWithResultsMerged(t *testing.T) {
	c, f := newFake(t, Options{}, reply(200, okText))
	msgs := []message.Message{
		message.System("Be brief."),
		message.User("Weather in Paris and London?"),
		message.New(message.RoleAssistant,
			message.Reasoning{Text: "Two cities.", Protected: "sig-1"},
			message.Reasoning{Protected: "redacted_thinking:opaque=="},
			message.Text{Text: "Checking."},
			message.FunctionCall{CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`},
			message.FunctionCall{CallID: "call_2", Name: "weather", Arguments: `{"city":"London"}`},
		),
		message.ToolResult("call_1", "21°C"),
		message.ToolError("call_2", "service down"),
		message.User("Thanks. And Rome?"),
		message.System("Answer in French."),
		message.New(message.RoleAssistant, message.Text{Text: "Je regarde."}, message.Usage{InputTokens: 9}),
		message.New(message.RoleAssistant, message.FunctionCall{CallID: "call_3", Name: "weather", Arguments: `{"city":`}),
		// A user message before the result: the result still goes first.
		message.New(message.RoleUser, message.Text{Text: "(hurry)"}),
		message.ToolResult("call_3", ""),
		message.New(message.RoleUser, message.Error{Message: "not sent"}),
	}
	if _, err := c.Response(t.Context(), msgs, nil); err != nil {
		t.Fatal(err)
	}
	body := f.lastBody(t)
	jsonEqual(t, "system", body["system"], `[{"type":"text","text":"Be brief."},{"type":"text","text":"Answer in French."}]`)
	jsonEqual(t, "messages", body["messages"], `[
		{"role":"user","content":[{"type":"text","text":"Weather in Paris and London?"}]},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"Two cities.","signature":"sig-1"},
			{"type":"redacted_thinking","data":"opaque=="},
			{"type":"text","text":"Checking."},
			{"type":"tool_use","id":"call_1","name":"weather","input":{"city":"Paris"}},
			{"type":"tool_use","id":"call_2","name":"weather","input":{"city":"London"}}
		]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"21°C"}]},
			{"type":"tool_result","tool_use_id":"call_2","is_error":true,"content":[{"type":"text","text":"service down"}]},
			{"type":"text","text":"Thanks. And Rome?"}
		]},
		{"role":"assistant","content":[
			{"type":"text","text":"Je regarde."},
			{"type":"tool_use","id":"call_3","name":"weather","input":{}}
		]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"call_3"},
			{"type":"text","text":"(hurry)"}
		]}
	]`)
}

func TestRequestToolsAndChoice(t *testing.T) {
	tools := []agent.ToolSpec{
		{Name: "weather", Description: "Current weather of a city.", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "now"},
		{Name: "untyped", Parameters: []byte(`{"properties":{"x":{"type":"integer"}}}`)},
	}
	wantTools := `[
		{"name":"weather","description":"Current weather of a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
		{"name":"now","input_schema":{"type":"object"}},
		{"name":"untyped","input_schema":{"type":"object","properties":{"x":{"type":"integer"}}}}
	]`
	for _, tc := range []struct {
		choice agent.ToolChoice
		want   string // "" for no tool_choice
	}{
		{"", ""},
		{agent.ToolAuto, `{"type":"auto"}`},
		{agent.ToolNone, `{"type":"none"}`},
		{agent.ToolRequired, `{"type":"any"}`},
		{"weather", `{"type":"tool","name":"weather"}`},
	} {
		t.Run(string(tc.choice), func(t *testing.T) {
			c, f := newFake(t, Options{}, reply(200, okText))
			opts := &agent.ChatOptions{Tools: tools, ToolChoice: tc.choice}
			if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, opts); err != nil {
				t.Fatal(err)
			}
			body := f.lastBody(t)
			jsonEqual(t, "tools", body["tools"], wantTools)
			got, ok := body["tool_choice"]
			switch {
			case tc.want == "" && ok:
				t.Errorf("tool_choice = %v, want none sent", got)
			case tc.want != "":
				jsonEqual(t, "tool_choice", got, tc.want)
			}
		})
	}
}

func TestRequestToolChoiceWithoutToolsNotSent(t *testing.T) {
	c, f := newFake(t, Options{}, reply(200, okText))
	opts := &agent.ChatOptions{ToolChoice: agent.ToolRequired}
	if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, opts); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.lastBody(t)["tool_choice"]; ok {
		t.Errorf("tool_choice = %v without tools", got)
	}
}

func TestRequestDataBlocks(t *testing.T) {
	png := []byte("\x89PNG fake")
	c, f := newFake(t, Options{}, reply(200, okText))
	msgs := []message.Message{message.New(message.RoleUser,
		message.Text{Text: "What is in these?"},
		message.Data{MediaType: "image/png", Data: png},
		message.Data{MediaType: "image/jpeg", URI: "https://example.com/cat.jpg"},
		message.Data{URI: "https://example.com/dog.webp"},
		message.Data{URI: "data:image/gif;base64,R0lGODlh"},
		message.Data{MediaType: "application/pdf", Data: []byte("%PDF-1.7"), Name: "report.pdf"},
		message.Data{MediaType: "application/pdf", URI: "https://example.com/paper.pdf"},
	)}
	if _, err := c.Response(t.Context(), msgs, nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "messages", f.lastBody(t)["messages"], `[{"role":"user","content":[
		{"type":"text","text":"What is in these?"},
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORyBmYWtl"}},
		{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
		{"type":"image","source":{"type":"url","url":"https://example.com/dog.webp"}},
		{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lGODlh"}},
		{"type":"document","title":"report.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjc="}},
		{"type":"document","source":{"type":"url","url":"https://example.com/paper.pdf"}}
	]}]`)
}

func TestRequestArgumentsNotAnObjectSentAsEmpty(t *testing.T) {
	for _, args := range []string{"", "not json", `["a"]`, `"x"`, `{"open":`} {
		t.Run(args, func(t *testing.T) {
			c, f := newFake(t, Options{}, reply(200, okText))
			msgs := []message.Message{
				message.User("go"),
				message.ToolCall("call_1", "run", args),
				message.ToolResult("call_1", "bad arguments"),
			}
			if _, err := c.Response(t.Context(), msgs, nil); err != nil {
				t.Fatal(err)
			}
			msgsBody := f.lastBody(t)["messages"].([]any)
			call := msgsBody[1].(map[string]any)["content"].([]any)[0]
			jsonEqual(t, "tool_use", call, `{"type":"tool_use","id":"call_1","name":"run","input":{}}`)
		})
	}
}

func TestRequestResponseFormatUsesStructuredOutput(t *testing.T) {
	c, f := newFake(t, Options{}, reply(200, okText))
	schema := `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}},"required":["zeta","alpha"],"additionalProperties":false}`
	opts := &agent.ChatOptions{ResponseFormat: &agent.ResponseFormat{Name: "answer", Schema: []byte(schema), Strict: true}}
	if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, opts); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "output_config", f.lastBody(t)["output_config"], `{"format":{"type":"json_schema","schema":`+schema+`}}`)
	// The model writes the members in the schema's order, so it must
	// survive.
	if raw := string(f.Requests()[0].Body); !strings.Contains(raw, `"zeta":{"type":"string"},"alpha"`) {
		t.Errorf("schema members reordered: %s", raw)
	}
}

// TestRequestRefusedBeforeSending checks every request that cannot be made:
// it fails with the right error and nothing reaches the server.
func TestRequestRefusedBeforeSending(t *testing.T) {
	yes := true
	user := []message.Message{message.User("hi")}
	for _, tc := range []struct {
		name   string
		model  string
		msgs   []message.Message
		opts   *agent.ChatOptions
		target error
	}{
		{"conversation id", "m", user, &agent.ChatOptions{ConversationID: "conv_1"}, thread.ErrUnsupported},
		{"store", "m", user, &agent.ChatOptions{Store: &yes}, thread.ErrUnsupported},
		{"no model", "", user, nil, thread.ErrInvalid},
		{"schema-less JSON", "m", user, &agent.ChatOptions{ResponseFormat: &agent.ResponseFormat{}}, thread.ErrUnsupported},
		{"schema not an object", "m", user, &agent.ChatOptions{ResponseFormat: &agent.ResponseFormat{Schema: []byte(`true`)}}, thread.ErrInvalid},
		{"audio", "m", []message.Message{message.New(message.RoleUser, message.Data{MediaType: "audio/wav", Data: []byte("RIFF")})}, nil, thread.ErrInvalid},
		{"file URI", "m", []message.Message{message.New(message.RoleUser, message.Data{MediaType: "image/png", URI: "file:///etc/passwd"})}, nil, thread.ErrInvalid},
		{"unknown role", "m", []message.Message{message.New("developer", message.Text{Text: "x"})}, nil, thread.ErrInvalid},
		{"call from user", "m", []message.Message{message.New(message.RoleUser, message.FunctionCall{CallID: "c", Name: "n"})}, nil, thread.ErrInvalid},
		{"result from assistant", "m", []message.Message{message.New(message.RoleAssistant, message.FunctionResult{CallID: "c"})}, nil, thread.ErrInvalid},
		{"tool schema not an object", "m", user, &agent.ChatOptions{Tools: []agent.ToolSpec{{Name: "t", Parameters: []byte(`{"type":"string"}`)}}}, thread.ErrInvalid},
		{"choice names no tool", "m", user, &agent.ChatOptions{Tools: []agent.ToolSpec{{Name: "t"}}, ToolChoice: "other"}, thread.ErrInvalid},
		{"negative max tokens", "m", user, &agent.ChatOptions{MaxTokens: -1}, thread.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f := newFake(t, Options{}, reply(200, okText))
			c.model = tc.model
			if _, err := c.Response(t.Context(), tc.msgs, tc.opts); !errors.Is(err, tc.target) {
				t.Errorf("Response: err = %v, want %v", err, tc.target)
			}
			_, _, err := collect(t, c.Stream(t.Context(), tc.msgs, tc.opts))
			if !errors.Is(err, tc.target) {
				t.Errorf("Stream: err = %v, want %v", err, tc.target)
			}
			if n := len(f.Requests()); n != 0 {
				t.Errorf("%d requests sent, want 0", n)
			}
		})
	}
}

func TestRequestServiceThreadsRefusedWithAgentError(t *testing.T) {
	c, f := newFake(t, Options{}, reply(200, okText))
	_, err := c.Response(t.Context(), []message.Message{message.User("hi")}, &agent.ChatOptions{ConversationID: "conv_1"})
	if !errors.Is(err, agent.ErrServiceThreads) || !errors.Is(err, thread.ErrUnsupported) {
		t.Errorf("err = %v, want agent.ErrServiceThreads", err)
	}
	no := false
	if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, &agent.ChatOptions{Store: &no}); err != nil {
		t.Errorf("Store=false: %v", err)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (the one with Store=false)", n)
	}
}
