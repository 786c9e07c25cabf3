package thread_test

import (
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/tokens"
)

// the count of an elided message is cached under id+"\x00elided" and
// fingerprinted by size only: a second Stub of the same length reuses the
// first stub's count.
func TestViewStubCountNotCached(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	_, err = th.Append(ctx, message.User("Weather?"), message.ToolCall("c1", "weather", `{}`),
		message.ToolResult("c1", strings.Repeat("sunny and warm ", 200)), message.User("Thanks"))
	must(t, err)
	s1 := strings.Repeat("x", 60)
	s2 := strings.Repeat("a ", 30)
	counter := tokens.NewCounter(nil)
	for _, stub := range []string{s1, s2} {
		v, err := th.View(ctx, thread.ViewOptions{Budget: 40, Counter: counter,
			Strategies: []thread.Strategy{thread.ElideToolResults{Stub: stub}}})
		if err != nil {
			t.Logf("stub %q: %v", stub[:4], err)
			continue
		}
		real := tokens.NewCounter(nil).CountRequest(v.Messages, tokens.O200kBase)
		t.Logf("stub %q: view says %d tokens, real %d, elided %v", stub[:4], v.Tokens, real, v.Elided)
		if real != v.Tokens || real > 40 {
			t.Errorf("view says %d tokens, real %d (budget 60)", v.Tokens, real)
		}
	}
}
