package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/option"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// conversation has every kind of content the converters handle.
func conversation() []message.Message {
	return []message.Message{
		{Role: message.RoleUser, AuthorName: "ann", Contents: []message.Content{
			message.Text{Text: "What is in the picture, and the weather in Paris?"},
			message.Data{MediaType: "image/png", Data: []byte("PNG")},
			message.Data{URI: "https://example.com/cat.jpg"},
		}},
		{Role: message.RoleAssistant, Contents: []message.Content{
			message.Reasoning{Text: "The user wants two things.", Protected: "sig"},
			message.Text{Text: "A cat. Let me check the weather."},
			message.FunctionCall{CallID: "call_a", Name: "weather", Arguments: `{"city":"Paris"}`},
			message.FunctionCall{CallID: "call_b", Name: "clock"},
			message.Usage{InputTokens: 1},
		}},
		message.ToolResult("call_a", `{"temp_c":21}`),
		message.ToolError("call_b", "clock unavailable"),
		{Role: message.RoleUser, Contents: []message.Content{
			message.Text{Text: "Thanks."},
			message.Error{Message: "not sent"},
			message.Unknown{Raw: []byte(`{"type":"future","x":1}`)},
		}},
	}
}

// fullOptions set every option the clients map.
func fullOptions() *agent.ChatOptions {
	return &agent.ChatOptions{
		Model:        "gpt-override",
		Instructions: "Be brief.",
		Tools: []agent.ToolSpec{
			{Name: "weather", Description: "Weather in a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "clock"},
		},
		ToolChoice:     "weather",
		Temperature:    ptr(0.2),
		MaxTokens:      100,
		ResponseFormat: &agent.ResponseFormat{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"z":{},"a":{}}}`), Strict: true},
		Metadata:       map[string]string{"team": "loom"},
	}
}

func TestChatRequestBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	chat := NewChat(srv.options())
	if _, err := chat.Response(t.Context(), conversation(), fullOptions()); err != nil {
		t.Fatal(err)
	}
	req := srv.last(t)
	if req.Method != "POST" || req.Path != "/v1/chat/completions" {
		t.Errorf("request = %s %s", req.Method, req.Path)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	jsonEqual(t, req.Body, `{
		"model": "gpt-override",
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "user", "name": "ann", "content": [
				{"type": "text", "text": "What is in the picture, and the weather in Paris?"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,UE5H"}},
				{"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}
			]},
			{"role": "assistant", "content": "A cat. Let me check the weather.", "tool_calls": [
				{"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
				{"id": "call_b", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
			]},
			{"role": "tool", "tool_call_id": "call_a", "content": "{\"temp_c\":21}"},
			{"role": "tool", "tool_call_id": "call_b", "content": "Error: clock unavailable"},
			{"role": "user", "content": "Thanks."}
		],
		"tools": [
			{"type": "function", "function": {"name": "weather", "description": "Weather in a city.",
				"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
			{"type": "function", "function": {"name": "clock"}}
		],
		"tool_choice": {"type": "function", "function": {"name": "weather"}},
		"temperature": 0.2,
		"max_completion_tokens": 100,
		"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true,
			"schema": {"type": "object", "properties": {"z": {}, "a": {}}}}}
	}`)
	// Schemas go out as written: models read properties in order.
	if !strings.Contains(string(req.Raw), `"properties":{"z":{},"a":{}}`) {
		t.Errorf("schema reordered: %s", req.Raw)
	}
}

func TestChatToolChoiceAndFormat(t *testing.T) {
	tests := []struct {
		name       string
		opts       agent.ChatOptions
		key, value string // a body member and its JSON
	}{
		{"auto", agent.ChatOptions{ToolChoice: agent.ToolAuto}, "tool_choice", `"auto"`},
		{"none", agent.ChatOptions{ToolChoice: agent.ToolNone}, "tool_choice", `"none"`},
		{"required", agent.ChatOptions{ToolChoice: agent.ToolRequired}, "tool_choice", `"required"`},
		{"json object", agent.ChatOptions{ResponseFormat: &agent.ResponseFormat{}}, "response_format", `{"type":"json_object"}`},
		{"unnamed schema", agent.ChatOptions{ResponseFormat: &agent.ResponseFormat{Schema: json.RawMessage(`{"type":"object"}`)}},
			"response_format", `{"type":"json_schema","json_schema":{"name":"response","strict":false,"schema":{"type":"object"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
			})
			if _, err := NewChat(srv.options()).Response(t.Context(), []message.Message{message.User("hi")}, &tt.opts); err != nil {
				t.Fatal(err)
			}
			var want any
			json.Unmarshal([]byte(tt.value), &want)
			if d := cmp.Diff(want, srv.last(t).Body[tt.key]); d != "" {
				t.Errorf("%s (-want +got):\n%s", tt.key, d)
			}
		})
	}
}

// wantChatTools is chat_tools.json (and chat_tools.sse) as a response.
func wantChatTools() *agent.ChatResponse {
	return &agent.ChatResponse{
		Messages: []message.Message{{Role: message.RoleAssistant, Contents: []message.Content{
			message.Text{Text: "Let me check both cities."},
			message.FunctionCall{CallID: "call_a", Name: "weather", Arguments: `{"city":"Paris"}`},
			message.FunctionCall{CallID: "call_b", Name: "weather", Arguments: `{"city":"Oslo"}`},
		}}},
		ResponseID:   "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
		Model:        "gpt-4o-mini-2024-07-18",
		Usage:        message.Usage{InputTokens: 50, OutputTokens: 30, TotalTokens: 80, CachedInputTokens: 10, ReasoningTokens: 5},
		FinishReason: agent.FinishToolCalls,
	}
}

func TestChatResponseMapped(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	got, err := NewChat(srv.options()).Response(t.Context(), []message.Message{message.User("weather?")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantChatTools(), got); d != "" {
		t.Errorf("response (-want +got):\n%s", d)
	}
	for _, m := range got.Messages {
		if err := m.Validate(); err != nil {
			t.Errorf("message does not validate: %v", err)
		}
	}
}

func TestChatFinishReasons(t *testing.T) {
	tests := []struct {
		reason string
		calls  bool
		want   agent.FinishReason
	}{
		{"stop", false, agent.FinishStop},
		{"length", false, agent.FinishLength},
		{"content_filter", false, agent.FinishContentFilter},
		{"tool_calls", true, agent.FinishToolCalls},
		{"stop", true, agent.FinishToolCalls}, // compatible servers that say stop
		{"length", true, agent.FinishLength},
		{"", false, agent.FinishStop},
	}
	for _, tt := range tests {
		calls := ""
		if tt.calls {
			calls = `,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]`
		}
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			writeJSON(w, 200, `{"id":"x","model":"m","choices":[{"index":0,"finish_reason":"`+tt.reason+`","message":{"role":"assistant","content":"hi"`+calls+`}}]}`)
		})
		got, err := NewChat(srv.options()).Response(t.Context(), []message.Message{message.User("hi")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.FinishReason != tt.want {
			t.Errorf("finish %q with calls %v = %q, want %q", tt.reason, tt.calls, got.FinishReason, tt.want)
		}
	}
}

func TestChatStreamReplaysDeltas(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSSE(w, sseEvents(testdata(t, "chat_tools.sse")))
	})
	ups, err := collect(NewChat(srv.options()).Stream(t.Context(), []message.Message{message.User("weather?")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	usage := wantChatTools().Usage
	want := []agent.Update{
		{Text: "Let me"},
		{Text: " check both cities."},
		{Call: &agent.CallDelta{Index: 0, CallID: "call_a", Name: "weather"}},
		{Call: &agent.CallDelta{Index: 0, Arguments: `{"city":`}},
		{Call: &agent.CallDelta{Index: 0, Arguments: `"Paris"}`}},
		{Call: &agent.CallDelta{Index: 1, CallID: "call_b", Name: "weather"}},
		{Call: &agent.CallDelta{Index: 1, Arguments: `{"city":"Oslo"}`}},
		{Usage: &usage},
	}
	if d := cmp.Diff(want, deltas(ups)); d != "" {
		t.Errorf("deltas (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantChatTools(), final(t, ups)); d != "" {
		t.Errorf("final response differs from the non-streamed one (-want +got):\n%s", d)
	}
	body := srv.last(t).Body
	if body["stream"] != true {
		t.Errorf("stream = %v", body["stream"])
	}
	if d := cmp.Diff(map[string]any{"include_usage": true}, body["stream_options"]); d != "" {
		t.Errorf("stream_options (-want +got):\n%s", d)
	}
}

func TestChatStreamCutMidway(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		cutAfter(w, sseEvents(testdata(t, "chat_tools.sse")), 3)
	})
	ups, err := collect(NewChat(srv.options()).Stream(t.Context(), []message.Message{message.User("weather?")}, nil))
	if err == nil {
		t.Fatal("a cut stream gave no error")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want an unexpected EOF", err)
	}
	want := []agent.Update{{Text: "Let me"}, {Text: " check both cities."}}
	if d := cmp.Diff(want, ups); d != "" {
		t.Errorf("updates before the error (-want +got):\n%s", d)
	}
}

func TestChatStreamEndsWithoutDone(t *testing.T) {
	events := sseEvents(testdata(t, "chat_tools.sse"))
	tests := []struct {
		name   string
		events []string
		ok     bool
	}{
		// Some compatible servers end after the finish reason, with no
		// [DONE]; that is a whole response.
		{"after finish reason", events[:len(events)-2], true},
		{"before finish reason", events[:5], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { writeSSE(w, tt.events) })
			ups, err := collect(NewChat(srv.options()).Stream(t.Context(), []message.Message{message.User("hi")}, nil))
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got := final(t, ups).Text(); got != "Let me check both cities." {
					t.Errorf("text = %q", got)
				}
				return
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("err = %v, want an unexpected EOF", err)
			}
		})
	}
}

func TestChatStreamErrorEvent(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		events := sseEvents(testdata(t, "chat_tools.sse"))
		writeSSE(w, append(events[:2:2], `data: {"error":{"message":"The server had an error","type":"server_error","code":null}}`+"\n\n"))
	})
	ups, err := collect(NewChat(srv.options()).Stream(t.Context(), []message.Message{message.User("hi")}, nil))
	var pe *agent.ProviderError
	if !errors.As(err, &pe) || pe.Type != "server_error" || pe.Message != "The server had an error" {
		t.Fatalf("err = %#v", err)
	}
	if len(ups) != 1 || ups[0].Text != "Let me" {
		t.Errorf("updates before the error = %+v", ups)
	}
}

// A server that cannot stream may answer a streamed request with JSON.
func TestChatStreamJSONAnswer(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	ups, err := collect(NewChat(srv.options()).Stream(t.Context(), []message.Message{message.User("weather?")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantChatTools(), final(t, ups)); d != "" {
		t.Errorf("response (-want +got):\n%s", d)
	}
	if len(ups) != 5 || ups[0].Text != "Let me check both cities." || ups[1].Call.CallID != "call_a" || ups[3].Usage == nil {
		t.Errorf("updates = %+v", ups)
	}
}

func TestChatReasoningFromCompatibleServer(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/v1/chat/completions" && strings.Contains(r.Header.Get("X-Mode"), "stream") {
			writeSSE(w, []string{
				`data: {"id":"c1","model":"qwen3","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Hmm, "}}]}` + "\n\n",
				`data: {"id":"c1","model":"qwen3","choices":[{"index":0,"delta":{"reasoning_content":"easy."}}]}` + "\n\n",
				`data: {"id":"c1","model":"qwen3","choices":[{"index":0,"delta":{"content":"4"},"finish_reason":"stop"}]}` + "\n\n",
				"data: [DONE]\n\n",
			})
			return
		}
		writeJSON(w, 200, `{"id":"c1","model":"qwen3","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"4","reasoning":"Hmm, easy."}}]}`)
	})
	want := []message.Content{message.Reasoning{Text: "Hmm, easy."}, message.Text{Text: "4"}}
	msgs := []message.Message{message.User("2+2?")}

	resp, err := NewChat(srv.options()).Response(t.Context(), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, resp.Messages[0].Contents); d != "" {
		t.Errorf("contents (-want +got):\n%s", d)
	}

	o := srv.options()
	o.RequestOptions = append(o.RequestOptions, option.WithHeader("X-Mode", "stream"))
	ups, err := collect(NewChat(o).Stream(t.Context(), msgs, nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, final(t, ups).Messages[0].Contents); d != "" {
		t.Errorf("streamed contents (-want +got):\n%s", d)
	}
	if ups[0].Reasoning != "Hmm, " || ups[1].Reasoning != "easy." || ups[2].Text != "4" {
		t.Errorf("updates = %+v", ups)
	}
}

func TestChatRefusesServiceThreads(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	chat := NewChat(srv.options())
	msgs := []message.Message{message.User("hi")}
	for _, opts := range []*agent.ChatOptions{{ConversationID: "resp_1"}, {Store: ptr(true)}} {
		if _, err := chat.Response(t.Context(), msgs, opts); !errors.Is(err, thread.ErrUnsupported) {
			t.Errorf("Response(%+v) err = %v, want ErrUnsupported", opts, err)
		}
		if _, err := collect(chat.Stream(t.Context(), msgs, opts)); !errors.Is(err, thread.ErrUnsupported) {
			t.Errorf("Stream(%+v) err = %v, want ErrUnsupported", opts, err)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
	// Not storing is what the API does anyway.
	if _, err := chat.Response(t.Context(), msgs, &agent.ChatOptions{Store: ptr(false)}); err != nil {
		t.Errorf("Store false: %v", err)
	}
	if c := chat.Capabilities(); c != (agent.Capabilities{Streaming: true, Tools: true}) {
		t.Errorf("Capabilities = %+v", c)
	}
}

func TestChatRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		msgs []message.Message
		opts agent.ChatOptions
		want error
	}{
		{"no model", []message.Message{message.User("hi")}, agent.ChatOptions{}, thread.ErrInvalid},
		{"image from assistant", []message.Message{message.New(message.RoleAssistant, message.Data{MediaType: "image/png", Data: []byte("x")})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"file by URL", []message.Message{message.New(message.RoleUser, message.Data{MediaType: "application/pdf", URI: "https://example.com/a.pdf"})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"image by file id", []message.Message{message.New(message.RoleUser, message.Data{MediaType: "image/png", URI: "file-123"})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"bytes without media type", []message.Message{message.New(message.RoleUser, message.Data{Data: []byte("x")})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"unfetchable scheme", []message.Message{message.New(message.RoleUser, message.Data{MediaType: "image/png", URI: "file:///etc/passwd"})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"unknown role", []message.Message{message.New("narrator", message.Text{Text: "Once"})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"call from user", []message.Message{message.New(message.RoleUser, message.FunctionCall{CallID: "c", Name: "f"})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"text in tool message", []message.Message{message.New(message.RoleTool, message.Text{Text: "x"})}, agent.ChatOptions{Model: "m"}, thread.ErrInvalid},
		{"bad schema", []message.Message{message.User("hi")}, agent.ChatOptions{Model: "m", Tools: []agent.ToolSpec{{Name: "f", Parameters: json.RawMessage(`{`)}}}, thread.ErrInvalid},
	}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 500, `{}`) })
	o := srv.options()
	o.Model = ""
	chat := NewChat(o)
	for _, tt := range tests {
		if _, err := chat.Response(t.Context(), tt.msgs, &tt.opts); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestChatFileParts(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	msgs := []message.Message{message.New(message.RoleUser,
		message.Data{MediaType: "application/pdf", Data: []byte("%PDF"), Name: "a.pdf"},
		message.Data{MediaType: "application/pdf", URI: "file-abc"},
	)}
	if _, err := NewChat(srv.options()).Response(t.Context(), msgs, nil); err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"type": "file", "file": map[string]any{"file_data": "data:application/pdf;base64,JVBERg==", "filename": "a.pdf"}},
		map[string]any{"type": "file", "file": map[string]any{"file_id": "file-abc"}},
	}
	got := srv.last(t).Body["messages"].([]any)[0].(map[string]any)["content"]
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("content (-want +got):\n%s", d)
	}
}

// Servers answer in every broken way; none of it may panic.
func TestChatMalformedResponses(t *testing.T) {
	tests := []struct {
		name, contentType, body string
	}{
		{"malformed JSON", "application/json", `{"id":`},
		{"no choices", "application/json", `{"id":"x","choices":[]}`},
		{"choices not a list", "application/json", `{"id":"x","choices":"many"}`},
		{"null", "application/json", `null`},
		{"HTML", "text/html", `<html>hello</html>`},
		{"call without name", "application/json", `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{}}]}}]}`},
		{"SSE garbage", "text/event-stream", "data: {not json\n\n"},
		{"SSE no choices", "text/event-stream", "data: {\"id\":\"x\"}\n\ndata: [DONE]\n\n"},
		{"SSE empty", "text/event-stream", ""},
		{"SSE truncated", "text/event-stream", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"cho"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				w.Header().Set("Content-Type", tt.contentType)
				io.WriteString(w, tt.body)
			})
			chat := NewChat(srv.options())
			msgs := []message.Message{message.User("hi")}
			if resp, err := chat.Response(t.Context(), msgs, nil); err == nil {
				t.Errorf("Response = %+v, want an error", resp)
			}
			if ups, err := collect(chat.Stream(t.Context(), msgs, nil)); err == nil {
				t.Errorf("Stream = %+v, want an error", ups)
			}
		})
	}
}

func TestChatNamesAndRoles(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	msgs := []message.Message{
		{Role: message.RoleSystem, AuthorName: "ops", Contents: []message.Content{message.Text{Text: "Rule one."}}},
		{Role: "developer", Contents: []message.Content{message.Text{Text: "Rule two."}}},
		{Role: message.RoleAssistant, AuthorName: "bot", Contents: []message.Content{message.Reasoning{Text: "only reasoning"}}},
		{Role: message.RoleAssistant, AuthorName: "bot", Contents: []message.Content{message.Text{Text: "Hi"}}},
	}
	if _, err := NewChat(srv.options()).Response(t.Context(), msgs, nil); err != nil {
		t.Fatal(err)
	}
	var want any
	json.Unmarshal([]byte(`[
		{"role": "system", "name": "ops", "content": "Rule one."},
		{"role": "developer", "content": "Rule two."},
		{"role": "assistant", "name": "bot", "content": "Hi"}
	]`), &want)
	if d := cmp.Diff(want, srv.last(t).Body["messages"]); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
}

func TestChatStreamStopsEarly(t *testing.T) {
	gone := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSSE(w, sseEvents(testdata(t, "chat_tools.sse"))[:2])
		<-r.Context().Done() // the client must hang up
		close(gone)
	})
	for u, err := range NewChat(srv.options()).Stream(context.Background(), []message.Message{message.User("hi")}, nil) {
		if err != nil || u.Text != "Let me" {
			t.Fatalf("update = %+v, %v", u, err)
		}
		break
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not canceled when the consumer stopped")
	}
}
