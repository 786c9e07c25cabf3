package thread_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// a thread whose first commit has no messages (Create with State, or
// SetState before the first Append) makes every view that reads to the root hang.
func TestViewStateOnlyFirstCommit(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{State: map[string]json.RawMessage{"k": json.RawMessage(`1`)}})
	must(t, err)
	_, err = th.Append(ctx, message.User("hi"), message.Assistant("hello"))
	must(t, err)
	done := make(chan error, 1)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	go func() { _, err := th.View(cctx, thread.ViewOptions{}); done <- err }()
	select {
	case err := <-done:
		t.Logf("view returned %v", err)
	case <-time.After(3 * time.Second):
		t.Fatal("View(zero options) hangs, even past its context deadline")
	}
}

// when the newest Keep units alone do not fit, every view summarizes and
// commits again, even with nothing new in the thread.
func TestViewDoesNotResummarizeUnchangedThread(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	long := strings.Repeat("It is sunny and warm in Paris. ", 20)
	for i := range 30 {
		_, err := th.Append(ctx, message.User(fmt.Sprintf("Question %d?", i)), message.Assistant(long))
		must(t, err)
	}
	sum := &fakeSummarizer{}
	opts := thread.ViewOptions{Budget: 250, Strategies: []thread.Strategy{thread.Summarize{Summarizer: sum, Keep: 4}}}
	for i := range 5 {
		v, err := th.View(ctx, opts)
		must(t, err)
		t.Logf("view %d: %d msgs %d tokens, version %d, summaries %d, compacted %s", i, len(v.Messages), v.Tokens, th.Version(), sum.calls.Load(), v.Compacted)
	}
	if n := sum.calls.Load(); n != 1 {
		t.Fatalf("5 views of an unchanged thread called the summarizer %d times (and committed %d compactions)", n, n)
	}
}

// an old system message beyond the window is not mandatory for a plain
// view, but compaction pulls it into the compact commit: the view that
// compacted (and every later one) is then ErrOverBudget.
func TestCompactionKeepsViewWithinBudget(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	_, err = th.Append(ctx, message.System(strings.Repeat("Long rules. ", 300)))
	must(t, err)
	chat(t, th, 200)
	plain, err := th.View(ctx, thread.ViewOptions{Budget: 500})
	must(t, err)
	t.Logf("plain view: %d messages, %d tokens", len(plain.Messages), plain.Tokens)
	sum := &fakeSummarizer{}
	before := th.Version()
	_, err = th.View(ctx, thread.ViewOptions{Budget: 500, Strategies: []thread.Strategy{thread.Summarize{Summarizer: sum}}})
	if err != nil {
		t.Fatalf("summarizing view: %v (version %d -> %d: compaction committed anyway)", err, before, th.Version())
	}
}

// a call id reused across turns (providers such as Ollama/Gemini adapters
// number calls per response) binds the second result to the first call: the
// second call is its own unit and is kept without its result.
func TestViewReusedCallID(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	c, err := th.Append(ctx,
		message.User("Weather in Paris?"),
		message.ToolCall("call_0", "weather", `{"city":"Paris"}`),
		message.ToolResult("call_0", strings.Repeat("sunny ", 200)),
		message.User("And Lima?"),
		message.ToolCall("call_0", "weather", `{"city":"Lima"}`),
		message.ToolResult("call_0", "warm"),
		message.User("Thanks"),
	)
	must(t, err)
	full, err := th.View(ctx, thread.ViewOptions{})
	must(t, err)
	v, err := th.View(ctx, thread.ViewOptions{Budget: full.Tokens - 20})
	must(t, err)
	for _, m := range v.Messages {
		t.Logf("%s %v calls=%d results=%d", m.Role, m.Text(), len(m.Calls()), len(m.Results()))
	}
	for i, m := range v.Messages {
		if m.ID == c.Messages[4].ID && (i+1 >= len(v.Messages) || v.Messages[i+1].ID != c.Messages[5].ID) {
			t.Fatal("second call_0 kept without its result")
		}
	}
}
