package foundry

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/foundrytest"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func currentClient(t *testing.T, url string, opts Options) *Current {
	t.Helper()
	opts.Endpoint, opts.Agent = url, "trip-planner"
	if opts.APIKey == "" && opts.Credential == nil {
		opts.APIKey = "key-1"
	}
	c, err := NewCurrent(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The current protocol: a loom thread becomes a conversation on its first
// run, the agent is named by reference (and no model), its tool calls go
// round through loom's tools, polled and streamed.
func TestCurrentServiceThread(t *testing.T) {
	srv, ts := foundrytest.NewCurrent(t)
	srv.APIKey = "key-1"
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	for _, stream := range []bool{false, true} {
		a := agent.New(currentClient(t, ts.URL, Options{}), &agent.Options{Tools: []agent.Tool{weatherTool(t)}})
		th, err := a.NewThread(ctx, db, thread.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		run := func(text string) {
			t.Helper()
			if stream {
				var deltas []string
				for u, err := range a.RunStream(ctx, th, message.User(text)) {
					if err != nil {
						t.Fatal(err)
					}
					if u.Update != nil && u.Update.Text != "" {
						deltas = append(deltas, u.Update.Text)
					}
				}
				if len(deltas) < 2 {
					t.Fatalf("streamed %q: want the answer in pieces", deltas)
				}
				return
			}
			if _, err := a.Run(ctx, th, message.User(text)); err != nil {
				t.Fatal(err)
			}
		}
		run("hello")
		run("what is the weather?")
		id, err := agent.ServiceID(ctx, th)
		if err != nil || !strings.HasPrefix(id, "conv_") || th.Kind() != thread.KindService {
			t.Fatalf("service id %q (%v), kind %s", id, err, th.Kind())
		}
		msgs, _ := th.Messages(ctx, thread.ReadOptions{})
		want := []string{"user: hello", "assistant: You said: hello", "user: what is the weather?", "assistant:  call get_weather", "tool:  result sunny in Paris", "assistant: The weather: sunny in Paris"}
		if got := texts(msgs); !slices.Equal(got, want) {
			t.Fatalf("stream %v: %q", stream, got)
		}
		if _, err := th.Fork(ctx, thread.ForkOptions{}); !errors.Is(err, thread.ErrUnsupported) {
			t.Fatalf("fork: %v", err)
		}
	}
}

// Entra ID tokens are kept for their life; 429 is retried.
func TestCurrentTokensAndThrottling(t *testing.T) {
	srv, ts := foundrytest.NewCurrent(t)
	clock := newClock()
	cred := &foundrytest.Credential{TTL: time.Hour, Now: clock.now}
	srv.Cred = cred
	c := currentClient(t, ts.URL, Options{Credential: cred})
	c.t.tokens.now = clock.now
	ctx := t.Context()
	for range 3 {
		if _, err := c.Response(ctx, []message.Message{message.User("hi")}, &agent.ChatOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if cred.Calls() != 1 {
		t.Fatalf("%d tokens for three requests", cred.Calls())
	}
	srv.Throttle(1, 30)
	if _, err := c.Response(ctx, []message.Message{message.User("hi")}, &agent.ChatOptions{}); err != nil || len(srv.ThrottledAt()) != 1 {
		t.Fatalf("after a 429: %v, %d throttled", err, len(srv.ThrottledAt()))
	}
	bad := currentClient(t, ts.URL, Options{APIKey: "wrong"})
	var pe *agent.ProviderError
	if _, err := bad.Response(ctx, []message.Message{message.User("hi")}, &agent.ChatOptions{}); !errors.As(err, &pe) || pe.StatusCode != 401 || !strings.Contains(pe.Message, "(request req_") {
		t.Fatalf("a wrong key: %v", err)
	}
}

// A conversation's messages are read a page at a time, and it can be
// deleted; a token is replaced before it expires.
func TestCurrentMessagesDeleteAndRefresh(t *testing.T) {
	srv, ts := foundrytest.NewCurrent(t)
	clock := newClock()
	cred := &foundrytest.Credential{TTL: time.Hour, Now: clock.now}
	srv.Cred = cred
	c := currentClient(t, ts.URL, Options{Credential: cred})
	c.t.tokens.now = clock.now
	ctx := t.Context()
	a := agent.New(c, nil)
	th, _ := a.NewThread(ctx, thread.New(thread.NewMemoryStore(), nil), thread.CreateOptions{})
	for _, s := range []string{"one", "two"} {
		if _, err := a.Run(ctx, th, message.User(s)); err != nil {
			t.Fatal(err)
		}
	}
	id, _ := agent.ServiceID(ctx, th)
	var got []string
	for m, err := range c.Messages(ctx, id, MessagesOptions{PageSize: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Role)+": "+m.Text())
	}
	if !slices.Equal(got, []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two"}) {
		t.Fatalf("items: %q", got)
	}
	if cred.Calls() != 1 {
		t.Fatalf("%d tokens", cred.Calls())
	}
	clock.add(59 * time.Minute)
	if err := c.DeleteConversation(ctx, id); err != nil {
		t.Fatal(err)
	}
	if cred.Calls() != 2 {
		t.Fatalf("%d tokens after the first came close to expiring", cred.Calls())
	}
	var pe *agent.ProviderError
	for _, err := range c.Messages(ctx, id, MessagesOptions{}) {
		if !errors.As(err, &pe) || pe.StatusCode != 404 || pe.Type != "not_found" {
			t.Fatalf("a deleted conversation: %v", err)
		}
		break
	}
}
