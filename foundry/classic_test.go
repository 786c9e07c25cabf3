package foundry

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/foundrytest"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func classicClient(t *testing.T, url string, opts ClassicOptions) *Classic {
	t.Helper()
	opts.Endpoint, opts.Agent = url, "asst_1"
	if opts.APIKey == "" && opts.Credential == nil {
		opts.APIKey = "key-1"
	}
	opts.PollInterval = time.Millisecond
	c, err := NewClassic(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clock is a test's clock, for tokens that expire: it moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func weatherTool(t *testing.T) agent.Tool {
	tool, err := agent.NewFunc("get_weather", "the weather in a city", func(ctx context.Context, in struct {
		City string `json:"city"`
	}) (string, error) {
		return "sunny in " + in.City, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func texts(msgs []message.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role) + ": " + m.Text()
		for _, c := range m.Calls() {
			s += " call " + c.Name
		}
		for _, r := range m.Results() {
			s += " result " + r.Result
		}
		out = append(out, s)
	}
	return out
}

// A loom thread becomes a Foundry thread on its first run; the service's
// messages are mirrored into its commits; later runs use the same thread.
func TestClassicServiceThread(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	for _, stream := range []bool{false, true} {
		a := agent.New(classicClient(t, ts.URL, ClassicOptions{}), nil)
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
		if th.Kind() != thread.KindService {
			t.Fatalf("kind %s after the first run", th.Kind())
		}
		id, err := agent.ServiceID(ctx, th)
		if err != nil || !strings.HasPrefix(id, "thread_") {
			t.Fatalf("service id %q, %v", id, err)
		}
		run("again")
		msgs, _ := th.Messages(ctx, thread.ReadOptions{})
		if got := texts(msgs); !slices.Equal(got, []string{"user: hello", "assistant: You said: hello", "user: again", "assistant: You said: again"}) {
			t.Fatalf("mirrored (stream %v): %q", stream, got)
		}
		if n := srv.ThreadLen(id); n != 4 {
			t.Fatalf("the service's thread holds %d messages", n)
		}
		// One linear thread: no fork, no rollback.
		if _, err := th.Fork(ctx, thread.ForkOptions{}); !errors.Is(err, thread.ErrUnsupported) {
			t.Fatalf("fork: %v", err)
		}
	}
	if v := srv.APIVersions(); !slices.Equal(v, []string{"v1"}) {
		t.Fatalf("api versions sent: %v", v)
	}
}

// A run that asks for a tool gets loom's tool's output, in the same run,
// polled and streamed.
func TestClassicToolRoundTrip(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	for _, stream := range []bool{false, true} {
		a := agent.New(classicClient(t, ts.URL, ClassicOptions{}), &agent.Options{Tools: []agent.Tool{weatherTool(t)}})
		th, _ := a.NewThread(ctx, db, thread.CreateOptions{})
		if stream {
			for _, err := range a.RunStream(ctx, th, message.User("what is the weather?")) {
				if err != nil {
					t.Fatal(err)
				}
			}
		} else if _, err := a.Run(ctx, th, message.User("what is the weather?")); err != nil {
			t.Fatal(err)
		}
		msgs, _ := th.Messages(ctx, thread.ReadOptions{})
		// What the run wrote before it asked comes before the call.
		want := []string{"user: what is the weather?", "assistant: Let me look.", "assistant:  call get_weather", "tool:  result sunny in Paris", "assistant: The weather: sunny in Paris"}
		if got := texts(msgs); !slices.Equal(got, want) {
			t.Fatalf("stream %v: %q", stream, got)
		}
	}
	n := 0
	for _, r := range srv.Requests() {
		if strings.HasSuffix(r, "/submit_tool_outputs") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d tool outputs submitted, want 2: %v", n, srv.Requests())
	}
}

// An existing Foundry thread is adopted by id and continued; its messages
// are read a page at a time with the service's cursors.
func TestClassicAdoptAndPage(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	ctx := t.Context()
	c := classicClient(t, ts.URL, ClassicOptions{})
	old := srv.CreateThread("one", "two", "three")
	var got []string
	before := len(srv.Requests())
	for m, err := range c.Messages(ctx, old, MessagesOptions{PageSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Text())
	}
	if !slices.Equal(got, []string{"one", "two", "three"}) || len(srv.Requests())-before != 2 {
		t.Fatalf("paged: %q in %d requests", got, len(srv.Requests())-before)
	}
	a := agent.New(c, nil)
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := a.NewServiceThread(ctx, db, old, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, th, message.User("four"))
	if err != nil || res.Text() != "You said: four" {
		t.Fatalf("adopted run: %v %v", res, err)
	}
	if err := c.DeleteThread(ctx, old); err != nil {
		t.Fatal(err)
	}
	if srv.ThreadLen(old) != -1 {
		t.Fatal("the thread was not deleted")
	}
}

// Errors carry the service's code and request id; a failed run its
// last_error.
func TestClassicErrors(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	ctx := t.Context()
	c := classicClient(t, ts.URL, ClassicOptions{})
	_, err := c.Response(ctx, []message.Message{message.User("hi")}, &agent.ChatOptions{ConversationID: "thread_nope"})
	var pe *agent.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 404 || pe.Type != "not_found" || !strings.Contains(pe.Message, "(request req_") {
		t.Fatalf("unknown thread: %#v", err)
	}
	_, err = c.Response(ctx, []message.Message{message.User("please fail")}, nil)
	if !errors.As(err, &pe) || pe.Type != "server_error" || !strings.Contains(pe.Message, "Sorry") {
		t.Fatalf("failed run: %v", err)
	}
	bad := classicClient(t, ts.URL, ClassicOptions{APIKey: "wrong"})
	if _, err := bad.Response(ctx, []message.Message{message.User("hi")}, nil); !errors.As(err, &pe) || pe.StatusCode != 401 || pe.Type != "PermissionDenied" {
		t.Fatalf("a wrong key: %v", err)
	}
	if _, err := NewClassic(ClassicOptions{Endpoint: ts.URL}); err == nil {
		t.Fatal("no agent, no error")
	}
}

// Entra ID tokens are kept until shortly before they expire, then
// replaced; a token the service refuses is replaced once at once.
func TestClassicTokens(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	clock := newClock()
	cred := &foundrytest.Credential{TTL: time.Hour, Now: clock.now}
	srv.Cred = cred
	c := classicClient(t, ts.URL, ClassicOptions{Credential: cred})
	c.t.tokens.now = clock.now
	ctx := t.Context()
	for range 3 {
		if _, err := c.Response(ctx, []message.Message{message.User("hi")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if cred.Calls() != 1 {
		t.Fatalf("%d tokens for requests within one token's life", cred.Calls())
	}
	clock.add(59 * time.Minute) // within refreshBefore of its expiry
	if _, err := c.Response(ctx, []message.Message{message.User("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	if cred.Calls() != 2 {
		t.Fatalf("%d tokens: want one more before the first expired", cred.Calls())
	}
	// The service refuses the token (revoked): a new one, at once.
	cred.Revoke()
	if _, err := c.Response(ctx, []message.Message{message.User("hi")}, nil); err != nil {
		t.Fatalf("after a refused token: %v", err)
	}
	if cred.Calls() != 3 {
		t.Fatalf("%d tokens after a refusal", cred.Calls())
	}
}

// 429 is retried after the service's retry-after-ms.
func TestClassicRetriesThrottled(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	srv.Throttle(2, 40)
	c := classicClient(t, ts.URL, ClassicOptions{})
	start := time.Now()
	res, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil)
	if err != nil || res.Text() != "You said: hi" {
		t.Fatalf("after throttling: %v %v", res, err)
	}
	if d := time.Since(start); d < 80*time.Millisecond || len(srv.ThrottledAt()) != 2 {
		t.Fatalf("%d throttled, done in %v: want two waits of 40 ms", len(srv.ThrottledAt()), d)
	}
	srv.Throttle(10, 40)
	c2 := classicClient(t, ts.URL, ClassicOptions{MaxRetries: 1})
	var pe *agent.ProviderError
	if _, err := c2.Response(t.Context(), []message.Message{message.User("hi")}, nil); !errors.As(err, &pe) || pe.StatusCode != 429 || !pe.Temporary() {
		t.Fatalf("throttled past the retries: %v", err)
	}
}

// A thread on a Foundry thread is not copied within its store either: the
// copy would share one linear conversation.
func TestClassicThreadIsNotCopied(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	ctx := t.Context()
	a := agent.New(classicClient(t, ts.URL, ClassicOptions{}), nil)
	th, _ := a.NewThread(ctx, thread.New(thread.NewMemoryStore(), nil), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Copy(ctx, thread.ForkOptions{}); !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("copy: %v", err)
	}
	if err := th.Restore(ctx, th.Version()); !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("restore: %v", err)
	}
}

// A run waiting for tool outputs takes them and nothing else; one that
// the service expired meanwhile gets them as a message, in a new run.
func TestClassicWaitingRun(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	ctx := t.Context()
	c := classicClient(t, ts.URL, ClassicOptions{})
	tools := []agent.ToolSpec{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	resp, err := c.Response(ctx, []message.Message{message.User("the weather?")}, &agent.ChatOptions{Tools: tools})
	if err != nil || resp.FinishReason != agent.FinishToolCalls || !strings.Contains(resp.ConversationID, "|") {
		t.Fatalf("first: %+v %v", resp, err)
	}
	calls := resp.Calls()
	threadID := ThreadID(resp.ConversationID)
	n := srv.ThreadLen(threadID)
	// New messages with (or without) the results: refused, nothing sent.
	_, err = c.Response(ctx, []message.Message{message.ToolResult(calls[0].CallID, "sunny"), message.User("and hello")},
		&agent.ChatOptions{ConversationID: resp.ConversationID, Tools: tools})
	if !errors.Is(err, thread.ErrUnsupported) || srv.ThreadLen(threadID) != n {
		t.Fatalf("messages for a waiting run: %v, thread %d → %d", err, n, srv.ThreadLen(threadID))
	}
	// The id with its run reads the thread.
	var got []string
	for m, err := range c.Messages(ctx, resp.ConversationID, MessagesOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Text())
	}
	if len(got) != n {
		t.Fatalf("messages by the waiting id: %q", got)
	}
	// The service expires the run: the results go as a message.
	srv.ExpireRuns()
	resp2, err := c.Response(ctx, []message.Message{message.ToolResult(calls[0].CallID, "sunny")},
		&agent.ChatOptions{ConversationID: resp.ConversationID})
	if err != nil || resp2.ConversationID != threadID || !strings.Contains(resp2.Text(), "results of the tool calls") {
		t.Fatalf("after the run expired: %+v %v", resp2, err)
	}
}

// A POST the service failed with a 5xx is not sent again (it may have
// been done); a wait longer than a minute is not waited.
func TestClassicRetryLimits(t *testing.T) {
	srv, ts := foundrytest.NewClassic(t)
	srv.APIKey = "key-1"
	c := classicClient(t, ts.URL, ClassicOptions{})
	srv.Fail(1, 504)
	before := len(srv.Requests())
	var pe *agent.ProviderError
	if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil); !errors.As(err, &pe) || pe.StatusCode != 504 {
		t.Fatalf("a 504: %v", err)
	}
	if n := len(srv.Requests()) - before; n != 1 {
		t.Fatalf("a POST that failed with 504 was sent %d times", n)
	}
	srv.Throttle(1, 0)
	srv.RetryAfter(3600)
	start := time.Now()
	if _, err := c.Response(t.Context(), []message.Message{message.User("hi")}, nil); !errors.As(err, &pe) || pe.StatusCode != 429 || time.Since(start) > 5*time.Second {
		t.Fatalf("an hour's Retry-After: %v after %v", err, time.Since(start))
	}
}
