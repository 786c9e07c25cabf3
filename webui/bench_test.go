package webui_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkOpenPage measures what a person waits for in headless Chromium,
// on SQLite: from navigating to the page to its content on screen — the
// threads page of a 10,000-thread store (its first 50 rows), and the page
// of a 100,000-message thread (its newest messages, history and fork
// tree). Each iteration loads the page afresh, in a new tab.
func BenchmarkOpenPage(b *testing.B) {
	e := newEnv(b, nil)
	ctx := context.Background()
	g := e.db.Group()
	for i := range 10_000 {
		if _, err := g.Create(ctx, thread.CreateOptions{ID: fmt.Sprintf("t%05d", i), Title: "a thread", Labels: map[string]string{"team": "bench"},
			Messages: []message.Message{message.User("hello")}}); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 {
			if err := g.Apply(ctx); err != nil {
				b.Fatal(err)
			}
			g = e.db.Group()
		}
	}
	big, err := e.db.Create(ctx, thread.CreateOptions{ID: "big", Title: "a long thread"})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]message.Message, 1000)
	for range 100 {
		for i := range batch {
			batch[i] = message.User(fmt.Sprintf("message %d of a long thread", i))
		}
		if _, err := big.Append(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := big.Fork(ctx, thread.ForkOptions{ID: "big-fork"}); err != nil {
		b.Fatal(err)
	}
	browser := newBrowser(b)
	open := func(url, ready string) func(b *testing.B) {
		return func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				// A new tab each time: in one tab the change feeds of the
				// earlier opens could hold all six of the browser's
				// connections to the server, and the next open waits forever.
				tabCtx, cancel := chromedp.NewContext(browser)
				if err := chromedp.Do(tabCtx, chromedp.Navigate("about:blank")); err != nil {
					cancel()
					b.Fatal(err)
				}
				start := time.Now()
				err := chromedp.Do(tabCtx, chromedp.Navigate(url),
					pollJS(ready, 30*time.Second, 2*time.Millisecond))
				total += time.Since(start)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/open")
		}
	}
	b.Run("threads-of-10k", open(e.url+"/#/threads", `document.querySelectorAll('tbody tr a').length >= 50`))
	b.Run("thread-of-100k-messages", open(e.url+"/#/threads/big",
		`document.querySelector('#messages')?.innerText.includes('message 999 of a long thread') && document.querySelectorAll('svg a').length >= 2`))
}
