package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/openai"
)

func ExampleNewChat() {
	// A local server stands in for OpenAI, or for Ollama at /v1.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help?"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}}`)
	}))
	defer srv.Close()

	chat := openai.NewChat(openai.Options{Model: "gpt-4o-mini", BaseURL: srv.URL + "/v1"})
	resp, err := chat.Response(context.Background(), []message.Message{message.User("Hi!")}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text())
	fmt.Println(resp.FinishReason, resp.Usage.TotalTokens)
	// Output:
	// Hello! How can I help?
	// stop 16
}

func ExampleResponses_Stream() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `event: response.output_text.delta
data: {"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Hello"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":" there!"}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello there!"}]}]}}

`)
	}))
	defer srv.Close()

	client := openai.NewResponses(openai.ResponsesOptions{Options: openai.Options{Model: "gpt-4.1", BaseURL: srv.URL}})
	for u, err := range client.Stream(context.Background(), []message.Message{message.User("Hi!")}, nil) {
		switch {
		case err != nil:
			fmt.Println(err)
		case u.Response != nil:
			fmt.Printf("\nconversation %s\n", u.Response.ConversationID)
		default:
			fmt.Print(u.Text)
		}
	}
	// Output:
	// Hello there!
	// conversation resp_1
}
