package anthropic

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

func TestStreamDeltasInOrderAndFinalEqualsResponse(t *testing.T) {
	c, f := newFake(t, Options{}, replyFile(t, "tools.sse"))
	ups, resp, err := collect(t, c.Stream(t.Context(), []message.Message{message.User("Weather in Paris and London?")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "stream", f.lastBody(t)["stream"], `true`)
	const (
		paris  = "toolu_01A09q90qw90lq917835lq9"
		london = "toolu_01B7tWbbrH2yXzFC3zkDcE5w"
	)
	want := []agent.Update{
		{Usage: &message.Usage{InputTokens: 125, OutputTokens: 1, TotalTokens: 126, CachedInputTokens: 100}},
		{Reasoning: "The user wants the weather"},
		{Reasoning: " in two cities."},
		{Text: "Let me check "},
		{Text: "both cities."},
		{Call: &agent.CallDelta{Index: 0, CallID: paris, Name: "weather"}},
		{Call: &agent.CallDelta{Index: 0, Arguments: `{"city": "Par`}},
		{Call: &agent.CallDelta{Index: 0, Arguments: `is"}`}},
		{Call: &agent.CallDelta{Index: 1, CallID: london, Name: "weather"}},
		{Call: &agent.CallDelta{Index: 1, Arguments: `{"city": `}},
		{Call: &agent.CallDelta{Index: 1, Arguments: `"London"}`}},
		{Usage: &message.Usage{InputTokens: 125, OutputTokens: 89, TotalTokens: 214, CachedInputTokens: 100}},
	}
	if diff := cmp.Diff(want, ups); diff != "" {
		t.Errorf("updates mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(toolsResponse(), resp); diff != "" {
		t.Errorf("final response mismatch (-want +got):\n%s", diff)
	}

	// The same content not streamed maps to the same response.
	c2, _ := newFake(t, Options{}, replyFile(t, "tools.json"))
	whole, err := c2.Response(t.Context(), []message.Message{message.User("Weather in Paris and London?")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(whole, resp); diff != "" {
		t.Errorf("streamed and whole responses differ (-whole +streamed):\n%s", diff)
	}
}

func TestStreamCutMidwayFailsAfterFirstDeltas(t *testing.T) {
	dropped := func(w http.ResponseWriter, r *http.Request, n int) {
		// Half an event, then the connection goes away without the
		// chunked body's end.
		w.Header().Set("Content-Type", "text/event-stream")
		body := string(testdata(t, "truncated.sse"))
		io.WriteString(w, body)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	for _, tc := range []struct {
		name    string
		respond func(http.ResponseWriter, *http.Request, int)
	}{
		{"clean end", replyFile(t, "truncated.sse")},
		{"dropped connection", dropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newFake(t, Options{MaxRetries: -1}, tc.respond)
			ups, resp, err := collect(t, c.Stream(t.Context(), []message.Message{message.User("hi")}, nil))
			if err == nil {
				t.Fatal("stream without message_stop ended without an error")
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("err = %v, want io.ErrUnexpectedEOF", err)
			}
			if resp != nil {
				t.Errorf("cut stream yielded a response: %+v", resp)
			}
			var text strings.Builder
			for _, u := range ups {
				text.WriteString(u.Text)
			}
			if text.String() != "Hello, wor" {
				t.Errorf("text before the error = %q, want %q", text.String(), "Hello, wor")
			}
		})
	}
}

func TestStreamErrorEventIsProviderError(t *testing.T) {
	c, _ := newFake(t, Options{}, replyFile(t, "overloaded.sse"))
	ups, resp, err := collect(t, c.Stream(t.Context(), []message.Message{message.User("hi")}, nil))
	var pe *agent.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want *agent.ProviderError", err, err)
	}
	want := agent.ProviderError{Provider: "anthropic", StatusCode: 529, Type: "overloaded_error", Message: "Overloaded"}
	got := *pe
	got.Err = nil
	if got != want {
		t.Errorf("error = %+v, want %+v", got, want)
	}
	if !pe.Temporary() {
		t.Error("an overloaded stream is not Temporary")
	}
	if resp != nil {
		t.Errorf("failed stream yielded a response")
	}
	if len(ups) != 2 || ups[1].Text != "Hel" {
		t.Errorf("updates before the error = %+v, want usage and %q", ups, "Hel")
	}
}

func TestStreamCanceledReturnsContextError(t *testing.T) {
	started := make(chan struct{})
	c, _ := newFake(t, Options{}, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Join(strings.SplitAfter(string(testdata(t, "overloaded.sse")), "\n\n")[:3], ""))
		w.(http.Flusher).Flush()
		close(started)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var err error
	var text string
	for u, e := range c.Stream(ctx, []message.Message{message.User("hi")}, nil) {
		if e != nil {
			err = e
			break
		}
		if u.Response != nil {
			t.Fatal("canceled stream yielded a response")
		}
		if u.Text != "" {
			text += u.Text
			<-started
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if text != "Hel" {
		t.Errorf("text = %q, want %q", text, "Hel")
	}
}

func TestStreamStoppedEarlyCancelsRequest(t *testing.T) {
	gone := make(chan struct{})
	c, _ := newFake(t, Options{}, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Join(strings.SplitAfter(string(testdata(t, "overloaded.sse")), "\n\n")[:3], ""))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(5 * time.Second):
		}
	})
	for u, err := range c.Stream(t.Context(), []message.Message{message.User("hi")}, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Text != "" {
			break
		}
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the request went on after the consumer stopped")
	}
}

// TestStreamMalformedNeverPanics replays streams no server should send;
// each must end in an error (or, for harmless oddities, a response), never
// a panic or a hang.
func TestStreamMalformedNeverPanics(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"content\":[],\"usage\":{}}}\n\n"
	stop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name    string
		body    string
		wantErr bool
	}{
		{"empty", "", true},
		{"not SSE", "<html>502 Bad Gateway</html>", true},
		{"malformed JSON", start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\n\n" + stop, true},
		{"delta before its block", start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n" + stop, true},
		{"block out of order", start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":5,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" + stop, true},
		{"error event not JSON", start + "event: error\ndata: oops\n\n", true},
		{"unknown event and block types", start +
			"event: future_event\ndata: {\"type\":\"future_event\"}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"hologram\",\"id\":\"h1\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"hologram_delta\",\"beam\":1}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" + stop, false},
		{"no message_start", "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"hi\"}}\n\n" + stop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newFake(t, Options{}, func(w http.ResponseWriter, r *http.Request, n int) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			})
			_, resp, err := collect(t, c.Stream(t.Context(), []message.Message{message.User("hi")}, nil))
			if tc.wantErr && err == nil {
				t.Errorf("no error; response %+v", resp)
			}
			if !tc.wantErr && (err != nil || resp == nil) {
				t.Errorf("err = %v, response %v; want a response", err, resp)
			}
		})
	}
}

// FuzzStream feeds arbitrary bodies to a stream: whatever the server sends,
// the stream ends, with an error or a response, without panicking. The
// bodies come from a RoundTripper rather than a server, which keeps the
// fuzzer's coverage to this process's one goroutine that matters.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"tools.sse", "truncated.sse", "overloaded.sse"} {
		f.Add(testdata(f, name))
	}
	f.Add([]byte("event: error\ndata: {\"error\":{}}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{
				StatusCode: 200,
				Header:     http.Header{"Content-Type": {"text/event-stream"}},
				Body:       io.NopCloser(bytes.NewReader(b)),
				Request:    r,
			}, nil
		})}
		c := New(Options{Model: "m", APIKey: "k", BaseURL: "http://fuzz.invalid", HTTPClient: hc, MaxRetries: -1})
		_, resp, err := collect(t, c.Stream(t.Context(), []message.Message{message.User("hi")}, nil))
		if err == nil && resp == nil {
			t.Fatal("stream ended with neither an error nor a response")
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
