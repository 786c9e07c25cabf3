package openai

import (
	"net/http"
	"testing"

	"github.com/loomthreads/loom/message"
)

// An OpenAI-compatible server such as Ollama needs only a base URL.
func TestCompatibleServerWithoutKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, 200, `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"llama3.2",
			"system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":26,"completion_tokens":3,"total_tokens":29}}`)
	})
	chat := NewChat(Options{Model: "llama3.2", BaseURL: srv.URL + "/v1"})
	resp, err := chat.Response(t.Context(), []message.Message{message.User("hi")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hello!" || resp.Model != "llama3.2" || resp.Usage.TotalTokens != 29 {
		t.Errorf("response = %+v", resp)
	}
	req := srv.last(t)
	if got := req.Header.Get("Authorization"); got != "Bearer "+placeholderKey {
		t.Errorf("Authorization = %q, want the placeholder key", got)
	}
	if req.Body["model"] != "llama3.2" {
		t.Errorf("model = %v", req.Body["model"])
	}
}

func TestAPIKeySources(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	tests := []struct {
		name, env, key, want string
	}{
		{"environment", "sk-env", "", "Bearer sk-env"},
		{"options win", "sk-env", "sk-opt", "Bearer sk-opt"},
	}
	for _, tt := range tests {
		t.Setenv("OPENAI_API_KEY", tt.env)
		o := srv.options()
		o.APIKey = tt.key
		if _, err := NewChat(o).Response(t.Context(), []message.Message{message.User("hi")}, nil); err != nil {
			t.Fatal(err)
		}
		if got := srv.last(t).Header.Get("Authorization"); got != tt.want {
			t.Errorf("%s: Authorization = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestBaseURLFromEnvironment(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	if _, err := NewChat(Options{Model: "m", MaxRetries: -1}).Response(t.Context(), []message.Message{message.User("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	req := srv.last(t)
	if req.Path != "/v1/chat/completions" || req.Header.Get("Authorization") != "Bearer "+placeholderKey {
		t.Errorf("request = %s with %q", req.Path, req.Header.Get("Authorization"))
	}
}

func TestConstructorsMakeNoRequest(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {})
	NewChat(srv.options())
	NewResponses(ResponsesOptions{Options: srv.options()})
	NewResponses(ResponsesOptions{Options: srv.options(), Conversations: true})
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestHTTPClientUsed(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, string(testdata(t, "chat_tools.json")))
	})
	var used bool
	o := srv.options()
	o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	if _, err := NewChat(o).Response(t.Context(), []message.Message{message.User("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	if !used {
		t.Error("Options.HTTPClient was not used")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
