package scripted_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
)

func TestEcho(t *testing.T) {
	weather := []agent.ToolSpec{{Name: "weather"}, {Name: "time"}}
	call := message.ToolCall("call_1", "weather", `{"city":"Paris"}`)
	call2 := message.ToolCall("call_2", "time", `{}`)
	results := message.New(message.RoleTool, message.FunctionResult{CallID: "call_1", Result: "21 °C"}, message.FunctionResult{CallID: "call_2", Result: "noon"})
	for _, tc := range []struct {
		name  string
		msgs  []message.Message
		tools []agent.ToolSpec
		text  string
		call  *message.FunctionCall // the call expected (its id aside)
	}{
		{name: "says back", msgs: []message.Message{message.User("hi"), message.Assistant("You said: hi"), message.User("again")}, text: "You said: again"},
		{name: "last user text", msgs: []message.Message{message.User("hi"), message.Assistant("x")}, text: "You said: hi"},
		{name: "nothing", text: "You said: "},
		{name: "call with args", msgs: []message.Message{message.User(`call weather {"city":"Paris"}`)}, tools: weather,
			call: &message.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`}},
		{name: "call without args", msgs: []message.Message{message.User("call time")}, tools: weather,
			call: &message.FunctionCall{Name: "time", Arguments: `{}`}},
		{name: "no such tool", msgs: []message.Message{message.User("call nope {}")}, tools: weather, text: "You said: call nope {}"},
		{name: "no tools", msgs: []message.Message{message.User("call weather {}")}, text: "You said: call weather {}"},
		{name: "args not an object", msgs: []message.Message{message.User("call weather [1]")}, tools: weather, text: "You said: call weather [1]"},
		{name: "results", msgs: []message.Message{message.User("x"), call, call2, results}, tools: weather,
			text: "Tool weather returned: 21 °C; Tool time returned: noon"},
		{name: "result of an unknown call", msgs: []message.Message{message.ToolResult("c9", "ok")}, text: "Tool c9 returned: ok"},
		{name: "compact", msgs: []message.Message{message.User("Paris?"), message.Assistant("You said: Paris?"), message.User("Rome?"), message.User("Call the compact tool now.")},
			tools: []agent.ToolSpec{{Name: "compact"}}, call: &message.FunctionCall{Name: "compact", Arguments: `{"summary":"The user said: Paris? / Rome?"}`}},
		{name: "compact not offered", msgs: []message.Message{message.User("Call the compact tool now.")}, tools: weather, text: "You said: Call the compact tool now."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := scripted.Echo()
			c.ChunkSize = 3
			opts := &agent.ChatOptions{Tools: tc.tools}
			r, err := c.Response(t.Context(), tc.msgs, opts)
			if err != nil {
				t.Fatal(err)
			}
			check := func(r *agent.ChatResponse) {
				t.Helper()
				if len(r.Messages) != 1 || r.Messages[0].Role != message.RoleAssistant {
					t.Fatalf("messages %+v", r.Messages)
				}
				if tc.call != nil {
					calls := r.Calls()
					if len(calls) != 1 || calls[0].Name != tc.call.Name || calls[0].Arguments != tc.call.Arguments ||
						!strings.HasPrefix(calls[0].CallID, "call_") || len(calls[0].CallID) != len("call_")+26 || r.FinishReason != agent.FinishToolCalls || r.Text() != "" {
						t.Fatalf("%+v finish %s", calls, r.FinishReason)
					}
					return
				}
				if r.Text() != tc.text || len(r.Calls()) != 0 || r.FinishReason != agent.FinishStop {
					t.Fatalf("text %q finish %s, want %q", r.Text(), r.FinishReason, tc.text)
				}
				if r.Usage.OutputTokens == 0 && tc.text != "" || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
					t.Fatalf("usage %+v", r.Usage)
				}
			}
			check(r)

			// A stream: the text in pieces of ChunkSize runes, then the
			// same response.
			var pieces []string
			var final *agent.ChatResponse
			for u, err := range c.Stream(t.Context(), tc.msgs, opts) {
				if err != nil {
					t.Fatal(err)
				}
				if u.Text != "" {
					pieces = append(pieces, u.Text)
				}
				if u.Response != nil {
					final = u.Response
				}
			}
			if final == nil {
				t.Fatal("no final response")
			}
			check(final)
			if strings.Join(pieces, "") != final.Text() {
				t.Fatalf("pieces %q, text %q", pieces, final.Text())
			}
			for i, p := range pieces {
				if n := len([]rune(p)); n > 3 || n < 3 && i < len(pieces)-1 {
					t.Fatalf("pieces %q", pieces)
				}
			}
			if len(final.Text()) > 6 && len(pieces) < 2 {
				t.Fatalf("pieces %q", pieces)
			}
		})
	}
}

// Echo keeps no requests unless asked to.
func TestEchoRecordsOnlyWhenAsked(t *testing.T) {
	c := scripted.Echo()
	if _, err := c.Response(t.Context(), []message.Message{message.User("a")}, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Requests()); n != 0 {
		t.Fatalf("%d requests kept", n)
	}
	c.Record = true
	if _, err := c.Response(t.Context(), []message.Message{message.User("b")}, nil); err != nil {
		t.Fatal(err)
	}
	if reqs := c.Requests(); len(reqs) != 1 || reqs[0].Messages[0].Text() != "b" {
		t.Fatalf("requests %+v", reqs)
	}
}

func ExampleEcho() {
	model := scripted.Echo()
	tools := &agent.ChatOptions{Tools: []agent.ToolSpec{{Name: "weather"}}}
	r, _ := model.Response(context.Background(), []message.Message{message.User("hello")}, tools)
	fmt.Println(r.Text())
	r, _ = model.Response(context.Background(), []message.Message{message.User(`call weather {"city":"Paris"}`)}, tools)
	call := r.Calls()[0]
	fmt.Println(call.Name, call.Arguments)
	r, _ = model.Response(context.Background(), []message.Message{
		message.ToolCall(call.CallID, call.Name, call.Arguments), message.ToolResult(call.CallID, "21 °C"),
	}, tools)
	fmt.Println(r.Text())
	// Output:
	// You said: hello
	// weather {"city":"Paris"}
	// Tool weather returned: 21 °C
}

// TestDemo: the demo model streams its answer in pieces, pausing between
// them, so that a stream can be cancelled before its end.
func TestDemo(t *testing.T) {
	c := scripted.Demo()
	var pieces []string
	for u, err := range c.Stream(context.Background(), []message.Message{message.User("a long enough sentence")}, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Text != "" {
			pieces = append(pieces, u.Text)
		}
	}
	if got := strings.Join(pieces, ""); got != "You said: a long enough sentence" || len(pieces) < 5 {
		t.Fatalf("pieces %q", pieces)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for u, err := range c.Stream(ctx, []message.Message{message.User("a long enough sentence")}, nil) {
		if err != nil {
			last = err
			break
		}
		if u.Text != "" {
			if n++; n == 2 {
				cancel()
			}
		}
	}
	if last == nil || n != 2 {
		t.Fatalf("after cancel at piece 2: %d pieces, err %v", n, last)
	}
}
