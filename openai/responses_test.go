package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// responsesServer answers /v1/responses with body and counts conversations
// it creates at /v1/conversations.
func responsesServer(t *testing.T, body string) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/v1/conversations":
			writeJSON(w, 200, `{"id":"conv_1","object":"conversation","created_at":1741900000,"metadata":{}}`)
		case "/v1/responses":
			writeJSON(w, 200, body)
		default:
			http.NotFound(w, r)
		}
	})
}

func TestResponsesRequestBody(t *testing.T) {
	srv := responsesServer(t, string(testdata(t, "responses_tools.json")))
	msgs := conversation()
	msgs = append(msgs, message.New(message.RoleUser,
		message.Data{MediaType: "application/pdf", Data: []byte("%PDF"), Name: "a.pdf"},
		message.Data{MediaType: "application/pdf", URI: "https://example.com/b.pdf"},
		message.Data{MediaType: "image/png", URI: "file-img"},
	))
	if _, err := NewResponses(ResponsesOptions{Options: srv.options()}).Response(t.Context(), msgs, fullOptions()); err != nil {
		t.Fatal(err)
	}
	req := srv.last(t)
	if req.Method != "POST" || req.Path != "/v1/responses" {
		t.Errorf("request = %s %s", req.Method, req.Path)
	}
	// The reasoning has no item id (it could come from another provider),
	// so it is not sent; AuthorName has no field in input messages.
	jsonEqual(t, req.Body, `{
		"model": "gpt-override",
		"instructions": "Be brief.",
		"store": true,
		"input": [
			{"role": "user", "content": [
				{"type": "input_text", "text": "What is in the picture, and the weather in Paris?"},
				{"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,UE5H"},
				{"type": "input_image", "detail": "auto", "image_url": "https://example.com/cat.jpg"}
			]},
			{"role": "assistant", "content": "A cat. Let me check the weather."},
			{"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
			{"type": "function_call", "call_id": "call_b", "name": "clock", "arguments": "{}"},
			{"type": "function_call_output", "call_id": "call_a", "output": "{\"temp_c\":21}"},
			{"type": "function_call_output", "call_id": "call_b", "output": "Error: clock unavailable"},
			{"role": "user", "content": "Thanks."},
			{"role": "user", "content": [
				{"type": "input_file", "file_data": "data:application/pdf;base64,JVBERg==", "filename": "a.pdf"},
				{"type": "input_file", "file_url": "https://example.com/b.pdf"},
				{"type": "input_image", "detail": "auto", "file_id": "file-img"}
			]}
		],
		"tools": [
			{"type": "function", "name": "weather", "description": "Weather in a city.", "strict": false,
				"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
			{"type": "function", "name": "clock", "strict": false, "parameters": {"type": "object", "properties": {}}}
		],
		"tool_choice": {"type": "function", "name": "weather"},
		"temperature": 0.2,
		"max_output_tokens": 100,
		"text": {"format": {"type": "json_schema", "name": "answer", "strict": true,
			"schema": {"type": "object", "properties": {"z": {}, "a": {}}}}},
		"metadata": {"team": "loom"}
	}`)
	if !strings.Contains(string(req.Raw), `"properties":{"z":{},"a":{}}`) {
		t.Errorf("schema reordered: %s", req.Raw)
	}
}

func TestResponsesToolChoiceAndFormat(t *testing.T) {
	tests := []struct {
		name       string
		opts       agent.ChatOptions
		key, value string
	}{
		{"auto", agent.ChatOptions{ToolChoice: agent.ToolAuto}, "tool_choice", `"auto"`},
		{"none", agent.ChatOptions{ToolChoice: agent.ToolNone}, "tool_choice", `"none"`},
		{"required", agent.ChatOptions{ToolChoice: agent.ToolRequired}, "tool_choice", `"required"`},
		{"json object", agent.ChatOptions{ResponseFormat: &agent.ResponseFormat{}}, "text", `{"format":{"type":"json_object"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := responsesServer(t, string(testdata(t, "responses_tools.json")))
			if _, err := NewResponses(ResponsesOptions{Options: srv.options()}).Response(t.Context(), []message.Message{message.User("hi")}, &tt.opts); err != nil {
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

// wantResponsesTools is responses_tools.json (and .sse) as a response of a
// chaining client.
func wantResponsesTools() *agent.ChatResponse {
	return &agent.ChatResponse{
		Messages: []message.Message{{
			Role: message.RoleAssistant,
			Contents: []message.Content{
				message.Reasoning{Text: "Need the weather.\n\nCall the tool."},
				message.Text{Text: "Checking Paris."},
				message.FunctionCall{CallID: "call_a", Name: "weather", Arguments: `{"city":"Paris"}`},
			},
			Metadata: map[string]any{"openai/reasoning_ids": []any{"rs_1"}},
		}},
		ConversationID: "resp_1",
		ResponseID:     "resp_1",
		Model:          "gpt-4.1-2025-04-14",
		Usage:          message.Usage{InputTokens: 40, OutputTokens: 20, TotalTokens: 60, CachedInputTokens: 8, ReasoningTokens: 12},
		FinishReason:   agent.FinishToolCalls,
	}
}

func TestResponsesResponseMapped(t *testing.T) {
	srv := responsesServer(t, string(testdata(t, "responses_tools.json")))
	got, err := NewResponses(ResponsesOptions{Options: srv.options()}).Response(t.Context(), []message.Message{message.User("weather?")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantResponsesTools(), got); d != "" {
		t.Errorf("response (-want +got):\n%s", d)
	}
	if err := got.Messages[0].Validate(); err != nil {
		t.Errorf("message does not validate: %v", err)
	}
}

func TestResponsesFinishReasons(t *testing.T) {
	tests := []struct {
		name, status, details, output string
		want                          agent.FinishReason
	}{
		{"completed", "completed", "null", `[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}]`, agent.FinishStop},
		{"calls", "completed", "null", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]`, agent.FinishToolCalls},
		{"max tokens", "incomplete", `{"reason":"max_output_tokens"}`, `[]`, agent.FinishLength},
		{"filtered", "incomplete", `{"reason":"content_filter"}`, `[]`, agent.FinishContentFilter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := responsesServer(t, `{"id":"resp_9","status":"`+tt.status+`","incomplete_details":`+tt.details+`,"output":`+tt.output+`}`)
			got, err := NewResponses(ResponsesOptions{Options: srv.options()}).Response(t.Context(), []message.Message{message.User("hi")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.FinishReason != tt.want {
				t.Errorf("FinishReason = %q, want %q", got.FinishReason, tt.want)
			}
		})
	}
}

func TestResponsesFailedResponse(t *testing.T) {
	srv := responsesServer(t, `{"id":"resp_9","status":"failed","error":{"code":"server_error","message":"The model failed."},"output":[]}`)
	_, err := NewResponses(ResponsesOptions{Options: srv.options()}).Response(t.Context(), []message.Message{message.User("hi")}, nil)
	var pe *agent.ProviderError
	if !errors.As(err, &pe) || pe.Type != "server_error" || pe.Message != "The model failed." {
		t.Errorf("err = %#v", err)
	}
}

func TestResponsesStreamReplaysDeltas(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSSE(w, sseEvents(testdata(t, "responses_tools.sse")))
	})
	ups, err := collect(NewResponses(ResponsesOptions{Options: srv.options()}).Stream(t.Context(), []message.Message{message.User("weather?")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	usage := wantResponsesTools().Usage
	want := []agent.Update{
		{Reasoning: "Need the weather."},
		{Reasoning: "\n\n"},
		{Reasoning: "Call the tool."},
		{Text: "Checking"},
		{Text: " Paris."},
		{Call: &agent.CallDelta{Index: 0, CallID: "call_a", Name: "weather"}},
		{Call: &agent.CallDelta{Index: 0, Arguments: `{"city":`}},
		{Call: &agent.CallDelta{Index: 0, Arguments: `"Paris"}`}},
		{Usage: &usage},
	}
	if d := cmp.Diff(want, deltas(ups)); d != "" {
		t.Errorf("deltas (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantResponsesTools(), final(t, ups)); d != "" {
		t.Errorf("final response differs from the non-streamed one (-want +got):\n%s", d)
	}
	if body := srv.last(t).Body; body["stream"] != true {
		t.Errorf("stream = %v", body["stream"])
	}
}

func TestResponsesStreamCutMidway(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		cutAfter(w, sseEvents(testdata(t, "responses_tools.sse")), 6)
	})
	ups, err := collect(NewResponses(ResponsesOptions{Options: srv.options()}).Stream(t.Context(), []message.Message{message.User("weather?")}, nil))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want an unexpected EOF", err)
	}
	if d := cmp.Diff([]agent.Update{{Reasoning: "Need the weather."}}, ups); d != "" {
		t.Errorf("updates before the error (-want +got):\n%s", d)
	}
}

// A stream that ends cleanly but without its final event is as broken as
// one whose connection dropped.
func TestResponsesStreamEndsEarly(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSSE(w, sseEvents(testdata(t, "responses_tools.sse"))[:16])
	})
	ups, err := collect(NewResponses(ResponsesOptions{Options: srv.options()}).Stream(t.Context(), []message.Message{message.User("weather?")}, nil))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want an unexpected EOF", err)
	}
	if len(ups) == 0 || ups[len(ups)-1].Text != " Paris." {
		t.Errorf("updates = %+v", ups)
	}
}

func TestResponsesStreamErrors(t *testing.T) {
	tests := []struct {
		name, event, typ, msg string
	}{
		{"error event", `event: error` + "\n" + `data: {"type":"error","code":"rate_limit_exceeded","message":"Slow down.","param":null,"sequence_number":3}`, "rate_limit_exceeded", "Slow down."},
		{"failed response", `event: response.failed` + "\n" + `data: {"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"Boom."},"output":[]}}`, "server_error", "Boom."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				writeSSE(w, append(sseEvents(testdata(t, "responses_tools.sse"))[:5:5], tt.event+"\n\n"))
			})
			ups, err := collect(NewResponses(ResponsesOptions{Options: srv.options()}).Stream(t.Context(), []message.Message{message.User("hi")}, nil))
			var pe *agent.ProviderError
			if !errors.As(err, &pe) || pe.Type != tt.typ || pe.Message != tt.msg {
				t.Fatalf("err = %#v", err)
			}
			if len(ups) != 1 || ups[0].Reasoning != "Need the weather." {
				t.Errorf("updates before the error = %+v", ups)
			}
		})
	}
}

func TestResponsesChaining(t *testing.T) {
	srv := responsesServer(t, `{"id":"resp_2","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"21 °C."}]}]}`)
	client := NewResponses(ResponsesOptions{Options: srv.options()})
	if c := client.Capabilities(); c != (agent.Capabilities{ServiceThreads: true, Chaining: true, Streaming: true, Tools: true}) {
		t.Errorf("Capabilities = %+v", c)
	}
	// Only the new messages: the result of the previous response's call.
	msgs := []message.Message{message.ToolResult("call_a", `{"temp_c":21}`)}
	got, err := client.Response(t.Context(), msgs, &agent.ChatOptions{ConversationID: "resp_1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ConversationID != "resp_2" || got.ResponseID != "resp_2" {
		t.Errorf("ConversationID, ResponseID = %q, %q; want resp_2 for both", got.ConversationID, got.ResponseID)
	}
	body := srv.last(t).Body
	if body["previous_response_id"] != "resp_1" || body["store"] != true || body["conversation"] != nil {
		t.Errorf("body = %v", body)
	}
	if d := cmp.Diff([]any{map[string]any{"type": "function_call_output", "call_id": "call_a", "output": `{"temp_c":21}`}}, body["input"]); d != "" {
		t.Errorf("input (-want +got):\n%s", d)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestResponsesConversations(t *testing.T) {
	srv := responsesServer(t, `{"id":"resp_2","status":"completed","conversation":{"id":"conv_1"},"output":[]}`)
	client := NewResponses(ResponsesOptions{Options: srv.options(), Conversations: true})
	if c := client.Capabilities(); c.Chaining || !c.ServiceThreads {
		t.Errorf("Capabilities = %+v", c)
	}
	msgs := []message.Message{message.User("hi")}

	// The first run creates the conversation…
	got, err := client.Response(t.Context(), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || reqs[0].Path != "/v1/conversations" || reqs[1].Path != "/v1/responses" {
		t.Fatalf("requests = %+v", reqs)
	}
	if reqs[1].Body["conversation"] != "conv_1" || reqs[1].Body["previous_response_id"] != nil {
		t.Errorf("body = %v", reqs[1].Body)
	}
	if got.ConversationID != "conv_1" || got.ResponseID != "resp_2" {
		t.Errorf("ConversationID, ResponseID = %q, %q", got.ConversationID, got.ResponseID)
	}

	// …the next ones continue it.
	if _, err := client.Response(t.Context(), msgs, &agent.ChatOptions{ConversationID: "conv_1"}); err != nil {
		t.Fatal(err)
	}
	ups, err := collect(client.Stream(t.Context(), msgs, &agent.ChatOptions{ConversationID: "conv_1"}))
	if err != nil {
		t.Fatal(err)
	}
	if id := final(t, ups).ConversationID; id != "conv_1" {
		t.Errorf("streamed ConversationID = %q", id)
	}
	reqs = srv.requests()
	if len(reqs) != 4 {
		t.Fatalf("server saw %d requests, want 4 (one conversation created)", len(reqs))
	}
	for _, r := range reqs[2:] {
		if r.Path != "/v1/responses" || r.Body["conversation"] != "conv_1" {
			t.Errorf("request %s body = %v", r.Path, r.Body)
		}
	}
}

func TestResponsesStoreFalse(t *testing.T) {
	body := `{"id":"resp_3","status":"completed","output":[
		{"id":"rs_7","type":"reasoning","summary":[],"encrypted_content":"gAAAA"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`
	for _, conversations := range []bool{false, true} {
		srv := responsesServer(t, body)
		client := NewResponses(ResponsesOptions{Options: srv.options(), Conversations: conversations})
		got, err := client.Response(t.Context(), []message.Message{message.User("hi")}, &agent.ChatOptions{Store: ptr(false)})
		if err != nil {
			t.Fatal(err)
		}
		if got.ConversationID != "" || got.ResponseID != "resp_3" {
			t.Errorf("conversations %v: ConversationID, ResponseID = %q, %q", conversations, got.ConversationID, got.ResponseID)
		}
		reqs := srv.requests()
		if len(reqs) != 1 {
			t.Fatalf("conversations %v: server saw %d requests, want 1 (no conversation)", conversations, len(reqs))
		}
		b := reqs[0].Body
		if b["store"] != false || b["conversation"] != nil {
			t.Errorf("conversations %v: body = %v", conversations, b)
		}
		if d := cmp.Diff([]any{"reasoning.encrypted_content"}, b["include"]); d != "" {
			t.Errorf("include (-want +got):\n%s", d)
		}
		want := []message.Content{message.Reasoning{Protected: "gAAAA"}, message.Text{Text: "ok"}}
		if d := cmp.Diff(want, got.Messages[0].Contents); d != "" {
			t.Errorf("contents (-want +got):\n%s", d)
		}
	}
}

// Reasoning goes back to the API as the items it came from, with their ids
// and encrypted content, so a stateless conversation keeps its reasoning.
func TestResponsesReasoningRoundTrip(t *testing.T) {
	srv := responsesServer(t, `{"id":"resp_3","status":"completed","output":[
		{"id":"rs_7","type":"reasoning","summary":[{"type":"summary_text","text":"Think."}],"encrypted_content":"gAAAA"},
		{"id":"fc_1","type":"function_call","call_id":"call_a","name":"weather","arguments":"{}"}]}`)
	client := NewResponses(ResponsesOptions{Options: srv.options()})
	opts := &agent.ChatOptions{Store: ptr(false)}
	first, err := client.Response(t.Context(), []message.Message{message.User("hi")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	// What a thread keeps of the message is its JSON.
	b, err := json.Marshal(first.Messages[0])
	if err != nil {
		t.Fatal(err)
	}
	var kept message.Message
	if err := json.Unmarshal(b, &kept); err != nil {
		t.Fatal(err)
	}
	other := message.New(message.RoleAssistant, message.Reasoning{Text: "From another provider.", Protected: "sig"}, message.Text{Text: "Hello."})
	msgs := []message.Message{message.User("hi"), other, kept, message.ToolResult("call_a", "sunny")}
	if _, err := client.Response(t.Context(), msgs, opts); err != nil {
		t.Fatal(err)
	}
	var want any
	json.Unmarshal([]byte(`[
		{"role": "user", "content": "hi"},
		{"role": "assistant", "content": "Hello."},
		{"type": "reasoning", "id": "rs_7", "summary": [{"type": "summary_text", "text": "Think."}], "encrypted_content": "gAAAA"},
		{"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{}"},
		{"type": "function_call_output", "call_id": "call_a", "output": "sunny"}
	]`), &want)
	if d := cmp.Diff(want, srv.last(t).Body["input"]); d != "" {
		t.Errorf("input (-want +got):\n%s", d)
	}
}

func TestResponsesRefusesBadInput(t *testing.T) {
	srv := responsesServer(t, `{}`)
	o := srv.options()
	o.Model = ""
	client := NewResponses(ResponsesOptions{Options: o, Conversations: true})
	tests := []struct {
		name string
		msgs []message.Message
		opts agent.ChatOptions
	}{
		{"no model", []message.Message{message.User("hi")}, agent.ChatOptions{}},
		{"data from system", []message.Message{message.New(message.RoleSystem, message.Data{MediaType: "image/png", Data: []byte("x")})}, agent.ChatOptions{Model: "m"}},
		{"unknown role", []message.Message{message.New("narrator", message.Text{Text: "Once"})}, agent.ChatOptions{Model: "m"}},
		{"text in tool message", []message.Message{message.New(message.RoleTool, message.Text{Text: "x"})}, agent.ChatOptions{Model: "m"}},
		{"bad format schema", []message.Message{message.User("hi")}, agent.ChatOptions{Model: "m", ResponseFormat: &agent.ResponseFormat{Schema: json.RawMessage(`{"a":`)}}},
	}
	for _, tt := range tests {
		if _, err := client.Response(t.Context(), tt.msgs, &tt.opts); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tt.name, err)
		}
	}
	// Refused before a conversation was created for nothing.
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

// Items of tools loom does not run are kept, so the thread says what
// happened.
func TestResponsesKeepsOtherItems(t *testing.T) {
	srv := responsesServer(t, `{"id":"resp_4","status":"completed","output":[
		{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"paris"}},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sunny."}]}]}`)
	got, err := NewResponses(ResponsesOptions{Options: srv.options()}).Response(t.Context(), []message.Message{message.User("hi")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	contents := got.Messages[0].Contents
	if len(contents) != 2 || contents[0].Type() != "web_search_call" || contents[1] != (message.Text{Text: "Sunny."}) {
		t.Errorf("contents = %+v", contents)
	}
	if err := got.Messages[0].Validate(); err != nil {
		t.Error(err)
	}
}

func TestResponsesMalformedResponses(t *testing.T) {
	tests := []struct {
		name, contentType, body string
	}{
		{"malformed JSON", "application/json", `{"id":`},
		{"null", "application/json", `null`},
		{"call without name", "application/json", `{"status":"completed","output":[{"type":"function_call","call_id":"c"}]}`},
		{"SSE garbage", "text/event-stream", "event: response.created\ndata: {oops\n\n"},
		{"SSE empty", "text/event-stream", ""},
		{"SSE truncated", "text/event-stream", "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\ndata: {\"ty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				w.Header().Set("Content-Type", tt.contentType)
				io.WriteString(w, tt.body)
			})
			client := NewResponses(ResponsesOptions{Options: srv.options()})
			msgs := []message.Message{message.User("hi")}
			if resp, err := client.Response(t.Context(), msgs, nil); err == nil {
				t.Errorf("Response = %+v, want an error", resp)
			}
			if ups, err := collect(client.Stream(t.Context(), msgs, nil)); err == nil {
				t.Errorf("Stream = %+v, want an error", ups)
			}
		})
	}
}
