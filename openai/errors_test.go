package openai

import (
	"context"
	"errors"
	"io"
	"iter"
	"net/http"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// clients runs a test against both clients, whole and streamed.
func clients(o Options) map[string]func(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) error {
	chat, resp := NewChat(o), NewResponses(ResponsesOptions{Options: o})
	stream := func(seq iter.Seq2[agent.Update, error]) error {
		_, err := collect(seq)
		return err
	}
	return map[string]func(context.Context, []message.Message, *agent.ChatOptions) error{
		"chat": func(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) error {
			_, err := chat.Response(ctx, msgs, opts)
			return err
		},
		"chat stream": func(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) error {
			return stream(chat.Stream(ctx, msgs, opts))
		},
		"responses": func(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) error {
			_, err := resp.Response(ctx, msgs, opts)
			return err
		},
		"responses stream": func(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) error {
			return stream(resp.Stream(ctx, msgs, opts))
		},
	}
}

func TestErrorStatuses(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        agent.ProviderError
	}{
		{"bad request", 400, "application/json",
			`{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
			agent.ProviderError{StatusCode: 400, Type: "invalid_request_error", Message: "Invalid value for 'temperature'."}},
		{"unauthorized", 401, "application/json",
			`{"error":{"message":"Incorrect API key provided.","type":"","param":null,"code":"invalid_api_key"}}`,
			agent.ProviderError{StatusCode: 401, Type: "invalid_api_key", Message: "Incorrect API key provided."}},
		{"server error", 500, "text/plain", "upstream exploded",
			agent.ProviderError{StatusCode: 500, Message: "upstream exploded"}},
		// As compatible servers write errors.
		{"string error", 404, "application/json", `{"error":"model \"llama9\" not found"}`,
			agent.ProviderError{StatusCode: 404, Message: `model "llama9" not found`}},
	}
	for _, tt := range tests {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("Content-Type", tt.contentType)
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		})
		for name, call := range clients(srv.options()) {
			err := call(t.Context(), []message.Message{message.User("hi")}, nil)
			var pe *agent.ProviderError
			if !errors.As(err, &pe) {
				t.Errorf("%s, %s: err = %v, want a ProviderError", tt.name, name, err)
				continue
			}
			if pe.Provider != "openai" || pe.StatusCode != tt.want.StatusCode || pe.Type != tt.want.Type || pe.Message != tt.want.Message || pe.Err == nil {
				t.Errorf("%s, %s: err = %+v, want %+v", tt.name, name, *pe, tt.want)
			}
			if got, want := pe.Temporary(), tt.status >= 500; got != want {
				t.Errorf("%s, %s: Temporary() = %v", tt.name, name, got)
			}
		}
	}
}

func TestRateLimitRetried(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				w.Header().Set("retry-after-ms", "1")
				writeJSON(w, 429, `{"error":{"message":"Rate limit reached.","type":"requests","code":"rate_limit_exceeded"}}`)
				return
			}
			writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
		})
		o := srv.options()
		o.MaxRetries = 0 // the SDK's default: two retries
		chat := NewChat(o)
		var err error
		if stream {
			_, err = collect(chat.Stream(t.Context(), []message.Message{message.User("hi")}, nil))
		} else {
			_, err = chat.Response(t.Context(), []message.Message{message.User("hi")}, nil)
		}
		if err != nil {
			t.Errorf("stream %v: %v", stream, err)
		}
		if n := len(srv.requests()); n != 2 {
			t.Errorf("stream %v: server saw %d requests, want 2", stream, n)
		}
	}
}

func TestRateLimitWithoutRetries(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("retry-after-ms", "1")
		writeJSON(w, 429, `{"error":{"message":"Rate limit reached.","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	o := srv.options()
	o.MaxRetries = -1
	_, err := NewResponses(ResponsesOptions{Options: o}).Response(t.Context(), []message.Message{message.User("hi")}, nil)
	var pe *agent.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 429 || !pe.Temporary() || pe.Type != "requests" {
		t.Errorf("err = %#v", err)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("retry-after-ms", "1")
		writeJSON(w, 503, `{"error":{"message":"Overloaded.","type":"server_error"}}`)
	})
	o := srv.options()
	o.MaxRetries = 3
	_, err := NewChat(o).Response(t.Context(), []message.Message{message.User("hi")}, nil)
	var pe *agent.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 503 {
		t.Errorf("err = %#v", err)
	}
	if n := len(srv.requests()); n != 4 {
		t.Errorf("server saw %d requests, want 4", n)
	}
}

func TestContextCanceledMidStream(t *testing.T) {
	files := map[string]string{"chat stream": "chat_tools.sse", "responses stream": "responses_tools.sse"}
	for name, file := range files {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			writeSSE(w, sseEvents(testdata(t, file))[:5])
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(t.Context())
		var seq iter.Seq2[agent.Update, error]
		if name == "chat stream" {
			seq = NewChat(srv.options()).Stream(ctx, []message.Message{message.User("hi")}, nil)
		} else {
			seq = NewResponses(ResponsesOptions{Options: srv.options()}).Stream(ctx, []message.Message{message.User("hi")}, nil)
		}
		var got int
		var err error
		for u, e := range seq {
			if e != nil {
				err = e
				break
			}
			if got++; got == 1 && u.Response == nil {
				cancel()
			}
		}
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", name, err)
		}
		if got == 0 {
			t.Errorf("%s: no update before the cancellation", name)
		}
	}
}

func TestContextCanceledBeforeAnswer(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		<-r.Context().Done()
	})
	for name, call := range clients(srv.options()) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err := call(ctx, []message.Message{message.User("hi")}, nil)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: err = %v, want context.DeadlineExceeded", name, err)
		}
	}
}

// A server that is not there is an error of the request, not a panic.
func TestServerUnreachable(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {})
	o := srv.options()
	srv.Close()
	for name, call := range clients(o) {
		if err := call(t.Context(), []message.Message{message.User("hi")}, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Some compatible servers report errors in a body with status 200.
func TestErrorInSuccessfulBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, `{"error":{"message":"model is loading","type":"unavailable"}}`)
	})
	for name, call := range clients(srv.options()) {
		err := call(t.Context(), []message.Message{message.User("hi")}, nil)
		var pe *agent.ProviderError
		if !errors.As(err, &pe) || pe.Message != "model is loading" {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
