package openai

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// bodyClient answers every request with body, as JSON when it looks like
// JSON and as an event stream otherwise.
func bodyClient(body []byte) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		ct := "text/event-stream"
		if t := bytes.TrimSpace(body); len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == 'n') {
			ct = "application/json"
		}
		return &http.Response{
			StatusCode: 200,
			Header:     http.Header{"Content-Type": {ct}},
			Body:       io.NopCloser(bytes.NewReader(body)),
			Request:    r,
		}, nil
	})}
}

// checkResponse fails if a response a client accepted would not go into a
// thread.
func checkResponse(t *testing.T, resp *agent.ChatResponse) {
	if resp == nil {
		t.Fatal("nil response without an error")
	}
	for _, m := range resp.Messages {
		if err := m.Validate(); err != nil {
			t.Fatalf("response message does not validate: %v", err)
		}
	}
}

func fuzzClients(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add(testdata(f, s))
	}
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte(`{"error":{"message":"x"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		o := Options{Model: "m", APIKey: "k", BaseURL: "http://fuzz.invalid/v1", MaxRetries: -1, HTTPClient: bodyClient(body)}
		msgs := []message.Message{message.User("hi")}
		for _, c := range []agent.ChatClient{NewChat(o), NewResponses(ResponsesOptions{Options: o})} {
			if resp, err := c.Response(t.Context(), msgs, nil); err == nil {
				checkResponse(t, resp)
			}
			ups, err := collect(c.Stream(t.Context(), msgs, nil))
			if err == nil {
				if len(ups) == 0 || ups[len(ups)-1].Response == nil {
					t.Fatal("stream ended without error or response")
				}
				checkResponse(t, ups[len(ups)-1].Response)
			}
		}
	})
}

func FuzzStreams(f *testing.F) {
	fuzzClients(f, "chat_tools.sse", "chat_tools.json", "responses_tools.sse", "responses_tools.json")
}
