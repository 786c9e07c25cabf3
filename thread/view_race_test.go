package thread_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func TestViewRacesAppendsAndCompactions(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	must(t, err)
	chat(t, th, 100)
	var wg sync.WaitGroup
	sum := &fakeSummarizer{}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				if g%2 == 0 {
					_, err := th.Append(ctx, message.User("more "+strings.Repeat("x ", 20)))
					must(t, err)
				} else {
					_, err := th.View(ctx, thread.ViewOptions{Budget: 300, Strategies: []thread.Strategy{thread.ElideToolResults{}, thread.Summarize{Summarizer: sum}}})
					if err != nil && !errors.Is(err, thread.ErrConflict) {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("summaries %d", sum.calls.Load())
}
