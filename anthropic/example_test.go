package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/anthropic"
	"github.com/loomthreads/loom/message"
)

// fakeMessagesAPI stands in for api.anthropic.com: it answers every request
// with body, as JSON or as server-sent events.
func fakeMessagesAPI(contentType, body string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, body)
	}))
}

func ExampleClient_Response() {
	srv := fakeMessagesAPI("application/json", `{"id":"msg_1","type":"message","role":"assistant",
		"model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello!"}],
		"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":3}}`)
	defer srv.Close()

	// Without BaseURL and APIKey, the client talks to Anthropic with the
	// key in ANTHROPIC_API_KEY.
	c := anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5", APIKey: "sk-ant-example", BaseURL: srv.URL})
	resp, err := c.Response(context.Background(),
		[]message.Message{message.User("Say hello.")},
		&agent.ChatOptions{Instructions: "Be brief."})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text())
	fmt.Println(resp.FinishReason, resp.Usage.TotalTokens)
	// Output:
	// Hello!
	// stop 12
}

func ExampleClient_Stream() {
	srv := fakeMessagesAPI("text/event-stream", `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":9,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`)
	defer srv.Close()

	c := anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5", APIKey: "sk-ant-example", BaseURL: srv.URL})
	for u, err := range c.Stream(context.Background(), []message.Message{message.User("Say hello.")}, nil) {
		switch {
		case err != nil:
			fmt.Println(err)
			return
		case u.Text != "":
			fmt.Printf("%q\n", u.Text)
		case u.Response != nil:
			fmt.Println(u.Response.Text(), u.Response.FinishReason)
		}
	}
	// Output:
	// "Hel"
	// "lo!"
	// Hello! stop
}
