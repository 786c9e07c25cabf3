package anthropic

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

func TestErrorStatusesAreProviderErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		want      agent.ProviderError
		temporary bool
	}{
		{
			"bad request", 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"},"request_id":"req_1"}`,
			agent.ProviderError{StatusCode: 400, Type: "invalid_request_error", Message: "messages: roles must alternate"},
			false,
		},
		{
			"unauthorized", 401,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			agent.ProviderError{StatusCode: 401, Type: "authentication_error", Message: "invalid x-api-key"},
			false,
		},
		{
			"overloaded", 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			agent.ProviderError{StatusCode: 529, Type: "overloaded_error", Message: "Overloaded"},
			true,
		},
		{
			"proxy page", 502,
			`<html>Bad Gateway</html>`,
			agent.ProviderError{StatusCode: 502, Message: "<html>Bad Gateway</html>"},
			true,
		},
	} {
		tc.want.Provider = "anthropic"
		check := func(t *testing.T, err error) {
			t.Helper()
			var pe *agent.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *agent.ProviderError", err, err)
			}
			got := *pe
			got.Err = nil
			if got != tc.want {
				t.Errorf("error = %+v, want %+v", got, tc.want)
			}
			if pe.Temporary() != tc.temporary {
				t.Errorf("Temporary() = %v, want %v", pe.Temporary(), tc.temporary)
			}
			if pe.Err == nil {
				t.Error("the SDK's error is not kept")
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			c, f := newFake(t, Options{MaxRetries: -1}, reply(tc.status, tc.body))
			_, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil)
			check(t, err)
			_, resp, err := collect(t, c.Stream(t.Context(), []message.Message{message.User("hi")}, nil))
			check(t, err)
			if resp != nil {
				t.Error("failed stream yielded a response")
			}
			if n := len(f.Requests()); n != 2 {
				t.Errorf("%d requests, want 2 (no retries)", n)
			}
		})
	}
}

func TestRateLimitRetriedAfterRetryAfter(t *testing.T) {
	for _, header := range []string{"retry-after-ms", "retry-after"} {
		t.Run(header, func(t *testing.T) {
			value := "20"
			if header == "retry-after" {
				value = "0.02" // seconds; the SDK takes fractions
			}
			c, f := newFake(t, Options{}, func(w http.ResponseWriter, r *http.Request, n int) {
				w.Header().Set("Content-Type", "application/json")
				if n == 1 {
					w.Header().Set(header, value)
					w.WriteHeader(http.StatusTooManyRequests)
					io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
					return
				}
				io.WriteString(w, okText)
			})
			resp, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text() != "ok" {
				t.Errorf("text = %q", resp.Text())
			}
			if n := len(f.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

func TestRateLimitWithoutRetriesIsTemporary(t *testing.T) {
	c, f := newFake(t, Options{MaxRetries: -1}, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("retry-after-ms", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	})
	_, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil)
	var pe *agent.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *agent.ProviderError", err)
	}
	if pe.StatusCode != 429 || pe.Type != "rate_limit_error" || !pe.Temporary() {
		t.Errorf("error = %+v, want a temporary 429 rate_limit_error", pe)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestConnectionErrorWrapped(t *testing.T) {
	c := New(Options{Model: "m", APIKey: "k", MaxRetries: -1, HTTPClient: &http.Client{
		Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("dial refused") }),
	}})
	_, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil)
	var pe *agent.ProviderError
	if err == nil || errors.As(err, &pe) {
		t.Errorf("err = %v, want a plain wrapped error", err)
	}
}
